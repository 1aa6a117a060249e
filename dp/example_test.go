package dp_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/dp"
	"github.com/ag-go/ag/nn"
)

// Two replicas of an MLP on two cpu devices (two GPUs, or cpu and webgpu,
// the same way), each step's batch of four split two and two, the
// gradients averaged, and the same Adam update on both.
func ExampleNew() {
	a, _ := core.Open("cpu")
	b, _ := core.Open("cpu")
	defer a.Close()
	defer b.Close()
	tr, err := dp.New([]*core.Device{a, b},
		func(dev *core.Device) nn.Sequential { return nn.MLP(dev, []int{2, 8, 1}, core.Tanh, nn.NewRNG(1)) },
		func(ps []*core.Tensor) nn.Optimizer { return nn.NewAdam(ps, 0.05) },
		func(m nn.Sequential, in []*core.Tensor) *core.Tensor { return nn.MSELoss(m.Forward(in[0]), in[1]) },
		dp.Options{Capture: true})
	if err != nil {
		panic(err)
	}
	x := []float32{0, 0, 0, 1, 1, 0, 1, 1}
	y := []float32{0, 1, 1, 0} // xor
	var first, last float32
	for i := range 300 {
		l, err := tr.Step(core.In(x, 4, 2), core.In(y, 4, 1))
		if err != nil {
			panic(err)
		}
		if i == 0 {
			first = l
		}
		last = l
	}
	div, _ := tr.Divergence()
	fmt.Println("loss fell tenfold:", last < first/10, "replicas differ by:", div)
	// Output: loss fell tenfold: true replicas differ by: 0
}
