package backend

import (
	"fmt"
	"math"
	"slices"
)

// OpMaxPool2d is PyTorch's max_pool2d (floor mode, dilation 1): In[0] = x
// [N, C, H, W], In[1] = the index table Window.Rows(N, H, W) of the window
// in Node.Perm (Window.Attr, dilation 1: ggml's pool has none, and nn
// gathers a dilated pool); Node.Shape is [N, C, OH, OW], each element the
// maximum of its window, padded positions never winning (-Inf): NaN if the
// window holds one, as OpMax. The decomposition gathers the windows by the
// table (padding rows of -Inf) and takes OpMax over them; a native lowering
// (ggml_pool_2d) reads only the geometry. Values move unchanged.
var OpMaxPool2d = defineComposite(Composite{
	Name: "max_pool2d", Inputs: 2, Index: []int{1},
	Check: func(n *Node, in func(int) []int) error {
		x := in(0)
		if len(n.Perm) == 8 && (n.Perm[6] != 1 || n.Perm[7] != 1) {
			return fmt.Errorf("window %v: want dilation 1", n.Perm)
		}
		if len(n.Perm) != 8 || len(x) != 4 {
			return checkIm2Col(n, x, nil, in(1)) // names the window or the image
		}
		w := WindowOf(n)
		oh, ow := w.Out(x[2], x[3])
		if err := checkIm2Col(n, x, []int{x[0] * oh * ow, x[1] * w.KH * w.KW}, in(1)); err != nil {
			return err
		}
		if want := []int{x[0], x[1], oh, ow}; !slices.Equal(n.Shape, want) {
			return fmt.Errorf("output of shape %v: want %v for image %v (%s)", n.Shape, want, x, windowAttr(n))
		}
		return nil
	},
	Decompose: func(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
		x := inShapes[0]
		w := WindowOf(n)
		nb, c, oh, ow := n.Shape[0], n.Shape[1], n.Shape[2], n.Shape[3]
		m, k := nb*oh*ow, w.KH*w.KW
		rows := padRows(in[0], x, w, float32(math.Inf(-1)), add)
		g := add(Node{Op: OpGetRows, In: []int{rows, in[1]}, Shape: []int{m * k, c}})
		g = add(Node{Op: OpReshape, In: []int{g}, Shape: []int{m, k, c}})
		g = add(Node{Op: OpMax, In: []int{g}, Shape: []int{m, 1, c}, Axis: 1})
		g = add(Node{Op: OpReshape, In: []int{g}, Shape: []int{nb, oh, ow, c}})
		return add(Node{Op: OpPermute, In: []int{g}, Shape: slices.Clone(n.Shape), Perm: []int{0, 3, 1, 2}})
	},
	Eval: func(n *Node, in [][]float64, shapes [][]int, out []float64) {
		maxPool64(WindowOf(n), shapes[0], in[0], out)
	},
	Sample: func() ([][]int, Node) {
		// a 1x1 window over a 1x1 image: the table is [0] whatever an
		// index draw gives (one padded row clamps every index to 0)
		return [][]int{{1, 1, 1, 1}, {1}}, Node{In: []int{0, 1}, Shape: []int{1, 1, 1, 1}, Perm: Window{1, 1, 1, 1, 0, 0, 1, 1}.Attr()}
	},
	Cases: maxPoolCases,
	// values move unchanged; the relative part covers the f32 rounding of
	// the suite's computed inputs against Eval's
	Tol: [2]float64{0, 1.2e-7}, Flops: 1, Attr: windowAttr,
	FlopsOf: func(n *Node, _ func(int) []int) float64 {
		w := WindowOf(n)
		return float64(NumElems(n.Shape) * w.KH * w.KW)
	},
})

