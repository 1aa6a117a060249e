package backend

import (
	"slices"
	"testing"
	"time"
)

func TestTickSpan(t *testing.T) {
	ticks := []uint64{100, 150, 400}
	for _, c := range []struct {
		i, j int
		host time.Duration
		want time.Duration
		ok   bool
	}{
		{0, 2, 0, 300, true},
		{0, 1, time.Second, 50, true},
		{0, 2, 299, 0, false}, // longer than the host saw
		{1, 0, 0, 0, false},
		{0, 3, 0, 0, false},
		{-1, 1, 0, 0, false},
	} {
		got, ok := TickSpan(ticks, c.i, c.j, c.host)
		if got != c.want || ok != c.ok {
			t.Errorf("TickSpan(%d, %d, %v) = %v, %v; want %v, %v", c.i, c.j, c.host, got, ok, c.want, c.ok)
		}
	}
	if _, ok := TickSpan([]uint64{5, 3}, 0, 1, 0); ok {
		t.Error("TickSpan accepted decreasing timestamps")
	}
	if _, ok := TickSpan([]uint64{0, 0}, 0, 1, 0); ok {
		t.Error("TickSpan accepted zero timestamps")
	}
	if got := TickedRun(ticks, time.Second); got.DeviceTime != 300 || got.Launches != 1 {
		t.Errorf("TickedRun = %+v, want 300ns, 1 launch", got)
	}
	if got := TickedRun(nil, time.Millisecond); got.DeviceTime != time.Millisecond {
		t.Errorf("TickedRun without timestamps = %v, want the host's 1ms", got.DeviceTime)
	}
}

func TestTickedKernels(t *testing.T) {
	// dispatches of nodes 3, 3, 5, 7: node 3's two make one kernel
	ks, total, ok := TickedDispatches(nil, []int{3, 3, 5, 7}, []uint64{10, 20, 40, 45, 100}, time.Second)
	want := []KernelTime{{3, 30}, {5, 5}, {7, 55}}
	if !ok || total != 90 || !slices.Equal(ks, want) {
		t.Errorf("TickedDispatches = %v, %v, %v; want %v, 90ns, true", ks, total, ok, want)
	}
	if ks, _, ok := TickedDispatches([]KernelTime{{1, 1}}, []int{3}, []uint64{10, 5}, 0); ok || len(ks) != 1 {
		t.Errorf("TickedDispatches on bad timestamps = %v, %v; want ks unchanged, false", ks, ok)
	}
	// an empty pass of 10ns first, taken off each kernel (not below 0)
	ks, total, ok = TickedPasses(nil, []int{2, 4}, []uint64{0, 10, 50, 55}, time.Second)
	want = []KernelTime{{2, 30}, {4, 0}}
	if !ok || total != 45 || !slices.Equal(ks, want) {
		t.Errorf("TickedPasses = %v, %v, %v; want %v, 45ns, true", ks, total, ok, want)
	}
}
