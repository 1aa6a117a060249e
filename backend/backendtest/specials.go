package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ag-go/ag/backend"
)

// The special-value cases: every op fed NaN, the infinities, signed zeros,
// subnormals and values whose f32 results overflow, compared with Eval
// (which implements the table of backend.Op) elementwise, NaN matching NaN
// and infinities exactly (see compare). They are what keeps a backend from
// turning a NaN into a finite number (ReLU(NaN) = 0, a max that skips NaN),
// which would give a finite loss while the weights turn NaN.

var (
	nan32 = float32(math.NaN())
	inf32 = float32(math.Inf(1))
)

// specials are the values fed to every op. The small ones are the smallest
// subnormal, a negative subnormal and the smallest normals; 1e30 overflows
// when squared; 100 and -100 overflow exp and underflow it to a subnormal.
var specials = []float32{
	nan32, inf32, -inf32, 0, float32(math.Copysign(0, -1)),
	math.SmallestNonzeroFloat32, -3e-39, 0x1p-126, -0x1p-126,
	1, -1, 0.5, -2.5, 3, 1e30, -1e30, 100, -100,
}

// periodic are the specials for sin and cos: ±1e30 become ±2^16 + 0.5,
// the largest arguments whose value ir.go specifies.
var periodic = []float32{
	nan32, inf32, -inf32, 0, float32(math.Copysign(0, -1)),
	math.SmallestNonzeroFloat32, -3e-39, 0x1p-126, -0x1p-126,
	1, -1, 0.5, -2.5, 3, 0x1p16 + 0.5, -0x1p16 - 0.5, 100, -100,
}

// tame are the specials without large finite values: for formulas whose
// f32 intermediates would overflow where Eval's float64 ones do not
// (AdamW's g*g), which is rounding, not semantics.
var tame = []float32{
	nan32, inf32, -inf32, 0, float32(math.Copysign(0, -1)),
	math.SmallestNonzeroFloat32, -3e-39, 1, -1, 0.5, -2.5,
}

// salted returns n values drawn from [lo, hi) with the specials written at
// the positions at (modulo n), so that long rows carry them at their ends
// and past workgroup boundaries as well as at the front.
func salted(r *rand.Rand, n int, lo, hi float64, vals []float32, at ...int) []float32 {
	d := uniform(r, n, lo, hi)
	for k, v := range vals {
		if k < len(at) {
			d[at[k]%n] = v
		} else if k < n {
			d[k] = v
		}
	}
	return d
}

// specialCases is the table of special-value subtests.
func specialCases() []opCase {
	cs := []opCase{specialBinary(), specialFill()}
	type attrs struct{ a, b float32 }
	// Unary ops with scalar attributes are fed these; every other unary
	// op of the IR (a new one too) runs with none.
	withAttrs := map[backend.Op][]attrs{
		backend.OpAffine: {{1.5, -0.25}, {0, 1}, {-2, inf32}},
		backend.OpPowConst: {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {-1, 0}, {0.5, 0}, {-0.5, 0},
			{-2, 0}, {1.5, 0}, {-1.5, 0}, {4, 0}, {5, 0}, {-3, 0}, {2.5, 0}, {7, 0}},
		backend.OpClamp:  {{-0.5, 0.75}, {0, inf32}, {-inf32, inf32}, {2, 2}},
		backend.OpInside: {{-0.5, 0.75}, {0, inf32}, {-inf32, inf32}, {1, 1}, {-inf32, 0}},
	}
	var unaries []struct {
		op  backend.Op
		tol string
		ab  []attrs
	}
	for _, op := range backend.Ops() {
		if op.IsUnary() {
			unaries = append(unaries, struct {
				op  backend.Op
				tol string
				ab  []attrs
			}{op, tolKey(op), withAttrs[op]})
		}
	}
	for _, u := range unaries {
		ab := u.ab
		if ab == nil {
			ab = []attrs{{0, 0}}
		}
		for _, p := range ab {
			name := "special/" + u.op.String()
			if u.ab != nil {
				name += fmt.Sprintf("/%g,%g", p.a, p.b)
			}
			cs = append(cs, opCase{name, u.tol, func(r *rand.Rand) []instance {
				var is []instance
				// The specials alone, then salted into a tensor long enough
				// for vector paths (vec4 bindings, SIMD loops with tails).
				vals := specials
				if u.op == backend.OpSin || u.op == backend.OpCos {
					vals = periodic // see the table of backend.Op
				}
				for _, n := range []int{len(vals), 1031} {
					var b builder
					x := b.arg(salted(r, n, -4, 4, vals, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17), n)
					b.out(b.node(backend.Node{Op: u.op, In: []int{x}, Shape: []int{n}, A: p.a, B: p.b}))
					is = append(is, b.inst(0))
				}
				return is
			}})
		}
	}
	cs = append(cs, specialReduce(backend.OpSum), specialReduce(backend.OpMax))
	cs = append(cs, specialSoftmax(backend.OpSoftmax), specialSoftmax(backend.OpLogSoftmax))
	cs = append(cs, specialMatmul(), specialAttention(), specialRows(), specialScatterSource(), specialMovement(), specialOptimizers(), specialChain())
	return cs
}

