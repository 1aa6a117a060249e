package nn

import (
	"fmt"

	"github.com/ag-go/ag/core"
)

// GroupNorm normalizes each sample over groups of channels: the C channels
// of an input [N, C, *] are cut into Groups groups of C/Groups consecutive
// channels, and each (sample, group) is normalized over its channels and
// every spatial position, y = (x - mean)/sqrt(var + Eps), var the biased
// variance, then scaled and shifted per channel by Gain and Bias:
// PyTorch's nn.GroupNorm (Wu & He 2018). Unlike BatchNorm it has no
// running statistics and no modes: training and evaluation compute the
// same. It is core.LayerNorm on the rows [N*Groups, C/Groups*spatial]
// (one composite op, fused on ggml), so it needs no op of its own.
type GroupNorm struct {
	Gain, Bias *core.Tensor // [C]; both nil without an affine part
	Eps        float32
	Groups     int
	c          int
	name       string
	ranks      []int // the input ranks Forward takes; nil: any >= 2
}

// NewGroupNorm makes a GroupNorm of groups groups over c channels with
// gain 1 and bias 0 when affine (PyTorch's defaults: eps 1e-5, affine).
// groups must divide c.
func NewGroupNorm(dev *core.Device, groups, c int, eps float32, affine bool) *GroupNorm {
	if groups < 1 || c < 1 || c%groups != 0 {
		panic(fmt.Sprintf("nn.NewGroupNorm: %d groups, %d channels: want both >= 1 and groups dividing channels", groups, c))
	}
	return newGroupNorm("GroupNorm", dev, groups, c, eps, affine, nil)
}

func newGroupNorm(name string, dev *core.Device, groups, c int, eps float32, affine bool, ranks []int) *GroupNorm {
	fn := "New" + name
	checkDevice(fn, dev)
	if c < 1 {
		panic(fmt.Sprintf("nn.%s: %d channels, want >= 1", fn, c))
	}
	checkShape(fn, dev, "", "gain", c)
	checkEps(fn, eps)
	g := &GroupNorm{Eps: eps, Groups: groups, c: c, name: name, ranks: ranks}
	if affine {
		g.Gain = NewParam(dev, Constant(1), nil, c)
		g.Bias = NewParam(dev, Constant(0), nil, c)
	}
	return g
}

// InstanceNorm normalizes each channel of each sample over its spatial
// positions: a GroupNorm with one group per channel, PyTorch's
// nn.InstanceNorm1d ([N, C, L]) and nn.InstanceNorm2d ([N, C, H, W]) with
// their default track_running_stats=False (ag keeps no running statistics
// for it: training and evaluation compute the same, each sample's own
// statistics).
type InstanceNorm = GroupNorm

// NewInstanceNorm1d makes an InstanceNorm over c channels of inputs [N,
// C, L], with gain 1 and bias 0 when affine (PyTorch's defaults: eps 1e-5,
// no affine part).
func NewInstanceNorm1d(dev *core.Device, c int, eps float32, affine bool) *InstanceNorm {
	return newGroupNorm("InstanceNorm1d", dev, c, c, eps, affine, []int{3})
}

// NewInstanceNorm2d makes an InstanceNorm over c channels of inputs [N,
// C, H, W], with gain 1 and bias 0 when affine (PyTorch's defaults: eps
// 1e-5, no affine part).
func NewInstanceNorm2d(dev *core.Device, c int, eps float32, affine bool) *InstanceNorm {
	return newGroupNorm("InstanceNorm2d", dev, c, c, eps, affine, []int{4})
}

// Forward normalizes x of shape [N, C, *] (InstanceNorm1d: [N, C, L];
// InstanceNorm2d: [N, C, H, W]).
func (g *GroupNorm) Forward(x *core.Tensor) *core.Tensor {
	fn := "nn." + g.name + ".Forward"
	if x == nil {
		panic(fn + ": nil input")
	}
	okRank := x.Rank() >= 2
	want := fmt.Sprintf("[N, %d, ...]", g.c)
	if g.ranks != nil {
		okRank = x.Rank() == g.ranks[0]
		want = fmt.Sprintf("[N, %d, L]", g.c)
		if g.ranks[0] == 4 {
			want = fmt.Sprintf("[N, %d, H, W]", g.c)
		}
	}
	if !okRank || x.Dim(1) != g.c {
		panic(fmt.Sprintf("%s: input of shape %v, want %s", fn, x.Shape(), want))
	}
	if g.Groups < 1 || g.c%g.Groups != 0 {
		panic(fmt.Sprintf("%s: %d groups for %d channels: want groups >= 1 dividing the channels", fn, g.Groups, g.c))
	}
	checkEps(g.name+".Forward", g.Eps)
	if x.Len() == 0 {
		panic(fmt.Sprintf("%s: input of shape %v is empty", fn, x.Shape()))
	}
	dev := x.Device()
	var y *core.Tensor
	dev.Scope(g.name, func() {
		dev.Composite(g.name, func() {
			rows := core.Reshape(x, x.Dim(0)*g.Groups, -1)
			y = core.Reshape(core.LayerNorm(rows, g.Eps), x.Shape()...)
			if g.Gain != nil {
				// [C] vectors broadcast as [1, C, 1, ...]
				bshape := make([]int, x.Rank())
				for i := range bshape {
					bshape[i] = 1
				}
				bshape[1] = g.c
				y = core.Add(core.Mul(y, core.Reshape(g.Gain, bshape...)), core.Reshape(g.Bias, bshape...))
			}
		})
	})
	return y
}

// Params returns the gain and the bias (none without an affine part).
func (g *GroupNorm) Params() []*core.Tensor {
	if g.Gain == nil {
		return nil
	}
	return []*core.Tensor{g.Gain, g.Bias}
}
