package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
)

// MultiHeadAttention is PyTorch's nn.MultiheadAttention with batch_first:
// inputs are [batch, T, Dim]; the query, key and value projections split
// Dim into Heads heads of Dim/Heads, each attends on its own
// (core.Attention), and the heads are joined and projected by O.
type MultiHeadAttention struct {
	Q, K, V, O *Linear
	Heads      int
	// Causal makes Forward (self-attention) attend only to earlier and
	// equal positions.
	Causal bool
	// Dropout is the attention-weight dropout of training mode.
	Dropout  float32
	Training bool
}

// NewMultiHeadAttention makes an attention layer of width dim split into
// heads (dim must be a multiple of heads), with biased projections drawn
// glorot-uniform from rng with zero biases (as PyTorch's MultiheadAttention
// draws its in-projection, which it draws as one [3*dim, dim] matrix, so its
// bound is a little smaller), attention-weight dropout p, in training mode.
func NewMultiHeadAttention(dev *core.Device, dim, heads int, causal bool, p float32, rng *rand.Rand) *MultiHeadAttention {
	if dim < 1 || heads < 1 || dim%heads != 0 {
		panic(fmt.Sprintf("nn.NewMultiHeadAttention: dim %d, heads %d: dim must be a positive multiple of heads", dim, heads))
	}
	if !(p >= 0 && p < 1) {
		panic(fmt.Sprintf("nn.NewMultiHeadAttention: dropout %g outside [0, 1)", p))
	}
	checkDevice("NewMultiHeadAttention", dev)
	checkRNG("NewMultiHeadAttention", rng)
	checkShape("NewMultiHeadAttention", dev, fmt.Sprintf("dim %d, heads %d", dim, heads), "projection", dim, dim)
	lin := func() *Linear { return NewLinearInit(dev, dim, dim, true, GlorotUniform(1), rng) }
	return &MultiHeadAttention{Q: lin(), K: lin(), V: lin(), O: lin(), Heads: heads, Causal: causal, Dropout: p, Training: true}
}

// Forward is self-attention of x [batch, T, Dim], causal when Causal is set.
func (m *MultiHeadAttention) Forward(x *core.Tensor) *core.Tensor {
	return m.Attend(x, x, x, nil)
}

// Attend attends the queries q [batch, Tq, Dim] to keys k and values v
// [batch, Tk, Dim] (cross-attention when they differ from q), with the
// layer's causal mask when Causal is set and, when mask is not nil, the
// keys it allows: 1 attends, 0 not, of a shape that broadcasts to [batch,
// Heads, Tq, Tk] - e.g. KeyPadding(keep) for padded keys. A query that may
// attend no key gives 0 before the output projection (see core.Attention).
func (m *MultiHeadAttention) Attend(q, k, v, mask *core.Tensor) *core.Tensor {
	if q == nil || k == nil || v == nil {
		panic("nn.MultiHeadAttention.Attend: nil input")
	}
	dim := m.Q.W.Dim(0)
	for _, t := range []*core.Tensor{q, k, v} {
		if t.Rank() != 3 || t.Dim(2) != dim {
			panic(fmt.Sprintf("nn.MultiHeadAttention: input of shape %v, want [batch, T, %d]", t.Shape(), dim))
		}
	}
	if k.Dim(0) != q.Dim(0) || v.Dim(0) != q.Dim(0) || k.Dim(1) != v.Dim(1) {
		panic(fmt.Sprintf("nn.MultiHeadAttention: q %v, k %v, v %v: batches differ or keys and values differ in length", q.Shape(), k.Shape(), v.Shape()))
	}
	if !(m.Dropout >= 0 && m.Dropout < 1) {
		panic(fmt.Sprintf("nn.MultiHeadAttention: dropout %g outside [0, 1)", m.Dropout))
	}
	h := m.Heads
	if h < 1 || dim%h != 0 {
		panic(fmt.Sprintf("nn.MultiHeadAttention: heads %d for width %d: want a positive divisor of the width", h, dim))
	}
	var y *core.Tensor
	q.Device().Scope("MultiHeadAttention", func() {
		// [batch, T, Dim] -> [batch, heads, T, Dim/heads]
		split := func(t *core.Tensor) *core.Tensor {
			return core.Permute(core.Reshape(t, t.Dim(0), t.Dim(1), h, dim/h), 0, 2, 1, 3)
		}
		var qh, kh, vh *core.Tensor
		q.Device().Scope("q", func() { qh = split(m.Q.Forward(q)) })
		q.Device().Scope("k", func() { kh = split(m.K.Forward(k)) })
		q.Device().Scope("v", func() { vh = split(m.V.Forward(v)) })
		opt := &core.AttentionOptions{Causal: m.Causal, Mask: mask}
		if q.Device().Guard(m.training) { // a Capture records each mode
			opt.Dropout = m.Dropout
		}
		a := core.Attention(qh, kh, vh, opt) // [batch, heads, Tq, Dim/heads]
		a = core.Reshape(core.Permute(a, 0, 2, 1, 3), q.Dim(0), q.Dim(1), dim)
		q.Device().Scope("out", func() { y = m.O.Forward(a) })
	})
	return y
}

