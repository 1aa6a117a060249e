package nn_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// A two-layer LSTM over a batch of 2 sequences of 5 steps of 3 features,
// batch first, from given initial states; its weights carry PyTorch's
// names.
func ExampleLSTM() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	lstm := nn.NewLSTM(dev, 3, 4, 2, true, nn.NewRNG(1))
	x := dev.Tensor(make([]float32, 2*5*3), 2, 5, 3)
	h0, _ := dev.Zeros(2, 2, 4)
	c0, _ := dev.Zeros(2, 2, 4)
	out, hn, cn := lstm.Run(x, h0, c0)
	names, _ := nn.NamedParams(lstm)
	fmt.Println(out.Shape(), hn.Shape(), cn.Shape(), names[0].Name, names[0].Tensor.Shape(), len(names))
	// Output: [2 5 4] [2 2 4] [2 2 4] weight_ih_l0 [16 3] 8
}

// A GRU as a layer of a Sequential: Forward returns the output sequence,
// here [seq, batch, hidden].
func ExampleGRU() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	gru := nn.NewGRU(dev, 2, 3, 1, false, nn.NewRNG(1))
	model := nn.Sequential{gru, nn.NewLinear(dev, 3, 1, true, nn.NewRNG(2))}
	y := model.Forward(dev.Tensor(make([]float32, 4*2*2), 4, 2, 2))
	_, hn := gru.Run(dev.Tensor(make([]float32, 4*2*2), 4, 2, 2), nil)
	fmt.Println(y.Shape(), hn.Shape())
	// Output: [4 2 1] [1 2 3]
}
