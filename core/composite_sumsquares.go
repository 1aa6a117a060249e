package core

import "github.com/ag-go/ag/backend"

// SumSquares is the sum of the squares of every element of xs, shape [1]:
// a global norm's square (nn.ClipGradNorm's) in one composite op of the IR
// (backend.OpSumSquares), summed in f32: +Inf past its range, NaN if any
// element is. Its gradient for each x is 2*x times the output's gradient.
func SumSquares(xs ...*Tensor) *Tensor {
	if len(xs) == 0 {
		panic("core.SumSquares: no tensors")
	}
	needTensors("SumSquares", xs...)
	return xs[0].dev.record("SumSquares", backend.OpSumSquares, []int{1}, attrs{}, xs...)
}

var _ = defineComposite(backend.OpSumSquares, composite{
	grad: func(_ *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
		return Mul(Scale(in[k], 2), g)
	},
})
