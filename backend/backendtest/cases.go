package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ag-go/ag/backend"
)

// Tol is an error bound: |got - want| <= Abs + Rel*|want| per element, or,
// with Terms, Abs + Rel*sqrt(n)*m where m is the same graph evaluated on the
// absolute values of its args (the sum of |terms| an element adds up) and n
// the reduction length. Terms keeps sums with cancellation (matmul, sum)
// checkable: an f32 sum's error grows with its terms, not with its result.
type Tol struct {
	Abs, Rel float64
	Terms    bool
	// Bits: every element's f32 bits must be the reference's, signs of
	// zeros and subnormals included (words of packed values), but that a
	// 16-bit half that is a NaN of Half's format (1: f16, 2: bf16) in both
	// matches a NaN of the same sign with any payload (ir.go: NVIDIA's
	// conversion stores 0x7fff where the reference stores 0x7e00).
	Bits bool
	Half int
	// NaN, with Bits: an element that is an f32 NaN in both matches
	// whatever the signs and payloads (the values an unpack gives: ir.go
	// leaves a NaN's sign and payload to the device; NVIDIA's f16
	// conversion gives 0x7fffffff for every NaN).
	NaN bool
}

// halfNaN reports whether the 16 bits h are a NaN of format half (1: f16, 2: bf16).
func halfNaN(h uint16, half int) bool {
	if half == 1 {
		return h&0x7c00 == 0x7c00 && h&0x3ff != 0
	}
	return h&0x7f80 == 0x7f80 && h&0x7f != 0
}

// sameWord reports whether words a and b match under t (see Tol.Bits).
func (t Tol) sameWord(a, b uint32) bool {
	if a == b {
		return true
	}
	if t.NaN && a&0x7fffffff > 0x7f800000 && b&0x7fffffff > 0x7f800000 {
		return true
	}
	if t.Half == 0 {
		return false
	}
	for _, sh := range []uint{0, 16} {
		x, y := uint16(a>>sh), uint16(b>>sh)
		if x != y && !(halfNaN(x, t.Half) && halfNaN(y, t.Half) && x&0x8000 == y&0x8000) {
			return false
		}
	}
	return true
}

// FirstBitDiff returns the first index where got and want differ in their
// bits, an f32 NaN matching any NaN (the values of 16-bit words: ir.go
// leaves a NaN's sign and payload to the device), or -1 where none does
// (0 when the lengths differ).
func FirstBitDiff(got, want []float32) int {
	if len(got) != len(want) {
		return 0
	}
	unpacked := Tol{Bits: true, NaN: true}
	for i := range got {
		if !unpacked.sameWord(math.Float32bits(got[i]), math.Float32bits(want[i])) {
			return i
		}
	}
	return -1
}

func (t Tol) bound(want float64, mag []float64, i, n int) float64 {
	if t.Terms && mag != nil {
		// |m|: a graph that computes its inputs (x*2 - 1 of "/computed")
		// may take negative values on |args|; their size still bounds it.
		return t.Abs + t.Rel*math.Sqrt(float64(max(n, 1)))*math.Abs(mag[i])
	}
	return t.Abs + t.Rel*math.Abs(want)
}

