//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// batch_norm and batch_norm_back: ggml has no batch norm. On ggml-cpu one
// custom op each (ag_batch_norm, over each channel's N blocks of
// contiguous values; the channel axis, IR axis 1, is ggml axis rank-2).
// ggml-vulkan runs no custom op, so its probe drops both and the
// decomposition runs there (nn's BatchNorm then takes its primitives):
// the channels permuted to rows and ggml_norm over C rows of N*H*W
// values (a workgroup a row) made an H100's convnet step 2-10% slower
// than the primitives (bench/results/h100-2026-12-06-s25c.txt).
var _ = lowerComposite(backend.OpBatchNorm, 24, func(l *lowering, n *backend.Node) tensor {
	x := l.contiguous(l.in(n, 0))
	return C.ag_batch_norm_op(l.ctx, x, nil, C.float(n.A), C.int(len(n.Shape)-2))
})

var _ = lowerComposite(backend.OpBatchNormBack, 40, func(l *lowering, n *backend.Node) tensor {
	x, dy := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	return C.ag_batch_norm_op(l.ctx, x, dy, C.float(n.A), C.int(len(n.Shape)-2))
})
