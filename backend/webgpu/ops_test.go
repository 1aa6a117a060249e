package webgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
)

// The tests share one Backend per process: bookworm's lavapipe can corrupt
// its heap when devices come and go (notes/PLATFORM.md), and opening a
// device costs more than the tests themselves.
var shared struct {
	once sync.Once
	be   *Backend
	err  error
}

func openTest(t testing.TB) *Backend {
	t.Helper()
	a := driver{}.Available()
	if !a.OK {
		testenv.SkipDevice(t, "webgpu", a.Why)
	}
	shared.once.Do(func() {
		b, err := driver{}.Open()
		if err == nil {
			shared.be = b.(*Backend)
		}
		shared.err = err
	})
	if shared.err != nil {
		t.Fatalf("webgpu: available (%s) but Open fails: %v", a.Why, shared.err)
	}
	return shared.be
}

// sharedBackend is the shared test backend under core: a device over it
// sees the real programs (RunReader included), and closing it leaves the
// backend open for the other tests.
type sharedBackend struct{ *Backend }

func (sharedBackend) Close() error { return nil }

type sharedDriver struct{}

func (sharedDriver) Open() (backend.Backend, error) {
	if shared.be == nil {
		return nil, fmt.Errorf("webgpu-shared: open the shared test backend first")
	}
	return sharedBackend{shared.be}, nil
}
func (sharedDriver) Available() backend.Availability { return driver{}.Available() }

func init() { backend.Register("webgpu-shared", 0, sharedDriver{}) }

// waitedRuns makes be's plain runs wait and report their device time
// (natively they are deferred) until t ends.
func waitedRuns(t testing.TB, be *Backend) *Backend {
	was := be.d.SetDefer(false)
	t.Cleanup(func() { be.d.SetDefer(was) })
	return be
}

