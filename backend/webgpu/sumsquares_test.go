package webgpu

import (
	"fmt"
	"testing"

	"github.com/ag-go/ag/backend"
)

// sum_squares is a dispatch per MaxStorageBuffers-2 inputs here (the
// backend lists it in Caps.Composites), each summing chunks of its inputs'
// squares, and one adding the chunks in order, where the composition made
// a square, a sum and an add per input. Over more inputs than one dispatch
// binds, inputs of many chunks, inputs larger than one binding (bound in
// ranges) and lanes looping at most maxTrips, against the float64
// reference; the conformance suite checks the special values
// (sum_squares/...).
func TestSumSquaresTwoKernels(t *testing.T) {
	be := openTest(t)
	if !be.Caps().Native(backend.OpSumSquares) {
		t.Fatalf("Caps.Composites = %v: want sum_squares native", be.Caps().Composites)
	}
	per := int(be.info.MaxStorageBuffers) - 2
	for _, c := range []struct {
		name             string
		inputs, big      int    // inputs, and the length of every third one (the others 1..9 values)
		bindLimit, trips uint64 // 0: the device's
	}{
		{"groups", per + 3, 3 * ssChunk, 0, 0},
		{"ranges", 5, 3000, 4096, 0},
		{"trips", 4, 5000, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.bindLimit > 0 {
				withBindLimit(t, be, c.bindLimit)
			}
			if c.trips > 0 {
				withMaxTrips(t, be, int(c.trips))
			}
			b := newGB(uint64(c.inputs))
			var in []int
			for k := range c.inputs {
				n := 1 + k%9
				if k%3 == 0 {
					n = c.big + k
				}
				in = append(in, b.rand(-2, 2, n))
			}
			b.out(b.node(backend.Node{Op: backend.OpSumSquares, In: in, Shape: []int{1}}))
			ks := compiledKernels(t, be, &b.g)
			groups := 0
			for _, k := range ks {
				if k.name != "sum_squares_total" {
					groups++
				}
			}
			if last := ks[len(ks)-1].name; last != "sum_squares_total" || groups < (c.inputs+per-1)/per || c.name == "groups" && groups != 2 {
				var names []string
				for _, k := range ks {
					names = append(names, k.name)
				}
				t.Errorf("sum_squares of %d inputs compiled to %v: want %d dispatches of parts (%d inputs each), then the total", c.inputs, names, (c.inputs+per-1)/per, per)
			}
			got, _ := runGraph(t, be, &b.g, b.args, 1, true)
			compare(t, fmt.Sprintf("sum_squares of %d inputs", c.inputs), got, reference(t, &b.g, b.args, 1), 1e-5)
		})
	}
}
