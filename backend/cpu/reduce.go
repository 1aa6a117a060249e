package cpu

import (
	"math"
)

// Reductions view the input as [outer, n, inner] around the reduced axis.

// sumRow returns the sum of x with four accumulators (shorter dependency
// chains run faster and round less than one running sum).
func sumRow(x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s0 += v[0]
		s1 += v[1]
		s2 += v[2]
		s3 += v[3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// maxRow returns the maximum of x; NaN if any element is NaN.
func maxRow(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		if v > m || v != v {
			m = v
			if v != v {
				return v
			}
		}
	}
	return m
}

// reduceRows reduces rows lo..hi of a [outer, n, inner] input with inner == 1.
func reduceRows(isMax bool, o, x []float32, n, lo, hi int) {
	for r := lo; r < hi; r++ {
		row := x[r*n : (r+1)*n]
		if isMax {
			o[r] = maxRow(row)
		} else {
			o[r] = sumRow(row)
		}
	}
}

// reduceCols reduces outer block ob, columns j0..j1 of a [outer, n, inner]
// input: o[ob, j] = reduce over k of x[ob, k, j], streaming rows so that
// both reads and writes are contiguous.
func reduceCols(isMax bool, o, x []float32, n, inner, ob, j0, j1 int) {
	dst := o[ob*inner+j0 : ob*inner+j1]
	base := ob * n * inner
	copy(dst, x[base+j0:base+j1])
	for k := 1; k < n; k++ {
		src := x[base+k*inner+j0 : base+k*inner+j1]
		src = src[:len(dst)]
		if isMax {
			for j, v := range src {
				if v > dst[j] || v != v { // once NaN, dst[j] stays NaN
					dst[j] = v
				}
			}
		} else {
			for j, v := range src {
				dst[j] += v
			}
		}
	}
}

// softmaxRows computes softmax (or log-softmax) of rows lo..hi of length n.
// Subtracting the row max first keeps exp from overflowing.
func softmaxRows(log bool, o, x []float32, n, lo, hi int) {
	for r := lo; r < hi; r++ {
		row := x[r*n : (r+1)*n]
		out := o[r*n : (r+1)*n]
		out = out[:len(row)]
		m := float64(maxRow(row))
		var s float64
		if log {
			for _, v := range row {
				s += math.Exp(float64(v) - m)
			}
			ls := m + math.Log(s)
			for j, v := range row {
				out[j] = float32(float64(v) - ls)
			}
			continue
		}
		for j, v := range row {
			e := math.Exp(float64(v) - m)
			out[j] = float32(e)
			s += e
		}
		inv := 1 / s
		for j := range out {
			out[j] = float32(float64(out[j]) * inv)
		}
	}
}
