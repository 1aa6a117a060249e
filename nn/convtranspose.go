package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
)

// A transposed convolution is the adjoint of a convolution (the gradient
// of Conv2d with respect to its input): each input position multiplies
// the weight into a KH x KW patch of every output channel, and the
// patches are added where they overlap. That is one MatMul of the input's
// positions as rows [N*H*W, IC] by W as [IC, OC*KH*KW], giving im2col
// columns of the output image, folded back into it by core.Col2Im (ggml
// lowers it natively; elsewhere core's inverse tables gather it). The
// gradients come from those two ops.

// ConvTransposeOptions are the optional settings of NewConvTranspose1d
// and NewConvTranspose2d; the zero value is PyTorch's defaults: stride 1,
// no padding or output padding, dilation 1, a bias, and PyTorch's default
// initialization.
type ConvTransposeOptions struct {
	Stride        int // 0 means 1
	Padding       int // removed from each side of every spatial axis of the output
	OutputPadding int // added to one side (the end) of every spatial axis of the output
	Dilation      int // 0 means 1
	NoBias        bool
	// Init draws the weights (nil: PyTorch's default, U(-b, b) with b =
	// 1/sqrt(fanIn), fanIn = out*kernel size as PyTorch counts it for a
	// transposed convolution). It is called with the shape [out, in,
	// kernel...], in which Fans gives those fans; the values are then
	// transposed into W's [in, out, kernel...]. The bias is drawn U(-b, b).
	Init Initializer
}

func (o ConvTransposeOptions) norm(fn string) ConvTransposeOptions {
	if o.Stride == 0 {
		o.Stride = 1
	}
	if o.Dilation == 0 {
		o.Dilation = 1
	}
	if o.Stride < 1 || o.Dilation < 1 || o.Padding < 0 || o.OutputPadding < 0 {
		panic(fmt.Sprintf("nn.%s: stride %d, padding %d, output padding %d, dilation %d: want stride, dilation >= 1 and paddings >= 0",
			fn, o.Stride, o.Padding, o.OutputPadding, o.Dilation))
	}
	return o
}

// convTransposeParams makes W [in, out, kernel...] and the bias [out].
func convTransposeParams(fn string, dev *core.Device, in, out int, kernel []int, o ConvTransposeOptions, rng *rand.Rand) (w, b *core.Tensor) {
	checkDevice(fn, dev)
	if in < 1 || out < 1 {
		panic(fmt.Sprintf("nn.%s: in %d, out %d: both must be >= 1", fn, in, out))
	}
	rf := 1
	for _, k := range kernel {
		if k < 1 {
			panic(fmt.Sprintf("nn.%s: kernel %v, want sizes >= 1", fn, kernel))
		}
		rf *= k
	}
	// checked here to name in and out as they are (convParams's are swapped)
	checkShape(fn, dev, fmt.Sprintf("in %d, out %d, kernel %v", in, out, kernel), "weight", append([]int{in, out}, kernel...)...)
	// Conv's parameters from out to in channels are [in, out, kernel...],
	// drawn as [out, in, kernel...] with fanIn = out*rf: PyTorch's.
	w, _ = convParams(fn, dev, out, in, kernel, ConvOptions{Groups: 1, NoBias: true, Init: o.Init}, rng)
	if !o.NoBias {
		checkRNG(fn, rng)
		b = dev.Param(defaultBias(out, out*rf, rng), out)
	}
	return w, b
}

// convGeom is a transposed convolution's geometry along one axis.
type convGeom struct{ k, s, p, op, d int }

// out is the output size for an input of size in: (in-1)*s - 2p +
// d*(k-1) + op + 1, PyTorch's.
func (g convGeom) out(in int) int { return (in-1)*g.s - 2*g.p + g.d*(g.k-1) + g.op + 1 }

// full is the output size before padding and output padding.
func (g convGeom) full(in int) int { return (in-1)*g.s + g.d*(g.k-1) + 1 }

