package nn_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// A 2x2 averaging kernel with stride 2 and a bias of 10 over a 4x4 image:
// weights are [out, in, kh, kw] as in PyTorch.
func ExampleConv2d() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	conv := nn.NewConv2d(dev, 1, 1, [2]int{2, 2}, nn.ConvOptions{Stride: 2}, nn.NewRNG(1))
	conv.W = dev.Param([]float32{0.25, 0.25, 0.25, 0.25}, 1, 1, 2, 2)
	conv.B = dev.Param([]float32{10}, 1)
	x := dev.Tensor([]float32{
		1, 2, 3, 4,
		5, 6, 7, 8,
		9, 10, 11, 12,
		13, 14, 15, 16,
	}, 1, 1, 4, 4)
	y := conv.Forward(x)
	v, err := y.Data()
	if err != nil {
		panic(err)
	}
	fmt.Println(y.Shape(), v)
	// Output: [1 1 2 2] [13.5 15.5 21.5 23.5]
}

// A BatchNorm2d normalizes each channel by the batch's statistics while
// training, updating its running statistics, and by those in evaluation.
func ExampleNewBatchNorm2d() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	bn := nn.NewBatchNorm2d(dev, 1, 1e-5, 0.1, false)
	x := dev.Tensor([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 1, 2, 2) // mean 4.5
	y, err := bn.Forward(x).Data()
	if err != nil {
		panic(err)
	}
	mean, _ := bn.RunningMean.Data()
	variance, _ := bn.RunningVar.Data()
	fmt.Printf("train: %.3f\n", y[:4])
	fmt.Printf("running mean %.2f, variance %.2f\n", mean, variance) // 0.9*0 + 0.1*4.5; 0.9*1 + 0.1*6
	nn.Eval(bn)
	y, err = bn.Forward(x).Data()
	if err != nil {
		panic(err)
	}
	fmt.Printf("eval: %.3f\n", y[:4])
	// Output:
	// train: [-1.528 -1.091 -0.655 -0.218]
	// running mean [0.45], variance [1.50]
	// eval: [0.449 1.266 2.082 2.899]
}
