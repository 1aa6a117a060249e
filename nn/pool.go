package nn

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/core"
)

// Pools gather their windows as the convolutions do (see conv.go) into
// [N*OH*OW, K, C] and reduce the kernel axis K. A max pool with no
// dilation is core.MaxPool2d instead, one composite op (ggml runs
// ggml_pool_2d; other backends its decomposition, the same gather and
// max), whose gradient is MaxAxis's over the windows. Like Conv2d, a pool
// makes its index table, a core Constant, at the first Forward of each
// input shape.

// poolWindow builds and checks the geometry of a pool; PyTorch's rule that
// padding is at most half the kernel keeps every window on some input.
func poolWindow(fn string, x *core.Tensor, kernel, stride, padding, dilation [2]int, oneD bool) window {
	if x == nil {
		panic(fmt.Sprintf("nn.%s: nil input", fn))
	}
	var g window
	if oneD {
		if x.Rank() != 3 {
			panic(fmt.Sprintf("nn.%s: input of shape %v, want [N, C, L]", fn, x.Shape()))
		}
		g = window{n: x.Dim(0), c: x.Dim(1), h: 1, w: x.Dim(2)}
	} else {
		if x.Rank() != 4 {
			panic(fmt.Sprintf("nn.%s: input of shape %v, want [N, C, H, W]", fn, x.Shape()))
		}
		g = window{n: x.Dim(0), c: x.Dim(1), h: x.Dim(2), w: x.Dim(3)}
	}
	g.dev = x.Device()
	g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw = kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1]
	if 2*g.ph > g.kh || 2*g.pw > g.kw {
		panic(fmt.Sprintf("nn.%s: padding %v for kernel %v: padding must be at most half the kernel", fn, padding, kernel))
	}
	checkWindow(fn, x, g)
	return g
}

// poolOut turns [N*OH*OW, C] back into [N, C, OH, OW] (or [N, C, OL]).
func poolOut(y *core.Tensor, g window, oneD bool) *core.Tensor {
	oh, ow := g.out()
	y = core.Permute(core.Reshape(y, g.n, oh, ow, g.c), 0, 3, 1, 2)
	if oneD {
		return core.Reshape(y, g.n, g.c, ow)
	}
	return y
}

// poolOut4 is the pool y [N, C, OH, OW] as the layer gives it (1-D: [N,
// C, OL]).
func poolOut4(y *core.Tensor, g window, oneD bool) *core.Tensor {
	if oneD {
		return core.Reshape(y, g.n, g.c, y.Dim(3))
	}
	return y
}

// maxPool is the max over the kernel axis of the windows [M, K, C]:
// core.MaxAxis, whose gradient goes to the first maximal element of each
// window (in row-major kernel order) and whose value is exact; a window
// holding a NaN gives NaN (its gradient goes to the first NaN).
func maxPool(win *core.Tensor) *core.Tensor { return core.MaxAxis(win, 1, false) }

// MaxPool2d takes the maximum of each Kernel window of an input [N, C, H,
// W], moving by Stride, over the input padded by Padding positions that
// never win (-Inf), with Dilation between the window's elements: PyTorch's
// nn.MaxPool2d (floor mode). The gradient goes to the window's maximal
// element; on ties, all of it to the first maximal element in row-major
// window order (PyTorch also picks one element; which one may differ). A
// window holding a NaN gives NaN.
type MaxPool2d struct {
	Kernel, Stride, Padding, Dilation [2]int
	cache                             windowCache
}

// NewMaxPool2d makes a square MaxPool2d; stride 0 means the kernel size
// (PyTorch's default), and the dilation is 1.
func NewMaxPool2d(kernel, stride, padding int) *MaxPool2d {
	k, s, p := poolArgs("NewMaxPool2d", kernel, stride, padding)
	return &MaxPool2d{Kernel: [2]int{k, k}, Stride: [2]int{s, s}, Padding: [2]int{p, p}, Dilation: [2]int{1, 1}}
}

// Forward pools x of shape [N, C, H, W].
func (p *MaxPool2d) Forward(x *core.Tensor) *core.Tensor {
	g := poolWindow("MaxPool2d.Forward", x, p.Kernel, p.Stride, p.Padding, p.Dilation, false)
	return poolForward("MaxPool2d", x, g, &p.cache, true, false)
}

// Params returns nil.
func (p *MaxPool2d) Params() []*core.Tensor { return nil }

// MaxPool1d is MaxPool2d over the last axis of an input [N, C, L]:
// PyTorch's nn.MaxPool1d (floor mode), ties as MaxPool2d.
type MaxPool1d struct {
	Kernel, Stride, Padding, Dilation int
	cache                             windowCache
}

