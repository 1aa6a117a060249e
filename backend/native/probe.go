//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// probeGetRowsBack asks the device whether it runs GGML_OP_GET_ROWS_BACK.
func (d *device) probeGetRowsBack() bool {
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: 8 * C.ggml_tensor_overhead(), no_alloc: true})
	if ctx == nil {
		return false
	}
	defer C.ggml_free(ctx)
	src := C.ggml_new_tensor_2d(ctx, C.GGML_TYPE_F32, 3, 2)
	idx := C.ggml_new_tensor_1d(ctx, C.GGML_TYPE_I32, 2)
	shape := C.ggml_new_tensor_2d(ctx, C.GGML_TYPE_F32, 3, 4)
	return bool(C.ggml_backend_supports_op(d.be, C.ggml_get_rows_back(ctx, src, idx, shape)))
}

// sampleGraph is a small graph exercising op, used to fill Caps.Unsupported.
func sampleGraph(op backend.Op) *backend.Graph {
	arg := func(a int, shape ...int) backend.Node { return backend.Node{Op: backend.OpArg, Arg: a, Shape: shape} }
	g := &backend.Graph{}
	switch {
	case op == backend.OpArg:
		g.Nodes = []backend.Node{arg(0, 2, 3)}
	case op == backend.OpFill:
		g.Nodes = []backend.Node{{Op: op, Shape: []int{2, 3}, A: 1}}
	case op.IsBinary():
		g.Nodes = []backend.Node{arg(0, 2, 1), arg(1, 3), {Op: op, In: []int{0, 1}, Shape: []int{2, 3}}}
	case op.IsUnary(), op == backend.OpSoftmax, op == backend.OpLogSoftmax:
		g.Nodes = []backend.Node{arg(0, 2, 3), {Op: op, In: []int{0}, Shape: []int{2, 3}, A: 0.3, B: 2}}
	case op == backend.OpSum, op == backend.OpMax:
		g.Nodes = []backend.Node{arg(0, 2, 3, 4), {Op: op, In: []int{0}, Shape: []int{2, 1, 4}, Axis: 1}}
	case op == backend.OpReshape:
		g.Nodes = []backend.Node{arg(0, 2, 3), {Op: op, In: []int{0}, Shape: []int{3, 2}}}
	case op == backend.OpPermute:
		g.Nodes = []backend.Node{arg(0, 2, 3, 4), {Op: op, In: []int{0}, Shape: []int{4, 2, 3}, Perm: []int{2, 0, 1}}}
	case op == backend.OpExpand:
		g.Nodes = []backend.Node{arg(0, 3), {Op: op, In: []int{0}, Shape: []int{2, 3}}}
	case op == backend.OpSliceRows:
		g.Nodes = []backend.Node{arg(0, 4, 3), {Op: op, In: []int{0}, Shape: []int{2, 3}, Start: 1}}
	case op == backend.OpConcatRows:
		g.Nodes = []backend.Node{arg(0, 2, 3), arg(1, 1, 3), {Op: op, In: []int{0, 1}, Shape: []int{3, 3}}}
	case op == backend.OpGetRows:
		g.Nodes = []backend.Node{arg(0, 4, 3), arg(1, 2), {Op: op, In: []int{0, 1}, Shape: []int{2, 3}}}
	case op == backend.OpScatterAddRows:
		g.Nodes = []backend.Node{arg(0, 2, 3), arg(1, 2), {Op: op, In: []int{0, 1}, Shape: []int{4, 3}}}
	case op == backend.OpOneHot:
		g.Nodes = []backend.Node{arg(0, 2), {Op: op, In: []int{0}, Shape: []int{2, 5}}}
	case op == backend.OpMatMul:
		g.Nodes = []backend.Node{arg(0, 2, 3), arg(1, 3, 4), {Op: op, In: []int{0, 1}, Shape: []int{2, 4}}}
	case op == backend.OpAdamW:
		g.Nodes = []backend.Node{arg(0, 2, 3), arg(1, 2, 3), arg(2, 2, 3), arg(3, 2, 3), arg(4, 7),
			{Op: op, In: []int{0, 1, 2, 3, 4}, Shape: []int{2, 3}}}
	case op == backend.OpSGD:
		g.Nodes = []backend.Node{arg(0, 2, 3), arg(1, 2, 3), arg(2, 2, 3), arg(3, 3),
			{Op: op, In: []int{0, 1, 2, 3}, Shape: []int{2, 3}}}
	default:
		return nil
	}
	g.NumArgs = 5
	g.Outputs = []backend.Output{{Node: len(g.Nodes) - 1, Arg: 4}}
	if op.InPlace() {
		g.NumArgs = 6
		g.Outputs[0].Arg = 5
	}
	return g
}

// probeUnsupported lowers a sample graph of every op (no device memory, no
// compute) and lists the ops the device cannot run.
func (d *device) probeUnsupported() []backend.Op {
	var out []backend.Op
	for _, op := range backend.Ops() {
		g := sampleGraph(op)
		if g == nil {
			out = append(out, op)
			continue
		}
		l, err := d.lower(g)
		if err != nil {
			out = append(out, op)
			continue
		}
		l.free()
	}
	return out
}
