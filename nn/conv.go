package nn

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
)

// Convolutions and pools are compositions of core ops, so they have
// gradients and run on every backend without a kernel of their own. Both
// start from the same im2col by row gather: the input [N, C, H, W] is moved
// channels-last, padded (zeros for a convolution, -Inf for a max pool) and
// cut into rows of C values ([N*(H+2PH)*(W+2PW), C]), and
// one core.Gather reads, for every output position and kernel offset, the
// row it covers. The row indices depend only on the input shape and the
// window's geometry: they are computed on the host once per shape and kept
// in the layer as a core Constant (one upload, then resident). Gather's
// gradient by constant indices is a few gathers by the inverse tables (each
// input row is read by at most KH*KW windows), so the backward of the whole
// thing is linear with no extra code.
//
// On a device that runs core.Im2Col natively (ggml: ggml_im2col) a
// convolution takes it instead (convIm2Col): one kernel for the permute,
// the padding and the gather, and W multiplies the columns unpermuted.
//
// Memory: the gathered windows are N*OH*OW*KH*KW*C floats (as im2col in any
// framework), and the index table N*OH*OW*KH*KW floats.

// maxIndexRows bounds the rows a gather may address: indices are f32, whole
// numbers are exact up to 2^24.
const maxIndexRows = 1 << 24

// window is the geometry of a sliding window over an [N, C, H, W] input;
// 1-D layers use H = 1 and a kernel of height 1. It is comparable, so it
// keys the cache of index tables.
type window struct {
	dev                    *core.Device
	n, c, h, w             int
	kh, kw                 int
	sh, sw, ph, pw, dh, dw int
	// im2col keys backend.Window.Rows' table (core.Im2Col's) rather
	// than indices'
	im2col bool
}

// geom is g as core.Im2Col takes it.
func (g window) geom() backend.Window {
	return backend.Window{KH: g.kh, KW: g.kw, SH: g.sh, SW: g.sw, PH: g.ph, PW: g.pw, DH: g.dh, DW: g.dw}
}

// out returns the output height and width (PyTorch's floor formula; 0
// where the dilated kernel is larger than the padded input).
func (g window) out() (oh, ow int) {
	size := func(in, p, d, k, s int) int {
		span := in + 2*p - d*(k-1) - 1
		if span < 0 {
			return 0 // Go's division truncates toward zero: -1/3 + 1 would be 1
		}
		return span/s + 1
	}
	return size(g.h, g.ph, g.dh, g.kh, g.sh), size(g.w, g.pw, g.dw, g.kw, g.sw)
}

// padded reports whether some window reads a padded position.
func (g window) padded() bool { return g.ph > 0 || g.pw > 0 }

// indices is the gather table: for output position (n, oh, ow) and kernel
// offset (i, j), in that order, the row (n*HP + ih)*WP + iw of the padded
// input's rows (HP = H+2PH, WP = W+2PW; ih, iw in padded coordinates).
// Padding is rows of its own rather than one shared row: no row is then
// read by more than KH*KW windows, which keeps Gather's gradient a few
// gathers (a shared row read by every padded position would not be).
func (g window) indices() []float32 {
	oh, ow := g.out()
	hp, wp := g.h+2*g.ph, g.w+2*g.pw
	idx := make([]float32, 0, g.n*oh*ow*g.kh*g.kw)
	for n := range g.n {
		for y := range oh {
			for x := range ow {
				for i := range g.kh {
					ih := y*g.sh + i*g.dh
					for j := range g.kw {
						iw := x*g.sw + j*g.dw
						idx = append(idx, float32((n*hp+ih)*wp+iw))
					}
				}
			}
		}
	}
	return idx
}

// windowCache holds a layer's index tables, one per input shape (and
// geometry), so that a table crosses the bus once. It is safe for
// concurrent use. The tables are core Constants: a Capture may record the
// first Forward of a shape, and Gather's gradient reads them on the host to
// gather instead of scatter (see core's inverse.go).
type windowCache struct {
	mu sync.Mutex
	m  map[window]*core.Tensor
}

