package backend

import (
	"fmt"
	"math"
)

// OpSoftmaxExt is the softmax along the last axis of scaled, masked
// scores: softmax(x*A + mask), In[0] = x, In[1] = an additive mask whose
// shape broadcasts to x's (rank at most x's, each dimension 1 or x's), A a
// finite scale (attention's scores; ggml_soft_max_ext). x*A and the sum
// with the mask are f32 operations (an overflow is ±Inf); then OpSoftmax's
// special values per row: a row holding a NaN or a +Inf after masking
// (x*A + mask = +Inf - Inf included) is NaN everywhere, -Inf entries give
// 0 when the row has a finite maximum, and a row of only -Inf is NaN. A
// finite mask (-1e30, as core's attention's) leaves a row with every entry
// masked uniform, not NaN.
var OpSoftmaxExt = defineComposite(Composite{
	Name: "softmax_ext", Inputs: 2,
	Check: checkSoftmaxExt,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		a := add(Node{Op: OpAffine, In: []int{in[0]}, Shape: n.Shape, A: n.A})
		z := add(Node{Op: OpAdd, In: []int{a, in[1]}, Shape: n.Shape})
		return add(Node{Op: OpSoftmax, In: []int{z}, Shape: n.Shape})
	},
	Eval: softmaxExt64,
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3}, {3}}, Node{In: []int{0, 1}, Shape: []int{2, 3}, A: 0.5}
	},
	Cases: softmaxExtCases,
	// softmax's bound: the scores are rounded once more (x*A, + mask)
	Tol: [2]float64{1e-6, 2e-5}, Flops: 14, Attr: scaleAttr,
})

// OpSoftmaxExtBack is OpSoftmaxExt's gradient for x: In[0] = the forward's
// output y, In[1] = its gradient dy, A the forward's scale; per row
// A*y*(dy - sum(dy*y)) (ggml_soft_max_ext_back), in IEEE arithmetic: a NaN
// or an infinity in a row's y or dy makes the row's sum, and so the row,
// NaN or infinite as the formula says. The mask's gradient is this with A
// = 1, summed over the dimensions it was broadcast along.
var OpSoftmaxExtBack = defineComposite(Composite{
	Name: "softmax_ext_back", Inputs: 2,
	Check: checkSoftmaxExtBack,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		y, dy := in[0], in[1]
		p := add(Node{Op: OpMul, In: []int{dy, y}, Shape: n.Shape})
		s := add(Node{Op: OpSum, In: []int{p}, Shape: rowShape(n.Shape), Axis: len(n.Shape) - 1})
		d := add(Node{Op: OpSub, In: []int{dy, s}, Shape: n.Shape})
		t := add(Node{Op: OpMul, In: []int{y, d}, Shape: n.Shape})
		return add(Node{Op: OpAffine, In: []int{t}, Shape: n.Shape, A: n.A})
	},
	Eval: softmaxExtBack64,
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3}, {2, 3}}, Node{In: []int{0, 1}, Shape: []int{2, 3}, A: 0.5}
	},
	Cases: softmaxExtBackCases,
	// a row's dot product, then one difference and two products: the
	// dot's rounding (a few units of sum|dy*y|, up to ~100 for the suite's
	// computed y in [-1, 1]) shows where dy - sum cancels
	Tol: [2]float64{1e-5, 1e-4}, Flops: 5, Attr: scaleAttr,
})

func scaleAttr(n *Node) string { return fmt.Sprintf("scale=%g", n.A) }

// checkScale: A finite.
func checkScale(n *Node) error {
	if math.IsNaN(float64(n.A)) || math.IsInf(float64(n.A), 0) {
		return fmt.Errorf("scale %g: want a finite value", n.A)
	}
	return nil
}

// checkSoftmaxExt: x of the output's shape, rank >= 1; the mask
// broadcasting to it (rank at most x's, each dimension 1 or x's).
func checkSoftmaxExt(n *Node, in func(int) []int) error {
	x, m := in(0), in(1)
	if len(x) == 0 || fmt.Sprint(x) != fmt.Sprint(n.Shape) {
		return fmt.Errorf("input of shape %v: want %v, rank >= 1", x, n.Shape)
	}
	off := len(x) - len(m)
	ok := off >= 0
	for i := 0; ok && i < len(m); i++ {
		ok = m[i] == 1 || m[i] == x[off+i]
	}
	if !ok {
		return fmt.Errorf("mask of shape %v does not broadcast to the input's %v", m, x)
	}
	return checkScale(n)
}

