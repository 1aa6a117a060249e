//go:build ggml

package native

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// inside with an infinite bound takes the 3-node form (step of a product
// with an infinity): it must stay exact on the bounds, at -0, at the
// infinities and for NaN, on both devices.
func TestInsideInfiniteBound(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	tiny := math.Float32frombits(1) // smallest denormal
	xs := []float32{-2, -1, -0.5, 0, float32(math.Copysign(0, -1)), tiny, 1e-30, 0.5, 1, 2, 3.4e38, inf, -inf, nan}
	cases := []struct {
		name string
		a, b float32
	}{
		{"relu", 0, inf},
		{"above -1", -1, inf},
		{"below 1", -inf, 1},
		{"everywhere", -inf, inf},
		{"empty", 1, 1},
	}
	for _, name := range devices(t) {
		be := open(t, name)
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				n := len(xs)
				g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{arg(0, n),
					{Op: backend.OpInside, In: []int{0}, Shape: []int{n}, A: c.a, B: c.b}},
					Outputs: []backend.Output{{Node: 1, Arg: 1}}}
				p, err := be.Compile(g)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Release()
				in, out := upload(t, be, xs), upload(t, be, make([]float32, n))
				if _, err := p.Run([]backend.Buffer{in, out}); err != nil {
					t.Fatal(err)
				}
				got := download(t, be, out)
				for i, x := range xs {
					want := float32(0)
					if c.a < x && x < c.b {
						want = 1
					}
					// A device that flushes denormals sees tiny as 0.
					if x == tiny && got[i] == 0 && c.a == 0 {
						continue
					}
					if got[i] != want {
						t.Errorf("inside(%g; %g, %g) = %g, want %g", x, c.a, c.b, got[i], want)
					}
				}
			})
		}
	}
}

// Sums along long rows run in two stages on a GPU: the totals must match a
// float64 reference for the whole-tensor sum of a loss and for a sum along
// a long inner axis.
func TestLongSums(t *testing.T) {
	cases := []struct {
		name  string
		shape []int
		axis  int
		out   []int
	}{
		{"all of 65536", []int{65536}, 0, []int{1}},
		{"rows of 16384", []int{3, 16384}, 1, []int{3, 1}},
		{"long outer axis", []int{12288, 2}, 0, []int{1, 2}},
		{"prime length", []int{8191}, 0, []int{1}},
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, name := range devices(t) {
		be := open(t, name)
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{arg(0, c.shape...),
					{Op: backend.OpSum, In: []int{0}, Shape: c.out, Axis: c.axis}},
					Outputs: []backend.Output{{Node: 1, Arg: 1}}}
				size := backend.NumElems(c.shape)
				runAndCompare(t, be, g, [][]float32{randVals(r, size), make([]float32, backend.NumElems(c.out))}, 2e-5)
			})
		}
	}
}

// ggml-vulkan's device line says what matrix cores the device has, and the
// device keeps it (lavapipe: none); an f16 matmul is left whole only on
// matrix cores (mmSplitRows), where ggml's cooperative-matrix shaders run it.
func TestMatrixCores(t *testing.T) {
	for _, name := range devices(t) {
		d := open(t, name).(*device)
		if d.isCPU {
			if d.matrixCores != "" || d.coopmat() {
				t.Errorf("%s: matrixCores %q, coopmat %t: want none on the CPU", name, d.matrixCores, d.coopmat())
			}
			continue
		}
		if d.matrixCores == "" {
			t.Fatalf("%s: matrixCores is empty: ggml-vulkan's device line (\"... | matrix cores: ...\") was not read", name)
		}
		t.Logf("%s (%s): matrix cores %q", name, d.desc, d.matrixCores)
		const M, N = 768, 768 // a split shape (rows 32) without matrix cores
		if r := d.mmSplitRows(M, N, false); r == 0 {
			t.Errorf("%s: f32 %dx%d matmul not split (rows %d)", name, M, N, r)
		}
		if r, r32 := d.mmSplitRows(M, N, true), d.mmSplitRows(M, N, false); d.coopmat() && r != 0 || !d.coopmat() && r != r32 {
			t.Errorf("%s (matrix cores %q): f16 split rows %d, f32 %d", name, d.matrixCores, r, r32)
		}
		saved := d.matrixCores
		d.matrixCores = "KHR_coopmat"
		if r := d.mmSplitRows(M, N, true); r != 0 {
			t.Errorf("%s as if with matrix cores: f16 %dx%d matmul split into rows of %d", name, M, N, r)
		}
		if r := d.mmSplitRows(M, N, false); r == 0 {
			t.Errorf("%s as if with matrix cores: f32 %dx%d matmul left whole", name, M, N)
		}
		d.matrixCores = saved
	}
}

// A CPU-type Vulkan device (lavapipe) keeps its memory whatever the tests
// set (see device.keeps); a GPU frees it.
func TestSoftwareVulkanKeepsMemory(t *testing.T) {
	saved := keepMemory
	keepMemory = false
	defer func() { keepMemory = saved }()
	for _, name := range devices(t) {
		d := open(t, name).(*device)
		switch {
		case d.isCPU:
			if d.software || d.keeps() {
				t.Errorf("%s: software %t, keeps %t: want neither on ggml-cpu", name, d.software, d.keeps())
			}
		case d.software != selectedIsCPU():
			t.Errorf("%s (%s): software %t, but the selected device's type says %t", name, d.desc, d.software, selectedIsCPU())
		case d.keeps() != d.software:
			t.Errorf("%s (%s): keeps %t with software %t", name, d.desc, d.keeps(), d.software)
		default:
			t.Logf("%s (%s): software %t, keeps its memory %t", name, d.desc, d.software, d.keeps())
		}
	}
}
