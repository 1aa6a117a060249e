package backendtest

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/reference"
)

// The "limits" group: every op kind on sizes past the limits a device puts
// on one kernel launch, which a backend must split around without a wrong
// answer:
//
//   - workgroups per dispatch dimension: WebGPU guarantees 65535
//     (maxComputeWorkgroupsPerDimension), so a one-dimensional launch of
//     256-invocation workgroups covers at most 65535*256 = 16776960
//     elements; the cases write more (bigN) or launch more than 65535 rows,
//     columns or tiles;
//   - iterations of the loops of one invocation: Mesa's llvmpipe (lavapipe)
//     ends a shader's loops after 65535 iterations in all
//     (LP_MAX_TGSI_LOOP_ITERATIONS) and continues as if they had finished;
//     the reductions, softmax rows, scatter sources and matmul K extents
//     here are longer than 65535 times any plausible number of lanes
//     sharing them.
//
// The values are chosen so that the results are exact in f32 whatever the
// order of summation (small integers and quarters, exp of 0 and of -200,
// which is 0 in f32), and every result is checked against a closed form,
// element by element. A dropped part (the rows past 65535*8 of issue 10)
// changes some result. The tensors hold up to 17M values (68 MB): the args
// share a few buffers across cases (args may be larger than the graph
// reads), so a backend that keeps freed memory (ggml-vulkan on lavapipe in
// tests) does not keep one set per case.

// bigN elements need more than 65535 workgroups of 256 (and are past 2^24,
// where f32 stops holding every integer index).
const bigN = 65535*256 + 4099 // 16781059

// wideRows is a row count whose rows of 8 pass bigN elements.
const wideRows = bigN/8 + 1 // 2097633 rows x 8 = 16781064

// Reduced extents past the loop limit: longAxis is more than 8 lanes can
// cover in 65535 iterations each (524280), with no divisor in 64..1024 (a
// sum in chunks must pad it), longRow more than 64 lanes (a matrix-vector
// kernel's 4194240) and than 256 lanes of 16384 iterations (webgpu's
// bound); softmaxRow more than 256 lanes cover with three loops.
const (
	longAxis   = 600_004
	longRow    = 4_300_003
	softmaxRow = 5_700_001
)

// limitCase is one graph past a device limit. in gives the initial content
// of each arg (nil: the arg is an output, pre-filled with a sentinel);
// want gives the expected content of the args checked after the run.
type limitCase struct {
	name string
	tol  string // a key of tolerances
	g    *backend.Graph
	n    []int // elements of each arg
	in   []func(i int) float32
	want map[int]func(i int) float64
}

// limitBuilder assembles a limitCase like builder does an instance.
type limitBuilder struct {
	c limitCase
}

func newLimit(name, tol string) *limitBuilder {
	return &limitBuilder{c: limitCase{name: name, tol: tol, g: &backend.Graph{}, want: map[int]func(int) float64{}}}
}

func (b *limitBuilder) node(n backend.Node) int {
	b.c.g.Nodes = append(b.c.g.Nodes, n)
	return len(b.c.g.Nodes) - 1
}

// arg adds an arg of shape whose element i is f(i).
func (b *limitBuilder) arg(f func(i int) float32, shape ...int) int {
	b.c.n = append(b.c.n, backend.NumElems(shape))
	b.c.in = append(b.c.in, f)
	b.c.g.NumArgs++
	return b.node(backend.Node{Op: backend.OpArg, Arg: b.c.g.NumArgs - 1, Shape: shape})
}

// out sends node's value to a new arg whose element i must equal want(i).
func (b *limitBuilder) out(node int, want func(i int) float64) {
	b.c.n = append(b.c.n, backend.NumElems(b.c.g.Nodes[node].Shape))
	b.c.in = append(b.c.in, nil)
	a := b.c.g.NumArgs
	b.c.g.NumArgs++
	b.c.g.Outputs = append(b.c.g.Outputs, backend.Output{Node: node, Arg: a})
	b.c.want[a] = want
}

// op adds a node of op over inputs.
func (b *limitBuilder) op(n backend.Node, in ...int) int {
	n.In = in
	return b.node(n)
}

