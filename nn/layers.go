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
type Embedding struct {
	W *core.Tensor // [vocab, dim]
}

// NewEmbedding makes an Embedding of vocab vectors of size dim drawn from
// init (nil: Normal(0, 1), PyTorch's default).
func NewEmbedding(dev *core.Device, vocab, dim int, init Initializer, rng *rand.Rand) *Embedding {
	if vocab < 1 || dim < 1 {
		panic(fmt.Sprintf("nn.NewEmbedding: vocab %d, dim %d: both must be >= 1", vocab, dim))
	}
	checkDevice("NewEmbedding", dev)
	checkShape("NewEmbedding", dev, fmt.Sprintf("vocab %d, dim %d", vocab, dim), "table", vocab, dim)
	if init == nil {
		checkRNG("NewEmbedding", rng)
		init = Normal(0, 1)
	}
	return &Embedding{W: NewParam(dev, init, rng, vocab, dim)}
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
	var y *core.Tensor
	idx.Device().Scope("Embedding", func() {
		idx.Device().Composite("Embedding", func() {
			flat := idx
			if idx.Rank() != 1 {
				flat = core.Reshape(idx, idx.Len())
			}
			y = core.Add(core.Gather(e.W, flat), labelPoison(flat, vocab))
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
