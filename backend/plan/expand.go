package plan

import "github.com/ag-go/ag/backend"

// Expand returns g with every composite op that caps does not run natively
// (Caps.Composites) replaced by its decomposition (backend.Decompose), then
// every node above the rank its kernels take (Caps.Rank) rewritten into
// nodes of rank at most backend.NativeRank (rank.go; a composite above
// it is decomposed first), and origin, which names for each node of the
// result the node of g it comes from (a composite's primitives all name
// the composite), so that a caller can fold per-node times back onto g's
// nodes. When there is nothing to do it returns g itself and a nil origin.
// g is not modified; the result shares no slices with it that a later
// Expand would write.
//
// Callers expand before Compile (core, backendtest): a backend sees only
// the composites it declared and the ranks it takes.
func Expand(g *backend.Graph, caps backend.Caps) (*backend.Graph, []int) {
	xg, origin := decompose(g, caps)
	lg, lorigin := lowerRank(xg, caps.Rank())
	switch {
	case lorigin == nil:
		return xg, origin
	case origin == nil:
		return lg, lorigin
	}
	for k, j := range lorigin {
		lorigin[k] = origin[j]
	}
	return lg, lorigin
}

// decompose is Expand's first part: the composites caps does not run
// natively, or not at their rank, replaced by their decompositions.
func decompose(g *backend.Graph, caps backend.Caps) (*backend.Graph, []int) {
	native := func(i int) bool {
		n := &g.Nodes[i]
		if !caps.Native(n.Op) {
			return false
		}
		if len(n.Shape) > caps.Rank() {
			return false
		}
		for _, j := range n.In {
			if len(g.Nodes[j].Shape) > caps.Rank() {
				return false
			}
		}
		return true
	}
	todo := false
	for i := range g.Nodes {
		if g.Nodes[i].Op.IsComposite() && !native(i) {
			todo = true
			break
		}
	}
	if !todo {
		return g, nil
	}
	out := &backend.Graph{NumArgs: g.NumArgs, Nodes: make([]backend.Node, 0, 2*len(g.Nodes))}
	origin := make([]int, 0, cap(out.Nodes))
	at := make([]int, len(g.Nodes)) // node of g -> node of out holding its value
	for i := range g.Nodes {
		n := g.Nodes[i]
		in := make([]int, len(n.In))
		shapes := make([][]int, len(n.In))
		for k, j := range n.In {
			in[k], shapes[k] = at[j], g.Nodes[j].Shape
		}
		add := func(m backend.Node) int {
			out.Nodes = append(out.Nodes, m)
			origin = append(origin, i)
			return len(out.Nodes) - 1
		}
		// A composite its own Check refuses stays whole, for Compile's
		// Validate to refuse naming it: its primitives would fail under
		// another op's name, or not at all.
		if n.Op.IsComposite() && !native(i) && backend.CompositeOf(n.Op).Check(&n, func(k int) []int { return shapes[k] }) == nil {
			at[i] = backend.Decompose(&n, in, shapes, add)
			continue
		}
		n.In = in
		at[i] = add(n)
	}
	out.Outputs = make([]backend.Output, len(g.Outputs))
	for k, o := range g.Outputs {
		out.Outputs[k] = backend.Output{Node: at[o.Node], Arg: o.Arg}
	}
	return out, origin
}

// FoldTimes adds the times of an expanded graph's nodes (t, of the
// expanded graph's length) into those of the graph it was expanded from
// (into, by origin from Expand): a composite's time is that of its
// primitives, and how it was timed the first's that ran a kernel.
func FoldTimes(into, t *backend.NodeTimes, origin []int) {
	seen := make([]bool, len(into.Dur))
	for j, i := range origin {
		into.Dur[i] += t.Dur[j]
		if !seen[i] || into.How[i] == backend.TimeNone {
			into.How[i] = t.How[j]
			seen[i] = true
		}
	}
}