func (b *limitBuilder) done() limitCase { return b.c }

// limitCases lists the group: for every op kind a case past the workgroup
// limit, and for every op with a loop inside (reductions, softmax,
// scatter-add, matmul) one past the loop limit.
func limitCases() []limitCase {
	var cs []limitCase
	cs = append(cs, limitElementwise()...)
	cs = append(cs, limitReduce()...)
	cs = append(cs, limitSoftmax()...)
	cs = append(cs, limitMovement()...)
	cs = append(cs, limitRows()...)
	cs = append(cs, limitMatmul()...)
	cs = append(cs, limitOptim()...)
	cs = append(cs, limitAttention()...)
	return cs
}

func limitElementwise() []limitCase {
	var cs []limitCase
	{
		b := newLimit("fill", "exact")
		b.out(b.node(backend.Node{Op: backend.OpFill, Shape: []int{bigN}, A: -3.25}), func(int) float64 { return -3.25 })
		cs = append(cs, b.done())
	}
	{
		b := newLimit("unary/affine", "exact")
		x := b.arg(func(i int) float32 { return float32(i%7) - 3 }, bigN)
		b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{x}, Shape: []int{bigN}, A: 2, B: 1}),
			func(i int) float64 { return 2*float64(i%7-3) + 1 })
		cs = append(cs, b.done())
	}
	{
		b := newLimit("binary/same", "exact")
		x := b.arg(func(i int) float32 { return float32(i % 5) }, bigN)
		y := b.arg(func(i int) float32 { return float32(i%3) * 0.5 }, bigN)
		b.out(b.op(backend.Node{Op: backend.OpSub, Shape: []int{bigN}}, x, y),
			func(i int) float64 { return float64(i%5) - float64(i%3)*0.5 })
		cs = append(cs, b.done())
	}
	{
		// A column against a row: both operands broadcast.
		b := newLimit("binary/broadcast", "exact")
		x := b.arg(func(i int) float32 { return float32(i % 9) }, wideRows, 1)
		y := b.arg(func(i int) float32 { return float32(i) * 0.25 }, 1, 8)
		b.out(b.op(backend.Node{Op: backend.OpMul, Shape: []int{wideRows, 8}}, x, y),
			func(i int) float64 { return float64((i/8)%9) * float64(i%8) * 0.25 })
		cs = append(cs, b.done())
	}
	return cs
}

// reduceShape is a reduction case: the input shape and the axis.
type reduceShape struct {
	what  string
	shape []int
	axis  int
}

// reduceShapes are reductions past the limits: reduced axes longer than
// the lanes' loops cover in first, middle and last position (the first is
// the bias gradient of a layer over 600k rows), and more outputs than
// 65535 workgroups of 32 or rows than 65535.
var reduceShapes = []reduceShape{
	{"first-long", []int{longAxis, 4}, 0},
	{"middle-long", []int{3, longAxis, 4}, 1},
	{"last-long", []int{2, longRow}, 1},
	{"first-many", []int{3, 2200000}, 0},
	{"last-many", []int{70001, 5}, 1},
}

// reduceValue is element (o, k) of a reduction input: o the index of the
// output it adds to, k the position along the reduced axis of length L.
// For sums: 1 at even k, else 0.5*(o%2), so every partial sum is exact
// (fewer than 2^24 halves). For max: negative everywhere,
// with the maximum 1+o%5 at the last position only (a reduction that drops
// the tail, or starts at 0, gets another value).
func reduceValue(op backend.Op, o, k, L int) float32 {
	if op == backend.OpSum {
		if k%2 == 0 {
			return 1
		}
		return float32(o%2) * 0.5
	}
	if k == L-1 {
		return float32(1 + o%5)
	}
	return -1 - float32(k%1000)
}

// reduceWant is the closed form of reduceValue's reduction.
func reduceWant(op backend.Op, o, L int) float64 {
	if op == backend.OpSum {
		even := (L + 1) / 2
		return float64(even) + float64(L-even)*float64(o%2)*0.5
	}
	return float64(1 + o%5)
}

