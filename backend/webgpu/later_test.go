package webgpu

import (
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/backend/webgpu/gpu"
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
)

// TestReadLater: a read asked for and waited for later returns the values
// as they were when it was asked, whatever runs and writes came after and
// in whatever order the waits come; many reads may be in flight at once.
// In the browser each is a staging buffer mapping while the test goes on.
func TestReadLater(t *testing.T) {
	be := openTest(t)
	x, err := be.Alloc(6)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(x)
	if err := be.Write(x, 0, []float32{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	ten, one, hundred := incProgram(t, be, 10), incProgram(t, be, 1), incProgram(t, be, 100)
	run := func(p backend.Program) {
		t.Helper()
		if _, err := p.Run([]backend.Buffer{x}); err != nil {
			t.Fatal(err)
		}
	}
	type read struct {
		want []float32
		got  []float32
		wait func() error
	}
	var reads []*read
	later := func(off int, want ...float32) {
		t.Helper()
		r := &read{want: want, got: make([]float32, len(want))}
		if r.wait, err = be.ReadLater(x, off, r.got); err != nil {
			t.Fatal(err)
		}
		reads = append(reads, r)
	}
	run(ten)
	later(0, 11, 12, 13, 14, 15, 16)
	run(one)
	later(4, 16, 17)
	if err := be.Write(x, 0, make([]float32, 6)); err != nil {
		t.Fatal(err)
	}
	later(0, 0, 0, 0, 0, 0, 0)
	run(hundred)
	// more in flight than staging buffers kept (maxLaterFree) and than
	// reads kept in flight (gpu.MaxLater), past which the oldest complete
	many := gpu.MaxLater + 20
	for i := range many {
		run(one)
		later(5, float32(101+i))
	}
	slices.Reverse(reads) // the last asked is waited for first
	for i, r := range reads {
		if r.wait != nil {
			if err := r.wait(); err != nil {
				t.Fatalf("read %d: %v", len(reads)-1-i, err)
			}
		}
		if !slices.Equal(r.got, r.want) {
			t.Fatalf("read %d: %v, want %v", len(reads)-1-i, r.got, r.want)
		}
	}
	if w := reads[0].wait; w != nil {
		if err := w(); err != nil {
			t.Fatalf("a wait called twice: %v the second time", err)
		}
	}
	v := make([]float32, 6)
	if err := be.Read(x, 0, v); err != nil {
		t.Fatal(err)
	}
	if v[0] != float32(100+many) {
		t.Fatalf("after the reads x[0] = %v, want %d", v[0], 100+many)
	}
	if _, err := be.ReadLater(x, 4, make([]float32, 3)); err == nil || !strings.Contains(err.Error(), "outside buffer") {
		t.Fatalf("a read past the buffer's end: err %v, want one naming it", err)
	}
	if _, err := be.ReadLater(x, -1, make([]float32, 1)); err == nil || !strings.Contains(err.Error(), "outside buffer") {
		t.Fatalf("a read at offset -1: err %v, want one naming it", err)
	}
}

// TestReadLaterLarge: a read larger than one staging chunk (gpu.MaxStaging)
// is read at once, in chunks, and its wait is nil. Natively only: on
// SwiftShader 64 MiB takes long.
func TestReadLaterLarge(t *testing.T) {
	be := openTest(t)
	if _, _, _, native := queueState(be); !native {
		testenv.Skipf(t, "natively only (a 64 MiB read on SwiftShader takes long); TestReadLater covers the browser's reads")
	}
	n := gpu.MaxStaging/4 + 5
	x, err := be.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(x)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i % 1000)
	}
	if err := be.Write(x, 0, v); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	wait, err := be.ReadLater(x, 0, got)
	if err != nil {
		t.Fatal(err)
	}
	if wait != nil {
		t.Fatal("a read past one staging chunk returned a wait: want it read at once")
	}
	for i := range v {
		if got[i] != v[i] {
			t.Fatalf("the large read differs from what was written: element %d is %v, want %v", i, got[i], v[i])
		}
	}
}

