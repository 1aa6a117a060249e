package backend

import "time"

// Device timestamps to durations, for any backend whose device writes
// timestamps into a run (WebGPU's and Vulkan's timestamp queries, in ns):
// a whole run's device time and a calibration run's kernel times
// (NodeClock's Kernels.TimeKernels), refusing timestamps that cannot be
// right, in which case the caller keeps the host's time.

// TickSpan is the span from timestamp i to timestamp j (ns), or false when
// it cannot be right: not increasing, zero, or longer than the host saw the
// run take (host 0: unchecked).
func TickSpan(ticks []uint64, i, j int, host time.Duration) (time.Duration, bool) {
	if i < 0 || j < i || len(ticks) <= j || ticks[j] < ticks[i] || ticks[j] == 0 {
		return 0, false
	}
	d := time.Duration(ticks[j] - ticks[i])
	if host > 0 && d > host {
		return 0, false
	}
	return d, true
}

// TickedRun is the RunInfo of a run of one submission: its device time is
// the span of its timestamps where that is usable (TickSpan), else host.
func TickedRun(ticks []uint64, host time.Duration) RunInfo {
	info := RunInfo{DeviceTime: host, Launches: 1}
	if dt, ok := TickSpan(ticks, 0, len(ticks)-1, host); ok {
		info.DeviceTime = dt
	}
	return info
}

// TickedDispatches appends the kernel times of a calibration run whose
// dispatches were timed one by one: dispatch k computes nodes[k] and ran
// from ticks[k] to ticks[k+1]; the consecutive dispatches of one node are
// its kernel. It returns the run's span too; false (ks unchanged) when the
// timestamps are unusable.
func TickedDispatches(ks []KernelTime, nodes []int, ticks []uint64, host time.Duration) ([]KernelTime, time.Duration, bool) {
	total, ok := TickSpan(ticks, 0, len(ticks)-1, host)
	if !ok {
		return ks, 0, false
	}
	for k, n := range nodes {
		dt, _ := TickSpan(ticks, k, k+1, host)
		if k == 0 || nodes[k-1] != n {
			ks = append(ks, KernelTime{Node: n})
		}
		ks[len(ks)-1].Dur += dt
	}
	return ks, total, true
}

// TickedPasses appends the kernel times of a calibration run that ran each
// kernel (of node owners[k]) in a pass of its own after an empty pass:
// ticks[0] to ticks[1] is the empty pass, what a pass costs with no kernel
// in it (a barrier and two timestamps; about 60 us on lavapipe), which is
// taken off every kernel's pass so that splitting a run into passes does
// not inflate the small kernels. It returns the kernels' span too; false
// (ks unchanged) when the timestamps are unusable.
func TickedPasses(ks []KernelTime, owners []int, ticks []uint64, host time.Duration) ([]KernelTime, time.Duration, bool) {
	total, ok := TickSpan(ticks, 1, len(ticks)-1, host)
	if !ok {
		return ks, 0, false
	}
	empty, _ := TickSpan(ticks, 0, 1, host)
	for k, n := range owners {
		dt, _ := TickSpan(ticks, k+1, k+2, host)
		ks = append(ks, KernelTime{Node: n, Dur: max(dt-empty, 0)})
	}
	return ks, total, true
}