// checkSoftmaxExtBack: y and dy of the output's shape, rank >= 1.
func checkSoftmaxExtBack(n *Node, in func(int) []int) error {
	for k := range n.In {
		if s := in(k); len(s) == 0 || fmt.Sprint(s) != fmt.Sprint(n.Shape) {
			return fmt.Errorf("input %d of shape %v: want %v, rank >= 1", k, s, n.Shape)
		}
	}
	return checkScale(n)
}

// softmaxExt64 computes softmax(x*A + mask) row by row, the scores
// rounded to f32 as the definition says, the mask read at the broadcast
// index.
func softmaxExt64(n *Node, in [][]float64, shapes [][]int, out []float64) {
	xs, ms := shapes[0], shapes[1]
	z := make([]float64, len(out))
	idx := make([]int, len(xs))
	for i := range z {
		// the mask's element for x's element i: x's index with the mask's
		// broadcast dimensions at 0
		r, mi, stride := i, 0, 1
		for d := len(xs) - 1; d >= 0; d-- {
			idx[d] = r % xs[d]
			r /= xs[d]
		}
		for d := len(ms) - 1; d >= 0; d-- {
			if ms[d] != 1 {
				mi += idx[len(xs)-len(ms)+d] * stride
			}
			stride *= ms[d]
		}
		a := float32(in[0][i] * float64(n.A))
		z[i] = float64(a + float32(in[1][mi]))
	}
	Softmax64(false, z, xs[len(xs)-1], out)
}

// softmaxExtBack64 computes A*y*(dy - sum(dy*y)) row by row.
func softmaxExtBack64(n *Node, in [][]float64, _ [][]int, out []float64) {
	cols := n.Shape[len(n.Shape)-1]
	for r := 0; r < len(out)/cols; r++ {
		y, dy, o := in[0][r*cols:(r+1)*cols], in[1][r*cols:(r+1)*cols], out[r*cols:(r+1)*cols]
		s := 0.0
		for k := range y {
			s += dy[k] * y[k]
		}
		for k := range y {
			o[k] = float64(n.A) * y[k] * (dy[k] - s)
		}
	}
}

// softmaxExtScales are the cases' scales: attention's 1/sqrt(64), 1, a
// negative one and one above 1.
var softmaxExtScales = []float32{0.125, 1, -0.5, 2.5}

