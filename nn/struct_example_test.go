package nn_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// Net is a model written as a Go struct of layers, as a PyTorch Module
// subclass is: no SetTraining or Buffers of its own, the layers in
// exported fields register themselves.
type Net struct {
	Conv *nn.Conv2d
	BN   *nn.BatchNorm
	Drop *nn.Dropout
	Head *nn.Linear
}

// NewNet makes a Net on dev with weights drawn from seed.
func NewNet(dev *core.Device, seed uint64) *Net {
	rng := nn.NewRNG(seed)
	return &Net{
		Conv: nn.NewConv2d(dev, 1, 2, [2]int{3, 3}, nn.ConvOptions{Padding: 1}, rng),
		BN:   nn.NewBatchNorm2d(dev, 2, 1e-5, 0.1, true),
		Drop: nn.NewDropout(0.5),
		Head: nn.NewLinear(dev, 2*3*3, 2, true, rng),
	}
}

// Forward is conv, batch norm, ReLU, dropout, linear.
func (n *Net) Forward(x *core.Tensor) *core.Tensor {
	h := core.ReLU(n.BN.Forward(n.Conv.Forward(x)))
	return n.Head.Forward(n.Drop.Forward(nn.Flatten{}.Forward(h)))
}

// Params lists the layers' parameters in field order.
func (n *Net) Params() []*core.Tensor {
	return slices.Concat(n.Conv.Params(), n.BN.Params(), n.Head.Params())
}

// A struct model: a training step updates the BatchNorm's running
// statistics; nn.Eval reaches the BatchNorm and the Dropout through the
// struct's fields, so evaluation is deterministic; the running statistics
// are saved with the weights and loaded (strictly) into a fresh model,
// which then evaluates alike.
func Example_structModel() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	net := NewNet(dev, 1)
	x := dev.Tensor(make([]float32, 4*1*3*3), 4, 1, 3, 3)
	if err := x.WriteAt(0, []float32{1, -2, 3, 0.5, 2, -1, 0, 1, 4}); err != nil {
		panic(err)
	}
	net.Forward(x) // training mode: batch statistics, running ones updated

	nn.Eval(net)
	a, _ := net.Forward(x).Data()
	b, _ := net.Forward(x).Data()
	fmt.Println("evaluation is deterministic:", slices.Equal(a, b))

	state, err := nn.NamedState(net)
	if err != nil {
		panic(err)
	}
	var names []string
	for _, n := range state {
		names = append(names, n.Name)
	}
	fmt.Println(strings.Join(names, " "))

	var file bytes.Buffer
	if err := nn.SaveSafetensors(&file, net, nn.SaveOptions{}); err != nil {
		panic(err)
	}
	fresh := NewNet(dev, 2)
	if _, err := nn.LoadSafetensors(&file, fresh, nn.LoadOptions{}); err != nil {
		panic(err)
	}
	c, _ := nn.Eval(fresh).Forward(x).Data()
	fmt.Println("the loaded model evaluates alike:", slices.Equal(a, c))
	// Output:
	// evaluation is deterministic: true
	// Conv.W Conv.B BN.Gain BN.Bias Head.W Head.B BN.RunningMean BN.RunningVar
	// the loaded model evaluates alike: true
}
