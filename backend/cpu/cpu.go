package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/ag-go/ag/backend"
)

// CPU is one opened CPU backend. Programs of one backend run one at a time
// (they share the matmul packing scratch and the worker pool, and a second
// concurrent run could not go faster on the same cores).
type CPU struct {
	mu      sync.Mutex // serializes runs: guards scratch
	scratch gemmScratch
	par     parallel
}

var _ backend.Backend = (*CPU)(nil)

// New returns a CPU backend; backend.Open("cpu") does the same.
func New() *CPU { return &CPU{} }

// Caps describes the backend: every op is supported, times are host times.
func (c *CPU) Caps() backend.Caps {
	return backend.Caps{
		Name: "cpu",
		Device: fmt.Sprintf("pure Go (%s/%s, %d goroutines, %s matmul)",
			runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), kernelName()),
		DeviceTimer: false,
		Timer:       "host clock around each kernel (measured)",
	}
}

// Memory reports the host's memory, which is this backend's device memory.
// On Linux it reads MemAvailable and MemTotal from /proc/meminfo. Elsewhere,
// wasm in a browser included, it is an estimate: total is 2 GiB (what
// browsers commonly grant a wasm32 instance) or the Go runtime's own size if
// larger, and free is total minus what the Go runtime has taken.
func (c *CPU) Memory() (free, total uint64, err error) { return hostMemory() }

// Close releases nothing: buffers are garbage collected.
func (c *CPU) Close() error { return nil }
