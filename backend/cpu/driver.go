package cpu

import (
	"fmt"
	"runtime"

	"github.com/ag-go/ag/backend"
)

func init() { backend.Register("cpu", priority(), driver{}) }

// priority places this backend in "auto" selection. With its assembly
// micro-kernels (amd64 with AVX2 or AVX-512) it trains the 4x1024 MLP about
// 1.7x faster than ggml's CPU backend on the same cores (14.5 vs 24-31 ms at
// batch 64, bench/side_by_side.sh), so it ranks above ggml-cpu; with the
// portable Go kernel it ranks below it.
func priority() int {
	if kern.name == goKernel.name {
		return backend.PriorityCPUPortable
	}
	return backend.PriorityCPUAssembly
}

// driver opens pure-Go backends; it works on every platform.
type driver struct{}

// Open returns a new CPU backend.
func (driver) Open() (backend.Backend, error) { return New(), nil }

// Available is always OK: the backend needs nothing but the Go runtime.
func (driver) Available() backend.Availability {
	return backend.Availability{OK: true, Auto: true,
		Why: fmt.Sprintf("pure Go, %d cores, matmul kernel %s", runtime.GOMAXPROCS(0), kernelName())}
}
