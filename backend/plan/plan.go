// Package plan is the executor planning every backend shares (in the
// manner of ggml-backend's graph allocator and tinygrad's memory planner):
// it validates a graph against the device's limits, removes nodes no output
// needs, decides which values are views of others, places outputs straight
// into their args where that is safe, assigns every other stored value a
// slot of intermediate memory reused by liveness, and sizes the args. A
// backend then supplies kernels, a dispatch loop and its memory calls.
//
// Fuse (fuse.go) decides which nodes share a kernel, from what a backend
// states its generated kernels can do and its binding limits (FuseCaps);
// the resulting Fusion's Options tell Make which nodes have no storage of
// their own, where each kernel runs and what it reads, so the rules stay
// one. The backend generates the fused kernels.
//
// Expand (expand.go) runs before Compile: it decomposes the composites a
// backend has no kernel for and lowers nodes above the rank its kernels
// take (rank.go: tensors have up to backend.MaxRank dimensions, kernels
// backend.NativeRank unless Caps.KernelRank says more).
//
// DispatchLimits (dispatch.go) is the arithmetic a GPU backend lowers a
// node with: workgroup grids folded within the device's per-dimension
// limit, and the bound ranges a node over a buffer larger than one storage
// binding is split into; PackParams lays every dispatch's parameters out in
// one buffer. Neither knows a GPU API or a kernel.
package plan

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
)

// Limits are the device limits a graph must respect.
type Limits struct {
	// MaxStoreElems bounds one stored value (a slot, an arg), in elements:
	// the device's largest buffer. 0: no limit.
	MaxStoreElems int
	// MaxIndexElems bounds the elements of any node, stored or not: WGSL
	// kernels index with u32. 0: no limit.
	MaxIndexElems int
	// FreeBytes is the device memory free for the plan's intermediates;
	// Make fails, naming the size, when they need more. 0: unchecked.
	FreeBytes uint64
}

// Options describe how a backend runs a graph.
type Options struct {
	Limits
	// Inline[i] means node i is computed inside the kernel of the node
	// that reads it (fusion): it has no storage. nil: no node is.
	Inline []bool
	// RunsAt[i] is the position of the kernel that reads node i's inputs
	// (fused in-place groups run at their last member). nil: i.
	RunsAt []int
	// Reads(i) lists the stored values node i's kernel reads (a fused
	// kernel reads the leaves of its chain). nil: its inputs.
	Reads func(i int) []int
	// SliceViews lets a SliceRows of a stored value be a view at an element
	// offset. WebGPU binds storage at aligned offsets only, so it copies.
	SliceViews bool
	// Composites are the composite ops the backend lowers natively
	// (its Caps.Composites); Make fails on any other, which Expand should
	// have decomposed.
	Composites []backend.Op
	// Unsupported are ops the device cannot run (its Caps.Unsupported,
	// which core plans around); Make fails on them, naming Device.
	Unsupported []backend.Op
	Device      string
	// KernelRank is the largest rank the kernels take (Caps.KernelRank;
	// 0: backend.NativeRank); Make fails on a node above it, which
	// Expand should have lowered.
	KernelRank int
	// CopiesAtEnd copies the outputs that cannot be computed in place after
	// the last kernel (WebGPU: after the compute pass) rather than right
	// after their node.
	CopiesAtEnd bool
}

// Kind says where a value lives.
type Kind uint8

// The places of a value.
const (
	None Kind = iota // not stored: not needed, or computed inside another kernel
	Arg              // args[Idx][Off:]
	Slot             // slot Idx at element Off
)

// Loc is where a node's value lives during a run.
type Loc struct {
	Kind Kind
	Idx  int
	Off  int // elements
}

// Copy copies node Node's value into args[Arg] (whole, from its start).
type Copy struct{ Node, Arg int }

// Plan is a graph's execution plan.
type Plan struct {
	// Needed marks the nodes an output or an in-place update depends on;
	// a backend runs no other node.
	Needed []bool
	// View marks nodes whose value is their input's storage (a reshape, a
	// slice at an offset, an in-place update's arg): no kernel computes them.
	View []bool
	// Loc is where each node's value lives.
	Loc []Loc
	// Slots are the intermediate buffers, in elements.
	Slots []int
	// After[i] are the output copies right after node i; AtEnd those after
	// the last node (with CopiesAtEnd, every copy).
	After [][]Copy
	AtEnd []Copy
	// ArgNeed[a] is the elements args[a] must hold (0: unused).
	ArgNeed []int
	// SlotBytes is the memory of the slots together.
	SlotBytes uint64
}

