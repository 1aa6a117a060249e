//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// linear: on ggml-cpu one mul_mat of the batch x [..., K] itself by W^T
// (ggml_mul_mat broadcasts its first operand over the second's dims 2 and
// 3), with no reshapes around it. On ggml-vulkan the flat product of a
// matmul: a reshape is no kernel there, and matMul splits the rows for
// ggml-vulkan's tile size (tune.go), which a batch's own row count would
// override; a long K is split there too.
var _ = lowerComposite(backend.OpLinear, 40, func(l *lowering, n *backend.Node) tensor {
	x, w := l.in(n, 0), l.in(n, 1)
	xs := l.inShape(n, 0)
	k := xs[len(xs)-1]
	if l.d.isCPU {
		wt := w // W^T stored [N, K]: rows of K, as mul_mat's x
		if !n.TransB {
			wt = l.transposed(w)
		}
		return C.ggml_mul_mat(l.ctx, wt, x)
	}
	half := false
	if x16, w16, ok := l.halfOperands(n, k); ok {
		x, w, half = x16, w16, true
	}
	rows := backend.NumElems(xs[:len(xs)-1])
	y := l.matMul(l.reshape(l.contiguous(x), []int{rows, k}), w, false, n.TransB, half)
	return l.reshape(y, n.Shape)
})

// linear_back_w: on ggml-cpu ag_matmul_tn over every row of the batch
// (x and dy as they are: their rows are evenly strided); elsewhere, or for
// strided views, matmul's product of the flat [M, K]^T and [M, N].
var _ = lowerComposite(backend.OpLinearBackW, 40, func(l *lowering, n *backend.Node) tensor {
	x, g := l.in(n, 0), l.in(n, 1)
	if l.d.isCPU && evenRows(x) && evenRows(g) {
		return l.matmulTN(x, g)
	}
	xs := l.inShape(n, 0)
	rows := backend.NumElems(xs[:len(xs)-1])
	half := false
	if x16, g16, ok := l.halfOperands(n, rows); ok {
		x, g, half = x16, g16, true
	}
	flat := func(t tensor, cols int) tensor { return l.reshape(l.contiguous(t), []int{rows, cols}) }
	return l.matMul(flat(x, n.Shape[0]), flat(g, n.Shape[1]), true, false, half)
})
