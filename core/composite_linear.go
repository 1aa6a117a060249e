package core

import (
	"fmt"

	"github.com/ag-go/ag/backend"
)

// linear records x [..., K] (rank >= 2) times the matrix w [K, N] (stored
// [N, K] with transB) as one backend.OpLinear: MatMul's product of a batch
// by a matrix. ggml multiplies the batch directly; other backends run its
// decomposition, the reshapes around one matmul that MatMul recorded
// before. The operands are rounded to the device's matmul precision as
// matmul's.
func linear(x, w *Tensor, transB bool) *Tensor {
	x, w = roundOperands(x, w)
	r := x.Rank()
	k, n := w.shape[0], w.shape[1]
	if transB {
		k, n = n, k
	}
	if x.shape[r-1] != k {
		panic(fmt.Sprintf("core.MatMul: inner dimensions differ: %v x %v (trans %t)", x.shape, w.shape, transB))
	}
	var buf [backend.MaxRank]int // scratch: recordShaped copies it
	s := append(buf[:0], x.shape...)
	s[r-1] = n
	return x.dev.recordShaped("MatMul", backend.OpLinear, s, attrs{TransB: transB}, x, w)
}

// linearBackW records x^T g [K, N] of x [..., K] and g [..., N] over all
// their rows (backend.OpLinearBackW): linear's weight gradient, rounded as
// matmul's operands.
func linearBackW(x, g *Tensor) *Tensor {
	x, g = roundOperands(x, g)
	r := x.Rank()
	return x.dev.recordShaped("MatMul", backend.OpLinearBackW, []int{x.shape[r-1], g.shape[r-1]}, attrs{}, x, g)
}

var _ = defineComposite(backend.OpLinear, composite{
	// matmul's gradients: dx = g op(w)^T, a linear too; dw = x^T g, or
	// its transpose g^T x for w stored transposed
	grad: func(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
		x, w, tb := in[0], in[1], n.attr.TransB
		switch {
		case k == 0:
			return linear(g, w, !tb)
		case !tb:
			return linearBackW(x, g)
		default:
			return linearBackW(g, x)
		}
	},
})

var _ = defineComposite(backend.OpLinearBackW, composite{
	// out = x^T g: dx = g G^T and dg = x G for out's gradient G [K, N]
	// (a second derivative, as matmul's had)
	grad: func(_ *Tensor, in []*Tensor, gg *Tensor, k int) *Tensor {
		if k == 0 {
			return linear(in[1], gg, true)
		}
		return linear(in[0], gg, false)
	},
})