// maxCached bounds the tables a layer keeps (a training and an evaluation
// batch size, a last partial batch...); beyond it the cache starts over.
const maxCached = 8

func (c *windowCache) get(g window) *core.Tensor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[g]; ok {
		return t
	}
	idx := g.indices()
	if g.im2col {
		idx = g.geom().Rows(g.n, g.h, g.w)
	}
	t := g.dev.Constant(idx, len(idx))
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[window]*core.Tensor{}
	}
	c.m[g] = t
	return t
}

// checkWindow panics, naming fn, on a geometry that has no output or whose
// indices would not be exact.
func checkWindow(fn string, x *core.Tensor, g window) (oh, ow int) {
	if g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.ph < 0 || g.pw < 0 {
		panic(fmt.Sprintf("nn.%s: kernel %dx%d, stride %dx%d, padding %dx%d, dilation %dx%d: want kernel, stride and dilation >= 1 and padding >= 0",
			fn, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw))
	}
	oh, ow = g.out()
	if oh < 1 || ow < 1 {
		panic(fmt.Sprintf("nn.%s: input of shape %v is too small for kernel %dx%d with padding %dx%d and dilation %dx%d (output %dx%d)",
			fn, x.Shape(), g.kh, g.kw, g.ph, g.pw, g.dh, g.dw, oh, ow))
	}
	if rows := g.n * (g.h + 2*g.ph) * (g.w + 2*g.pw); rows > maxIndexRows {
		panic(fmt.Sprintf("nn.%s: input of shape %v has %d padded positions (N*(H+2PH)*(W+2PW)), more than f32 indices address exactly (2^24); split the batch",
			fn, x.Shape(), rows))
	}
	return oh, ow
}

// gatherWindows returns the windows of x ([N, C, H, W]) as [N*OH*OW*KH*KW,
// C] rows; padded positions read padValue.
func gatherWindows(x *core.Tensor, g window, cache *windowCache, padValue float32) *core.Tensor {
	nhwc := core.Permute(x, 0, 2, 3, 1)
	if g.padded() {
		d := x.Device()
		if g.ph > 0 {
			band := d.Full(padValue, g.n, g.ph, g.w, g.c)
			nhwc = core.Concat(1, band, nhwc, band)
		}
		if g.pw > 0 {
			band := d.Full(padValue, g.n, g.h+2*g.ph, g.pw, g.c)
			nhwc = core.Concat(2, band, nhwc, band)
		}
	}
	rows := core.Reshape(nhwc, g.n*(g.h+2*g.ph)*(g.w+2*g.pw), g.c)
	return core.Gather(rows, cache.get(g))
}

// ConvOptions are the optional settings of NewConv1d and NewConv2d; the
// zero value is PyTorch's defaults: stride 1, no padding, dilation 1, one
// group, a bias, and PyTorch's default initialization.
type ConvOptions struct {
	Stride   int // 0 means 1
	Padding  int // zeros added on each side of every spatial axis
	Dilation int // 0 means 1
	Groups   int // 0 means 1; must divide in and out
	NoBias   bool
	// Init draws the weights (nil: PyTorch's default, U(-b, b) with b =
	// 1/sqrt(fanIn), which is KaimingUniform(sqrt(1/3)); fanIn =
	// in/groups*kernel size). It is called with the shape [in/groups, out,
	// kernel...], ag's [in, out, receptive field] layout in which Fans
	// gives PyTorch's fans of a convolution; the values are then transposed
	// into W's [out, in/groups, kernel...]. The bias is drawn U(-b, b) as
	// PyTorch's.
	Init Initializer
}

func (o ConvOptions) norm(fn string, in, out int) ConvOptions {
	if o.Stride == 0 {
		o.Stride = 1
	}
	if o.Dilation == 0 {
		o.Dilation = 1
	}
	if o.Groups == 0 {
		o.Groups = 1
	}
	if o.Stride < 1 || o.Dilation < 1 || o.Padding < 0 || o.Groups < 1 {
		panic(fmt.Sprintf("nn.%s: stride %d, padding %d, dilation %d, groups %d: want stride, dilation, groups >= 1 and padding >= 0",
			fn, o.Stride, o.Padding, o.Dilation, o.Groups))
	}
	if in%o.Groups != 0 || out%o.Groups != 0 {
		panic(fmt.Sprintf("nn.%s: in %d, out %d channels: both must be divisible by groups %d", fn, in, out, o.Groups))
	}
	return o
}

