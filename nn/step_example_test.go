package nn_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// CaptureStep records forward, backward and update once and replays them
// each step, with the gradient norm clipped on the device.
func ExampleCaptureStep() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	model := nn.MLP(dev, []int{2, 8, 1}, core.Tanh, nn.NewRNG(1))
	opt := nn.NewAdam(model.Params(), 0.05)
	step := nn.CaptureStep(opt, func(in []*core.Tensor) *core.Tensor {
		return nn.MSELoss(model.Forward(in[0]), in[1])
	})
	step.MaxGradNorm = 1
	x := []float32{0, 0, 0, 1, 1, 0, 1, 1}
	y := []float32{0, 1, 1, 0} // xor
	var first, last float32
	for i := range 300 {
		l, err := step.Step(core.In(x, 4, 2), core.In(y, 4, 1))
		if err != nil {
			panic(err)
		}
		if i == 0 {
			first = l
		}
		last = l
	}
	fmt.Println("loss fell tenfold:", last < first/10, "recordings:", step.Records())
	// Output: loss fell tenfold: true recordings: 2
}

// Mixed precision: f16 matmuls with f32 master weights, the loss scaled so
// small gradients survive f16, steps with Inf or NaN gradients skipped.
func ExampleGradScaler() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	if _, err := dev.SetMatMulPrecision(core.PrecisionF16); err != nil {
		panic(err)
	}
	model := nn.MLP(dev, []int{2, 8, 1}, core.Tanh, nn.NewRNG(1))
	opt := nn.NewAdam(model.Params(), 0.05)
	scaler := nn.NewGradScaler(1024)
	x := dev.Tensor([]float32{0, 0, 0, 1, 1, 0, 1, 1}, 4, 2)
	y := dev.Tensor([]float32{0, 1, 1, 0}, 4, 1)
	var losses []float32
	for range 300 {
		opt.ZeroGrad()
		loss := nn.MSELoss(model.Forward(x), y)
		if err := scaler.Backward(loss); err != nil {
			panic(err)
		}
		if _, _, err := scaler.Step(opt, 0); err != nil {
			panic(err)
		}
		l, err := loss.Item() // readable after the step: Backward keeps it
		if err != nil {
			panic(err)
		}
		losses = append(losses, l)
	}
	fmt.Println("loss fell tenfold:", losses[299] < losses[0]/10, "skipped:", scaler.Skipped)
	// Output: loss fell tenfold: true skipped: 0
}

// Multi-head self-attention over a batch of sequences, causal.
func ExampleMultiHeadAttention() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	attn := nn.NewMultiHeadAttention(dev, 8, 2, true, 0, nn.NewRNG(1))
	x := core.Uniform(dev, -1, 1, 3, 5, 8) // [batch, T, dim]
	y := attn.Forward(x)
	fmt.Println(y.Shape(), len(attn.Params()))
	// Output: [3 5 8] 8
}
