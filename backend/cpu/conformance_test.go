package cpu_test

import (
	"testing"

	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/backend/backendtest/edge"
	_ "github.com/ag-go/ag/backend/cpu" // registers "cpu"
)

// TestConformance runs the backend conformance suite on the cpu backend,
// then its edge points through core.
func TestConformance(t *testing.T) {
	backendtest.Run(t, "cpu")
	edge.Run(t, "cpu")
}

// BenchmarkProfileShares reports the matmul's share of a timed run against
// an untimed one's (a timing comparison: a benchmark, not a test).
func BenchmarkProfileShares(b *testing.B) { backendtest.BenchProfileShares(b, "cpu") }
