package backend

import "fmt"

// OpSumSquares is the sum of the squares of every element of its inputs
// (one or more, of any shapes), shape [1]: a global gradient norm's square
// (nn.ClipGradNorm), summed in f32, so that a square or the sum past f32's
// range is +Inf and a NaN anywhere is NaN. One composite where the
// decomposition is three or more nodes per input: ggml-cpu sums nine inputs in one
// kernel.
var OpSumSquares = defineComposite(Composite{
	Name: "sum_squares", Inputs: Variadic,
	Check: func(n *Node, in func(int) []int) error {
		if fmt.Sprint(n.Shape) != "[1]" {
			return fmt.Errorf("shape %v: want [1]", n.Shape)
		}
		return nil
	},
	Decompose: func(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
		total := -1
		for k, x := range in {
			sz := NumElems(inShapes[k])
			sq := add(Node{Op: OpMul, In: []int{x, x}, Shape: inShapes[k]})
			flat := add(Node{Op: OpReshape, In: []int{sq}, Shape: []int{sz}})
			s := add(Node{Op: OpSum, In: []int{flat}, Shape: []int{1}, Axis: 0})
			if total < 0 {
				total = s
			} else {
				total = add(Node{Op: OpAdd, In: []int{total, s}, Shape: []int{1}})
			}
		}
		return total
	},
	Eval: func(_ *Node, in [][]float64, _ [][]int, out []float64) {
		// the squares and partial sums rounded to f32 where they leave its
		// range, as an f32 sum overflows (Inf, not a finite float64)
		sum := 0.0
		for _, x := range in {
			for _, v := range x {
				sum += float64(float32(v * v))
			}
		}
		out[0] = sum
	},
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3}, {4}}, Node{In: []int{0, 1}, Shape: []int{1}}
	},
	Cases: func(d Draw, special bool) []CompositeCase {
		mk := func(shapes [][]int, vals func(k, n int) []float32) CompositeCase {
			c := CompositeCase{Shapes: shapes, Node: Node{Shape: []int{1}}}
			for k, s := range shapes {
				c.Args = append(c.Args, vals(k, NumElems(s)))
				c.Node.In = append(c.Node.In, k)
			}
			return c
		}
		uniform := func(_, n int) []float32 { return d.Uniform(n, -4, 4) }
		if special {
			// each special in its own input among drawn ones
			var cs []CompositeCase
			for _, row := range d.SpecialRows(5, 2, false) {
				cs = append(cs, mk([][]int{{3, 2}, {5}, {7}}, func(k, n int) []float32 {
					if k == 1 {
						return row
					}
					return d.Uniform(n, -4, 4)
				}))
			}
			return cs
		}
		var cs []CompositeCase
		for _, count := range []int{1, 2, 3, 9, 10, 23} { // nine: ggml-cpu's kernel takes nine sources
			shapes := make([][]int, count)
			for k := range shapes {
				shapes[k] = d.Shape(1 + d.IntN(4))
			}
			cs = append(cs, mk(shapes, uniform))
		}
		return append(cs, mk([][]int{{3000, 7}}, uniform))
	},
	Tol: [2]float64{1e-6, 2e-6},
	Terms: func(_ *Node, shapes [][]int) int {
		t := 0
		for _, s := range shapes {
			t += NumElems(s)
		}
		return t
	},
	FlopsOf: func(n *Node, in func(int) []int) float64 {
		f := 0.0
		for k := range n.In {
			f += 2 * float64(NumElems(in(k)))
		}
		return f
	},
})