func limitReduce() []limitCase {
	var cs []limitCase
	for _, op := range []backend.Op{backend.OpSum, backend.OpMax} {
		for _, rs := range reduceShapes {
			s, ax := rs.shape, rs.axis
			L := s[ax]
			inner := backend.NumElems(s[ax+1:])
			os := append([]int(nil), s...)
			os[ax] = 1
			b := newLimit(fmt.Sprintf("%v/%s-%v", op, rs.what, s), "exact")
			x := b.arg(func(i int) float32 {
				k := (i / inner) % L
				o := (i/(inner*L))*inner + i%inner
				return reduceValue(op, o, k, L)
			}, s...)
			b.out(b.node(backend.Node{Op: op, In: []int{x}, Shape: os, Axis: ax}), func(o int) float64 { return reduceWant(op, o, L) })
			cs = append(cs, b.done())
		}
	}
	return cs
}

// limitSoftmax: rows far longer than 65535 lanes' loops, and more rows than
// 65535. Elements are 1 (every 4099th, and the last) or -200, whose exp
// after subtracting the max 1 is 0 in f32, so the row's sum of exps is the
// exact count of ones, and results are far above the bound's Abs.
func limitSoftmax() []limitCase {
	var cs []limitCase
	for _, op := range []backend.Op{backend.OpSoftmax, backend.OpLogSoftmax} {
		for _, s := range [][]int{{1, softmaxRow}, {70001, 3}} {
			C := s[1]
			one := func(c int) bool { return c == C-1 || c%4099 == 1 }
			ones := 0
			for c := 0; c < C; c++ {
				if one(c) {
					ones++
				}
			}
			b := newLimit(fmt.Sprintf("%v/%v", op, s), op.String())
			x := b.arg(func(i int) float32 {
				if one(i % C) {
					return 1
				}
				return -200
			}, s...)
			b.out(b.op(backend.Node{Op: op, Shape: s}, x), func(i int) float64 {
				d := -201.0
				if one(i % C) {
					d = 0
				}
				if op == backend.OpLogSoftmax {
					return d - math.Log(float64(ones))
				}
				return math.Exp(d) / float64(ones)
			})
			cs = append(cs, b.done())
		}
		// A row whose exps are not whole: each of 256 lanes adds 2^14 of
		// them, which webgpu's single running sum got 4e-5 wrong.
		const C = 1 << 22
		x := func(i int) float32 { return -float32(i%7) * 0.37 }
		sum := 0.0
		for c := range C {
			sum += math.Exp(float64(x(c)))
		}
		b := newLimit(fmt.Sprintf("%v/inexact-%d", op, C), op.String()+"/long-row")
		a := b.arg(x, 1, C)
		b.out(b.op(backend.Node{Op: op, Shape: []int{1, C}}, a), func(i int) float64 {
			if op == backend.OpLogSoftmax {
				return float64(x(i)) - math.Log(sum)
			}
			return math.Exp(float64(x(i))) / sum
		})
		cs = append(cs, b.done())
	}
	return cs
}

func limitMovement() []limitCase {
	var cs []limitCase
	val := func(i int) float32 { return float32(i % 8191) }
	{
		const r, c = 4099, 4097
		b := newLimit("permute", "exact")
		x := b.arg(val, r, c)
		b.out(b.op(backend.Node{Op: backend.OpPermute, Perm: []int{1, 0}, Shape: []int{c, r}}, x),
			func(o int) float64 { return float64(val((o%r)*c + o/r)) })
		cs = append(cs, b.done())
	}
	{
		b := newLimit("expand", "exact")
		x := b.arg(func(i int) float32 { return float32(i) + 0.5 }, 1, 8)
		b.out(b.op(backend.Node{Op: backend.OpExpand, Shape: []int{wideRows, 8}}, x), func(o int) float64 { return float64(o%8) + 0.5 })
		cs = append(cs, b.done())
	}
	{
		const start = 5
		b := newLimit("slice_rows", "exact")
		x := b.arg(val, wideRows+9, 8)
		b.out(b.op(backend.Node{Op: backend.OpSliceRows, Start: start, Shape: []int{wideRows, 8}}, x),
			func(o int) float64 { return float64(val(o + start*8)) })
		cs = append(cs, b.done())
	}
	{
		b := newLimit("concat_rows", "exact")
		x := b.arg(val, wideRows, 8)
		y := b.arg(func(i int) float32 { return -float32(i) }, 3, 8)
		b.out(b.op(backend.Node{Op: backend.OpConcatRows, Shape: []int{wideRows + 3, 8}}, x, y), func(o int) float64 {
			if o < wideRows*8 {
				return float64(val(o))
			}
			return -float64(o - wideRows*8)
		})
		cs = append(cs, b.done())
	}
	return cs
}

