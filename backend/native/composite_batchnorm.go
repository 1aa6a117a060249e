//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// batch_norm and batch_norm_back: one custom op each on ggml-cpu
// (ag_batch_norm, over each channel's N blocks of contiguous values); ggml
// has no batch norm, and ggml-vulkan runs no custom op, so there the probe
// leaves them to the decomposition. The channel axis, IR axis 1, is ggml
// axis rank-2.
var _ = lowerComposite(backend.OpBatchNorm, 8, func(l *lowering, n *backend.Node) tensor {
	return C.ag_batch_norm_op(l.ctx, l.contiguous(l.in(n, 0)), nil, C.float(n.A), C.int(len(n.Shape)-2))
})

var _ = lowerComposite(backend.OpBatchNormBack, 8, func(l *lowering, n *backend.Node) tensor {
	x, dy := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	return C.ag_batch_norm_op(l.ctx, x, dy, C.float(n.A), C.int(len(n.Shape)-2))
})
