package cpu

import (
	"math"

	"github.com/ag-go/ag/backend"
)

// rowIndex turns an f32 index into a row number in 0..rows-1: rounded to
// the nearest whole number, clamped, NaN to 0, so that no index value can
// read or write outside a table.
func rowIndex(v float32, rows int) int {
	f := math.Round(float64(v))
	switch {
	case f != f || f <= 0:
		return 0
	case f >= float64(rows-1):
		return rows - 1
	}
	return int(f)
}

// permutePlan gathers out[i0,i1,i2,i3] = in[sum ik*stride[k]], with the
// shapes padded to 4 axes.
type permutePlan struct {
	shape  [4]int
	stride [4]int // input stride per output axis
}

func newPermute(in []int, perm []int) permutePlan {
	var p permutePlan
	for i := range p.shape {
		p.shape[i] = 1
	}
	st := backend.Strides(in)
	off := 4 - len(perm)
	for i, ax := range perm {
		p.shape[off+i] = in[ax]
		p.stride[off+i] = st[ax]
	}
	return p
}

// run writes output rows lo..hi (of shape[0]*shape[1]*shape[2]).
func (p *permutePlan) run(o, x []float32, lo, hi int) {
	n3, s3 := p.shape[3], p.stride[3]
	for r := lo; r < hi; r++ {
		i2 := r % p.shape[2]
		i1 := (r / p.shape[2]) % p.shape[1]
		i0 := r / (p.shape[2] * p.shape[1])
		base := i0*p.stride[0] + i1*p.stride[1] + i2*p.stride[2]
		dst := o[r*n3 : (r+1)*n3]
		if s3 == 1 {
			copy(dst, x[base:base+n3])
			continue
		}
		for j := range dst {
			dst[j] = x[base+j*s3]
		}
	}
}

// getRows copies table rows idx[i] into o[i].
func getRows(o, table, idx []float32, width, rows int) {
	for i, v := range idx {
		r := rowIndex(v, rows)
		copy(o[i*width:(i+1)*width], table[r*width:(r+1)*width])
	}
}

// scatterAddRows zeroes o ([rows, width]) and adds src row i into row idx[i].
func scatterAddRows(o, src, idx []float32, width, rows int) {
	clear(o)
	for i, v := range idx {
		r := rowIndex(v, rows)
		dst := o[r*width : (r+1)*width]
		s := src[i*width : (i+1)*width]
		for j, x := range s[:len(dst)] {
			dst[j] += x
		}
	}
}

// oneHot writes [n, classes] rows with a 1 at each clamped index.
func oneHot(o, idx []float32, classes int) {
	clear(o)
	for i, v := range idx {
		o[i*classes+rowIndex(v, classes)] = 1
	}
}