// specialBinary pairs every special with every special: a column against a
// row broadcast to [n, n], and the same pairs as two full tensors.
func specialBinary() opCase {
	return opCase{"special/binary", "div", func(r *rand.Rand) []instance {
		n := len(specials)
		var is []instance
		for _, op := range backend.Ops() {
			if !op.IsBinary() {
				continue
			}
			var b builder
			x := b.arg(specials, n, 1)
			y := b.arg(specials, 1, n)
			b.out(b.op(op, []int{n, n}, x, y))
			is = append(is, b.inst(0))
			full := make([]float32, 0, n*n)
			fullT := make([]float32, 0, n*n)
			for i := range n {
				for j := range n {
					full = append(full, specials[i])
					fullT = append(fullT, specials[j])
				}
			}
			var c builder
			c.out(c.op(op, []int{n, n}, c.arg(full, n, n), c.arg(fullT, n, n)))
			is = append(is, c.inst(0))
		}
		return is
	}}
}

func specialFill() opCase {
	return opCase{"special/fill", "exact", func(r *rand.Rand) []instance {
		var is []instance
		for _, v := range []float32{nan32, inf32, -inf32, float32(math.Copysign(0, -1))} {
			var b builder
			b.out(b.node(backend.Node{Op: backend.OpFill, Shape: []int{3, 5}, A: v}))
			is = append(is, b.inst(0))
		}
		return is
	}}
}

// specialRowsOf returns rows of length n, one per special, each holding its
// special at column col among finite values, then the rows no single special
// makes: all -Inf, +Inf and -Inf together, NaN next to +Inf.
func specialRowsOf(r *rand.Rand, n, col int) (data []float32, rows int) {
	for _, v := range specials {
		data = append(data, salted(r, n, -4, 4, []float32{v}, col)...)
	}
	allNegInf := make([]float32, n)
	for i := range allNegInf {
		allNegInf[i] = -inf32
	}
	data = append(data, allNegInf...)
	data = append(data, salted(r, n, -4, 4, []float32{inf32, -inf32}, col, col+1)...)
	data = append(data, salted(r, n, -4, 4, []float32{nan32, inf32}, col+1, col)...)
	return data, len(data) / n
}

// specialReduce reduces rows holding specials along the last axis (short and
// long rows, the special at the front, the back and past a workgroup) and
// along the first axis (column reductions).
func specialReduce(op backend.Op) opCase {
	return opCase{"special/" + op.String(), op.String(), func(r *rand.Rand) []instance {
		var is []instance
		for _, nc := range [][2]int{{5, 0}, {5, 4}, {129, 128}, {300, 260}, {8200, 8199}} {
			n := nc[0]
			data, rows := specialRowsOf(r, n, nc[1])
			if n > 1000 {
				// A few long rows take the split-row paths: NaN, +Inf and
				// -Inf at the end, and a NaN in the first part of a row.
				data, rows = data[:4*n], 4
				data[3*n+5] = nan32
				is = append(is, reduceInstData(op, data, []int{rows, n}, 1))
				continue
			}
			is = append(is, reduceInstData(op, data, []int{rows, n}, 1))
			// The same rows as columns.
			tr := make([]float32, len(data))
			for i := range rows {
				for j := range n {
					tr[j*rows+i] = data[i*n+j]
				}
			}
			is = append(is, reduceInstData(op, tr, []int{n, rows}, 0))
		}
		// A middle axis of a rank-3 tensor.
		data, rows := specialRowsOf(r, 7, 3)
		is = append(is, reduceInstData(op, data, []int{rows, 7, 1}, 1))
		is = append(is, reduceInstData(op, data[:rows/3*3*7], []int{rows / 3, 7, 3}, 1))
		return is
	}}
}

