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
					var is []instance
					for rank := 1; rank <= 4; rank++ {
						s := randShape(r, rank, maxElems)
						is = append(is, compositeInst(r, op, s, 1e-5, nil, dec))
					}
					// a long row, a row of one value (its own mean: 0, and
					// dx 0), and eps 0 on rows that are not constant
					is = append(is, compositeInst(r, op, []int{3, 1000}, 1e-5, nil, dec),
						compositeInst(r, op, []int{5, 1}, 1e-5, nil, dec),
						compositeInst(r, op, []int{4, 33}, 0, nil, dec))
					return is
				}},
				opCase{"special/" + name + suffix, name, func(r *rand.Rand) []instance {
					var is []instance
					for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
						is = append(is, compositeInst(r, op, nil, 1e-5, specialNormRows(r, nc[0], nc[1]), dec))
					}
					return is
				}},
			)
		}
	}
	return cs
}

// compositeInst is one composite node over args of shape s drawn from
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
