package nn_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// Train a small MLP to fit y = 2x - 1.
func Example() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	model := nn.MLP(dev, []int{1, 16, 1}, core.Tanh, rng)
	opt := nn.NewAdam(model.Params(), 0.05)

	xs := []float32{-1, -0.5, 0, 0.5, 1}
	ys := []float32{-3, -2, -1, 0, 1}
	x, y := dev.Tensor(xs, 5, 1), dev.Tensor(ys, 5, 1)
	var loss float32
	for range 200 {
		opt.ZeroGrad()
		l := nn.MSELoss(model.Forward(x), y)
		l.Backward()       // appends the backward to the pending graph
		opt.Step()         // appends the fused Adam update
		loss, _ = l.Item() // runs forward+backward+update as one program
	}
	fmt.Println(loss < 0.01)
	// Output: true
}
