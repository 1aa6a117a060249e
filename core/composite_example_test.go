package core_test

import (
	"fmt"

	_ "github.com/ag-go/ag/backend/cpu"
	"github.com/ag-go/ag/core"
)

// The composite ops are one node each in a step's graph (ggml runs its
// fused kernel for each; other backends their decomposition), with their
// gradients: here a layer norm, a cross-entropy at integer labels, a
// gradient's global norm and a bias gradient summed to its shape.
func ExampleLayerNorm() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Param([]float32{1, 2, 3, 4, 10, 10, 10, 14}, 2, 4)
	y := core.LayerNorm(x, 0)
	v, _ := y.Data()
	fmt.Printf("layer norm: %.3f\n", v)

	logits := dev.Param([]float32{2, 0, 0, 0, 3, 0}, 2, 3)
	loss := core.CrossEntropy(logits, dev.Tensor([]float32{0, 1}, 2))
	l, _ := loss.Data()
	fmt.Printf("cross-entropy: %.4f\n", l)

	if err := loss.Backward(); err != nil {
		fmt.Println(err)
		return
	}
	norm, _ := core.Sqrt(core.SumSquares(logits.Grad())).Data()
	fmt.Printf("gradient norm: %.4f\n", norm)
	bias, _ := core.SumTo(logits.Grad(), 3).Data()
	fmt.Printf("summed to [3]: %.4f\n", bias)
	// Output:
	// layer norm: [-1.342 -0.447 0.447 1.342 -0.577 -0.577 -0.577 1.732]
	// cross-entropy: [0.1672]
	// gradient norm: [0.1417]
	// summed to [3]: [-0.0839 0.0080 0.0759]
}
