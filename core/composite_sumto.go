package core

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
)

// SumTo sums x down to shape, PyTorch's sum_to_size: shape broadcasts to
// x's shape (aligned at the last axes, each of its sizes x's or 1), and x
// is summed over the leading axes shape lacks and the axes where shape has
// size 1. It is the gradient of a broadcast, one composite op of the IR
// (backend.OpSumTo): ggml sums a bias gradient [B, T, C] -> [C] in one
// kernel, other backends one axis at a time.
func SumTo(x *Tensor, shape ...int) *Tensor {
	needTensors("SumTo", x)
	checkShape("SumTo", shape)
	if !backend.SumToShape(x.shape, shape) {
		panic(fmt.Sprintf("core.SumTo: shape %v does not broadcast to %v", shape, x.shape))
	}
	if slices.Equal(x.shape, shape) {
		return x
	}
	return x.dev.recordShaped("SumTo", backend.OpSumTo, shape, attrs{}, x)
}

var _ = defineComposite(backend.OpSumTo, composite{
	// every summed element gets the output's gradient: a broadcast
	grad: func(_ *Tensor, in []*Tensor, g *Tensor, _ int) *Tensor {
		return Expand(g, in[0].shape...)
	},
})
