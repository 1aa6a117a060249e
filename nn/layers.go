package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
)

func checkEps(fn string, eps float32) {
	if !(eps > 0) || math.IsInf(float64(eps), 0) {
		panic(fmt.Sprintf("nn.%s: eps %g, want a finite value > 0", fn, eps))
	}
}

func checkLastDim(fn string, x *core.Tensor, dim int) {
	if x == nil {
		panic(fmt.Sprintf("nn.%s: nil input", fn))
	}
	if x.Rank() < 1 || x.Dim(x.Rank()-1) != dim {
		panic(fmt.Sprintf("nn.%s: input of shape %v, want a last dimension of %d", fn, x.Shape(), dim))
	}
}

// LayerNorm normalizes each vector along the last axis to zero mean and
// unit variance, then scales and shifts it by learnable vectors:
// y = (x - mean)/sqrt(var + Eps)*Gain + Bias, with the population variance
// (as PyTorch's LayerNorm over one trailing dimension). The statistics are
// computed in two passes, so a large mean does not cancel the variance.
type LayerNorm struct {
	Gain, Bias *core.Tensor // [dim]; both nil without an affine part
	Eps        float32
	dim        int
}

// NewLayerNorm makes a LayerNorm over a last axis of size dim with gain 1,
// bias 0 and the given eps (PyTorch's default is 1e-5); affine false
// leaves out the gain and bias.
func NewLayerNorm(dev *core.Device, dim int, eps float32, affine bool) *LayerNorm {
	if dim < 1 {
		panic(fmt.Sprintf("nn.NewLayerNorm: dim %d, want >= 1", dim))
	}
	checkDevice("NewLayerNorm", dev)
	checkShape("NewLayerNorm", dev, "", "gain", dim)
	checkEps("NewLayerNorm", eps)
	l := &LayerNorm{Eps: eps, dim: dim}
	if affine {
		l.Gain = NewParam(dev, Constant(1), nil, dim)
		l.Bias = NewParam(dev, Constant(0), nil, dim)
	}
	return l
}

// Forward normalizes x of shape [..., dim].
func (l *LayerNorm) Forward(x *core.Tensor) *core.Tensor {
	checkLastDim("LayerNorm.Forward", x, l.dim)
	checkEps("LayerNorm.Forward", l.Eps)
	var y *core.Tensor
	x.Device().Scope("LayerNorm", func() {
		x.Device().Composite("LayerNorm", func() {
			y = core.LayerNorm(x, l.Eps)
			if l.Gain != nil {
				y = core.Add(core.Mul(y, l.Gain), l.Bias)
			}
		})
	})
	return y
}

// Params returns the gain and the bias (none without an affine part).
func (l *LayerNorm) Params() []*core.Tensor {
	if l.Gain == nil {
		return nil
	}
	return []*core.Tensor{l.Gain, l.Bias}
}

// RMSNorm scales each vector along the last axis by the inverse of its
// root mean square, then by a learnable gain: y = x/sqrt(mean(x^2) +
// Eps)*Gain (Zhang & Sennrich 2019; LLaMA's norm). There is no mean
// subtraction and no bias.
type RMSNorm struct {
	Gain *core.Tensor // [dim]
	Eps  float32
	dim  int
}

// NewRMSNorm makes an RMSNorm over a last axis of size dim with gain 1 and
// the given eps (1e-6 is common; PyTorch defaults to f32's epsilon).
func NewRMSNorm(dev *core.Device, dim int, eps float32) *RMSNorm {
	if dim < 1 {
		panic(fmt.Sprintf("nn.NewRMSNorm: dim %d, want >= 1", dim))
	}
	checkDevice("NewRMSNorm", dev)
	checkShape("NewRMSNorm", dev, "", "gain", dim)
	checkEps("NewRMSNorm", eps)
	return &RMSNorm{Gain: NewParam(dev, Constant(1), nil, dim), Eps: eps, dim: dim}
}

// Forward normalizes x of shape [..., dim].
func (l *RMSNorm) Forward(x *core.Tensor) *core.Tensor {
	checkLastDim("RMSNorm.Forward", x, l.dim)
	checkEps("RMSNorm.Forward", l.Eps)
	var y *core.Tensor
	x.Device().Scope("RMSNorm", func() {
		x.Device().Composite("RMSNorm", func() {
			y = core.Mul(core.RMSNorm(x, l.Eps), l.Gain)
		})
	})
	return y
}

// Params returns the gain.
func (l *RMSNorm) Params() []*core.Tensor { return []*core.Tensor{l.Gain} }

// Embedding maps integer indices to learnable vectors: row i of W for
// index i. Its gradient is a scatter-add of the output's gradient into the
// rows read (core.Gather's), so a batch touches only the rows it uses.
//
// With a padding index (Padded; see PaddingIdx), as PyTorch's padding_idx,
// that row is read like any other but gets no gradient from the positions
// that read it, so it keeps its value (zeros, as NewEmbedding makes it)
// through training: a pad token's vector stays what it is.
//
// Weight tying: one Embedding's W may also be a model's output layer
// (logits = x·Wᵀ, as models.GPT2's head: core.MatMulT(x, Wte.W, false,
// true)). It is one parameter used twice, so Backward adds both uses'
// gradients into its one gradient, an optimizer updates it once, and a
// state file holds it once (see ExampleEmbedding_tied).
type Embedding struct {
	W          *core.Tensor // [vocab, dim]
	PaddingIdx int          // the row that gets no gradient, when Padded
	Padded     bool
}