// clampRow is the row an index selects in a table of rows (whole numbers).
func clampRow(v float32, rows int) int { return reference.ClampIndex(float64(v), rows) }

func limitRows() []limitCase {
	var cs []limitCase
	{
		const rows = 10
		idx := func(i int) float32 { return float32(i%13 - 1) } // -1 and 10, 11 clamp
		b := newLimit("get_rows", "exact")
		t := b.arg(func(i int) float32 { return float32(i) }, rows, 8)
		x := b.arg(idx, wideRows)
		b.out(b.op(backend.Node{Op: backend.OpGetRows, Shape: []int{wideRows, 8}}, t, x),
			func(o int) float64 { return float64(clampRow(idx(o/8), rows)*8 + o%8) })
		cs = append(cs, b.done())
	}
	{
		// A table past 2^25 rows. From 2^23 on f32 holds only whole
		// numbers, and floor(x + 0.5) (webgpu's rounding) took the odd ones
		// to the next even row. Past 2^24 float32(rows-1) may round up past
		// the end, and ggml clamped an index there (ggml-cpu aborted,
		// ggml-vulkan read 0): the rows from 2^25 on hold one value, as
		// indices are exact only below 2^24 (ir.go), but every backend must
		// stay inside the table.
		const rows = 1<<25 + 7
		near := []float32{1<<23 + 1, 1<<23 + 3, 1<<23 + 5, 1<<23 - 1, 1 << 23, 1e30, 1<<25 + 6, 6, 0.5}
		idx := func(i int) float32 { return near[i%len(near)] }
		b := newLimit("get_rows/past-2^25-rows", "exact")
		t := b.arg(func(i int) float32 { return float32(min(i, 1<<25)) }, rows, 1)
		x := b.arg(idx, 4*len(near))
		b.out(b.op(backend.Node{Op: backend.OpGetRows, Shape: []int{4 * len(near), 1}}, t, x),
			func(o int) float64 { return float64(min(clampRow(idx(o), rows), 1<<25)) })
		cs = append(cs, b.done())
	}
	{
		// 200003 source rows into 5: every output sums ~40000 rows.
		const n, rows, w = 200003, 5, 3
		idx := func(i int) float32 { return float32((i*3)%(rows+2) - 1) } // -1 and 5 clamp
		count := make([]int, rows)
		for i := 0; i < n; i++ {
			count[clampRow(idx(i), rows)]++
		}
		b := newLimit("scatter_add_rows", "exact")
		src := b.arg(func(i int) float32 { return 1 + float32(i%w)*0.5 }, n, w)
		x := b.arg(idx, n)
		b.out(b.op(backend.Node{Op: backend.OpScatterAddRows, Shape: []int{rows, w}}, src, x),
			func(o int) float64 { return float64(count[o/w]) * (1 + float64(o%w)*0.5) })
		cs = append(cs, b.done())
	}
	{
		const classes = 8
		idx := func(i int) float32 { return float32(i%11 - 1) }
		b := newLimit("one_hot", "exact")
		x := b.arg(idx, wideRows)
		b.out(b.op(backend.Node{Op: backend.OpOneHot, Shape: []int{wideRows, classes}}, x), func(o int) float64 {
			if clampRow(idx(o/classes), classes) == o%classes {
				return 1
			}
			return 0
		})
		cs = append(cs, b.done())
	}
	return cs
}

