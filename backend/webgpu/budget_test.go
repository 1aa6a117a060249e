package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// TestMemoryBudget: a hardware GPU gets no guessed budget (a guess refused
// an 8x4096 model on an H200), a software adapter 2 GiB, and
// AG_WEBGPU_MEMORY_MB states one for either.
func TestMemoryBudget(t *testing.T) {
	t.Setenv("AG_WEBGPU_MEMORY_MB", "")
	if got := memoryBudget(gpu.Info{GPU: true, MaxBuffer: 256 << 20}); got != 0 {
		t.Errorf("hardware GPU: budget %d, want 0 (unknown)", got)
	}
	if got := memoryBudget(gpu.Info{GPU: false}); got != 2<<30 {
		t.Errorf("software adapter: budget %d, want 2 GiB", got)
	}
	t.Setenv("AG_WEBGPU_MEMORY_MB", "512")
	if got := memoryBudget(gpu.Info{GPU: true}); got != 512<<20 {
		t.Errorf("AG_WEBGPU_MEMORY_MB=512: budget %d", got)
	}
}
