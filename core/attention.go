package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// AttentionOptions tunes Attention; the zero value is plain scaled
// dot-product attention.
type AttentionOptions struct {
	// Causal lets query i attend only keys j <= i (PyTorch's is_causal:
	// the mask is the lower triangle of a [Tq, Tk] matrix of ones, aligned
	// at the top left).
	Causal bool
	// Mask, when not nil, says which keys each query may attend: a value
	// of 0.5 or more (1) attends, less (0) does not. Its shape broadcasts
	// to [..., Tq, Tk]: [B, 1, 1, Tk] masks padded keys of each sequence
	// for every head and query. It takes no gradient.
	Mask *Tensor
	// Scale multiplies q·kᵀ before the softmax; 0 means 1/sqrt(D), D the
	// size of the last axis of q and k.
	Scale float32
	// Dropout zeroes attention weights with this probability and scales
	// the rest by 1/(1-Dropout) (core.Dropout, from the device's random
	// stream); 0 drops none. Layers pass 0 in evaluation mode.
	Dropout float32
}

// maskedScore is what a masked query-key score becomes: finite, so a query
// whose keys are all masked softmaxes to a uniform row (then zeroed)
// rather than to NaN, and far enough below any real score (|s| < 1e22,
// where s - 1e30 rounds to -1e30) that exp gives exactly 0 beside one.
const maskedScore = 1e30

// Attention is scaled dot-product attention, softmax(q·kᵀ·scale + mask)·v,
// for q of shape [..., Tq, D], k [..., Tk, D] and v [..., Tk, Dv], the
// leading (batch, head) dimensions broadcasting as MatMul's; the result is
// [..., Tq, Dv]. Masked scores are set 1e30 below the rest, so they get
// weight exactly 0, and a query that may attend no key at all (a fully
// padded row) gets weights 0 and output 0, as PyTorch's
// scaled_dot_product_attention does since 2.5 (not NaN). A NaN or Inf in q,
// k or v propagates to the outputs that read it.
//
// Without dropout it is one fused kernel (the IR's OpAttention): the
// [..., Tq, Tk] weights are never stored in the forward, and a key a query
// does not attend is not read at all (its k and v cannot reach that
// query's output). Backward recomputes the weights from q and k, one
// segment at a time, as flash attention does: the weights of a layer exist
// only while its gradient is made. The gradient reads every key, so a NaN
// or Inf in a masked key's k or v does reach it. With dropout it is the
// composite of MatMul, MaskedSoftmax and Dropout, whose weights are kept
// from the forward for the backward.
func Attention(q, k, v *Tensor, opt *AttentionOptions) *Tensor {
	needTensors("Attention", q, k, v)
	var o AttentionOptions
	if opt != nil {
		o = *opt
	}
	if q.Rank() < 2 || k.Rank() < 2 || v.Rank() < 2 {
		panic(fmt.Sprintf("core.Attention: q %v, k %v, v %v: each needs rank >= 2 ([..., T, D])", q.shape, k.shape, v.shape))
	}
	tq, d := q.shape[q.Rank()-2], q.shape[q.Rank()-1]
	tk := k.shape[k.Rank()-2]
	if k.shape[k.Rank()-1] != d || v.shape[v.Rank()-2] != tk {
		panic(fmt.Sprintf("core.Attention: q %v, k %v, v %v: want q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv]", q.shape, k.shape, v.shape))
	}
	if !(o.Dropout >= 0 && o.Dropout < 1) {
		panic(fmt.Sprintf("core.Attention: dropout %g outside [0, 1)", o.Dropout))
	}
	scale := o.Scale
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(d)))
	}
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		panic(fmt.Sprintf("core.Attention: scale %g is not finite", scale))
	}
	if o.Mask != nil {
		needTensors("Attention", q, o.Mask)
		batch, err := backend.BroadcastShape(q.shape[:q.Rank()-2], k.shape[:k.Rank()-2])
		ws := append(batch, tq, tk)
		// (q and k that do not broadcast are MatMul's to name)
		if s, err2 := backend.BroadcastShape(o.Mask.shape, ws); err == nil && (err2 != nil || !slices.Equal(s, ws)) {
			panic(fmt.Sprintf("core.Attention: mask of shape %v does not broadcast to the scores' shape %v ([..., Tq, Tk])", o.Mask.shape, ws))
		}
	}
	defer q.dev.composite("Attention")()
	var keep *Tensor
	if o.Causal {
		keep = causalMask(q.dev, tq, tk, 1, 0)
	}
	if o.Mask != nil {
		m := Sub(q.dev.Full(1), inside(o.Mask, float32(math.Inf(-1)), 0.5)) // 1 attends, 0 not
		if keep == nil {
			keep = m
		} else {
			keep = Mul(keep, m)
		}
	}
	if o.Dropout == 0 && q.dev.caps.Supports(backend.OpAttention) {
		return fusedAttention(q, k, v, keep, scale)
	}
	w := attentionWeights(MatMulT(q, k, false, true), keep, scale, o.Mask != nil)
	if o.Dropout > 0 {
		w = Dropout(w, o.Dropout)
	}
	return MatMul(w, v)
}

// causalMask is the [tq, tk] constant that is in where query i may attend
// key j (j <= i) and out elsewhere, made once per device: keep (1, 0) or
// the scores' additive mask (0, -1e30).
func causalMask(d *Device, tq, tk int, in, out float32) *Tensor {
	return d.constant(causalKey(tq, tk, in, out), func() []float32 {
		m := make([]float32, tq*tk)
		for i := range tq {
			for j := range tk {
				m[i*tk+j] = out
				if j <= i {
					m[i*tk+j] = in
				}
			}
		}
		return m
	}, tq, tk)
}

