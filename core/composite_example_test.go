package core_test

import (
	"fmt"

	"github.com/ag-go/ag/backend"
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

// Im2Col unfolds an image into one row per output position, PyTorch's
// unfold: here a 3x3 image by a 2x2 window with stride 1, so a 2x2 kernel
// becomes a product with the columns. The index table is a Constant that
// the decomposition gathers by (nn's convolutions keep one per shape).
func ExampleIm2Col() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Param([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 1, 3, 3)
	w := backend.Window{KH: 2, KW: 2, SH: 1, SW: 1, DH: 1, DW: 1}
	rows := w.Rows(1, 3, 3)
	cols := core.Im2Col(x, dev.Constant(rows, len(rows)), w)
	v, _ := cols.Data()
	fmt.Println(cols.Shape(), v)
	// Output:
	// [4 4] [1 2 4 5 2 3 5 6 4 5 7 8 5 6 8 9]
}

// Col2Im folds columns back into an image, each element the sum of the
// columns that Im2Col reads it into: folding Im2Col's columns of ones
// counts the windows covering each position of the 3x3 image.
func ExampleCol2Im() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	w := backend.Window{KH: 2, KW: 2, SH: 1, SW: 1, DH: 1, DW: 1}
	rows := w.Rows(1, 3, 3)
	img := core.Col2Im(dev.Full(1, 4, 4), dev.Constant(rows, len(rows)), []int{1, 1, 3, 3}, w)
	v, _ := img.Data()
	fmt.Println(img.Shape(), v)
	// Output:
	// [1 1 3 3] [1 2 1 2 4 2 1 2 1]
}

// MaxPool2d of a 3x4 image by 2x2 windows at stride 2, padded by one
// column on each side (padding never wins): the gradient of the sum goes
// to each window's maximum, in the middle window to the first of its tied
// 9s (the others' gradients are -0, as MaxAxis's).
func ExampleMaxPool2d() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Param([]float32{1, 9, 3, 4, 9, 9, 2, 8, 0, 1, 5, 7}, 1, 1, 3, 4)
	w := backend.Window{KH: 2, KW: 2, SH: 2, SW: 2, PW: 1, DH: 1, DW: 1}
	rows := w.Rows(1, 3, 4)
	y := core.MaxPool2d(x, dev.Constant(rows, len(rows)), w)
	_ = core.Sum(y).Backward()
	v, _ := y.Data()
	g, _ := x.Grad().Data()
	fmt.Println(y.Shape(), v, g)
	// Output:
	// [1 1 1 3] [9 9 8] [-0 1 -0 -0 1 -0 -0 1 0 0 0 0]
}

// RMSNorm divides each row by its root mean square; BatchNorm normalizes
// each channel (axis 1) over the batch and every other axis, here two
// channels of [N 2, C 2, L 2].
func ExampleRMSNorm() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Tensor([]float32{3, 4, 1, 1, -1, 2, 5, 6}, 2, 2, 2)
	r, _ := core.RMSNorm(x, 0).Data()
	fmt.Printf("rms norm: %.3f\n", r)
	b, _ := core.BatchNorm(x, 0).Data()
	fmt.Printf("batch norm: %.3f\n", b)
	// Output:
	// rms norm: [0.849 1.131 1.000 1.000 -0.632 1.265 0.905 1.086]
	// batch norm: [0.535 1.069 -0.988 -0.988 -1.604 0.000 0.768 1.207]
}