func reduceInstData(op backend.Op, data []float32, s []int, axis int) instance {
	var b builder
	x := b.arg(data, s...)
	os := append([]int(nil), s...)
	os[axis] = 1
	b.out(b.node(backend.Node{Op: op, In: []int{x}, Shape: os, Axis: axis}))
	return b.inst(s[axis])
}

// specialSoftmax normalizes rows holding specials: a row with a NaN or a
// +Inf is NaN everywhere, -Inf entries of a row with a finite maximum give
// 0 (log: -Inf), a row of -Inf is NaN.
func specialSoftmax(op backend.Op) opCase {
	return opCase{"special/" + op.String(), op.String(), func(r *rand.Rand) []instance {
		var is []instance
		for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}, {1000, 700}} {
			data, rows := specialRowsOf(r, nc[0], nc[1])
			var b builder
			s := []int{rows, nc[0]}
			b.out(b.op(op, s, b.arg(data, s...)))
			is = append(is, b.inst(0))
		}
		return is
	}}
}

// specialMatmul multiplies operands with specials in some rows of A and
// columns of B: a NaN or an infinity meets a whole row or column, and an
// infinity times a zero is NaN. Sizes cover the plain, vec4, transposed and
// split-K paths.
func specialMatmul() opCase {
	return opCase{"special/matmul", "matmul", func(r *rand.Rand) []instance {
		var is []instance
		for _, d := range [][3]int{{5, 4, 3}, {16, 8, 12}, {33, 300, 17}, {64, 64, 64}} {
			for _, tr := range [][2]bool{{false, false}, {true, true}, {true, false}, {false, true}} {
				m, k, n := d[0], d[1], d[2]
				in := mmInst(r, nil, m, k, n, tr[0], tr[1])
				a, b := in.args[0], in.args[1]
				// A stored [m,k] or [k,m]; B stored [k,n] or [n,k].
				setA := func(i, l int, v float32) {
					if tr[0] {
						a[l*m+i] = v
					} else {
						a[i*k+l] = v
					}
				}
				setB := func(l, j int, v float32) {
					if tr[1] {
						b[j*k+l] = v
					} else {
						b[l*n+j] = v
					}
				}
				setA(0, k-1, nan32)
				setA(1, 0, inf32)
				setA(2%m, 1%k, -inf32)
				setB(1%k, 0, 0)           // -Inf * 0 in row 2, column 0
				setB(k-1, n-1, -inf32)    // +Inf*... and NaN meet column n-1
				setB(k/2, (n-1)/2, nan32) // a NaN column
				setA(m-1, k/2, 1e30)      // overflows against 1e30 in B
				setB(k/2, 0, 1e30)
				is = append(is, in)
			}
		}
		return is
	}}
}

// specialAttention: query 1's q row holds a NaN (its result is NaN); key
// 3's k holds +Inf where the first query's q is positive and every other
// query's negative, so that query scores it +Inf (NaN) and the others
// -Inf (weight 0, their other keys finite); keys 32..39 of 40, which
// every query masks, hold NaN in k and v, and must not be read. Every
// query attends key 3: ggml-vulkan's kernel reads a block of keys for all
// the queries of a workgroup, where +Inf would meet a masked query's -Inf
// bias (see ir.go); head sizes of 16 and 32 make its blocks 32 keys long,
// so keys 32..39 form a block no query reads. Tq = 1 is the case
// ggml-vulkan pads to two queries.
func specialAttention() opCase {
	return opCase{"special/attention", "attention", func(r *rand.Rand) []instance {
		var is []instance
		for _, c := range []struct {
			batch     []int
			tq, d, dv int
		}{{[]int{2}, 6, 16, 16}, {nil, 5, 32, 16}, {[]int{2, 1}, 1, 16, 32}} {
			const tk, j0, c0 = 40, 3, 2
			lead := func(s ...int) []int { return append(append([]int(nil), c.batch...), s...) }
			batches := backend.NumElems(c.batch)
			q := uniform(r, batches*c.tq*c.d, -2, 2)
			k := uniform(r, batches*tk*c.d, -2, 2)
			v := uniform(r, batches*tk*c.dv, -2, 2)
			keep := make([]float32, batches*c.tq*tk)
			for b := range batches {
				for i := range c.tq {
					row := b*c.tq + i
					q[row*c.d+c0] = -0.5
					if row == 0 {
						q[row*c.d+c0] = 0.5
					}
					if i == 1 {
						q[row*c.d+c.d-1] = nan32
					}
					keep[row*tk+j0] = 1
					keep[row*tk+(j0+1+r.IntN(28))] = 1 // one finite key at least
					for j := range 32 {
						if r.IntN(2) == 0 {
							keep[row*tk+j] = 1
						}
					}
				}
				k[(b*tk+j0)*c.d+c0] = inf32
				for j := 32; j < tk; j++ {
					k[(b*tk+j)*c.d+j%c.d] = nan32
					v[(b*tk+j)*c.dv+j%c.dv] = nan32
				}
			}
			var bd builder
			qa := bd.arg(q, lead(c.tq, c.d)...)
			ka := bd.arg(k, lead(tk, c.d)...)
			va := bd.arg(v, lead(tk, c.dv)...)
			ma := bd.arg(keep, lead(c.tq, tk)...)
			bd.out(bd.node(backend.Node{Op: backend.OpAttention, In: []int{qa, ka, va, ma}, Shape: lead(c.tq, c.dv), A: 0.25}))
			is = append(is, bd.inst(0))
		}
		return is
	}}
}