// maxPool64 is OpMaxPool2d's definition over image x (shape s): the
// maximum of each window's elements inside the image (Go's max: NaN
// propagates), -Inf for a window with none.
func maxPool64(w Window, s []int, x, out []float64) {
	nb, c, h, wd := s[0], s[1], s[2], s[3]
	oh, ow := w.Out(h, wd)
	for p := range nb * c {
		for y := range oh {
			for xo := range ow {
				m := math.Inf(-1)
				for i := range w.KH {
					for j := range w.KW {
						ih, iw := y*w.SH+i*w.DH-w.PH, xo*w.SW+j*w.DW-w.PW
						if ih >= 0 && ih < h && iw >= 0 && iw < wd {
							m = max(m, x[(p*h+ih)*wd+iw])
						}
					}
				}
				out[(p*oh+y)*ow+xo] = m
			}
		}
	}
}

// maxPoolCases: drawn windows (kernel 1-3, stride 1-3, padding up to half
// the kernel) over small images, a 1-D pool (H = 1), a convnet's 2x2 pool,
// overlapping 3x3 windows with padding; with special, the image holding
// the special values (ties of ±0, infinities, NaN, windows all -Inf).
func maxPoolCases(d Draw, special bool) []CompositeCase {
	mk := func(x []int, w Window, vals []float32) CompositeCase {
		oh, ow := w.Out(x[2], x[3])
		idx := w.Rows(x[0], x[2], x[3])
		v := d.Uniform(NumElems(x), -4, 4)
		copy(v, vals)
		return CompositeCase{Args: [][]float32{v, idx}, Shapes: [][]int{slices.Clone(x), {len(idx)}},
			Node: Node{In: []int{0, 1}, Shape: []int{x[0], x[1], oh, ow}, Perm: w.Attr()}}
	}
	var cs []CompositeCase
	if special {
		for _, nc := range [][2]int{{5, 0}, {7, 3}, {4, 1}} {
			var vals []float32
			for _, r := range d.SpecialRows(nc[0], nc[1], false) {
				vals = append(vals, r...)
			}
			cs = append(cs, mk([]int{2, 3, 6, 5}, Window{3, 2, 1, 2, 1, 1, 1, 1}, vals),
				mk([]int{1, 2, 7, 7}, Window{2, 2, 2, 2, 0, 0, 1, 1}, vals),
				mk([]int{2, 2, 4, 4}, Window{2, 2, 2, 2, 1, 1, 1, 1}, vals))
		}
		return cs
	}
	for range 6 {
		kh, kw := 1+d.IntN(3), 1+d.IntN(3)
		w := Window{kh, kw, 1 + d.IntN(3), 1 + d.IntN(3), d.IntN(kh/2 + 1), d.IntN(kw/2 + 1), 1, 1}
		x := []int{1 + d.IntN(2), 1 + d.IntN(3), 5 + d.IntN(4), 5 + d.IntN(4)}
		cs = append(cs, mk(x, w, nil))
	}
	return append(cs,
		mk([]int{2, 3, 1, 11}, Window{1, 3, 1, 2, 0, 1, 1, 1}, nil),
		mk([]int{4, 8, 8, 8}, Window{2, 2, 2, 2, 0, 0, 1, 1}, nil),
		mk([]int{2, 3, 7, 6}, Window{3, 3, 2, 2, 1, 1, 1, 1}, nil))
}

