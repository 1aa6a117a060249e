package backend

import (
	"testing"
	"time"
)

// clockGraph is an arg and two adds of 1000 elements, the second fused
// into the first's kernel where a test says so.
func clockGraph() *Graph {
	s := []int{1000}
	return &Graph{Nodes: []Node{
		{Op: OpArg, Shape: s},
		{Op: OpAdd, Shape: s, In: []int{0, 0}},
		{Op: OpAdd, Shape: s, In: []int{1, 0}},
	}}
}

// TestNodeClockBudget: a calibration run that costs 1 ms more than a
// plain 2 ms run comes back after 1/(0.05*2) = 10 plain runs, and plain
// runs share their time as the calibration measured it, marked estimated.
func TestNodeClockBudget(t *testing.T) {
	c := NewNodeClock(clockGraph(), Calibration{Budget: 0.05}, nil, nil)
	calRun := func() {
		t.Helper()
		if cal, _ := c.due(); !cal {
			t.Fatalf("run %d: a calibration is due", c.runs)
		}
		got := NewNodeTimes(3)
		c.calibrated(got, []KernelTime{{1, 3 * time.Millisecond}, {2, time.Millisecond}}, true, 3*time.Millisecond)
		if got.How[0] != TimeNone || got.How[1] != TimeMeasured || got.How[2] != TimeMeasured || got.Dur[1] != 3*time.Millisecond+1 {
			t.Errorf("calibration: %v %v", got.Dur, got.How)
		}
	}
	calRun()
	if c.left != 1 {
		t.Fatalf("after the first calibration: left %d, want one plain run to learn its cost", c.left)
	}
	if cal, _ := c.due(); cal {
		t.Fatal("the run after the first calibration is plain")
	}
	got := NewNodeTimes(3)
	c.spread(got, 8*time.Millisecond, 2*time.Millisecond)
	if got.Dur[0] != 0 || got.How[0] != TimeNone || got.Dur[1] != 6*time.Millisecond || got.Dur[2] != 2*time.Millisecond ||
		got.How[1] != TimeEstimated || got.How[2] != TimeEstimated {
		t.Errorf("spread 8 ms by a 3:1 calibration: %v %v", got.Dur, got.How)
	}
	calRun()
	if want := 10; c.left != want {
		t.Errorf("calibration 1 ms over a 2 ms plain run at a 0.05 budget: every %d runs, want %d", c.left, want)
	}
}

// fakeKernels is one fused kernel of node 2 that takes 4 ms alone; a run
// timed whole takes 5 ms.
type fakeKernels struct{}

func (fakeKernels) TimeKernels(_ []Buffer, ks []KernelTime) ([]KernelTime, RunInfo, error) {
	return append(ks, KernelTime{2, 4 * time.Millisecond}), RunInfo{DeviceTime: 4 * time.Millisecond, Launches: 1}, nil
}

func (fakeKernels) RunWhole([]Buffer) (RunInfo, error) {
	return RunInfo{DeviceTime: 5 * time.Millisecond, Launches: 1}, nil
}

// TestNodeClockSeries: with WarmUp the first run is plain and estimated by
// cost, the next Runs calibrate, and a fused kernel's time is split by
// CostShares.
func TestNodeClockSeries(t *testing.T) {
	g := clockGraph()
	c := NewNodeClock(g, Calibration{Every: 8, Runs: 2, WarmUp: true}, []int{2}, map[int][]int{2: {1, 2}})
	var kinds [][]TimeKind
	for r := range 10 {
		nt := NewNodeTimes(3)
		_, err := c.Run(nt, fakeKernels{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, nt.How)
		if sum := nt.Dur[1] + nt.Dur[2]; nt.How[1] == TimeEstimated && (sum < 5*time.Millisecond-2 || sum > 5*time.Millisecond) {
			t.Errorf("run %d: estimated times add up to %v, want the run's 5ms", r, sum)
		}
		if nt.How[1] == TimeSplit {
			sh := CostShares(g, []int{1, 2})
			if want := time.Duration(float64(4*time.Millisecond+1) * sh[0]); nt.Dur[1] != want {
				t.Errorf("run %d: fused node got %v, want %v", r, nt.Dur[1], want)
			}
		}
	}
	for r, want := range []TimeKind{TimeEstimated, TimeSplit, TimeSplit, TimeEstimated, TimeEstimated, TimeEstimated, TimeEstimated, TimeEstimated, TimeEstimated, TimeSplit} {
		if kinds[r][0] != TimeNone || kinds[r][1] != want || kinds[r][2] != want {
			t.Errorf("run %d: kinds %v, want %v for both adds", r, kinds[r], want)
		}
	}
}

// TestNodeClockLone: kernels timed alone lose the fixed cost of a lone
// compute (the cheapest kernel's time); one that exceeds it by less than
// that is estimated by cost; plain runs spread what the work does not
// explain evenly over the kernels.
func TestNodeClockLone(t *testing.T) {
	g := clockGraph()
	c := NewNodeClock(g, Calibration{Every: 128, Runs: 1, Lone: true}, nil, nil)
	const us = time.Microsecond
	got := NewNodeTimes(3)
	// node 1: two kernels, 100 us (the fixed cost) and 1100 us; node 2: 150 us
	c.calibrated(got, []KernelTime{{1, 100 * us}, {1, 1100 * us}, {2, 150 * us}}, true, 0)
	if got.How[1] != TimeEstimated || got.How[2] != TimeEstimated {
		t.Errorf("kinds %v: a kernel too small to time alone makes its node's time estimated", got.How)
	}
	// node 1's timed kernel: 1000 us of work for half its node's cost; the
	// small kernels get their cost at that rate.
	rate := 1000 * float64(us) / (NodeCost(g, 1) / 2)
	if want := time.Duration(1000*float64(us)+rate*NodeCost(g, 1)/2) + 2; got.Dur[1] != want {
		t.Errorf("node 1: %v, want %v", got.Dur[1], want)
	}
	plain := NewNodeTimes(3)
	c.spread(plain, 10*time.Millisecond, 0)
	if sum := plain.Dur[1] + plain.Dur[2]; sum < 10*time.Millisecond-2 || sum > 10*time.Millisecond {
		t.Errorf("plain run of 10 ms: nodes got %v", plain.Dur)
	}
	if plain.How[1] != TimeEstimated || plain.How[2] != TimeEstimated {
		t.Errorf("plain run kinds %v", plain.How)
	}
}
