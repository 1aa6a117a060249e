package backend

import (
	"fmt"
	"slices"
)

// Window is the geometry of a sliding window over an image [N, C, H, W]:
// kernel KH x KW, stride, zero padding on both sides, dilation. Im2col
// nodes hold it in Node.Perm (Attr, WindowOf).
type Window struct {
	KH, KW, SH, SW, PH, PW, DH, DW int
}

// Attr is w as Node.Perm holds it: [KH, KW, SH, SW, PH, PW, DH, DW].
func (w Window) Attr() []int { return []int{w.KH, w.KW, w.SH, w.SW, w.PH, w.PW, w.DH, w.DW} }

// WindowOf reads the window of an im2col or col2im node.
func WindowOf(n *Node) Window {
	p := n.Perm
	return Window{p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]}
}

// Out is the output height and width over an h x wd image (PyTorch's floor
// formula; 0 or less where the dilated kernel is larger than the padded
// image).
func (w Window) Out(h, wd int) (oh, ow int) {
	size := func(in, p, d, k, s int) int {
		span := in + 2*p - d*(k-1) - 1
		if span < 0 {
			return 0 // Go's division truncates toward zero: -1/3 + 1 would be 1
		}
		return span/s + 1
	}
	return size(h, w.PH, w.DH, w.KH, w.SH), size(wd, w.PW, w.DW, w.KW, w.SW)
}

// Rows is OpIm2Col's index table for an image [n, c, h, wd]: for output
// position (n, oh, ow) and kernel offset (i, j), in that order, the row
// (ih*WP + iw)*N + n of the padded image moved to rows [HP*WP*N, C] (HP =
// h + 2PH, WP = wd + 2PW; ih, iw in padded coordinates), the layout the
// decomposition pads with whole-row concatenations.
func (w Window) Rows(n, h, wd int) []float32 {
	oh, ow := w.Out(h, wd)
	wp := wd + 2*w.PW
	idx := make([]float32, 0, max(0, n*oh*ow*w.KH*w.KW))
	for b := range n {
		for y := range oh {
			for x := range ow {
				for i := range w.KH {
					for j := range w.KW {
						ih, iw := y*w.SH+i*w.DH, x*w.SW+j*w.DW
						idx = append(idx, float32((ih*wp+iw)*n+b))
					}
				}
			}
		}
	}
	return idx
}

// OpIm2Col is PyTorch's unfold: In[0] = x [N, C, H, W], In[1] = the index
// table Window.Rows(N, H, W) of the window in Node.Perm (Window.Attr);
// Node.Shape is [N*OH*OW, C*KH*KW], row (n, oh, ow), column (c, i, j):
// x[n, c, oh*SH + i*DH - PH, ow*SW + j*DW - PW], 0 in the padding. A
// weight [OC, C, KH, KW] as [OC, C*KH*KW] multiplies it directly. The
// decomposition gathers rows by the table (no primitive makes one); a
// native lowering (ggml_im2col) reads only the geometry, so the table must
// be Rows' (core.Im2Col makes it). Values move unchanged.
var OpIm2Col = defineComposite(Composite{
	Name: "im2col", Inputs: 2, Index: []int{1},
	Check: func(n *Node, in func(int) []int) error {
		return checkIm2Col(n, in(0), n.Shape, in(1))
	},
	Decompose: func(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
		x := inShapes[0]
		w := WindowOf(n)
		c, k := x[1], w.KH*w.KW
		rows := padRows(in[0], x, w, 0, add)
		m := n.Shape[0]
		g := add(Node{Op: OpGetRows, In: []int{rows, in[1]}, Shape: []int{m * k, c}})
		g = add(Node{Op: OpReshape, In: []int{g}, Shape: []int{m, k, c}})
		g = add(Node{Op: OpPermute, In: []int{g}, Shape: []int{m, c, k}, Perm: []int{0, 2, 1}})
		return add(Node{Op: OpReshape, In: []int{g}, Shape: slices.Clone(n.Shape)})
	},
	Eval: func(n *Node, in [][]float64, shapes [][]int, out []float64) {
		im2col64(WindowOf(n), shapes[0], in[0], out, false)
	},
	Sample: im2colSample(false),
	Cases:  im2colCases(false),
	// values move unchanged; the relative part covers the f32 rounding of
	// the suite's computed inputs (2x - 1: half an ulp) against Eval's
	Tol: [2]float64{0, 1.2e-7}, Flops: 1, Attr: windowAttr,
})

