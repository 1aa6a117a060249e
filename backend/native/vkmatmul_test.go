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

// The kernel is opt-in (AG_GGML_MATMUL=auto or ag); products whose
// operands or partial products index past 2^31 elements stay on ggml's
// mul_mat (the shader indexes in uint32); with auto the rest of the
// kernel's share is decided by size alone.
func TestMatmulKernelSizes(t *testing.T) {
	d := &device{vkMatmul: true}
	t.Setenv(vkMatmulEnv, "")
	if _, ok := d.useVKMatmul(4096, 768, 3072, 1); ok {
		t.Errorf("useVKMatmul with %s unset took a product: the kernel is opt-in", vkMatmulEnv)
	}
	t.Setenv(vkMatmulEnv, "auto")
	for _, c := range []struct {
		m, n, k, batches int
		want             bool
	}{
		{4096, 768, 3072, 1, true},
		{64, 64, 64, 1, false},          // below vkMatmulWork
		{130, 768, 768, 1, false},       // M not a multiple of 4
		{1 << 16, 1 << 15, 8, 1, false}, // M*N = 2^31 outputs
		{8, 8, 1 << 28, 1, false},       // K*M = 2^31
		{512, 512, 64, 96, true},        // attention's batched products
	} {
		if _, got := d.useVKMatmul(c.m, c.n, c.k, c.batches); got != c.want {
			t.Errorf("useVKMatmul(%d, %d, %d, %d) = %t, want %t", c.m, c.n, c.k, c.batches, got, c.want)
		}
	}
}
