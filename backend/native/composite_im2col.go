//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// im2col is ggml_im2col with an f32 result: [IC*KH*KW, OW, OH, N] in ggml's
// order is im2col's [N*OH*OW, C*KH*KW]. ggml reads the kernel tensor's
// shape only ([KW, KH, C]); a small constant stands for it. The index
// table (In[1]) is not read.
var _ = lowerComposite(backend.OpIm2Col, 8, func(l *lowering, n *backend.Node) tensor {
	w := backend.WindowOf(n)
	x := l.inShape(n, 0)
	kern := l.constant([]int{x[1], w.KH, w.KW}, 0)
	t := C.ggml_im2col(l.ctx, kern, l.contiguous(l.in(n, 0)), C.int(w.SW), C.int(w.SH), C.int(w.PW), C.int(w.PH),
		C.int(w.DW), C.int(w.DH), true, C.GGML_TYPE_F32)
	return l.reshape(t, n.Shape)
})

// col2im is ggml_im2col_back (ggml-cpu; ggml-vulkan has none, so there the
// probe leaves it to the decomposition). ggml.c builds it with the
// gradient as src[0] and the kernel as src[1] (ggml's own backward passes
// them so, and ggml-cpu's kernel reads them so), whatever the header's
// argument names say.
var _ = lowerComposite(backend.OpCol2Im, 8, func(l *lowering, n *backend.Node) tensor {
	w := backend.WindowOf(n)
	x := n.Shape
	oh, ow := w.Out(x[2], x[3])
	kern := l.constant([]int{x[1], w.KH, w.KW}, 0)
	g := l.reshape(l.contiguous(l.in(n, 0)), []int{x[0], oh, ow, x[1] * w.KH * w.KW})
	shape := ne(x)
	return C.ggml_im2col_back(l.ctx, g, kern, &shape[0], C.int(w.SW), C.int(w.SH), C.int(w.PW), C.int(w.PH),
		C.int(w.DW), C.int(w.DH), true)
})
