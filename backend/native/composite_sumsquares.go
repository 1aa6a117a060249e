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
// of their sums; on ggml-vulkan patch 0018's kernels (sumSquaresKernels),
// else sqr and row sums per input and the adds.
var _ = lowerVariadic(backend.OpSumSquares, 8, 8, func(l *lowering, n *backend.Node) tensor {
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
	} else if l.d.sumSquares {
		total = l.sumSquaresKernels(n)
	} else {
		for _, s := range l.sumSquaresWaves(n) {
			addTo(s)
		}
	}
	return l.reshape(total, n.Shape)
})

// sumSquaresKernels is sum_squares by patch 0018's kernels where
// probeSumSquares saw their numbers (vkSumSquares).
func (l *lowering) sumSquaresKernels(n *backend.Node) tensor {
	src := make([]tensor, len(n.In))
	for j := range n.In {
		src[j] = l.contiguous(l.in(n, j))
	}
	return vkSumSquares(l.ctx, src, l.expand)
}

// vkSumSquares is the sum of the squares of the contiguous f32 src by patch
// 0018's kernels: three inputs a node, every group's partial sums first
// (expand, when given, adds each to the graph then: nodes independent of
// each other, between which ggml-vulkan puts no barrier), then each
// group's added to the sum so far. Two nodes per three inputs where
// sumSquaresWaves makes three or four per input.
func vkSumSquares(ctx *C.struct_ggml_context, src []tensor, expand func(tensor)) tensor {
	var parts []tensor
	for k := 0; k < len(src); k += 3 {
		group := src[k:min(k+3, len(src))]
		longest := 0
		for _, t := range group {
			longest = max(longest, int(C.ggml_nelements(t)))
		}
		p := C.ag_vk_sum_squares_parts(ctx, &group[0], C.int(len(group)), C.int(sumSquaresSplits(longest)))
		if expand != nil {
			expand(p)
		}
		parts = append(parts, p)
	}
	var total tensor
	for _, p := range parts {
		total = C.ag_vk_sum_squares_add(ctx, p, total)
	}
	return total
}

// sumSquaresSplits is how many chunks patch 0018 splits each input of a
// group whose longest has n elements into: chunks of at least 1024
// values, at most 256 (768 workgroups a node).
func sumSquaresSplits(n int) int {
	return min(256, max(1, (n+1023)/1024))
}

// sumSquaresWaves returns each input's sum of squares on a GPU device,
// computed in waves: every input's squares, then every input's first
// stage of row sums, and so on (sumRows' stages), each wave added to the
// graph before the next. ggml-vulkan puts a barrier before a node that
// reads an unsynchronized result, so input by input (square, sums, add)
// a step's ~200 gradients cost ~650 barriers, each waiting for the one
// small node before it; in waves the nodes of a wave run side by side,
// and the adds of the sums that follow are consecutive, which ggml-vulkan
// fuses nine at a time (multi_add). The sums are sumRows' own (the same
// stages, so the same numbers): sumRows of the flat squares, not
// ggml_sum, whose one workgroup took 73 us per 65536-element gradient on
// an H100 (5.3 ms of a 17 ms GPT 4x256 step).
func (l *lowering) sumSquaresWaves(n *backend.Node) []tensor {
	ctx := l.ctx
	cur := make([]tensor, len(n.In))
	for j := range n.In {
		sq := C.ggml_sqr(ctx, l.contiguous(l.in(n, j)))
		cur[j] = C.ggml_reshape_1d(ctx, sq, C.ggml_nelements(sq))
		l.expand(cur[j])
	}
	for {
		more := false
		for j, t := range cur {
			if t.ne[0] >= stagedRowLen {
				cur[j] = l.sumRowsStage(t)
				l.expand(cur[j])
				more = true
			}
		}
		if !more {
			break
		}
	}
	for j, t := range cur {
		if t.ne[0] > 1 {
			cur[j] = C.ggml_sum_rows(ctx, t)
			l.expand(cur[j])
		}
	}
	return cur
}
