//go:build ggml

package native

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// With build.sh's patch 0015 batch norm and its gradient are three
// ggml-vulkan nodes each (partial sums over chunks of each channel, the
// chunks merged, the elementwise pass) where core composed them from about
// 15 and 30, and the batch's statistics one more, sharing the forward's
// sums; here over chunks of uneven sizes (BatchNormSplits: 8 of 2145
// values) of channels far from 0 for their spread. On ggml-cpu each is one
// custom op.
func TestBatchNormThreeNodes(t *testing.T) {
	xs := []int{15, 3, 13, 11}
	if s := backend.BatchNormSplits(xs); s != 8 {
		t.Fatalf("BatchNormSplits(%v) = %d, want 8 (the test's chunks)", xs, s)
	}
	g := &backend.Graph{NumArgs: 5, Nodes: []backend.Node{
		arg(0, xs...), arg(1, xs...),
		{Op: backend.OpBatchNorm, In: []int{0}, Shape: xs, A: 1e-5},
		{Op: backend.OpBatchNormStats, In: []int{0}, Shape: []int{2, xs[1]}},
		{Op: backend.OpBatchNormBack, In: []int{0, 1}, Shape: xs, A: 1e-5},
	}, Outputs: []backend.Output{{Node: 2, Arg: 2}, {Node: 3, Arg: 3}, {Node: 4, Arg: 4}}}
	rng := rand.New(rand.NewPCG(15, 15))
	x := randVals(rng, backend.NumElems(xs))
	for i := range x {
		x[i] = 50 + x[i]
	}
	n := len(x)
	args := [][]float32{x, randVals(rng, n), make([]float32, n), make([]float32, 2*xs[1]), make([]float32, n)}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			d := be.(*device)
			if !be.Caps().Native(backend.OpBatchNorm) || !be.Caps().Native(backend.OpBatchNormBack) || !be.Caps().Native(backend.OpBatchNormStats) {
				t.Fatalf("batch_norm is not native (probeBatchNorm %t: a ggml built without patch 0015?)", d.batchNorm)
			}
			want := []string{"CUSTOM(vulkan_kernel)=7"} // 3 + 1 (the sums shared) + 3
			if d.isCPU {
				want = []string{"CUSTOM(batch_norm)=1", "CUSTOM(batch_norm_back)=1", "CUSTOM(batch_norm_stats)=1"}
			}
			c := loweredOps(t, d, g)
			for _, w := range want {
				if !strings.Contains(c, w) || strings.Contains(c, "SUM_ROWS") {
					t.Errorf("batch_norm, its statistics and its gradient lowered to %s, want %s alone", c, strings.Join(want, " "))
				}
			}
			runAndCompare(t, be, g, args, 2e-4)
		})
	}
}