// KeyPadding turns keep [batch, Tk] (1 for a real key, 0 for padding) into
// the [batch, 1, 1, Tk] mask Attend broadcasts over heads and queries.
func KeyPadding(keep *core.Tensor) *core.Tensor {
	if keep == nil || keep.Rank() != 2 {
		panic(fmt.Sprintf("nn.KeyPadding: mask %v, want [batch, Tk]", keep))
	}
	return core.Reshape(keep, keep.Dim(0), 1, 1, keep.Dim(1))
}

// Params returns the projections' weights and biases: Q, K, V, O.
func (m *MultiHeadAttention) Params() []*core.Tensor {
	return concatParams(m.Q, m.K, m.V, m.O)
}

// SetTraining switches the attention-weight dropout on (true) or off.
func (m *MultiHeadAttention) SetTraining(on bool) { m.Training = on }

func (m *MultiHeadAttention) training() bool { return m.Training }

func concatParams(ms ...Module) []*core.Tensor {
	var ps []*core.Tensor
	for _, m := range ms {
		ps = append(ps, m.Params()...)
	}
	return ps
}

// TransformerBlock is a pre-norm transformer layer (GPT-2's):
//
//	x = x + Dropout(Attn(LN1(x)))
//	x = x + Dropout(FF2(GELU(FF1(LN2(x)))))
//
// on [batch, T, Dim].
type TransformerBlock struct {
	LN1, LN2 *LayerNorm
	Attn     *MultiHeadAttention
	FF1, FF2 *Linear
	Drop     *Dropout
}

// NewTransformerBlock makes a block of width dim with heads heads, a
// feed-forward hidden width of hidden (4*dim is usual), causal
// self-attention when causal is set, and dropout p on the attention
// weights and on both residual branches. Its feed-forward layers are drawn
// glorot-uniform with zero biases, as its attention's (not NewLinear's
// default: GPT's numbers were set with these).
func NewTransformerBlock(dev *core.Device, dim, heads, hidden int, causal bool, p float32, rng *rand.Rand) *TransformerBlock {
	if hidden < 1 {
		panic(fmt.Sprintf("nn.NewTransformerBlock: hidden width %d, want >= 1", hidden))
	}
	if dim < 1 || heads < 1 || dim%heads != 0 {
		panic(fmt.Sprintf("nn.NewTransformerBlock: dim %d, heads %d: dim must be a positive multiple of heads", dim, heads))
	}
	checkDevice("NewTransformerBlock", dev)
	checkRNG("NewTransformerBlock", rng)
	values := fmt.Sprintf("dim %d, heads %d, hidden %d", dim, heads, hidden)
	checkShape("NewTransformerBlock", dev, values, "attention projection", dim, dim)
	checkShape("NewTransformerBlock", dev, values, "feed-forward weight", dim, hidden)
	return &TransformerBlock{
		LN1:  NewLayerNorm(dev, dim, 1e-5, true),
		Attn: NewMultiHeadAttention(dev, dim, heads, causal, p, rng),
		LN2:  NewLayerNorm(dev, dim, 1e-5, true),
		FF1:  NewLinearInit(dev, dim, hidden, true, GlorotUniform(1), rng),
		FF2:  NewLinearInit(dev, hidden, dim, true, GlorotUniform(1), rng),
		Drop: NewDropout(p),
	}
}

// Forward applies the block to x [batch, T, Dim].
func (b *TransformerBlock) Forward(x *core.Tensor) *core.Tensor {
	if x == nil {
		panic("nn.TransformerBlock.Forward: nil input")
	}
	var y *core.Tensor
	x.Device().Scope("TransformerBlock", func() {
		var a, f *core.Tensor
		x.Device().Scope("attn", func() { a = b.Drop.Forward(b.Attn.Forward(b.LN1.Forward(x))) })
		y = core.Add(x, a)
		x.Device().Scope("mlp", func() { f = b.Drop.Forward(b.FF2.Forward(core.GELU(b.FF1.Forward(b.LN2.Forward(y))))) })
		y = core.Add(y, f)
	})
	return y
}

// Params lists LN1, Attn, LN2, FF1 and FF2's parameters, in that order.
func (b *TransformerBlock) Params() []*core.Tensor {
	return concatParams(b.LN1, b.Attn, b.LN2, b.FF1, b.FF2)
}

// SetTraining passes the mode to the attention and the dropout.
func (b *TransformerBlock) SetTraining(on bool) {
	b.Attn.SetTraining(on)
	b.Drop.SetTraining(on)
}
