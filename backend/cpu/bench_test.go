package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ag-go/ag/backend"
)

// BenchmarkMatMul multiplies square f32 matrices through Compile + Run of a
// one-node graph and reports GFLOP/s (2*n^3 flops per run). On an idle
// machine GFLOP/cpu-s is about GFLOP/s divided by the cores used.
//
//	go test -run x -bench MatMul -benchtime 20x ./backend/cpu/
func BenchmarkMatMul(b *testing.B) {
	for _, tc := range []struct {
		n      int
		ta, tb bool
	}{{256, false, false}, {512, false, false}, {1024, false, false}, {1024, true, false}, {1024, false, true}, {1024, true, true}} {
		name := fmt.Sprint(tc.n)
		if tc.ta || tc.tb {
			name += map[bool]string{true: "T", false: "N"}[tc.ta] + map[bool]string{true: "T", false: "N"}[tc.tb]
		}
		b.Run(name, func(b *testing.B) {
			benchGraph(b, matmulGraph(tc.n, tc.ta, tc.tb), 2*float64(tc.n)*float64(tc.n)*float64(tc.n))
		})
	}
}

func matmulGraph(n int, ta, tb bool) *gb {
	g := &gb{}
	g.out(g.node(backend.Node{Op: backend.OpMatMul, In: []int{g.arg(n, n), g.arg(n, n)}, Shape: []int{n, n}, TransA: ta, TransB: tb}))
	return g
}

// BenchmarkMLPStep is one Adam training step of a 4x1024 MLP (the issue's
// yardstick), batch 64 and 256, and of the browser benchmark's 4x256 MLP
// at batch 64 ("256wide/64").
func BenchmarkMLPStep(b *testing.B) {
	for _, tc := range []struct {
		name         string
		batch, width int
	}{{"64", 64, 1024}, {"256", 256, 1024}, {"256wide/64", 64, 256}} {
		b.Run(tc.name, func(b *testing.B) {
			w := tc.width
			g := mlpStep(tc.batch, []int{w, w, w, w, w})
			flops := 0.0 // of the matmuls: 2*M*N*K each
			for _, n := range g.g.Nodes {
				if n.Op == backend.OpMatMul {
					a := g.g.Nodes[n.In[0]].Shape
					k := a[1]
					if n.TransA {
						k = a[0]
					}
					flops += 2 * float64(backend.NumElems(n.Shape)*k)
				}
			}
			benchGraph(b, g, flops)
		})
	}
}

// benchGraph compiles g, runs it once to warm up, then times runs; flops 0
// skips the GFLOP metrics (callers report bytes through b.SetBytes).
func benchGraph(b *testing.B, g *gb, flops float64) {
	c := New()
	prog, err := c.Compile(&g.g)
	if err != nil {
		b.Fatal(err)
	}
	args := randArgs(rand.New(rand.NewPCG(40, 1)), g.shapes, -1, 1)
	bufs := make([]backend.Buffer, len(args))
	for i, a := range args {
		bufs[i], _ = c.Alloc(len(a))
		_ = c.Write(bufs[i], 0, a)
	}
	if _, err := prog.Run(bufs); err != nil {
		b.Fatal(err)
	}
	cpu0 := processCPUTime()
	for b.Loop() {
		if _, err := prog.Run(bufs); err != nil {
			b.Fatal(err)
		}
	}
	if flops == 0 {
		return
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu := processCPUTime() - cpu0; cpu0 > 0 && cpu > 0 {
		b.ReportMetric(flops*float64(b.N)/cpu.Seconds()/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkReduce sums along one axis and reports GB/s read: a whole vector
// (one row), rows of a matrix (softmax/loss shapes) and columns of a matrix
// (bias gradients: a sum over the batch).
//
//	go test -run x -bench Reduce ./backend/cpu/
func BenchmarkReduce(b *testing.B) {
	for _, tc := range []struct {
		name  string
		shape []int
		axis  int
	}{
		{"all/4M", []int{1 << 22}, 0},
		{"rows/1024x1024", []int{1024, 1024}, 1},
		{"cols/256x1024", []int{256, 1024}, 0},
		{"cols/4096x1024", []int{4096, 1024}, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := &gb{}
			out := slices.Clone(tc.shape)
			out[tc.axis] = 1
			g.out(g.node(backend.Node{Op: backend.OpSum, In: []int{g.arg(tc.shape...)}, Shape: out, Axis: tc.axis}))
			b.SetBytes(int64(4 * backend.NumElems(tc.shape)))
			benchGraph(b, g, 0)
		})
	}
}

// BenchmarkMatMulSkinny times the three products of a batch-64 step through
// a 1024-wide Linear layer: forward X*W, weight gradient X^T*dY and input
// gradient dY*W^T; the "256" ones are those of the browser benchmark's
// 256-wide MLP (bench/browser).
func BenchmarkMatMulSkinny(b *testing.B) {
	const m = 64
	type skinny struct {
		name   string
		a, bb  []int
		out    []int
		ta, tb bool
		k      int
	}
	var cases []skinny
	for _, n := range []int{1024, 256} {
		sfx := ""
		if n != 1024 {
			sfx = fmt.Sprint(n)
		}
		cases = append(cases,
			skinny{"fwd" + sfx, []int{m, n}, []int{n, n}, []int{m, n}, false, false, n},
			skinny{"dW" + sfx, []int{m, n}, []int{m, n}, []int{n, n}, true, false, m},
			skinny{"dX" + sfx, []int{m, n}, []int{n, n}, []int{m, n}, false, true, n})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			g := &gb{}
			g.out(g.node(backend.Node{Op: backend.OpMatMul, In: []int{g.arg(tc.a...), g.arg(tc.bb...)}, Shape: tc.out, TransA: tc.ta, TransB: tc.tb}))
			benchGraph(b, g, 2*float64(backend.NumElems(tc.out)*tc.k))
		})
	}
}

// BenchmarkMicroKernel times the best micro-kernel alone on one core, its
// operands in L1: the ceiling of the GEMM's per-core rate.
func BenchmarkMicroKernel(b *testing.B) {
	k := bestKernel()
	kc := k.kc
	a := make([]float32, k.mr*kc)
	bb := make([]float32, kc*k.nr)
	c := make([]float32, k.mr*k.nr)
	for range b.N {
		k.fn(kc, a, bb, k.nr, c, k.nr, true)
	}
	b.ReportMetric(float64(b.N)*float64(2*k.mr*k.nr*kc)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkElementwise runs each unary and binary op's kernel over 64Ki
// elements (binary: both operands vectors, then one a scalar) and reports
// ns per element: the specialised loops against the table's generic path.
//
//	go test -run x -bench Elementwise -benchtime 200x ./backend/cpu/
func BenchmarkElementwise(b *testing.B) {
	const n = 1 << 16
	r := rand.New(rand.NewPCG(1, 2))
	x, y, o := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = r.Float32()*4-2, r.Float32()*4-2
	}
	for _, op := range backend.Ops() {
		switch {
		case op.IsUnary():
			A, B := float32(0.5), float32(1.5)
			if op == backend.OpClamp || op == backend.OpInside {
				A, B = -1, 1
			}
			b.Run(op.String(), func(b *testing.B) {
				for b.Loop() {
					unary(op, A, B, o, x)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
			})
		case op.IsBinary():
			b.Run(op.String()+"/vv", func(b *testing.B) {
				for b.Loop() {
					binRow(op, o, x, y, 1, 1)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
			})
			b.Run(op.String()+"/vs", func(b *testing.B) {
				for b.Loop() {
					binRow(op, o, x, y, 1, 0)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
			})
		}
	}
}