// softmaxExtCases: x of ranks 1 to 4 under masks of every broadcast (rows
// shared, a scalar, the full shape), attention's causal 0/-1e30 mask over
// [batch, heads, T, T] and its key padding [batch, 1, 1, T] with rows
// wholly masked, a long row; and rows of the specials in x under a
// mask of zeros, the specials in the mask (±Inf, NaN: +Inf - Inf is
// NaN) over finite x, rows masked wholly to -Inf (NaN) and to -1e30
// (uniform), infinite and NaN scores under masked entries. (Not scale 0:
// webgpu's fused affine folds x*0 to 0 at x = ±Inf, where ir.go says NaN.)
func softmaxExtCases(d Draw, special bool) []CompositeCase {
	mk := func(x, m []float32, xs, ms []int, a float32) CompositeCase {
		return CompositeCase{Args: [][]float32{x, m}, Shapes: [][]int{xs, ms}, Node: Node{In: []int{0, 1}, Shape: xs, A: a}}
	}
	scale := func() float32 { return softmaxExtScales[d.IntN(len(softmaxExtScales))] }
	// masks mixes 0, -1e30 and drawn values
	mask := func(n int) []float32 {
		m := d.Uniform(n, -3, 3)
		for i := range m {
			switch d.IntN(3) {
			case 0:
				m[i] = 0
			case 1:
				m[i] = -1e30
			}
		}
		return m
	}
	var cs []CompositeCase
	if !special {
		for rank := 1; rank <= 4; rank++ {
			xs := d.Shape(rank)
			// a broadcast of xs: some leading dimensions dropped, some of the rest 1
			ms := append([]int(nil), xs[d.IntN(rank+1):]...)
			for i := range ms {
				if d.IntN(2) == 0 {
					ms[i] = 1
				}
			}
			cs = append(cs, mk(d.Uniform(NumElems(xs), -4, 4), mask(NumElems(ms)), xs, ms, scale()))
			cs = append(cs, mk(d.Uniform(NumElems(xs), -4, 4), mask(NumElems(xs)), xs, xs, scale()))
		}
		const b, h, t = 2, 3, 9
		causal := make([]float32, t*t)
		for i := range t {
			for j := i + 1; j < t; j++ {
				causal[i*t+j] = -1e30
			}
		}
		pad := make([]float32, b*t)
		for j := 4; j < 2*t; j++ { // batch 1 attends no key
			pad[j] = -1e30
		}
		xs := []int{b, h, t, t}
		cs = append(cs,
			mk(d.Uniform(NumElems(xs), -30, 30), causal, xs, []int{t, t}, 0.125),
			mk(d.Uniform(NumElems(xs), -30, 30), pad, xs, []int{b, 1, 1, t}, 0.125),
			mk(d.Uniform(3*1000, -4, 4), mask(1000), []int{3, 1000}, []int{1000}, 1),
			mk(d.Uniform(4, -4, 4), []float32{0}, []int{4}, []int{}, 1))
		return cs
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
		n := nc[0]
		var x []float32
		rows := d.SpecialRows(n, nc[1], false)
		for _, r := range rows {
			x = append(x, r...)
		}
		xs := []int{len(rows), n}
		cs = append(cs, mk(x, make([]float32, n), xs, []int{n}, scale()))
		cs = append(cs, mk(x, make([]float32, len(x)), xs, xs, scale()))
		// the specials in the mask instead, over finite x; then rows
		// masked wholly to -Inf and to -1e30
		m := append([]float32(nil), x...)
		allNeg := func(v float32) []float32 {
			r := make([]float32, n)
			for i := range r {
				r[i] = v
			}
			return r
		}
		m = append(append(m, allNeg(-inf)...), allNeg(-1e30)...)
		ms := []int{len(rows) + 2, n}
		cs = append(cs, mk(d.Uniform(NumElems(ms), -4, 4), m, ms, ms, scale()))
		// +Inf scores under a -Inf mask (NaN) and under -1e30 (NaN: +Inf
		// stays), a -Inf score under a finite mask (0), a NaN score under
		// -1e30 (NaN)
		xi := d.Uniform(4*n, -4, 4)
		mi := make([]float32, 4*n)
		xi[nc[1]], mi[nc[1]] = inf, -inf
		xi[n+nc[1]], mi[n+nc[1]] = inf, -1e30
		xi[2*n+nc[1]], mi[2*n+nc[1]] = -inf, 1
		xi[3*n+nc[1]], mi[3*n+nc[1]] = nan, -1e30
		cs = append(cs, mk(xi, mi, []int{4, n}, []int{4, n}, 1))
	}
	return cs
}

// softmaxExtBackCases: y rows of positive values summing to 1 (a
// softmax's) and gradients dy drawn over ranks 1 to 4 and a long row; and
// rows of the specials in y, then in dy.
func softmaxExtBackCases(d Draw, special bool) []CompositeCase {
	probs := func(s []int) []float32 {
		y := d.Uniform(NumElems(s), 0, 1)
		cols := s[len(s)-1]
		for r := 0; r < len(y)/cols; r++ {
			row, sum := y[r*cols:(r+1)*cols], float32(0)
			for _, v := range row {
				sum += v
			}
			for k := range row {
				row[k] /= sum
			}
		}
		return y
	}
	mk := func(y, dy []float32, s []int) CompositeCase {
		a := softmaxExtScales[d.IntN(len(softmaxExtScales))]
		return CompositeCase{Args: [][]float32{y, dy}, Shapes: [][]int{s, s}, Node: Node{In: []int{0, 1}, Shape: s, A: a}}
	}
	var cs []CompositeCase
	if !special {
		for rank := 1; rank <= 4; rank++ {
			s := d.Shape(rank)
			cs = append(cs, mk(probs(s), d.Uniform(NumElems(s), -4, 4), s))
		}
		s := []int{3, 700}
		return append(cs, mk(probs(s), d.Uniform(NumElems(s), -4, 4), s))
	}
	for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
		var sp []float32
		rows := d.SpecialRows(nc[0], nc[1], false)
		for _, r := range rows {
			sp = append(sp, r...)
		}
		s := []int{len(rows), nc[0]}
		cs = append(cs, mk(sp, d.Uniform(len(sp), -4, 4), s), mk(probs(s), sp, s))
	}
	return cs
}
