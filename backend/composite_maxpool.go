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
