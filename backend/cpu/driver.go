package cpu

import (
	"fmt"
	"runtime"

	"github.com/ag-go/ag/backend"
)

func init() { backend.Register("cpu", 10, driver{}) }

// driver opens pure-Go backends; it works on every platform.
type driver struct{}

// Open returns a new CPU backend.
func (driver) Open() (backend.Backend, error) { return New(), nil }

// Available is always OK: the backend needs nothing but the Go runtime.
func (driver) Available() backend.Availability {
	return backend.Availability{OK: true, Auto: true,
		Why: fmt.Sprintf("pure Go, %d cores, matmul kernel %s", runtime.GOMAXPROCS(0), kernelName())}
}
