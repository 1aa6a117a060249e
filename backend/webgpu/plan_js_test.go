//go:build js

package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// TestRunPlans: in the browser a deferred run that repeats one of the last
// few is encoded from its kept plan, and what may happen between two runs
// is seen by the second: a write to an arg, a buffer freed (every plan is
// stale), programs alternating, more programs than plans kept, other args.
// Every result is read back and checked.
func TestRunPlans(t *testing.T) {
	be := openTest(t)
	inc := func(a float32) backend.Program { return incProgram(t, be, a) }
	alloc := func() backend.Buffer {
		t.Helper()
		x, err := be.Alloc(6)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Free(x) })
		return x
	}
	one, ten := inc(1), inc(10)
	x, y := alloc(), alloc()
	want := map[backend.Buffer]float32{}
	check := func(what string, b backend.Buffer) {
		t.Helper()
		v := make([]float32, 6)
		if err := be.Read(b, 0, v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v[5] != want[b] {
			t.Fatalf("%s: x = %v, want %v", what, v[5], want[b])
		}
	}
	run := func(p backend.Program, b backend.Buffer, add float32) {
		t.Helper()
		info, err := p.Run([]backend.Buffer{b})
		if err != nil {
			t.Fatal(err)
		}
		if !info.Pending {
			t.Fatal("a plain run in the browser was waited for (RunInfo.Pending false)")
		}
		want[b] += add
	}
	counts := func() (int, int) { return be.d.Counters().PlanHits, be.d.Counters().PlanBuilt }
	expect := func(what string, h0, b0, hits, built int) {
		t.Helper()
		h, b := counts()
		if h-h0 != hits || b-b0 != built {
			t.Errorf("%s: %d runs reused a plan and %d plans were built, want %d and %d", what, h-h0, b-b0, hits, built)
		}
	}

	h, b := counts()
	for range 5 {
		run(one, x, 1)
	}
	check("5 runs", x)
	expect("5 runs over the same args", h, b, 4, 1)

	if err := be.Write(x, 0, []float32{0, 0, 0, 0, 0, 100}); err != nil {
		t.Fatal(err)
	}
	want[x] = 100
	h, b = counts()
	run(one, x, 1) // encoded from the plan made before the write
	check("a run after a write", x)
	expect("a run after a write", h, b, 1, 0)

	other, err := be.Alloc(3)
	if err != nil {
		t.Fatal(err)
	}
	be.Free(other) // every plan is stale
	h, b = counts()
	run(one, x, 1)
	check("a run after a free", x)
	expect("a run after a free", h, b, 0, 1)

	h, b = counts()
	for range 3 {
		run(one, x, 1)
		run(ten, x, 10)
		run(one, y, 1)
	}
	check("programs and args alternating", x)
	check("programs and args alternating", y)
	expect("programs and args alternating", h, b, 7, 2)

	// More programs than plans kept: each run's plan was dropped before it
	// came round again, and every value is still right.
	var ps []backend.Program
	for k := range gpu.MaxPlans + 1 {
		ps = append(ps, inc(float32(k+2)))
	}
	h, b = counts()
	for range 2 {
		for k, p := range ps {
			run(p, x, float32(k+2))
		}
	}
	check("more programs than plans", x)
	expect("more programs than plans", h, b, 0, 2*(gpu.MaxPlans+1))
}

// TestLazyStepPlans: a lazy training step through core binds the buffers
// it bound the step before, so in the browser its run reuses the plan, and
// its losses are the cpu backend's.
func TestLazyStepPlans(t *testing.T) {
	be := openTest(t)
	var hits int
	lazyStepsLike(t, 13, func() { hits = be.d.Counters().PlanHits })
	hits = be.d.Counters().PlanHits - hits
	if hits != 10 {
		t.Errorf("10 lazy steps after 3: %d reused a plan, want 10 (each step's buffers the same)", hits)
	}
}

// queueState: the browser's layer counts no deferred runs (a read waits for
// the runs before it in the GPU process), see ahead_test.go.
func queueState(*Backend) (unfinished, most uint64, drains int, native bool) { return 0, 3, 0, false }
