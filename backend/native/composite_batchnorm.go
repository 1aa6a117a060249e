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
// On ggml-vulkan the channels become rows ([N, C, L] permuted to [C, N*L])
// and layer norm's lowering runs on them: centred, then ggml_norm, or
// ggml_rms_norm_back of the centred rows and gradient; then permuted back.
var _ = lowerComposite(backend.OpBatchNorm, 24, func(l *lowering, n *backend.Node) tensor {
	x := l.contiguous(l.in(n, 0))
	if l.d.isCPU {
		return C.ag_batch_norm_op(l.ctx, x, nil, C.float(n.A), C.int(len(n.Shape)-2))
	}
	d := l.centredChannels(x, n.Shape)
	return l.channelsBack(C.ggml_norm(l.ctx, d, C.float(n.A)), n.Shape)
})

var _ = lowerComposite(backend.OpBatchNormBack, 40, func(l *lowering, n *backend.Node) tensor {
	x, dy := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	if l.d.isCPU {
		return C.ag_batch_norm_op(l.ctx, x, dy, C.float(n.A), C.int(len(n.Shape)-2))
	}
	d, c := l.centredChannels(x, n.Shape), l.centredChannels(dy, n.Shape)
	return l.channelsBack(C.ggml_rms_norm_back(l.ctx, c, d, C.float(n.A)), n.Shape)
})

// centredChannels turns x of IR shape [N, C, ...] (contiguous) into C rows
// of its channels' N*L values (ggml [N*L, C]), each minus its mean.
func (l *lowering) centredChannels(x tensor, shape []int) tensor {
	nb, c := C.int64_t(shape[0]), C.int64_t(shape[1])
	ln := C.int64_t(backend.NumElems(shape)) / (nb * c)
	x3 := C.ggml_reshape_3d(l.ctx, x, ln, c, nb)
	rows := C.ggml_reshape_2d(l.ctx, C.ggml_cont(l.ctx, C.ggml_permute(l.ctx, x3, 0, 2, 1, 3)), ln*nb, c)
	return C.ggml_sub(l.ctx, rows, C.ggml_mean(l.ctx, rows))
}

// channelsBack is centredChannels' layout undone: ggml [N*L, C] to IR
// shape [N, C, ...].
func (l *lowering) channelsBack(t tensor, shape []int) tensor {
	nb, c := C.int64_t(shape[0]), C.int64_t(shape[1])
	ln := C.int64_t(backend.NumElems(shape)) / (nb * c)
	t3 := C.ggml_reshape_3d(l.ctx, t, ln, nb, c)
	return l.reshape(C.ggml_cont(l.ctx, C.ggml_permute(l.ctx, t3, 0, 2, 1, 3)), shape)
}
