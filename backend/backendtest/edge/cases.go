package edge

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/core"
)

// edgeCase is one op at its edge points: f of the inputs (params), the
// backend's result compared with the reference's under tol, the reference's
// with PyTorch's (torchY, and torchGrad per input: the gradient of
// sum(f(inputs))) under torchTol.
type edgeCase struct {
	name      string
	in        [][]float32
	shapes    [][]int // nil: each input a vector
	f         func(in []*core.Tensor) *core.Tensor
	tol       tol
	torchY    []float64
	torchGrad [][]float64
	torchTol  tol
}

func (c edgeCase) points() string { return fmt.Sprintf("%s at %v", c.name, c.in) }

var (
	negZero = float32(math.Copysign(0, -1))
	inf     = float32(math.Inf(1))
)

func one(f func(x *core.Tensor) *core.Tensor) func([]*core.Tensor) *core.Tensor {
	return func(in []*core.Tensor) *core.Tensor { return f(in[0]) }
}

func two(f func(a, b *core.Tensor) *core.Tensor) func([]*core.Tensor) *core.Tensor {
	return func(in []*core.Tensor) *core.Tensor { return f(in[0], in[1]) }
}

// PyTorch's values below are its forward and its derivative formula at each
// point (derivatives.yaml names the formula, the kernel in
// aten/src/ATen/native/cpu/*Kernel.cpp the branch taken at the point); a
// gradient of PyTorch's not described as such is a one-line formula quoted
// from derivatives.yaml. They were confirmed with torch 1.13 (Debian's
// python3-torch) in float64; the tests do not need it.

