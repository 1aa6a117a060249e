//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"math"

	"github.com/ag-go/ag/backend"
)

// dropKey is a dropout mask: its draws and probability.
type dropKey struct {
	u tensor
	p float32
}

// dropout: one custom op on ggml-cpu (ag_dropout: the mask, its scale and
// the product). On ggml-vulkan the decomposition's inside, scale and
// product, the scaled mask made once per draws and probability: the
// gradient's dropout (over dy and the same draws) is one product.
var _ = lowerComposite(backend.OpDropout, 24, func(l *lowering, n *backend.Node) tensor {
	x, u := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	s := backend.DropoutScale(n.A)
	if l.d.isCPU {
		return C.ag_dropout_op(l.ctx, x, u, C.float(n.A), C.float(s))
	}
	key := dropKey{u, n.A}
	m, ok := l.dropmemo[key]
	if !ok {
		below := math.Nextafter32(n.A, float32(math.Inf(-1)))
		in := backend.Node{Op: backend.OpInside, In: n.In[1:2], Shape: n.Shape, A: below, B: 2}
		m = l.scaleBias(l.lowerUnary(&in), s, 0)
		if l.dropmemo == nil {
			l.dropmemo = map[dropKey]tensor{}
		}
		l.dropmemo[key] = m
	}
	return C.ggml_mul(l.ctx, x, m)
})
