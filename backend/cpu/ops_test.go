package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// Each op against the float64 reference on random shapes (odd sizes, size-1
// axes, every rank 0..4, broadcasting both ways). Inputs are uniform in
// [-2, 2) unless the op needs otherwise. Tolerances are per op, stated below.

var (
	tolExact = tol{0, 0}       // copies, selections, exact float ops
	tolRound = tol{1e-7, 2e-7} // one f32 rounding of an exact result
	tolMath  = tol{1e-6, 1e-6} // exp/log/tanh/pow through float64
	tolSum   = tol{2e-5, 1e-5} // f32 accumulation of up to a few hundred terms
	tolMM    = tol{1e-4, 1e-5} // f32 dot products of up to ~600 terms
	tolOpt   = tol{1e-6, 1e-5} // AdamW/SGD in f32
)

func TestBinaryBroadcast(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	c := New()
	for _, op := range []backend.Op{backend.OpAdd, backend.OpSub, backend.OpMul, backend.OpDiv} {
		for trial := 0; trial < 40; trial++ {
			s := randShape(r, r.IntN(5))
			p := bcastPartner(r, s)
			if trial%2 == 1 {
				s, p = p, s
			}
			if trial == 0 { // big enough to split over the pool
				s, p = []int{300, 257}, []int{257}
			}
			out, err := backend.BroadcastShape(s, p)
			if err != nil {
				t.Fatal(err)
			}
			b := &gb{}
			x, y := b.arg(s...), b.arg(p...)
			b.out(b.op(op, out, x, y))
			args := randArgs(r, b.shapes, -2, 2)
			if op == backend.OpDiv { // keep divisors away from 0
				for j := range args[1] {
					args[1][j] = 0.5 + args[1][j]/4*1.5
				}
			}
			t.Run(op.String()+shapeName(s, p), func(t *testing.T) { check(t, c, b, args, tolRound) })
		}
	}
}

func TestExpand(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	c := New()
	for trial := 0; trial < 30; trial++ {
		out := randShape(r, r.IntN(5))
		in := bcastPartner(r, out)
		b := &gb{}
		b.out(b.op(backend.OpExpand, out, b.arg(in...)))
		check(t, c, b, randArgs(r, b.shapes, -2, 2), tolExact)
	}
}

func TestUnary(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	c := New()
	cases := []struct {
		op     backend.Op
		A, B   float32
		lo, hi float32
		tl     tol
	}{
		{backend.OpNeg, 0, 0, -2, 2, tolExact},
		{backend.OpExp, 0, 0, -10, 10, tolMath},
		{backend.OpLog, 0, 0, 1e-3, 5, tolMath},
		{backend.OpLog, 0, 0, -1, 1, tolMath}, // NaN below 0, -Inf never hit exactly
		{backend.OpSqrt, 0, 0, 0, 5, tolRound},
		{backend.OpSqrt, 0, 0, -1, 1, tolRound},
		{backend.OpReLU, 0, 0, -2, 2, tolExact},
		{backend.OpSigmoid, 0, 0, -100, 100, tolMath},
		{backend.OpTanh, 0, 0, -5, 5, tolMath},
		{backend.OpAffine, 1.5, -0.25, -2, 2, tolRound},
		{backend.OpPowConst, 2, 0, -2, 2, tolRound},
		{backend.OpPowConst, 3, 0, -2, 2, tol{1e-6, 1e-6}},
		{backend.OpPowConst, -1, 0, 0.1, 2, tolRound},
		{backend.OpPowConst, 0.5, 0, -1, 2, tolMath},
		{backend.OpPowConst, 1.7, 0, -1, 2, tolMath}, // NaN for x<0, as powf
		{backend.OpClamp, -0.5, 0.75, -2, 2, tolExact},
		{backend.OpInside, -0.5, 0.75, -2, 2, tolExact},
	}
	for _, tc := range cases {
		for trial := 0; trial < 6; trial++ {
			s := randShape(r, r.IntN(5))
			if trial == 0 {
				s = []int{70000} // parallel path
			}
			b := &gb{}
			b.out(b.node(backend.Node{Op: tc.op, In: []int{b.arg(s...)}, Shape: s, A: tc.A, B: tc.B}))
			t.Run(tc.op.String()+shapeName(s), func(t *testing.T) { check(t, c, b, randArgs(r, b.shapes, tc.lo, tc.hi), tc.tl) })
		}
	}
}

