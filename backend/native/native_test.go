//go:build ggml

package native

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/backend/backendtest/testenv"
)

// devices lists the drivers to test, leaving out those unavailable here
// (it fails the test if AG_REQUIRE_DEVICES names one of them).
func devices(t *testing.T) []string {
	var out, why []string
	for _, name := range []string{CPUName, VulkanName} {
		if a := driverAvailability(name); !a.OK {
			if testenv.Required(name) {
				t.Errorf("%s is unavailable here (%s), but %s requires it", name, a.Why, testenv.RequireEnv)
			}
			t.Logf("%s unavailable, not tested: %s", name, a.Why)
			why = append(why, name+": "+a.Why)
			continue
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		testenv.SkipDevice(t, "ggml-cpu", strings.Join(why, "; "))
	}
	return out
}

func driverAvailability(name string) backend.Availability {
	for _, d := range backend.Drivers() {
		if d.Name == name {
			return d.Availability
		}
	}
	return backend.Availability{Why: "not registered"}
}

// opened caches one backend per driver for the whole test binary: opening
// ggml-vulkan costs pipeline compiles, and lavapipe must not free (TestMain).
var opened = map[string]backend.Backend{}

func open(t testing.TB, name string) backend.Backend {
	t.Helper()
	if be, ok := opened[name]; ok {
		return be
	}
	be, err := backend.Open(name)
	if err != nil {
		t.Fatalf("Open(%s): %v", name, err)
	}
	opened[name] = be
	return be
}

func upload(t *testing.T, be backend.Backend, data []float32) backend.Buffer {
	t.Helper()
	b, err := be.Alloc(len(data))
	if err != nil {
		t.Fatalf("Alloc(%d): %v", len(data), err)
	}
	if err := be.Write(b, 0, data); err != nil {
		t.Fatalf("Write: %v", err)
	}
	t.Cleanup(func() { be.Free(b) })
	return b
}

func download(t *testing.T, be backend.Backend, b backend.Buffer) []float32 {
	t.Helper()
	out := make([]float32, b.Len())
	if err := be.Read(b, 0, out); err != nil {
		t.Fatalf("Read: %v", err)
	}
	return out
}

func randVals(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// runAndCompare runs g on be with args and compares every arg afterwards
// with backendtest.Eval within |err| <= tol*(1+|want|).
func runAndCompare(t *testing.T, be backend.Backend, g *backend.Graph, args [][]float32, tol float64) {
	t.Helper()
	bufs := make([]backend.Buffer, len(args))
	ref := make([][]float64, len(args))
	for i, a := range args {
		bufs[i] = upload(t, be, a)
		ref[i] = make([]float64, len(a))
		for j, x := range a {
			ref[i][j] = float64(x)
		}
	}
	p, err := be.Compile(g)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, g)
	}
	defer p.Release()
	if _, err := backendtest.Eval(g, ref); err != nil {
		t.Fatalf("Eval: %v", err)
	}
	info, err := p.Run(bufs)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if info.Launches != 1 {
		t.Errorf("Launches = %d, want 1 (one graph compute)", info.Launches)
	}
	for i, b := range bufs {
		got := download(t, be, b)
		for j, w := range ref[i] {
			v := float64(got[j])
			if d := math.Abs(v - w); !(d <= tol*(1+math.Abs(w))) && v != w && !(math.IsNaN(v) && math.IsNaN(w)) {
				t.Fatalf("arg %d[%d] = %g, want %g\n%s", i, j, got[j], w, g)
			}
		}
	}
}

// wantKernels fails t unless, on a GPU device, its probe (named) turned on
// (on) the kernels of build.sh's patch and the graph lowered to ops holds
// want and none of absent.
func wantKernels(t *testing.T, d *device, on bool, probe, patch, ops, want string, absent ...string) {
	t.Helper()
	if d.isCPU {
		return
	}
	if !on {
		t.Fatalf("%s kept the composition (a ggml built without patch %s? AG_GGML_LOG=info says why); lowered to %s", probe, patch, ops)
	}
	bad := !strings.Contains(ops, want)
	for _, a := range absent {
		bad = bad || strings.Contains(ops, a)
	}
	if bad {
		t.Errorf("lowered to %s, want %s and none of %v", ops, want, absent)
	}
}

func arg(a int, shape ...int) backend.Node {
	return backend.Node{Op: backend.OpArg, Arg: a, Shape: shape}
}

// AdamW whose m is also read by a later node and copied out: on Vulkan this
// takes the composed path (the fused op hides its writes to m and v from
// ggml-vulkan's ordering), which must give the same numbers.
func TestAdamWSharedState(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shape := []int{5, 7}
	g := &backend.Graph{NumArgs: 7, Nodes: []backend.Node{
		arg(0, shape...), arg(1, shape...), arg(2, shape...), arg(3, shape...), arg(4, 7),
		{Op: backend.OpAdamW, In: []int{0, 1, 2, 3, 4}, Shape: shape},
		{Op: backend.OpExp, In: []int{2}, Shape: shape}, // reads m after the update
	}, Outputs: []backend.Output{{Node: 6, Arg: 5}, {Node: 2, Arg: 6}}}
	m := randVals(r, 35)
	v := make([]float32, 35)
	for i := range v {
		v[i] = float32(r.Float64())
	}
	hp := []float32{0.01, 0.9, 0.999, 1e-8, 0.1, 1 / (1 - 0.9), 1 / (1 - 0.999)}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			runAndCompare(t, open(t, name), g, [][]float32{randVals(r, 35), randVals(r, 35), m, v, hp, make([]float32, 35), make([]float32, 35)}, 2e-5)
		})
	}
}

