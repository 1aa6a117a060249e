//go:build ggml

package native

import (
	"testing"

	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/backend/backendtest/edge"
)

func TestConformanceCPU(t *testing.T) {
	backendtest.Run(t, CPUName)
	edge.Run(t, CPUName)
}

// On lavapipe this runs with GGML_VK_VISIBLE_DEVICES set by TestMain.
func TestConformanceVulkan(t *testing.T) {
	backendtest.Run(t, VulkanName)
	edge.Run(t, VulkanName)
}

// BenchmarkProfileSharesCPU and BenchmarkProfileSharesVulkan report the
// matmul's share of a timed run against an untimed one's (a timing
// comparison: a benchmark, not a test).
func BenchmarkProfileSharesCPU(b *testing.B) { backendtest.BenchProfileShares(b, CPUName) }

func BenchmarkProfileSharesVulkan(b *testing.B) { backendtest.BenchProfileShares(b, VulkanName) }
