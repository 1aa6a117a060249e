package cpu

import (
	"slices"

	"github.com/ag-go/ag/backend"
)

// The memory plan decides where each node's value lives:
//   - an OpArg node, or an in-place op (whose value is its updated w), lives
//     in the bound arg buffer;
//   - an Output is computed straight into its bound arg buffer when nothing
//     reads that arg at or after the node; otherwise it is computed into a
//     slot and copied (right after the node, or at the end of the run if the
//     arg is still read later, so that reads see the arg's old value);
//   - a reshape or row slice that is not an output aliases its input's
//     storage (a view), unless that storage is an arg the graph writes;
//   - every other value gets a slot: a slab of intermediate memory reused by
//     liveness, freed after the last node that reads it (aliases included).

type storeKind uint8

const (
	storeNone storeKind = iota // not needed: never computed
	storeArg                   // args[idx][off:]
	storeSlot                  // slots[idx][off:]
)

type store struct {
	kind storeKind
	idx  int
	off  int
}

// outCopy copies a node's value into an output arg after it is computed.
type outCopy struct {
	node, arg int
}

type plan struct {
	needed   []bool
	alias    []bool  // value is a view of In[0]'s storage
	root     []int   // node owning the storage a node's value lives in
	lastUse  []int   // per root: last node reading it (len(nodes) = the end)
	store    []store // per node
	slotCap  []int   // per slot, in float32s
	after    [][]outCopy
	atEnd    []outCopy
	argWrite []bool // arg is written by the graph (in place or as output)
}