// specialRows feeds NaN and infinite indices (they clamp: NaN counts as 0)
// to get_rows (of a table holding specials), one_hot and scatter_add_rows.
func specialRows() opCase {
	return opCase{"special/rows", "exact", func(r *rand.Rand) []instance {
		idx := specialIndices
		n := len(idx)
		var is []instance
		for _, rows := range []int{1, 5} {
			var b builder
			tab := b.arg(salted(r, rows*len(specials), -4, 4, specials), rows, len(specials))
			b.out(b.op(backend.OpGetRows, []int{n, len(specials)}, tab, b.arg(idx, n)))
			is = append(is, b.inst(0))

			var c builder
			c.out(c.op(backend.OpOneHot, []int{n, rows + 2}, c.arg(idx, n)))
			is = append(is, c.inst(0))

			is = append(is, scatterInst(r, idx, rows, false))
		}
		return is
	}}
}

// specialIndices are indices that clamp (NaN counts as 0) and that round,
// halves away from zero (ggml's i32 cast truncated 0.5 and 1.5 to 0 and 1;
// webgpu's floor(x + 0.5) rounded 0.49999997 up to 1).
var specialIndices = []float32{nan32, inf32, -inf32, float32(math.Copysign(0, -1)), 1e30, -1e30,
	math.SmallestNonzeroFloat32, 2, 0, 4, 0.5, 1.5, -0.5, 0.49999997, 1.4999999, 2.5}

// scatterInst scatter-adds a source of whole numbers (every sum is exact)
// by idx into rows rows; with specials the source holds NaN and infinities,
// which must reach only the rows their indices name.
func scatterInst(r *rand.Rand, idx []float32, rows int, specials bool) instance {
	n := len(idx)
	src := make([]float32, n*3)
	for i := range src {
		src[i] = float32(r.IntN(9) - 4)
	}
	if specials {
		src[0], src[4], src[8], src[13], src[20] = nan32, inf32, -inf32, inf32, -inf32
	}
	var b builder
	b.out(b.op(backend.OpScatterAddRows, []int{rows, 3}, b.arg(src, n, 3), b.arg(idx, n)))
	return b.inst(n)
}

// specialScatterSource feeds NaN and infinities through scatter_add_rows'
// source (a gradient that went bad): every other row must stay finite.
func specialScatterSource() opCase {
	return opCase{"special/scatter_add_rows-source", "exact", func(r *rand.Rand) []instance {
		whole := []float32{1, 0, 3, 1, 4, 0, 2, 2, 0, 1}
		return []instance{scatterInst(r, whole, 5, true), scatterInst(r, specialIndices, 5, true)}
	}}
}

// specialMovement moves specials through every data-movement op: they must
// arrive unchanged.
func specialMovement() opCase {
	return opCase{"special/movement", "exact", func(r *rand.Rand) []instance {
		n := len(specials) // 18 = 2 x 3 x 3
		var is []instance
		one := func(nd backend.Node, in []int, data []float32) {
			var b builder
			nd.In = []int{b.arg(data, in...)}
			b.out(b.node(nd))
			is = append(is, b.inst(0))
		}
		one(backend.Node{Op: backend.OpPermute, Perm: []int{2, 0, 1}, Shape: []int{3, 2, 3}}, []int{2, 3, 3}, specials)
		one(backend.Node{Op: backend.OpExpand, Shape: []int{4, n}}, []int{1, n}, specials)
		one(backend.Node{Op: backend.OpExpand, Shape: []int{n, 3}}, []int{n, 1}, specials)
		one(backend.Node{Op: backend.OpSliceRows, Start: 1, Shape: []int{2, 3}}, []int{6, 3}, specials)
		one(backend.Node{Op: backend.OpReshape, Shape: []int{3, 6}}, []int{n}, specials)
		var b builder
		x := b.arg(specials, 6, 3)
		y := b.arg(salted(r, 6, -1, 1, specials[:6]), 2, 3)
		b.out(b.op(backend.OpConcatRows, []int{8, 3}, x, y))
		is = append(is, b.inst(0))
		return is
	}}
}

