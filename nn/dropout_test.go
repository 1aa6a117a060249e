package nn_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// A model with dropout: training mode drops (a different mask per step),
// evaluation mode is the identity, and Train/Eval reach inside Sequential.
func ExampleDropout() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	model := nn.Sequential{nn.NewLinear(dev, 4, 8, true, rng), nn.Func(core.ReLU), nn.NewDropout(0.5), nn.NewLinear(dev, 8, 1, true, rng)}
	x := dev.Tensor([]float32{1, 2, 3, 4}, 1, 4)

	nn.Eval(model)
	a, _ := model.Forward(x).Item()
	b, _ := model.Forward(x).Item()
	fmt.Println("eval: same output twice:", a == b)

	nn.Train(model)
	hidden := nn.Sequential{model[0], model[1], model[2]}
	h1, _ := hidden.Forward(x).Data()
	h2, _ := hidden.Forward(x).Data()
	fmt.Println("train: new mask each step:", !slices.Equal(h1, h2))
	// Output:
	// eval: same output twice: true
	// train: new mask each step: true
}

func TestDropoutModes(t *testing.T) {
	dev, err := core.Open(testenv.Device())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	d := nn.NewDropout(0.25)
	m := nn.Sequential{nn.Sequential{d}}
	x := dev.Tensor(slices.Repeat([]float32{1}, 4096), 4096)
	if !d.Training {
		t.Fatal("a new Dropout is not in training mode")
	}
	nn.Eval(m)
	if d.Training || m.Forward(x) != x {
		t.Fatal("Eval did not reach the Dropout inside nested Sequentials, or eval Forward is not the identity")
	}
	nn.Train(m)
	v, err := m.Forward(x).Data()
	if err != nil {
		t.Fatal(err)
	}
	zeros := 0
	for _, y := range v {
		switch y {
		case 0:
			zeros++
		case 1 / 0.75:
		default:
			t.Fatalf("training Forward gave %g, want 0 or %g", y, 1/0.75)
		}
	}
	if zeros < 4096/4-150 || zeros > 4096/4+150 {
		t.Errorf("%d of 4096 dropped, want about 1024", zeros)
	}
	if d.Params() != nil {
		t.Errorf("Dropout has params")
	}
	defer func() {
		if r := recover(); r == nil {
			t.Errorf("NewDropout(1) did not panic")
		}
	}()
	nn.NewDropout(1)
}
