// Package backendtest is the conformance suite every backend runs: each op of
// the IR against a float64 reference interpreter (Eval) on random shapes, with
// tolerances per op stated in one table (tolerances), plus whole graphs,
// program reuse, memory calls and large tensors. Package edge adds core's
// piecewise ops at their kinks and bounds, forward and gradient, against
// this reference and PyTorch's values. A backend's test calls
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, "cpu")
//		edge.Run(t, "cpu")
//	}
package backendtest

import (
	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/reference"
)

// Eval is reference.Eval, the float64 interpreter the suite checks every
// backend against.
func Eval(g *backend.Graph, args [][]float64) ([][]float64, error) { return reference.Eval(g, args) }
