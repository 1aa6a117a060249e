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

// A tiny language model: each token predicts the next one in a repeating
// sequence through an Embedding, a LayerNorm and a Linear, trained with
// label-smoothed cross-entropy and AdamW on a warm-up + cosine schedule.
func ExampleEmbedding() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	const vocab, dim = 5, 8
	rng := nn.NewRNG(7)
	model := nn.Sequential{
		nn.NewEmbedding(dev, vocab, dim, nil, rng),
		nn.NewLayerNorm(dev, dim, 1e-5, true),
		nn.NewLinearInit(dev, dim, vocab, true, nn.GlorotNormal(1), rng),
	}
	opt := nn.WithSchedule(nn.NewAdamW(model.Params(), 0.05, 0.01), nn.WarmupCosine(5, 60, 0.1))
	seq := []float32{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}
	x := dev.Tensor(seq[:9], 9)
	y := dev.Tensor(seq[1:], 9)
	var loss float32
	for range 60 {
		opt.ZeroGrad()
		l := nn.CrossEntropyLoss(model.Forward(x), y, nn.ClassOptions{LabelSmoothing: 0.1})
		if err := l.Backward(); err != nil {
			panic(err)
		}
		if err := opt.Step(); err != nil {
			panic(err)
		}
		loss, _ = l.Item()
	}
	// With smoothing 0.1 over 5 classes the loss cannot go below ~0.39.
	fmt.Println(loss < 0.6) // it starts near log(5) = 1.61
	// Output: true
}
