package backendtest

import (
	"math/rand/v2"

	"github.com/ag-go/ag/backend"
)

// The composites' tolerances are part of their definitions, and the
// elementwise primitives' part of their rows (backend.OpInfo.Tol).
func init() {
	for _, op := range backend.Ops() {
		if op.IsComposite() {
			c := backend.CompositeOf(op)
			tolerances[op.String()] = Tol{Abs: c.Tol[0], Rel: c.Tol[1], Terms: c.Terms != nil}
		} else if t := op.Info().Tol; t != [2]float64{} {
			tolerances[op.String()] = Tol{Abs: t[0], Rel: t[1]}
		}
	}
}

// compositeCases check every composite op of the IR (backend.Composite)
// against Eval's float64 definition twice on each backend: as the backend
// runs it (its native lowering where Caps.Composites lists it) and as
// plan.Expand decomposes it ("/decomposed"), so that a native lowering and
// the decomposition are held to the same values, the special values
// included. The drawn cases run again with their inputs computed on the
// device ("/computed"), as a backward graph's are: a backend may run a
// kernel in place of such an input (ggml-alloc does, and ggml-cpu's
// rms_norm_back read its overwritten input). On the reference backend the
// decomposed runs check the decomposition itself against the definition.
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
					return compositeInstances(r, op, false, false, dec)
				}},
				opCase{name + "/computed" + suffix, name, func(r *rand.Rand) []instance {
					return compositeInstances(r, op, false, true, dec)
				}},
				opCase{"special/" + name + suffix, name, func(r *rand.Rand) []instance {
					return compositeInstances(r, op, true, false, dec)
				}},
			)
		}
	}
	return cs
}

// compositeInstances are op's cases (Composite.Cases) as instances; with
// computed, inputs that are not indices are an affine map of their arg
// (x*2 - 1), so that the node reads intermediates of the graph: every
// such input in one case, then only input 0, only input 1, ... in the
// next ones, in turn. ggml-alloc runs an op in place of the first source
// it may reuse, so a kernel wrong in place of a later source shows only
// when the earlier ones are args (ggml-cpu's soft_max_back over y). The
// node's value is then negated (exactly) into the output, so that it is
// an intermediate too: native writes an output node straight into its
// arg, where nothing runs in place.
func compositeInstances(r *rand.Rand, op backend.Op, special, computed, dec bool) []instance {
	c := backend.CompositeOf(op)
	var is []instance
	for j, cc := range c.Cases(draw{r}, special) {
		var b builder
		in := make([]int, len(cc.Args))
		only := j%(len(cc.Args)+1) - 1 // -1: every input
		for k, a := range cc.Args {
			in[k] = b.arg(a, cc.Shapes[k]...)
			if computed && !isIndex(c, k) && (only < 0 || only == k) {
				in[k] = b.node(backend.Node{Op: backend.OpAffine, In: []int{in[k]}, Shape: cc.Shapes[k], A: 2, B: -1})
			}
		}
		n := cc.Node
		n.Op = op
		for k, j := range n.In {
			n.In[k] = in[j]
		}
		out := b.node(n)
		if computed {
			out = b.node(backend.Node{Op: backend.OpNeg, In: []int{out}, Shape: n.Shape})
		}
		b.out(out)
		terms := 0
		if c.Terms != nil {
			terms = c.Terms(&n, cc.Shapes)
		}
		inst := b.inst(terms)
		inst.decompose = dec
		is = append(is, inst)
	}
	return is
}

func isIndex(c *backend.Composite, k int) bool {
	for _, i := range c.Index {
		if i == k {
			return true
		}
	}
	return false
}

// draw is the suite's backend.Draw: its sizes and special values.
type draw struct{ r *rand.Rand }

func (d draw) Uniform(n int, lo, hi float64) []float32 { return uniform(d.r, n, lo, hi) }
func (d draw) Shape(rank int) []int                    { return randShape(d.r, rank, maxElems) }
func (d draw) IntN(n int) int                          { return d.r.IntN(n) }

func (d draw) SpecialRows(n, col int, tame bool) [][]float32 {
	if tame {
		return specialNormRows(d.r, n, col)
	}
	data, rows := specialRowsOf(d.r, n, col)
	out := make([][]float32, rows)
	for i := range out {
		out[i] = data[i*n : (i+1)*n]
	}
	return out
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
