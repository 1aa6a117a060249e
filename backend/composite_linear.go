package backend

import (
	"fmt"
	"slices"
)

// OpLinear is a dense layer's product: In[0] = x [..., K] (rank >= 2)
// times In[1] = W [K, N] (stored [N, K] with Node.TransB), giving
// [..., N]: every row of x times the one matrix, as numpy's matmul of a
// batch by a matrix. It is the matmul of x's rows seen as [M, K] without
// the reshapes around it, which a backend that multiplies batches directly
// (ggml's mul_mat broadcasts a matrix over them) need not run. Special
// values follow the matmul's (IEEE sums of products: 0*Inf is NaN).
var OpLinear = defineComposite(Composite{
	Name: "linear", Inputs: 2,
	Check: checkLinear,
	Decompose: func(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
		xs := inShapes[0]
		k, cols := xs[len(xs)-1], n.Shape[len(n.Shape)-1]
		m := NumElems(xs[:len(xs)-1])
		x := flatRows(in[0], xs, m, k, add)
		y := add(Node{Op: OpMatMul, In: []int{x, in[1]}, Shape: []int{m, cols}, TransB: n.TransB})
		if len(n.Shape) == 2 {
			return y
		}
		return add(Node{Op: OpReshape, In: []int{y}, Shape: n.Shape})
	},
	Eval: linear64,
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 2, 3}, {3, 4}}, Node{In: []int{0, 1}, Shape: []int{2, 2, 4}}
	},
	Cases: linearCases(false),
	// f32 sums of up to 300 products of values in [-3, 1] (the computed
	// inputs' range): cancellation leaves an absolute error of about
	// sqrt(K) ulps of the sum of |terms| (a few hundred). Not Terms as
	// matmul's: the suite's magnitudes of computed inputs are not theirs.
	Tol: [2]float64{1e-4, 1e-5},
	FlopsOf: func(n *Node, in func(int) []int) float64 {
		x := in(0)
		return 2 * float64(NumElems(n.Shape)) * float64(x[len(x)-1])
	},
	Attr: func(n *Node) string { return fmt.Sprintf("transB=%t", n.TransB) },
})

// OpLinearBackW is OpLinear's gradient for W: In[0] = x [..., K], In[1] =
// the output's gradient dy [..., N] (the same leading dimensions), giving
// x^T dy [K, N] with x and dy seen as [M, K] and [M, N]: the sum over
// every row of the batch. (For W stored [N, K], its gradient is
// linear_back_w(dy, x).)
var OpLinearBackW = defineComposite(Composite{
	Name: "linear_back_w", Inputs: 2,
	Check: checkLinearBackW,
	Decompose: func(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
		xs, gs := inShapes[0], inShapes[1]
		m := NumElems(xs[:len(xs)-1])
		x := flatRows(in[0], xs, m, n.Shape[0], add)
		g := flatRows(in[1], gs, m, n.Shape[1], add)
		return add(Node{Op: OpMatMul, In: []int{x, g}, Shape: slices.Clone(n.Shape), TransA: true})
	},
	Eval: linearBackW64,
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 2, 3}, {2, 2, 4}}, Node{In: []int{0, 1}, Shape: []int{3, 4}}
	},
	Cases: linearCases(true),
	Tol:   [2]float64{1e-4, 1e-5}, // as linear's
	FlopsOf: func(n *Node, in func(int) []int) float64 {
		x := in(0)
		return 2 * float64(NumElems(n.Shape)) * float64(NumElems(x[:len(x)-1]))
	},
})

// flatRows appends x of shape s seen as [m, k] (a reshape unless it is
// that already).
func flatRows(x int, s []int, m, k int, add func(Node) int) int {
	if len(s) == 2 {
		return x
	}
	return add(Node{Op: OpReshape, In: []int{x}, Shape: []int{m, k}})
}

// checkLinear: x [..., K] of rank >= 2, W [K, N] (or [N, K] with TransB),
// the result [..., N].
func checkLinear(n *Node, in func(int) []int) error {
	x, w := in(0), in(1)
	r := len(x)
	if r < 2 || len(w) != 2 || n.TransA {
		return fmt.Errorf("x %v, W %v (transA %t): want [..., K] of rank >= 2 and [K, N], no transA", x, w, n.TransA)
	}
	k, cols := w[0], w[1]
	if n.TransB {
		k, cols = cols, k
	}
	want := append(slices.Clone(x[:r-1]), cols)
	if x[r-1] != k || !slices.Equal(n.Shape, want) {
		return fmt.Errorf("x %v, W %v (transB %t), shape %v: want x [..., %d] and shape %v", x, w, n.TransB, n.Shape, k, want)
	}
	return nil
}

