package backendtest

import (
	"math/rand/v2"

	"github.com/ag-go/ag/backend"
)

// compositeCases check every composite op of the IR (backend.Decompose)
// against Eval's float64 definition twice on each backend: as the backend
// runs it (its native lowering where Caps.Composites lists it) and as
// plan.Expand decomposes it ("/decomposed"), so that a native lowering and
// the decomposition are held to the same values, the special values
// included. On the reference backend the decomposed runs check the
// decomposition itself against the definition.
func compositeCases() []opCase {
	var cs []opCase
	for _, op := range backend.Ops() {
		if !op.IsComposite() {
			continue
		}
		for _, dec := range []bool{false, true} {
			suffix := ""
			if dec {
				suffix = "/decomposed"
			}
			name := op.String()
			cs = append(cs,
				opCase{name + "/ranks" + suffix, name, func(r *rand.Rand) []instance {
					return compositeDrawn(r, op, dec)
				}},
				opCase{"special/" + name + suffix, name, func(r *rand.Rand) []instance {
					return compositeSpecial(r, op, dec)
				}},
			)
		}
	}
	return cs
}

// compositeDrawn are instances of op over random shapes and values.
func compositeDrawn(r *rand.Rand, op backend.Op, dec bool) []instance {
	var is []instance
	switch op {
	case backend.OpLayerNorm, backend.OpLayerNormBack:
		for rank := 1; rank <= 4; rank++ {
			s := randShape(r, rank, maxElems)
			is = append(is, compositeInst(r, op, s, 1e-5, nil, dec))
		}
		// a long row, a row of one value (its own mean: 0, and dx 0),
		// and eps 0 on rows that are not constant
		is = append(is, compositeInst(r, op, []int{3, 1000}, 1e-5, nil, dec),
			compositeInst(r, op, []int{5, 1}, 1e-5, nil, dec),
			compositeInst(r, op, []int{4, 33}, 0, nil, dec))
		// inputs computed on the device, as a backward graph's are: a
		// backend may run a kernel in place of such an input (ggml-alloc
		// does, and ggml-cpu's rms_norm_back read its overwritten input)
		for _, s := range [][]int{{6, 5}, {2, 3, 17}} {
			inst := compositeInst(r, op, s, 1e-5, nil, dec)
			inst.g = computedInputs(inst.g)
			is = append(is, inst)
		}
	case backend.OpCrossEntropy, backend.OpCrossEntropyBack:
		for _, bc := range [][2]int{{1, 1}, {3, 7}, {17, 65}, {129, 3}, {5, 1000}} {
			x := uniform(r, bc[0]*bc[1], -5, 5)
			is = append(is, crossEntropyInst(r, op, x, bc[0], bc[1], labelsIn(r, bc[0], bc[1]), dec))
		}
	default:
		backend.Unknown("backendtest.compositeDrawn", op)
	}
	return is
}

// compositeSpecial are instances of op over the special values.
func compositeSpecial(r *rand.Rand, op backend.Op, dec bool) []instance {
	var is []instance
	switch op {
	case backend.OpLayerNorm, backend.OpLayerNormBack:
		for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
			is = append(is, compositeInst(r, op, nil, 1e-5, specialNormRows(r, nc[0], nc[1]), dec))
		}
	case backend.OpCrossEntropy, backend.OpCrossEntropyBack:
		// rows holding a special, at the label in every other row
		for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
			x, rows := specialRowsOf(r, nc[0], nc[1])
			lab := labelsIn(r, rows, nc[0])
			for i := 0; i < rows; i += 2 {
				lab[i] = float32(nc[1])
			}
			is = append(is, crossEntropyInst(r, op, x, rows, nc[0], lab, dec))
		}
		// labels outside 0..C-1 (the loss is NaN; the gradient's one-hot
		// clamps them), a fraction (rounded), labels at the ends
		bad := []float32{-1, 7, nan32, 2.5, inf32, -inf32, 0, 6, 1e30}
		is = append(is, crossEntropyInst(r, op, uniform(r, len(bad)*7, -5, 5), len(bad), 7, bad, dec))
		for _, v := range bad {
			lab := labelsIn(r, 4, 7)
			lab[2] = v
			is = append(is, crossEntropyInst(r, op, uniform(r, 4*7, -5, 5), 4, 7, lab, dec))
		}
	default:
		backend.Unknown("backendtest.compositeSpecial", op)
	}
	return is
}

