package cpu

import (
	"math"

	"github.com/ag-go/ag/backend"
)

// attention computes OpAttention for queries (rows of batch x Tq) lo..hi:
// the scores of the attended keys into a row of scratch, their softmax in
// float64 as softmaxRows does, then the weighted sum of v rows. Nothing of
// size Tq x Tk is stored.
type attention struct {
	tq, tk, d, dv int
	scale         float32
	scores        []int // the shape of the scores, [..., Tq, Tk]
	keepStrides   []int // keep's strides broadcast to scores
}

func newAttention(n *backend.Node, q, k, v, keep []int) *attention {
	r := len(q)
	a := &attention{tq: q[r-2], d: q[r-1], tk: k[r-2], dv: v[r-1], scale: n.A}
	a.scores = append(append([]int(nil), q[:r-1]...), a.tk)
	a.keepStrides = backend.BroadcastStrides(keep, a.scores)
	return a
}

func (a *attention) run(out, q, k, v, keep []float32, lo, hi int) {
	s := make([]float32, a.tk)
	att := make([]bool, a.tk)
	acc := make([]float64, a.dv)
	r := len(a.scores)
	for row := lo; row < hi; row++ {
		b := row / a.tq
		qi := q[row*a.d:][:a.d]
		// keep's offset of (b, i, 0) and its step along the keys
		base := 0
		rest := row
		for ax := r - 2; ax >= 0; ax-- {
			base += (rest % a.scores[ax]) * a.keepStrides[ax]
			rest /= a.scores[ax]
		}
		step := a.keepStrides[r-1]
		mx := float32(math.Inf(-1))
		any := false
		for j := range a.tk {
			att[j] = keep[base+j*step] != 0 // NaN attends
			if !att[j] {
				continue
			}
			kj := k[(b*a.tk+j)*a.d:][:a.d]
			var dot float32
			for c, x := range qi {
				dot += x * kj[c]
			}
			s[j] = a.scale * dot
			mx = max(mx, s[j]) // NaN propagates
			any = true
		}
		o := out[row*a.dv:][:a.dv]
		if !any {
			clear(o)
			continue
		}
		clear(acc)
		var sum float64
		m := float64(mx)
		for j := range a.tk {
			if !att[j] {
				continue
			}
			e := math.Exp(float64(s[j]) - m)
			sum += e
			for c, x := range v[(b*a.tk+j)*a.dv:][:a.dv] {
				acc[c] += e * float64(x)
			}
		}
		inv := 1 / sum
		for c := range o {
			o[c] = float32(acc[c] * inv)
		}
	}
}