// TestReadLaterClose: a read in flight when its device closes: natively
// Close completes it and the wait gives the values; in the browser the
// wait fails with an error that says the backend closed, and a read never
// waited for is no page error.
func TestReadLaterClose(t *testing.T) {
	openTest(t) // skips loudly without a device
	b, err := driver{}.Open()
	if err != nil {
		t.Fatal(err)
	}
	be := b.(*Backend)
	x, err := be.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Write(x, 0, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	inc := incProgram(t, be, 1)
	y, err := be.Alloc(6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inc.Run([]backend.Buffer{y}); err != nil {
		t.Fatal(err)
	}
	dst, dstY := make([]float32, 4), make([]float32, 6)
	wait, err := be.ReadLater(x, 0, dst)
	if err != nil {
		t.Fatal(err)
	}
	waitY, err := be.ReadLater(y, 0, dstY)
	if err != nil {
		t.Fatal(err)
	}
	if wait == nil || waitY == nil {
		t.Fatal("ReadLater of a small buffer returned no wait: it read at once")
	}
	// a read never waited for, against LaterReader's contract: the close
	// must not make it a page error (an unhandled rejection) in the browser
	if _, err := be.ReadLater(y, 0, make([]float32, 1)); err != nil {
		t.Fatal(err)
	}
	be.Free(x)
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "js" {
		for i, w := range []func() error{wait, waitY} {
			if err := w(); err != nil {
				t.Fatalf("read %d: wait after Close: %v, want the values (Close completes reads in flight)", i, err)
			}
		}
		if !slices.Equal(dst, []float32{1, 2, 3, 4}) || !slices.Equal(dstY, []float32{1, 1, 1, 1, 1, 1}) {
			t.Fatalf("reads completed by Close: %v and %v, want [1 2 3 4] and six ones", dst, dstY)
		}
		return
	}
	for i, w := range []func() error{wait, waitY} {
		if err := w(); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("read %d: wait after Close: err %v, want one saying the backend closed", i, err)
		}
	}
}

// TestReadLaterPipelined: a loop that runs a step, asks for its value and
// waits for it some steps later keeps runs queued natively: with more reads
// in flight than gpu.MaxInFlight runs may be unfinished, the throttle waits for
// the oldest read's copy, never for the queue to drain; every read sees its
// own step.
func TestReadLaterPipelined(t *testing.T) {
	be := openTest(t)
	inc := incProgram(t, be, 1)
	x, err := be.Alloc(6)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(x)
	if err := be.Write(x, 0, make([]float32, 6)); err != nil {
		t.Fatal(err)
	}
	_, most, drains, native := queueState(be)
	const steps = 60
	lag := int(most) + 2 // more reads in flight than runs may be unfinished
	type read struct {
		got  []float32
		wait func() error
	}
	var reads []read
	take := func(i int) {
		t.Helper()
		r := reads[i]
		if err := r.wait(); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if r.got[0] != float32(i+1) || r.got[5] != float32(i+1) {
			t.Fatalf("read %d asked after %d runs: %v", i, i+1, r.got)
		}
	}
	for i := range steps {
		if _, err := inc.Run([]backend.Buffer{x}); err != nil {
			t.Fatal(err)
		}
		r := read{got: make([]float32, 6)}
		if r.wait, err = be.ReadLater(x, 0, r.got); err != nil {
			t.Fatal(err)
		}
		reads = append(reads, r)
		if i >= lag {
			take(i - lag)
		}
		if n, _, _, _ := queueState(be); n > most {
			t.Fatalf("step %d: %d runs may be unfinished, want at most %d", i, n, most)
		}
	}
	for i := steps - lag; i < steps; i++ {
		take(i)
	}
	if _, _, d, _ := queueState(be); native && d != drains {
		t.Errorf("%d of %d steps waited for the queue to drain, with reads in flight to wait for instead", d-drains, steps)
	}
}

// TestStepLater: the MLP's steps asked for with StepLater, each loss waited
// for three steps after it was asked (as the page's loop does), give the
// losses StepMode gives, lazy and captured.
func TestStepLater(t *testing.T) {
	openTest(t)
	for _, mode := range []workload.Mode{workload.Lazy, workload.Captured} {
		t.Run(string(mode), func(t *testing.T) {
			const steps, lag = 12, 3
			want := stepLosses(t, mode, steps, nil)
			got := stepLosses(t, mode, steps, func(m *workload.MLP) []float32 {
				var ls []float32
				var waits []func() (float32, error)
				take := func() {
					l, err := waits[0]()
					if err != nil {
						t.Fatal(err)
					}
					ls, waits = append(ls, l), waits[1:]
				}
				for range steps {
					l, err := m.StepLater(mode)
					if err != nil {
						t.Fatal(err)
					}
					waits = append(waits, l.Item)
					if len(waits) > lag {
						take()
					}
				}
				for len(waits) > 0 {
					take()
				}
				return ls
			})
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("step %d: StepLater's loss %v, StepMode's %v", i, got[i], want[i])
				}
			}
		})
	}
}

// stepLosses trains a fresh MLP on the shared backend for steps steps with
// train (nil: StepMode) and returns the losses.
func stepLosses(t *testing.T, mode workload.Mode, steps int, train func(*workload.MLP) []float32) []float32 {
	t.Helper()
	dev, err := core.Open("webgpu-shared")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	m, err := workload.New(dev, workload.Config{Width: 24, Depth: 3, Batch: 24, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if train != nil {
		return train(m)
	}
	var ls []float32
	for range steps {
		l, err := m.StepMode(mode)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	return ls
}
