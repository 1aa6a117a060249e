//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// layer_norm is ggml_norm. ggml-vulkan's norm shader took the variance as
// E[x^2] - E[x]^2 in one pass, which cancels for rows far from 0 for their
// spread (mean 100, variance 0.3: 3e-3 off); build.sh's patch 0013 gives
// it two passes, as ggml-cpu's kernel. Where probeNorm did not see them,
// the row is centred first.
var _ = lowerComposite(backend.OpLayerNorm, 16, func(l *lowering, n *backend.Node) tensor {
	x := l.contiguous(l.in(n, 0))
	if !l.d.isCPU && !l.d.twoPassNorm {
		x = C.ggml_sub(l.ctx, x, C.ggml_mean(l.ctx, x))
	}
	return C.ggml_norm(l.ctx, x, C.float(n.A))
})

// layer_norm_back: on ggml-cpu one custom op (ag_layer_norm_back). On
// ggml-vulkan: layer norm is RMS norm of the centred row d = x - mean(x)
// (its mean square is the variance), and centring is a symmetric
// projection that commutes with rms_norm_back's when sum(d) = 0:
// dx = rms_norm_back(dy - mean(dy), d). That is one node where
// probeLayerNormBack saw patch 0013's mode, which centres both inside the
// kernel (ag_layer_norm_back_vk), else five. The centred gradient carries
// an infinite dy to its whole row (NaN), as the definition asks.
var _ = lowerComposite(backend.OpLayerNormBack, 24, func(l *lowering, n *backend.Node) tensor {
	ctx := l.ctx
	x, dy := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	if l.d.isCPU {
		return C.ag_layer_norm_back_op(ctx, x, dy, C.float(n.A))
	}
	if l.d.layerNormBack {
		return C.ag_layer_norm_back_vk(ctx, x, dy, C.float(n.A))
	}
	c := C.ggml_sub(ctx, dy, C.ggml_mean(ctx, dy))
	d := C.ggml_sub(ctx, x, C.ggml_mean(ctx, x))
	return C.ggml_rms_norm_back(ctx, c, d, C.float(n.A))
})
