//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// sum_to: x's axes collapse into runs of summed and of kept axes (axes of
// size 1 dropped). A trailing summed run is a row sum; a leading one over
// a kept run is a column sum of the [R, K] matrix (colSums: one kernel);
// any other summed run (between kept ones) is moved to the front and
// summed as rows (lowerReduce's way).
var _ = lowerComposite(backend.OpSumTo, 96, func(l *lowering, n *backend.Node) tensor {
	x := l.inShape(n, 0)
	off := len(x) - len(n.Shape)
	var runs []sumRun
	for ax, d := range x {
		if d == 1 {
			continue
		}
		sum := ax < off || n.Shape[ax-off] == 1
		if k := len(runs) - 1; k >= 0 && runs[k].sum == sum {
			runs[k].size *= d
		} else {
			runs = append(runs, sumRun{d, sum})
		}
	}
	v := l.contiguous(l.in(n, 0))
	for {
		k := len(runs) - 1
		for k >= 0 && !runs[k].sum {
			k--
		}
		switch {
		case k < 0: // nothing (left) to sum
			return l.reshape(v, n.Shape)
		case k == 0 && len(runs) == 2 && runs[0].size > maxShortSum: // leading over kept: columns
			return l.reshape(l.colSums(v, runs[0].size, runs[1].size), n.Shape)
		default: // run k is ggml dim len(runs)-1-k
			v = l.sumAxis(l.reshape(v, runShape(runs)), len(runs)-1-k)
		}
		runs = append(runs[:k], runs[k+1:]...)
		if len(runs) == 0 {
			return l.reshape(v, n.Shape)
		}
	}
})

// sumRun is a run of adjacent axes of sum_to's input, summed or kept.
type sumRun struct {
	size int
	sum  bool
}

// runShape is the IR shape of the runs, outermost first.
func runShape(runs []sumRun) []int {
	s := make([]int, len(runs))
	for k, r := range runs {
		s[k] = r.size
	}
	return s
}

// colSums sums the R rows of K values of the contiguous x (of R*K
// elements, in any ggml shape) into ne [K, 1] with one kernel where it
// can. ggml-cpu: 1^T x, ag_matmul_tn with a ones column (exact products,
// one running f32 sum per column); it reads its second source as R rows
// of K floats nb[1] apart, which a contiguous x whose ne0 is K is (say
// [K, T, B]) without a reshape node. A GPU device: average pools over x as
// a [K, R] image along its rows (poolStages: windows of poolStage, then
// the rest), times what they divided by, in x's own layout (ggml-vulkan
// has no out_prod, and its mul_mat rounds a strided (transposed) operand
// to f16; the transposed copy's row sums cost a copy of x); two nodes of
// patch 0017's kernel where probeColSums saw their numbers (the pools were
// four nodes at 4096 rows, 9% of a GPT 12x768 step on an H100).
func (l *lowering) colSums(x tensor, R, K int) tensor {
	if l.d.colSums {
		return C.ag_vk_col_sums(l.ctx, x, C.int64_t(R), C.int64_t(K), C.int(colSumSplits(R, K)))
	}
	if l.d.isCPU {
		if int(x.ne[0]) != K {
			x = l.reshape(x, []int{R, K})
		}
		ones := l.constant([]int{R, 1}, 1)
		src := [2]tensor{ones, x}
		return C.ggml_custom_4d(l.ctx, C.GGML_TYPE_F32, C.int64_t(K), 1, 1, 1, &src[0], 2, C.ggml_custom_op_t(C.ag_matmul_tn), C.GGML_N_TASKS_MAX, nil)
	}
	p, div := l.poolStages(l.reshape(x, []int{R, K}), 1, C.GGML_OP_POOL_AVG)
	return l.scaleBias(p, float32(div), 0)
}

// colSumSplits is how many chunks of rows patch 0017's column sums split R
// rows of K columns into: about 1024 workgroups of 64 columns in all (a
// few would leave most of a GPU idle), chunks of at least 16 rows.
func colSumSplits(R, K int) int {
	blocks := (K + 63) / 64
	return max(1, min((1024+blocks-1)/blocks, R/16))
}
