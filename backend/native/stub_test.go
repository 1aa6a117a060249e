//go:build !ggml

package native

import (
	"errors"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
)

// Without the ggml tag both drivers are listed, unavailable, with the hint.
func TestStubDrivers(t *testing.T) {
	found := map[string]bool{}
	for _, d := range backend.Drivers() {
		if d.Name != VulkanName && d.Name != CPUName {
			continue
		}
		found[d.Name] = true
		if d.OK || d.Why != notBuilt {
			t.Errorf("%s: availability %+v, want not OK with %q", d.Name, d.Availability, notBuilt)
		}
		if _, err := backend.Open(d.Name); !errors.Is(err, errNotBuilt) {
			t.Errorf("Open(%s) = %v, want errNotBuilt", d.Name, err)
		}
	}
	if !found[VulkanName] || !found[CPUName] {
		t.Fatalf("drivers registered: %v", found)
	}
}

// TestGGMLDevices stands for the ggml device tests, which this build leaves
// out: it skips saying why, or fails when AG_REQUIRE_DEVICES names a ggml
// device (a run that requires them must build with -tags ggml).
func TestGGMLDevices(t *testing.T) {
	for _, name := range []string{CPUName, VulkanName} {
		t.Run(name, func(t *testing.T) { testenv.SkipDevice(t, name, notBuilt) })
	}
}
