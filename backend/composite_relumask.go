package backend

import (
	"fmt"
	"math"
)

// OpReLUMask is ReLU's gradient mask, as PyTorch's threshold_backward
// takes it: 1 where x > 0 (+Inf and subnormals included), +0 where x <= 0
// (-0 and -Inf included), NaN at NaN, so that a NaN input gives a NaN
// gradient rather than a zero one. It is a composite because no single
// primitive is this step with NaN kept, and a backend's sign step is one
// kernel where the decomposition is three.
var OpReLUMask = defineComposite(Composite{
	Name: "relu_mask", Inputs: 1,
	Check: func(n *Node, in func(int) []int) error { return sameShape(n, in(0)) },
	// x*2^127 is at least 2^-22 for every positive x (the smallest
	// subnormal is 2^-149), so the clamp gives exactly 0 or 2^-22 (or
	// NaN), scaled to 0 or 1; +0 at -0 (x*2^127 + 0). The clamp stands
	// between the two scales: a WGSL compiler may fold x*2^127*2^22 into
	// x*Inf (lavapipe does), which is NaN at 0.
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		a := add(Node{Op: OpAffine, In: in, Shape: n.Shape, A: 0x1p127})
		c := add(Node{Op: OpClamp, In: []int{a}, Shape: n.Shape, A: 0, B: 0x1p-22})
		return add(Node{Op: OpAffine, In: []int{c}, Shape: n.Shape, A: 0x1p22})
	},
	Eval: func(_ *Node, in [][]float64, _ [][]int, out []float64) {
		for i, x := range in[0] {
			switch {
			case x > 0:
				out[i] = 1
			case x <= 0:
				out[i] = 0
			default:
				out[i] = math.NaN()
			}
		}
	},
	Sample: func() ([][]int, Node) { return [][]int{{2, 3}}, Node{In: []int{0}, Shape: []int{2, 3}} },
	Cases: func(d Draw, special bool) []CompositeCase {
		one := func(s []int, x []float32) CompositeCase {
			return CompositeCase{Args: [][]float32{x}, Shapes: [][]int{s}, Node: Node{In: []int{0}, Shape: s}}
		}
		if special {
			var x []float32
			for _, r := range d.SpecialRows(3, 0, false) {
				x = append(x, r...)
			}
			// the smallest subnormals and the largest finite values too
			x = append(x, math.Float32frombits(1), -math.Float32frombits(1), math.MaxFloat32, -math.MaxFloat32)
			return []CompositeCase{one([]int{len(x)}, x)}
		}
		var cs []CompositeCase
		for rank := 1; rank <= 4; rank++ {
			s := d.Shape(rank)
			x := d.Uniform(NumElems(s), -4, 4)
			for i := 0; i < len(x); i += 3 {
				x[i] = 0 // exact zeros: the step's edge
			}
			cs = append(cs, one(s, x))
		}
		return cs
	},
	Flops: 1,
})

// sameShape checks that the node has its one input's shape.
func sameShape(n *Node, s []int) error {
	if fmt.Sprint(s) != fmt.Sprint(n.Shape) {
		return fmt.Errorf("input of shape %v: want the node's %v", s, n.Shape)
	}
	return nil
}
