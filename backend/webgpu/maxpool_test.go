package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend"
)

// A max pool's gradient is one dispatch of its own kernel here (the
// backend lists backend.OpMaxPool2dBack in Caps.Composites), where core
// composed it of a gather, the first-maximum marks and an inverse gather;
// the conformance suite checks its numbers (max_pool2d_back/...).
func TestMaxPoolBackOneKernel(t *testing.T) {
	be := openTest(t)
	if !be.Caps().Native(backend.OpMaxPool2dBack) {
		t.Fatalf("Caps.Composites = %v: want max_pool2d_back native", be.Caps().Composites)
	}
	w := backend.Window{KH: 2, KW: 2, SH: 2, SW: 2, DH: 1, DW: 1}
	xs := []int{4, 8, 6, 6}
	oh, ow := w.Out(xs[2], xs[3])
	table := len(w.Rows(xs[0], xs[2], xs[3]))
	g := &backend.Graph{NumArgs: 4, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: xs}, {Op: backend.OpArg, Arg: 1, Shape: []int{4, 8, oh, ow}}, {Op: backend.OpArg, Arg: 2, Shape: []int{table}},
		{Op: backend.OpMaxPool2dBack, In: []int{0, 1, 2}, Shape: xs, Perm: w.Attr()},
	}, Outputs: []backend.Output{{Node: 3, Arg: 3}}}
	ks := compiledKernels(t, be, g)
	if len(ks) != 1 || ks[0].name != "max_pool2d_back" {
		names := make([]string, len(ks))
		for i, k := range ks {
			names[i] = k.name
		}
		t.Errorf("max_pool2d_back compiled to %v, want the one kernel max_pool2d_back", names)
	}
}
