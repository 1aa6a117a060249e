package core

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ag-go/ag/backend"
)

func TestRoundHalfOps(t *testing.T) {
	dev := open(t)
	xs := []float32{1.00048828125, 65520, -70000, 3e-8, 0.1, float32(math.NaN())}
	x := dev.Param(xs, len(xs))
	y := Add(RoundF16(x), RoundBF16(x))
	got, err := y.Keep().Data()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range xs {
		w := backend.RoundF16(v) + backend.RoundBF16(v)
		if got[i] != w && !(math.IsNaN(float64(w)) && math.IsNaN(float64(got[i]))) {
			t.Errorf("RoundF16+RoundBF16(%g) = %g, want %g", v, got[i], w)
		}
	}
	if err := Sum(y).Backward(); err != nil {
		t.Fatal(err)
	}
	g, err := x.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range g {
		if v != 2 {
			t.Errorf("gradient %d = %g, want 2 (straight through, twice)", i, v)
		}
	}
}

// Under PrecisionF16 a product is the f32 product of the f16-rounded
// operands, forward and backward (autocast's semantics).
func TestMatMulPrecision(t *testing.T) {
	dev := open(t)
	r := rand.New(rand.NewPCG(5, 5))
	vals := func(n int) []float32 { return normals(r, n) }
	av, bv := vals(3*5), vals(5*4)
	round := func(v []float32, f func(float32) float32) []float32 {
		out := make([]float32, len(v))
		for i := range v {
			out[i] = f(v[i])
		}
		return out
	}
	for _, c := range []struct {
		p Precision
		f func(float32) float32
	}{{PrecisionF16, backend.RoundF16}, {PrecisionBF16, backend.RoundBF16}, {PrecisionF32, func(x float32) float32 { return x }}} {
		prev, err := dev.SetMatMulPrecision(c.p)
		if err != nil {
			t.Skipf("%s: %v", dev.Name(), err)
		}
		a, b := dev.Param(av, 3, 5), dev.Param(bv, 5, 4)
		y := MatMul(a, b).Keep()
		if err := Sum(Mul(y, y)).Backward(); err != nil {
			t.Fatal(err)
		}
		if _, err := dev.SetMatMulPrecision(prev); err != nil {
			t.Fatal(err)
		}
		got, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := hostMatMul(round(av, c.f), []int{3, 5}, round(bv, c.f), []int{5, 4}, false, false)
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-5*(1+math.Abs(want[i])) {
				t.Fatalf("%v: y[%d] = %g, want %g (rounded operands)", c.p, i, got[i], want[i])
			}
		}
		// dL/da = 2y · round(b)ᵀ with the gradient 2y rounded too
		ga, err := a.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		g2 := make([]float32, len(got))
		for i, v := range got {
			g2[i] = c.f(2 * v)
		}
		wantGA, _ := hostMatMul(g2, []int{3, 4}, round(bv, c.f), []int{5, 4}, false, true)
		for i := range wantGA {
			if math.Abs(float64(ga[i])-wantGA[i]) > 1e-5*(1+math.Abs(wantGA[i])) {
				t.Fatalf("%v: da[%d] = %g, want %g", c.p, i, ga[i], wantGA[i])
			}
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("SetMatMulPrecision(7) did not panic")
			}
		}()
		dev.SetMatMulPrecision(7)
	}()
}

// A pending value read by several products is rounded once: x by its two
// products, and the gradient of y by the four products of the backward
// (each round is a copy, a kernel of its own). A realized value is rounded
// anew: it may be a parameter an update changed since.
func TestRoundOncePerValue(t *testing.T) {
	dev := open(t)
	prev, err := dev.SetMatMulPrecision(PrecisionF16)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.SetMatMulPrecision(prev)
	rounds := func() int {
		dev.lock()
		defer dev.mu.Unlock()
		n := 0
		for _, p := range dev.pending {
			if p.op == backend.OpRoundF16 {
				n++
			}
		}
		return n
	}
	r := rand.New(rand.NewPCG(7, 7))
	vals := func(n int) []float32 { return normals(r, n) }
	in, w1, w2 := dev.Param(vals(3*5), 3, 5), dev.Param(vals(5*4), 5, 4), dev.Param(vals(5*4), 5, 4)
	x := Tanh(in).Keep() // read again after the run
	y := Add(MatMul(x, w1), MatMul(x, w2))
	if n := rounds(); n != 3 {
		t.Errorf("forward: %d round_f16 nodes, want 3 (x once, w1, w2)", n)
	}
	if err := Sum(Mul(y, y)).Backward(); err != nil {
		t.Fatal(err)
	}
	if n := rounds(); n != 4 {
		t.Errorf("forward and backward: %d round_f16 nodes, want 4 (x, w1, w2, and the gradient of y once)", n)
	}
	got, err := in.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if math.IsNaN(float64(g)) || g == 0 {
			t.Fatalf("in.Grad()[%d] = %v", i, g)
		}
	}
	_ = MatMul(x, w1) // x ran: its round ran too, so a new one
	if n := rounds(); n != 2 {
		t.Errorf("after the run: %d round_f16 nodes, want 2 (x and w1 anew)", n)
	}
}