// tolerances is the one table of error bounds, by op name (and by graph case
// for multi-node graphs). f32 rounds to 6e-8 relative; transcendental bounds
// leave room for GPU built-ins (WGSL exp/log are a few ulp, more for large
// arguments). Data movement and selection must be exact.
var tolerances = map[string]Tol{
	"words_f16":  {Bits: true, Half: 1},
	"words_bf16": {Bits: true, Half: 2},
	"unpacked":   {Bits: true, NaN: true}, // values of 16-bit words: exact, signed zeros and subnormals included
	"exact":      {},                      // fill, neg, relu, clamp, inside, reshape, permute, expand, slices, rows, one-hot
	// (the elementwise primitives' tolerances are in their rows of
	// backend's opInfo, backend.OpInfo.Tol)
	// Sums: 2e-6*sqrt(n) of the |terms| is above the worst case of a naive
	// f32 loop (n*6e-8) up to n = 1000, and 100x below one wrong term.
	"sum":              {Abs: 1e-6, Rel: 2e-6, Terms: true},
	"matmul":           {Abs: 1e-6, Rel: 2e-6, Terms: true},
	"scatter_add_rows": {Abs: 1e-6, Rel: 2e-6, Terms: true},
	"max":              {},
	"softmax":          {Abs: 1e-6, Rel: 2e-5},
	// Scores |s| < 8 (the cases' domain and scale): exp's relative error
	// times the scores plus the sums of Tk terms.
	"attention": {Abs: 1e-5, Rel: 1e-4},
	// f16 precision (ir.go: OpAttention's B = 1): weights rounded to f16
	// (2^-11 relative) before the product with v (|v| <= 2) and in their
	// sum: 2^-10 * 2 = 2e-3 at most; a wrong key, value or mask is off by
	// a tenth or more.
	"attention/half": {Abs: 2e-3, Rel: 1e-4},
	"log_softmax":    {Abs: 1e-5, Rel: 1e-5},
	"adamw":          {Abs: 1e-6, Rel: 1e-5},
	"sgd":            {Abs: 1e-6, Rel: 1e-6},
	// (the composites' tolerances are in their definitions: composite.go)
	// Multi-node graphs chain a few roundings of the above.
	"graph": {Abs: 1e-5, Rel: 2e-5},
	// A row of millions: its outputs are far below softmax's Abs, and its
	// log_softmax's error is the row sum's relative error, so these bound
	// the sum alone (2e-5: 300x the f32 rounding of a blocked sum).
	"softmax/long-row":     {Rel: 2e-5},
	"log_softmax/long-row": {Abs: 2e-5},
}

// sizes are the odd sizes shapes are drawn from: 1 for degenerate
// dimensions, and sizes past 64 that straddle tile and workgroup edges.
var sizes = []int{1, 3, 7, 17, 33, 65, 129}

// opCase is a table row: a subtest name, its tolerance and how it draws its
// instances.
type opCase struct {
	name  string
	tol   string
	build func(r *rand.Rand) []instance
}

// builder assembles a graph and the initial contents of its args.
type builder struct {
	g    backend.Graph
	args [][]float32
}

// arg adds an OpArg node over a new arg holding data, read as shape.
func (b *builder) arg(data []float32, shape ...int) int {
	b.args = append(b.args, data)
	b.g.NumArgs++
	return b.node(backend.Node{Op: backend.OpArg, Arg: len(b.args) - 1, Shape: shape})
}

func (b *builder) node(n backend.Node) int {
	b.g.Nodes = append(b.g.Nodes, n)
	return len(b.g.Nodes) - 1
}

// op adds a node of op over inputs with shape.
func (b *builder) op(op backend.Op, shape []int, in ...int) int {
	return b.node(backend.Node{Op: op, In: in, Shape: shape})
}

// out makes node's value leave the run in a new arg, pre-filled with a
// sentinel so that a backend writing nothing fails.
func (b *builder) out(node int) int {
	n := backend.NumElems(b.g.Nodes[node].Shape)
	data := make([]float32, n)
	for i := range data {
		data[i] = -777.25
	}
	b.args = append(b.args, data)
	b.g.NumArgs++
	b.g.Outputs = append(b.g.Outputs, backend.Output{Node: node, Arg: len(b.args) - 1})
	return len(b.args) - 1
}

func (b *builder) inst(terms int) instance {
	g := b.g
	return instance{g: &g, args: b.args, terms: terms}
}

// uniform draws n values in [lo, hi).
func uniform(r *rand.Rand, n int, lo, hi float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return out
}

// randShape draws a shape of the given rank from sizes, shrinking its
// largest dimensions until it has at most maxElems elements.
func randShape(r *rand.Rand, rank, maxElems int) []int {
	s := make([]int, rank)
	for i := range s {
		s[i] = sizes[r.IntN(len(sizes))]
	}
	for backend.NumElems(s) > maxElems {
		big := 0
		for i := range s {
			if s[i] > s[big] {
				big = i
			}
		}
		s[big] = max(1, s[big]/2)
	}
	return s
}

// broadcastOf returns a shape that broadcasts to out: some leading
// dimensions dropped and some of the rest set to 1.
func broadcastOf(r *rand.Rand, out []int) []int {
	s := append([]int(nil), out[r.IntN(len(out)+1):]...)
	for i := range s {
		if r.IntN(2) == 0 {
			s[i] = 1
		}
	}
	return s
}

const maxElems = 20000

