package nn_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// Hooks around a layer: a forward hook that records the output's mean
// (as an op, so it also works in a captured step) and a backward hook that
// clips the gradient of the layer's output.
func ExampleHooked() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	var mean *core.Tensor
	layer := &nn.Hooked{
		Module: nn.NewLinear(dev, 2, 2, true, nn.NewRNG(1)),
		Post: func(x, y *core.Tensor) *core.Tensor {
			mean = core.Mean(y).Keep()
			return nil // keep the output
		},
		GradOutput: func(g *core.Tensor) *core.Tensor { return core.Clamp(g, -0.5, 0.5) },
	}
	y := layer.Forward(dev.Tensor([]float32{1, 2, 3, 4}, 2, 2))
	if err := core.Sum(core.Scale(y, 10)).Backward(); err != nil {
		panic(err)
	}
	g, _ := layer.Params()[1].Grad().Data() // the bias: the clipped gradient, summed over the batch
	names, _ := nn.NamedParams(layer)
	_, err := mean.Item()
	fmt.Println(g, names[0].Name, err)
	// Output: [1 1] W <nil>
}
