package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// MaxPool2d is PyTorch's max_pool2d (floor mode) of x [N, C, H, W] by the
// window w (dilation 1): [N, C, OH, OW], each element the maximum of its
// window, padded positions never winning; NaN where the window holds one.
// rows is the index table, a Constant of w.Rows(N, H, W) (as Im2Col's).
// One composite op of the IR (backend.OpMaxPool2d; ggml runs
// ggml_pool_2d); its gradient goes, as MaxAxis's, to the first maximal
// element of each window in row-major window order (the first NaN where
// there is one): one backend.OpMaxPool2dBack where the device runs it
// natively (ggml), else built from the gathered windows.
func MaxPool2d(x, rows *Tensor, w backend.Window) *Tensor {
	needTensors("MaxPool2d", x, rows)
	needRank("MaxPool2d", x, 4)
	oh, ow := w.Out(x.shape[2], x.shape[3])
	n := backend.Node{Op: backend.OpMaxPool2d, Perm: w.Attr(), Shape: []int{x.shape[0], x.shape[1], oh, ow}}
	if err := backend.CompositeOf(backend.OpMaxPool2d).Check(&n, func(k int) []int { return [][]int{x.shape, rows.shape}[k] }); err != nil {
		panic(fmt.Sprintf("core.MaxPool2d: x of shape %v, table of shape %v: %v", x.shape, rows.shape, err))
	}
	if rows.constValues() == nil {
		panic(fmt.Sprintf("core.MaxPool2d: the index table %v is not a Constant (want Window.Rows(%d, %d, %d))", rows, x.shape[0], x.shape[2], x.shape[3]))
	}
	return x.dev.record("MaxPool2d", backend.OpMaxPool2d, n.Shape, attrs{Perm: n.Perm}, x, rows)
}

var _ = defineComposite(backend.OpMaxPool2d, composite{
	// The windows are gathered, and the gradient folded back, as rows of
	// every image and channel at one pixel ([HP*WP, N*C], by a table of
	// one image's windows: poolRows), not of one image's channels ([HP*WP*N,
	// C] by the layer's table): ggml-vulkan's get_rows gives each row a
	// workgroup of 512 lanes, so the convnet's rows of 32 channels kept 32
	// of them busy (2.9 ms of a 21 ms H100 step in its GET_ROWS,
	// GGML_VK_PERF_LOGGER); the values and the first maximum are the same.
	//
	// A device that runs backend.OpMaxPool2dBack natively (ggml-vulkan's
	// pool_2d_back kernel, one node where this is about a hundred) gets that
	// op instead; its decomposition is the same gradient by a scatter-add.
	grad: func(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
		if k == 1 {
			return nil // the index table
		}
		x := in[0]
		if x.dev.Info().Native(backend.OpMaxPool2dBack) { // Info: caps under the device's lock (a reopen replaces them)
			return g.dev.recordGrad("MaxPool2dGrad", backend.OpMaxPool2dBack, slices.Clone(x.shape), attrs{Perm: n.attr.Perm}, false, x, g, in[1])
		}
		p := n.attr.Perm
		w := backend.Window{KH: p[0], KW: p[1], SH: p[2], SW: p[3], PH: p[4], PW: p[5], DH: p[6], DW: p[7]}
		nb, c, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
		oh, ow := n.shape[2], n.shape[3]
		m, kk, nc := oh*ow, w.KH*w.KW, nb*c
		rows := poolRows(x.dev, w, h, wd)
		padded := Reshape(padRowsOf(detach("MaxPool2d", x), w), (h+2*w.PH)*(wd+2*w.PW), nc)
		win := Reshape(Gather(padded, rows), m, kk, nc)
		// MaxAxis's gradient over the windows: to the first maximum
		_, v, down := firstMax("MaxPool2d", win, 1)
		first := inside(Sub(down, v), -0.5, 0.5)
		gw := Reshape(Permute(g, 2, 3, 0, 1), m, 1, nc)
		return foldPadded(Reshape(keep(first, gw), m*kk, nc), rows, 1, x.shape, w)
	},
})

var _ = defineComposite(backend.OpMaxPool2dBack, composite{grad: noGrad})

// poolRows is the window table of one image of h x wd pixels,
// w.Rows(1, h, wd) (each window element's pixel in the padded image), a
// Constant made once per device, window and size.
func poolRows(d *Device, w backend.Window, h, wd int) *Tensor {
	oh, ow := w.Out(h, wd)
	return d.constant(fmt.Sprintf("pool rows %v %dx%d", w.Attr(), h, wd), func() []float32 { return w.Rows(1, h, wd) }, oh*ow*w.KH*w.KW)
}

// padRowsOf is backend's padRows in core ops: x [N, C, H, W] padded with
// -Inf and moved to rows [HP*WP*N, C] in Window.Rows' order.
func padRowsOf(x *Tensor, w backend.Window) *Tensor {
	nb, c, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	v := Permute(x, 2, 3, 0, 1) // [H, W, N, C]
	inf := float32(math.Inf(-1))
	if w.PW > 0 {
		band := x.dev.Full(inf, h, w.PW, nb, c)
		v = Concat(1, band, v, band)
	}
	if w.PH > 0 {
		band := x.dev.Full(inf, w.PH, wd+2*w.PW, nb, c)
		v = Concat(0, band, v, band)
	}
	return Reshape(v, (h+2*w.PH)*(wd+2*w.PW)*nb, c)
}
