package backend

import (
	"fmt"
	"slices"
)

// OpSumTo sums x (In[0]) down to Node.Shape, PyTorch's sum_to_size: the
// shapes aligned at their last axes, x is summed over its leading axes
// that Shape lacks and over the axes where Shape has size 1 (Shape must
// broadcast to x's shape). It is the gradient of a broadcast (core's
// unbroadcast): one op where the decomposition sums one axis at a time,
// so that ggml reduces a bias gradient [B, T, C] -> [C] in one kernel
// instead of a permuted copy and a row sum per axis.
var OpSumTo = defineComposite(Composite{
	Name: "sum_to", Inputs: 1,
	Check: func(n *Node, in func(int) []int) error {
		x := in(0)
		if !SumToShape(x, n.Shape) {
			return fmt.Errorf("shape %v: want the shape of a broadcast to %v (sizes 1 or %v's, aligned at the last axis)", n.Shape, x, x)
		}
		return nil
	},
	Decompose: func(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
		// one kept-rank sum per reduced axis, then the target's rank
		s := slices.Clone(inShapes[0])
		v := in[0]
		for ax := range s {
			if sumToReduces(inShapes[0], n.Shape, ax) {
				s[ax] = 1
				v = add(Node{Op: OpSum, In: []int{v}, Shape: slices.Clone(s), Axis: ax})
			}
		}
		return add(Node{Op: OpReshape, In: []int{v}, Shape: slices.Clone(n.Shape)})
	},
	Eval:   sumTo64,
	Sample: func() ([][]int, Node) { return [][]int{{2, 3}}, Node{In: []int{0}, Shape: []int{3}} },
	Cases:  sumToCases,
	// a sum's bound (backendtest's "sum"), relative to the sum of |terms|
	Tol: [2]float64{1e-6, 2e-6}, Flops: 1,
	Terms: func(n *Node, inShapes [][]int) int { return NumElems(inShapes[0]) / NumElems(n.Shape) },
	Attr:  func(n *Node) string { return fmt.Sprintf("to=%v", n.Shape) },
})

// SumToShape reports whether x sums to shape as OpSumTo: rank(shape) <=
// rank(x) and, aligned at the last axes, each of shape's sizes is x's or 1.
func SumToShape(x, shape []int) bool {
	off := len(x) - len(shape)
	if off < 0 {
		return false
	}
	for k, d := range shape {
		if d != 1 && d != x[off+k] {
			return false
		}
	}
	return true
}

// sumToReduces reports whether OpSumTo from x to shape sums axis ax of x:
// a leading axis shape lacks, or one where shape has 1 and x does not.
func sumToReduces(x, shape []int, ax int) bool {
	off := len(x) - len(shape)
	return ax < off || shape[ax-off] == 1 && x[ax] != 1
}

// sumTo64 adds every element of x into the output element it maps to (its
// coordinates with the summed axes at 0), in one pass.
func sumTo64(n *Node, in [][]float64, shapes [][]int, out []float64) {
	x := shapes[0]
	off := len(x) - len(n.Shape)
	clear(out)
	coord := make([]int, len(x))
	for _, v := range in[0] {
		o := 0
		for k, d := range n.Shape {
			c := 0
			if d != 1 {
				c = coord[off+k]
			}
			o = o*d + c
		}
		out[o] += v
		for ax := len(x) - 1; ax >= 0; ax-- { // next coordinate, last axis fastest
			if coord[ax]++; coord[ax] < x[ax] {
				break
			}
			coord[ax] = 0
		}
	}
}

// sumToCases: drawn shapes of rank 1 to 4 with a drawn target (leading
// axes dropped, others kept or 1), the shapes core's gradients give (a
// bias [B, T, C] -> [C], a positional table -> [1, T, C], a convolution's
// bias -> [C, 1, 1], a full sum, size-1 axes, no sum at all), and long
// reductions (past ggml-vulkan's one-pass window and row length); with
// special, rows holding the tame specials summed along and across.
func sumToCases(d Draw, special bool) []CompositeCase {
	mk := func(x []float32, s, to []int) CompositeCase {
		if x == nil {
			x = d.Uniform(NumElems(s), -4, 4)
		}
		return CompositeCase{Args: [][]float32{x}, Shapes: [][]int{s}, Node: Node{In: []int{0}, Shape: to}}
	}
	var cs []CompositeCase
	if special {
		for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
			rows := d.SpecialRows(nc[0], nc[1], true)
			r, c := len(rows), nc[0]
			x, xt := make([]float32, 0, r*c), make([]float32, r*c)
			for i, row := range rows {
				x = append(x, row...)
				for j, v := range row {
					xt[j*r+i] = v
				}
			}
			// along each row; across rows (the columns of the transpose
			// hold the rows: each column sum meets one special)
			cs = append(cs, mk(x, []int{r, c}, []int{r, 1}), mk(xt, []int{c, r}, []int{r}),
				mk(xt, []int{c, r}, []int{1, r}), mk(x, []int{r, c}, []int{}))
		}
		return cs
	}
	for rank := 1; rank <= 4; rank++ {
		s := d.Shape(rank)
		drop := d.IntN(rank + 1)
		to := slices.Clone(s[drop:])
		for k := range to {
			if d.IntN(2) == 0 {
				to[k] = 1
			}
		}
		cs = append(cs, mk(nil, s, to))
	}
	for _, st := range [][2][]int{
		{{4, 6, 24}, {24}}, {{4, 6, 24}, {1, 6, 24}}, {{4, 6, 24}, {6, 1}}, {{3, 5, 4, 4}, {5, 1, 1}},
		{{2, 3, 4, 5}, {3, 1, 5}}, {{2, 3, 4, 5}, {2, 1, 4, 1}}, {{4, 1, 6}, {6}}, {{4, 1, 6}, {1, 1}},
		{{7, 5}, {}}, {{1, 7}, {7}}, {{3, 4}, {3, 4}}, {{1}, {}},
		{{3000, 5}, {5}}, {{9000, 2}, {1, 2}}, {{2, 9000}, {2, 1}},
	} {
		cs = append(cs, mk(nil, st[0], st[1]))
	}
	return cs
}
