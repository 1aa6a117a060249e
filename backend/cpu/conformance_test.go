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
