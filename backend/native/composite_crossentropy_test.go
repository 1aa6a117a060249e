//go:build ggml

package native

import (
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// With build.sh's patch 0016 the cross-entropy loss is three ggml-vulkan
// nodes (each row's loss by ag's kernel, their sum, the scale) where the
// composition took 27, and its gradient one where it took five; here
// over rows longer than the kernel's workgroup, fractional labels and a
// row far above 0. ggml-cpu keeps its composition.
func TestCrossEntropyKernel(t *testing.T) {
	const b, c = 9, 700
	g := &backend.Graph{NumArgs: 5, Nodes: []backend.Node{
		arg(0, b, c), arg(1, b), arg(2),
		{Op: backend.OpCrossEntropy, In: []int{0, 1}, Shape: []int{}},
		{Op: backend.OpCrossEntropyBack, In: []int{0, 1, 2}, Shape: []int{b, c}},
	}, Outputs: []backend.Output{{Node: 3, Arg: 3}, {Node: 4, Arg: 4}}}
	rng := rand.New(rand.NewPCG(16, 16))
	x := randVals(rng, b*c)
	for j := range c {
		x[4*c+j] += 90 // exp overflows unless shifted by the row's maximum
	}
	lab := []float32{0, 699, 3.5, 12.49, 698.7, 5, 6, 7, 8}
	args := [][]float32{x, lab, {0.75}, make([]float32, 1), make([]float32, b*c)}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			d := be.(*device)
			wantKernels(t, d, d.crossEntropy, "probeCrossEntropy", "0016", loweredOps(t, d, g), "CUSTOM(vulkan_kernel)=2", "SOFT_MAX", "GET_ROWS")
			runAndCompare(t, be, g, args, 1e-5)
		})
	}
}