// convParams makes W of shape [out, in/groups, kernel...] and the bias.
func convParams(fn string, dev *core.Device, in, out int, kernel []int, o ConvOptions, rng *rand.Rand) (w, b *core.Tensor) {
	if dev == nil {
		panic(fmt.Sprintf("nn.%s: nil device", fn))
	}
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
	cg := in / o.Groups
	shape := append([]int{out, cg}, kernel...)
	checkShape(fn, dev, fmt.Sprintf("in %d, out %d, kernel %v, groups %d", in, out, kernel, o.Groups), "weight", shape...)
	fanIn := cg * rf
	init := o.Init
	if init == nil || !o.NoBias {
		checkRNG(fn, rng) // the default init and the bias draw from it
	}
	if init == nil {
		init = defaultInit()
	}
	// Draw in [cg, out, rf] and transpose to [out, cg, rf].
	drawn := append([]int{cg, out}, kernel...)
	v := init(drawn, rng)
	if len(v) != cg*out*rf {
		panic(fmt.Sprintf("nn.%s: the initializer gave %d values for shape %v (%d elements)", fn, len(v), drawn, cg*out*rf))
	}
	wv := make([]float32, len(v))
	for c := range cg {
		for o := range out {
			copy(wv[(o*cg+c)*rf:(o*cg+c+1)*rf], v[(c*out+o)*rf:(c*out+o+1)*rf])
		}
	}
	w = dev.Param(wv, shape...)
	if !o.NoBias {
		b = dev.Param(defaultBias(out, fanIn, rng), out)
	}
	return w, b
}

// conv is the convolution of x [N, C, H, W] with w [OC, C/groups, KH, KW]
// and the bias b [OC] (or nil): the gathered windows [N*OH*OW, KH*KW*C]
// times the weights as [KH*KW*C/groups, OC] (per group, a batched MatMul).
func conv(x, w, b *core.Tensor, g window, groups int, cache *windowCache) *core.Tensor {
	oh, ow := g.out()
	oc, k, cg := w.Dim(0), g.kh*g.kw, g.c/groups
	m := g.n * oh * ow
	if k > 1 || g.padded() || g.sh > 1 || g.sw > 1 {
		if useIm2Col(x.Device()) {
			return convIm2Col(x, w, b, g, groups, cache)
		}
	}
	var cols *core.Tensor // [M, K*C], column k*C + c
	if k == 1 && !g.padded() && g.sh == 1 && g.sw == 1 {
		cols = core.Reshape(core.Permute(x, 0, 2, 3, 1), m, g.c) // a 1x1 convolution reads every position once
	} else {
		cols = core.Reshape(gatherWindows(x, g, cache, 0), m, k*g.c)
	}
	// [OC, cg, KH, KW] -> [K, cg, OC] -> [K*cg, OC], row k*cg + c
	wm := core.Reshape(core.Permute(core.Reshape(w, oc, cg, k), 2, 1, 0), k*cg, oc)
	var y *core.Tensor
	if groups == 1 {
		y = core.MatMul(cols, wm)
	} else {
		og := oc / groups
		c3 := core.Reshape(core.Permute(core.Reshape(cols, m, k, groups, cg), 2, 0, 1, 3), groups, m, k*cg)
		w3 := core.Permute(core.Reshape(wm, k*cg, groups, og), 1, 0, 2) // [groups, K*cg, og]
		y = core.Reshape(core.Permute(core.MatMul(c3, w3), 1, 0, 2), m, oc)
	}
	if b != nil {
		y = core.Add(y, b)
	}
	return core.Permute(core.Reshape(y, g.n, oh, ow, oc), 0, 3, 1, 2)
}