// labelsIn draws n whole labels in 0..c-1.
func labelsIn(r *rand.Rand, n, c int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.IntN(c))
	}
	return l
}

// crossEntropyInst is one cross_entropy (or its backward, with a drawn
// loss gradient) of logits x [b, c] at labels lab.
func crossEntropyInst(r *rand.Rand, op backend.Op, x []float32, b, c int, lab []float32, dec bool) instance {
	var bd builder
	in := []int{bd.arg(x, b, c), bd.arg(lab, b)}
	shape := []int{}
	if op == backend.OpCrossEntropyBack {
		in = append(in, bd.arg(uniform(r, 1, -2, 2)))
		shape = []int{b, c}
	}
	bd.out(bd.node(backend.Node{Op: op, In: in, Shape: shape}))
	inst := bd.inst(0)
	inst.decompose = dec
	return inst
}

// compositeInst is one norm node over args of shape s drawn from
// [-4, 4), or, when rows is not nil, over rows of specials (each input in
// turn holding them, the others drawn: a gradient's specials as well as
// the input's).
func compositeInst(r *rand.Rand, op backend.Op, s []int, eps float32, rows [][]float32, dec bool) instance {
	var data []float32
	if rows != nil {
		s = []int{len(rows), len(rows[0])}
		for _, row := range rows {
			data = append(data, row...)
		}
	}
	var b builder
	n := backend.NumElems(s)
	in := make([]int, op.Info().Inputs)
	for k := range in {
		d := uniform(r, n, -4, 4)
		if data != nil && k == r.IntN(len(in)) {
			d = data
		}
		in[k] = b.arg(d, s...)
	}
	b.out(b.node(backend.Node{Op: op, In: in, Shape: s, A: eps}))
	inst := b.inst(0)
	inst.decompose = dec
	return inst
}

// specialNormRows are rows of n values, each holding one of the tame
// specials (those whose squares do not overflow f32: the variance of a row
// holding 1e30 overflows in f32, a rounding, not a semantic, difference)
// at column col among finite values, then a row of +Inf and -Inf, one of
// NaN and +Inf, and a row of zeros (its variance 0: eps alone divides).
func specialNormRows(r *rand.Rand, n, col int) [][]float32 {
	var rows [][]float32
	for _, v := range tame {
		rows = append(rows, salted(r, n, -4, 4, []float32{v}, col))
	}
	if n > 1 {
		rows = append(rows, salted(r, n, -4, 4, []float32{inf32, -inf32}, col, col+1),
			salted(r, n, -4, 4, []float32{nan32, inf32}, col+1, col))
	}
	return append(rows, make([]float32, n))
}

// computedInputs is g with each input of its last node an affine map of
// its argument (x*2 - 1), so that the node reads intermediates of the
// graph, not arguments.
func computedInputs(g *backend.Graph) *backend.Graph {
	last := len(g.Nodes) - 1
	n := g.Nodes[last]
	nodes := append([]backend.Node(nil), g.Nodes[:last]...)
	in := make([]int, len(n.In))
	for k, j := range n.In {
		nodes = append(nodes, backend.Node{Op: backend.OpAffine, In: []int{j}, Shape: g.Nodes[j].Shape, A: 2, B: -1})
		in[k] = len(nodes) - 1
	}
	n.In = in
	nodes = append(nodes, n)
	out := *g
	out.Nodes = nodes
	out.Outputs = []backend.Output{{Node: len(nodes) - 1, Arg: g.Outputs[0].Arg}}
	return &out
}
