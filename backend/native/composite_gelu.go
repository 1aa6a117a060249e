//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// gelu: on ggml-cpu the f32 custom op ag_gelu (ggml-cpu's gelu reads an
// f16 table, 1e-3 off); ggml-vulkan's gelu shader computes in f32,
// 0.5*x*(2 - 2/(exp(2y) + 1)), within the tolerance (its cancellation for
// negative x is 1 + tanh's) and with the definition's special values.
var _ = lowerComposite(backend.OpGELU, 16, func(l *lowering, n *backend.Node) tensor {
	x := l.contiguous(l.in(n, 0))
	if l.d.isCPU {
		return C.ag_gelu_op(l.ctx, x, nil)
	}
	return C.ggml_gelu(l.ctx, x)
})

// gelu_back: one custom op on ggml-cpu (ag_gelu_back); on ggml-vulkan one
// silu_back node in patch 0012's GELU mode where the device computes it
// (probeGeluBack), else backend.OpGELUBack's decomposition in 13 ggml
// nodes: dy*(s + x*s*s'*k), s = sigmoid(z), s' = sigmoid(-z), k = 2c*(1 +
// 3a*min(x^2, 1e8)). Each node is a pass over [tokens, 4*width]: on an
// H100 the 13 took some 9 ms of the GPT 12x768 step's 58 (ctx 512, batch 8).
var _ = lowerComposite(backend.OpGELUBack, 24, func(l *lowering, n *backend.Node) tensor {
	x, dy := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	if l.d.isCPU {
		return C.ag_gelu_op(l.ctx, x, dy)
	}
	if l.d.geluBack {
		return C.ag_gelu_back_vk(l.ctx, x, dy)
	}
	const c, a = 0.7978845608028654, 0.044715
	ctx := l.ctx
	x2 := C.ggml_sqr(ctx, x)
	z := C.ggml_mul(ctx, x, l.scaleBias(x2, 2*c*a, 2*c))
	s := C.ggml_sigmoid(ctx, z)
	s1 := C.ggml_sigmoid(ctx, C.ggml_neg(ctx, z))
	xq := C.ggml_mul(ctx, C.ggml_mul(ctx, x, s), s1)
	// x^2's clamp keeps NaN or not: x*s*s' is NaN already where x is
	k := l.scaleBias(C.ag_clamp_to(ctx, x2, 0, 1e8), 6*c*a, 2*c)
	g := C.ggml_add(ctx, s, C.ggml_mul(ctx, xq, k))
	return C.ggml_mul(ctx, g, dy)
})
