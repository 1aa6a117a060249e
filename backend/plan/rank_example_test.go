package plan_test

import (
	"fmt"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
)

// A rank-6 permute that reverses its axes, lowered for kernels of rank 4
// (backend.NativeRank: every backend but the float64 reference): two
// permutes of at most 4 groups, each reading its input reshaped.
func ExampleExpand_rank() {
	s := []int{2, 3, 4, 5, 6, 7}
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: s},
		{Op: backend.OpPermute, In: []int{0}, Shape: []int{7, 6, 5, 4, 3, 2}, Perm: []int{5, 4, 3, 2, 1, 0}},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	lg, origin := plan.Expand(g, backend.Caps{}) // Caps.KernelRank 0: backend.NativeRank
	for i, n := range lg.Nodes {
		fmt.Println(n.Op, n.Shape, n.Perm, "from node", origin[i])
	}
	// Output:
	// arg [24 5 6 7] [] from node 0
	// reshape [2 3 4 210] [] from node 1
	// permute [4 3 2 210] [2 1 0 3] from node 1
	// reshape [24 5 6 7] [] from node 1
	// permute [7 6 5 24] [3 2 1 0] from node 1
}
