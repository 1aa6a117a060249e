//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// rms_norm is ggml_rms_norm (ggml-vulkan fuses it with a following gain's
// mul).
var _ = lowerComposite(backend.OpRMSNorm, 8, func(l *lowering, n *backend.Node) tensor {
	return C.ggml_rms_norm(l.ctx, l.contiguous(l.in(n, 0)), C.float(n.A))
})

// rms_norm_back: ggml_rms_norm_back on ggml-vulkan (gradient first). On
// ggml-cpu one custom op (ag_rms_norm_back): ggml-cpu's kernel sums x*x in
// f32 and reads x after writing dx, wrong where ggml-alloc runs it in
// place of x.
var _ = lowerComposite(backend.OpRMSNormBack, 8, func(l *lowering, n *backend.Node) tensor {
	x, dy := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	if l.d.isCPU {
		return C.ag_rms_norm_back_op(l.ctx, x, dy, C.float(n.A))
	}
	return C.ggml_rms_norm_back(l.ctx, dy, x, C.float(n.A))
})
