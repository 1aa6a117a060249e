package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// BatchNorm normalizes each channel (axis 1) of x [N, C], [N, C, L] or
// [N, C, H, W] over every other axis with the batch's statistics:
// (x - mean)/sqrt(var + eps), var the biased variance, without gain or
// bias: PyTorch's batch_norm in training mode (nn.BatchNorm adds the
// affine part and the running statistics). One composite op of the IR
// (backend.OpBatchNorm): ggml-cpu runs one kernel, other backends its
// decomposition. A channel holding a NaN or an infinity gives NaN. eps
// must be finite and >= 0.
func BatchNorm(x *Tensor, eps float32) *Tensor {
	needRank("BatchNorm", x, 2)
	if x.Rank() > 4 {
		panic(fmt.Sprintf("core.BatchNorm: input of shape %v: want [N, C], [N, C, L] or [N, C, H, W]", x.shape))
	}
	if !(eps >= 0) || math.IsInf(float64(eps), 0) {
		panic(fmt.Sprintf("core.BatchNorm: eps %g, want a finite value >= 0", eps))
	}
	return x.dev.record("BatchNorm", backend.OpBatchNorm, slices.Clone(x.shape), attrs{A: eps}, x)
}

var _ = defineComposite(backend.OpBatchNorm, composite{
	// through the batch's mean and variance, one composite as the forward
	grad: func(n *Tensor, in []*Tensor, g *Tensor, _ int) *Tensor {
		return g.dev.recordGrad("BatchNormGrad", backend.OpBatchNormBack, slices.Clone(in[0].shape), attrs{A: n.attr.A}, false, in[0], g)
	},
})

var _ = defineComposite(backend.OpBatchNormBack, composite{grad: noGrad})

// BatchNormStats returns the batch's statistics of BatchNorm for x [N, C],
// [N, C, L] or [N, C, H, W]: each channel's mean (row 0) and biased
// variance (row 1) over every other axis, of shape [2, C] (nn.BatchNorm's
// running statistics take them). One composite op of the IR
// (backend.OpBatchNormStats): where a device runs BatchNorm's kernels it
// shares their partial sums (ggml-vulkan), elsewhere its decomposition. A
// channel holding NaN has NaN for both.
func BatchNormStats(x *Tensor) *Tensor {
	needRank("BatchNormStats", x, 2)
	if x.Rank() > 4 {
		panic(fmt.Sprintf("core.BatchNormStats: input of shape %v: want [N, C], [N, C, L] or [N, C, H, W]", x.shape))
	}
	return x.dev.record("BatchNormStats", backend.OpBatchNormStats, []int{2, x.shape[1]}, attrs{}, x)
}

var _ = defineComposite(backend.OpBatchNormStats, composite{
	// d mean/dx = 1/M, d var/dx = 2(x - mean)/M, per channel of M values
	grad: func(n *Tensor, in []*Tensor, g *Tensor, _ int) *Tensor {
		x := in[0]
		c := x.shape[1]
		bshape := make([]int, x.Rank())
		for i := range bshape {
			bshape[i] = 1
		}
		bshape[1] = c
		row := func(t *Tensor, r int) *Tensor { return Reshape(SliceRows(t, r, 1), bshape...) }
		inv := 1 / float32(x.Len()/c)
		d := Sub(x, row(n, 0))
		return Add(Scale(row(g, 0), inv), Mul(Scale(row(g, 1), 2*inv), d))
	},
})
