// Package reference is the float64 interpreter of the IR that every
// backend is checked against (the conformance suite, package backendtest)
// and that core.Gradcheck differentiates by finite differences. It has no
// test dependencies, so programs that import core do not link testing.
package reference

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/backend"
)

// Eval interprets g in float64, the reference every backend is checked
// against. It implements the table of special values of backend.Op (NaN,
// infinities, signed zeros) exactly. args[i] is the content of Run's args[i]; it must hold at least as
// many elements as the nodes reading or writing it. Like Program.Run, Eval
// mutates args: in-place ops (OpAdamW, OpSGD) update their arg operands at
// their position, and after the last node each Output's value is copied into
// the prefix of its arg. It returns the value of every node, indexed by node;
// an OpArg node's value aliases its arg (so it shows the arg's final state).
//
// Indices (OpGetRows, OpScatterAddRows, OpOneHot) are rounded to the nearest
// integer (halves away from zero; the IR promises whole numbers anyway) and
// clamped into range; NaN counts as 0.
func Eval(g *backend.Graph, args [][]float64) ([][]float64, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("reference.Eval: %w", err)
	}
	if len(args) != g.NumArgs {
		return nil, fmt.Errorf("reference.Eval: %d args, graph wants %d", len(args), g.NumArgs)
	}
	vals := make([][]float64, len(g.Nodes))
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.Op == backend.OpArg {
			ne := backend.NumElems(n.Shape)
			if len(args[n.Arg]) < ne {
				return nil, fmt.Errorf("reference.Eval: node %d reads arg %d as %v (%d elements) but it holds %d", i, n.Arg, n.Shape, ne, len(args[n.Arg]))
			}
			vals[i] = args[n.Arg][:ne:ne]
			continue
		}
		ins := make([][]float64, len(n.In))
		shapes := make([][]int, len(n.In))
		for k, j := range n.In {
			ins[k], shapes[k] = vals[j], g.Nodes[j].Shape
		}
		vals[i] = evalNode(n, ins, shapes)
	}
	for _, o := range g.Outputs {
		v := vals[o.Node]
		if len(args[o.Arg]) < len(v) {
			return nil, fmt.Errorf("reference.Eval: output of node %d has %d elements, arg %d holds %d", o.Node, len(v), o.Arg, len(args[o.Arg]))
		}
		copy(args[o.Arg], v)
	}
	return vals, nil
}

