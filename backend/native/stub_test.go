//go:build !ggml

package native

import (
	"errors"
	"testing"

	"github.com/ag-go/ag/backend"
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
