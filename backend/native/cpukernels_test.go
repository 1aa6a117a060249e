//go:build ggml

package native

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
)

// TestCPUKernels checks ggml-cpu's own kernels (ag_matmul_tn for A^T B,
// ag_transpose for the other transposed operands) against float64 at sizes
// that exercise the 6x16 tiles, their row and column remainders, and an
// uneven split between threads. K is up to 64, so the f32 sums stay within
// 1e-5 relative.
func TestCPUKernels(t *testing.T) {
	if a := driverAvailability(CPUName); !a.OK {
		testenv.SkipDevice(t, CPUName, a.Why)
	}
	be := open(t, CPUName)
	cases := []struct{ m, k, n int }{{1, 1, 1}, {6, 3, 16}, {7, 5, 17}, {13, 64, 37}, {64, 64, 1024}, {130, 33, 50}}
	for _, c := range cases {
		for _, tr := range [][2]bool{{true, false}, {false, false}, {true, true}, {false, true}} {
			t.Run(fmt.Sprintf("%dx%dx%d/tA=%v,tB=%v", c.m, c.k, c.n, tr[0], tr[1]), func(t *testing.T) {
				as, bs := []int{c.m, c.k}, []int{c.k, c.n}
				if tr[0] {
					as = []int{c.k, c.m}
				}
				if tr[1] {
					bs = []int{c.n, c.k}
				}
				g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{arg(0, as...), arg(1, bs...),
					{Op: backend.OpMatMul, In: []int{0, 1}, TransA: tr[0], TransB: tr[1], Shape: []int{c.m, c.n}}},
					Outputs: []backend.Output{{Node: 2, Arg: 2}}}
				r := rand.New(rand.NewPCG(uint64(c.m), uint64(c.n)))
				runAndCompare(t, be, g, [][]float32{randVals(r, c.m*c.k), randVals(r, c.k*c.n), make([]float32, c.m*c.n)}, 1e-5)
			})
		}
	}
}
