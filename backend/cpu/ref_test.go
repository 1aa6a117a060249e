package cpu

import (
	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest"
)

// refEval is the float64 reference the backend is checked against: the
// conformance suite's interpreter (backendtest.Eval), which mutates args as
// a backend does. A graph the tests build is valid, so an error is a bug in
// the test.
func refEval(g *backend.Graph, args [][]float64) [][]float64 {
	vals, err := backendtest.Eval(g, args)
	if err != nil {
		panic("refEval: " + err.Error())
	}
	return vals
}
