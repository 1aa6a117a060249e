//go:build !linux

package cpu

import "time"

// processCPUTime is unknown here; benchmarks then skip the CPU-time metric.
func processCPUTime() time.Duration { return 0 }