func planGraph(g *backend.Graph) *plan {
	nn := len(g.Nodes)
	end := nn
	p := &plan{
		needed: make([]bool, nn), alias: make([]bool, nn), root: make([]int, nn),
		lastUse: make([]int, nn), store: make([]store, nn), after: make([][]outCopy, nn),
		argWrite: make([]bool, g.NumArgs),
	}
	isOut := make([]bool, nn)
	for _, o := range g.Outputs {
		isOut[o.Node] = true
		p.argWrite[o.Arg] = true
	}
	// Needed: outputs, side effects, and what they read.
	for i := nn - 1; i >= 0; i-- {
		n := &g.Nodes[i]
		if isOut[i] || n.Op.InPlace() {
			p.needed[i] = true
		}
		if !p.needed[i] {
			continue
		}
		for _, in := range n.In {
			p.needed[in] = true
		}
		if n.Op.InPlace() {
			p.argWrite[g.Nodes[n.In[0]].Arg] = true
			p.argWrite[g.Nodes[n.In[2]].Arg] = true
			if n.Op == backend.OpAdamW {
				p.argWrite[g.Nodes[n.In[3]].Arg] = true
			}
		}
	}
	// Roots and aliases.
	for i := range g.Nodes {
		n := &g.Nodes[i]
		p.root[i] = i
		p.lastUse[i] = -1
		switch {
		case n.Op.InPlace():
			p.alias[i] = true
		case (n.Op == backend.OpReshape || n.Op == backend.OpSliceRows) && !isOut[i]:
			r := p.root[n.In[0]]
			if rn := &g.Nodes[r]; rn.Op == backend.OpArg && p.argWrite[rn.Arg] {
				break // a view of an arg the graph writes could see the write
			}
			p.alias[i] = true
		}
		if p.alias[i] {
			p.root[i] = p.root[n.In[0]]
		}
	}
	for i := range g.Nodes {
		if !p.needed[i] {
			continue
		}
		for _, in := range g.Nodes[i].In {
			r := p.root[in]
			p.lastUse[r] = max(p.lastUse[r], i)
		}
	}
	// Args: the last node that reads each one, through any OpArg node.
	argBusy := make([]int, g.NumArgs)
	for i := range argBusy {
		argBusy[i] = -1
	}
	for i, n := range g.Nodes {
		if n.Op == backend.OpArg && p.needed[i] {
			argBusy[n.Arg] = max(argBusy[n.Arg], p.lastUse[i], i)
		}
	}
	// Outputs, in node order.
	outs := slices.Clone(g.Outputs)
	slices.SortStableFunc(outs, func(a, b backend.Output) int { return a.Node - b.Node })
	direct := make([]bool, nn)
	for _, o := range outs {
		n := &g.Nodes[o.Node]
		computed := n.Op != backend.OpArg && !p.alias[o.Node]
		if computed && !direct[o.Node] && argBusy[o.Arg] < o.Node {
			direct[o.Node] = true
			p.store[o.Node] = store{kind: storeArg, idx: o.Arg}
			argBusy[o.Arg] = end
			continue
		}
		if !computed && p.srcIsArg(g, o.Node, o.Arg) {
			continue // the value already lives in that arg
		}
		r := p.root[o.Node]
		if argBusy[o.Arg] <= o.Node {
			p.after[o.Node] = append(p.after[o.Node], outCopy{o.Node, o.Arg})
			p.lastUse[r] = max(p.lastUse[r], o.Node)
			argBusy[o.Arg] = end
		} else {
			p.atEnd = append(p.atEnd, outCopy{o.Node, o.Arg})
			p.lastUse[r] = end
		}
	}
	// Values that live in their arg.
	for i, n := range g.Nodes {
		if p.needed[i] && n.Op == backend.OpArg {
			p.store[i] = store{kind: storeArg, idx: n.Arg}
		}
	}
	// Slots by liveness. A node's slot is taken before the slots of its
	// inputs are released, so an output never overlaps an input.
	freeAt := make([][]int, end+1) // roots whose storage is free after node i
	for r := range g.Nodes {
		if p.needed[r] && p.root[r] == r {
			lu := max(p.lastUse[r], r)
			freeAt[lu] = append(freeAt[lu], r)
		}
	}
	var free []int // free slot indices
	for i := range g.Nodes {
		if p.needed[i] && !p.alias[i] && p.store[i].kind == storeNone {
			need := backend.NumElems(g.Nodes[i].Shape)
			p.store[i] = store{kind: storeSlot, idx: p.takeSlot(&free, need)}
		}
		for _, r := range freeAt[i] {
			if s := p.store[r]; s.kind == storeSlot {
				free = append(free, s.idx)
			}
		}
	}
	// Aliases share their input's storage, in node order so chains resolve.
	for i, n := range g.Nodes {
		if p.needed[i] && p.alias[i] {
			s := p.store[n.In[0]]
			if n.Op == backend.OpSliceRows {
				s.off += n.Start * backend.NumElems(n.Shape[1:])
			}
			p.store[i] = s
		}
	}
	return p
}

// srcIsArg reports whether node i's value already lives at the start of arg a.
func (p *plan) srcIsArg(g *backend.Graph, i, a int) bool {
	r := p.root[i]
	return g.Nodes[r].Op == backend.OpArg && g.Nodes[r].Arg == a && p.offsetOf(g, i) == 0
}

// offsetOf is the element offset of node i's value within its root.
func (p *plan) offsetOf(g *backend.Graph, i int) int {
	off := 0
	for p.alias[i] {
		n := &g.Nodes[i]
		if n.Op == backend.OpSliceRows {
			off += n.Start * backend.NumElems(n.Shape[1:])
		}
		i = n.In[0]
	}
	return off
}

// takeSlot picks the smallest free slot that fits, else grows the largest
// free one, else adds a slot.
func (p *plan) takeSlot(free *[]int, need int) int {
	best, bi := -1, -1
	for k, s := range *free {
		c := p.slotCap[s]
		switch {
		case best == -1:
			best, bi = s, k
		case c >= need && (p.slotCap[best] < need || c < p.slotCap[best]):
			best, bi = s, k
		case p.slotCap[best] < need && c > p.slotCap[best]:
			best, bi = s, k
		}
	}
	if best == -1 {
		p.slotCap = append(p.slotCap, need)
		return len(p.slotCap) - 1
	}
	*free = slices.Delete(*free, bi, bi+1)
	p.slotCap[best] = max(p.slotCap[best], need)
	return best
}
