package backend

import (
	"fmt"
	"math"
)

// OpDropout is inverted dropout of In[0] = x by In[1] = u, uniform draws in
// [0, 1) (an OpRandUniform node) of x's shape, with probability A = p, 0 <
// p < 1: x*s where p <= u < 2 (u >= p, as core.Dropout's mask), else x*0,
// s = 1/(1-p) rounded to f32 (from f32 arithmetic: 1/(1-p)). A dropped
// NaN or infinity is NaN (a product, as PyTorch's), a NaN u drops. The
// gradient for x is the same op over dy and the same u.
var OpDropout = defineComposite(Composite{
	Name: "dropout", Inputs: 2,
	Check: func(n *Node, in func(int) []int) error {
		if err := checkSameShapes(n, in); err != nil {
			return err
		}
		if !(n.A > 0 && n.A < 1) {
			return fmt.Errorf("probability %g: want 0 < p < 1", n.A)
		}
		return nil
	},
	// core.Dropout's ops before it was a composite: inside(u, p', 2) with
	// p' the float below p (u > p' is u >= p), scaled, times x.
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		below := math.Nextafter32(n.A, float32(math.Inf(-1)))
		m := add(Node{Op: OpInside, In: []int{in[1]}, Shape: n.Shape, A: below, B: 2})
		ms := add(Node{Op: OpAffine, In: []int{m}, Shape: n.Shape, A: DropoutScale(n.A)})
		return add(Node{Op: OpMul, In: []int{in[0], ms}, Shape: n.Shape})
	},
	Eval: func(n *Node, in [][]float64, _ [][]int, out []float64) {
		p := float64(n.A)
		for i, x := range in[0] {
			keep := 0.0
			if u := in[1][i]; u >= p && u < 2 {
				keep = 1
			}
			out[i] = x * keep / (1 - p)
		}
	},
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3}, {2, 3}}, Node{In: []int{0, 1}, Shape: []int{2, 3}, A: 0.25}
	},
	Cases: dropoutCases,
	// x times 1/(1-p) in f32: two roundings
	Tol: [2]float64{0, 2.4e-7}, Flops: 2,
	Attr: func(n *Node) string { return fmt.Sprintf("p=%g", n.A) },
})

// DropoutScale is OpDropout's factor for the kept values, 1/(1-p) in f32
// arithmetic.
func DropoutScale(p float32) float32 { return 1 / (1 - p) }

// dropoutCases: x over [-4, 4) and u over [0, 1) at a few p, with u at p,
// the floats either side of it, 0 and the largest draw; specials in x
// (u drawn), and in u (x drawn).
func dropoutCases(d Draw, special bool) []CompositeCase {
	mk := func(x, u []float32, s []int, p float32) CompositeCase {
		return CompositeCase{Args: [][]float32{x, u}, Shapes: [][]int{s, s}, Node: Node{In: []int{0, 1}, Shape: s, A: p}}
	}
	var cs []CompositeCase
	if special {
		for _, nc := range [][2]int{{5, 0}, {300, 299}} {
			rows := d.SpecialRows(nc[0], nc[1], false)
			var data []float32
			for _, r := range rows {
				data = append(data, r...)
			}
			s := []int{len(rows), nc[0]}
			cs = append(cs, mk(data, d.Uniform(len(data), 0, 1), s, 0.5), mk(d.Uniform(len(data), -4, 4), data, s, 0.5))
		}
		return cs
	}
	ps := []float32{0.1, 0.5, 0.9, 0x1p-24}
	for rank := 1; rank <= 4; rank++ {
		s := d.Shape(rank)
		cs = append(cs, mk(d.Uniform(NumElems(s), -4, 4), d.Uniform(NumElems(s), 0, 1), s, ps[rank-1]))
	}
	for _, p := range ps {
		edge := []float32{p, math.Nextafter32(p, 0), math.Nextafter32(p, 1), 0, math.Nextafter32(1, 0), 1, 1.999, 2}
		cs = append(cs, mk(d.Uniform(len(edge), -4, 4), edge, []int{len(edge)}, p))
	}
	return cs
}
