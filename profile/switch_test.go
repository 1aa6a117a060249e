package profile

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestSwitchKeepsData(t *testing.T) {
	fresh(t)
	if Enabled(PassForward) || Any() {
		t.Fatal("profilers on after fresh")
	}
	Op(PassForward, "matmul", msd(1)) // off: dropped
	if !Data(PassForward).Empty() {
		t.Fatal("Op recorded while the profiler was off")
	}
	if prev := Forward(true); prev {
		t.Error("Forward(true) returned prev = true after fresh")
	}
	if !Enabled(PassForward) || !Any() || Enabled(PassBackward) {
		t.Errorf("Enabled(forward)=%v Any()=%v Enabled(backward)=%v, want true true false",
			Enabled(PassForward), Any(), Enabled(PassBackward))
	}
	Op(PassForward, "matmul", msd(1))
	if prev := Forward(false); !prev {
		t.Error("Forward(false) returned prev = false while on")
	}
	if Any() {
		t.Error("Any() true with every profiler off")
	}
	// The seed resets only a profiler with nothing recorded: switching back
	// on continues the earlier totals.
	Forward(true)
	Op(PassForward, "matmul", msd(2))
	if r := Data(PassForward); r.Ops != 2 || r.TotalMS != 3 {
		t.Errorf("after off/on: ops %d total %v ms, want 2 ops, 3 ms", r.Ops, r.TotalMS)
	}
}

func TestResetScopes(t *testing.T) {
	fresh(t)
	Forward(true)
	Backward(true)
	Count(true)
	Op(PassForward, "a", msd(1))
	Op(PassBackward, "b", msd(1))
	Xfer(Up, "x", 4)
	Launch("sync", 1)
	Step(msd(5))

	ResetForward()
	if !Data(PassForward).Empty() || Data(PassBackward).Ops != 1 {
		t.Errorf("ResetForward: forward %+v, backward ops %d; want forward empty, backward kept",
			Data(PassForward), Data(PassBackward).Ops)
	}
	ResetBackward()
	if !Data(PassBackward).Empty() {
		t.Error("ResetBackward left backward data")
	}
	if XferData().UpCount != 1 || Launches()["sync"] != 1 || Snapshot().Steps != 1 {
		t.Error("pass resets touched transfers, launches or steps")
	}
	Op(PassForward, "a", msd(1))
	Reset()
	p := Snapshot()
	if !p.Forward.Empty() || p.Transfers.UpCount != 0 || p.Launches.Total != 0 || p.Steps != 0 || p.TraceEvents != 0 {
		t.Errorf("Reset left data: %+v", p)
	}
	if !Enabled(PassForward) || !Enabled(PassBackward) || !Counting() {
		t.Error("Reset changed the switches")
	}
}

func TestInvalidPass(t *testing.T) {
	fresh(t)
	bad := Pass(3) // the spare slot of the switch array
	if Switch(bad, true) || Enabled(bad) || Enabled(Pass(200)) {
		t.Error("an invalid pass switched on")
	}
	Op(bad, "x", msd(1))
	ResetPass(bad)
	if r := Data(bad); !r.Empty() || r.Pass != "pass(3)" {
		t.Errorf("Data(invalid) = %+v", r)
	}
	for _, s := range []fmt.Stringer{Pass(9), Stage(9), Dir(9)} {
		if s.String() == "" {
			t.Errorf("%T(9).String() is empty", s)
		}
	}
}

// TestConcurrent records from several goroutines (one per device) while
// others read; run with -race. The totals must come out exact.
func TestConcurrent(t *testing.T) {
	fresh(t)
	Forward(true)
	Backward(true)
	Count(true)
	SetTraceCap(1000) // force wrap-around under contention
	const workers, iters = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			site := fmt.Sprintf("dev%d", w)
			for range iters {
				Op(PassForward, "matmul", time.Microsecond)
				Op(PassBackward, "matmul", time.Microsecond)
				RecordRun(&Run{Site: site, Compute: 2 * time.Microsecond, Upload: time.Microsecond,
					Nodes: []NodeTime{{Op: "matmul", Pass: PassForward, Dur: time.Microsecond}, {Op: "matmul", Pass: PassBackward, Dur: time.Microsecond}}})
				Xfer(Up, site, 8)
				Launch(site, 1)
				Step(10 * time.Microsecond)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			_ = Snapshot()
			_ = WriteTrace(discard{})
			Forward(true) // switching an already-on profiler must not lose data
		}
	}()
	wg.Wait()
	<-done
	n := workers * iters
	p := Snapshot()
	if p.Forward.Ops != n || p.Backward.Ops != n || p.Forward.Runs != n {
		t.Errorf("ops forward %d backward %d, runs %d; want %d each", p.Forward.Ops, p.Backward.Ops, p.Forward.Runs, n)
	}
	// Each iteration: forward 1 µs create + 1 µs upload + 1 µs compute.
	if want := float64(n) * 3e-3; p.Forward.TotalMS < want-1e-9 || p.Forward.TotalMS > want+1e-9 {
		t.Errorf("forward total %v ms, want %v", p.Forward.TotalMS, want)
	}
	if p.Transfers.UpCount != n || p.Launches.Total != n || p.Steps != n {
		t.Errorf("transfers %d launches %d steps %d, want %d", p.Transfers.UpCount, p.Launches.Total, p.Steps, n)
	}
	if p.TraceEvents != 1000 {
		t.Errorf("trace kept %d events, want the cap 1000", p.TraceEvents)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

var sinkBool bool

// BenchmarkOff is the cost an op pays for the hook with profiling off: the
// check core makes before timing anything.
func BenchmarkOff(b *testing.B) {
	fresh(b)
	for b.Loop() {
		if Enabled(PassForward) {
			Op(PassForward, "matmul", time.Microsecond)
		}
	}
}

// BenchmarkOffAny is the per-run check (RecordRun is guarded by Any).
func BenchmarkOffAny(b *testing.B) {
	fresh(b)
	for b.Loop() {
		sinkBool = Any()
	}
}

// BenchmarkOpOn is the cost of recording one op with the profiler on.
func BenchmarkOpOn(b *testing.B) {
	fresh(b)
	Forward(true)
	for b.Loop() {
		Op(PassForward, "matmul", time.Microsecond)
	}
}

// BenchmarkRecordRunOn is the cost of recording a 64-node run.
func BenchmarkRecordRunOn(b *testing.B) {
	fresh(b)
	Forward(true)
	Backward(true)
	nodes := make([]NodeTime, 64)
	for i := range nodes {
		nodes[i] = NodeTime{Op: "matmul", Pass: Pass(i % 2), Dur: time.Microsecond}
	}
	r := &Run{Site: "sync", Compute: time.Millisecond, Upload: time.Microsecond, Nodes: nodes}
	for b.Loop() {
		RecordRun(r)
	}
}
