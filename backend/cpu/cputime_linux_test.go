package cpu

import (
	"syscall"
	"time"
)

// processCPUTime is the user+system CPU time of this process. Benchmarks
// report GFLOP per CPU-second beside GFLOP/s: on a machine shared with other
// jobs the wall clock measures the neighbours too, CPU time much less so.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
