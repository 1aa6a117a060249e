package core

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/profile"
)

// The profiler's promise, which the seed could not keep: on a training step
// the named stages account for at least 95% of the step's wall time.
func TestProfileCoversStep(t *testing.T) {
	dev := open(t)
	const n, w = 64, 256 // a small but real step: ag's fixed cost per step is tens of microseconds
	x := dev.Tensor(make([]float32, n*w), n, w)
	y := dev.Tensor(make([]float32, n*w), n, w)
	var ps []*Tensor
	for range 3 {
		v := make([]float32, w*w)
		for i := range v {
			v[i] = float32(i%7) * 0.01
		}
		ps = append(ps, dev.Param(v, w, w))
	}
	step := func() {
		for _, p := range ps {
			p.ZeroGrad()
		}
		h := x
		for _, p := range ps {
			h = Tanh(MatMul(h, p))
		}
		d := Sub(h, y)
		loss := Mean(Mul(d, d))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		if _, err := loss.Item(); err != nil {
			t.Fatal(err)
		}
	}
	step() // compile
	defer profile.Forward(false)
	defer profile.Backward(false)
	// The machine is shared and noisy: a descheduled process lowers the
	// coverage of a trial, never raises it, so the best of three trials is
	// the measure of what the profiler attributes.
	// A collection that starts in a trial stops or slows the step outside
	// the stages (its pauses and assists are the runtime's, not ag's),
	// which took one trial in three to 65-84% on the 2-core machine and
	// failed the test about half the time: each trial starts collected and
	// runs without the collector.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// Time the scheduler gave other processes while a step ran is no part
	// of the step: on a loaded 2-core machine it can fall between the
	// stages as well as in them, and best-of-three did not keep it out.
	// The thread's run delay over the trial (Linux schedstat) is taken off
	// both the wall time and the unattributed time, so the bound holds
	// whatever the load; where the kernel does not say, the raw coverage.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var best float64
	for trial := range 3 {
		runtime.GC()
		profile.Reset()
		profile.Forward(true)
		profile.Backward(true)
		d0, delays := testenv.RunDelay()
		for range 10 {
			t0 := time.Now()
			step()
			profile.Step(time.Since(t0))
		}
		d1, _ := testenv.RunDelay()
		snap := profile.Snapshot()
		if snap.Steps != 10 || snap.Forward.Empty() || snap.Backward.Empty() {
			t.Fatalf("profile recorded %d steps, forward empty %t, backward empty %t", snap.Steps, snap.Forward.Empty(), snap.Backward.Empty())
		}
		computeMS := 0.0
		for _, s := range snap.Backward.Stages {
			if s.Stage == "compute" {
				computeMS = s.MS
			}
		}
		if computeMS <= 0 {
			t.Errorf("backward report has no compute time: %+v", snap.Backward.Stages)
		}
		cover := snap.CoveragePct
		if delays {
			// the delay, at most the wall time, never makes the share grow
			// past what the stages hold
			waited := min(float64(d1-d0)/1e6, snap.StepTotalMS-snap.AttributedMS)
			cover = 100 * snap.AttributedMS / (snap.StepTotalMS - max(waited, 0))
		}
		t.Logf("trial %d: named stages cover %.1f%% of the step wall time (%.2f of %.2f ms), %.1f%% without the %v this thread waited for a CPU",
			trial, snap.CoveragePct, snap.AttributedMS, snap.StepTotalMS, cover, d1-d0)
		best = max(best, cover)
	}
	if best < 95 {
		t.Errorf("named stages cover at best %.1f%% of the step wall time less the thread's run delay, want >= 95%%", best)
	}
}

