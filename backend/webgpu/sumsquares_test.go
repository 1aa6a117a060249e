package webgpu

import (
	"fmt"
	"testing"

	"github.com/ag-go/ag/backend"
)

// sum_squares runs natively: one dispatch per group of inputs a kernel
// binds and one adding the partial sums. Here over more inputs than one
// group, inputs larger than a binding (bound in ranges) and, with the loop
// bound lowered, chunks of one workgroup's lanes and several adding
// dispatches, against the float64 reference.
func TestSumSquaresNative(t *testing.T) {
	be := openTest(t)
	if !be.Caps().Native(backend.OpSumSquares) {
		t.Fatal("sum_squares is not in webgpu's Caps.Composites")
	}
	// more inputs than a kernel binds (lavapipe binds 16 or more), and
	// more partial sums than one workgroup adds at maxTrips 1 (256)
	var shapes [][]int
	for k := range 3 {
		shapes = append(shapes, []int{3}, []int{40, 50}, []int{7}, []int{1}, []int{300, 11 + k}, []int{2, 2, 2}, []int{5000}, []int{64, 64}, []int{9, 9}, []int{1000}, []int{33}, []int{2})
	}
	shapes = append(shapes, []int{300, 300})
	t.Logf("%d inputs, %d bound per kernel", len(shapes), be.info.MaxStorageBuffers-2)
	for _, c := range []struct {
		trips int
		bind  uint64
	}{{0, 0}, {1, 0}, {2, 4096}} {
		t.Run(fmt.Sprintf("maxTrips=%d/bindLimit=%d", c.trips, c.bind), func(t *testing.T) {
			if c.trips > 0 {
				withMaxTrips(t, be, c.trips)
			}
			if c.bind > 0 {
				withBindLimit(t, be, c.bind)
			}
			b := newGB(uint64(c.trips + 1))
			var in []int
			for _, s := range shapes {
				in = append(in, b.rand(-3, 3, s...))
			}
			b.out(b.node(backend.Node{Op: backend.OpSumSquares, In: in, Shape: []int{1}}))
			want := reference(t, &b.g, b.args, 1)
			got, n := runGraph(t, be, &b.g, b.args, 1, true)
			compare(t, "sum_squares", got, want, 1e-5)
			groups := ceilDiv(len(shapes), max(1, int(be.info.MaxStorageBuffers)-2))
			if groups < 2 {
				t.Errorf("%d inputs in one group: the test binds too few for the groups' path", len(shapes))
			}
			if c.trips == 0 && c.bind == 0 && n != groups+1 {
				t.Errorf("%d dispatches for %d inputs, want %d groups and one sum", n, len(shapes), groups)
			}
			if c.trips == 1 && n <= groups+1 {
				t.Errorf("%d dispatches with maxTrips 1: the partial sums took no extra adding dispatches", n)
			}
		})
	}
}
