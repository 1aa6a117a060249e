package nn_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// With a padding index, the pad token's row starts at zeros and keeps its
// value through training: it gets no gradient.
func ExamplePaddingIdx() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := nn.NewEmbedding(dev, 3, 2, nn.Constant(1), nil, nn.PaddingIdx(0))
	y := e.Forward(dev.Tensor([]float32{0, 2, 0}, 3))
	if err := core.Sum(y).Backward(); err != nil {
		panic(err)
	}
	v, _ := y.Data()
	g, _ := e.W.Grad().Data()
	fmt.Println("output", v)
	fmt.Println("gradient", g)
	// Output:
	// output [0 0 1 1 0 0]
	// gradient [0 0 0 0 1 1]
}

// Weight tying: the token embedding's table is also the output layer
// (logits = h·Wᵀ, as models.GPT2's head). It is one parameter used twice:
// its gradient is the sum of both uses' (PyTorch's values), and
// optimizers and state files see it once.
func ExampleEmbedding_tied() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	emb := nn.NewEmbedding(dev, 3, 2, nil, nn.NewRNG(1))
	emb.W = dev.Param([]float32{1, 0, 0, 1, 1, 1}, 3, 2)
	h := emb.Forward(dev.Tensor([]float32{0, 2}, 2)) // [2, dim]
	logits := core.MatMulT(h, emb.W, false, true)    // [2, vocab]: the same W
	loss := core.CrossEntropy(logits, dev.Tensor([]float32{1, 0}, 2))
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	g, _ := emb.W.Grad().Data()
	fmt.Printf("one gradient for both uses: %.3f\n", g)
	fmt.Println("parameters:", len(emb.Params()))
	// Output:
	// one gradient for both uses: [0.239 -0.605 -0.316 0.106 0.393 0.682]
	// parameters: 1
}