// OpMaxPool2dBack is OpMaxPool2d's gradient for x: In[0] = x [N, C, H,
// W], In[1] = the gradient g of the pool's output [N, C, OH, OW], In[2]
// = the pool's index table Window.Rows(N, H, W); Node.Perm the window
// (dilation 1), Node.Shape x's. Each window's g goes to its first maximal
// element in row-major window order, a padded place (-Inf) counting (its
// share is then dropped), the first NaN where the window holds one, ±0
// equal; an element sums what the windows holding it give it (0 if
// none). g moves unchanged: an infinite or NaN g reaches its element
// alone. The decomposition gathers the windows as OpMaxPool2d's, marks the
// first maximum by the table's (increasing) indices and scatter-adds; a
// native lowering (ggml-vulkan's pool_2d_back of build.sh's patch 0014)
// reads only the geometry.
var OpMaxPool2dBack = defineComposite(Composite{
	Name: "max_pool2d_back", Inputs: 3, Index: []int{2},
	Check: func(n *Node, in func(int) []int) error {
		x := n.Shape
		pool := Node{Op: OpMaxPool2d, Perm: n.Perm}
		if len(n.Perm) == 8 && len(x) == 4 {
			oh, ow := WindowOf(n).Out(x[2], x[3])
			pool.Shape = []int{x[0], x[1], oh, ow}
		}
		if err := CompositeOf(OpMaxPool2d).Check(&pool, func(k int) []int { return [][]int{in(0), in(2)}[k] }); err != nil {
			return err
		}
		if !slices.Equal(in(0), x) {
			return fmt.Errorf("output of shape %v: want x's %v", x, in(0))
		}
		if !slices.Equal(in(1), pool.Shape) {
			return fmt.Errorf("gradient of shape %v: want the pool's output %v for image %v (%s)", in(1), pool.Shape, x, windowAttr(n))
		}
		return nil
	},
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		x := n.Shape
		w := WindowOf(n)
		nb, c := x[0], x[1]
		oh, ow := w.Out(x[2], x[3])
		m, k := nb*oh*ow, w.KH*w.KW
		rows := (x[2] + 2*w.PH) * (x[3] + 2*w.PW) * nb
		p := padRows(in[0], x, w, float32(math.Inf(-1)), add)
		win := add(Node{Op: OpGetRows, In: []int{p, in[2]}, Shape: []int{m * k, c}})
		win = add(Node{Op: OpReshape, In: []int{win}, Shape: []int{m, k, c}})
		s3 := []int{m, k, c}
		mx := add(Node{Op: OpMax, In: []int{win}, Shape: []int{m, 1, c}, Axis: 1})
		hit := add(Node{Op: OpMaximum, In: []int{
			add(Node{Op: OpInside, In: []int{cmpSignNodes(win, mx, s3, []int{m, 1, c}, s3, add)}, Shape: s3, A: -0.5, B: 0.5}),
			isNaNNode(win, s3, add)}, Shape: s3})
		// the table's indices increase along each window: rows - index
		// counts down from the first element, so the largest of hit*down
		// is the first hit's
		t := add(Node{Op: OpReshape, In: []int{in[2]}, Shape: []int{m, k, 1}})
		down := add(Node{Op: OpAffine, In: []int{t}, Shape: []int{m, k, 1}, A: -1, B: float32(rows)})
		v := add(Node{Op: OpMax, In: []int{add(Node{Op: OpMul, In: []int{hit, down}, Shape: s3})}, Shape: []int{m, 1, c}, Axis: 1})
		first := add(Node{Op: OpInside, In: []int{add(Node{Op: OpSub, In: []int{down, v}, Shape: s3})}, Shape: s3, A: -0.5, B: 0.5})
		g := add(Node{Op: OpPermute, In: []int{in[1]}, Shape: []int{nb, oh, ow, c}, Perm: []int{0, 2, 3, 1}})
		g = add(Node{Op: OpReshape, In: []int{g}, Shape: []int{m, 1, c}})
		g = add(Node{Op: OpKeep, In: []int{first, g}, Shape: s3})
		g = add(Node{Op: OpReshape, In: []int{g}, Shape: []int{m * k, c}})
		g = add(Node{Op: OpScatterAddRows, In: []int{g, in[2]}, Shape: []int{rows, c}})
		return unpadRows(g, x, w, add)
	},
	Eval: func(n *Node, in [][]float64, shapes [][]int, out []float64) {
		maxPoolBack64(WindowOf(n), shapes[0], in[0], in[1], out)
	},
	Sample: func() ([][]int, Node) {
		return [][]int{{1, 1, 1, 1}, {1, 1, 1, 1}, {1}}, Node{In: []int{0, 1, 2}, Shape: []int{1, 1, 1, 1}, Perm: Window{1, 1, 1, 1, 0, 0, 1, 1}.Attr()}
	},
	Cases: func(d Draw, special bool) []CompositeCase {
		cs := maxPoolCases(d, special)
		for i := range cs {
			c := &cs[i]
			gs := c.Node.Shape
			c.Args = [][]float32{c.Args[0], d.Uniform(NumElems(gs), -4, 4), c.Args[1]}
			c.Shapes = [][]int{c.Shapes[0], gs, c.Shapes[1]}
			c.Node = Node{In: []int{0, 1, 2}, Shape: slices.Clone(c.Shapes[0]), Perm: c.Node.Perm}
		}
		return cs
	},
	// g moves unchanged but where windows overlap, whose shares an element
	// sums (up to ceil(KH/SH)*ceil(KW/SW) of |g| <= 4 in the cases); the
	// relative part covers the f32 rounding of the suite's computed inputs
	Tol: [2]float64{2e-6, 2e-7}, Flops: 1, Attr: windowAttr,
	FlopsOf: func(n *Node, in func(int) []int) float64 {
		w := WindowOf(n)
		return float64(NumElems(in(1)) * w.KH * w.KW)
	},
})

