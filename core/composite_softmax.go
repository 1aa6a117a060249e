package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// MaskedSoftmax is Softmax(x*scale + mask) along the last axis: attention's
// weights from its scores, mask additive (0 keeps a score, a large negative
// value such as -1e30 drops it) and of a shape that broadcasts to x's
// (rank at most x's, each dimension 1 or x's). One composite op of the IR
// (backend.OpSoftmaxExt), its gradient another (ggml's soft_max_ext and
// soft_max_ext_back); other backends run the decomposition. Softmax's
// special values apply to the masked scores: a row that is -Inf everywhere
// after masking is NaN, one masked with -1e30 everywhere uniform. The mask
// gets a gradient too, summed over the dimensions it is broadcast along.
// scale must be finite.
func MaskedSoftmax(x, mask *Tensor, scale float32) *Tensor {
	needRank("MaskedSoftmax", x, 1)
	needTensors("MaskedSoftmax", x, mask)
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		panic(fmt.Sprintf("core.MaskedSoftmax: scale %g is not finite", scale))
	}
	off := x.Rank() - mask.Rank()
	ok := off >= 0
	for i := 0; ok && i < mask.Rank(); i++ {
		ok = mask.shape[i] == 1 || mask.shape[i] == x.shape[off+i]
	}
	if !ok {
		panic(fmt.Sprintf("core.MaskedSoftmax: mask of shape %v does not broadcast to the input's %v", mask.shape, x.shape))
	}
	return x.dev.record("MaskedSoftmax", backend.OpSoftmaxExt, slices.Clone(x.shape), attrs{A: scale}, x, mask)
}

var _ = defineComposite(backend.OpSoftmaxExt, composite{
	// one composite for the backward too: ggml fuses it as well. The mask's
	// gradient is the scores' before the scale.
	grad: func(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
		a := n.attr.A
		if k == 1 {
			a = 1
		}
		d := g.dev.recordGrad("MaskedSoftmaxGrad", backend.OpSoftmaxExtBack, slices.Clone(n.shape), attrs{A: a}, false, n, g)
		return unbroadcast(d, in[k].shape)
	},
})

var _ = defineComposite(backend.OpSoftmaxExtBack, composite{grad: noGrad})