// Two AdamW updates that share their weights w but not their moments (as
// nn.BatchNorm's running statistics do: the weights are scratch) are each
// ggml's fused opt_step_adamw, one node an update, and give the reference's
// numbers: the second update reads the w the first wrote. Sharing a moment
// takes the composed path (29 nodes an update in the convnet's step).
func TestAdamWSharedWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	n := 6
	g := &backend.Graph{NumArgs: 8, Nodes: []backend.Node{
		arg(0, n), arg(1, n), arg(2, n), arg(3, n), arg(4, n), arg(5, n), arg(6, 7), arg(7, n),
		{Op: backend.OpAdamW, In: []int{0, 1, 2, 3, 6}, Shape: []int{n}},
		{Op: backend.OpAdamW, In: []int{0, 7, 4, 5, 6}, Shape: []int{n}},
	}}
	hp := []float32{0.01, 0.9, 0.999, 1e-8, 0.1, 1 / (1 - 0.9), 1 / (1 - 0.999)}
	pos := func() []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.Float64())
		}
		return v
	}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			if d, ok := be.(*device); ok {
				if c := loweredOps(t, d, g); !strings.Contains(c, "OPT_STEP_ADAMW=2") {
					t.Errorf("two AdamW updates sharing w: %s, want two fused OPT_STEP_ADAMW nodes", c)
				}
			}
			runAndCompare(t, be, g, [][]float32{randVals(r, n), randVals(r, n), randVals(r, n), pos(), randVals(r, n), pos(), hp, randVals(r, n)}, 2e-5)
		})
	}
}

// A read of w before and after an in-place SGD update in one graph sees the
// old and the new value respectively, also through a reshape (a view in
// ggml) taken before the update and consumed after it.
func TestInPlaceOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	shape := []int{9, 4}
	g := &backend.Graph{NumArgs: 7, Nodes: []backend.Node{
		arg(0, shape...), arg(1, shape...), arg(2, shape...), arg(3, 3),
		{Op: backend.OpMul, In: []int{0, 0}, Shape: shape},      // before: old w
		{Op: backend.OpReshape, In: []int{0}, Shape: []int{36}}, // before: old w
		{Op: backend.OpSGD, In: []int{0, 1, 2, 3}, Shape: shape},
		{Op: backend.OpNeg, In: []int{0}, Shape: shape}, // after: new w
		{Op: backend.OpExp, In: []int{5}, Shape: []int{36}},
	}, Outputs: []backend.Output{{Node: 4, Arg: 4}, {Node: 7, Arg: 5}, {Node: 8, Arg: 6}}}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			runAndCompare(t, open(t, name), g, [][]float32{randVals(r, 36), randVals(r, 36), randVals(r, 36),
				{0.1, 0.9, 0.01}, make([]float32, 36), make([]float32, 36), make([]float32, 36)}, 1e-5)
		})
	}
}

// One program runs on different buffers: Run re-points the graph's leaves
// (and the views over them) without re-planning.
func TestRunRebindsArgs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		arg(0, 6, 5), arg(1, 5, 3),
		{Op: backend.OpReshape, In: []int{0}, Shape: []int{30}},
		{Op: backend.OpReshape, In: []int{2}, Shape: []int{6, 5}},
		{Op: backend.OpMatMul, In: []int{3, 1}, Shape: []int{6, 3}},
	}, Outputs: []backend.Output{{Node: 4, Arg: 2}}}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			p, err := be.Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release()
			for k := 0; k < 3; k++ {
				a, b := randVals(r, 30), randVals(r, 15)
				args := []backend.Buffer{upload(t, be, a), upload(t, be, b), upload(t, be, make([]float32, 18))}
				if _, err := p.Run(args); err != nil {
					t.Fatal(err)
				}
				got := download(t, be, args[2])
				for i := 0; i < 6; i++ {
					for j := 0; j < 3; j++ {
						var want float64
						for q := 0; q < 5; q++ {
							want += float64(a[i*5+q]) * float64(b[q*3+j])
						}
						if d := math.Abs(float64(got[i*3+j]) - want); d > 1e-5*(1+math.Abs(want)) {
							t.Fatalf("run %d: out[%d][%d] = %g, want %g", k, i, j, got[i*3+j], want)
						}
					}
				}
			}
		})
	}
}

