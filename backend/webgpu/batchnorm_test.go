package webgpu

import (
	"slices"
	"testing"

	"github.com/ag-go/ag/backend"
)

// Batch norm and its gradient are three dispatches each here (the backend
// lists them in Caps.Composites): the chunks' partial sums, the channels'
// statistics, the elementwise pass, where core's composition makes about
// ten passes over the activations; the batch's statistics are the first
// two. Over chunks of uneven sizes
// (BatchNormSplits: 8 of 2145 values) of channels far from 0 for their
// spread, against the float64 reference; the conformance suite checks the
// special values (batch_norm/...).
func TestBatchNormThreeKernels(t *testing.T) {
	be := openTest(t)
	if !be.Caps().Native(backend.OpBatchNorm) || !be.Caps().Native(backend.OpBatchNormBack) || !be.Caps().Native(backend.OpBatchNormStats) {
		t.Fatalf("Caps.Composites = %v: want batch_norm, batch_norm_back and batch_norm_stats native", be.Caps().Composites)
	}
	xs := []int{15, 3, 13, 11}
	if s := backend.BatchNormSplits(xs); s != 8 {
		t.Fatalf("BatchNormSplits(%v) = %d, want 8 (the test's chunks)", xs, s)
	}
	b := newGB(15)
	x := b.rand(49, 51, xs...)
	dy := b.rand(-1, 1, xs...)
	b.out(b.node(backend.Node{Op: backend.OpBatchNorm, In: []int{x}, Shape: xs, A: 1e-5}))
	b.out(b.node(backend.Node{Op: backend.OpBatchNormBack, In: []int{x, dy}, Shape: xs, A: 1e-5}))
	b.out(b.node(backend.Node{Op: backend.OpBatchNormStats, In: []int{x}, Shape: []int{2, xs[1]}}))
	var names []string
	for _, k := range compiledKernels(t, be, &b.g) {
		names = append(names, k.name)
	}
	three := []string{"batch_norm_parts", "batch_norm_merge", "batch_norm_apply"}
	if want := append(append(slices.Clone(three), three...), three[0], "batch_norm_stats"); !slices.Equal(names, want) {
		t.Errorf("batch_norm, its gradient and its statistics compiled to %v, want %v", names, want)
	}
	got, _ := runGraph(t, be, &b.g, b.args, 1, true)
	compare(t, "batch_norm", got, reference(t, &b.g, b.args, 1), 2e-4)
}
