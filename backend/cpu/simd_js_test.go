//go:build js && wasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// requireSIMDEnv, set to 1 (make test does), makes a missing wasm SIMD
// kernel a failure instead of a loud log line.
const requireSIMDEnv = "AG_REQUIRE_WASM_SIMD"

// simdOrSkip returns the SIMD kernel, or ends the test saying why not.
func simdOrSkip(t testing.TB) microKernel {
	t.Helper()
	if simdMod == nil {
		if os.Getenv(requireSIMDEnv) == "1" {
			t.Fatalf("the wasm SIMD kernel is unavailable (%s), and %s=1 requires it", simdWhy, requireSIMDEnv)
		}
		t.Skipf("THE WASM SIMD KERNEL IS UNAVAILABLE HERE (%s): matmuls run on %s", simdWhy, goKernel.name)
	}
	return simdKernel
}

// TestSIMDKernelSelected: where the module loads, it is the kernel every
// matmul uses, and the backend says so.
func TestSIMDKernelSelected(t *testing.T) {
	t.Logf("matmul kernel: %s", kernelName())
	k := simdOrSkip(t)
	if kern.name != k.name {
		t.Fatalf("kern is %s, want %s", kern.name, k.name)
	}
	if d := New().Caps().Device; !strings.Contains(d, k.name) {
		t.Fatalf("Caps().Device %q does not name %s", d, k.name)
	}
}

// TestSIMDBlock calls the block kernel directly on every layout it serves
// (A packed or in place, B packed or in place, C contiguous or transposed,
// accumulate or not, ragged rows and columns) against a float64 product.
// Operands are small integers, so every sum is exact in float32 and any
// difference is a fault, not rounding.
func TestSIMDBlock(t *testing.T) {
	k := simdOrSkip(t)
	mr, nr := k.mr, k.nr
	r := rand.New(rand.NewPCG(7, 7))
	small := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.IntN(9) - 4)
		}
		return s
	}
	for _, rows := range []int{1, mr - 1, mr, 3*mr + 1, 40} {
		for _, cols := range []int{1, nr - 1, nr, 2*nr + 5} {
			for _, kc := range []int{1, 7, 64} {
				for _, v := range []struct{ inPlaceA, inPlaceB, transC, accum bool }{
					{false, false, false, false}, {false, true, false, true}, {true, false, true, false},
					{true, true, false, false}, {false, false, true, true}, {true, false, false, true},
				} {
					if v.inPlaceB && cols%nr != 0 {
						continue // in-place B is only ever passed as full panels
					}
					name := fmt.Sprintf("%dx%dx%d/%+v", rows, cols, kc, v)
					// A(i, p), stored rows of lda with slack; B(p, j) rows of ldb.
					lda, ldb := kc+3, cols+5
					a, b := small(rows*lda), small(kc*ldb)
					bc := blockCall{kc: kc, rows: rows, cols: cols, accum: v.accum, tile: make([]float32, mr*nr)}
					if v.inPlaceA {
						bc.a, bc.ars, bc.aks, bc.aps = a, lda, 1, mr*lda
					} else {
						bc.a = make([]float32, roundUp(rows, mr)*kc)
						packA(mr, bc.a, a, lda, 1, 0, rows, 0, kc)
						bc.ars, bc.aks, bc.aps = 1, mr, mr*kc
					}
					if v.inPlaceB {
						bc.b, bc.ldb, bc.bps = b, ldb, nr
					} else {
						bc.b = make([]float32, roundUp(cols, nr)*kc)
						packB(nr, bc.b, b, ldb, 1, 0, kc, 0, cols, 0)
						bc.ldb, bc.bps = nr, nr*kc
					}
					// C with a stride of its own and a border that must stay.
					ldc := cols + 2
					bc.crs, bc.ccs = ldc, 1
					if v.transC {
						ldc = rows + 2
						bc.crs, bc.ccs = 1, ldc
					}
					c0 := small((max(rows, cols) + 1) * ldc)
					c := append([]float32(nil), c0...)
					bc.c = c
					k.block(&bc)
					want := append([]float32(nil), c0...)
					for i := range rows {
						for j := range cols {
							var s float64
							for p := range kc {
								s += float64(a[i*lda+p]) * float64(b[p*ldb+j])
							}
							at := i*bc.crs + j*bc.ccs
							if v.accum {
								s += float64(c0[at])
							}
							want[at] = float32(s)
						}
					}
					for x := range want {
						if c[x] != want[x] {
							t.Fatalf("%s: c[%d] = %v, want %v", name, x, c[x], want[x])
						}
					}
				}
			}
		}
	}
}