// mmCase multiplies op(A)[M,K] by op(B)[K,N] with A(m,k) = fa(m,k) and
// B(k,n) = fb(k,n) (small integers: the products and sums are exact), the
// expected value summed in float64.
func mmCase(name string, M, K, N int, ta, tb bool, fa, fb func(i, j int) float32) limitCase {
	b := newLimit(fmt.Sprintf("matmul/%s-%dx%dx%d", name, M, K, N), "exact")
	sa, sb := []int{M, K}, []int{K, N}
	ga := func(i int) float32 { return fa(i/K, i%K) }
	if ta {
		sa = []int{K, M}
		ga = func(i int) float32 { return fa(i%M, i/M) }
	}
	gb := func(i int) float32 { return fb(i/N, i%N) }
	if tb {
		sb = []int{N, K}
		gb = func(i int) float32 { return fb(i%K, i/K) }
	}
	x := b.arg(ga, sa...)
	y := b.arg(gb, sb...)
	b.out(b.op(backend.Node{Op: backend.OpMatMul, Shape: []int{M, N}, TransA: ta, TransB: tb}, x, y), func(o int) float64 {
		m, n := o/N, o%N
		acc := 0.0
		for k := 0; k < K; k++ {
			acc += float64(fa(m, k)) * float64(fb(k, n))
		}
		return acc
	})
	return b.done()
}

func limitMatmul() []limitCase {
	small := func(i, j int) float32 { return float32((i+j)%5 - 2) }
	even := func(i, j int) float32 { return float32(1 - j%2) }
	one := func(i, j int) float32 { return 1 }
	// The long-K expectations sum K terms per element in float64; the
	// closed form (the count of even k) keeps them cheap.
	longK := func(name string, M, K, N int, ta, tb bool) limitCase {
		c := mmCase(name, M, K, N, ta, tb, even, one)
		for a := range c.want {
			c.want[a] = func(int) float64 { return float64((K + 1) / 2) }
		}
		return c
	}
	return []limitCase{
		longK("longK", 1, longRow, 1, false, false),
		longK("longK-transAB", 2, 2*longAxis, 3, true, true),
		// More rows, and more columns, than 65535 workgroups of one each.
		// (Tiled kernels fold their grids at any size; a grid of 65536
		// tiles of 128 rows would take minutes on a software adapter.)
		mmCase("manyM", 70001, 4, 1, false, false, small, small),
		mmCase("manyN-transB", 1, 4, 70001, false, true, small, small),
	}
}

func limitOptim() []limitCase {
	w0 := func(i int) float32 { return float32(i%5)*0.5 - 1 }
	g0 := func(i int) float32 { return float32(i%7)*0.25 - 0.75 }
	var cs []limitCase
	{
		const wd = 0.01
		hp := adamHP(1, wd)
		b := newLimit("adamw", "adamw")
		w := b.arg(w0, bigN)
		g := b.arg(g0, bigN)
		m := b.arg(func(i int) float32 { return 0.125 }, bigN)
		v := b.arg(func(i int) float32 { return 0.25 }, bigN)
		h := b.arg(func(i int) float32 { return hp[i] }, 7)
		b.op(backend.Node{Op: backend.OpAdamW, Shape: []int{bigN}}, w, g, m, v, h)
		p := make([]float64, 7)
		for i, x := range hp {
			p[i] = float64(x)
		}
		mNew := func(i int) float64 { return p[1]*0.125 + (1-p[1])*float64(g0(i)) }
		vNew := func(i int) float64 { return p[2]*0.25 + (1-p[2])*float64(g0(i))*float64(g0(i)) }
		b.c.want[0] = func(i int) float64 {
			return float64(w0(i))*(1-p[0]*p[4]) - p[0]*(mNew(i)*p[5])/(math.Sqrt(vNew(i)*p[6])+p[3])
		}
		b.c.want[2] = mNew
		b.c.want[3] = vNew
		cs = append(cs, b.done())
	}
	{
		hp := []float32{0.5, 0.75, 0.25}
		b := newLimit("sgd", "sgd")
		w := b.arg(w0, bigN)
		g := b.arg(g0, bigN)
		vel := b.arg(func(i int) float32 { return float32(i%3) * 0.5 }, bigN)
		h := b.arg(func(i int) float32 { return hp[i] }, 3)
		b.op(backend.Node{Op: backend.OpSGD, Shape: []int{bigN}}, w, g, vel, h)
		velNew := func(i int) float64 { return 0.75*float64(i%3)*0.5 + float64(g0(i)) + 0.25*float64(w0(i)) }
		b.c.want[0] = func(i int) float64 { return float64(w0(i)) - 0.5*velNew(i) }
		b.c.want[2] = velNew
		cs = append(cs, b.done())
	}
	return cs
}