// Make validates g against o's limits and plans it.
func Make(g *backend.Graph, o Options) (*Plan, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	for i := range g.Nodes {
		op := g.Nodes[i].Op
		if slices.Contains(o.Unsupported, op) {
			return nil, fmt.Errorf("plan.Make: node %d: op %v is not supported on %s (Caps.Unsupported)", i, op, o.Device)
		}
		if op.IsComposite() && !slices.Contains(o.Composites, op) {
			return nil, fmt.Errorf("plan.Make: node %d: composite %v is not lowered natively here (plan.Expand decomposes it before Compile)", i, op)
		}
		if r := (backend.Caps{KernelRank: o.KernelRank}).Rank(); len(g.Nodes[i].Shape) > r {
			return nil, fmt.Errorf("plan.Make: node %d (%v %v): rank %d, above the %d this backend's kernels take (plan.Expand lowers it before Compile)", i, op, g.Nodes[i].Shape, len(g.Nodes[i].Shape), r)
		}
	}
	n := len(g.Nodes)
	pl := &Plan{Needed: make([]bool, n), View: make([]bool, n), Loc: make([]Loc, n),
		After: make([][]Copy, n), ArgNeed: make([]int, g.NumArgs)}
	inline := func(i int) bool { return o.Inline != nil && o.Inline[i] }
	pos := func(i int) int {
		if o.RunsAt != nil {
			return o.RunsAt[i]
		}
		return i
	}
	reads := func(i int) []int {
		if o.Reads != nil && !inline(i) {
			return o.Reads(i)
		}
		return g.Nodes[i].In
	}
	isOut := make([]bool, n)
	argWrite := make([]bool, g.NumArgs)
	for _, out := range g.Outputs {
		isOut[out.Node] = true
		argWrite[out.Arg] = true
	}
	// Needed: outputs, updates, and what they read.
	for i := n - 1; i >= 0; i-- {
		nd := &g.Nodes[i]
		if isOut[i] || nd.Op.InPlace() {
			pl.Needed[i] = true
		}
		if !pl.Needed[i] {
			continue
		}
		for _, in := range nd.In {
			pl.Needed[in] = true
		}
		if nd.Op.InPlace() {
			for _, k := range backend.UpdateTargets(nd.Op) {
				argWrite[g.Nodes[nd.In[k]].Arg] = true
			}
		}
	}
	for i := range g.Nodes {
		if !pl.Needed[i] {
			continue
		}
		ne := backend.NumElems(g.Nodes[i].Shape)
		if o.MaxIndexElems > 0 && ne > o.MaxIndexElems {
			return nil, fmt.Errorf("plan: node %d (%s %v) has %d elements, more than the %d this device's kernels can index", i, g.Nodes[i].Op, g.Nodes[i].Shape, ne, o.MaxIndexElems)
		}
	}
	// Views: the value is (a part of) its input's storage. root[i] is the
	// node owning that storage, off[i] the element offset in it.
	root := make([]int, n)
	off := make([]int, n)
	for i := range g.Nodes {
		root[i] = i
		nd := &g.Nodes[i]
		switch {
		case !pl.Needed[i] || inline(i):
		case nd.Op.InPlace():
			pl.View[i] = true
		case nd.Op == backend.OpReshape || nd.Op == backend.OpSliceRows && o.SliceViews:
			in := nd.In[0]
			if inline(in) {
				break // the input has no storage to view
			}
			if r := &g.Nodes[root[in]]; r.Op == backend.OpArg && argWrite[r.Arg] {
				break // a view of an arg the graph writes could see the write
			}
			pl.View[i] = true
			if nd.Op == backend.OpSliceRows {
				off[i] = nd.Start * backend.NumElems(nd.Shape[1:])
			}
		}
		if pl.View[i] {
			root[i], off[i] = root[nd.In[0]], off[i]+off[nd.In[0]]
		}
	}
	// Last use of each storage, by kernel position (len(nodes): the end).
	end := n
	lastUse := make([]int, n)
	for i := range lastUse {
		lastUse[i] = -1
	}
	for i := range g.Nodes {
		if !pl.Needed[i] || inline(i) || pl.View[i] && !g.Nodes[i].Op.InPlace() {
			continue
		}
		for _, j := range reads(i) {
			r := root[j]
			lastUse[r] = max(lastUse[r], pos(i))
		}
	}
	// The last position at which each arg is read (through any view).
	argRead := make([]int, g.NumArgs)
	for a := range argRead {
		argRead[a] = -1
	}
	for i, nd := range g.Nodes {
		if nd.Op == backend.OpArg && pl.Needed[i] {
			argRead[nd.Arg] = max(argRead[nd.Arg], lastUse[i], i)
		}
	}
	// Outputs, in node order: straight into the arg when the value's own
	// storage can be the arg, else a copy.
	outs := slices.Clone(g.Outputs)
	slices.SortStableFunc(outs, func(a, b backend.Output) int { return a.Node - b.Node })
	direct := make([]int, n)
	for i := range direct {
		direct[i] = -1
	}
	for _, out := range outs {
		r := root[out.Node]
		rn := &g.Nodes[r]
		size := backend.NumElems(g.Nodes[out.Node].Shape)
		if rn.Op == backend.OpArg {
			if rn.Arg == out.Arg && off[out.Node] == 0 {
				continue // the value already lives in that arg
			}
		} else if direct[r] < 0 && off[out.Node] == 0 && backend.NumElems(rn.Shape) == size && argRead[out.Arg] < pos(r) {
			direct[r] = out.Arg
			argRead[out.Arg] = end // written from here on
			continue
		}
		if !o.CopiesAtEnd && argRead[out.Arg] <= out.Node {
			pl.After[out.Node] = append(pl.After[out.Node], Copy{out.Node, out.Arg})
			lastUse[r] = max(lastUse[r], out.Node)
			argRead[out.Arg] = end
		} else {
			pl.AtEnd = append(pl.AtEnd, Copy{out.Node, out.Arg})
			lastUse[r] = end
		}
	}
	// Slots by liveness. A node's slot is taken before the slots of the
	// values it reads are given back, so no kernel's output overlaps an
	// input.
	freeAt := make([][]int, end+1)
	for r := range g.Nodes {
		if pl.Needed[r] && root[r] == r && !inline(r) {
			lu := max(lastUse[r], r)
			freeAt[lu] = append(freeAt[lu], r)
		}
	}
	var free []int
	for i, nd := range g.Nodes {
		switch {
		case !pl.Needed[i] || inline(i):
			pl.Loc[i] = Loc{}
		case nd.Op == backend.OpArg:
			pl.Loc[i] = Loc{Kind: Arg, Idx: nd.Arg}
		case pl.View[i]:
			l := pl.Loc[nd.In[0]]
			if nd.Op == backend.OpSliceRows {
				l.Off += nd.Start * backend.NumElems(nd.Shape[1:])
			}
			pl.Loc[i] = l
		case direct[i] >= 0:
			pl.Loc[i] = Loc{Kind: Arg, Idx: direct[i]}
		default:
			need := backend.NumElems(nd.Shape)
			pl.Loc[i] = Loc{Kind: Slot, Idx: pl.takeSlot(&free, need)}
		}
		for _, r := range freeAt[i] {
			if l := pl.Loc[r]; l.Kind == Slot && root[r] == r {
				free = append(free, l.Idx)
			}
		}
	}
	// Sizes.
	for i, nd := range g.Nodes {
		l := pl.Loc[i]
		if pl.Needed[i] && l.Kind == Arg {
			pl.ArgNeed[l.Idx] = max(pl.ArgNeed[l.Idx], l.Off+backend.NumElems(nd.Shape))
		}
	}
	for _, out := range g.Outputs {
		pl.ArgNeed[out.Arg] = max(pl.ArgNeed[out.Arg], backend.NumElems(g.Nodes[out.Node].Shape))
	}
	for s, ne := range pl.Slots {
		if o.MaxStoreElems > 0 && ne > o.MaxStoreElems {
			return nil, fmt.Errorf("plan: intermediate %d of %d elements exceeds the device's largest buffer (%d elements)", s, ne, o.MaxStoreElems)
		}
		pl.SlotBytes += 4 * uint64(ne)
	}
	if o.FreeBytes > 0 && pl.SlotBytes > o.FreeBytes {
		return nil, fmt.Errorf("plan: the program's intermediates need %d bytes at their peak, more than the %d bytes free", pl.SlotBytes, o.FreeBytes)
	}
	return pl, nil
}

// takeSlot picks the smallest free slot that fits, else grows the largest
// free one, else adds a slot. A value that would fill less than half of
// the smallest fitting slot gets a slot of its own instead: the large slot
// stays free for the large values to come (a training step's 16-bit saved
// activations, each half the size of the f32 values freed around it, would
// otherwise take one f32-sized slot each and save nothing).
func (pl *Plan) takeSlot(free *[]int, need int) int {
	best, bi := -1, -1
	for k, s := range *free {
		c := pl.Slots[s]
		switch {
		case best == -1:
			best, bi = s, k
		case c >= need && (pl.Slots[best] < need || c < pl.Slots[best]):
			best, bi = s, k
		case pl.Slots[best] < need && c > pl.Slots[best]:
			best, bi = s, k
		}
	}
	if best == -1 || pl.Slots[best] >= 2*need && need > 0 {
		pl.Slots = append(pl.Slots, need)
		return len(pl.Slots) - 1
	}
	*free = slices.Delete(*free, bi, bi+1)
	pl.Slots[best] = max(pl.Slots[best], need)
	return best
}
