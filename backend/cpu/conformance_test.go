package cpu_test

import (
	"testing"

	"github.com/ag-go/ag/backend/backendtest"
	_ "github.com/ag-go/ag/backend/cpu" // registers "cpu"
)

// TestConformance runs the backend conformance suite on the cpu backend.
func TestConformance(t *testing.T) { backendtest.Run(t, "cpu") }

// BenchmarkProfileShares reports the matmul's share of a timed run against
// an untimed one's (a timing comparison: a benchmark, not a test).
func BenchmarkProfileShares(b *testing.B) { backendtest.BenchProfileShares(b, "cpu") }