// opCases is the table of single-op subtests.
func opCases() []opCase {
	var cs []opCase
	for _, op := range backend.Ops() {
		if op.IsBinary() {
			cs = append(cs, binaryCases(op)...)
		}
	}
	sym := func(lo, hi float64) func(r *rand.Rand, n int) []float32 {
		return func(r *rand.Rand, n int) []float32 { return uniform(r, n, lo, hi) }
	}
	// withExtremes puts saturating values at the front of the data, where
	// naive formulas overflow (exp(100) = Inf in f32 gives Inf/Inf).
	withExtremes := func(lo, hi float64) func(r *rand.Rand, n int) []float32 {
		return func(r *rand.Rand, n int) []float32 {
			d := uniform(r, n, lo, hi)
			copy(d, []float32{100, -100, 30, -30, 0})
			return d
		}
	}
	boundaries := func(r *rand.Rand, n int) []float32 {
		d := uniform(r, n, -4, 4)
		copy(d, []float32{-0.5, 0.75, -0.5000001, 0.7500001}) // on and just past the bounds
		return d
	}
	negInt := func(r *rand.Rand, n int) []float32 { return uniform(r, n, -3, 3) }
	// magnitudes 2^lo..2^hi of both signs, with the rounding formats' edges
	// (f16's overflow at 65520, its subnormals, ties) at the front
	logScale := func(lo, hi float64) func(r *rand.Rand, n int) []float32 {
		return func(r *rand.Rand, n int) []float32 {
			d := make([]float32, n)
			for i := range d {
				d[i] = float32(math.Copysign(math.Exp2(lo+(hi-lo)*r.Float64()), float64(r.IntN(2)*2-1)))
			}
			copy(d, []float32{65504, 65519.996, 65520, -65520, 5.9604645e-08, 2.9802322e-08, 1.00048828125, 1.001953125, 1.00390625, 1.01171875, 3.4e38, -3.4e38})
			return d
		}
	}
	// Unary ops with scalar attributes get chosen ones; every other unary
	// op of the IR is drawn from its domain (backend.OpInfo), so a new one
	// needs no entry here.
	attrCases := map[backend.Op][]opCase{
		backend.OpSigmoid: {unaryCase("sigmoid", "sigmoid", backend.OpSigmoid, 0, 0, withExtremes(-8, 8))},
		backend.OpTanh:    {unaryCase("tanh", "tanh", backend.OpTanh, 0, 0, withExtremes(-5, 5))},
		backend.OpAffine:  {unaryCase("affine", "affine", backend.OpAffine, 1.5, -0.25, sym(-4, 4))},
		backend.OpPowConst: {
			unaryCase("pow/2", "pow", backend.OpPowConst, 2, 0, negInt),
			unaryCase("pow/3", "pow", backend.OpPowConst, 3, 0, negInt),
			unaryCase("pow/0.5", "pow", backend.OpPowConst, 0.5, 0, sym(0, 4)),
			unaryCase("pow/-1.5", "pow", backend.OpPowConst, -1.5, 0, sym(0.1, 4)),
		},
		backend.OpClamp:     {unaryCase("clamp", "exact", backend.OpClamp, -0.5, 0.75, boundaries)},
		backend.OpInside:    {unaryCase("inside", "exact", backend.OpInside, -0.5, 0.75, boundaries)},
		backend.OpRoundF16:  {unaryCase("round_f16", "exact", backend.OpRoundF16, 0, 0, logScale(-30, 20))},
		backend.OpRoundBF16: {unaryCase("round_bf16", "exact", backend.OpRoundBF16, 0, 0, logScale(-120, 127))},
	}
	for _, op := range backend.Ops() {
		if !op.IsUnary() {
			continue
		}
		if c, ok := attrCases[op]; ok {
			cs = append(cs, c...)
			continue
		}
		d := op.Info().Domain
		if d == [2]float32{} {
			d = [2]float32{-4, 4}
		}
		cs = append(cs, unaryCase(op.String(), tolKey(op), op, 0, 0, sym(float64(d[0]), float64(d[1]))))
	}
	cs = append(cs,
		fillCase(),
	)
	cs = append(cs, reduceCases()...)
	cs = append(cs, softmaxCases()...)
	cs = append(cs, movementCases()...)
	cs = append(cs, rowCases()...)
	cs = append(cs, matmulCases()...)
	cs = append(cs, attentionCases()...)
	cs = append(cs, optimizerCases()...)
	cs = append(cs, randomCases()...)
	cs = append(cs, packCases()...)
	cs = append(cs, specialCases()...)
	cs = append(cs, compositeCases()...)
	cs = append(cs, everyOpCases()...)
	cs = append(cs, rankCases()...)
	return cs
}

