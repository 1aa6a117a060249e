package core

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/ag-go/ag/backend"
)

// Regression tests of issue 10 ("Trust"): each names the item it guards.

// mustPanic runs f and returns its panic message, failing when f returns.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

func wantIn(t *testing.T, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("%q lacks %q", got, p)
		}
	}
}

// Item 2: a failed run is reported once and drops only its own work;
// parameters, gradients from before and later training are untouched.
func TestFailedRunDropsItsWork(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{1, 2}, 2)
	loss := Sum(Mul(w, w))
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	g0, err := w.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	// A step whose run fails: its Backward replaced w's gradient pending.
	huge := dev.Full(1, 1e6, 1e6)
	bad := Add(Sum(Mul(w, w)), Sum(huge))
	if err := bad.Backward(); err != nil {
		t.Fatal(err)
	}
	_, err = bad.Item()
	if err == nil {
		t.Fatal("a 4 TB intermediate ran")
	}
	wantIn(t, err.Error(), "bytes")
	// Reported once: nothing is pending any more.
	if err := dev.Sync(); err != nil {
		t.Fatalf("the next sync repeats the failure: %v", err)
	}
	if n := len(dev.pending); n != 0 {
		t.Fatalf("%d nodes still pending after the failure", n)
	}
	// The dropped values say why; the gradient from before is back.
	if _, err := huge.Data(); !errors.Is(err, ErrRunFailed) {
		t.Fatalf("reading a dropped value: %v, want ErrRunFailed", err)
	}
	g, err := w.Grad().Data()
	if err != nil || !near(g, g0, 0) {
		t.Fatalf("gradient after the failed step %v (%v), want the one before %v", g, err, g0)
	}
	// Training goes on.
	for step := 0; step < 3; step++ {
		w.ZeroGrad()
		l := Sum(Mul(w, w))
		if err := l.Backward(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Item(); err != nil {
			t.Fatalf("step %d after the failure: %v", step, err)
		}
	}
	v, err := w.Data()
	if err != nil || !near(v, []float32{1, 2}, 0) {
		t.Fatalf("parameter %v (%v)", v, err)
	}
	if st := dev.Stats(); st.Failures != 1 {
		t.Fatalf("Stats.Failures = %d, want 1", st.Failures)
	}
	// Using a dropped value is an error of the sync, not a panic.
	if _, err := Scale(huge, 2).Data(); !errors.Is(err, ErrRunFailed) {
		t.Fatalf("an op on a dropped value: %v, want ErrRunFailed", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("Close after failures: %v", err)
	}
}

// Item 4: a program too large for the host fails before allocating.
func TestPeakMemoryCheckedBeforeAllocating(t *testing.T) {
	dev := open(t)
	_, err := Sum(dev.Full(1, 1e6, 1e6)).Data()
	if err == nil {
		t.Fatal("a 4 TB program ran")
	}
	wantIn(t, err.Error(), "4000000000000 bytes", "free")
	if _, err := Sum(dev.Full(1, 10, 10)).Data(); err != nil {
		t.Fatal(err)
	}
}

// Item 5: shapes, offsets and ranges cannot overflow.
func TestShapeAndRangeOverflow(t *testing.T) {
	dev := open(t)
	wantIn(t, mustPanic(t, func() { dev.Tensor([]float32{}, 1<<32, 1<<32) }), "core.Tensor", "[4294967296 4294967296]", "elements")
	wantIn(t, mustPanic(t, func() { dev.Full(0, 1<<40, 1<<40, 1<<40) }), "core.Full")
	x := dev.Tensor([]float32{1, 2, 3, 4}, 4, 1)
	wantIn(t, mustPanic(t, func() { SliceRows(x, 2, math.MaxInt) }), "core.SliceRows")
	wantIn(t, mustPanic(t, func() { SliceRows(x, math.MaxInt, 2) }), "core.SliceRows")
	wantIn(t, mustPanic(t, func() { Reshape(x, 1<<62, 1<<62) }), "core.Reshape")
	wantIn(t, mustPanic(t, func() { Reshape(x, -1, 1<<62) }), "core.Reshape")
	// one-hot columns and labels past 2^24 are not whole f32 numbers: the
	// sync fails, naming the count, as for other sizes no device takes.
	// Each is built just before its sync: pending nodes compile together, so
	// building both first let the first synced fail on the other's node
	// (they were in a map, whose order is random: the test was flaky).
	lab := dev.Tensor([]float32{0, 1}, 2)
	if err := dev.Sync(lab); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		y    func() *Tensor
	}{
		{"one_hot", func() *Tensor { return Sum(OneHot(lab, backend.MaxClasses+1)) }},
		{"cross_entropy", func() *Tensor { return CrossEntropy(dev.Full(0, 2, backend.MaxClasses+1), lab) }},
	} {
		name, y := c.name, c.y()
		if _, err := y.Data(); err == nil {
			t.Errorf("%s of %d classes: no error", name, backend.MaxClasses+1)
		} else {
			wantIn(t, err.Error(), "core: Data", name, "16777217 classes")
		}
	}
	for _, held := range []bool{true, false} {
		y := x
		if !held {
			y = Scale(x, 1)
			if err := dev.Sync(y); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := y.ReadAt(math.MaxInt, 2); err == nil {
			t.Errorf("ReadAt(MaxInt, 2) (host %t): no error", held)
		}
		if _, err := y.ReadAt(2, math.MaxInt); err == nil {
			t.Errorf("ReadAt(2, MaxInt) (host %t): no error", held)
		}
	}
	p := dev.Param([]float32{1, 2, 3}, 3)
	if err := p.WriteAt(math.MaxInt, []float32{5, 5}); err == nil {
		t.Error("WriteAt(MaxInt) accepted")
	}
	if v, err := p.Data(); err != nil || !near(v, []float32{1, 2, 3}, 0) {
		t.Errorf("after a refused WriteAt: %v (%v)", v, err)
	}
}

// Item 6: the program cache is bounded by count and by memory.
func TestProgramCacheBounded(t *testing.T) {
	dev := open(t)
	dev.SetProgramCache(8, 0)
	for n := 1; n <= 40; n++ {
		x := dev.Full(1, n, 3)
		if _, err := Sum(ReLU(x)).Item(); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(dev.progs.m); got != 8 {
		t.Fatalf("%d programs cached, want 8", got)
	}
	if st := dev.Stats(); st.Evictions != 32 || st.Compiles != 40 {
		t.Fatalf("evictions %d compiles %d, want 32 and 40", st.Evictions, st.Compiles)
	}
	// By memory: programs whose intermediates together exceed the bound.
	dev.SetProgramCache(100, 3<<20)
	for n := 1; n <= 6; n++ {
		x := dev.Full(1, 1<<18+n, 2) // ~2 MB of intermediates each
		if _, err := Sum(Exp(ReLU(x))).Item(); err != nil {
			t.Fatal(err)
		}
	}
	if dev.progs.bytes > 3<<20 && len(dev.progs.m) > 1 {
		t.Fatalf("%d programs hold %d bytes, over the 3 MiB bound", len(dev.progs.m), dev.progs.bytes)
	}
	// A capture keeps replaying a program the cache evicted.
	c := NewCapture(dev, func(in []*Tensor) []*Tensor { return []*Tensor{Scale(in[0], 2)} })
	if _, err := c.Call(In([]float32{1, 2}, 2)); err != nil {
		t.Fatal(err)
	}
	dev.SetProgramCache(1, 0)
	for n := 1; n <= 3; n++ {
		if _, err := Sum(dev.Full(1, n, 5)).Item(); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.Call(In([]float32{3, 4}, 2))
	if err != nil || !near(out[0], []float32{6, 8}, 0) || c.Records() != 1 {
		t.Fatalf("replay after eviction: %v %v, %d recordings", out, err, c.Records())
	}
}

// Item 11: a label outside the classes fails the sync and names the label.
func TestOneHotLabelOutOfRange(t *testing.T) {
	dev := open(t)
	for _, c := range []struct {
		labels []float32
		want   string
	}{
		{[]float32{5, 1}, "label 5 at index 0"},
		{[]float32{1, -1}, "label -1 at index 1"},
		{[]float32{1.5, 0}, "label 1.5 at index 0"},
		{[]float32{float32(math.NaN()), 0}, "label NaN at index 0"},
	} {
		_, err := OneHot(dev.Tensor(c.labels, 2), 3).Data()
		if err == nil {
			t.Errorf("labels %v: no error", c.labels)
			continue
		}
		wantIn(t, err.Error(), c.want, "3 classes")
	}
	v, err := OneHot(dev.Tensor([]float32{2, 0}, 2), 3).Data()
	if err != nil || !near(v, []float32{0, 0, 1, 1, 0, 0}, 0) {
		t.Fatalf("valid labels: %v (%v)", v, err)
	}
}

// Item 12: messages name the op, the input and the device.
func TestMessages(t *testing.T) {
	dev := open(t)
	x := dev.Tensor([]float32{1, 2}, 2)
	wantIn(t, mustPanic(t, func() { Add(x, nil) }), "core.Add: input 1 is nil")
	wantIn(t, mustPanic(t, func() { MatMul(nil, x) }), "core.MatMul: input 0 is nil")
	wantIn(t, mustPanic(t, func() { ReLU(nil) }), "core.ReLU: input 0 is nil")
	wantIn(t, mustPanic(t, func() { Expand(x, 1, 1, 1, 1, 1, 2, 2) }), "core.Expand", "7 dimensions")
	other := open(t)
	msg := mustPanic(t, func() { Add(x, other.Tensor([]float32{1, 2}, 2)) })
	wantIn(t, msg, fmt.Sprintf("cpu#%d", dev.id), fmt.Sprintf("cpu#%d", other.id))
	c := NewCapture(dev, func(in []*Tensor) []*Tensor { return in })
	if _, err := c.Call(); err == nil || !strings.Contains(err.Error(), "no inputs") {
		t.Fatalf("Capture.Call(): %v", err)
	}
	if err := (*Tensor)(nil).Backward(); err == nil {
		t.Fatal("Backward of nil: no error")
	}
}

// Item 9: a Device is safe for concurrent use. Run with -race.
func TestConcurrentTraining(t *testing.T) {
	dev := open(t)
	// train runs 5 steps of gradient descent on its own parameter and
	// returns it; every goroutine must get the single-goroutine answer.
	train := func(seed float32) []float32 {
		w := dev.Param([]float32{seed, 1, -1, 0.5}, 2, 2)
		x := dev.Tensor([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
		for step := 0; step < 5; step++ {
			w.ZeroGrad()
			loss := Mean(Mul(MatMul(x, w), MatMul(x, w)))
			if err := loss.Backward(); err != nil {
				t.Error(err)
				return nil
			}
			g, err := w.Grad().Data()
			if err != nil {
				t.Error(err)
				return nil
			}
			cur, err := w.Data()
			if err != nil {
				t.Error(err)
				return nil
			}
			for i := range cur {
				cur[i] -= 0.01 * g[i]
			}
			if err := w.WriteAt(0, cur); err != nil {
				t.Error(err)
				return nil
			}
		}
		v, _ := w.Data()
		return v
	}
	want := map[float32][]float32{}
	for _, s := range []float32{1, 2, 3, 4} {
		want[s] = train(s)
	}
	var wg sync.WaitGroup
	for rep := 0; rep < 3; rep++ {
		for _, s := range []float32{1, 2, 3, 4} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got := train(s); !near(got, want[s], 0) {
					t.Errorf("seed %g: concurrent result %v, alone %v", s, got, want[s])
				}
			}()
		}
	}
	// NoGrad in one goroutine must not switch gradients off for the others.
	stop := make(chan struct{})
	var evalDone sync.WaitGroup
	evalDone.Add(1)
	go func() {
		defer evalDone.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			dev.NoGrad(func() {
				y := ReLU(dev.Tensor([]float32{-1, 1}, 2))
				if y.RequiresGrad() {
					t.Error("an op inside NoGrad requires grad")
				}
				if _, err := y.Data(); err != nil {
					t.Error(err)
				}
			})
		}
	}()
	// A capture records while the others run.
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := dev.Param([]float32{2}, 1)
		c := NewCapture(dev, func(in []*Tensor) []*Tensor { return []*Tensor{Mul(in[0], w)} })
		for i := 0; i < 20; i++ {
			out, err := c.Call(In([]float32{float32(i)}, 1))
			if err != nil || out[0][0] != float32(2*i) {
				t.Errorf("capture call %d: %v %v", i, out, err)
			}
		}
	}()
	wg.Wait()
	close(stop)
	evalDone.Wait()
}

// Another goroutine's sync must not spend the values a goroutine is still
// using: each Backward here reads its gradient twice, between which the
// others sync.
func TestConcurrentBackward(t *testing.T) {
	dev := open(t)
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				w := dev.Param([]float32{float32(k), 1}, 2)
				l := Sum(Mul(w, w))
				if err := l.Backward(); err != nil {
					t.Error(err)
					return
				}
				g, err := w.Grad().Data()
				if err != nil || !near(g, []float32{2 * float32(k), 2}, 0) {
					t.Errorf("goroutine %d: gradient %v (%v)", k, g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