// convTranspose is the transposed convolution of x [N, IC, H, W] with w
// [IC, OC, KH, KW] and b [OC] (or nil).
func convTranspose(fn string, x, w, b *core.Tensor, gh, gw convGeom, cache *windowCache) *core.Tensor {
	n, ic, h, wd := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	oc := w.Dim(1)
	oh, ow := gh.out(h), gw.out(wd)
	for _, g := range []convGeom{gh, gw} {
		if g.s < 1 || g.d < 1 || g.p < 0 || g.op < 0 {
			panic(fmt.Sprintf("nn.%s: stride %d, padding %d, output padding %d, dilation %d: want stride, dilation >= 1 and paddings >= 0",
				fn, g.s, g.p, g.op, g.d))
		}
		if g.op >= g.s && g.op >= g.d {
			panic(fmt.Sprintf("nn.%s: output padding %d must be smaller than the stride %d or the dilation %d (PyTorch's rule)", fn, g.op, g.s, g.d))
		}
	}
	if oh < 1 || ow < 1 {
		panic(fmt.Sprintf("nn.%s: input of shape %v gives an output of %dx%d (padding %dx%d is too large)", fn, x.Shape(), oh, ow, gh.p, gw.p))
	}
	// The output image is a convolution's input whose windows are x's
	// positions. With an output padding below the stride, the image of
	// the output's size padded by the padding has exactly h x wd windows,
	// and Col2Im drops the padding itself; otherwise (a padding of at least
	// the stride, allowed below the dilation) the full image is folded,
	// then cropped and padded.
	direct := gh.op < gh.s && gw.op < gw.s
	ih, iw, ph, pw := oh, ow, gh.p, gw.p
	if !direct {
		ih, iw, ph, pw = gh.full(h), gw.full(wd), 0, 0
	}
	g := window{dev: x.Device(), n: n, c: oc, h: ih, w: iw, kh: gh.k, kw: gw.k,
		sh: gh.s, sw: gw.s, ph: ph, pw: pw, dh: gh.d, dw: gw.d, im2col: true}
	if rows := n * (ih + 2*ph) * (iw + 2*pw); rows > maxIndexRows {
		panic(fmt.Sprintf("nn.%s: output of %d padded positions (N*(OH+2PH)*(OW+2PW)) for input %v, more than f32 indices address exactly (2^24); split the batch",
			fn, rows, x.Shape()))
	}
	rowsIn := core.Reshape(core.Permute(x, 0, 2, 3, 1), n*h*wd, ic)
	cols := core.MatMul(rowsIn, core.Reshape(w, ic, -1)) // [N*H*W, OC*KH*KW], column (oc, i, j)
	y := core.Col2Im(cols, cache.get(g), []int{n, oc, ih, iw}, g.geom())
	if !direct {
		y = cropPad(y, 2, gh.p, oh)
		y = cropPad(y, 3, gw.p, ow)
	}
	if b != nil {
		y = core.Add(y, core.Reshape(b, 1, oc, 1, 1))
	}
	return y
}

// cropPad takes size entries of axis from start on, zeros past the end.
func cropPad(y *core.Tensor, axis, start, size int) *core.Tensor {
	have := min(size, y.Dim(axis)-start)
	y = core.Narrow(y, axis, start, have)
	if have < size {
		pads := make([]int, 2*(y.Rank()-axis))
		pads[2*(y.Rank()-1-axis)+1] = size - have
		y = core.Pad(y, core.PadConstant, 0, pads...)
	}
	return y
}

// ConvTranspose2d is a 2-D transposed convolution (PyTorch's
// nn.ConvTranspose2d with groups 1): the adjoint of Conv2d's map from its
// input to its output, of an input [N, IC, H, W] with W [IC, OC, KH, KW]
// (PyTorch's layout) plus a bias [OC], giving [N, OC, OH, OW] with OH =
// (H-1)*Stride[0] - 2*Padding[0] + Dilation[0]*(KH-1) + OutputPadding[0] + 1
// (likewise OW). Padding removes rows and columns from the output's edges,
// OutputPadding adds them at its end (to pick one of the input sizes a
// strided Conv2d maps to H); it must be smaller than the stride or the
// dilation. The fields may be changed between calls; Forward checks them.
//
// It is a MatMul and a core.Col2Im (see the top of convtranspose.go), so
// its gradients with respect to the input, W and B come from those ops on
// every backend; the fold's index table is made on the host at the first
// Forward of each input shape and kept on the device (up to 8 shapes).
type ConvTranspose2d struct {
	W, B                                     *core.Tensor // B is nil without a bias
	Stride, Padding, OutputPadding, Dilation [2]int
	cache                                    windowCache
}