// noBF16CPU is the cpu backend with ggml-vulkan's bf16 gap: round_bf16 and
// unpack_bf16 are in its Caps.Unsupported, and graphs holding them do not
// compile.
type noBF16CPU struct{ backend.Backend }

var noBF16 = []backend.Op{backend.OpRoundBF16, backend.OpUnpackBF16}

func (b noBF16CPU) Caps() backend.Caps {
	c := b.Backend.Caps()
	c.Name, c.Unsupported = "cpu-nobf16", append(slices.Clone(c.Unsupported), noBF16...)
	return c
}

func (b noBF16CPU) Compile(g *backend.Graph) (backend.Program, error) {
	for _, n := range g.Nodes {
		if slices.Contains(noBF16, n.Op) {
			return nil, fmt.Errorf("cpu-nobf16 cannot run %v (Caps.Unsupported)", n.Op)
		}
	}
	return b.Backend.Compile(g)
}

type noBF16Driver struct{}

func (noBF16Driver) Open() (backend.Backend, error) {
	be, err := backend.Open("cpu")
	if err != nil {
		return nil, err
	}
	return noBF16CPU{be}, nil
}
func (noBF16Driver) Available() backend.Availability { return backend.Availability{OK: true} }

func init() { backend.Register("cpu-nobf16", -1, noBF16Driver{}) }

// A device that cannot round to bf16 refuses SetMatMulPrecision(bf16) with
// ErrUnsupported and keeps its precision, as NewHalfTable refuses bf16
// storage: it accepted it, and then every run failed with an error that
// did not wrap ErrUnsupported (ggml-vulkan). f16 is still taken. The cpu
// backend, which rounds to both, takes both.
func TestMatMulPrecisionUnsupported(t *testing.T) {
	dev, err := Open("cpu-nobf16")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	prev, err := dev.SetMatMulPrecision(PrecisionBF16)
	want := "core.Device.SetMatMulPrecision(bf16): cpu-nobf16 cannot round matmul operands to bf16 (round_bf16 is in its Caps.Unsupported)"
	if !errors.Is(err, ErrUnsupported) || err.Error() != want || prev != PrecisionF32 {
		t.Fatalf("SetMatMulPrecision(bf16) on a device without round_bf16: %v, %v; want f32 and %q", prev, err, want)
	}
	a := dev.Tensor([]float32{1 + 1.0/4096}, 1, 1) // 1 in f16 and bf16
	one := dev.Tensor([]float32{1}, 1, 1)
	if v, err := MatMul(a, one).Item(); err != nil || v != 1+1.0/4096 {
		t.Errorf("a product after the refusal: %v, %v; want f32's 1+2^-12", v, err)
	}
	if _, err := dev.SetMatMulPrecision(PrecisionF16); err != nil {
		t.Fatalf("SetMatMulPrecision(f16) on the same device: %v", err)
	}
	if v, err := MatMul(a, one).Item(); err != nil || v != 1 {
		t.Errorf("an f16 product: %v, %v; want 1", v, err)
	}
	if p, err := dev.SetMatMulPrecision(PrecisionF32); err != nil || p != PrecisionF16 {
		t.Errorf("back to f32: previous %v, %v; want f16", p, err)
	}

	cpu, err := Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	for _, p := range []Precision{PrecisionF16, PrecisionBF16, PrecisionF32} {
		if _, err := cpu.SetMatMulPrecision(p); err != nil {
			t.Errorf("cpu: SetMatMulPrecision(%v): %v", p, err)
		}
	}
}
