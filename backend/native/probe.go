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

// probeUnsupported lowers a sample graph of every op (no device memory, no
// compute) and lists the ops the device cannot run.
func (d *device) probeUnsupported() []backend.Op {
	var out []backend.Op
	for _, op := range backend.Ops() {
		g := backend.SampleGraph(op)
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