// Errors a caller can make are errors, never a ggml abort.
func TestErrors(t *testing.T) {
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			bad := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{arg(0, 2, 3), arg(1, 4, 5),
				{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{2, 5}}}}
			if _, err := be.Compile(bad); err == nil {
				t.Error("Compile accepted a matmul of [2 3] x [4 5]")
			}
			g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{arg(0, 2, 3), {Op: backend.OpExp, In: []int{0}, Shape: []int{2, 3}}},
				Outputs: []backend.Output{{Node: 1, Arg: 1}}}
			p, err := be.Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release()
			small := upload(t, be, make([]float32, 5))
			ok := upload(t, be, make([]float32, 6))
			if _, err := p.Run([]backend.Buffer{small, ok}); err == nil || !strings.Contains(err.Error(), "holds 5") {
				t.Errorf("Run with a 5-element arg for a [2 3] node: %v", err)
			}
			if _, err := p.Run([]backend.Buffer{ok}); err == nil {
				t.Error("Run with 1 arg of 2 succeeded")
			}
			if err := be.Write(ok, 4, []float32{1, 2, 3}); err == nil {
				t.Error("Write past the end succeeded")
			}
			if err := be.Read(ok, -1, make([]float32, 1)); err == nil {
				t.Error("Read at -1 succeeded")
			}
			freed, _ := be.Alloc(3)
			be.Free(freed)
			if err := be.Write(freed, 0, []float32{1}); err == nil {
				t.Error("Write to a freed buffer succeeded")
			}
			if f, tot, err := be.Memory(); err != nil || tot == 0 || f > tot {
				t.Errorf("Memory() = %d, %d, %v", f, tot, err)
			}
			// the documented gaps only: ggml-vulkan converts f32 to bf16
			// but not back (core.RoundBF16 and SetActivationStorage say so)
			want := map[string][]backend.Op{VulkanName: {backend.OpRoundBF16, backend.OpUnpackBF16}}[name]
			if u := be.Caps().Unsupported; !slices.Equal(u, want) {
				t.Errorf("%s lists unsupported ops %v, want %v", name, u, want)
			}
		})
	}
}

// ggml-vulkan's availability follows GGML_VK_VISIBLE_DEVICES on lavapipe.
func TestVulkanAvailability(t *testing.T) {
	devs, err := probeVulkan()
	if err != nil || len(devs) == 0 {
		a := driverAvailability(VulkanName)
		if a.OK {
			t.Fatalf("no Vulkan device (%v) but ggml-vulkan says %+v", err, a)
		}
		testenv.SkipDevice(t, VulkanName, a.Why)
	}
	if !softwareVulkan {
		a := driverAvailability(VulkanName)
		if !a.OK || !a.Auto {
			t.Errorf("GPU present (%v) but availability %+v", devs, a)
		}
		return
	}
	a := driverAvailability(VulkanName)
	if !a.OK || a.Auto || !strings.Contains(a.Why, "CPU-type") {
		t.Errorf("lavapipe with %s set: availability %+v, want OK, not Auto, naming the device type", visibleEnv, a)
	}
	t.Setenv(visibleEnv, "") // restored after the test
	os.Unsetenv(visibleEnv)
	a = driverAvailability(VulkanName)
	if a.OK || !strings.Contains(a.Why, visibleEnv+"=0") {
		t.Errorf("lavapipe without %s: availability %+v, want not OK with the hint", visibleEnv, a)
	}
	if c := driverAvailability(CPUName); !c.OK || !c.Auto {
		t.Errorf("ggml-cpu availability %+v", c)
	}
}

// Every composite with a native lowering (composite_*.go) is native on both devices:
// a probe that fails (a lowering bug, a budget too small) would otherwise
// drop it silently to its decomposition, and the conformance suite, which
// checks whatever runs, would not notice.
func TestNativeComposites(t *testing.T) {
	want := nativeOps()
	files, _ := filepath.Glob("composite_*.go")
	if len(want) < len(files) {
		t.Fatalf("nativeOps() = %v: fewer lowerings than the %d files composite_*.go register", want, len(files))
	}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			caps := open(t, name).Caps()
			for _, op := range want {
				if !caps.Native(op) {
					t.Errorf("%s: %v is not in Caps.Composites %v (its probe failed?)", name, op, caps.Composites)
				}
			}
		})
	}
}

// A permute that moves an axis of 1 last (ggml's dim 0) is contiguous to
// ggml_is_contiguous but has a stride of its own there, which ggml-cpu's
// unary kernels refuse with an abort: such a permute is still copied (a
// permute whose strides are a new tensor's is not: denseStrides).
func TestPermuteOfAxisOneThenUnary(t *testing.T) {
	for _, name := range devices(t) {
		be := open(t, name)
		t.Run(name, func(t *testing.T) {
			g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
				arg(0, 3, 1, 4),
				{Op: backend.OpPermute, In: []int{0}, Shape: []int{3, 4, 1}, Perm: []int{0, 2, 1}},
				{Op: backend.OpTanh, In: []int{1}, Shape: []int{3, 4, 1}},
			}, Outputs: []backend.Output{{Node: 2, Arg: 1}}}
			rng := rand.New(rand.NewPCG(4, 4))
			runAndCompare(t, be, g, [][]float32{randVals(rng, 12), make([]float32, 12)}, 1e-6)
		})
	}
}