func binaryCases(op backend.Op) []opCase {
	name := op.String()
	// rhs keeps divisors away from zero so div's relative bound means something.
	rhs := func(r *rand.Rand, n int) []float32 {
		d := uniform(r, n, 0.5, 2)
		for i := range d {
			if r.IntN(2) == 0 {
				d[i] = -d[i]
			}
		}
		return d
	}
	inst := func(r *rand.Rand, sa, sb []int) instance {
		out, err := backend.BroadcastShape(sa, sb)
		if err != nil {
			panic(err)
		}
		var b builder
		x := b.arg(uniform(r, backend.NumElems(sa), -4, 4), sa...)
		y := b.arg(rhs(r, backend.NumElems(sb)), sb...)
		b.out(b.op(op, out, x, y))
		return b.inst(0)
	}
	return []opCase{
		{name + "/same", tolKey(op), func(r *rand.Rand) []instance {
			var is []instance
			for rank := 0; rank <= 4; rank++ {
				s := randShape(r, rank, maxElems)
				is = append(is, inst(r, s, s))
			}
			return is
		}},
		{name + "/broadcast", tolKey(op), func(r *rand.Rand) []instance {
			var is []instance
			for rank := 1; rank <= 4; rank++ {
				for k := 0; k < 3; k++ {
					out := randShape(r, rank, maxElems)
					switch k {
					case 0: // left operand broadcast
						is = append(is, inst(r, broadcastOf(r, out), out))
					case 1: // right operand broadcast
						is = append(is, inst(r, out, broadcastOf(r, out)))
					default: // both: a row against a column
						a, c := append([]int(nil), out...), append([]int(nil), out...)
						a[rank-1], c[0] = 1, 1
						is = append(is, inst(r, a, c))
					}
				}
			}
			return is
		}},
		{name + "/scalar", tolKey(op), func(r *rand.Rand) []instance {
			s := randShape(r, 3, maxElems)
			return []instance{inst(r, nil, s), inst(r, s, nil), inst(r, []int{1}, s)}
		}},
	}
}

func unaryCase(name, tol string, op backend.Op, a, b float32, gen func(r *rand.Rand, n int) []float32) opCase {
	return opCase{name, tol, func(r *rand.Rand) []instance {
		var is []instance
		for rank := 0; rank <= 4; rank++ {
			s := randShape(r, rank, maxElems)
			var bd builder
			x := bd.arg(gen(r, backend.NumElems(s)), s...)
			bd.out(bd.node(backend.Node{Op: op, In: []int{x}, Shape: s, A: a, B: b}))
			is = append(is, bd.inst(0))
		}
		return is
	}}
}

func fillCase() opCase {
	return opCase{"fill", "exact", func(r *rand.Rand) []instance {
		var is []instance
		for rank := 0; rank <= 4; rank++ {
			var b builder
			b.out(b.node(backend.Node{Op: backend.OpFill, Shape: randShape(r, rank, maxElems), A: -3.25}))
			is = append(is, b.inst(0))
		}
		return is
	}}
}

func reduceCases() []opCase {
	var cs []opCase
	for _, op := range []backend.Op{backend.OpSum, backend.OpMax} {
		for axis := 0; axis < 4; axis++ {
			cs = append(cs, opCase{fmt.Sprintf("%v/axis%d", op, axis), op.String(), func(r *rand.Rand) []instance {
				var is []instance
				for rank := axis + 1; rank <= 4; rank++ {
					for k := 0; k < 2; k++ {
						s := randShape(r, rank, maxElems)
						if k == 1 {
							s = randShape(r, rank, maxElems/129)
							s[axis] = 129 // a long reduction, past one workgroup
						}
						lo, hi := -4.0, 4.0
						if op == backend.OpMax && k == 1 {
							lo, hi = -9, -1 // all negative: a max that starts at 0 fails
						}
						is = append(is, reduceInst(r, op, s, axis, lo, hi))
					}
				}
				return is
			}})
		}
	}
	return cs
}

func reduceInst(r *rand.Rand, op backend.Op, s []int, axis int, lo, hi float64) instance {
	var b builder
	x := b.arg(uniform(r, backend.NumElems(s), lo, hi), s...)
	os := append([]int(nil), s...)
	os[axis] = 1
	b.out(b.node(backend.Node{Op: op, In: []int{x}, Shape: os, Axis: axis}))
	return b.inst(s[axis])
}

