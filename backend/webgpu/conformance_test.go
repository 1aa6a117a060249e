package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/backend/backendtest/edge"
)

// TestConformance runs the shared backend suite on the adapter found here
// (lavapipe on the CPU machines: correctness only), then its edge points
// through core.
func TestConformance(t *testing.T) {
	backendtest.Run(t, "webgpu")
	edge.Run(t, "webgpu")
}

// BenchmarkProfileShares reports the matmul's share of a timed run against
// an untimed one's (a timing comparison: a benchmark, not a test).
func BenchmarkProfileShares(b *testing.B) { backendtest.BenchProfileShares(b, "webgpu") }
