package backend

import (
	"fmt"
	"math"
)

// OpLayerNorm normalizes along the last axis without gain or bias:
// (x - mean)/sqrt(var + A), var the biased variance (PyTorch's layer_norm,
// ggml_norm), A = eps >= 0. A row holding a NaN or an infinity is NaN; a
// constant row with eps 0 is NaN (0/0).
var OpLayerNorm = defineComposite(Composite{
	Name: "layer_norm", Inputs: 1,
	Check: checkNorm,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		d, r := normStats(n.Shape, in[0], n.A, add)
		return add(Node{Op: OpMul, In: []int{d, r}, Shape: n.Shape})
	},
	Eval:   layerNorm64,
	Sample: func() ([][]int, Node) { return [][]int{{2, 3}}, Node{In: []int{0}, Shape: []int{2, 3}, A: 1e-5} },
	Cases:  normCases(1, false),
	// sums of a row's values and squares, then a division by the deviation
	// (outputs of a few units); Abs: the f32 mean of a row at 100 +- 1 is
	// ~2e-5 of its deviation off
	Tol: [2]float64{5e-5, 1e-4}, Flops: 8, Attr: epsAttr,
})

// OpLayerNormBack is OpLayerNorm's input gradient: In[0] = x, In[1] = the
// output's gradient dy, A = eps; per row, with r = 1/sqrt(var + eps), xhat
// = (x - mean)*r and the centred gradient c = dy - mean(dy),
// dx = r*(c - xhat*mean(c*xhat)) (mean(c*xhat) is mean(dy*xhat): xhat's
// mean is 0). A row where x or dy holds a NaN or an infinity is NaN, as
// the forward's: through the centred c, an infinite dy reaches every
// element of its row.
var OpLayerNormBack = defineComposite(Composite{
	Name: "layer_norm_back", Inputs: 2,
	Check: checkNorm,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		// the gradient of (x - mean)*r through the mean and the variance
		d, r := normStats(n.Shape, in[0], n.A, add)
		dy := in[1]
		xhat := add(Node{Op: OpMul, In: []int{d, r}, Shape: n.Shape})
		mdy := rowMean(n.Shape, dy, 0, add)
		c := add(Node{Op: OpSub, In: []int{dy, mdy}, Shape: n.Shape})
		p := add(Node{Op: OpMul, In: []int{c, xhat}, Shape: n.Shape})
		mp := rowMean(n.Shape, p, 0, add)
		t := add(Node{Op: OpMul, In: []int{xhat, mp}, Shape: n.Shape})
		w := add(Node{Op: OpSub, In: []int{c, t}, Shape: n.Shape})
		return add(Node{Op: OpMul, In: []int{w, r}, Shape: n.Shape})
	},
	Eval: layerNorm64,
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3}, {2, 3}}, Node{In: []int{0, 1}, Shape: []int{2, 3}, A: 1e-5}
	},
	Cases: normCases(2, false),
	Tol:   [2]float64{2e-5, 1e-4}, Flops: 14, Attr: epsAttr,
})

func epsAttr(n *Node) string { return fmt.Sprintf("eps=%g", n.A) }

// checkNorm: every input of the output's shape, rank >= 1; eps finite, >= 0.
func checkNorm(n *Node, in func(int) []int) error {
	for k := range n.In {
		if s := in(k); len(s) == 0 || fmt.Sprint(s) != fmt.Sprint(n.Shape) {
			return fmt.Errorf("input %d of shape %v: want %v, rank >= 1", k, s, n.Shape)
		}
	}
	if !(n.A >= 0) || math.IsInf(float64(n.A), 0) {
		return fmt.Errorf("eps %g: want a finite value >= 0", n.A)
	}
	return nil
}

// layerNorm64 computes OpLayerNorm's (x-mean)*r, r = 1/sqrt(var+eps), or
// OpLayerNormBack's r*(c - xhat*mean(c*xhat)), c = dy - mean(dy), row by row.
func layerNorm64(n *Node, in [][]float64, _ [][]int, out []float64) {
	rowNorm64(n, in, out, true)
}