// NewConvTranspose2d makes a ConvTranspose2d from in to out channels with
// a kernel of kernel[0] x kernel[1], drawn from rng (see
// ConvTransposeOptions for the defaults).
func NewConvTranspose2d(dev *core.Device, in, out int, kernel [2]int, opt ConvTransposeOptions, rng *rand.Rand) *ConvTranspose2d {
	o := opt.norm("NewConvTranspose2d")
	w, b := convTransposeParams("NewConvTranspose2d", dev, in, out, kernel[:], o, rng)
	two := func(v int) [2]int { return [2]int{v, v} }
	return &ConvTranspose2d{W: w, B: b, Stride: two(o.Stride), Padding: two(o.Padding), OutputPadding: two(o.OutputPadding), Dilation: two(o.Dilation)}
}

// Forward applies the transposed convolution to x of shape [N, IC, H, W].
func (l *ConvTranspose2d) Forward(x *core.Tensor) *core.Tensor {
	const fn = "ConvTranspose2d.Forward"
	if x == nil {
		panic("nn." + fn + ": nil input")
	}
	if x.Rank() != 4 || x.Dim(1) != l.W.Dim(0) {
		panic(fmt.Sprintf("nn.%s: input of shape %v, want [N, %d, H, W]", fn, x.Shape(), l.W.Dim(0)))
	}
	gh := convGeom{k: l.W.Dim(2), s: l.Stride[0], p: l.Padding[0], op: l.OutputPadding[0], d: l.Dilation[0]}
	gw := convGeom{k: l.W.Dim(3), s: l.Stride[1], p: l.Padding[1], op: l.OutputPadding[1], d: l.Dilation[1]}
	var y *core.Tensor
	x.Device().Scope("ConvTranspose2d", func() {
		x.Device().Composite("ConvTranspose2d", func() { y = convTranspose(fn, x, l.W, l.B, gh, gw, &l.cache) })
	})
	return y
}

// Params returns W and, with a bias, B.
func (l *ConvTranspose2d) Params() []*core.Tensor { return weightBias(l.W, l.B) }

// ConvTranspose1d is a 1-D transposed convolution (PyTorch's
// nn.ConvTranspose1d with groups 1) of an input [N, IC, L] with W [IC,
// OC, K] plus a bias [OC], giving [N, OC, OL] with OL = (L-1)*Stride -
// 2*Padding + Dilation*(K-1) + OutputPadding + 1. It is ConvTranspose2d's
// computation on [N, IC, 1, L].
type ConvTranspose1d struct {
	W, B                                     *core.Tensor // B is nil without a bias
	Stride, Padding, OutputPadding, Dilation int
	cache                                    windowCache
}

// NewConvTranspose1d makes a ConvTranspose1d from in to out channels with
// a kernel of size kernel, drawn from rng (see ConvTransposeOptions for
// the defaults).
func NewConvTranspose1d(dev *core.Device, in, out, kernel int, opt ConvTransposeOptions, rng *rand.Rand) *ConvTranspose1d {
	o := opt.norm("NewConvTranspose1d")
	w, b := convTransposeParams("NewConvTranspose1d", dev, in, out, []int{kernel}, o, rng)
	return &ConvTranspose1d{W: w, B: b, Stride: o.Stride, Padding: o.Padding, OutputPadding: o.OutputPadding, Dilation: o.Dilation}
}

// Forward applies the transposed convolution to x of shape [N, IC, L].
func (l *ConvTranspose1d) Forward(x *core.Tensor) *core.Tensor {
	const fn = "ConvTranspose1d.Forward"
	if x == nil {
		panic("nn." + fn + ": nil input")
	}
	ic, oc, k := l.W.Dim(0), l.W.Dim(1), l.W.Dim(2)
	if x.Rank() != 3 || x.Dim(1) != ic {
		panic(fmt.Sprintf("nn.%s: input of shape %v, want [N, %d, L]", fn, x.Shape(), ic))
	}
	gh := convGeom{k: 1, s: 1, d: 1}
	gw := convGeom{k: k, s: l.Stride, p: l.Padding, op: l.OutputPadding, d: l.Dilation}
	var y *core.Tensor
	x.Device().Scope("ConvTranspose1d", func() {
		x.Device().Composite("ConvTranspose1d", func() {
			x4 := core.Reshape(x, x.Dim(0), ic, 1, x.Dim(2))
			w4 := core.Reshape(l.W, ic, oc, 1, k)
			y4 := convTranspose(fn, x4, w4, l.B, gh, gw, &l.cache)
			y = core.Reshape(y4, x.Dim(0), oc, y4.Dim(3))
		})
	})
	return y
}

// Params returns W and, with a bias, B.
func (l *ConvTranspose1d) Params() []*core.Tensor { return weightBias(l.W, l.B) }
