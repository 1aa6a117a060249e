package cpu

import (
	"math"
)

// Reductions view the input as [outer, n, inner] around the reduced axis.

// sumRow returns the sum of x. A float32 running sum drifts by about one
// rounding per term (Sum of 2^25 copies of 0.1 came out 5.7% low), so the
// row is summed in blocks of sumBlock: eight float32 accumulators of eight
// terms each (eight independent dependency chains, no conversions),
// combined pairwise, and the block sums are added in float64. The error is
// then at most about 10*2^-24*sum|x| (7 roundings per accumulator, 3 to
// combine) plus n/64*2^-53*sum|x| and the final rounding, for any n. This
// runs within a few percent of the plain four-accumulator loop; widening
// every element to float64 instead was 2x slower.
func sumRow(x []float32) float32 {
	var s float64
	i := 0
	for ; i+sumBlock <= len(x); i += sumBlock {
		b := x[i : i+sumBlock : i+sumBlock]
		s0, s1, s2, s3, s4, s5, s6, s7 := b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
		for j := 8; j+8 <= len(b); j += 8 {
			v := b[j : j+8 : j+8]
			s0 += v[0]
			s1 += v[1]
			s2 += v[2]
			s3 += v[3]
			s4 += v[4]
			s5 += v[5]
			s6 += v[6]
			s7 += v[7]
		}
		s += float64(((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)))
	}
	for ; i < len(x); i++ {
		s += float64(x[i])
	}
	return float32(s)
}

// sumBlock is the block length of sumRow: eight accumulators of eight terms.
const sumBlock = 64

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
// reads are contiguous.
func reduceCols(isMax bool, o, x []float32, n, inner, ob, j0, j1 int) {
	base := ob * n * inner
	if isMax {
		maxCols(o[ob*inner+j0:ob*inner+j1], x[base+j0:], n, inner)
		return
	}
	for t0 := j0; t0 < j1; t0 += colTile {
		t1 := min(t0+colTile, j1)
		sumCols(o[ob*inner+t0:ob*inner+t1], x[base+t0:], n, inner)
	}
}

// colTile is how many columns sumCols accumulates at once: its float64
// accumulators (4 KB) live on the stack and stay in L1.
const colTile = 512

// sumCols sets dst[j] to the sum over k < n of x[k*inner+j], for len(dst) <=
// colTile. It accumulates in float64 for the reason sumRow does (a bias
// gradient is a column sum over the batch, which may be millions of rows),
// and adds four rows per pass so that each accumulator is loaded and stored
// once per four rows.
func sumCols(dst, x []float32, n, inner int) {
	var acc [colTile]float64
	a := acc[:len(dst)]
	k := 0
	for ; k+4 <= n; k += 4 {
		r0 := x[k*inner:][:len(a)]
		r1 := x[(k+1)*inner:][:len(a)]
		r2 := x[(k+2)*inner:][:len(a)]
		r3 := x[(k+3)*inner:][:len(a)]
		for j := range a {
			a[j] += (float64(r0[j]) + float64(r1[j])) + (float64(r2[j]) + float64(r3[j]))
		}
	}
	for ; k < n; k++ {
		r := x[k*inner:][:len(a)]
		for j := range a {
			a[j] += float64(r[j])
		}
	}
	for j := range dst {
		dst[j] = float32(a[j])
	}
}

// maxCols sets dst[j] to the maximum over k < n of x[k*inner+j]; NaN if any
// is NaN. A maximum is exact, so it runs in place in dst.
func maxCols(dst, x []float32, n, inner int) {
	copy(dst, x[:len(dst)])
	for k := 1; k < n; k++ {
		src := x[k*inner:][:len(dst)]
		for j, v := range src {
			if v > dst[j] || v != v { // once NaN, dst[j] stays NaN
				dst[j] = v
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