// evalNode computes one non-arg node. The graph is validated, so shapes agree.
func evalNode(n *backend.Node, in [][]float64, shapes [][]int) []float64 {
	out := make([]float64, backend.NumElems(n.Shape))
	a, b := float64(n.A), float64(n.B)
	switch {
	case n.Op == backend.OpFill:
		for i := range out {
			out[i] = a
		}
	case n.Op.IsBinary():
		// the op's row of backend.OpInfo defines it (F64)
		f := elementwise(n.Op)
		sa := backend.BroadcastStrides(shapes[0], n.Shape)
		sb := backend.BroadcastStrides(shapes[1], n.Shape)
		for i := range out {
			out[i] = f(in[0][offset(i, n.Shape, sa)], in[1][offset(i, n.Shape, sb)], 0, 0)
		}
	case n.Op.IsUnary():
		f := elementwise(n.Op)
		for i, x := range in[0] {
			out[i] = f(x, 0, a, b)
		}
	case n.Op == backend.OpSum || n.Op == backend.OpMax:
		reduce(n, in[0], shapes[0], out)
	case n.Op == backend.OpSoftmax || n.Op == backend.OpLogSoftmax:
		softmax(n.Op == backend.OpLogSoftmax, in[0], n.Shape, out)
	case n.Op == backend.OpReshape:
		copy(out, in[0])
	case n.Op == backend.OpPermute:
		// Output axis k is input axis Perm[k], so the output's stride along
		// k is the input's stride along Perm[k].
		st := backend.Strides(shapes[0])
		ps := make([]int, len(n.Perm))
		for k, p := range n.Perm {
			ps[k] = st[p]
		}
		for i := range out {
			out[i] = in[0][offset(i, n.Shape, ps)]
		}
	case n.Op == backend.OpExpand:
		st := backend.BroadcastStrides(shapes[0], n.Shape)
		for i := range out {
			out[i] = in[0][offset(i, n.Shape, st)]
		}
	case n.Op == backend.OpSliceRows:
		rs := backend.NumElems(n.Shape[1:])
		copy(out, in[0][n.Start*rs:])
	case n.Op == backend.OpConcatRows:
		copy(out, in[0])
		copy(out[len(in[0]):], in[1])
	case n.Op == backend.OpGetRows:
		rows, rs := shapes[0][0], backend.NumElems(shapes[0][1:])
		for i, x := range in[1] {
			r := ClampIndex(x, rows)
			copy(out[i*rs:(i+1)*rs], in[0][r*rs:(r+1)*rs])
		}
	case n.Op == backend.OpScatterAddRows:
		rows, rs := n.Shape[0], backend.NumElems(n.Shape[1:])
		for i, x := range in[1] {
			r := ClampIndex(x, rows)
			for c := 0; c < rs; c++ {
				out[r*rs+c] += in[0][i*rs+c]
			}
		}
	case n.Op == backend.OpOneHot:
		classes := n.Shape[1]
		for i, x := range in[0] {
			out[i*classes+ClampIndex(x, classes)] = 1
		}
	case n.Op == backend.OpMatMul:
		matmul(n, in[0], in[1], shapes[0], out)
	case n.Op == backend.OpAttention:
		attention(a, in, shapes, out)
	case n.Op == backend.OpAdamW:
		w, gr, m, v, hp := in[0], in[1], in[2], in[3], in[4]
		lr, b1, b2, eps, wd, bc1, bc2 := hp[0], hp[1], hp[2], hp[3], hp[4], hp[5], hp[6]
		for i := range w {
			g := gr[i]
			if len(hp) == 8 { // the gradient's scale
				g *= hp[7]
			}
			m[i] = b1*m[i] + (1-b1)*g
			v[i] = b2*v[i] + (1-b2)*g*g
			w[i] = w[i]*(1-lr*wd) - lr*(m[i]*bc1)/(math.Sqrt(v[i]*bc2)+eps)
		}
		copy(out, w)
	case n.Op == backend.OpSGD:
		w, gr, vel, hp := in[0], in[1], in[2], in[3]
		lr, mom, wd := hp[0], hp[1], hp[2]
		for i := range w {
			vel[i] = mom*vel[i] + gr[i] + wd*w[i]
			w[i] -= lr * vel[i]
		}
		copy(out, w)
	case n.Op == backend.OpRandUniform:
		// Integer arithmetic: the f32 values are exact, so float64 adds nothing.
		key, ctr := backend.ParseRandState(f32s(in[0]))
		v := make([]float32, len(out))
		backend.RandUniformFill(v, key, ctr, n.Start, 0)
		for i, x := range v {
			out[i] = float64(x)
		}
	case n.Op == backend.OpPackF16 || n.Op == backend.OpPackBF16:
		h := halfOf(n.Op == backend.OpPackBF16)
		for i := range out {
			w := uint32(h.encode(in[0][2*i]))
			if 2*i+1 < len(in[0]) {
				w |= uint32(h.encode(in[0][2*i+1])) << 16
			}
			out[i] = Widen(math.Float32frombits(w))
		}
	case n.Op == backend.OpUnpackF16 || n.Op == backend.OpUnpackBF16:
		h := halfOf(n.Op == backend.OpUnpackBF16)
		// rows of w values from rows of W words; the flat form is one row
		w, W := len(out), len(in[0])
		if len(shapes[0]) == 2 {
			w, W = n.Shape[1], shapes[0][1]
		}
		for i := range out {
			r, c := i/w, i%w
			word := math.Float32bits(Narrow(in[0][r*W+c/2]))
			out[i] = h.decode(uint16(word >> (16 * (c % 2))))
		}
	case n.Op.IsComposite():
		// its float64 definition, not backend.Decompose: the suite checks
		// the decomposition against this too
		backend.CompositeOf(n.Op).Eval(n, in, shapes, out)
	default:
		backend.Unknown("backendtest.Eval", n.Op)
	}
	return out
}

