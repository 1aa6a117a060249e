//go:build !js

package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/webgpu/gpu"
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
)

// TestRunAhead: a run that repeats the one before submits the command
// buffer recorded during it, and what may happen between two runs is seen
// by the second: a write to an arg, a buffer freed (the recorded one is
// stale), another program's run, a read folded into one of them.
func TestRunAhead(t *testing.T) {
	be := openTest(t)
	inc := func(a float32) backend.Program { return incProgram(t, be, a) }
	one, ten := inc(1), inc(10)
	x, err := be.Alloc(6)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(x)
	args := []backend.Buffer{x}
	want := float32(0)
	check := func(what string) {
		t.Helper()
		v := make([]float32, 6)
		if err := be.Read(x, 0, v); err != nil {
			t.Fatal(err)
		}
		if v[5] != want {
			t.Fatalf("%s: x = %v, want %v", what, v[5], want)
		}
	}
	run := func(p backend.Program, add float32) {
		t.Helper()
		if _, err := p.Run(args); err != nil {
			t.Fatal(err)
		}
		want += add
	}
	hits := be.d.Counters().Ahead
	for range 5 {
		run(one, 1)
	}
	check("5 runs")
	if got := be.d.Counters().Ahead - hits; got != 3 {
		t.Errorf("5 runs over the same args: %d submitted a command recorded ahead, want 3 (the first records nothing, the second records the third)", got)
	}
	if err := be.Write(x, 0, []float32{0, 0, 0, 0, 0, 100}); err != nil {
		t.Fatal(err)
	}
	want = 100
	run(one, 1) // recorded ahead before the write
	check("run after a write")
	other, err := be.Alloc(3)
	if err != nil {
		t.Fatal(err)
	}
	be.Free(other) // makes the recorded command stale
	hits = be.d.Counters().Ahead
	run(one, 1)
	if be.d.Counters().Ahead != hits {
		t.Error("a command recorded before a buffer was freed was submitted")
	}
	check("run after a free")
	run(one, 1)
	run(ten, 10) // another program: the recorded one is not it
	run(one, 1)
	check("programs alternating")
	// A folded read is a command buffer of its own: runs and runs that
	// read share what was recorded ahead (a loop reading its loss every
	// few steps), and each read sees its own run's result.
	dst := make([]float32, 6)
	hits = be.d.Counters().Ahead
	for range 3 {
		if _, err := one.(backend.RunReader).RunRead(args, x, 0, dst); err != nil {
			t.Fatal(err)
		}
		want++
		if dst[5] != want {
			t.Fatalf("RunRead: x = %v, want %v", dst[5], want)
		}
		run(one, 1)
	}
	check("runs and reads alternating")
	if got := be.d.Counters().Ahead - hits; got != 5 {
		t.Errorf("3 reads and runs alternating after a run of the same program: %d submitted a command recorded ahead, want 5 (all but the first)", got)
	}
	// a larger read replaces the staging buffer: the run's recording holds
	big, err := be.Alloc(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(big)
	hits = be.d.Counters().Ahead // the Alloc did not touch it; Free would
	bigDst := make([]float32, 1<<16)
	if _, err := one.(backend.RunReader).RunRead(args, big, 0, bigDst); err != nil {
		t.Fatal(err)
	}
	want++
	if be.d.Counters().Ahead != hits+1 {
		t.Error("a run reading more than the staging buffer held did not submit the command recorded ahead")
	}
	run(one, 1)
	check("a larger read")
}

// TestLazyStepRecordedAhead: a lazy training step through core (fresh batch
// indices and Adam hyperparameters uploaded at every step, the loss read
// with Item, gradients new at every step, the batch as large as the biases
// so that its indices share the pool with their gradients) binds the same
// buffers at every step, so each run submits the command buffer recorded
// while the one before ran; and its losses are the cpu backend's.
func TestLazyStepRecordedAhead(t *testing.T) {
	be := openTest(t)
	var hits int
	lazyStepsLike(t, 23, func() { hits = be.d.Counters().Ahead })
	hits = be.d.Counters().Ahead - hits
	if hits != 20 {
		t.Errorf("20 lazy steps after 3: %d submitted a command recorded ahead, want 20 (each step's buffers the same)", hits)
	}

	// The transformer's lazy step: token batches, dropout's generator
	// state written before each run, the clipped norm kept and released.
	dev, err := core.Open("webgpu-shared")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	g, err := workload.NewGPT(dev, workload.GPTConfig{Layers: 1, Dim: 32, Heads: 2, Context: 16, Batch: 4, Dropout: 0.1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var counted int
	for i := range 13 {
		if i == 3 {
			hits, counted = be.d.Counters().Ahead, dev.Stats().Ahead
		}
		if _, err := g.StepMode(workload.Lazy); err != nil {
			t.Fatal(err)
		}
	}
	if hits = be.d.Counters().Ahead - hits; hits != 10 {
		t.Errorf("10 lazy transformer steps after 3: %d submitted a command recorded ahead, want 10", hits)
	}
	// what core.Stats reports (ag bench's recorded_ahead_per_step)
	if counted = dev.Stats().Ahead - counted; counted != hits {
		t.Errorf("core.Stats.Ahead counted %d runs recorded ahead, the backend %d", counted, hits)
	}
}

// queueState is the native layer's count of deferred runs not known
// finished, the most it allows (gpu.MaxInFlight) and its count of throttles
// that drained the queue (native: true; the browser's layer keeps none of
// them, see plan_js_test.go).
func queueState(be *Backend) (unfinished, most uint64, drains int, native bool) {
	return be.d.Unfinished(), gpu.MaxInFlight, be.d.Counters().Drains, true
}

// TestDeferredRuns: natively a plain run returns without waiting
// (RunInfo.Pending), at most gpu.MaxInFlight of them unfinished; a read waits
// for all before it, in order; Wait is a barrier; closing with runs
// unfinished waits for them; AG_WEBGPU_DEFER=off makes every run wait.
func TestDeferredRuns(t *testing.T) {
	open := func() *Backend {
		t.Helper()
		b, err := driver{}.Open()
		if err != nil {
			t.Fatal(err)
		}
		return b.(*Backend)
	}
	openTest(t) // skips loudly without an adapter
	be := open()
	inc := incProgram(t, be, 1)
	x, err := be.Alloc(6)
	if err != nil {
		t.Fatal(err)
	}
	const runs = 200
	for i := range runs {
		info, err := inc.Run([]backend.Buffer{x})
		if err != nil {
			t.Fatal(err)
		}
		if !info.Pending {
			t.Fatalf("run %d: not pending: a plain run waited", i)
		}
		if n := be.d.Unfinished(); n > gpu.MaxInFlight {
			t.Fatalf("run %d: %d runs may be unfinished, want at most %d", i, n, gpu.MaxInFlight)
		}
	}
	v := make([]float32, 6)
	if err := be.Read(x, 0, v); err != nil {
		t.Fatal(err)
	}
	if v[0] != runs || v[5] != runs {
		t.Fatalf("after %d deferred increments the read sees %v, want %d", runs, v, runs)
	}
	// Wait (backend.Waiter, what core.Device.Sync calls) is a barrier
	for range 2 {
		if _, err := inc.Run([]backend.Buffer{x}); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Wait(); err != nil {
		t.Fatal(err)
	}
	if be.d.Unfinished() != 0 {
		t.Errorf("after Wait %d runs counted unfinished", be.d.Unfinished())
	}
	for range 5 { // closed with runs unfinished
		if _, err := inc.Run([]backend.Buffer{x}); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}

	if err := be.Wait(); err == nil {
		t.Error("Wait on a closed backend: no error")
	}

	t.Setenv("AG_WEBGPU_DEFER", "off")
	be = open()
	defer be.Close()
	inc = incProgram(t, be, 1)
	y, err := be.Alloc(6)
	if err != nil {
		t.Fatal(err)
	}
	info, err := inc.Run([]backend.Buffer{y})
	if err != nil {
		t.Fatal(err)
	}
	if info.Pending {
		t.Error("AG_WEBGPU_DEFER=off: a plain run did not wait")
	}
}

// TestSyncWaits: core.Device.Sync is a barrier on webgpu (backend.Waiter):
// unread lazy steps are submitted without waiting, and Sync returns with
// nothing unfinished.
func TestSyncWaits(t *testing.T) {
	be := openTest(t)
	dev, err := core.Open("webgpu-shared")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	m, err := workload.New(dev, workload.Config{Width: 16, Depth: 2, Batch: 8, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := m.StepUnread(workload.Lazy); err != nil {
			t.Fatal(err)
		}
	}
	if be.d.Unfinished() == 0 {
		t.Error("four unread lazy steps: none counted unfinished (were they waited for?)")
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	if be.d.Unfinished() != 0 {
		t.Errorf("after Device.Sync %d runs counted unfinished", be.d.Unfinished())
	}
}
