//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// relu_mask is one node: ggml-vulkan's sign step (a clamp to the empty
// interval [1, 0], patch 0007, where probeSignStep found it) or ggml-cpu's
// ag_sign_step; elsewhere its decomposition's three nodes, lowered as the
// primitives are.
var _ = lowerComposite(backend.OpReLUMask, 16, func(l *lowering, n *backend.Node) tensor {
	x := l.in(n, 0)
	switch {
	case l.d.isCPU:
		return l.custom(C.ggml_custom_op_t(C.ag_sign_step), x.ne, x)
	case l.d.signStep:
		return C.ag_clamp_to(l.ctx, x, 1, 0)
	}
	return l.scaleBias(l.clamp(l.scaleBias(x, 0x1p127, 0), 0, 0x1p-22), 0x1p22, 0)
})
