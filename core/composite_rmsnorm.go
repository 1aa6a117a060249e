package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// RMSNorm divides x along its last axis by its root mean square:
// x/sqrt(mean(x^2) + eps), without gain (nn.RMSNorm multiplies it), as
// PyTorch's rms_norm. One composite op of the IR (backend.OpRMSNorm):
// ggml runs its fused rms_norm kernels, other backends its decomposition.
// A row holding a NaN gives NaN; one holding an infinity gives NaN there
// and zeros elsewhere. eps must be finite and >= 0.
func RMSNorm(x *Tensor, eps float32) *Tensor {
	needRank("RMSNorm", x, 1)
	if !(eps >= 0) || math.IsInf(float64(eps), 0) {
		panic(fmt.Sprintf("core.RMSNorm: eps %g, want a finite value >= 0", eps))
	}
	return x.dev.record("RMSNorm", backend.OpRMSNorm, slices.Clone(x.shape), attrs{A: eps}, x)
}

var _ = defineComposite(backend.OpRMSNorm, composite{
	// one composite for the backward too: ggml fuses it as well
	grad: func(n *Tensor, in []*Tensor, g *Tensor, _ int) *Tensor {
		return g.dev.recordGrad("RMSNormGrad", backend.OpRMSNormBack, slices.Clone(in[0].shape), attrs{A: n.attr.A}, false, in[0], g)
	},
})

var _ = defineComposite(backend.OpRMSNormBack, composite{grad: noGrad})