// limitPool is the group's shared buffers: pool[k] serves the k-th arg of
// every case, grown when a case needs more.
type limitPool struct {
	s    *suite
	bufs []backend.Buffer
}

func (p *limitPool) get(t *testing.T, k, n int) backend.Buffer {
	t.Helper()
	for len(p.bufs) <= k {
		p.bufs = append(p.bufs, nil)
	}
	if b := p.bufs[k]; b != nil && b.Len() >= n {
		return b
	}
	if p.bufs[k] != nil {
		p.s.be.Free(p.bufs[k])
		p.bufs[k] = nil
	}
	if p.s.caps.MaxBufferElems > 0 && n > p.s.caps.MaxBufferElems {
		t.Skipf("%d elements exceed Caps.MaxBufferElems %d", n, p.s.caps.MaxBufferElems)
	}
	b, err := p.s.be.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	p.bufs[k] = b
	return b
}

func (p *limitPool) free() {
	for _, b := range p.bufs {
		if b != nil {
			p.s.be.Free(b)
		}
	}
	p.bufs = nil
}

// testLimits runs the limits group, one subtest per case. In a browser
// (GOOS=js) it skips: there the device is SwiftShader behind wasm, where a
// case takes 20-60 s and the group would outlast the page's time; the
// same kernels run it natively (webgpu on lavapipe).
func testLimits(t *testing.T, s *suite) {
	if runtime.GOOS == "js" {
		t.Skip("limits group skipped in the browser: tens of seconds a case on SwiftShader through wasm (it runs natively on the same kernels)")
	}
	pool := &limitPool{s: s}
	defer pool.free()
	for _, c := range limitCases() {
		t.Run(c.name, func(t *testing.T) { s.checkLimit(t, pool, c) })
	}
}

// checkLimit fills the args, runs the case once and compares every checked
// arg with its closed form under the case's tolerance.
func (s *suite) checkLimit(t *testing.T, pool *limitPool, c limitCase) {
	tol, ok := tolerances[c.tol]
	if !ok || tol.Terms {
		t.Fatalf("backendtest: tolerance %q is not an elementwise bound", c.tol)
	}
	bufs := make([]backend.Buffer, len(c.n))
	for k, n := range c.n {
		bufs[k] = pool.get(t, k, n)
		f := c.in[k]
		if f == nil {
			f = func(int) float32 { return -777.25 } // a sentinel a backend writing nothing keeps
		}
		s.fillPrefix(t, bufs[k], n, f)
	}
	s.runGraph(t, c.g, bufs)
	for k, want := range c.want {
		s.checkPrefix(t, bufs[k], c.n[k], want, tol, fmt.Sprintf("arg %d %s", k, argRole(c.g, k)))
	}
}

// fillPrefix writes f(i) into elements 0..n-1 of b in 4M-element chunks.
func (s *suite) fillPrefix(t *testing.T, b backend.Buffer, n int, f func(i int) float32) {
	t.Helper()
	const chunk = 1 << 22
	buf := make([]float32, min(chunk, n))
	for off := 0; off < n; off += chunk {
		part := buf[:min(chunk, n-off)]
		for i := range part {
			part[i] = f(off + i)
		}
		if err := s.be.Write(b, off, part); err != nil {
			t.Fatalf("Write(%d, %d values): %v", off, len(part), err)
		}
	}
}