func cases() []edgeCase {
	const (
		e1     = 0.36787944117144233 // e^-1
		twoRPi = 1.1283791670955126  // 2/sqrt(pi)
	)
	return []edgeCase{
		// relu: threshold_backward(grad, result, 0), which is
		// "x <= threshold ? 0 : grad": 0 at 0.
		{name: "relu", in: [][]float32{{-1, negZero, 0, 2.5, inf}}, f: one(core.ReLU), tol: exact,
			torchY: []float64{0, 0, 0, 2.5, math.Inf(1)}, torchGrad: [][]float64{{0, 0, 0, 1, 1}}, torchTol: f32Only},
		// leaky_relu: leaky_relu_backward, "self > 0 ? grad : grad *
		// negval": the slope at 0.
		{name: "leaky-relu", in: [][]float32{{-2, negZero, 0, 3}}, f: one(func(x *core.Tensor) *core.Tensor { return core.LeakyReLU(x, 0.25) }), tol: exact,
			torchY: []float64{-0.5, 0, 0, 3}, torchGrad: [][]float64{{0.25, 0.25, 0.25, 1}}, torchTol: f32Only},
		// elu: elu_backward(..., is_result=false, self), "self <= 0 ? grad
		// * negiptcoef * negcoef * exp(self * negiptcoef) : grad *
		// poscoef": alpha at 0 (1 for alpha = 1).
		{name: "elu", in: [][]float32{{-1, negZero, 0, 2}}, f: one(func(x *core.Tensor) *core.Tensor { return core.ELU(x, 1) }), tol: transc,
			torchY: []float64{e1 - 1, 0, 0, 2}, torchGrad: [][]float64{{e1, 1, 1, 1}}, torchTol: f32Only},
		{name: "elu-alpha", in: [][]float32{{-1, 0, 1}}, f: one(func(x *core.Tensor) *core.Tensor { return core.ELU(x, 0.5) }), tol: transc,
			torchY: []float64{0.5 * (e1 - 1), 0, 1}, torchGrad: [][]float64{{0.5 * e1, 0.5, 1}}, torchTol: f32Only},
		// clamp: clamp_backward, "where((self >= min).logical_and_(self <=
		// max), grad, 0)" ("we return the subgradient 1" at min and max).
		{name: "clamp", in: [][]float32{{-1, -0.5, 0, 0.75, 1}}, f: one(func(x *core.Tensor) *core.Tensor { return core.Clamp(x, -0.5, 0.75) }), tol: exact,
			torchY: []float64{-0.5, -0.5, 0, 0.75, 0.75}, torchGrad: [][]float64{{0, 1, 1, 1, 0}}, torchTol: f32Only},
		{name: "clamp-min-eq-max", in: [][]float32{{0, 0.5, 1}}, f: one(func(x *core.Tensor) *core.Tensor { return core.Clamp(x, 0.5, 0.5) }), tol: exact,
			torchY: []float64{0.5, 0.5, 0.5}, torchGrad: [][]float64{{0, 1, 0}}, torchTol: f32Only},
		// clamp(min=0): "where(self >= min, grad, 0)": -0 >= 0, +Inf too.
		{name: "clamp-min", in: [][]float32{{-1, negZero, 0, 2, inf}}, f: one(func(x *core.Tensor) *core.Tensor { return core.Clamp(x, 0, inf) }), tol: exact,
			torchY: []float64{0, 0, 0, 2, math.Inf(1)}, torchGrad: [][]float64{{0, 1, 1, 1, 1}}, torchTol: f32Only},
		// clamp(max=1): "where(self <= max, grad, 0)": -Inf <= 1.
		{name: "clamp-max", in: [][]float32{{-inf, 1, 2}}, f: one(func(x *core.Tensor) *core.Tensor { return core.Clamp(x, -inf, 1) }), tol: exact,
			torchY: []float64{math.Inf(-1), 1, 1}, torchGrad: [][]float64{{1, 1, 0}}, torchTol: f32Only},
		// abs: "grad * self.sgn()": 0 at ±0.
		{name: "abs", in: [][]float32{{-2, negZero, 0, 3}}, f: one(core.Abs), tol: exact,
			torchY: []float64{2, 0, 0, 3}, torchGrad: [][]float64{{-1, 0, 0, 1}}, torchTol: f32Only},
		// maximum: self "at::where(self == other, grad / 2,
		// grad).masked_fill_(self < other, 0)", other the same with
		// self > other: half to each on ties, -0 == 0 a tie.
		{name: "maximum-ties", in: [][]float32{{1, 2, 0, negZero, -1}, {1, 1, 0, 0, 3}}, f: two(core.Maximum), tol: exact,
			torchY: []float64{1, 2, 0, 0, 3}, torchGrad: [][]float64{{0.5, 1, 0.5, 0.5, 0}, {0.5, 0, 0.5, 0.5, 1}}, torchTol: f32Only},
		// minimum: as maximum with the comparisons turned.
		{name: "minimum-ties", in: [][]float32{{1, 2, 0, negZero, -1}, {1, 1, 0, 0, 3}}, f: two(core.Minimum), tol: exact,
			torchY: []float64{1, 1, 0, 0, -1}, torchGrad: [][]float64{{0.5, 0, 0.5, 0.5, 1}, {0.5, 1, 0.5, 0.5, 0}}, torchTol: f32Only},
		// max.dim: value_selecting_reduction_backward(grad, dim, indices,
		// ...): all to the index max(dim) returns, the first maximal
		// value's (torch.max's documentation).
		{name: "max-axis-ties", in: [][]float32{{1, 3, 3, 2, -1, -1, -1, -1, 0, negZero, 0, -2}}, shapes: [][]int{{3, 4}},
			f: one(func(x *core.Tensor) *core.Tensor { return core.MaxAxis(x, 1, false) }), tol: exact,
			torchY: []float64{3, -1, 0}, torchGrad: [][]float64{{0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}}, torchTol: f32Only},
		// min.dim: as max.dim, to the first minimal value.
		{name: "min-axis-ties", in: [][]float32{{2, 1, 1, 3, 5, 5, 5, 5, negZero, 0, 0, 4}}, shapes: [][]int{{3, 4}},
			f: one(func(x *core.Tensor) *core.Tensor { return core.MinAxis(x, 1, false) }), tol: exact,
			torchY: []float64{1, 5, 0}, torchGrad: [][]float64{{0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}}, torchTol: f32Only},
		// where(a >= b, a, b): self "where(condition, grad, 0)", other
		// "where(condition, 0, grad)"; a tie takes a (ge has no gradient).
		{name: "where-ties", in: [][]float32{{1, 2, 0, 5}, {1, 3, negZero, 4}},
			f: two(func(a, b *core.Tensor) *core.Tensor { return core.Where(core.GreaterEqual(a, b), a, b) }), tol: exact,
			torchY: []float64{1, 3, 0, 5}, torchGrad: [][]float64{{1, 0, 1, 1}, {0, 1, 0, 0}}, torchTol: f32Only},
		// sign: "zeros_like(grad)".
		{name: "sign", in: [][]float32{{-2, negZero, 0, 3}}, f: one(core.Sign), tol: exact,
			torchY: []float64{-1, 0, 0, 1}, torchGrad: [][]float64{{0, 0, 0, 0}}, torchTol: f32Only},
		// A step, (x >= 0) + 2(x > 0): comparisons have boolean results,
		// which carry no gradient.
		{name: "step", in: [][]float32{{-1, negZero, 0, 2}},
			f: one(func(x *core.Tensor) *core.Tensor {
				return core.Add(core.GreaterEqualScalar(x, 0), core.Scale(core.GreaterScalar(x, 0), 2))
			}), tol: exact,
			torchY: []float64{0, 1, 1, 3}, torchGrad: [][]float64{{0, 0, 0, 0}}, torchTol: f32Only},
		// softplus (beta 1, threshold 20): softplus_backward, "z = exp(x *
		// beta); (x * beta) > threshold ? grad : grad * z / (z + 1)", so
		// sigmoid(20) at 20 (1 in f32); the forward is x above 20,
		// log1p(exp(x)) up to it. At -20 ag's value is 0 (core.Softplus).
		{name: "softplus", in: [][]float32{{-20, -1, 0, 19.5, 20, 25}}, f: one(core.Softplus), tol: transc,
			torchY:    []float64{2.061153620314381e-09, 0.31326168751822286, 0.6931471805599453, 19.500000003398267, 20.000000002061153, 25},
			torchGrad: [][]float64{{2.0611536181902033e-09, 0.2689414213699951, 0.5, 0.9999999966017321, 0.9999999979388463, 1}}, torchTol: softplusTail},
		// erf: "2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad": 2/sqrt(pi)
		// at 0.
		{name: "erf", in: [][]float32{{-1, negZero, 0, 0.5}}, f: one(core.Erf), tol: transc,
			torchY:    []float64{-0.8427007929497149, 0, 0, 0.5204998778130465},
			torchGrad: [][]float64{{0.4151074974205947, twoRPi, twoRPi, 0.8787825789354448}}, torchTol: asApprox},
		// gelu(approximate="none"): gelu_backward, "cdf + x * pdf" with
		// cdf = 0.5*(1 + erf(x/sqrt 2)): 0.5 at 0.
		{name: "gelu-erf", in: [][]float32{{-1, 0, 1}}, f: one(core.GELUErf), tol: transc,
			torchY:    []float64{-0.15865525393145707, 0, 0.8413447460685429},
			torchGrad: [][]float64{{-0.08331547058768629, 0.5, 1.0833154705876864}}, torchTol: asApprox},
		// gelu(approximate="tanh"): gelu_backward's tanh branch, 0.5*(1 +
		// tanh(inner)) + 0.5*x*(1 - tanh^2)*inner': 0.5 at 0. The reference
		// uses f32's sqrt(2/pi) and 0.044715.
		{name: "gelu-tanh", in: [][]float32{{-1, 0, 1}}, f: one(core.GELU), tol: transc,
			torchY:    []float64{-0.15880800939172324, 0, 0.8411919906082768},
			torchGrad: [][]float64{{-0.08296408384578255, 0.5, 1.0829640838457826}}, torchTol: f32Const},
		// silu: silu_backward, "grad * sigmoid * (1 + x * (1 - sigmoid))":
		// 0.5 at 0.
		{name: "silu", in: [][]float32{{-1, 0, 1}}, f: one(core.SiLU), tol: transc,
			torchY:    []float64{-0.2689414213699951, 0, 0.7310585786300049},
			torchGrad: [][]float64{{0.07232948812851325, 0.5, 0.9276705118714869}}, torchTol: f32Only},
	}
}