// OpCol2Im is OpIm2Col's adjoint, PyTorch's fold: In[0] = columns [N*OH*OW,
// C*KH*KW] as OpIm2Col gives, In[1] its index table, Node.Shape the image
// [N, C, H, W]; each image element is the sum of the columns that read it
// (0 if none: a position strides skip). The decomposition scatter-adds the
// rows by the table, then crops the padding; a native lowering
// (ggml_im2col_back) reads only the geometry.
var OpCol2Im = defineComposite(Composite{
	Name: "col2im", Inputs: 2, Index: []int{1},
	Check: func(n *Node, in func(int) []int) error {
		return checkIm2Col(n, n.Shape, in(0), in(1))
	},
	Decompose: func(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
		x := n.Shape
		w := WindowOf(n)
		nb, c, h, wd := x[0], x[1], x[2], x[3]
		k := w.KH * w.KW
		m := inShapes[0][0]
		hp, wp := h+2*w.PH, wd+2*w.PW
		g := add(Node{Op: OpReshape, In: []int{in[0]}, Shape: []int{m, c, k}})
		g = add(Node{Op: OpPermute, In: []int{g}, Shape: []int{m, k, c}, Perm: []int{0, 2, 1}})
		g = add(Node{Op: OpReshape, In: []int{g}, Shape: []int{m * k, c}})
		g = add(Node{Op: OpScatterAddRows, In: []int{g, in[1]}, Shape: []int{hp * wp * nb, c}})
		return unpadRows(g, x, w, add)
	},
	Eval: func(n *Node, in [][]float64, _ [][]int, out []float64) {
		im2col64(WindowOf(n), n.Shape, out, in[0], true)
	},
	Sample: im2colSample(true),
	Cases:  im2colCases(true),
	// sums of up to KH*KW terms (a sum's bound, relative to the |terms|)
	Tol: [2]float64{1e-6, 2e-6}, Flops: 1,
	Terms:   func(n *Node, _ [][]int) int { w := WindowOf(n); return w.KH * w.KW },
	FlopsOf: func(_ *Node, in func(int) []int) float64 { return float64(NumElems(in(0))) },
	Attr:    windowAttr,
})

func windowAttr(n *Node) string {
	w := WindowOf(n)
	return fmt.Sprintf("kernel=%dx%d stride=%dx%d pad=%dx%d dilation=%dx%d", w.KH, w.KW, w.SH, w.SW, w.PH, w.PW, w.DH, w.DW)
}

// checkIm2Col checks an im2col's or col2im's image x [N, C, H, W], columns
// and index table against the window in n.Perm.
func checkIm2Col(n *Node, x, cols, idx []int) error {
	if len(n.Perm) != 8 {
		return fmt.Errorf("window %v: want [KH, KW, SH, SW, PH, PW, DH, DW]", n.Perm)
	}
	w := WindowOf(n)
	if w.KH < 1 || w.KW < 1 || w.SH < 1 || w.SW < 1 || w.DH < 1 || w.DW < 1 || w.PH < 0 || w.PW < 0 {
		return fmt.Errorf("window %v: want kernel, stride and dilation >= 1 and padding >= 0", n.Perm)
	}
	if len(x) != 4 {
		return fmt.Errorf("image of shape %v: want [N, C, H, W]", x)
	}
	oh, ow := w.Out(x[2], x[3])
	if oh < 1 || ow < 1 {
		return fmt.Errorf("image of shape %v has no window (%s)", x, windowAttr(n))
	}
	if rows := x[0] * (x[2] + 2*w.PH) * (x[3] + 2*w.PW); rows > 1<<24 {
		return fmt.Errorf("image of shape %v: %d padded positions, more than f32 indices address exactly (2^24)", x, rows)
	}
	m, k := x[0]*oh*ow, x[1]*w.KH*w.KW
	if len(cols) != 2 || cols[0] != m || cols[1] != k {
		return fmt.Errorf("columns of shape %v: want [%d, %d] for image %v (%s)", cols, m, k, x, windowAttr(n))
	}
	if len(idx) != 1 || idx[0] != m*w.KH*w.KW {
		return fmt.Errorf("index table of shape %v: want [%d] (Window.Rows)", idx, m*w.KH*w.KW)
	}
	return nil
}

