package backend

import (
	"fmt"
	"math"
	"slices"
)

// GELU's constants: sqrt(2/pi) and the cubic's coefficient.
const (
	geluC = 0.7978845608028654
	geluA = 0.044715
)

// OpGELU is the tanh approximation of the Gaussian error linear unit,
// 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))), PyTorch's
// gelu(approximate="tanh"). It is x itself for large x and -0 for large
// negative x (1 + tanh is 0 there); NaN at -Inf (-Inf*0, as the formula
// gives), +Inf at +Inf.
var OpGELU = defineComposite(Composite{
	Name: "gelu", Inputs: 1,
	Check: checkSameShapes,
	// x*sigmoid(z), z = 2*sqrt(2/pi)*x*(1 + 0.044715*x^2): the same
	// function (0.5*(1 + tanh(y)) = sigmoid(2y)) without 1 + tanh's
	// cancellation for negative x, and the same special values.
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		x := in[0]
		_, _, s := geluGate(n.Shape, x, add)
		return add(Node{Op: OpMul, In: []int{x, s}, Shape: n.Shape})
	},
	Eval: func(_ *Node, in [][]float64, _ [][]int, out []float64) {
		for i, x := range in[0] {
			out[i] = 0.5 * x * (1 + math.Tanh(geluC*(x+geluA*x*x*x)))
		}
	},
	Sample: func() ([][]int, Node) { return [][]int{{2, 3}}, Node{In: []int{0}, Shape: []int{2, 3}} },
	Cases:  geluCases(1),
	// a sigmoid's or tanh's error (theirs are 1e-6, 1e-5) times x
	Tol: [2]float64{2e-6, 2e-5}, Flops: 8,
})

// OpGELUBack is OpGELU's input gradient: In[0] = x, In[1] = the output's
// gradient dy; dy*gelu'(x), gelu'(x) = 0.5*(1 + t) + 0.5*x*(1 -
// t^2)*sqrt(2/pi)*(1 + 3*0.044715*x^2), t = tanh(sqrt(2/pi)*(x +
// 0.044715*x^3)). gelu' is 1 for large x and 0 for large negative x, NaN
// at ±Inf (Inf*0, as the formula gives).
var OpGELUBack = defineComposite(Composite{
	Name: "gelu_back", Inputs: 2,
	Check: checkSameShapes,
	// gelu' = s + x*s*s'*k, s = sigmoid(z), s' = sigmoid(-z) (1 - s
	// without its cancellation), k = dz/dx = 2*sqrt(2/pi)*(1 +
	// 3*0.044715*x^2). x*s*s' is 0 wherever |z| is large (s' or s is) and
	// NaN at ±Inf; x^2 in k is clamped to 1e8 (|x| <= 1e4, far past where
	// s*s' is 0) so that it never overflows into 0*Inf.
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		x, dy, sh := in[0], in[1], n.Shape
		x2, z, s := geluGate(sh, x, add)
		nz := add(Node{Op: OpNeg, In: []int{z}, Shape: sh})
		s1 := add(Node{Op: OpSigmoid, In: []int{nz}, Shape: sh})
		xs := add(Node{Op: OpMul, In: []int{x, s}, Shape: sh})
		xq := add(Node{Op: OpMul, In: []int{xs, s1}, Shape: sh})
		x2c := add(Node{Op: OpClamp, In: []int{x2}, Shape: sh, A: 0, B: 1e8})
		k := add(Node{Op: OpAffine, In: []int{x2c}, Shape: sh, A: 6 * geluC * geluA, B: 2 * geluC})
		t := add(Node{Op: OpMul, In: []int{xq, k}, Shape: sh})
		g := add(Node{Op: OpAdd, In: []int{s, t}, Shape: sh})
		return add(Node{Op: OpMul, In: []int{g, dy}, Shape: sh})
	},
	Eval: func(_ *Node, in [][]float64, _ [][]int, out []float64) {
		for i, x := range in[0] {
			t := math.Tanh(geluC * (x + geluA*x*x*x))
			out[i] = in[1][i] * (0.5*(1+t) + 0.5*x*(1-t*t)*geluC*(1+3*geluA*x*x))
		}
	},
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3}, {2, 3}}, Node{In: []int{0, 1}, Shape: []int{2, 3}}
	},
	Cases: geluCases(2),
	// two sigmoids, a product of them with x's cubic, times dy
	Tol: [2]float64{2e-6, 2e-5}, Flops: 16,
})

// geluGate appends x2 = x*x, z = 2*sqrt(2/pi)*x*(1 + 0.044715*x2) and s =
// sigmoid(z) for x of shape sh. z is ±Inf wherever x2 overflows (s 1 or 0
// exactly).
func geluGate(sh []int, x int, add func(Node) int) (x2, z, s int) {
	x2 = add(Node{Op: OpMul, In: []int{x, x}, Shape: sh})
	h := add(Node{Op: OpAffine, In: []int{x2}, Shape: sh, A: 2 * geluC * geluA, B: 2 * geluC})
	z = add(Node{Op: OpMul, In: []int{x, h}, Shape: sh})
	return x2, z, add(Node{Op: OpSigmoid, In: []int{z}, Shape: sh})
}

// checkSameShapes: every input of the output's shape.
func checkSameShapes(n *Node, in func(int) []int) error {
	for k := range n.In {
		if s := in(k); !slices.Equal(s, n.Shape) {
			return fmt.Errorf("input %d of shape %v: want %v", k, s, n.Shape)
		}
	}
	return nil
}

// geluCases are an elementwise composite's instances over its inputs:
// random shapes of rank 1 to 4 over [-8, 8) (past where the gate
// saturates), and rows of every special value in one input drawn in turn
// (x's or the gradient's), the others drawn from [-4, 4).
func geluCases(inputs int) func(Draw, bool) []CompositeCase {
	return func(d Draw, special bool) []CompositeCase {
		mk := func(s []int, at int, data []float32) CompositeCase {
			c := CompositeCase{Node: Node{Shape: s}}
			for k := 0; k < inputs; k++ {
				v := d.Uniform(NumElems(s), -8, 8)
				if k == at {
					v = data
				} else if data != nil {
					v = d.Uniform(NumElems(s), -4, 4)
				}
				c.Args, c.Shapes = append(c.Args, v), append(c.Shapes, s)
				c.Node.In = append(c.Node.In, k)
			}
			return c
		}
		var cs []CompositeCase
		if special {
			for at := 0; at < inputs; at++ {
				for _, nc := range [][2]int{{5, 0}, {300, 299}} {
					rows := d.SpecialRows(nc[0], nc[1], false)
					var data []float32
					for _, r := range rows {
						data = append(data, r...)
					}
					cs = append(cs, mk([]int{len(rows), nc[0]}, at, data))
				}
			}
			return cs
		}
		for rank := 1; rank <= 4; rank++ {
			cs = append(cs, mk(d.Shape(rank), -1, nil))
		}
		return append(cs, mk([]int{3, 1000}, -1, nil))
	}
}
