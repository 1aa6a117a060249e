//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

var _ = lowerComposite(backend.OpCrossEntropy, 48, (*lowering).crossEntropy)

// cross_entropy_back is (softmax(x) - onehot)*g/B: ggml's soft_max, the
// one-hot of the forward's (clamped, rounded) labels, one broadcast product.
var _ = lowerComposite(backend.OpCrossEntropyBack, 48, func(l *lowering, n *backend.Node) tensor {
	ctx := l.ctx
	b, c := n.Shape[0], n.Shape[1]
	d := C.ggml_sub(ctx, C.ggml_soft_max(ctx, l.contiguous(l.in(n, 0))), l.oneHot(l.in(n, 1), b, c))
	return C.ggml_mul(ctx, d, l.scaleBias(l.in(n, 2), 1/float32(b), 0))
})

// crossEntropy lowers cross_entropy: each row's log-probability at its
// label picked by a batched get_rows (row i of the [1, C, B] log-softmax
// at index label_i: no one-hot product, whose 0*-Inf would be NaN), their
// sum scaled by -1/B, plus sqrt(-sum(d^2)) of the labels' distance d from
// 0..C-1 (-0, or NaN for a bad label).
func (l *lowering) crossEntropy(n *backend.Node) tensor {
	ctx := l.ctx
	xs := l.inShape(n, 0)
	b, c := xs[0], xs[1]
	lab := l.in(n, 1)
	lp := l.logSoftmax(l.contiguous(l.in(n, 0)))
	_, i32 := l.indices(lab, c)
	rows := C.ggml_reshape_3d(ctx, C.ggml_cont(ctx, lp), 1, C.int64_t(c), C.int64_t(b))
	picked := C.ggml_get_rows(ctx, rows, C.ggml_reshape_2d(ctx, i32, 1, C.int64_t(b)))
	loss := l.scaleBias(C.ggml_sum(ctx, picked), -1/float32(b), 0)
	d := C.ggml_sub(ctx, lab, l.clamp(lab, 0, float32(c-1)))
	poison := C.ggml_sqrt(ctx, C.ggml_neg(ctx, C.ggml_sum(ctx, C.ggml_sqr(ctx, d))))
	return l.reshape(C.ggml_add(ctx, loss, poison), n.Shape)
}
