package backend_test

import (
	"slices"
	"testing"

	"github.com/ag-go/ag/backend"
	_ "github.com/ag-go/ag/backend/all"
)

// The registry holds ag's drivers at the priorities the documentation
// names (backend.PriorityWebGPU and the others).
func TestBuiltinPriorities(t *testing.T) {
	want := map[string][]int{
		"webgpu":      {backend.PriorityWebGPU},
		"ggml-vulkan": {backend.PriorityGGMLVulkan},
		"ggml-cpu":    {backend.PriorityGGMLCPU},
		"cpu":         {backend.PriorityCPUAssembly, backend.PriorityCPUPortable},
	}
	for _, d := range backend.Drivers() {
		w, ok := want[d.Name]
		if !ok {
			continue
		}
		if !slices.Contains(w, d.Priority) {
			t.Errorf("%s registered at priority %d, its documented constant says %v", d.Name, d.Priority, w)
		}
		delete(want, d.Name)
	}
	for name := range want {
		t.Errorf("driver %s is not registered (backend/all imports it)", name)
	}
}
