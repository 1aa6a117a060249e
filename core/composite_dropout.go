package core

import (
	"slices"

	"github.com/ag-go/ag/backend"
)

// Dropout (random.go) with 0 < p < 1 is the composite backend.OpDropout
// over x and its draws u: ggml-cpu runs it as one kernel, other backends
// its decomposition (the mask, its scale, the product).
var _ = defineComposite(backend.OpDropout, composite{
	// the same mask over the gradient: the op again, over g and the same u
	grad: func(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
		if k == 1 {
			return nil // the draws
		}
		return g.dev.record("DropoutGrad", backend.OpDropout, slices.Clone(n.shape), attrs{A: n.attr.A}, g, in[1])
	},
})