// EmbeddingOption is an optional setting of NewEmbedding.
type EmbeddingOption func(*Embedding)

// PaddingIdx makes idx the Embedding's padding index (PyTorch's
// padding_idx; a negative idx counts from the end, -1 the last row): its
// row starts at zeros and gets no gradient.
func PaddingIdx(idx int) EmbeddingOption {
	return func(e *Embedding) { e.PaddingIdx, e.Padded = idx, true }
}

// NewEmbedding makes an Embedding of vocab vectors of size dim drawn from
// init (nil: Normal(0, 1), PyTorch's default), with the options given
// (PaddingIdx).
func NewEmbedding(dev *core.Device, vocab, dim int, init Initializer, rng *rand.Rand, opts ...EmbeddingOption) *Embedding {
	if vocab < 1 || dim < 1 {
		panic(fmt.Sprintf("nn.NewEmbedding: vocab %d, dim %d: both must be >= 1", vocab, dim))
	}
	checkDevice("NewEmbedding", dev)
	checkShape("NewEmbedding", dev, fmt.Sprintf("vocab %d, dim %d", vocab, dim), "table", vocab, dim)
	e := &Embedding{}
	for _, o := range opts {
		o(e)
	}
	if e.Padded {
		if e.PaddingIdx < -vocab || e.PaddingIdx >= vocab {
			panic(fmt.Sprintf("nn.NewEmbedding: padding index %d for vocab %d, want -%d..%d", e.PaddingIdx, vocab, vocab, vocab-1))
		}
		if e.PaddingIdx < 0 {
			e.PaddingIdx += vocab
		}
	}
	if init == nil {
		checkRNG("NewEmbedding", rng)
		init = Normal(0, 1)
	}
	if !e.Padded {
		e.W = NewParam(dev, init, rng, vocab, dim)
		return e
	}
	v := init([]int{vocab, dim}, rng)
	if len(v) != vocab*dim {
		panic(fmt.Sprintf("nn.NewEmbedding: the initializer gave %d values for shape [%d %d]", len(v), vocab, dim))
	}
	clear(v[e.PaddingIdx*dim : (e.PaddingIdx+1)*dim]) // PyTorch zeroes the padding row
	e.W = dev.Param(v, vocab, dim)
	return e
}

// Forward looks up idx, a tensor of whole numbers (as f32) of shape [n] or
// [b, n] (up to 3 dimensions), giving [..., dim]. An index outside
// 0..vocab-1 (or NaN) makes the whole output NaN rather than reading
// another row: the device clamps indices, and a silent clamp would train
// the wrong vector.
func (e *Embedding) Forward(idx *core.Tensor) *core.Tensor {
	if idx == nil {
		panic("nn.Embedding.Forward: nil indices")
	}
	if idx.Rank() < 1 || idx.Rank() > 3 {
		panic(fmt.Sprintf("nn.Embedding.Forward: indices of shape %v, want 1 to 3 dimensions", idx.Shape()))
	}
	vocab, dim := e.W.Dim(0), e.W.Dim(1)
	if e.Padded && (e.PaddingIdx < 0 || e.PaddingIdx >= vocab) {
		panic(fmt.Sprintf("nn.Embedding.Forward: padding index %d for vocab %d, want 0..%d", e.PaddingIdx, vocab, vocab-1))
	}
	var y *core.Tensor
	idx.Device().Scope("Embedding", func() {
		idx.Device().Composite("Embedding", func() {
			flat := idx
			if idx.Rank() != 1 {
				flat = core.Reshape(idx, idx.Len())
			}
			y = core.Gather(e.W, flat)
			if e.Padded {
				// the padding row's value, through which no gradient flows:
				// a selection, so that no value of one side reaches the other's
				keep := core.Reshape(core.NotEqualScalar(flat, float32(e.PaddingIdx)), flat.Len(), 1)
				y = core.Where(keep, y, y.Detach())
			}
			y = core.Add(y, labelPoison(flat, vocab))
			if idx.Rank() != 1 {
				y = core.Reshape(y, append(idx.Shape(), dim)...)
			}
		})
	})
	return y
}

// Params returns W.
func (e *Embedding) Params() []*core.Tensor { return []*core.Tensor{e.W} }

// Flatten reshapes [batch, d1, d2, ...] to [batch, d1*d2*...] (a view, no
// copy): between convolutional or sequence layers and a Linear.
type Flatten struct{}

// Forward flattens every axis after the first.
func (Flatten) Forward(x *core.Tensor) *core.Tensor {
	if x == nil {
		panic("nn.Flatten.Forward: nil input")
	}
	if x.Rank() < 1 {
		panic(fmt.Sprintf("nn.Flatten.Forward: input of shape %v, want a batch axis", x.Shape()))
	}
	return core.Reshape(x, x.Dim(0), -1)
}

// Params returns nil.
func (Flatten) Params() []*core.Tensor { return nil }
