package nn

import (
	"math"
	"slices"
	"testing"

	"github.com/ag-go/ag/core"
)

// weightedSum is sum(y * w) with fixed, distinct-ish weights, so that a
// gradient check sees every output with its own weight.
func weightedSum(y *core.Tensor) *core.Tensor {
	w := make([]float32, y.Len())
	for i := range w {
		w[i] = float32(i%7) - 2.5
	}
	return core.Sum(core.Mul(y, y.Device().Tensor(w, y.Shape()...)))
}

func TestNewLayersGradcheck(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(21)
	check := func(name string, f func() *core.Tensor, ps ...*core.Tensor) {
		t.Helper()
		if err := core.Gradcheck(f, ps, nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	gn := NewGroupNorm(dev, 2, 4, 1e-5, true)
	gn.Gain, gn.Bias = dev.Param(randVals(r, 4), 4), dev.Param(randVals(r, 4), 4)
	x4 := dev.Param(randVals(r, 2*4*3*3), 2, 4, 3, 3)
	// the normalized values times weights: a sum alone has no gradient
	check("GroupNorm", func() *core.Tensor { return weightedSum(gn.Forward(x4)) }, x4, gn.Gain, gn.Bias)
	in1 := NewInstanceNorm1d(dev, 2, 1e-5, true)
	x3 := dev.Param(randVals(r, 2*2*5), 2, 2, 5)
	check("InstanceNorm1d", func() *core.Tensor { return weightedSum(in1.Forward(x3)) }, x3, in1.Gain, in1.Bias)
	in2 := NewInstanceNorm2d(dev, 4, 1e-5, false)
	check("InstanceNorm2d", func() *core.Tensor { return weightedSum(in2.Forward(x4)) }, x4)

	ct := NewConvTranspose2d(dev, 4, 3, [2]int{3, 2}, ConvTransposeOptions{Stride: 2, Padding: 1, OutputPadding: 1}, r)
	check("ConvTranspose2d", func() *core.Tensor { return weightedSum(ct.Forward(x4)) }, x4, ct.W, ct.B)
	// an output padding of at least the stride: the fold of the full image
	ctd := NewConvTranspose2d(dev, 4, 2, [2]int{2, 2}, ConvTransposeOptions{Padding: 1, OutputPadding: 1, Dilation: 2}, r)
	check("ConvTranspose2d dilated", func() *core.Tensor { return weightedSum(ctd.Forward(x4)) }, x4, ctd.W, ctd.B)
	c1 := NewConvTranspose1d(dev, 2, 3, 3, ConvTransposeOptions{Stride: 2, Padding: 1}, r)
	check("ConvTranspose1d", func() *core.Tensor { return weightedSum(c1.Forward(x3)) }, x3, c1.W, c1.B)

	for _, u := range []*Upsample{
		NewUpsample(2, UpsampleNearest, false),
		NewUpsampleSize([2]int{5, 4}, UpsampleNearest, false),
		NewUpsample(1.5, UpsampleBilinear, false),
		NewUpsampleSize([2]int{4, 5}, UpsampleBilinear, true),
	} {
		check("Upsample "+u.Mode.String(), func() *core.Tensor { return weightedSum(u.Forward(x4)) }, x4)
	}
}

func TestNewLayersPanics(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(22)
	ct := NewConvTranspose2d(dev, 2, 3, [2]int{3, 3}, ConvTransposeOptions{}, r)
	checkPanics(t, []panicCase{
		{"groupnorm groups", "nn.NewGroupNorm: 4 groups, 6 channels", func() { NewGroupNorm(dev, 4, 6, 1e-5, true) }},
		{"groupnorm eps", "nn.NewGroupNorm: eps 0", func() { NewGroupNorm(dev, 2, 6, 0, true) }},
		{"groupnorm shape", "nn.GroupNorm.Forward: input of shape [2 4], want [N, 6, ...]", func() { NewGroupNorm(dev, 2, 6, 1e-5, true).Forward(dev.Full(0, 2, 4)) }},
		{"instancenorm2d rank", "nn.InstanceNorm2d.Forward: input of shape [2 3 4], want [N, 3, H, W]", func() { NewInstanceNorm2d(dev, 3, 1e-5, false).Forward(dev.Full(0, 2, 3, 4)) }},
		{"instancenorm1d channels", "nn.InstanceNorm1d.Forward: input of shape [2 2 4], want [N, 3, L]", func() { NewInstanceNorm1d(dev, 3, 1e-5, false).Forward(dev.Full(0, 2, 2, 4)) }},
		{"convtranspose channels", "nn.ConvTranspose2d.Forward: input of shape [1 3 4 4], want [N, 2, H, W]", func() { ct.Forward(dev.Full(0, 1, 3, 4, 4)) }},
		{"convtranspose output padding", "nn.NewConvTranspose2d: stride 1, padding 0, output padding -1", func() {
			NewConvTranspose2d(dev, 1, 1, [2]int{1, 1}, ConvTransposeOptions{OutputPadding: -1}, r)
		}},
		{"convtranspose output padding rule", "nn.ConvTranspose1d.Forward: output padding 2 must be smaller than the stride 2 or the dilation 1", func() {
			NewConvTranspose1d(dev, 1, 1, 3, ConvTransposeOptions{Stride: 2, OutputPadding: 2}, r).Forward(dev.Full(0, 1, 1, 4))
		}},
		{"convtranspose padding", "nn.ConvTranspose2d.Forward: input of shape [1 2 1 1] gives an output of -1x-1", func() {
			l := NewConvTranspose2d(dev, 2, 1, [2]int{1, 1}, ConvTransposeOptions{Padding: 1}, r)
			l.Forward(dev.Full(0, 1, 2, 1, 1))
		}},
		{"convtranspose in", "nn.NewConvTranspose1d: in 0, out 1", func() { NewConvTranspose1d(dev, 0, 1, 1, ConvTransposeOptions{}, r) }},
		{"upsample align nearest", "nn.NewUpsample: align corners with mode nearest", func() { NewUpsample(2, UpsampleNearest, true) }},
		{"upsample scale", "nn.NewUpsample: scale [0 0] and no size", func() { NewUpsample(0, UpsampleBilinear, false) }},
		{"upsample size", "nn.NewUpsampleSize: size [0 3], want both >= 1", func() { NewUpsampleSize([2]int{0, 3}, UpsampleBilinear, false) }},
		{"upsample mode", "nn.NewUpsample: mode UpsampleMode(7)", func() { NewUpsample(2, 7, false) }},
		{"upsample rank", "nn.Upsample.Forward: input of shape [1 2 3], want [N, C, H, W]", func() { NewUpsample(2, UpsampleNearest, false).Forward(dev.Full(0, 1, 2, 3)) }},
		{"upsample empty", "nn.Upsample.Forward: input of shape [1 1 3 3] by scale [0.2 0.2] gives an empty output", func() {
			NewUpsample(0.2, UpsampleNearest, false).Forward(dev.Full(0, 1, 1, 3, 3))
		}},
	})
}

// The default initialization is PyTorch's for a transposed convolution:
// |w|, |b| <= 1/sqrt(out*kernel size) (PyTorch's fan-in of [in, out, k...]
// is dimension 1 times the kernel), filling that range.
func TestConvTransposeInit(t *testing.T) {
	dev := openDev(t)
	l := NewConvTranspose2d(dev, 8, 4, [2]int{3, 3}, ConvTransposeOptions{}, NewRNG(1))
	if !slices.Equal(l.W.Shape(), []int{8, 4, 3, 3}) || !slices.Equal(l.B.Shape(), []int{4}) {
		t.Fatalf("W %v, B %v: want [8 4 3 3] and [4]", l.W.Shape(), l.B.Shape())
	}
	bound := 1 / math.Sqrt(4*9)
	for name, p := range map[string]*core.Tensor{"W": l.W, "B": l.B} {
		v, _ := p.Data()
		big := 0.0
		for _, x := range v {
			big = max(big, math.Abs(float64(x)))
		}
		if big > bound || (name == "W" && big < 0.9*bound) {
			t.Errorf("%s: max |value| %g, want in [0.9, 1] x %g", name, big, bound)
		}
	}
}