// cmpSignNodes appends core's cmpSign(a, b) (the sign of a - b, exact
// for infinities and for differences below f32's normal range; NaN where
// either is): a of shape sa, b of shape sb, the result of their broadcast
// shape s.
func cmpSignNodes(a, b int, sa, sb, s []int, add func(Node) int) int {
	const big = math.MaxFloat32
	clamp := func(v int, s []int) int { return add(Node{Op: OpClamp, In: []int{v}, Shape: s, A: -big, B: big}) }
	scale := func(v int, s []int, f float32) int { return add(Node{Op: OpAffine, In: []int{v}, Shape: s, A: f}) }
	sub := func(u, v int, s []int) int { return add(Node{Op: OpSub, In: []int{u, v}, Shape: s}) }
	sign := func(v int, s []int) int {
		return scale(add(Node{Op: OpClamp, In: []int{scale(v, s, 0x1p127)}, Shape: s, A: -0x1p-22, B: 0x1p-22}), s, 0x1p22)
	}
	ca, cb := clamp(a, sa), clamp(b, sb)
	infs := sub(sign(sub(a, ca, sa), sa), sign(sub(b, cb, sb), sb), s)
	fa, fb := clamp(scale(a, sa, 0x1p64), sa), clamp(scale(b, sb, 0x1p64), sb)
	return add(Node{Op: OpAdd, In: []int{infs, sign(add(Node{Op: OpAdd, In: []int{sub(ca, cb, s), sub(fa, fb, s)}, Shape: s}), s)}, Shape: s})
}

// isNaNNode appends core's isNaN(x): 1 where x is NaN, else 0.
func isNaNNode(x int, s []int, add func(Node) int) int {
	c := add(Node{Op: OpClamp, In: []int{x}, Shape: s, A: -math.MaxFloat32, B: math.MaxFloat32})
	in := add(Node{Op: OpInside, In: []int{c}, Shape: s, A: float32(math.Inf(-1)), B: float32(math.Inf(1))})
	return add(Node{Op: OpAffine, In: []int{in}, Shape: s, A: -1, B: 1})
}

// maxPoolBack64 is OpMaxPool2dBack's definition: each window's g to its
// first maximal element (padded places -Inf, the first NaN winning),
// dropped where that is a padded place.
func maxPoolBack64(w Window, s []int, x, g, out []float64) {
	nb, c, h, wd := s[0], s[1], s[2], s[3]
	oh, ow := w.Out(h, wd)
	clear(out)
	for p := range nb * c {
		for y := range oh {
			for xo := range ow {
				bi, bj, best, found := 0, 0, 0.0, false
			window:
				for i := range w.KH {
					for j := range w.KW {
						ih, iw := y*w.SH+i-w.PH, xo*w.SW+j-w.PW
						v := math.Inf(-1)
						if ih >= 0 && ih < h && iw >= 0 && iw < wd {
							v = x[(p*h+ih)*wd+iw]
						}
						if math.IsNaN(v) {
							bi, bj = ih, iw
							break window
						}
						if !found || v > best {
							bi, bj, best, found = ih, iw, v, true
						}
					}
				}
				if bi >= 0 && bi < h && bj >= 0 && bj < wd {
					out[(p*h+bi)*wd+bj] += g[(p*oh+y)*ow+xo]
				}
			}
		}
	}
}