func TestReduce(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	c := New()
	for _, op := range []backend.Op{backend.OpSum, backend.OpMax} {
		for trial := 0; trial < 40; trial++ {
			s := randShape(r, 1+r.IntN(4))
			switch trial {
			case 0:
				s = []int{257, 300} // parallel rows
			case 1:
				s = []int{300, 1030} // parallel columns
			case 2:
				s = []int{3, 100, 200}
			}
			axis := r.IntN(len(s))
			if trial == 1 {
				axis = 0
			}
			os := append([]int(nil), s...)
			os[axis] = 1
			b := &gb{}
			b.out(b.node(backend.Node{Op: op, In: []int{b.arg(s...)}, Shape: os, Axis: axis}))
			tl := tolSum
			if op == backend.OpMax {
				tl = tolExact
			}
			t.Run(op.String()+shapeName(s), func(t *testing.T) { check(t, c, b, randArgs(r, b.shapes, -2, 2), tl) })
		}
	}
}

func TestMaxNaN(t *testing.T) {
	c := New()
	for _, axis := range []int{0, 1} {
		b := &gb{}
		os := []int{3, 4}
		os[axis] = 1
		b.out(b.node(backend.Node{Op: backend.OpMax, In: []int{b.arg(3, 4)}, Shape: os, Axis: axis}))
		args := randArgs(rand.New(rand.NewPCG(5, 1)), b.shapes, -2, 2)
		args[0][0] = float32(math.NaN())
		args[0][6] = 100 // larger than anything after a NaN
		check(t, c, b, args, tolExact)
	}
}

func TestSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	c := New()
	for _, op := range []backend.Op{backend.OpSoftmax, backend.OpLogSoftmax} {
		for trial := 0; trial < 20; trial++ {
			s := randShape(r, 1+r.IntN(4))
			if trial == 0 {
				s = []int{200, 1000}
			}
			b := &gb{}
			b.out(b.op(op, s, b.arg(s...)))
			args := randArgs(r, b.shapes, -20, 20)
			if trial == 1 { // would overflow exp without the max shift
				for j := range args[0] {
					args[0][j] += 500
				}
			}
			t.Run(op.String()+shapeName(s), func(t *testing.T) { check(t, c, b, args, tol{1e-6, 2e-6}) })
		}
	}
}

func TestMovement(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	c := New()
	for trial := 0; trial < 30; trial++ {
		rank := 1 + r.IntN(4)
		s := randShape(r, rank)
		perm := r.Perm(rank)
		ps := make([]int, rank)
		for i, p := range perm {
			ps[i] = s[p]
		}
		b := &gb{}
		x := b.arg(s...)
		b.out(b.node(backend.Node{Op: backend.OpPermute, In: []int{x}, Shape: ps, Perm: perm}))
		b.out(b.op(backend.OpReshape, []int{backend.NumElems(s)}, x))
		start := r.IntN(s[0])
		ss := append([]int{1 + r.IntN(s[0]-start)}, s[1:]...)
		b.out(b.node(backend.Node{Op: backend.OpSliceRows, In: []int{x}, Shape: ss, Start: start}))
		y := b.arg(append([]int{1 + r.IntN(4)}, s[1:]...)...)
		cs := append([]int{s[0] + b.g.Nodes[y].Shape[0]}, s[1:]...)
		b.out(b.op(backend.OpConcatRows, cs, x, y))
		t.Run(shapeName(s, perm), func(t *testing.T) { check(t, c, b, randArgs(r, b.shapes, -2, 2), tolExact) })
	}
}

// indexValues returns n index values for a table of rows rows: in range,
// out of range both ways, non-whole, NaN and infinities.
func indexValues(r *rand.Rand, n, rows int) []float32 {
	special := []float32{-1, -7.5, float32(rows), float32(rows) + 10, 0.4, 0.6, 1.5, 2.49,
		float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e30}
	idx := make([]float32, n)
	for i := range idx {
		if r.IntN(3) == 0 {
			idx[i] = special[r.IntN(len(special))]
		} else {
			idx[i] = float32(r.IntN(rows))
		}
	}
	return idx
}

