package nn_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// A video-like tensor [batch, frames, height, width, channels] (rank 5)
// through a Linear on its last axis, then a mean over the frames. Tensors
// have up to 6 dimensions on every device; where a backend's kernels take
// 4, plan.Expand lowers the graph, with the same values.
func ExampleLinear_video() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	frames := make([]float32, 2*3*4*4*8)
	for i := range frames {
		frames[i] = float32(i%7) / 7
	}
	video := dev.Tensor(frames, 2, 3, 4, 4, 8)
	lin := nn.NewLinear(dev, 8, 5, true, rng)
	y := lin.Forward(video)              // [2 3 4 4 5]
	pooled := core.MeanAxis(y, 1, false) // [2 4 4 5]
	loss := core.Mean(core.Mul(pooled, pooled))
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	fmt.Println(y.Shape(), pooled.Shape(), lin.W.Grad().Shape())
	// Output: [2 3 4 4 5] [2 4 4 5] [8 5]
}
