package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// LayerNorm normalizes x along its last axis to zero mean and unit
// variance: (x - mean)/sqrt(var + eps), var the biased variance, without
// gain or bias (nn.LayerNorm adds them), as PyTorch's layer_norm. One
// composite op of the IR (backend.OpLayerNorm): ggml runs its fused norm
// kernels, other backends its decomposition. A row holding a NaN or an
// infinity gives NaN. eps must be finite and >= 0.
func LayerNorm(x *Tensor, eps float32) *Tensor {
	needRank("LayerNorm", x, 1)
	if !(eps >= 0) || math.IsInf(float64(eps), 0) {
		panic(fmt.Sprintf("core.LayerNorm: eps %g, want a finite value >= 0", eps))
	}
	return x.dev.record("LayerNorm", backend.OpLayerNorm, slices.Clone(x.shape), attrs{A: eps}, x)
}

var _ = defineComposite(backend.OpLayerNorm, composite{
	// one composite for the backward too: ggml fuses it as well
	grad: func(n *Tensor, in []*Tensor, g *Tensor, _ int) *Tensor {
		return g.dev.recordGrad("LayerNormGrad", backend.OpLayerNormBack, slices.Clone(in[0].shape), attrs{A: n.attr.A}, false, in[0], g)
	},
})

var _ = defineComposite(backend.OpLayerNormBack, composite{grad: noGrad})
