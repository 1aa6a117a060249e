//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// softmax_ext is ggml_soft_max_ext with an f32 mask: an f16 one would turn
// core's -1e30 into -Inf, and a wholly masked row into NaN. ggml reads one
// mask row per row of x (mask ne1 >= x's) and broadcasts the mask over
// dims 2 and 3 by a modulo, which the IR's broadcast (1 or equal) is a
// case of; a mask shared by the rows (or columns) is repeated to [Tk, Tq].
// Both kernels run in place of x or of a full-shape mask: each output
// element reads only its own x and mask elements, before writing.
var _ = lowerComposite(backend.OpSoftmaxExt, 16, func(l *lowering, n *backend.Node) tensor {
	x, m := l.contiguous(l.in(n, 0)), l.in(n, 1)
	w := ne(n.Shape)
	if m.ne[0] != w[0] || m.ne[1] != w[1] {
		m = C.ggml_repeat_4d(l.ctx, m, w[0], w[1], m.ne[2], m.ne[3])
	}
	return C.ggml_soft_max_ext(l.ctx, x, l.contiguous(m), C.float(n.A), 0)
})

// softmax_ext_back is ggml_soft_max_ext_back(dy, y). ggml-alloc may run it
// in place of either source, and ggml-cpu's kernel copies dy into dx
// before it multiplies by y: over dy that is safe, over y it reads its own
// result. y is marked an output there, which ggml-alloc never reuses
// (ggml-vulkan's kernel reads an element's g and y before writing it).
var _ = lowerComposite(backend.OpSoftmaxExtBack, 16, func(l *lowering, n *backend.Node) tensor {
	y, dy := l.contiguous(l.in(n, 0)), l.contiguous(l.in(n, 1))
	if l.d.isCPU {
		C.ggml_set_output(y)
	}
	return C.ggml_soft_max_ext_back(l.ctx, dy, y, C.float(n.A), 0)
})
