package backendtest

import (
	"math/rand/v2"

	"github.com/ag-go/ag/backend"
)

// everyOpCases run backend.SampleGraph for every op of the IR, with inputs
// drawn where the op is defined, against Eval. They need no edit when an
// op is added: an op that a backend's switch lacks fails here (each switch
// ends in backend.Unknown), whatever the hand-written cases cover.
func everyOpCases() []opCase {
	var cs []opCase
	for _, op := range backend.Ops() {
		cs = append(cs, opCase{"every-op/" + op.String(), tolKey(op), func(r *rand.Rand) []instance {
			return []instance{sampleInstance(r, op)}
		}})
	}
	return cs
}

// tolKey is the tolerance of op's results: its own entry in tolerances,
// else exact for an Exact op and the multi-node bound for the others.
func tolKey(op backend.Op) string {
	switch {
	case tolerances[op.String()] != (Tol{}) || op.String() == "max":
		return op.String()
	case op.Info().Exact:
		return "exact"
	}
	return "graph"
}

// sampleInstance fills SampleGraph(op)'s args: indices are whole numbers in
// range, hyperparameters are an optimizer's, the other inputs come from
// op's domain; unused args hold one value; the output holds the sentinel.
func sampleInstance(r *rand.Rand, op backend.Op) instance {
	g := backend.SampleGraph(op)
	info := op.Info()
	lo, hi := float64(info.Domain[0]), float64(info.Domain[1])
	if lo == 0 && hi == 0 {
		lo, hi = -4, 4
	}
	args := make([][]float32, g.NumArgs)
	role := map[int]string{} // arg index -> "index:<rows>" or "hyper"
	last := &g.Nodes[len(g.Nodes)-1]
	switch op {
	case backend.OpGetRows:
		role[g.Nodes[last.In[1]].Arg] = "index"
	case backend.OpScatterAddRows:
		role[g.Nodes[last.In[1]].Arg] = "index"
	case backend.OpOneHot:
		role[g.Nodes[last.In[0]].Arg] = "index"
	case backend.OpAttention:
		role[g.Nodes[last.In[3]].Arg] = "index" // a keep mask of 0s and 1s
	}
	if op.IsComposite() {
		for _, k := range backend.CompositeOf(op).Index {
			role[g.Nodes[last.In[k]].Arg] = "index" // labels
		}
	}
	if info.Class == backend.ClassRandom {
		role[g.Nodes[last.In[0]].Arg] = "state"
	}
	if info.Class == backend.ClassUpdate {
		role[g.Nodes[last.In[len(last.In)-1]].Arg] = "hyper"
	}
	for _, n := range g.Nodes {
		if n.Op != backend.OpArg {
			continue
		}
		ne := backend.NumElems(n.Shape)
		switch role[n.Arg] {
		case "index":
			d := make([]float32, ne)
			for i := range d {
				d[i] = float32(r.IntN(2))
			}
			args[n.Arg] = d
		case "state":
			args[n.Arg] = backend.RandState(r.Uint64(), r.Uint64())
		case "hyper":
			if op == backend.OpAdamW {
				args[n.Arg] = adamHP(2, 0.01)
			} else {
				args[n.Arg] = []float32{0.1, 0.9, 0.01}
			}
		default:
			args[n.Arg] = uniform(r, ne, lo, hi)
		}
	}
	for _, o := range g.Outputs {
		ne := backend.NumElems(g.Nodes[o.Node].Shape)
		args[o.Arg] = make([]float32, ne)
		for i := range args[o.Arg] {
			args[o.Arg][i] = -777.25
		}
	}
	for a := range args {
		if args[a] == nil {
			args[a] = []float32{0}
		}
	}
	return instance{g: g, args: args}
}