// TestSIMDMatchesGo runs every GEMM path (packed, direct B, swapped,
// batch) with each transpose through the SIMD and the Go kernel and
// compares them: they may round differently (other summation order), by
// at most a few ulps of the sum of |products|, never more.
func TestSIMDMatchesGo(t *testing.T) {
	simdOrSkip(t)
	defer func(old microKernel) { kern = old }(kern)
	r := rand.New(rand.NewPCG(21, 3))
	for _, tc := range []struct {
		batch    int
		m, n, kk int
	}{
		{1, 64, 256, 256}, {1, 256, 256, 64}, {1, 300, 290, 600}, {1, 37, 203, 530},
		{2, 50, 230, 300}, {3, 40, 30, 50}, {1, 5, 3, 9000}, {1, 1, 1, 1}, {1, 513, 17, 1030},
	} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				as, bs := []int{tc.m, tc.kk}, []int{tc.kk, tc.n}
				if ta {
					as = []int{tc.kk, tc.m}
				}
				if tb {
					bs = []int{tc.n, tc.kk}
				}
				if tc.batch > 1 {
					as, bs = append([]int{tc.batch}, as...), append([]int{tc.batch}, bs...)
				}
				out := []int{tc.m, tc.n}
				if tc.batch > 1 {
					out = append([]int{tc.batch}, out...)
				}
				g := &gb{}
				g.out(g.node(backend.Node{Op: backend.OpMatMul, In: []int{g.arg(as...), g.arg(bs...)}, Shape: out, TransA: ta, TransB: tb}))
				args := randArgs(r, g.shapes, -1, 1)
				var res [2][]float32
				for i, k := range []microKernel{simdKernel, goKernel} {
					kern = k
					res[i] = runGraph(t, g, args)
				}
				// |C| <= kk for operands in [-1, 1]: allow 8 ulps of that.
				lim := 8 * float64(tc.kk) * math.Pow(2, -23)
				for x := range res[0] {
					if d := math.Abs(float64(res[0][x] - res[1][x])); d > lim || math.IsNaN(d) {
						t.Fatalf("batch %d, %dx%dx%d, transA %v transB %v: element %d: SIMD %v, Go %v (diff %g > %g)",
							tc.batch, tc.m, tc.n, tc.kk, ta, tb, x, res[0][x], res[1][x], d, lim)
					}
				}
			}
		}
	}
}

// runGraph compiles g on a fresh backend, runs it on copies of args and
// returns its output.
func runGraph(t testing.TB, g *gb, args [][]float32) []float32 {
	t.Helper()
	c := New()
	prog, err := c.Compile(&g.g)
	if err != nil {
		t.Fatal(err)
	}
	bufs := make([]backend.Buffer, len(args))
	for i, a := range args {
		bufs[i], _ = c.Alloc(len(a))
		_ = c.Write(bufs[i], 0, a)
	}
	if _, err := prog.Run(bufs); err != nil {
		t.Fatal(err)
	}
	o := g.g.Outputs[0].Arg
	res := make([]float32, len(args[o]))
	if err := c.Read(bufs[o], 0, res); err != nil {
		t.Fatal(err)
	}
	return res
}

// BenchmarkSIMDTiles times the browser MLP's products and two squares
// through the Go kernel and block kernels of several register tiles, in one
// run (the choice of simdMR x simdNR rests on it):
//
//	GOOS=js GOARCH=wasm go test -exec=$(go env GOROOT)/lib/wasm/go_js_wasm_exec -run x -bench SIMDTiles ./backend/cpu/
func BenchmarkSIMDTiles(b *testing.B) {
	simdOrSkip(b)
	defer func(old microKernel) { kern = old }(kern)
	ks := []microKernel{goKernel}
	for _, s := range [][2]int{{4, 8}, {4, 12}, {5, 8}, {6, 8}} {
		m, why := loadSIMD(s[0], s[1])
		if m == nil {
			b.Fatalf("%dx%d: %s", s[0], s[1], why)
		}
		ks = append(ks, m.kernel())
	}
	for _, k := range ks {
		// Warm up: V8 runs a new module's functions in its baseline
		// compiler until they tier up to TurboFan in the background.
		kern = k
		for _, tb := range []bool{false, true} {
			g := matmulGraph(256, false, tb)
			args := randArgs(rand.New(rand.NewPCG(1, 1)), g.shapes, -1, 1)
			for range 20 {
				runGraph(b, g, args)
			}
		}
		for _, tc := range []struct {
			name         string
			m, n, kk     int
			ta, tb       bool
			a, bb, shape []int
		}{
			{name: "fwd256", m: 64, n: 256, kk: 256},
			{name: "dW256", m: 256, n: 256, kk: 64, ta: true},
			{name: "dX256", m: 64, n: 256, kk: 256, tb: true},
			{name: "512", m: 512, n: 512, kk: 512},
			{name: "1024", m: 1024, n: 1024, kk: 1024},
		} {
			b.Run(k.name+"/"+tc.name, func(b *testing.B) {
				kern = k
				as, bs := []int{tc.m, tc.kk}, []int{tc.kk, tc.n}
				if tc.ta {
					as = []int{tc.kk, tc.m}
				}
				if tc.tb {
					bs = []int{tc.n, tc.kk}
				}
				g := &gb{}
				g.out(g.node(backend.Node{Op: backend.OpMatMul, In: []int{g.arg(as...), g.arg(bs...)}, Shape: []int{tc.m, tc.n}, TransA: tc.ta, TransB: tc.tb}))
				benchGraph(b, g, 2*float64(tc.m*tc.n*tc.kk))
			})
		}
	}
}
