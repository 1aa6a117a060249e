package core

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
)

// Im2Col is PyTorch's unfold of x [N, C, H, W] by the window w: [N*OH*OW,
// C*KH*KW], row (n, oh, ow), column (c, i, j) the element the kernel
// offset (i, j) covers at that output position (0 in the padding), so a
// weight [OC, C, KH, KW] reshaped to [OC, C*KH*KW] multiplies it directly.
// rows is its index table, a Constant of w.Rows(N, H, W) (nn keeps one per
// layer and input shape): the decomposition gathers by it; ggml runs
// ggml_im2col, which reads x alone. One composite op of the IR
// (backend.OpIm2Col); its gradient is col2im (backend.OpCol2Im, ggml-cpu's
// im2col_back) where the device lowers it, else the gather's gradient by
// the table (core's inverse tables: linear where a scatter-add is not).
func Im2Col(x, rows *Tensor, w backend.Window) *Tensor {
	needTensors("Im2Col", x, rows)
	needRank("Im2Col", x, 4)
	oh, ow := w.Out(x.shape[2], x.shape[3])
	n := backend.Node{Op: backend.OpIm2Col, Perm: w.Attr(), Shape: []int{x.shape[0] * oh * ow, x.shape[1] * w.KH * w.KW}}
	if err := backend.CompositeOf(backend.OpIm2Col).Check(&n, func(k int) []int { return [][]int{x.shape, rows.shape}[k] }); err != nil {
		panic(fmt.Sprintf("core.Im2Col: x of shape %v, table of shape %v: %v", x.shape, rows.shape, err))
	}
	if rows.constValues() == nil {
		panic(fmt.Sprintf("core.Im2Col: the index table %v is not a Constant (want Window.Rows(%d, %d, %d))", rows, x.shape[0], x.shape[2], x.shape[3]))
	}
	return x.dev.record("Im2Col", backend.OpIm2Col, n.Shape, attrs{Perm: n.Perm}, x, rows)
}

// Col2Im is Im2Col's adjoint, PyTorch's fold: the image of shape [N, C, H,
// W] in which each element is the sum of the entries of cols [N*OH*OW,
// C*KH*KW] that Im2Col by the window w would read from it (0 where none
// does; the padding is dropped). rows is Im2Col's table, a Constant of
// w.Rows(N, H, W). A transposed convolution's forward is a Col2Im of the
// input times the weight (nn.ConvTranspose2d). One composite op of the IR
// (backend.OpCol2Im) where the device lowers it natively (ggml), else the
// gradient of the gather by the table (core's inverse tables); its own
// gradient is Im2Col.
func Col2Im(cols, rows *Tensor, shape []int, w backend.Window) *Tensor {
	needTensors("Col2Im", cols, rows)
	if len(shape) != 4 {
		panic(fmt.Sprintf("core.Col2Im: image shape %v, want [N, C, H, W]", shape))
	}
	n := backend.Node{Op: backend.OpCol2Im, Perm: w.Attr(), Shape: slices.Clone(shape)}
	if err := backend.CompositeOf(backend.OpCol2Im).Check(&n, func(k int) []int { return [][]int{cols.shape, rows.shape}[k] }); err != nil {
		panic(fmt.Sprintf("core.Col2Im: columns of shape %v, table of shape %v, image %v: %v", cols.shape, rows.shape, shape, err))
	}
	if rows.constValues() == nil {
		panic(fmt.Sprintf("core.Col2Im: the index table %v is not a Constant (want Window.Rows(%d, %d, %d))", rows, shape[0], shape[2], shape[3]))
	}
	if cols.dev.caps.Native(backend.OpCol2Im) {
		return cols.dev.record("Col2Im", backend.OpCol2Im, n.Shape, attrs{Perm: n.Perm}, cols, rows)
	}
	defer cols.dev.composite("Col2Im")()
	return col2imByRows(cols, rows, n.Shape, w)
}

var _ = defineComposite(backend.OpIm2Col, composite{
	grad: func(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
		if k == 1 {
			return nil // the index table
		}
		x, rows := in[0], in[1]
		if g.dev.caps.Native(backend.OpCol2Im) {
			return g.dev.record("Col2Im", backend.OpCol2Im, slices.Clone(x.shape), attrs{Perm: n.attr.Perm}, g, rows)
		}
		return col2imByRows(g, rows, x.shape, backend.Window{KH: n.attr.Perm[0], KW: n.attr.Perm[1], PH: n.attr.Perm[4], PW: n.attr.Perm[5]})
	},
})

// col2imByRows is OpCol2Im's decomposition in core ops, so that the
// gather's gradient takes core's inverse tables (a few gathers) rather
// than the scatter-add the decomposition has, which GPUs run in time
// quadratic in the rows.
func col2imByRows(g, rows *Tensor, x []int, w backend.Window) *Tensor {
	c, k, m := x[1], w.KH*w.KW, g.shape[0]
	return foldRows(Reshape(Permute(Reshape(g, m, c, k), 0, 2, 1), m*k, c), rows, x, w)
}

// foldRows is the gradient of gathering the windows of an image x [N, C,
// H, W] by the table rows (Window.Rows) from its padded rows: v [M*K, C],
// one row per window element, added back into the image (the padding
// dropped), by core's inverse tables where they apply.
func foldRows(v, rows *Tensor, x []int, w backend.Window) *Tensor {
	return foldPadded(v, rows, x[0], x, w)
}

// foldPadded is foldRows for a table of the windows of images of the
// batch ib (x[0] or 1) into the padded rows [HP*WP*ib, ...]: v [len(rows),
// C*N/ib], so a table of one image folds rows of every image and channel at
// a pixel.
func foldPadded(v, rows *Tensor, ib int, x []int, w backend.Window) *Tensor {
	nb, c, h, wd := x[0], x[1], x[2], x[3]
	hp, wp := h+2*w.PH, wd+2*w.PW
	if inv := inverseOf(rows, hp*wp*ib); inv != nil {
		v = inv.gather(v)
	} else {
		v = scatterAddRows(v, rows, hp*wp*ib)
	}
	v = Reshape(v, hp, wp, nb, c)
	if w.PH > 0 {
		v = SliceRows(v, w.PH, h)
	}
	v = Permute(v, 1, 0, 2, 3)
	if w.PW > 0 {
		v = SliceRows(v, w.PW, wd)
	}
	return Permute(v, 2, 3, 1, 0)
}

var _ = defineComposite(backend.OpCol2Im, composite{
	// the adjoint of a linear map's adjoint is the map
	grad: func(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
		if k == 1 {
			return nil
		}
		return g.dev.record("Im2Col", backend.OpIm2Col, slices.Clone(in[0].shape), attrs{Perm: n.attr.Perm}, g, in[1])
	},
})