func TestRowsIndexing(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	c := New()
	for trial := 0; trial < 30; trial++ {
		rows := 1 + r.IntN(20)
		rest := randShape(r, r.IntN(3))
		n := 1 + r.IntN(40)
		if trial == 0 {
			rows, rest, n = 50, []int{1000}, 300 // parallel get_rows
		}
		table := append([]int{rows}, rest...)
		src := append([]int{n}, rest...)
		b := &gb{}
		tb, ix, sv := b.arg(table...), b.arg(n), b.arg(src...)
		b.out(b.op(backend.OpGetRows, src, tb, ix))
		b.out(b.op(backend.OpScatterAddRows, table, sv, ix))
		b.out(b.op(backend.OpOneHot, []int{n, rows}, ix))
		args := randArgs(r, b.shapes, -2, 2)
		args[1] = indexValues(r, n, rows)
		t.Run(shapeName(table, src), func(t *testing.T) { check(t, c, b, args, tolSum) })
	}
}

func TestRowIndex(t *testing.T) {
	for _, tc := range []struct {
		v    float32
		rows int
		want int
	}{
		{0, 5, 0}, {4, 5, 4}, {5, 5, 4}, {-1, 5, 0}, {2.4, 5, 2}, {2.5, 5, 3}, {2.6, 5, 3},
		{-0.4, 5, 0}, {float32(math.NaN()), 5, 0}, {float32(math.Inf(1)), 5, 4},
		{float32(math.Inf(-1)), 5, 0}, {1e38, 5, 4}, {3, 1, 0}, {16777215, 1 << 25, 16777215},
	} {
		if got := rowIndex(tc.v, tc.rows); got != tc.want {
			t.Errorf("rowIndex(%v, %d) = %d, want %d", tc.v, tc.rows, got, tc.want)
		}
	}
}

func TestMatMulOp(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	for _, k := range kernels() {
		t.Run(k.name, func(t *testing.T) {
			defer func(old microKernel) { kern = old }(kern)
			kern = k
			c := New()
			for trial := 0; trial < 60; trial++ {
				dims := []int{1, 2, 3, 5, 7, 12, 13, 31, 32, 33, 64, 100}
				m, n, kk := dims[r.IntN(len(dims))], dims[r.IntN(len(dims))], dims[r.IntN(len(dims))]
				batch := []int{}
				if r.IntN(3) == 0 {
					batch = randShape(r, 1+r.IntN(2))
				}
				if trial == 0 { // batched; large shapes and each strategy: TestMatMulPaths
					batch = []int{3}
				}
				ta, tb := trial%4 >= 2, trial%2 == 1
				as, bs := []int{m, kk}, []int{kk, n}
				if ta {
					as = []int{kk, m}
				}
				if tb {
					bs = []int{n, kk}
				}
				as, bs = append(append([]int{}, batch...), as...), append(append([]int{}, batch...), bs...)
				os := append(append([]int{}, batch...), m, n)
				b := &gb{}
				b.out(b.node(backend.Node{Op: backend.OpMatMul, In: []int{b.arg(as...), b.arg(bs...)}, Shape: os, TransA: ta, TransB: tb}))
				t.Run(shapeName(as, bs)+map[bool]string{true: "T", false: "N"}[ta]+map[bool]string{true: "T", false: "N"}[tb], func(t *testing.T) {
					check(t, c, b, randArgs(r, b.shapes, -1, 1), tolMM)
				})
			}
		})
	}
}