func softmaxCases() []opCase {
	var cs []opCase
	for _, op := range []backend.Op{backend.OpSoftmax, backend.OpLogSoftmax} {
		one := func(data []float32, s []int) instance {
			var b builder
			b.out(b.op(op, s, b.arg(data, s...)))
			return b.inst(0)
		}
		cs = append(cs,
			opCase{op.String() + "/ranks", op.String(), func(r *rand.Rand) []instance {
				var is []instance
				for rank := 0; rank <= 4; rank++ {
					s := randShape(r, rank, maxElems)
					is = append(is, one(uniform(r, backend.NumElems(s), -5, 5), s))
				}
				return is
			}},
			// Rows where exp without subtracting the max overflows or
			// underflows to 0/0, plus a 1000-wide row.
			opCase{op.String() + "/large", op.String(), func(r *rand.Rand) []instance {
				const cols = 129
				rows := [][2]float64{{-1000, 1000}, {5000, 5000}, {80, 100}, {-110, -90}, {-1e4, -1e4}, {-3, 3}}
				var data []float32
				for _, lh := range rows {
					data = append(data, uniform(r, cols, lh[0], lh[1])...)
				}
				return []instance{one(data, []int{len(rows), cols}), one(uniform(r, 3*1000, -50, 50), []int{3, 1000})}
			}},
		)
	}
	return cs
}

func movementCases() []opCase {
	unary := func(r *rand.Rand, n backend.Node, in []int) instance {
		var b builder
		n.In = []int{b.arg(uniform(r, backend.NumElems(in), -4, 4), in...)}
		b.out(b.node(n))
		return b.inst(0)
	}
	perms := [][]int{{}, {0}, {1, 0}, {0, 1}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0},
		{0, 1, 3, 2}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}, {0, 2, 1, 3}}
	return []opCase{
		{"reshape", "exact", func(r *rand.Rand) []instance {
			pairs := [][2][]int{{{3, 7, 17}, {21, 17}}, {{3, 7, 17}, {357}}, {{129}, {3, 43}}, {nil, {1, 1}},
				{{2, 3, 4, 5}, {5, 4, 3, 2}}, {{65, 1}, {1, 65}}, {{1}, nil}}
			var is []instance
			for _, p := range pairs {
				is = append(is, unary(r, backend.Node{Op: backend.OpReshape, Shape: p[1]}, p[0]))
			}
			return is
		}},
		{"permute", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for _, p := range perms {
				in := randShape(r, len(p), maxElems)
				out := make([]int, len(p))
				for k, q := range p {
					out[k] = in[q]
				}
				is = append(is, unary(r, backend.Node{Op: backend.OpPermute, Perm: p, Shape: out}, in))
			}
			return is
		}},
		{"expand", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for rank := 1; rank <= 4; rank++ {
				for k := 0; k < 3; k++ {
					out := randShape(r, rank, maxElems)
					is = append(is, unary(r, backend.Node{Op: backend.OpExpand, Shape: out}, broadcastOf(r, out)))
				}
			}
			return append(is, unary(r, backend.Node{Op: backend.OpExpand, Shape: []int{7, 3}}, nil))
		}},
		{"slice_rows", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for rank := 1; rank <= 4; rank++ {
				for k := 0; k < 3; k++ {
					in := randShape(r, rank, maxElems)
					out := append([]int(nil), in...)
					out[0] = 1 + r.IntN(in[0])
					start := r.IntN(in[0] - out[0] + 1)
					is = append(is, unary(r, backend.Node{Op: backend.OpSliceRows, Start: start, Shape: out}, in))
					// the slice read by an elementwise op: ggml's scale
					// asserted on the strides of the slice's view and
					// aborted the process
					var b builder
					x := b.arg(uniform(r, backend.NumElems(in), -4, 4), in...)
					s := b.node(backend.Node{Op: backend.OpSliceRows, In: []int{x}, Start: start, Shape: out})
					b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{s}, Shape: out, A: 2}))
					is = append(is, b.inst(0))
				}
			}
			// slices at offsets of 12 and 36 bytes read by unary ops, a
			// product and a sum (an LSTM's gates): ggml-vulkan's kernels
			// other than the binary ones assert that a source starts at
			// the storage-buffer offset alignment, and aborted. Whole
			// numbers, so that the product and the sum are exact.
			for _, start := range []int{1, 3} {
				for _, op := range []backend.Op{backend.OpNeg, backend.OpReLU, backend.OpAbs, backend.OpMatMul, backend.OpSum} {
					var b builder
					xs := make([]float32, 9*3)
					for i := range xs {
						xs[i] = float32(r.IntN(9) - 4)
					}
					x := b.arg(xs, 9, 3)
					s := b.node(backend.Node{Op: backend.OpSliceRows, In: []int{x}, Start: start, Shape: []int{3, 3}})
					switch op {
					case backend.OpMatMul:
						w := b.arg([]float32{1, -2, 3, 0, -1, 2}, 3, 2)
						b.out(b.op(op, []int{3, 2}, s, w))
					case backend.OpSum:
						b.out(b.node(backend.Node{Op: op, In: []int{s}, Axis: 1, Shape: []int{3, 1}}))
					default:
						b.out(b.op(op, []int{3, 3}, s))
					}
					is = append(is, b.inst(0))
				}
			}
			return is
		}},
		{"concat_rows", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for rank := 1; rank <= 4; rank++ {
				for k := 0; k < 2; k++ {
					a := randShape(r, rank, maxElems/2)
					c := append([]int(nil), a...)
					c[0] = sizes[r.IntN(len(sizes))]
					out := append([]int(nil), a...)
					out[0] = a[0] + c[0]
					var b builder
					x := b.arg(uniform(r, backend.NumElems(a), -4, 4), a...)
					y := b.arg(uniform(r, backend.NumElems(c), -4, 4), c...)
					b.out(b.op(backend.OpConcatRows, out, x, y))
					is = append(is, b.inst(0))
				}
			}
			return is
		}},
	}
}