// incProgram compiles x = x + a in place over 6 values, released when the
// test ends: the run the tests of repeated runs repeat.
func incProgram(t *testing.T, be *Backend, a float32) backend.Program {
	t.Helper()
	p, err := be.Compile(&backend.Graph{NumArgs: 1, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: []int{6}},
		{Op: backend.OpAffine, In: []int{0}, Shape: []int{6}, A: 1, B: a}}, Outputs: []backend.Output{{Node: 1, Arg: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	return p
}

// lazyStepsLike runs steps lazy MLP steps (width 24, depth 3, batch 24) on
// the shared backend, calling mark before the fourth, and checks each loss
// against the cpu backend's: the steps whose runs tests count.
func lazyStepsLike(t *testing.T, steps int, mark func()) {
	t.Helper()
	losses := func(name string, mark func()) []float32 {
		t.Helper()
		dev, err := core.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		m, err := workload.New(dev, workload.Config{Width: 24, Depth: 3, Batch: 24, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		var ls []float32
		for i := range steps {
			if i == 3 && mark != nil {
				mark()
			}
			l, err := m.StepMode(workload.Lazy)
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		return ls
	}
	got, want := losses("webgpu-shared", mark), losses("cpu", nil)
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("step %d: loss %v on webgpu, %v on cpu", i, got[i], want[i])
		}
	}
}

// opCase is one graph: its nodes read args 0..k-1 (filled with random data)
// and the last node's value goes to the last arg.
type opCase struct {
	name   string
	shapes [][]int // arg shapes
	nodes  []backend.Node
	lo, hi float64 // range of the random inputs
	tol    float64 // |got-want| <= tol * (1 + |want|)
}

func argNodes(shapes [][]int) []backend.Node {
	ns := make([]backend.Node, len(shapes))
	for i, s := range shapes {
		ns[i] = backend.Node{Op: backend.OpArg, Arg: i, Shape: s}
	}
	return ns
}

func opCases() []opCase {
	un := func(op backend.Op, s []int, a, b float32, lo, hi float64) opCase {
		return opCase{name: fmt.Sprintf("%s%v", op, s), shapes: [][]int{s},
			nodes: []backend.Node{{Op: op, In: []int{0}, Shape: s, A: a, B: b}}, lo: lo, hi: hi, tol: 2e-6}
	}
	bin := func(op backend.Op, a, b, out []int) opCase {
		return opCase{name: fmt.Sprintf("%s%v%v", op, a, b), shapes: [][]int{a, b},
			nodes: []backend.Node{{Op: op, In: []int{0, 1}, Shape: out}}, lo: 0.5, hi: 2, tol: 2e-6}
	}
	red := func(op backend.Op, s []int, axis int) opCase {
		o := append([]int(nil), s...)
		o[axis] = 1
		return opCase{name: fmt.Sprintf("%s%v/%d", op, s, axis), shapes: [][]int{s},
			nodes: []backend.Node{{Op: op, In: []int{0}, Shape: o, Axis: axis}}, lo: -1, hi: 1, tol: 1e-5 * float64(s[axis])}
	}
	mm := func(m, k, n int, ta, tb bool, batch ...int) opCase {
		a, b := []int{m, k}, []int{k, n}
		if ta {
			a = []int{k, m}
		}
		if tb {
			b = []int{n, k}
		}
		a, b = append(append([]int{}, batch...), a...), append(append([]int{}, batch...), b...)
		out := append(append([]int{}, batch...), m, n)
		return opCase{name: fmt.Sprintf("matmul%v%v/%t%t", a, b, ta, tb), shapes: [][]int{a, b},
			nodes: []backend.Node{{Op: backend.OpMatMul, In: []int{0, 1}, Shape: out, TransA: ta, TransB: tb}}, lo: -1, hi: 1, tol: 1e-5 * float64(k)}
	}
	cs := []opCase{
		{name: "fill", shapes: [][]int{{3}}, nodes: []backend.Node{{Op: backend.OpFill, Shape: []int{5, 7}, A: 2.5}}, tol: 0},
		un(backend.OpNeg, []int{3, 5, 7}, 0, 0, -3, 3),
		un(backend.OpExp, []int{1001}, 0, 0, -10, 10),
		un(backend.OpLog, []int{7, 13}, 0, 0, 0.01, 100),
		un(backend.OpSqrt, []int{333}, 0, 0, 0, 100),
		un(backend.OpReLU, []int{2, 3, 4, 5}, 0, 0, -1, 1),
		un(backend.OpSigmoid, []int{517}, 0, 0, -30, 30),
		un(backend.OpTanh, []int{517}, 0, 0, -30, 30),
		un(backend.OpAffine, []int{9, 11}, 1.5, -0.25, -2, 2),
		un(backend.OpPowConst, []int{99}, 2, 0, -3, 3),
		un(backend.OpPowConst, []int{99}, 3, 0, -3, 3),
		un(backend.OpPowConst, []int{99}, 1.7, 0, 0.1, 3),
		un(backend.OpPowConst, []int{99}, -2, 0, 0.5, 3),
		un(backend.OpClamp, []int{257}, -0.5, 0.5, -1, 1),
		un(backend.OpInside, []int{257}, -0.5, 0.5, -1, 1),
		bin(backend.OpAdd, []int{17, 31}, []int{17, 31}, []int{17, 31}),
		bin(backend.OpSub, []int{17, 31}, []int{31}, []int{17, 31}),
		bin(backend.OpMul, []int{5, 1, 7}, []int{3, 1}, []int{5, 3, 7}),
		bin(backend.OpDiv, []int{2, 3, 4, 5}, []int{}, []int{2, 3, 4, 5}),
		bin(backend.OpDiv, []int{1}, []int{3, 1, 5, 1}, []int{3, 1, 5, 1}),
		red(backend.OpSum, []int{13, 1001}, 1),
		red(backend.OpSum, []int{13, 101}, 0),
		red(backend.OpSum, []int{3, 7, 5}, 1),
		red(backend.OpMax, []int{13, 1001}, 1),
		red(backend.OpMax, []int{2, 3, 7, 5}, 2),
		// Few long rows reduce in parts; many rows along axis 0 by lanes.
		red(backend.OpSum, []int{3, 20000}, 1),
		red(backend.OpMax, []int{70001}, 0),
		red(backend.OpSum, []int{300, 70}, 0),
		// long columns: in parts under the GPU's plans (few outputs)
		red(backend.OpSum, []int{1100, 40}, 0),
		red(backend.OpSum, []int{2, 700, 3}, 1),
		red(backend.OpMax, []int{900, 5}, 0),
		red(backend.OpMax, []int{2, 45, 33}, 1),
		{name: "softmax", shapes: [][]int{{7, 1003}}, nodes: []backend.Node{{Op: backend.OpSoftmax, In: []int{0}, Shape: []int{7, 1003}}}, lo: -20, hi: 20, tol: 1e-5},
		{name: "log_softmax", shapes: [][]int{{3, 5, 11}}, nodes: []backend.Node{{Op: backend.OpLogSoftmax, In: []int{0}, Shape: []int{3, 5, 11}}}, lo: -20, hi: 20, tol: 1e-5},
		// the last two axes swapped: the tiled transpose, partial tiles
		{name: "transpose", shapes: [][]int{{3, 37, 45}}, nodes: []backend.Node{{Op: backend.OpPermute, In: []int{0}, Shape: []int{3, 45, 37}, Perm: []int{0, 2, 1}}}, lo: -1, hi: 1},
		{name: "transpose-2d", shapes: [][]int{{64, 33}}, nodes: []backend.Node{{Op: backend.OpPermute, In: []int{0}, Shape: []int{33, 64}, Perm: []int{1, 0}}}, lo: -1, hi: 1},
		{name: "permute", shapes: [][]int{{2, 3, 4, 5}}, nodes: []backend.Node{{Op: backend.OpPermute, In: []int{0}, Shape: []int{5, 2, 4, 3}, Perm: []int{3, 0, 2, 1}}}, lo: -1, hi: 1},
		{name: "expand", shapes: [][]int{{3, 1}}, nodes: []backend.Node{{Op: backend.OpExpand, In: []int{0}, Shape: []int{2, 3, 5}}}, lo: -1, hi: 1},
		{name: "slice_rows", shapes: [][]int{{9, 7}}, nodes: []backend.Node{{Op: backend.OpSliceRows, In: []int{0}, Shape: []int{4, 7}, Start: 3}}, lo: -1, hi: 1},
		{name: "concat_rows", shapes: [][]int{{2, 7}, {5, 7}}, nodes: []backend.Node{{Op: backend.OpConcatRows, In: []int{0, 1}, Shape: []int{7, 7}}}, lo: -1, hi: 1},
		{name: "reshape+add", shapes: [][]int{{6, 5}, {30}}, nodes: []backend.Node{{Op: backend.OpReshape, In: []int{0}, Shape: []int{30}}, {Op: backend.OpAdd, In: []int{2, 1}, Shape: []int{30}}}, lo: -1, hi: 1, tol: 1e-6},
		// Indices in -2..12 against 9 rows exercise the clamping.
		{name: "get_rows", shapes: [][]int{{9, 5}, {17}}, nodes: []backend.Node{{Op: backend.OpGetRows, In: []int{0, 1}, Shape: []int{17, 5}}}, lo: -2, hi: 12},
		{name: "scatter_add_rows", shapes: [][]int{{17, 5}, {17}}, nodes: []backend.Node{{Op: backend.OpScatterAddRows, In: []int{0, 1}, Shape: []int{9, 5}}}, lo: -2, hi: 12, tol: 1e-5},
		{name: "one_hot", shapes: [][]int{{23}}, nodes: []backend.Node{{Op: backend.OpOneHot, In: []int{0}, Shape: []int{23, 6}}}, lo: -2, hi: 8},
		mm(1, 1, 1, false, false),
		mm(67, 33, 71, false, false),
		mm(67, 33, 71, true, false),
		mm(67, 33, 71, false, true),
		mm(67, 33, 71, true, true),
		mm(130, 257, 65, false, false),
		mm(5, 17, 9, true, true, 3),
		mm(5, 17, 9, false, true, 2, 3),
		// Multiples of 4 take the vec4 path; several K steps and partial
		// tiles on both sides.
		mm(132, 36, 260, false, false),
		mm(132, 36, 260, true, false),
		mm(132, 36, 260, false, true),
		mm(132, 36, 260, true, true),
		mm(8, 4, 12, true, true, 2),
		mm(200, 72, 136, false, true, 2),
		mm(4, 260, 4, false, false),
	}
	return cs
}

// randArgs fills the arg shapes with values in lo..hi; index operands get
// whole numbers (the IR promises whole indices).
func randArgs(rng *rand.Rand, c opCase) [][]float32 {
	args := make([][]float32, len(c.shapes)+1)
	for i, s := range c.shapes {
		a := make([]float32, backend.NumElems(s))
		for j := range a {
			v := c.lo + (c.hi-c.lo)*rng.Float64()
			if c.name == "get_rows" || c.name == "one_hot" || c.name == "scatter_add_rows" {
				if i == len(c.shapes)-1 || c.name == "one_hot" {
					v = math.Round(v)
				}
			}
			a[j] = float32(v)
		}
		args[i] = a
	}
	return args
}

func TestOps(t *testing.T) {
	be := openTest(t)
	t.Run("auto", func(t *testing.T) { testOps(t, be, false) })
	// A software adapter plans every matmul as mmSoft tiles and reduces
	// columns in one step: run the GPU's plans (splits, dot products, the
	// large tilings, columns in parts) here as well.
	be.gpuPlans = true
	t.Run("gpu-plans", func(t *testing.T) { testOps(t, be, false) })
	be.gpuPlans = false
	// Every tiling, with and without double buffering, on the matmul cases;
	// two of them with K split in 3 and 5 parts (uneven, some parts empty).
	for i, c := range append([]mmCfg{mmLarge, mmMedium, mmSmall, mmTiny, mmWide, mmTN}, extraTilings(t)...) {
		for _, db := range []bool{false, true} {
			for _, split := range []int{1, 3, 5} {
				c.DB = db
				// (mmWide runs split for deep products: both of its
				// variants are tried split)
				if !c.fits(*be.info) || (split > 1 && (db || i%2 == 1) && c != mmWide) {
					continue
				}
				be.matmulForce = &mmPlan{cfg: c, split: split}
				t.Run(fmt.Sprintf("matmul-%s-split%d", c, split), func(t *testing.T) { testOps(t, be, true) })
			}
		}
	}
	// B transposed first (large products with B stored transposed).
	for _, pl := range []mmPlan{{cfg: mmWide, split: 1, tB: true}, {cfg: mmSmall, split: 3, tB: true}, {cfg: mmLarge, split: 1, tB: true},
		{cfg: mmTN, split: 1, tA: true}, {cfg: mmTN, split: 3, tA: true, tB: true}} {
		if !pl.cfg.fits(*be.info) {
			continue
		}
		be.matmulForce = &pl
		t.Run(fmt.Sprintf("matmul-%s-split%d-tA%v-tB%v", pl.cfg, pl.split, pl.tA, pl.tB), func(t *testing.T) { testOps(t, be, true) })
	}
	be.matmulForce = nil
}

// extraTilings parses $AG_WEBGPU_MM_TILINGS, tilings to try besides the
// ones matmul picks from (TestOps checks them, TestSweepMatmul times them):
// comma-separated BMxBNxBK/TMxTN, db for double-buffered, e.g.
// 128x256x8/8x16,128x64x16/8x8db.
func extraTilings(t *testing.T) []mmCfg {
	var cs []mmCfg
	for _, f := range strings.Split(os.Getenv("AG_WEBGPU_MM_TILINGS"), ",") {
		if f == "" {
			continue
		}
		var c mmCfg
		var rest string
		n, _ := fmt.Sscanf(f, "%dx%dx%d/%dx%d%s", &c.BM, &c.BN, &c.BK, &c.TM, &c.TN, &rest)
		c.DB = rest == "db"
		if n < 5 || (rest != "" && !c.DB) || c.TM%4 != 0 || c.TN%4 != 0 || c.BM%c.TM != 0 || c.BN%c.TN != 0 || c.BK%4 != 0 {
			t.Fatalf("AG_WEBGPU_MM_TILINGS: %q: want BMxBNxBK/TMxTN[db], TM and TN multiples of 4 dividing BM and BN, BK a multiple of 4", f)
		}
		cs = append(cs, c)
	}
	return cs
}

// testOps runs every case, or with onlyMatmul only the matmuls (the other
// kernels do not depend on the matmul settings).
func testOps(t *testing.T, be *Backend, onlyMatmul bool) {
	for ci, c := range opCases() {
		if onlyMatmul && !strings.HasPrefix(c.name, "matmul") {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			g := &backend.Graph{Nodes: argNodes(c.shapes), NumArgs: len(c.shapes) + 1}
			for _, n := range c.nodes {
				n.In = append([]int(nil), n.In...)
				g.Nodes = append(g.Nodes, n)
			}
			last := len(g.Nodes) - 1
			g.Outputs = []backend.Output{{Node: last, Arg: len(c.shapes)}}
			args := randArgs(rng, c)
			args[len(c.shapes)] = make([]float32, backend.NumElems(g.Nodes[last].Shape))
			checkGraph(t, be, g, args, c.tol)
		})
	}
}

// checkGraph runs g on the backend and compares every arg afterwards with
// backendtest.Eval in float64: |got-want| <= tol*(1+|want|) (tol 0: exact).
func checkGraph(t *testing.T, be *Backend, g *backend.Graph, args [][]float32, tol float64) {
	t.Helper()
	bufs := uploadArgs(t, be, args)
	ref := make([][]float64, len(args))
	for i, a := range args {
		ref[i] = make([]float64, len(a))
		for j, v := range a {
			ref[i][j] = float64(v)
		}
	}
	p, err := be.Compile(g)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, g)
	}
	defer p.Release()
	if _, err := p.Run(bufs); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := backendtest.Eval(g, ref); err != nil {
		t.Fatal(err)
	}
	for i, b := range bufs {
		got := make([]float32, b.Len())
		if err := be.Read(b, 0, got); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for j, w := range ref[i] {
			gv := float64(got[j])
			if !(math.Abs(gv-w) <= tol*(1+math.Abs(w))) && !(math.IsNaN(w) && math.IsNaN(gv)) && gv != w {
				if bad < 5 {
					t.Errorf("arg %d [%d]: got %v, want %v (tol %g)", i, j, gv, w, tol)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Fatalf("arg %d: %d of %d elements out of tolerance\n%s", i, bad, len(got), g)
		}
	}
}
