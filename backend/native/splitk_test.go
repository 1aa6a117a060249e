//go:build ggml

package native

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// The products a training step makes at small batches, which ggml-vulkan
// splits along K from k >= 512 where it knows the GPU's SM count (build.sh's
// patch 0008; NVIDIA and AMD): a layer-wide K (aligned, and 1000 for the
// unaligned shader), n of a batch, the weight stored either way (the forward
// and the input gradient). Their values must match the reference whether
// the device splits or not; on a device ggml knows no SM count of (lavapipe)
// they run unsplit, and the test checks only that.
func TestMatMulSplitK(t *testing.T) {
	for _, name := range devices(t) {
		be := open(t, name)
		if name == VulkanName {
			t.Logf("%s: %s (ggml splits K only where it knows the SM count: NVIDIA, AMD)", name, be.Caps().Device)
		}
		// The last two are split by ag's lowering on every GPU device
		// (splitKChunk: few output tiles, long K, a weight gradient's
		// shapes with A stored transposed), K not a multiple of the part.
		for _, c := range []struct {
			m, k, n int
			ta      bool
		}{{64, 1024, 1024, false}, {64, 1000, 1024, false}, {256, 512, 1024, false}, {64, 4096, 256, false}, {9, 50176, 32, true}, {288, 12544 + 7, 64, true}} {
			for _, tb := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%dx%dx%d/tA=%v/tB=%v", name, c.m, c.k, c.n, c.ta, tb), func(t *testing.T) {
					as, bs := []int{c.m, c.k}, []int{c.k, c.n}
					if c.ta {
						as = []int{c.k, c.m}
					}
					if tb {
						bs = []int{c.n, c.k}
					}
					g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{arg(0, as...), arg(1, bs...),
						{Op: backend.OpMatMul, In: []int{0, 1}, TransA: c.ta, TransB: tb, Shape: []int{c.m, c.n}}},
						Outputs: []backend.Output{{Node: 2, Arg: 2}}}
					r := rand.New(rand.NewPCG(uint64(c.k), uint64(c.n)))
					// f32 rounding grows with k (sums of k normal products:
					// 2e-4 at k=4096 on lavapipe); a lost or doubled part of
					// K is off by the size of a partial sum, about sqrt(k).
					runAndCompare(t, be, g, [][]float32{randVals(r, c.m*c.k), randVals(r, c.k*c.n), make([]float32, c.m*c.n)}, 1e-6*float64(c.k))
				})
			}
		}
	}
}
