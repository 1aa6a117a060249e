//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// max_pool2d is ggml_pool_2d (GGML_OP_POOL_MAX) over x, whose ne [W, H, C,
// N] pools along ne0 and ne1 into [OW, OH, C, N], ag's [N, C, OH, OW].
// ggml's pool skips the padding as ag's -Inf does, but starts at -FLT_MAX
// and skips NaN (ggml-cpu; ggml-vulkan's GLSL max may return either), so
// poolFix takes its result to ir.go's: -Inf for a window of -Inf, NaN
// where an average pool of tanh(x) over the same windows is NaN. The
// index table (In[1]) is not read.
var _ = lowerComposite(backend.OpMaxPool2d, 20, func(l *lowering, n *backend.Node) tensor {
	w := backend.WindowOf(n)
	x := l.contiguous(l.in(n, 0))
	pool := func(t tensor, op C.enum_ggml_op_pool) tensor {
		return C.ggml_pool_2d(l.ctx, t, op, C.int(w.KW), C.int(w.KH), C.int(w.SW), C.int(w.SH), C.float(w.PW), C.float(w.PH))
	}
	return l.poolFix(pool(x, C.GGML_OP_POOL_MAX), pool(C.ggml_tanh(l.ctx, x), C.GGML_OP_POOL_AVG))
})

// max_pool2d_back: on ggml-cpu one custom op (ag_max_pool_back); on
// ggml-vulkan ggml_pool_2d_back, whose Vulkan kernel is build.sh's patch
// 0014, where probeMaxPoolBack saw its numbers (else newDevice drops the
// op and core composes the gradient from primitives, about a hundred ggml
// nodes a pool).
var _ = lowerComposite(backend.OpMaxPool2dBack, 8, func(l *lowering, n *backend.Node) tensor {
	w := backend.WindowOf(n)
	x, g := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	if l.d.isCPU {
		return C.ag_max_pool_back_op(l.ctx, x, g, C.int(w.KH), C.int(w.KW), C.int(w.SH), C.int(w.SW), C.int(w.PH), C.int(w.PW))
	}
	return C.ggml_pool_2d_back(l.ctx, g, x, C.GGML_OP_POOL_MAX, C.int(w.KW), C.int(w.KH), C.int(w.SW), C.int(w.SH), C.float(w.PW), C.float(w.PH))
})
