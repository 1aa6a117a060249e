package core

import (
	"slices"

	"github.com/ag-go/ag/backend"
)

// GELU returns the tanh approximation of the Gaussian error linear unit,
// 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))), as PyTorch's
// gelu(approximate="tanh") and GPT-2: one composite op of the IR
// (backend.OpGELU), with its gradient another (ggml runs each as one
// kernel, other backends their decompositions). It is NaN at -Inf (the
// formula's -Inf*0).
func GELU(x *Tensor) *Tensor {
	needTensors("GELU", x)
	return x.dev.record("GELU", backend.OpGELU, slices.Clone(x.shape), attrs{}, x)
}

var _ = defineComposite(backend.OpGELU, composite{
	grad: func(_ *Tensor, in []*Tensor, g *Tensor, _ int) *Tensor {
		return g.dev.recordGrad("GELUGrad", backend.OpGELUBack, slices.Clone(in[0].shape), attrs{}, false, in[0], g)
	},
})

var _ = defineComposite(backend.OpGELUBack, composite{grad: noGrad})
