package cpu

import "github.com/ag-go/ag/backend"

// bcast is a broadcast iteration plan: the output shape with size-1 axes
// dropped and adjacent axes merged wherever both inputs stay contiguous
// across them, padded on the left to 4 axes. [M,N] + [N] becomes rows of N
// with strides (N,1) and (0,1): the inner loop is then always one of a few
// contiguous or scalar patterns.
type bcast struct {
	shape  [4]int
	sa, sb [4]int // element strides of the inputs per output axis (0: broadcast)
	rows   int    // shape[0]*shape[1]*shape[2]
	inner  int    // shape[3]
}

// newBcast plans reading a (shape as) and b (shape bs) as out. bs may be nil
// for a single-input broadcast (OpExpand).
func newBcast(out, as, bs []int) bcast {
	sa := backend.BroadcastStrides(as, out)
	sb := make([]int, len(out))
	if bs != nil {
		sb = backend.BroadcastStrides(bs, out)
	}
	type ax struct{ n, a, b int }
	var axes []ax
	for i, d := range out {
		if d == 1 {
			continue
		}
		if k := len(axes) - 1; k >= 0 {
			last := &axes[k]
			if last.a == sa[i]*d && last.b == sb[i]*d {
				last.n *= d
				last.a, last.b = sa[i], sb[i]
				continue
			}
		}
		axes = append(axes, ax{d, sa[i], sb[i]})
	}
	// More than 4 merged axes cannot happen: out has at most 4.
	var p bcast
	for i := range p.shape {
		p.shape[i] = 1
	}
	off := 4 - len(axes)
	for i, a := range axes {
		p.shape[off+i], p.sa[off+i], p.sb[off+i] = a.n, a.a, a.b
	}
	p.rows = p.shape[0] * p.shape[1] * p.shape[2]
	p.inner = p.shape[3]
	return p
}

// rowOffsets returns the input offsets of output row r (of p.rows).
func (p *bcast) rowOffsets(r int) (oa, ob int) {
	i2 := r % p.shape[2]
	r /= p.shape[2]
	i1 := r % p.shape[1]
	i0 := r / p.shape[1]
	oa = i0*p.sa[0] + i1*p.sa[1] + i2*p.sa[2]
	ob = i0*p.sb[0] + i1*p.sb[1] + i2*p.sb[2]
	return oa, ob
}
