//go:build ggml

package native

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// On ggml-vulkan f32 products run on patch 0019's kernel, which takes B
// stored [K, N] and A stored [K, M] or [M, K]: every layout (the others
// through transposed copies; A stored [M, K] read as stored and copied),
// batches, edges of its 128x128 tiles along M and N,
// K not a multiple of its steps, K split into parts for occupancy (a
// node summing them) and for lavapipe's loop limit.
func TestMatmulKernel(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		t.Setenv(vkMatmulEnv, "ag")
		cases := []struct {
			batch, m, n, k int
			ta, tb         bool
			parts          int
		}{
			{1, 132, 136, 100, false, false, 1},
			{1, 64, 8, 2100, true, false, 4},
			{3, 20, 260, 36, false, true, 1},
			{2, 128, 128, 64, true, true, 1},
			{128, 4, 4, vkMatmulMaxK + 40, false, false, 2},
		}
		rng := rand.New(rand.NewPCG(5, 5))
		for _, c := range cases {
			for _, aMode := range []string{"rows", "copy"} {
				if aMode == "copy" && (c.ta || c.k%4 != 0) {
					continue // A is read as stored either way
				}
				t.Run(fmt.Sprintf("%dx%dx%dx%d_%t_%t_%s", c.batch, c.m, c.n, c.k, c.ta, c.tb, aMode), func(t *testing.T) {
					t.Setenv(vkMatmulAEnv, aMode)
					if got := vkMatmulSplits(c.m, c.n, c.k, c.batch); got != c.parts {
						t.Errorf("vkMatmulSplits(%d, %d, %d, %d) = %d, want %d", c.m, c.n, c.k, c.batch, got, c.parts)
					}
					as, bs := []int{c.batch, c.m, c.k}, []int{c.batch, c.k, c.n}
					if c.ta {
						as = []int{c.batch, c.k, c.m}
					}
					if c.tb {
						bs = []int{c.batch, c.n, c.k}
					}
					g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{arg(0, as...), arg(1, bs...),
						{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{c.batch, c.m, c.n}, TransA: c.ta, TransB: c.tb}},
						Outputs: []backend.Output{{Node: 2, Arg: 2}}}
					want := "CUSTOM(vulkan_kernel)=1"
					if c.parts > 1 {
						want = "CUSTOM(vulkan_kernel)=2"
					}
					wantKernels(t, d, d.vkMatmul, "probeMatmul", "0019", loweredOps(t, d, g), want, "MUL_MAT")
					// eighths: every product and sum is exact in f32, whatever its order
					eighths := func(n int) []float32 {
						v := make([]float32, n)
						for i := range v {
							v[i] = float32(rng.IntN(17)-8) / 8
						}
						return v
					}
					args := [][]float32{eighths(backend.NumElems(as)), eighths(backend.NumElems(bs)), make([]float32, c.batch*c.m*c.n)}
					runAndCompare(t, be, g, args, 0)
				})
			}
		}
	})
}
