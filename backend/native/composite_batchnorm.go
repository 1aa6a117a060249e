//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// batch_norm, batch_norm_back and batch_norm_stats: ggml has no batch
// norm. On ggml-cpu one custom op each (ag_batch_norm, over each channel's
// N blocks of contiguous values; the channel axis, IR axis 1, is ggml axis
// rank-2). On ggml-vulkan the kernels of build.sh's patch 0015 where
// probeBatchNorm saw their numbers: partial sums over
// backend.BatchNormSplits chunks of each channel, then the channels'
// statistics and the elementwise pass (three nodes), or the mean and
// variance from the forward's sums (one more node; bnSums shares them);
// else the device drops the three ops and nn's BatchNorm takes core's
// primitives (about 15 ggml nodes forward and 30 backward, most of them
// full passes). The channels permuted to rows and ggml_norm over C rows
// of N*H*W values (a workgroup a row) made an H100's convnet step 2-10%
// slower than the primitives (bench/results/h100-2026-12-06-s25c.txt).
var _ = lowerComposite(backend.OpBatchNorm, 24, func(l *lowering, n *backend.Node) tensor {
	x := l.contiguous(l.in(n, 0))
	if !l.d.isCPU {
		return C.ag_vk_batch_norm(l.ctx, x, nil, l.bnSums(x, n.Shape), C.float(n.A), C.int(len(n.Shape)-2), C.int(backend.BatchNormSplits(n.Shape)))
	}
	return C.ag_batch_norm_op(l.ctx, x, nil, C.float(n.A), C.int(len(n.Shape)-2))
})

var _ = lowerComposite(backend.OpBatchNormBack, 40, func(l *lowering, n *backend.Node) tensor {
	x, dy := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	if !l.d.isCPU {
		cd, s := C.int(len(n.Shape)-2), C.int(backend.BatchNormSplits(n.Shape))
		return C.ag_vk_batch_norm(l.ctx, x, dy, C.ag_vk_batch_norm_sums(l.ctx, x, dy, cd, s), C.float(n.A), cd, s)
	}
	return C.ag_batch_norm_op(l.ctx, x, dy, C.float(n.A), C.int(len(n.Shape)-2))
})

var _ = lowerComposite(backend.OpBatchNormStats, 8, func(l *lowering, n *backend.Node) tensor {
	xs := l.inShape(n, 0)
	x := l.contiguous(l.in(n, 0))
	if !l.d.isCPU {
		return C.ag_vk_batch_norm_stats(l.ctx, x, l.bnSums(x, xs), C.int(len(xs)-2), C.int(backend.BatchNormSplits(xs)))
	}
	return C.ag_batch_norm_stats_op(l.ctx, x, C.int(len(xs)-2))
})

// bnSums returns the partial sums of batch norm's forward over x of IR
// shape xs (ggml-vulkan), made once per x: batch_norm and the running
// statistics' batch_norm_stats read the same.
func (l *lowering) bnSums(x tensor, xs []int) tensor {
	if s, ok := l.bnmemo[x]; ok {
		return s
	}
	s := C.ag_vk_batch_norm_sums(l.ctx, x, nil, C.int(len(xs)-2), C.int(backend.BatchNormSplits(xs)))
	if l.bnmemo == nil {
		l.bnmemo = map[tensor]tensor{}
	}
	l.bnmemo[x] = s
	return s
}