// rowNorm64 runs norm64 on each row (the last axis) of n's inputs.
func rowNorm64(n *Node, in [][]float64, out []float64, centre bool) {
	cols := n.Shape[len(n.Shape)-1]
	for r := 0; r < len(out)/cols; r++ {
		var dy []float64
		if len(in) > 1 {
			dy = in[1][r*cols : (r+1)*cols]
		}
		norm64(in[0][r*cols:(r+1)*cols], dy, out[r*cols:(r+1)*cols], float64(n.A), centre)
	}
}

// norm64 normalizes one group of values x into o: (x - mean)*r with r =
// 1/sqrt(mean((x - mean)^2) + eps), or, with dy, writes the input
// gradient r*(c - xhat*mean(c*xhat)), xhat = (x - mean)*r, c = dy -
// mean(dy). Without centre the means of x and dy are 0: RMS norm's x*r and
// r*(dy - xhat*mean(dy*xhat)).
func norm64(x, dy, o []float64, eps float64, centre bool) {
	c := float64(len(x))
	mean, v := 0.0, 0.0
	if centre {
		for _, e := range x {
			mean += e
		}
		mean /= c
	}
	for _, e := range x {
		v += (e - mean) * (e - mean)
	}
	rs := 1 / math.Sqrt(v/c+eps)
	if dy == nil { // the forward
		for k, e := range x {
			o[k] = (e - mean) * rs
		}
		return
	}
	mdy, mp := 0.0, 0.0
	if centre {
		for _, g := range dy {
			mdy += g
		}
		mdy /= c
	}
	for k, e := range x {
		mp += (dy[k] - mdy) * ((e - mean) * rs)
	}
	mp /= c
	for k, e := range x {
		o[k] = rs * (dy[k] - mdy - (e-mean)*rs*mp)
	}
}

// normCases are a norm's instances over its inputs: random shapes of rank
// 1 to 4, a long row, rows of one value (their own mean: 0, and dx 0), eps
// 0 on rows that are not constant and on a row of zeros (0/0: NaN); and
// rows of the tame specials, in one input drawn in turn (a gradient's
// specials as well as the input's). With batch the groups normalized are
// channels (axis 1) instead of rows: ranks 2 to 4, each special row a
// channel of shape [1, rows, n].
func normCases(inputs int, batch bool) func(Draw, bool) []CompositeCase {
	return func(d Draw, special bool) []CompositeCase {
		// rows: the rows of s's last axis, or with batch of [1, rows, cols]
		mk := func(s []int, eps float32, rows [][]float32) CompositeCase {
			var data []float32
			if rows != nil {
				s = []int{len(rows), len(rows[0])}
				if batch {
					s = []int{1, len(rows), len(rows[0])}
				}
				for _, row := range rows {
					data = append(data, row...)
				}
			}
			c := CompositeCase{Node: Node{Shape: s, A: eps}}
			at := d.IntN(inputs)
			for k := 0; k < inputs; k++ {
				v := d.Uniform(NumElems(s), -4, 4)
				if data != nil && k == at {
					v = data
				}
				c.Args, c.Shapes = append(c.Args, v), append(c.Shapes, s)
				c.Node.In = append(c.Node.In, k)
			}
			return c
		}
		var cs []CompositeCase
		if special {
			for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
				cs = append(cs, mk(nil, 1e-5, d.SpecialRows(nc[0], nc[1], true)))
			}
			return cs
		}
		lo := 1
		if batch {
			lo = 2
		}
		for rank := lo; rank <= 4; rank++ {
			cs = append(cs, mk(d.Shape(rank), 1e-5, nil))
		}
		// rows far from 0 for their spread (mean 100, variance ~0.3): a
		// variance as E[x^2] - E[x]^2 in f32 cancels there (ggml-vulkan's
		// norm shader did); x is input 0
		off := mk([]int{6, 37}, 1e-5, nil)
		for i := range off.Args[0] {
			off.Args[0][i] = 100 + off.Args[0][i]/4
		}
		// a row (channel) of zeros with eps 0: x is input 0
		zero := mk([][]int{{3, 8}, {1, 3, 8}}[btoi(batch)], 0, nil)
		clear(zero.Args[0][8:16])
		long, one := []int{3, 1000}, []int{5, 1}
		if batch {
			long, one = []int{2, 3, 500}, []int{1, 5, 1}
		}
		return append(cs, off, zero, mk(long, 1e-5, nil), mk(one, 1e-5, nil), mk([]int{4, 33}, 0, nil))
	}
}