// padRows appends x [N, C, H, W] padded with pad and moved to rows
// [HP*WP*N, C] in Window.Rows' order: [W, H, N, C] padded along its first
// axis, then [H, WP, N, C] along its first axis.
func padRows(x int, s []int, w Window, pad float32, add func(Node) int) int {
	nb, c, h, wd := s[0], s[1], s[2], s[3]
	padAxis := func(v int, s []int, p int) int {
		if p == 0 {
			return v
		}
		bs := slices.Clone(s)
		bs[0] = p
		band := add(Node{Op: OpFill, Shape: bs, A: pad})
		s1 := slices.Clone(s)
		s1[0] += p
		v = add(Node{Op: OpConcatRows, In: []int{band, v}, Shape: s1})
		s2 := slices.Clone(s1)
		s2[0] += p
		return add(Node{Op: OpConcatRows, In: []int{v, band}, Shape: s2})
	}
	wp := wd + 2*w.PW
	v := add(Node{Op: OpPermute, In: []int{x}, Shape: []int{wd, h, nb, c}, Perm: []int{3, 2, 0, 1}})
	v = padAxis(v, []int{wd, h, nb, c}, w.PW)
	v = add(Node{Op: OpPermute, In: []int{v}, Shape: []int{h, wp, nb, c}, Perm: []int{1, 0, 2, 3}})
	v = padAxis(v, []int{h, wp, nb, c}, w.PH)
	return add(Node{Op: OpReshape, In: []int{v}, Shape: []int{(h + 2*w.PH) * wp * nb, c}})
}

// unpadRows is padRows' inverse: rows v [HP*WP*N, C] in Window.Rows'
// order back to the image [N, C, H, W] (s), the padding cropped.
func unpadRows(v int, s []int, w Window, add func(Node) int) int {
	nb, c, h, wd := s[0], s[1], s[2], s[3]
	wp := wd + 2*w.PW
	v = add(Node{Op: OpReshape, In: []int{v}, Shape: []int{h + 2*w.PH, wp, nb, c}})
	if w.PH > 0 {
		v = add(Node{Op: OpSliceRows, In: []int{v}, Shape: []int{h, wp, nb, c}, Start: w.PH})
	}
	v = add(Node{Op: OpPermute, In: []int{v}, Shape: []int{wp, h, nb, c}, Perm: []int{1, 0, 2, 3}})
	if w.PW > 0 {
		v = add(Node{Op: OpSliceRows, In: []int{v}, Shape: []int{wd, h, nb, c}, Start: w.PW})
	}
	return add(Node{Op: OpPermute, In: []int{v}, Shape: slices.Clone(s), Perm: []int{2, 3, 1, 0}})
}

// im2col64 walks every (output position, channel, kernel offset) of the
// window over image x (shape s): it copies the image element into the
// column (0 in the padding), or with back adds the column into the image
// element (cleared first).
func im2col64(w Window, s []int, img, cols []float64, back bool) {
	nb, c, h, wd := s[0], s[1], s[2], s[3]
	oh, ow := w.Out(h, wd)
	k := c * w.KH * w.KW
	if back {
		clear(img)
	}
	for b := range nb {
		for y := range oh {
			for x := range ow {
				row := cols[((b*oh+y)*ow+x)*k:][:k]
				for ch := range c {
					for i := range w.KH {
						for j := range w.KW {
							ih, iw := y*w.SH+i*w.DH-w.PH, x*w.SW+j*w.DW-w.PW
							col := (ch*w.KH+i)*w.KW + j
							in := ih >= 0 && ih < h && iw >= 0 && iw < wd
							e := ((b*c+ch)*h+ih)*wd + iw
							switch {
							case back && in:
								img[e] += row[col]
							case !back && in:
								row[col] = img[e]
							case !back:
								row[col] = 0
							}
						}
					}
				}
			}
		}
	}
}