// The stages of a run tile its wall time: none negative, and together no
// more than the time the syncs took. Allocating a run's large outputs once
// counted twice in flush and was taken twice off graph, which went
// negative (ggml-vulkan, 8x4096 lazy: graph -23% of the forward).
func TestProfileStagesTile(t *testing.T) {
	dev := open(t)
	const n = 1 << 22 // 16 MB outputs: their allocation is not negligible
	x := dev.Tensor(make([]float32, n), n)
	defer profile.Forward(false)
	profile.Reset()
	profile.Forward(true)
	var wall time.Duration
	var keep []*Tensor // kept alive, so that no buffer comes back to the pool
	for i := range 6 {
		t0 := time.Now()
		y := AddScalar(x, float32(i))
		if err := dev.Sync(y); err != nil {
			t.Fatal(err)
		}
		wall += time.Since(t0)
		keep = append(keep, y)
	}
	r := profile.Data(profile.PassForward)
	var sum float64
	for _, s := range r.Stages {
		if s.MS < 0 {
			t.Errorf("stage %s is %.3f ms: negative", s.Stage, s.MS)
		}
		sum += s.MS
	}
	if w := float64(wall) / 1e6; sum > w*1.001 {
		t.Errorf("stages add up to %.3f ms, more than the %.3f ms the syncs took: a stage is counted twice (%+v)", sum, w, r.Stages)
	}
	for _, y := range keep {
		y.Release()
	}
}

// A timed mode's create time is the wall time between its ops, each span
// counted once: the ops of a composite recorded inside it (as gradients
// call composites in a Backward) were counted in the composite and again
// in the next op outside it, from the outer mode's stale mark.
func TestProfileNestedModesCountOnce(t *testing.T) {
	dev := open(t)
	x := dev.Tensor([]float32{1, 2}, 2)
	defer profile.Backward(false)
	profile.Reset()
	profile.Backward(true)
	const gap = 20 * time.Millisecond
	t0 := time.Now()
	restore := dev.enterMode(profile.PassBackward, true, true)
	time.Sleep(gap)
	a := Neg(x)
	dev.Composite("Inner", func() {
		time.Sleep(gap)
		a = Neg(a)
	})
	a = Neg(a)
	restore()
	wall := time.Since(t0)
	var create float64
	for _, s := range profile.Data(profile.PassBackward).Stages {
		if s.Stage == "create" {
			create = s.MS
		}
	}
	// Each sleep is charged once: create is at least both of them and no
	// more than the wall time around the three ops.
	if w := float64(wall) / 1e6; create < 2*float64(gap)/1e6 || create > w*1.001 {
		t.Errorf("create %.2f ms for three ops over %.2f ms with two %v gaps: want between %.2f and %.2f", create, w, gap, 2*float64(gap)/1e6, w)
	}
	a.Release()
}

// A captured step's replays count the nodes they run as the passes'
// operations, as recording them does in lazy mode: the reports of a
// captured step do not say "0 operations".
func TestProfileCountsReplayedOps(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{0.5, -0.25, 0.125, 1}, 2, 2)
	c := NewCapture(dev, func(in []*Tensor) []*Tensor {
		w.ZeroGrad()
		loss := Sum(Tanh(MatMul(in[0], w)))
		if err := loss.Backward(); err != nil {
			panic(err)
		}
		return []*Tensor{loss}
	})
	x := In([]float32{1, 2, 3, 4}, 2, 2)
	if _, err := c.Call(x); err != nil { // the recording
		t.Fatal(err)
	}
	defer profile.Forward(profile.Forward(true))
	defer profile.Backward(profile.Backward(true))
	profile.Reset()
	defer profile.Reset()
	for range 3 {
		if _, err := c.Call(x); err != nil {
			t.Fatal(err)
		}
	}
	p := profile.Snapshot()
	count := func(r *profile.Report, op string) int {
		for _, o := range r.ByOp {
			if o.Op == op {
				return o.Calls
			}
		}
		return -1
	}
	if p.Forward.Ops == 0 || p.Forward.Ops%3 != 0 || count(p.Forward, "MatMul") != 3 || count(p.Backward, "MatMul") != 3 {
		t.Errorf("3 replays: forward %d operations, MatMul counted %d (forward), %d (backward): want a multiple of 3 and 3 each", p.Forward.Ops, count(p.Forward, "MatMul"), count(p.Backward, "MatMul"))
	}
}