// useIm2Col reports whether dev runs im2col natively (ggml: ggml_im2col):
// there core.Im2Col's one kernel replaces the permute, the padding and the
// gather, while elsewhere its decomposition would add a transpose of the
// columns to today's gather. Its gradient is col2im, native on ggml-cpu
// (ggml_im2col_back) and core's gathers by the inverse tables on
// ggml-vulkan, which has none. On ggml-vulkan (lavapipe) the convnet step
// went from 964 to 877 ggml nodes and from 61.5 s to 18.2 s (bench -convnet
// 28, lazy; captured 26.6 s to 17.6 s); the two paths agree to f32
// rounding there (TestConvIm2ColMatchesGather).
func useIm2Col(dev *core.Device) bool {
	if im2colMode != 0 {
		return im2colMode > 0
	}
	return dev.Info().Native(backend.OpIm2Col)
}

// im2colMode, set by tests only, forces useIm2Col: 1 on, -1 off, 0 the
// device's choice (the two paths are compared on one device).
var im2colMode int

// convIm2Col is conv by core.Im2Col: the columns [N*OH*OW, C*KH*KW] times
// W as [OC, C/groups*KH*KW] transposed, with no permute of x or W (per
// group, a batched MatMul of the group's columns, which are contiguous).
func convIm2Col(x, w, b *core.Tensor, g window, groups int, cache *windowCache) *core.Tensor {
	oh, ow := g.out()
	oc, ck := w.Dim(0), w.Len()/w.Dim(0)
	m := g.n * oh * ow
	g.im2col = true
	cols := core.Im2Col(x, cache.get(g), g.geom())
	var y *core.Tensor
	if groups == 1 {
		y = core.MatMulT(cols, core.Reshape(w, oc, ck), false, true)
	} else {
		og := oc / groups
		c3 := core.Permute(core.Reshape(cols, m, groups, ck), 1, 0, 2) // [groups, M, ck]
		y = core.MatMulT(c3, core.Reshape(w, groups, og, ck), false, true)
		y = core.Reshape(core.Permute(y, 1, 0, 2), m, oc)
	}
	if b != nil {
		y = core.Add(y, b)
	}
	return core.Permute(core.Reshape(y, g.n, oh, ow, oc), 0, 3, 1, 2)
}

// Conv2d is a 2-D convolution (PyTorch's cross-correlation) of an input
// [N, C, H, W] with W [OC, C/Groups, KH, KW] plus a bias [OC], giving [N,
// OC, OH, OW] with OH = (H + 2*Padding[0] - Dilation[0]*(KH-1) - 1)/Stride[0]
// + 1 (rounded down; likewise OW): PyTorch's nn.Conv2d with zero padding.
// The fields may be changed between calls (e.g. a stride of [1, 2]); Forward
// checks them.
//
// It is an im2col by row gather and one MatMul (see the top of conv.go),
// so its gradients with respect to the input, W and B come from those ops
// on every backend. The gather's index table is made on the host at the
// first Forward of each input shape and kept on the device (up to 8
// shapes), as a core Constant, so a Capture may record that first Forward.
type Conv2d struct {
	W, B                      *core.Tensor // B is nil without a bias
	Stride, Padding, Dilation [2]int
	Groups                    int
	cache                     windowCache
}

// NewConv2d makes a Conv2d from in to out channels with a kernel of
// kernel[0] x kernel[1], drawn from rng (see ConvOptions for the defaults).
func NewConv2d(dev *core.Device, in, out int, kernel [2]int, opt ConvOptions, rng *rand.Rand) *Conv2d {
	o := opt.norm("NewConv2d", in, out)
	w, b := convParams("NewConv2d", dev, in, out, kernel[:], o, rng)
	return &Conv2d{W: w, B: b, Groups: o.Groups,
		Stride: [2]int{o.Stride, o.Stride}, Padding: [2]int{o.Padding, o.Padding}, Dilation: [2]int{o.Dilation, o.Dilation}}
}

