package core_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
)

// A straight-through estimator: the forward rounds to the nearest f16
// value, the backward passes the gradient through unchanged (the gradient
// of the rounding's own ops would be zero almost everywhere).
func ExampleCustom() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Param([]float32{0.1, 1000.3, -2.71828}, 3)
	y := core.Custom("ste",
		func(in []*core.Tensor) *core.Tensor { return core.RoundF16(in[0]) },
		func(in []*core.Tensor, out, grad *core.Tensor) []*core.Tensor { return []*core.Tensor{grad} },
		x)
	loss := core.Sum(core.Scale(y, 2))
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	v, _ := y.Data()
	g, _ := x.Grad().Data()
	fmt.Println(v, g)
	// Output: [0.099975586 1000.5 -2.71875] [2 2 2]
}

// A backward hook that reads nothing and halves the gradient flowing into
// x through h.
func ExampleHookGrad() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Param([]float32{1, 2}, 2)
	h := core.HookGrad(x, func(g *core.Tensor) *core.Tensor { return core.Scale(g, 0.5) })
	loss := core.Sum(core.Mul(h, h)) // gradient 2x, halved
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	g, _ := x.Grad().Data()
	fmt.Println(g)
	// Output: [1 2]
}