// checkLinearBackW: x [..., K] and dy [..., N] of one rank >= 2 with the
// same leading dimensions, the result [K, N].
func checkLinearBackW(n *Node, in func(int) []int) error {
	x, g := in(0), in(1)
	r := len(x)
	if r < 2 || len(g) != r || !slices.Equal(x[:r-1], g[:r-1]) || n.TransA || n.TransB {
		return fmt.Errorf("x %v, dy %v: want [..., K] and [..., N] of rank >= 2, no transposes", x, g)
	}
	if want := []int{x[r-1], g[r-1]}; !slices.Equal(n.Shape, want) {
		return fmt.Errorf("shape %v: want %v", n.Shape, want)
	}
	return nil
}

// linear64 computes OpLinear's rows of x times W in float64.
func linear64(n *Node, in [][]float64, shapes [][]int, out []float64) {
	x, w := in[0], in[1]
	xs := shapes[0]
	k, cols := xs[len(xs)-1], n.Shape[len(n.Shape)-1]
	for r := 0; r < NumElems(xs[:len(xs)-1]); r++ {
		for j := 0; j < cols; j++ {
			s := 0.0
			for i := 0; i < k; i++ {
				wij := w[i*cols+j]
				if n.TransB {
					wij = w[j*k+i]
				}
				s += x[r*k+i] * wij
			}
			out[r*cols+j] = s
		}
	}
}

// linearBackW64 computes OpLinearBackW's x^T dy over the rows of x and dy
// in float64.
func linearBackW64(n *Node, in [][]float64, shapes [][]int, out []float64) {
	x, g := in[0], in[1]
	xs := shapes[0]
	k, cols := n.Shape[0], n.Shape[1]
	m := NumElems(xs[:len(xs)-1])
	for i := 0; i < k; i++ {
		for j := 0; j < cols; j++ {
			s := 0.0
			for r := 0; r < m; r++ {
				s += x[r*k+i] * g[r*cols+j]
			}
			out[i*cols+j] = s
		}
	}
}

// linearCases: batches of rank 2 to 4 of drawn shapes with K and N from 1
// to 300, W plain and stored transposed; and, special, rows of x (or of a
// transposed W, whose rows are W's columns) holding a special value each,
// then rows mixing infinities and NaN. For back_w: the same batches, the
// specials in x's rows or dy's.
func linearCases(back bool) func(Draw, bool) []CompositeCase {
	return func(d Draw, special bool) []CompositeCase {
		mk := func(lead []int, k, cols int, transB bool, xv, wv []float32) CompositeCase {
			xs := append(slices.Clone(lead), k)
			if xv == nil {
				xv = d.Uniform(NumElems(xs), -1, 1)
			}
			if back {
				gs := append(slices.Clone(lead), cols)
				if wv == nil {
					wv = d.Uniform(NumElems(gs), -1, 1)
				}
				return CompositeCase{Args: [][]float32{xv, wv}, Shapes: [][]int{xs, gs},
					Node: Node{In: []int{0, 1}, Shape: []int{k, cols}}}
			}
			ws := []int{k, cols}
			if transB {
				ws = []int{cols, k}
			}
			if wv == nil {
				wv = d.Uniform(k*cols, -1, 1)
			}
			return CompositeCase{Args: [][]float32{xv, wv}, Shapes: [][]int{xs, ws},
				Node: Node{In: []int{0, 1}, Shape: append(slices.Clone(lead), cols), TransB: transB}}
		}
		var cs []CompositeCase
		if !special {
			for rank := 2; rank <= 4; rank++ {
				for _, tb := range []bool{false, true} {
					lead := d.Shape(rank - 1)
					for NumElems(lead) > 512 { // x and the result stay small
						i := d.IntN(len(lead))
						lead[i] = max(1, lead[i]/2)
					}
					cs = append(cs, mk(lead, 1+d.IntN(70), 1+d.IntN(70), tb, nil, nil))
				}
			}
			return append(cs, mk([]int{2, 3}, 1, 1, false, nil, nil), mk([]int{3, 1, 5}, 300, 17, true, nil, nil),
				mk([]int{4, 33}, 65, 129, false, nil, nil))
		}
		flat := func(rows [][]float32) []float32 {
			var v []float32
			for _, r := range rows {
				v = append(v, r...)
			}
			return v
		}
		for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
			rows := d.SpecialRows(nc[0], nc[1], false)
			c := 1 + d.IntN(20)
			switch {
			case back:
				// one batch of R rows, the specials in x's rows (along K)
				// or dy's (along N)
				if d.IntN(2) == 0 {
					cs = append(cs, mk([]int{1, len(rows)}, nc[0], c, false, flat(rows), nil))
				} else {
					cs = append(cs, mk([]int{1, len(rows)}, c, nc[0], false, nil, flat(rows)))
				}
			default:
				cs = append(cs, mk([]int{1, len(rows)}, nc[0], c, false, flat(rows), nil),
					mk([]int{1, c}, nc[0], len(rows), true, nil, flat(rows)))
			}
		}
		return cs
	}
}
