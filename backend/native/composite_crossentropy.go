//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

var _ = lowerComposite(backend.OpCrossEntropy, 48, (*lowering).crossEntropy)

// cross_entropy_back is (softmax(x) - onehot)*g/B: one node of patch
// 0016's kernel where probeCrossEntropy saw its numbers, else ggml's
// soft_max, the one-hot of the forward's (clamped, rounded) labels, one
// broadcast product.
var _ = lowerComposite(backend.OpCrossEntropyBack, 48, func(l *lowering, n *backend.Node) tensor {
	ctx := l.ctx
	b, c := n.Shape[0], n.Shape[1]
	if l.d.crossEntropy {
		return vkCrossEntropy(ctx, l.d.be, l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1)), l.contiguous(l.in(n, 2)))
	}
	d := C.ggml_sub(ctx, C.ggml_soft_max(ctx, l.contiguous(l.in(n, 0))), l.oneHot(l.in(n, 1), b, c))
	return C.ggml_mul(ctx, d, l.scaleBias(l.in(n, 2), 1/float32(b), 0))
})

// crossEntropy lowers cross_entropy: each row's log-probability at its
// label picked by a batched get_rows (row i of the [1, C, B] log-softmax
// at index label_i: no one-hot product, whose 0*-Inf would be NaN), their
// sum scaled by -1/B, plus sqrt(-sum(d^2)) of the labels' distance d from
// 0..C-1 (-0, or NaN for a bad label). Where probeCrossEntropy saw
// their numbers, patch 0016's kernel computes each row's loss instead (a
// node for 27), summed and scaled.
func (l *lowering) crossEntropy(n *backend.Node) tensor {
	ctx := l.ctx
	xs := l.inShape(n, 0)
	b, c := xs[0], xs[1]
	lab := l.in(n, 1)
	if l.d.crossEntropy {
		return l.reshape(vkCrossEntropy(ctx, l.d.be, l.contiguous(l.in(n, 0)), l.contiguous(lab), nil), n.Shape)
	}
	lp := l.logSoftmax(l.contiguous(l.in(n, 0)))
	_, i32 := l.indices(lab, c)
	rows := C.ggml_reshape_3d(ctx, C.ggml_cont(ctx, lp), 1, C.int64_t(c), C.int64_t(b))
	picked := C.ggml_get_rows(ctx, rows, C.ggml_reshape_2d(ctx, i32, 1, C.int64_t(b)))
	loss := l.scaleBias(C.ggml_sum(ctx, picked), -1/float32(b), 0)
	d := C.ggml_sub(ctx, lab, l.clamp(lab, 0, float32(c-1)))
	poison := C.ggml_sqrt(ctx, C.ggml_neg(ctx, C.ggml_sum(ctx, C.ggml_sqr(ctx, d))))
	return l.reshape(C.ggml_add(ctx, loss, poison), n.Shape)
}

// vkCrossEntropy is cross_entropy (g nil: the rows' losses by
// ag_vk_cross_entropy, summed and scaled by 1/B) or cross_entropy_back (g
// the loss's gradient) over the contiguous logits x (ggml ne [C, B]) and
// labels. Where be does not run the kernel (a ggml without patch 0016) it
// returns that node, which probeRun then refuses, rather than a sum over it.
func vkCrossEntropy(ctx *C.struct_ggml_context, be C.ggml_backend_t, x, lab, g tensor) tensor {
	k := C.ag_vk_cross_entropy(ctx, x, C.ggml_reshape_1d(ctx, lab, C.ggml_nelements(lab)), g)
	if g != nil || !C.ggml_backend_supports_op(be, k) {
		return k
	}
	return C.ggml_scale(ctx, C.ggml_sum(ctx, k), C.float(1/float64(x.ne[1])))
}