// checkPrefix reads elements 0..n-1 of b in chunks and compares each with
// want(i) under tol, reporting the first few wrong elements and the count.
func (s *suite) checkPrefix(t *testing.T, b backend.Buffer, n int, want func(i int) float64, tol Tol, what string) {
	t.Helper()
	const chunk = 1 << 22
	buf := make([]float32, min(chunk, n))
	bad, first := 0, ""
	for off := 0; off < n; off += chunk {
		part := buf[:min(chunk, n-off)]
		if err := s.be.Read(b, off, part); err != nil {
			t.Fatalf("%s: Read(%d, %d values): %v", what, off, len(part), err)
		}
		for i, x := range part {
			w := want(off + i)
			if d := math.Abs(float64(x) - w); d <= tol.bound(w, nil, 0, 0) {
				continue
			}
			if bad < 3 {
				first += fmt.Sprintf("\n  element %d: got %.9g, want %.9g", off+i, x, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements out of tolerance %+v:%s", what, bad, n, tol, first)
	}
}

// limitAttention: one query over more keys than 8 lanes cover in 65535
// iterations (the keys of a part, or a workgroup's loop over tiles), and
// more queries than 65535 workgroups of 128 hold. A key not attended holds
// a k that would dominate every score and a v far from the others, so
// reading it shows. In the long case the scores are 1 (every 4099th key,
// and the last) or -200, whose weight after subtracting the maximum 1 is
// 0 in f32: the result is the mean of the v of the attended ones, as in
// limitSoftmax.
func limitAttention() []limitCase {
	var cs []limitCase
	{
		const tk = longAxis
		attended := func(j int) bool { return j%3 != 0 }
		one := func(j int) bool { return j == tk-1 || j%4099 == 1 }
		val := func(j int) float32 { return float32(j%5) * 0.25 }
		sum, ones := 0.0, 0
		for j := range tk {
			if attended(j) && one(j) {
				sum += float64(val(j))
				ones++
			}
		}
		b := newLimit(fmt.Sprintf("attention/keys-%d", tk), "attention")
		q := b.arg(func(int) float32 { return 1 }, 1, 1, 1)
		k := b.arg(func(j int) float32 {
			switch {
			case !attended(j):
				return 1000
			case one(j):
				return 1
			}
			return -200
		}, 1, tk, 1)
		v := b.arg(func(j int) float32 {
			if !attended(j) {
				return 1e6
			}
			return val(j)
		}, 1, tk, 1)
		keep := b.arg(func(j int) float32 {
			if attended(j) {
				return 1
			}
			return 0
		}, 1, 1, tk)
		b.out(b.op(backend.Node{Op: backend.OpAttention, Shape: []int{1, 1, 1}, A: 1}, q, k, v, keep),
			func(int) float64 { return sum / float64(ones) })
		cs = append(cs, b.done())
	}
	{
		// Queries i score s_i*k_j against the keys k = (1, 1000, -1), the
		// middle one masked: the softmax of (x, -x) with x = s_i/2 over v
		// = (2, 1e6, -1).
		const tq = 65535*128 + 4099
		s := func(i int) float32 { return float32(i%9-4) * 0.5 }
		b := newLimit(fmt.Sprintf("attention/queries-%d", tq), "attention")
		q := b.arg(s, 1, tq, 1)
		kv := []float32{1, 1000, -1}
		vv := []float32{2, 1e6, -1}
		k := b.arg(func(j int) float32 { return kv[j] }, 1, 3, 1)
		v := b.arg(func(j int) float32 { return vv[j] }, 1, 3, 1)
		keep := b.arg(func(j int) float32 { return float32(1 - j%2) }, 1, 1, 3)
		b.out(b.op(backend.Node{Op: backend.OpAttention, Shape: []int{1, tq, 1}, A: 0.5}, q, k, v, keep), func(i int) float64 {
			x := float64(s(i)) * 0.5
			e0, e2 := math.Exp(x), math.Exp(-x)
			return (2*e0 - e2) / (e0 + e2)
		})
		cs = append(cs, b.done())
	}
	return cs
}