func causalKey(tq, tk int, in, out float32) string {
	return fmt.Sprintf("causal %dx%d %g/%g", tq, tk, in, out)
}

// attentionWeights is the softmax of the scores scaled by scale over the
// keys keep (0 or 1, broadcast; nil: all) lets each query attend, one
// MaskedSoftmax. Masked scores are set 1e30 below the rest, so they get
// weight exactly 0; when a query may attend no key (only possible with a
// mask, maybeEmpty: a causal row always has key 0) its uniform row
// becomes 0. The causal keep's additive mask is a constant of its own, as
// keep is.
func attentionWeights(scores, keep *Tensor, scale float32, maybeEmpty bool) *Tensor {
	d := scores.dev
	r := scores.Rank()
	tq, tk := scores.shape[r-2], scores.shape[r-1]
	var bias *Tensor
	switch {
	case keep == nil:
		bias = d.Full(0, tq, tk)
	case keep == d.cached(causalKey(tq, tk, 1, 0)):
		bias = causalMask(d, tq, tk, 0, -maskedScore)
		// Row i keeps keys 0..i: none is empty, and the rows' maxima and
		// the product by them (a pass over all the weights) would be 1s.
		maybeEmpty = false
	default:
		bias = Affine(keep, maskedScore, -maskedScore)
	}
	w := MaskedSoftmax(scores, bias, scale)
	if keep != nil && maybeEmpty {
		w = Mul(w, MaxAxis(keep, -1, true))
	}
	return w
}

// fusedAttention records OpAttention for q, k, v with their batch
// dimensions broadcast to one shape, and keep (nil: every key) reshaped to
// their rank. At f16 matmul precision the attention's products take f16
// operands, as MatMul's do: q, k and v are rounded (once per value, shared
// with the backward's products) and the node says f16 (B = 1: a backend
// may round the weights too, as autocast's f16 attention does). At bf16 it
// stays f32: no backend has a bf16 attention kernel.
func fusedAttention(q, k, v, keep *Tensor, scale float32) *Tensor {
	d := q.dev
	var half float32
	if op := d.matMulRound(); op == backend.OpRoundF16 {
		q, k, v = roundedTo(q, op), roundedTo(k, op), roundedTo(v, op)
		half = 1
	}
	rq, rk, rv := q.Rank(), k.Rank(), v.Rank()
	batch, err := backend.BroadcastShape(q.shape[:rq-2], k.shape[:rk-2])
	if err == nil {
		batch, err = backend.BroadcastShape(batch, v.shape[:rv-2])
	}
	if err != nil {
		panic(fmt.Sprintf("core.Attention: q %v, k %v, v %v: batch dimensions: %v", q.shape, k.shape, v.shape, err))
	}
	// The IR's operands have rank 2..4 and equal leading dimensions.
	lead := batch
	if len(lead) == 0 {
		lead = []int{1}
	}
	r := len(lead) + 2
	to := func(x *Tensor) *Tensor {
		s := append(slices.Clone(lead), x.shape[x.Rank()-2:]...)
		if !slices.Equal(x.shape, s) {
			x = Expand(Reshape(x, append(ones(r-x.Rank()), x.shape...)...), s...)
		}
		return x
	}
	q, k, v = to(q), to(k), to(v)
	if keep == nil {
		keep = d.Full(1, ones(r)...)
	} else if keep.Rank() < r {
		keep = Reshape(keep, append(ones(r-keep.Rank()), keep.shape...)...)
	}
	out := append(slices.Clone(lead), q.shape[r-2], v.shape[r-1])
	y := d.record("Attention", backend.OpAttention, out, attrs{A: scale, B: half}, q, k, v, keep)
	if len(batch) < len(lead) {
		y = Reshape(y, y.shape[1:]...)
	}
	return y
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// attentionVJP is OpAttention's gradient for the inputs marked in needs (q,
// k, v; keep takes none), from the weights recomputed from q and k: all
// three come from one recomputation, which is why Backward asks for them
// together.
func attentionVJP(n *Tensor, in []*Tensor, g *Tensor, needs []bool) []*Tensor {
	q, k, v, keep := in[0], in[1], in[2], in[3]
	scale := n.attr.A
	switch {
	case keep.op == backend.OpFill && keep.attr.A == 1:
		keep = nil // every key
	case keep.op == backend.OpReshape && len(keep.inputs) == 1:
		// as Attention had it (the causal constant, whose additive mask
		// is a constant too), broadcast again; its recipe is gone once a
		// run computed it, and Affine makes the additive mask
		keep = keep.inputs[0]
	}
	w := attentionWeights(MatMulT(q, k, false, true), keep, scale, true)
	grads := make([]*Tensor, 4)
	if needs[2] {
		grads[2] = MatMulT(w, g, true, false)
	}
	if needs[0] || needs[1] {
		// MaskedSoftmax's gradient (w's rows that attend nothing are 0,
		// and so is their gradient), then the scores' products.
		dw := MatMulT(g, v, false, true)
		ds := w.dev.recordGrad("AttentionGrad", backend.OpSoftmaxExtBack, slices.Clone(w.shape), attrs{A: scale}, false, w, dw)
		if needs[0] {
			grads[0] = MatMul(ds, k)
		}
		if needs[1] {
			grads[1] = MatMulT(ds, q, true, false)
		}
	}
	return grads
}
