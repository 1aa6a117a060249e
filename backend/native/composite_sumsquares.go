//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// sumSquaresGroup is how many inputs one ag_sum_squares reads: ggml's
// custom ops take fewer than GGML_MAX_SRC sources.
const sumSquaresGroup = C.GGML_MAX_SRC - 1

// sum_squares: on ggml-cpu one ag_sum_squares per nine inputs and the adds
// of their sums; on ggml-vulkan sqr and sum per input and the adds.
var _ = lowerVariadic(backend.OpSumSquares, 8, 4, func(l *lowering, n *backend.Node) tensor {
	ctx := l.ctx
	var total tensor
	addTo := func(s tensor) {
		if total == nil {
			total = s
		} else {
			total = C.ggml_add(ctx, total, s)
		}
	}
	if l.d.isCPU {
		for k := 0; k < len(n.In); k += sumSquaresGroup {
			var src []tensor
			for j := k; j < min(k+sumSquaresGroup, len(n.In)); j++ {
				src = append(src, l.in(n, j))
			}
			addTo(C.ggml_custom_4d(ctx, C.GGML_TYPE_F32, 1, 1, 1, 1, &src[0], C.int(len(src)), C.ggml_custom_op_t(C.ag_sum_squares), 1, nil))
		}
	} else {
		for j := range n.In {
			addTo(C.ggml_sum(ctx, C.ggml_sqr(ctx, l.in(n, j))))
		}
	}
	return l.reshape(total, n.Shape)
})