// indices draws n whole-number indices for a range of size rows, with the
// first ones out of range on both sides (they must clamp).
func indices(r *rand.Rand, n, rows int) []float32 {
	idx := make([]float32, n)
	for i := range idx {
		idx[i] = float32(r.IntN(rows+6) - 3)
	}
	copy(idx, []float32{-1, float32(rows), -7, float32(rows + 10), 0, float32(rows - 1), -1e6, 1e6})
	return idx
}

func rowCases() []opCase {
	return []opCase{
		{"get_rows", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for rank := 1; rank <= 4; rank++ {
				for k := 0; k < 2; k++ {
					t := randShape(r, rank, maxElems)
					n := sizes[r.IntN(len(sizes))] + 8
					out := append([]int{n}, t[1:]...)
					var b builder
					tab := b.arg(uniform(r, backend.NumElems(t), -4, 4), t...)
					idx := b.arg(indices(r, n, t[0]), n)
					b.out(b.op(backend.OpGetRows, out, tab, idx))
					is = append(is, b.inst(0))
				}
			}
			return is
		}},
		{"scatter_add_rows", "scatter_add_rows", func(r *rand.Rand) []instance {
			var is []instance
			for rank := 1; rank <= 4; rank++ {
				for k := 0; k < 2; k++ {
					out := randShape(r, rank, maxElems)
					n := sizes[r.IntN(len(sizes))] + 8
					src := append([]int{n}, out[1:]...)
					// Few distinct rows, so most indices repeat.
					idx := indices(r, n, min(out[0], 4))
					var b builder
					x := b.arg(uniform(r, backend.NumElems(src), -4, 4), src...)
					ix := b.arg(idx, n)
					b.out(b.op(backend.OpScatterAddRows, out, x, ix))
					is = append(is, b.inst(n))
				}
			}
			return is
		}},
		{"one_hot", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for _, c := range []int{1, 3, 10, 129} {
				n := sizes[r.IntN(len(sizes))] + 8
				var b builder
				b.out(b.op(backend.OpOneHot, []int{n, c}, b.arg(indices(r, n, c), n)))
				is = append(is, b.inst(0))
			}
			return is
		}},
	}
}

// mmInst multiplies [batch..., M, K] by [batch..., K, N] with the operands
// stored transposed as asked.
func mmInst(r *rand.Rand, batch []int, m, k, n int, ta, tb bool) instance {
	return mmInstRound(r, batch, m, k, n, ta, tb, false)
}