func TestOptimizers(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 1))
	c := New()
	for _, size := range [][]int{{7}, {33, 5}, {1}, {300, 257}} {
		b := &gb{}
		w, g, m, v, hp := b.arg(size...), b.arg(size...), b.arg(size...), b.arg(size...), b.arg(7)
		b.node(backend.Node{Op: backend.OpAdamW, In: []int{w, g, m, v, hp}, Shape: size})
		args := randArgs(r, b.shapes, -1, 1)
		for j := range args[3] {
			args[3][j] = r.Float32() // v >= 0
		}
		b1, b2, step := 0.9, 0.999, 3.0
		args[4] = []float32{1e-2, float32(b1), float32(b2), 1e-8, 0.1, float32(1 / (1 - math.Pow(b1, step))), float32(1 / (1 - math.Pow(b2, step)))}
		t.Run("adamw"+shapeName(size), func(t *testing.T) { check(t, c, b, args, tolOpt) })

		b = &gb{}
		w, g, vel, hp := b.arg(size...), b.arg(size...), b.arg(size...), b.arg(3)
		b.node(backend.Node{Op: backend.OpSGD, In: []int{w, g, vel, hp}, Shape: size})
		for _, mom := range []float32{0, 0.9} {
			args = randArgs(r, b.shapes, -1, 1)
			args[3] = []float32{0.05, mom, 0.01}
			t.Run("sgd"+shapeName(size), func(t *testing.T) { check(t, c, b, args, tolOpt) })
		}
	}
}

func TestFill(t *testing.T) {
	c := New()
	for _, s := range [][]int{{}, {1}, {3, 5}, {200, 300}} {
		b := &gb{}
		b.out(b.node(backend.Node{Op: backend.OpFill, Shape: s, A: -1.25}))
		check(t, c, b, randArgs(rand.New(rand.NewPCG(11, 1)), b.shapes, -2, 2), tolExact)
	}
}

// TestMatMulPaths runs each GEMM strategy on shapes chosen to reach it
// (checked on the plan, so threshold changes cannot silently skip one):
// ragged tiles, several depth blocks, and each transpose.
func TestMatMulPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	for _, k := range kernels() {
		t.Run(k.name, func(t *testing.T) {
			defer func(old microKernel) { kern = old }(kern)
			kern = k
			c := New()
			for _, tc := range []struct {
				name     string
				batch    []int
				m, n, kk int
				ta, tb   bool
				path     string
			}{
				{"packed NN", nil, 300, 290, 600, false, false, "packed"},
				{"packed TN", nil, 301, 97, 520, true, false, "packed"},
				{"packed NT", nil, 290, 301, 300, false, true, "packed"},
				{"packed TT", nil, 290, 130, 270, true, true, "packed"},
				{"direct B", nil, 40, 301, 600, false, false, "direct"},
				{"direct B, T A", nil, 67, 250, 520, true, false, "direct"},
				{"direct B batched", []int{2}, 40, 301, 600, false, false, "direct"},
				{"swapped NT", nil, 64, 301, 600, false, true, "swap"},
				{"swapped TT", nil, 37, 203, 530, true, true, "swap"},
				{"swapped NT batched", []int{2}, 50, 230, 300, false, true, "swap"},
				{"few columns", nil, 5, 3, 90000, false, false, "direct"},
				{"batch-parallel", []int{3, 5}, 40, 30, 50, false, true, "batch"},
				{"tiny", nil, 1, 1, 1, true, true, "batch"},
			} {
				as, bs := []int{tc.m, tc.kk}, []int{tc.kk, tc.n}
				if tc.ta {
					as = []int{tc.kk, tc.m}
				}
				if tc.tb {
					bs = []int{tc.n, tc.kk}
				}
				as, bs = append(append([]int{}, tc.batch...), as...), append(append([]int{}, tc.batch...), bs...)
				b := &gb{}
				b.out(b.node(backend.Node{Op: backend.OpMatMul, In: []int{b.arg(as...), b.arg(bs...)},
					Shape: append(append([]int{}, tc.batch...), tc.m, tc.n), TransA: tc.ta, TransB: tc.tb}))
				t.Run(tc.name, func(t *testing.T) {
					g := newGemm(c, k, backend.NumElems(tc.batch), tc.m, tc.n, tc.kk, tc.ta, tc.tb)
					path := "packed"
					switch {
					case g.perBatch:
						path = "batch"
					case g.swap:
						path = "swap"
					case g.directB:
						path = "direct"
					}
					ok := path == tc.path ||
						tc.path == "swap" && k.fnRA == nil && path == "packed" || // no in-place-A kernel
						threads() == 1 && path == "batch" // one thread (wasm): small products run whole
					if !ok {
						t.Fatalf("plan takes the %s path, want %s", path, tc.path)
					}
					check(t, c, b, randArgs(r, b.shapes, -1, 1), tol{3e-4, 1e-5})
				})
			}
		})
	}
}