// specialOptimizers updates with special gradients and weights: a NaN or
// infinite gradient must reach w, m and v as the formulas say.
func specialOptimizers() opCase {
	return opCase{"special/optimizers", "adamw", func(r *rand.Rand) []instance {
		n := len(tame)
		var is []instance
		for _, wSpecial := range []bool{false, true} {
			w := uniform(r, n, -1, 1)
			g := append([]float32(nil), tame...)
			if wSpecial { // special weights, ordinary gradients
				w, g = g, w
			}
			var b builder
			wa := b.arg(append([]float32(nil), w...), n)
			ga := b.arg(append([]float32(nil), g...), n)
			m := b.arg(uniform(r, n, -0.1, 0.1), n)
			v := b.arg(uniform(r, n, 0, 0.01), n)
			b.out(b.op(backend.OpAdamW, []int{n}, wa, ga, m, v, b.arg(adamHP(2, 0.01), 7)))
			is = append(is, b.inst(0))

			var c builder
			wc := c.arg(append([]float32(nil), w...), n)
			gc := c.arg(append([]float32(nil), g...), n)
			c.out(c.op(backend.OpSGD, []int{n}, wc, gc, c.arg(uniform(r, n, -0.1, 0.1), n), c.arg([]float32{0.1, 0.9, 0.01}, 3)))
			is = append(is, c.inst(0))
		}
		return is
	}}
}

// specialChain runs fused chains over specials: the forward and the
// backward of relu and tanh layers as core emits them (a relu whose mask
// multiplies a gradient, a tanh of an affine), relus and clamps whose input
// is or is not read elsewhere, and a max-subtracting softmax built from ops.
func specialChain() opCase {
	return opCase{"special/chain", "graph", func(r *rand.Rand) []instance {
		n := len(specials)
		s := []int{n}
		var is []instance
		{
			var b builder
			x := b.arg(specials, s...)
			g := b.arg(uniform(r, n, -1, 1), s...)
			y := b.op(backend.OpReLU, s, b.node(backend.Node{Op: backend.OpAffine, In: []int{x}, Shape: s, A: 2, B: -1}))
			b.out(y)
			mask := b.node(backend.Node{Op: backend.OpInside, In: []int{x}, Shape: s, A: 0, B: inf32})
			b.out(b.op(backend.OpMul, s, g, mask))
			b.out(b.op(backend.OpTanh, s, b.op(backend.OpMul, s, y, g)))
			is = append(is, b.inst(0))
		}
		{
			// A relu and a clamp that a backend may compute in place (their
			// input has no other reader) next to ones it may not: the
			// input is read again, or passed on unchanged by a reshape.
			var b builder
			x := b.arg(specials, s...)
			a := b.node(backend.Node{Op: backend.OpAffine, In: []int{x}, Shape: s, A: 2, B: -1})
			b.out(b.op(backend.OpReLU, s, b.node(backend.Node{Op: backend.OpAffine, In: []int{x}, Shape: s, A: -1, B: 0.5})))
			b.out(b.op(backend.OpReLU, s, b.op(backend.OpReshape, s, a)))
			b.out(b.node(backend.Node{Op: backend.OpClamp, In: []int{b.op(backend.OpReshape, s, a)}, Shape: s, A: -1, B: 1}))
			b.out(a)
			is = append(is, b.inst(0))
		}
		{
			var b builder
			x := b.arg(salted(r, 4*n, -3, 3, specials), 4, n)
			mx := b.node(backend.Node{Op: backend.OpMax, In: []int{x}, Shape: []int{4, 1}, Axis: 1})
			e := b.op(backend.OpExp, []int{4, n}, b.op(backend.OpSub, []int{4, n}, x, mx))
			sum := b.node(backend.Node{Op: backend.OpSum, In: []int{e}, Shape: []int{4, 1}, Axis: 1})
			b.out(b.op(backend.OpDiv, []int{4, n}, e, sum))
			is = append(is, b.inst(n))
		}
		return is
	}}
}