// mmInstRound is mmInst with, when round is set, both operands rounded to
// f16 first (core's PrecisionF16): ggml-vulkan multiplies the f16 values.
func mmInstRound(r *rand.Rand, batch []int, m, k, n int, ta, tb, round bool) instance {
	sa := append(append([]int(nil), batch...), m, k)
	if ta {
		sa = append(append([]int(nil), batch...), k, m)
	}
	sb := append(append([]int(nil), batch...), k, n)
	if tb {
		sb = append(append([]int(nil), batch...), n, k)
	}
	var b builder
	x := b.arg(uniform(r, backend.NumElems(sa), -1, 1), sa...)
	y := b.arg(uniform(r, backend.NumElems(sb), -1, 1), sb...)
	if round {
		x = b.node(backend.Node{Op: backend.OpRoundF16, In: []int{x}, Shape: sa})
		y = b.node(backend.Node{Op: backend.OpRoundF16, In: []int{y}, Shape: sb})
	}
	out := append(append([]int(nil), batch...), m, n)
	b.out(b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, y}, Shape: out, TransA: ta, TransB: tb}))
	return b.inst(k)
}

func matmulCases() []opCase {
	var cs []opCase
	mkn := [][3]int{{1, 1, 1}, {3, 1, 5}, {7, 3, 1}, {1, 129, 1}, {17, 33, 65}, {64, 64, 64},
		{65, 129, 33}, {129, 17, 7}, {257, 129, 65}, {33, 300, 17}}
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		name := "matmul/" + map[[2]bool]string{{false, false}: "plain", {true, false}: "transA",
			{false, true}: "transB", {true, true}: "transAB"}[tr]
		cs = append(cs, opCase{name, "matmul", func(r *rand.Rand) []instance {
			var is []instance
			for _, d := range mkn {
				is = append(is, mmInst(r, nil, d[0], d[1], d[2], tr[0], tr[1]))
			}
			return is
		}})
	}
	cs = append(cs, opCase{"matmul/batched", "matmul", func(r *rand.Rand) []instance {
		var is []instance
		for _, batch := range [][]int{{1}, {3}, {2, 3}, {3, 1}, {1, 1}} {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				is = append(is, mmInst(r, batch, 1+r.IntN(40), 1+r.IntN(70), 1+r.IntN(40), tr[0], tr[1]))
			}
		}
		is = append(is, mmInst(r, []int{2}, 129, 65, 33, false, true))
		return is
	}})
	cs = append(cs, opCase{"matmul/f16-operands", "matmul", func(r *rand.Rand) []instance {
		var is []instance
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			is = append(is, mmInstRound(r, nil, 65, 129, 33, tr[0], tr[1], true))
			is = append(is, mmInstRound(r, []int{2}, 1+r.IntN(40), 1+r.IntN(70), 1+r.IntN(40), tr[0], tr[1], true))
		}
		return is
	}})
	return cs
}

// adamHP returns AdamW's hyperparameters for step t (1-based).
func adamHP(t int, wd float32) []float32 {
	const lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
	return []float32{lr, b1, b2, eps, wd,
		float32(1 / (1 - math.Pow(b1, float64(t)))), float32(1 / (1 - math.Pow(b2, float64(t))))}
}

