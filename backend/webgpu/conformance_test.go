package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend/backendtest"
)

// TestConformance runs the shared backend suite on the adapter found here
// (lavapipe on the CPU machines: correctness only).
func TestConformance(t *testing.T) { backendtest.Run(t, "webgpu") }

// BenchmarkProfileShares reports the matmul's share of a timed run against
// an untimed one's (a timing comparison: a benchmark, not a test).
func BenchmarkProfileShares(b *testing.B) { backendtest.BenchProfileShares(b, "webgpu") }