// im2colSample: a 1x1 window over a 1x1 image, whose index table is [0]
// whatever an index draw gives (the one padded row clamps every index to
// 0), so that SampleGraph's drawn indices give the definition's value.
func im2colSample(back bool) func() ([][]int, Node) {
	return func() ([][]int, Node) {
		attr := Window{1, 1, 1, 1, 0, 0, 1, 1}.Attr()
		if back {
			return [][]int{{1, 1}, {1}}, Node{In: []int{0, 1}, Shape: []int{1, 1, 1, 1}, Perm: attr}
		}
		return [][]int{{1, 1, 1, 1}, {1}}, Node{In: []int{0, 1}, Shape: []int{1, 1}, Perm: attr}
	}
}

// im2colCases: drawn windows (kernel 1-3, stride 1-2, padding 0-1,
// dilation 1-2) over small images, a 1-D window (H = 1), a stride larger
// than the kernel (positions no window reads: col2im's 0), a convnet's 5x5
// padded layer; with special, the image (or the columns) holding the
// special values (col2im: the tame ones, whose sums stay in f32's range).
func im2colCases(back bool) func(Draw, bool) []CompositeCase {
	return func(d Draw, special bool) []CompositeCase {
		mk := func(x []int, w Window, vals []float32) CompositeCase {
			oh, ow := w.Out(x[2], x[3])
			m, k := x[0]*oh*ow, x[1]*w.KH*w.KW
			idx := w.Rows(x[0], x[2], x[3])
			src, out := x, []int{m, k}
			if back {
				src, out = out, x
			}
			v := d.Uniform(NumElems(src), -4, 4)
			copy(v, vals)
			return CompositeCase{Args: [][]float32{v, idx}, Shapes: [][]int{slices.Clone(src), {len(idx)}},
				Node: Node{In: []int{0, 1}, Shape: slices.Clone(out), Perm: w.Attr()}}
		}
		var cs []CompositeCase
		if special {
			for _, nc := range [][2]int{{5, 0}, {7, 3}} {
				var vals []float32
				for _, r := range d.SpecialRows(nc[0], nc[1], back) {
					vals = append(vals, r...)
				}
				cs = append(cs, mk([]int{2, 3, 6, 5}, Window{3, 2, 1, 2, 1, 1, 1, 1}, vals),
					mk([]int{1, 2, 7, 7}, Window{2, 2, 2, 2, 0, 0, 1, 1}, vals))
			}
			return cs
		}
		for range 6 {
			w := Window{1 + d.IntN(3), 1 + d.IntN(3), 1 + d.IntN(2), 1 + d.IntN(2), d.IntN(2), d.IntN(2), 1 + d.IntN(2), 1 + d.IntN(2)}
			x := []int{1 + d.IntN(2), 1 + d.IntN(3), 5 + d.IntN(4), 5 + d.IntN(4)}
			cs = append(cs, mk(x, w, nil))
		}
		return append(cs,
			mk([]int{2, 3, 1, 11}, Window{1, 3, 1, 2, 0, 1, 1, 2}, nil),
			mk([]int{1, 2, 8, 9}, Window{2, 2, 3, 3, 0, 0, 1, 1}, nil),
			mk([]int{2, 4, 12, 12}, Window{5, 5, 1, 1, 2, 2, 1, 1}, nil),
			mk([]int{1, 1, 3, 3}, Window{3, 3, 1, 1, 1, 1, 1, 1}, nil))
	}
}