func optimizerCases() []opCase {
	shapes := [][]int{{7, 33}, {129}, nil, {3, 5, 7, 2}}
	return []opCase{
		{"adamw/3steps", "adamw", func(r *rand.Rand) []instance {
			var is []instance
			for i, s := range shapes {
				ne := backend.NumElems(s)
				wd := float32(0.01 * float64(i%2))
				m, v := make([]float32, ne), make([]float32, ne)
				if i >= 2 { // a state from earlier steps
					m, v = uniform(r, ne, -0.1, 0.1), uniform(r, ne, 0, 0.01)
				}
				var b builder
				w := b.arg(uniform(r, ne, -1, 1), s...)
				g := b.arg(uniform(r, ne, -1, 1), s...)
				mm := b.arg(m, s...)
				vv := b.arg(v, s...)
				hp := b.arg(adamHP(1, wd), 7)
				upd := b.op(backend.OpAdamW, s, w, g, mm, vv, hp)
				if i%2 == 0 { // its value is the updated w
					b.out(upd)
				}
				in := b.inst(0)
				in.runs = 3
				grads := [][]float32{nil, uniform(r, ne, -1, 1), uniform(r, ne, -1e-3, 1e-3)}
				in.feed = func(k int) map[int][]float32 {
					return map[int][]float32{1: grads[k], 4: adamHP(k+1, wd)}
				}
				is = append(is, in)
			}
			return is
		}},
		{"adamw/scaled", "adamw", func(r *rand.Rand) []instance {
			// An 8th hyperparameter scales the gradient (nn's clipping).
			var is []instance
			for i, s := range shapes {
				ne := backend.NumElems(s)
				wd := float32(0.01 * float64(i%2))
				scales := []float32{0.25, 1, 3e-3}
				hpOf := func(k int) []float32 { return append(adamHP(k+1, wd), scales[(k+i)%3]) }
				var b builder
				w := b.arg(uniform(r, ne, -1, 1), s...)
				g := b.arg(uniform(r, ne, -1, 1), s...)
				mm := b.arg(uniform(r, ne, -0.1, 0.1), s...)
				vv := b.arg(uniform(r, ne, 0, 0.01), s...)
				hp := b.arg(hpOf(0), 8)
				upd := b.op(backend.OpAdamW, s, w, g, mm, vv, hp)
				b.out(upd)
				if i%2 == 1 {
					// A reader of the new m: ggml-vulkan then composes the
					// update of ordinary ops, which must scale g too.
					b.out(b.op(backend.OpNeg, s, mm))
				}
				in := b.inst(0)
				in.runs = 3
				grads := [][]float32{nil, uniform(r, ne, -1, 1), uniform(r, ne, -100, 100)}
				in.feed = func(k int) map[int][]float32 {
					return map[int][]float32{1: grads[k], 4: hpOf(k)}
				}
				is = append(is, in)
			}
			return is
		}},
		{"sgd/3steps", "sgd", func(r *rand.Rand) []instance {
			var is []instance
			for i, s := range shapes {
				ne := backend.NumElems(s)
				hp := [][]float32{{0.1, 0, 0}, {0.05, 0.9, 0}, {0.1, 0.9, 0.01}, {0.02, 0, 0.1}}[i]
				var b builder
				w := b.arg(uniform(r, ne, -1, 1), s...)
				g := b.arg(uniform(r, ne, -1, 1), s...)
				vel := b.arg(uniform(r, ne, -0.1, 0.1), s...)
				upd := b.op(backend.OpSGD, s, w, g, vel, b.arg(hp, 3))
				if i%2 == 1 {
					b.out(upd)
				}
				in := b.inst(0)
				in.runs = 3
				in.feed = func(k int) map[int][]float32 { return map[int][]float32{1: uniform(r, ne, -1, 1)} }
				is = append(is, in)
			}
			return is
		}},
	}
}

// randomCases check rand_uniform bit for bit against Eval (the Philox
// reference of backend/philox.go): shapes of every rank, counters that
// carry across 32 bits and wrap at 64, offsets past 2^32 blocks, and a
// dropout-like mask graph over it.
func randomCases() []opCase {
	states := []func(r *rand.Rand) []float32{
		func(r *rand.Rand) []float32 { return backend.RandState(r.Uint64(), r.Uint64()) },
		func(r *rand.Rand) []float32 { return backend.RandState(r.Uint64(), 1<<32-3) },
		func(r *rand.Rand) []float32 { return backend.RandState(0, 1<<64-2) },
	}
	starts := []int{0, 1, 7, 1<<32 + 5}
	return []opCase{
		{"rand_uniform", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for rank := 0; rank <= 4; rank++ {
				s := randShape(r, rank, maxElems)
				var b builder
				st := b.arg(states[rank%len(states)](r), backend.RandStateLen)
				b.out(b.node(backend.Node{Op: backend.OpRandUniform, In: []int{st}, Shape: s, Start: starts[rank%len(starts)]}))
				is = append(is, b.inst(0))
			}
			return is
		}},
		{"rand_uniform/mask", "exact", func(r *rand.Rand) []instance {
			// two draws from one state at different offsets, each made a
			// keep mask (u < 0.7) times x: dropout's graph
			s := []int{33, 17}
			var b builder
			st := b.arg(backend.RandState(r.Uint64(), r.Uint64()), backend.RandStateLen)
			x := b.arg(uniform(r, backend.NumElems(s), -4, 4), s...)
			for k, start := range []int{0, 146} {
				u := b.node(backend.Node{Op: backend.OpRandUniform, In: []int{st}, Shape: s, Start: start})
				m := b.node(backend.Node{Op: backend.OpInside, In: []int{u}, Shape: s, A: -1, B: 0.7})
				y := b.op(backend.OpMul, s, m, x)
				if k == 1 {
					b.out(u)
				}
				b.out(y)
			}
			return []instance{b.inst(0)}
		}},
	}
}
