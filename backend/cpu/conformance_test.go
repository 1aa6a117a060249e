package cpu_test

import (
	"testing"

	"github.com/ag-go/ag/backend/backendtest"
	_ "github.com/ag-go/ag/backend/cpu" // registers "cpu"
)

// TestConformance runs the backend conformance suite on the cpu backend.
func TestConformance(t *testing.T) { backendtest.Run(t, "cpu") }
