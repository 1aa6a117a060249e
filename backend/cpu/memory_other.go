//go:build !linux

package cpu

import "runtime"

// estimateTotal is what Memory reports as total where the OS cannot be asked
// (wasm in a browser, other systems): wasm32 memory tops out at 4 GiB and
// browsers commonly grant about 2 GiB, so 2 GiB is the documented estimate.
const estimateTotal = 2 << 30

// hostMemory estimates: total is estimateTotal (or what the Go heap already
// holds, if more), free is total minus the memory the Go runtime has taken
// from the system.
func hostMemory() (free, total uint64, err error) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	total = estimateTotal
	if ms.Sys > total {
		total = ms.Sys
	}
	return total - ms.Sys, total, nil
}
