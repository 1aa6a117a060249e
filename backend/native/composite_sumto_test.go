//go:build ggml

package native

import (
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// A bias's gradient, sum_to [B, T, C] -> [C], is two ggml-vulkan nodes by
// build.sh's patch 0017 (chunks of rows summed per column, then the
// chunks) where average pools in stages and a scale took four; here with
// columns past a workgroup's 64 and rows that split unevenly. ggml-cpu
// keeps its one ag_matmul_tn.
func TestColSumsTwoNodes(t *testing.T) {
	xs := []int{3, 701, 70}
	if s := colSumSplits(3*701, 70); s != 131 {
		t.Fatalf("colSumSplits(2103, 70) = %d, want 131 (the test's uneven chunks)", s)
	}
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		arg(0, xs...),
		{Op: backend.OpSumTo, In: []int{0}, Shape: []int{70}},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	rng := rand.New(rand.NewPCG(17, 17))
	args := [][]float32{randVals(rng, backend.NumElems(xs)), make([]float32, 70)}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			d := be.(*device)
			wantKernels(t, d, d.colSums, "probeColSums", "0017", loweredOps(t, d, g), "CUSTOM(vulkan_kernel)=2", "POOL_2D")
			runAndCompare(t, be, g, args, 1e-4) // sums of 2103 terms
		})
	}
}
