//go:build !ggml

package native

import (
	"errors"

	"github.com/ag-go/ag/backend"
)

// notBuilt is what both drivers say when the package is built without ggml.
const notBuilt = "built without ggml: run `make vulkan`, then build with -tags ggml (the Makefile does this)"

// errNotBuilt is Open's error in a build without ggml.
var errNotBuilt = errors.New("native: " + notBuilt)

// stubDriver stands in for a ggml driver so that `ag devices` lists it and
// says how to enable it.
type stubDriver struct{}

func (stubDriver) Open() (backend.Backend, error) { return nil, errNotBuilt }

func (stubDriver) Available() backend.Availability {
	return backend.Availability{OK: false, Why: notBuilt}
}

func init() {
	backend.Register(VulkanName, VulkanPriority, stubDriver{})
	backend.Register(CPUName, CPUPriority, stubDriver{})
}