// NewMaxPool1d makes a MaxPool1d; stride 0 means the kernel size, and the
// dilation is 1.
func NewMaxPool1d(kernel, stride, padding int) *MaxPool1d {
	k, s, p := poolArgs("NewMaxPool1d", kernel, stride, padding)
	return &MaxPool1d{Kernel: k, Stride: s, Padding: p, Dilation: 1}
}

// Forward pools x of shape [N, C, L].
func (p *MaxPool1d) Forward(x *core.Tensor) *core.Tensor {
	g := poolWindow("MaxPool1d.Forward", x, [2]int{1, p.Kernel}, [2]int{1, p.Stride}, [2]int{0, p.Padding}, [2]int{1, p.Dilation}, true)
	return poolForward("MaxPool1d", x, g, &p.cache, true, true)
}

// Params returns nil.
func (p *MaxPool1d) Params() []*core.Tensor { return nil }

// AvgPool2d averages each Kernel window of an input [N, C, H, W], moving by
// Stride, over the input padded with Padding zeros that count in the
// average: PyTorch's nn.AvgPool2d with its defaults (count_include_pad
// true, floor mode), so every output divides by KH*KW.
type AvgPool2d struct {
	Kernel, Stride, Padding [2]int
	cache                   windowCache
}

// NewAvgPool2d makes a square AvgPool2d; stride 0 means the kernel size.
func NewAvgPool2d(kernel, stride, padding int) *AvgPool2d {
	k, s, p := poolArgs("NewAvgPool2d", kernel, stride, padding)
	return &AvgPool2d{Kernel: [2]int{k, k}, Stride: [2]int{s, s}, Padding: [2]int{p, p}}
}

// Forward pools x of shape [N, C, H, W].
func (p *AvgPool2d) Forward(x *core.Tensor) *core.Tensor {
	g := poolWindow("AvgPool2d.Forward", x, p.Kernel, p.Stride, p.Padding, [2]int{1, 1}, false)
	return poolForward("AvgPool2d", x, g, &p.cache, false, false)
}

// Params returns nil.
func (p *AvgPool2d) Params() []*core.Tensor { return nil }

// AvgPool1d is AvgPool2d over the last axis of an input [N, C, L]:
// PyTorch's nn.AvgPool1d with its defaults (padding counts, every output
// divides by the kernel size).
type AvgPool1d struct {
	Kernel, Stride, Padding int
	cache                   windowCache
}

// NewAvgPool1d makes an AvgPool1d; stride 0 means the kernel size.
func NewAvgPool1d(kernel, stride, padding int) *AvgPool1d {
	k, s, p := poolArgs("NewAvgPool1d", kernel, stride, padding)
	return &AvgPool1d{Kernel: k, Stride: s, Padding: p}
}

// Forward pools x of shape [N, C, L].
func (p *AvgPool1d) Forward(x *core.Tensor) *core.Tensor {
	g := poolWindow("AvgPool1d.Forward", x, [2]int{1, p.Kernel}, [2]int{1, p.Stride}, [2]int{0, p.Padding}, [2]int{1, 1}, true)
	return poolForward("AvgPool1d", x, g, &p.cache, false, true)
}

// Params returns nil.
func (p *AvgPool1d) Params() []*core.Tensor { return nil }

func poolArgs(fn string, kernel, stride, padding int) (k, s, p int) {
	if stride == 0 {
		stride = kernel
	}
	if kernel < 1 || stride < 1 || padding < 0 || 2*padding > kernel {
		panic(fmt.Sprintf("nn.%s: kernel %d, stride %d, padding %d: want kernel >= 1, stride >= 1 (0: the kernel), 0 <= padding <= kernel/2", fn, kernel, stride, padding))
	}
	return kernel, stride, padding
}

func poolForward(name string, x *core.Tensor, g window, cache *windowCache, isMax, oneD bool) *core.Tensor {
	oh, ow := g.out()
	m, k := g.n*oh*ow, g.kh*g.kw
	var y *core.Tensor
	x.Device().Scope(name, func() {
		x.Device().Composite(name, func() {
			x4 := x
			if oneD {
				x4 = core.Reshape(x, g.n, g.c, 1, g.w)
			}
			if isMax && g.dh == 1 && g.dw == 1 {
				g.im2col = true // core.MaxPool2d reads backend.Window.Rows' table
				y = poolOut4(core.MaxPool2d(x4, cache.get(g), g.geom()), g, oneD)
				return
			}
			pad := float32(0)
			if isMax {
				pad = float32(math.Inf(-1))
			}
			win := core.Reshape(gatherWindows(x4, g, cache, pad), m, k, g.c)
			if isMax {
				y = maxPool(win)
			} else {
				y = core.MeanAxis(win, 1, false)
			}
			y = poolOut(y, g, oneD)
		})
	})
	return y
}