// TestProfileCountsCalls: a composite is one call of several nodes in the
// forward and in the backward (whichever of its nodes' gradients record
// nodes), a nested composite (GELUErf's Erf) is part of the outer's call,
// and a Backward is one call; lazily and replayed.
// Counting nodes said MSELoss 348 calls in 58 steps.
func TestProfileCountsCalls(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{0.5, -0.25, 0.125, 1}, 2, 2)
	x := dev.Tensor([]float32{1, 2, 3, 4}, 2, 2)
	y := dev.Tensor([]float32{0.5, 1, -1, 2}, 2, 2)
	step := func(x *Tensor) *Tensor {
		w.ZeroGrad()
		// SqErr's first node is a Sub, whose gradient records no node: the
		// Backward still counts SqErr's gradient as one call
		h := GELUErf(ELU(MatMul(x, w), 1))
		var loss *Tensor
		dev.Composite("SqErr", func() {
			e := Sub(h, y)
			loss = Sum(Mul(e, e))
		})
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		return loss
	}
	c := NewCapture(dev, func(in []*Tensor) []*Tensor { return []*Tensor{step(in[0])} })
	if _, err := c.Call(In([]float32{1, 2, 3, 4}, 2, 2)); err != nil { // the recording
		t.Fatal(err)
	}
	defer profile.Forward(profile.Forward(true))
	defer profile.Backward(profile.Backward(true))
	for _, mode := range []string{"lazy", "captured"} {
		profile.Reset()
		const steps = 3
		for range steps {
			if mode == "lazy" {
				if _, err := step(x).Item(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := c.Call(In([]float32{1, 2, 3, 4}, 2, 2)); err != nil {
				t.Fatal(err)
			}
		}
		p := profile.Snapshot()
		for _, r := range []*profile.Report{p.Forward, p.Backward} {
			calls := 0
			for _, o := range r.ByOp {
				calls += o.Calls
				want := steps
				if o.Op == "Backward" && r.Pass == "forward" {
					want = 0
				}
				switch o.Op {
				case "MatMul", "ELU", "GELUErf", "SqErr", "Backward":
					if o.Calls != want {
						t.Errorf("%s %s: %s %d calls (%d nodes), want %d", mode, r.Pass, o.Op, o.Calls, o.Nodes, want)
					}
				}
				if (o.Op == "ELU" || o.Op == "GELUErf" || o.Op == "SqErr") && o.Nodes <= o.Calls {
					t.Errorf("%s %s: composite %s ran %d nodes in %d calls, want more nodes than calls", mode, r.Pass, o.Op, o.Nodes, o.Calls)
				}
			}
			if calls != r.Calls || r.Calls >= r.Ops {
				t.Errorf("%s %s: %d calls by op, %d in the pass, %d operations", mode, r.Pass, calls, r.Calls, r.Ops)
			}
		}
	}
	profile.Reset()
}

// TestReadWait: a small read's time is all wait; a large one's wait is the
// fastest small read seen (the round trip every read pays), never more
// than the read; before a small read none is charged.
func TestReadWait(t *testing.T) {
	dev := open(t)
	ms := time.Millisecond
	for _, c := range []struct {
		n         int
		dur, want time.Duration
	}{
		{1 << 20, 9 * ms, 0}, // large, no floor yet: all bytes
		{1, 5 * ms, 5 * ms},  // a loss: all wait
		{4, 3 * ms, 3 * ms},  // faster: the floor falls
		{1, 4 * ms, 4 * ms},  // slower: still all wait
		{1 << 20, 10 * ms, 3 * ms},
		{1 << 20, 2 * ms, 2 * ms}, // never more than the read
	} {
		dev.mu.Lock()
		got := dev.readWait(c.n, c.dur)
		dev.mu.Unlock()
		if got != c.want {
			t.Errorf("readWait(%d floats, %v) = %v, want %v", c.n, c.dur, got, c.want)
		}
	}
}