// Forward convolves x of shape [N, C, H, W].
func (l *Conv2d) Forward(x *core.Tensor) *core.Tensor {
	oc, cg := l.W.Dim(0), l.W.Dim(1)
	if x == nil {
		panic("nn.Conv2d.Forward: nil input")
	}
	if x.Rank() != 4 || x.Dim(1) != cg*l.Groups {
		panic(fmt.Sprintf("nn.Conv2d.Forward: input of shape %v, want [N, %d, H, W]", x.Shape(), cg*l.Groups))
	}
	if l.Groups < 1 || oc%l.Groups != 0 {
		panic(fmt.Sprintf("nn.Conv2d.Forward: groups %d for %d output channels", l.Groups, oc))
	}
	g := window{dev: x.Device(), n: x.Dim(0), c: x.Dim(1), h: x.Dim(2), w: x.Dim(3), kh: l.W.Dim(2), kw: l.W.Dim(3),
		sh: l.Stride[0], sw: l.Stride[1], ph: l.Padding[0], pw: l.Padding[1], dh: l.Dilation[0], dw: l.Dilation[1]}
	checkWindow("Conv2d.Forward", x, g)
	var y *core.Tensor
	x.Device().Scope("Conv2d", func() {
		x.Device().Composite("Conv2d", func() { y = conv(x, l.W, l.B, g, l.Groups, &l.cache) })
	})
	return y
}

// Params returns W and, with a bias, B.
func (l *Conv2d) Params() []*core.Tensor { return weightBias(l.W, l.B) }

// Conv1d is a 1-D convolution of an input [N, C, L] with W [OC, C/Groups,
// K] plus a bias [OC], giving [N, OC, OL] with OL = (L + 2*Padding -
// Dilation*(K-1) - 1)/Stride + 1: PyTorch's nn.Conv1d with zero padding. It
// is Conv2d's computation on [N, C, 1, L].
type Conv1d struct {
	W, B                      *core.Tensor // B is nil without a bias
	Stride, Padding, Dilation int
	Groups                    int
	cache                     windowCache
}

// NewConv1d makes a Conv1d from in to out channels with a kernel of size
// kernel, drawn from rng (see ConvOptions for the defaults).
func NewConv1d(dev *core.Device, in, out, kernel int, opt ConvOptions, rng *rand.Rand) *Conv1d {
	o := opt.norm("NewConv1d", in, out)
	w, b := convParams("NewConv1d", dev, in, out, []int{kernel}, o, rng)
	return &Conv1d{W: w, B: b, Stride: o.Stride, Padding: o.Padding, Dilation: o.Dilation, Groups: o.Groups}
}

// Forward convolves x of shape [N, C, L].
func (l *Conv1d) Forward(x *core.Tensor) *core.Tensor {
	oc, cg, k := l.W.Dim(0), l.W.Dim(1), l.W.Dim(2)
	if x == nil {
		panic("nn.Conv1d.Forward: nil input")
	}
	if x.Rank() != 3 || x.Dim(1) != cg*l.Groups {
		panic(fmt.Sprintf("nn.Conv1d.Forward: input of shape %v, want [N, %d, L]", x.Shape(), cg*l.Groups))
	}
	if l.Groups < 1 || oc%l.Groups != 0 {
		panic(fmt.Sprintf("nn.Conv1d.Forward: groups %d for %d output channels", l.Groups, oc))
	}
	g := window{dev: x.Device(), n: x.Dim(0), c: x.Dim(1), h: 1, w: x.Dim(2), kh: 1, kw: k,
		sh: 1, sw: l.Stride, ph: 0, pw: l.Padding, dh: 1, dw: l.Dilation}
	_, ol := checkWindow("Conv1d.Forward", x, g)
	var y *core.Tensor
	x.Device().Scope("Conv1d", func() {
		x.Device().Composite("Conv1d", func() {
			x4 := core.Reshape(x, g.n, g.c, 1, g.w)
			w4 := core.Reshape(l.W, oc, cg, 1, k)
			y = core.Reshape(conv(x4, w4, l.B, g, l.Groups, &l.cache), g.n, oc, ol)
		})
	})
	return y
}

// Params returns W and, with a bias, B.
func (l *Conv1d) Params() []*core.Tensor { return weightBias(l.W, l.B) }