func f32s(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// offset maps flat index i of a tensor of shape to an element offset under
// strides st (which may be broadcast or permuted strides).
func offset(i int, shape, st []int) int {
	off := 0
	for k := len(shape) - 1; k >= 0; k-- {
		off += (i % shape[k]) * st[k]
		i /= shape[k]
	}
	return off
}

// elementwise is an elementwise op's float64 definition, its row's F64.
func elementwise(op backend.Op) func(x, y, a, b float64) float64 {
	f := op.Info().F64
	if f == nil {
		backend.Unknown("reference.elementwise", op)
	}
	return f
}

// reduce sums or maxes in (shape s) along n.Axis into out.
func reduce(n *backend.Node, in []float64, s []int, out []float64) {
	st := backend.Strides(s)
	for i := range out {
		base := offset(i, n.Shape, st) // the reduced axis has coordinate 0 in out
		acc := in[base]
		for j := 1; j < s[n.Axis]; j++ {
			x := in[base+j*st[n.Axis]]
			if n.Op == backend.OpSum {
				acc += x
			} else {
				acc = max(acc, x)
			}
		}
		out[i] = acc
	}
}

// softmax works on rows of the last axis; a scalar is one row of one element
// (backend.Softmax64: subtracting the row maximum first, as any stable
// implementation must).
func softmax(logOut bool, in []float64, shape []int, out []float64) {
	cols := 1
	if len(shape) > 0 {
		cols = shape[len(shape)-1]
	}
	backend.Softmax64(logOut, in, cols, out)
}

// matmul multiplies the last two dimensions batch by batch. A stored operand
// of shape [p, q] is read as itself or, when transposed, as its transpose.
func matmul(n *backend.Node, a, b []float64, sa []int, out []float64) {
	r := len(n.Shape)
	m, nn := n.Shape[r-2], n.Shape[r-1]
	k := sa[r-1]
	if n.TransA {
		k = sa[r-2]
	}
	batches := backend.NumElems(n.Shape[:r-2])
	for bt := 0; bt < batches; bt++ {
		A, B, C := a[bt*m*k:(bt+1)*m*k], b[bt*k*nn:(bt+1)*k*nn], out[bt*m*nn:(bt+1)*m*nn]
		for i := 0; i < m; i++ {
			for j := 0; j < nn; j++ {
				acc := 0.0
				for l := 0; l < k; l++ {
					av := A[i*k+l] // stored [m, k]
					if n.TransA {
						av = A[l*m+i] // stored [k, m]
					}
					bv := B[l*nn+j] // stored [k, n]
					if n.TransB {
						bv = B[j*k+l] // stored [n, k]
					}
					acc += av * bv
				}
				C[i*nn+j] = acc
			}
		}
	}
}

// ClampIndex turns an f32 index into a row number in 0..n-1, as the IR
// reads indices (backend.ClampIndex).
func ClampIndex(x float64, n int) int { return backend.ClampIndex(x, n) }

// Widen is float64(x) but that a signaling NaN keeps its bits (the
// conversion instruction would quiet it): packed words (OpPackBF16 of an
// infinity in a word's high half is one) must cross the reference's float64
// values unchanged. Narrow is its inverse. Exact f32 values convert as usual.
func Widen(x float32) float64 {
	if x == x {
		return float64(x)
	}
	b := math.Float32bits(x)
	return math.Float64frombits(uint64(b>>31)<<63 | 0x7ff<<52 | uint64(b&0x7fffff)<<29)
}

// Narrow is float32(x) for an f32 value held in a float64, but that a NaN
// keeps the f32 bits Widen gave it (float64 values are rounded to f32).
func Narrow(x float64) float32 {
	if x == x {
		return float32(x)
	}
	b := math.Float64bits(x)
	return math.Float32frombits(uint32(b>>63)<<31 | 0x7f800000 | uint32(b>>29)&0x7fffff)
}

// half is a 16-bit float format, encoded here by its definition in float64
// arithmetic (an oracle independent of backend.F16Bits' bit operations).
type half struct {
	p, minExp, bias int // significant bits, smallest normal exponent, exponent bias
	maxFinite       float64
	nan             uint16 // the quiet NaN a pack stores
}

func halfOf(bf bool) half {
	if bf {
		return half{8, -126, 127, 3.3895313892515355e38, 0x7fc0}
	}
	return half{11, -14, 15, 65504, 0x7e00}
}

// encode rounds x as the format's round op does and returns its 16 bits.
func (h half) encode(x float64) uint16 {
	r := backend.RoundSig(x, h.p, h.minExp, h.maxFinite)
	mant := uint(h.p - 1)
	var s uint16
	if math.Signbit(r) {
		s = 0x8000
	}
	a := math.Abs(r)
	switch {
	case math.IsNaN(r):
		return s | h.nan
	case math.IsInf(r, 0):
		return s | 0x7fff&^(1<<mant-1)
	case a < math.Ldexp(1, h.minExp): // subnormal: multiples of 2^(minExp-mant)
		return s | uint16(a/math.Ldexp(1, h.minExp-int(mant)))
	}
	f, e := math.Frexp(a) // a = f * 2^e, f in [0.5, 1)
	return s | uint16(e-1+h.bias)<<mant | uint16((2*f-1)*float64(uint(1)<<mant))
}

// decode is the value of the 16 bits b.
func (h half) decode(b uint16) float64 {
	mant := uint(h.p - 1)
	e, m := int(b&0x7fff)>>mant, float64(b&(1<<mant-1))
	var v float64
	switch {
	case e == 0:
		v = m * math.Ldexp(1, h.minExp-int(mant))
	case e == 0x7fff>>mant && m == 0:
		v = math.Inf(1)
	case e == 0x7fff>>mant:
		v = math.NaN()
	default:
		v = math.Ldexp(1+m/float64(uint(1)<<mant), e-h.bias)
	}
	if b&0x8000 != 0 {
		v = -v
	}
	return v
}

// attention is OpAttention: per batch and query, the softmax of the scaled
// scores over the attended keys only, then the weighted sum of their v rows.
func attention(scale float64, in [][]float64, shapes [][]int, out []float64) {
	q, k, v, keep := in[0], in[1], in[2], in[3]
	r := len(shapes[0])
	tq, d := shapes[0][r-2], shapes[0][r-1]
	tk, dv := shapes[1][r-2], shapes[2][r-1]
	scores := append(append([]int(nil), shapes[0][:r-1]...), tk)
	ks := backend.BroadcastStrides(shapes[3], scores)
	batches := backend.NumElems(shapes[0][:r-2])
	s := make([]float64, tk)
	for b := range batches {
		for i := range tq {
			qi := q[(b*tq+i)*d:][:d]
			mx := math.Inf(-1)
			any := false
			for j := range tk {
				if keep[offset((b*tq+i)*tk+j, scores, ks)] == 0 {
					s[j] = math.NaN() // not attended: marked, never read
					continue
				}
				kj := k[(b*tk+j)*d:][:d]
				dot := 0.0
				for c, x := range qi {
					dot += x * kj[c]
				}
				s[j] = scale * dot
				mx = max(mx, s[j])
				any = true
			}
			o := out[(b*tq+i)*dv:][:dv]
			if !any {
				continue // no key: 0
			}
			sum := 0.0
			for j := range tk {
				if keep[offset((b*tq+i)*tk+j, scores, ks)] != 0 {
					sum += math.Exp(s[j] - mx)
				}
			}
			for j := range tk {
				if keep[offset((b*tq+i)*tk+j, scores, ks)] == 0 {
					continue
				}
				w := math.Exp(s[j]-mx) / sum
				for c, x := range v[(b*tk+j)*dv:][:dv] {
					o[c] += w * x
				}
			}
		}
	}
}
