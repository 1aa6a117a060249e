package backendtest

import (
	"math/rand/v2"

	"github.com/ag-go/ag/backend"
)

// Masks of the attention cases: which keys each query attends.
const (
	maskAll     = iota // a keep of ones broadcast from [1, ..., 1]
	maskCausal         // key j <= query i, one [Tq, Tk] for every batch
	maskPadding        // per batch, the first keys only ([B, 1, Tk]); some batches none
	maskRandom         // any pattern, with rows that attend no key
)

// attnInst is one OpAttention of the given sizes with q, k, v in the op's
// domain and a keep of the given kind.
func attnInst(r *rand.Rand, batch []int, tq, tk, d, dv, mask int) instance {
	return attnInstPrec(r, batch, tq, tk, d, dv, mask, false)
}

// attnInstPrec is attnInst at f16 precision where half (B = 1): q, k and v
// hold f16 values, as core's rounds give them.
func attnInstPrec(r *rand.Rand, batch []int, tq, tk, d, dv, mask int, half bool) instance {
	lead := func(s ...int) []int { return append(append([]int(nil), batch...), s...) }
	dom := backend.OpAttention.Info().Domain
	u := func(s []int) []float32 {
		x := uniform(r, backend.NumElems(s), float64(dom[0]), float64(dom[1]))
		if half {
			for i := range x {
				x[i] = backend.RoundF16(x[i])
			}
		}
		return x
	}
	var b builder
	q := b.arg(u(lead(tq, d)), lead(tq, d)...)
	k := b.arg(u(lead(tk, d)), lead(tk, d)...)
	v := b.arg(u(lead(tk, dv)), lead(tk, dv)...)
	ones := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	var ks []int
	var kd []float32
	switch mask {
	case maskAll:
		ks, kd = ones(len(batch)+2), []float32{1}
	case maskCausal:
		ks = append(ones(len(batch)), tq, tk)
		kd = make([]float32, tq*tk)
		for i := range tq {
			for j := 0; j <= i && j < tk; j++ {
				kd[i*tk+j] = 1
			}
		}
	case maskPadding:
		ks = append(append([]int(nil), batch...), 1, tk)
		kd = make([]float32, backend.NumElems(ks))
		for row := 0; row < len(kd)/tk; row++ {
			n := r.IntN(tk + 1) // 0: a batch that attends nothing
			for j := range n {
				kd[row*tk+j] = 1
			}
		}
	case maskRandom:
		ks = lead(tq, tk)
		kd = make([]float32, backend.NumElems(ks))
		for i := range kd {
			if r.IntN(3) > 0 {
				kd[i] = 1
			}
		}
		if len(kd) >= tk {
			clear(kd[:tk]) // the first query attends nothing
		}
	}
	keep := b.arg(kd, ks...)
	scale := float32(1 / float64(d))
	if d > 1 {
		scale = 0.5 / float32(d)
	}
	var prec float32
	if half {
		prec = 1
	}
	b.out(b.node(backend.Node{Op: backend.OpAttention, In: []int{q, k, v, keep}, Shape: lead(tq, dv), A: scale, B: prec}))
	return b.inst(0)
}

// attentionCases cover the sizes a kernel tiles by (1, odd, past 32 and
// 64), several batch ranks and every kind of mask.
func attentionCases() []opCase {
	sizes := [][4]int{{1, 1, 1, 1}, {3, 5, 4, 3}, {7, 1, 8, 8}, {17, 33, 8, 16}, {33, 65, 16, 8}, {65, 129, 64, 64}, {128, 128, 32, 32}}
	var cs []opCase
	for _, m := range []struct {
		name string
		kind int
	}{{"all", maskAll}, {"causal", maskCausal}, {"padding", maskPadding}, {"random", maskRandom}} {
		cs = append(cs, opCase{"attention/" + m.name, "attention", func(r *rand.Rand) []instance {
			var is []instance
			for i, s := range sizes {
				batch := [][]int{{1}, {3}, {2, 3}}[i%3]
				is = append(is, attnInst(r, batch, s[0], s[1], s[2], s[3], m.kind))
			}
			return is
		}})
	}
	// f16 precision (B = 1): head sizes that ggml-vulkan's f16 kernels
	// take (multiples of 8) and one that keeps f32 k and v (5).
	half := [][4]int{{3, 5, 5, 3}, {17, 33, 8, 16}, {33, 65, 16, 8}, {65, 129, 64, 64}, {128, 128, 32, 32}}
	for _, m := range []struct {
		name string
		kind int
	}{{"causal", maskCausal}, {"padding", maskPadding}} {
		cs = append(cs, opCase{"attention/half-" + m.name, "attention/half", func(r *rand.Rand) []instance {
			var is []instance
			for i, s := range half {
				batch := [][]int{{1}, {3}, {2, 3}}[i%3]
				is = append(is, attnInstPrec(r, batch, s[0], s[1], s[2], s[3], m.kind, true))
			}
			return is
		}})
	}
	return cs
}
