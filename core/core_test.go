package core

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

func open(t *testing.T) *Device {
	t.Helper()
	dev, err := Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// normals draws n standard normal values from r, as f32.
func normals(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func near(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol*(1+math.Abs(float64(b[i]))) {
			return false
		}
	}
	return true
}

func TestOpsValues(t *testing.T) {
	dev := open(t)
	a := dev.Tensor([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := dev.Tensor([]float32{10, 20, 30}, 3)
	cases := []struct {
		name string
		y    *Tensor
		want []float32
	}{
		{"add-broadcast", Add(a, b), []float32{11, 22, 33, 14, 25, 36}},
		{"matmul", MatMul(a, Transpose(a)), []float32{14, 32, 32, 77}},
		{"matmulT", MatMulT(a, a, false, true), []float32{14, 32, 32, 77}},
		{"sum-axis0", SumAxis(a, 0, false), []float32{5, 7, 9}},
		{"mean", Mean(a), []float32{3.5}},
		{"softmax", Softmax(dev.Tensor([]float32{0, float32(math.Log(3))}, 1, 2)), []float32{0.25, 0.75}},
		{"slice", SliceRows(a, 1, 1), []float32{4, 5, 6}},
		{"concat", ConcatRows(a, SliceRows(a, 0, 1)), []float32{1, 2, 3, 4, 5, 6, 1, 2, 3}},
		{"gather-clamped", Gather(a, dev.Tensor([]float32{1, 7, -3}, 3)), []float32{4, 5, 6, 4, 5, 6, 1, 2, 3}},
		{"clamp", Clamp(a, 2, 4), []float32{2, 2, 3, 4, 4, 4}},
		{"full", dev.Full(2.5, 2), []float32{2.5, 2.5}},
		{"onehot", OneHot(dev.Tensor([]float32{2, 0}, 2), 3), []float32{0, 0, 1, 1, 0, 0}},
	}
	for _, c := range cases {
		got, err := c.y.Data()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !near(got, c.want, 1e-6) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A training step's values that nobody asked for are planned away; reading
// one is a clear error, and Keep or Sync keep it.
func TestKeepSemantics(t *testing.T) {
	dev := open(t)
	x := dev.Tensor([]float32{1, -2, 3}, 3)
	h := ReLU(x)
	kept := Scale(x, 2).Keep()
	y := Sum(h)
	if v, err := y.Item(); err != nil || v != 4 {
		t.Fatalf("Item = %v, %v; want 4", v, err)
	}
	if _, err := h.Data(); !errors.Is(err, ErrNotKept) {
		t.Fatalf("reading a spent value: err = %v, want ErrNotKept", err)
	}
	if v, err := kept.Data(); err != nil || !slices.Equal(v, []float32{2, -4, 6}) {
		t.Fatalf("kept value = %v, %v", v, err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "not kept") {
				t.Errorf("using a spent value as an input: panic %v", r)
			}
		}()
		ReLU(h)
	}()
	// Item before Backward: the forward's values stay for the backward.
	w := dev.Param([]float32{1, 2, 3}, 3)
	loss := Sum(Mul(Exp(w), x))
	if _, err := loss.Item(); err != nil {
		t.Fatal(err)
	}
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	g, err := w.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{float32(math.E), float32(-2 * math.Exp(2)), float32(3 * math.Exp(3))}
	if !near(g, want, 1e-5) {
		t.Errorf("grad after Item-then-Backward = %v, want %v", g, want)
	}
	if err := loss.Backward(); err == nil {
		t.Error("a second Backward through the same graph succeeded")
	}
}

// A repeated step reuses its compiled program.
func TestProgramCache(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{0.5, -0.5, 1, 2}, 2, 2)
	for i := range 5 {
		x := dev.Tensor([]float32{float32(i), 1, 2, 3}, 2, 2)
		loss := Mean(Tanh(MatMul(x, w)))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		if _, err := loss.Item(); err != nil {
			t.Fatal(err)
		}
		w.ZeroGrad()
	}
	st := dev.Stats()
	if st.Compiles != 1 || st.CacheHits != 4 || st.Runs != 5 {
		t.Errorf("5 identical steps: %+v, want 1 compile, 4 cache hits", st)
	}
}

// Close moves values to the host; the next use opens the backend again and
// uploads them: nothing is lost.
func TestCloseRescues(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{1, 2, 3, 4}, 4)
	z, err := dev.Zeros(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.WriteAt(1, []float32{7, 8}); err != nil {
		t.Fatal(err)
	}
	y := Add(w, z).Keep()
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	gen := dev.Generation()
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := Add(y, w).Data()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v, []float32{2, 11, 14, 8}) {
		t.Errorf("after Close: %v", v)
	}
	if dev.Generation() != gen+1 {
		t.Errorf("generation %d after reopen, want %d", dev.Generation(), gen+1)
	}
	if r, err := z.ReadAt(1, 2); err != nil || !slices.Equal(r, []float32{7, 8}) {
		t.Errorf("ReadAt after reopen = %v, %v", r, err)
	}
}

// On cpu (a backend.HostTaker) Close takes the buffers' memory instead of
// copying it: a value of 64 MB costs no new 64 MB, and reads back the same.
func TestCloseTakesHostBuffers(t *testing.T) {
	dev := open(t)
	if _, ok := dev.be.(backend.HostTaker); !ok {
		t.Fatalf("the cpu backend is no backend.HostTaker")
	}
	const n = 16 << 20
	z, err := dev.Zeros(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.WriteAt(n-2, []float32{7, 8}); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > 4*n/8 {
		t.Errorf("Close of a value of %d MB allocated %d MB: copied, not taken", 4*n>>20, a>>20)
	}
	if r, err := z.ReadAt(n-3, 3); err != nil || !slices.Equal(r, []float32{0, 7, 8}) {
		t.Errorf("ReadAt after Close = %v, %v", r, err)
	}
}

// Writes are ordered after pending work that reads the value.
func TestWriteOrdering(t *testing.T) {
	dev := open(t)
	z, _ := dev.Zeros(2)
	z.WriteAt(0, []float32{1, 1})
	before := Scale(z, 1)
	if err := z.WriteAt(0, []float32{5, 5}); err != nil {
		t.Fatal(err)
	}
	after := Scale(z, 1)
	b, _ := before.Data()
	a, _ := after.Data()
	if !slices.Equal(b, []float32{1, 1}) || !slices.Equal(a, []float32{5, 5}) {
		t.Errorf("before %v after %v", b, a)
	}
}

func TestEager(t *testing.T) {
	dev := open(t)
	dev.SetEager(true)
	x := dev.Tensor([]float32{1, 2}, 2)
	h := Scale(x, 3)
	if h.state() != stateRealized {
		t.Fatalf("eager op left %v", h)
	}
	Sum(h).Item()
	if v, err := h.Data(); err != nil || !slices.Equal(v, []float32{3, 6}) {
		t.Errorf("eager value %v, %v", v, err)
	}
}

func TestShapePanics(t *testing.T) {
	dev := open(t)
	a := dev.Tensor(make([]float32, 6), 2, 3)
	for name, f := range map[string]func(){
		"matmul":  func() { MatMul(a, a) },
		"add":     func() { Add(a, dev.Tensor(make([]float32, 4), 4)) },
		"reshape": func() { Reshape(a, 4, 2) },
		"slice":   func() { SliceRows(a, 1, 2) },
		"tensor":  func() { dev.Tensor(make([]float32, 5), 2, 3) },
		"pow-inf": func() { Pow(a, float32(math.Inf(1))) },
		"pow-nan": func() { Pow(a, float32(math.NaN())) },
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), "core.") {
					t.Errorf("%s: panic %v, want a message naming the op", name, r)
				}
			}()
			f()
		}()
	}
}

// Releasing a pending value runs the pending work first; the rest of the
// graph is unaffected.
func TestReleasePending(t *testing.T) {
	dev := open(t)
	x := dev.Tensor([]float32{1, 2}, 2)
	a := Scale(x, 2)
	b := Add(a, x)
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Data(); !errors.Is(err, ErrReleased) {
		t.Errorf("Data of a released tensor: %v, want ErrReleased", err)
	}
	if v, err := b.Data(); err != nil || !slices.Equal(v, []float32{3, 6}) {
		t.Errorf("b = %v, %v", v, err)
	}
}
