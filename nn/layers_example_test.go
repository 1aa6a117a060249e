package nn_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// A GroupNorm of 2 groups over 4 channels normalizes each sample's
// channels 0-1 together and 2-3 together; InstanceNorm2d each channel
// alone.
func ExampleGroupNorm() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	x := dev.Tensor([]float32{1, 3, 5, 7, 0, 0, 10, 30}, 1, 4, 1, 2)
	for _, m := range []nn.Module{nn.NewGroupNorm(dev, 2, 4, 1e-5, true), nn.NewInstanceNorm2d(dev, 4, 1e-5, false)} {
		v, err := m.Forward(x).Data()
		if err != nil {
			panic(err)
		}
		fmt.Printf("%.3f\n", v)
	}
	// Output:
	// [-1.342 -0.447 0.447 1.342 -0.816 -0.816 0.000 1.633]
	// [-1.000 1.000 -1.000 1.000 0.000 0.000 -1.000 1.000]
}

// A ConvTranspose2d with a 2x2 kernel of ones at stride 2 spreads each
// pixel over a 2x2 block, the adjoint of a Conv2d that sums 2x2 blocks;
// weights are [in, out, kh, kw] as in PyTorch.
func ExampleConvTranspose2d() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	ct := nn.NewConvTranspose2d(dev, 1, 1, [2]int{2, 2}, nn.ConvTransposeOptions{Stride: 2, NoBias: true}, nn.NewRNG(1))
	ct.W = dev.Param([]float32{1, 1, 1, 1}, 1, 1, 2, 2)
	y := ct.Forward(dev.Tensor([]float32{1, 2, 3, 4}, 1, 1, 2, 2))
	v, err := y.Data()
	if err != nil {
		panic(err)
	}
	fmt.Println(y.Shape(), v)
	// Output: [1 1 4 4] [1 1 2 2 1 1 2 2 3 3 4 4 3 3 4 4]
}

// Upsample doubles a 1x2 image: nearest repeats pixels, bilinear
// interpolates (without aligned corners, PyTorch's default, the edges are
// held; with them, the corners map onto each other).
func ExampleUpsample() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	x := dev.Tensor([]float32{0, 4}, 1, 1, 1, 2)
	for _, u := range []*nn.Upsample{
		nn.NewUpsample(2, nn.UpsampleNearest, false),
		nn.NewUpsample(2, nn.UpsampleBilinear, false),
		nn.NewUpsampleSize([2]int{1, 5}, nn.UpsampleBilinear, true),
	} {
		v, err := u.Forward(x).Data()
		if err != nil {
			panic(err)
		}
		fmt.Println(u.Mode, v)
	}
	// Output:
	// nearest [0 0 4 4 0 0 4 4]
	// bilinear [0 1 3 4 0 1 3 4]
	// bilinear [0 1 2 3 4]
}
