package plan

import (
	"slices"

	"github.com/ag-go/ag/backend"
)

// Fusion: a backend cuts the number of dispatches (each costs several
// microseconds of barrier and launch on a GPU, most of a small training step)
// by computing chains of pointwise ops inside one generated kernel. Fuse
// decides which nodes share a kernel; the backend generates the kernels:
//
//   - A pointwise node (unary, binary, fill, reshape, expand, permute,
//     slice_rows, get_rows, one_hot: see Pointwise) read by exactly one
//     other node that can evaluate it per element (a pointwise node or a
//     Prologue op such as sum/max) is inlined into that reader: it gets no
//     buffer and no dispatch. Constant subgraphs (fills and pointwise ops
//     of them) and views (reshape, expand, permute, slice_rows) of stored
//     values are inlined into every such reader.
//   - A Core op (matmul, sum, max) read only by such a chain becomes the
//     core of the chain's root: the root's kernel is the core's kernel with
//     the chain as its epilogue, evaluated on each result before the store
//     (bias add + ReLU after a matmul, the ReLU mask after a backward
//     matmul, the loss scale after a sum).
//   - inside(x, A>=0, B) where relu(x) is also computed reads relu(x)
//     instead (the same mask), so x often has one reader left and fuses.
//   - Runs of in-place updates of one op (AdamW, SGD) separated only by arg
//     nodes become one dispatch over all their tensors at the position of
//     the last one.
//
// Nothing is moved across an in-place op, and a kernel binds at most
// FuseCaps.MaxBindings values, each within FuseCaps.MaxBindingBytes; where
// that fails the chain is cut into more kernels.

// FuseCaps are what a backend's generated kernels can do and the device
// limits they live within: Fuse's parameters.
type FuseCaps struct {
	// MaxBindings bounds the buffers one kernel binds (WebGPU's
	// maxStorageBuffersPerShaderStage), FixedBindings included.
	MaxBindings int
	// FixedBindings are the bindings every kernel has besides the values it
	// reads and writes (WebGPU: the parameter buffer).
	FixedBindings int
	// MaxBindingBytes bounds one bound value, in bytes (4 per element);
	// 0: no limit.
	MaxBindingBytes uint64
	// Inline reports whether a node of op can be computed inside its
	// reader's kernel: its value at one index from its inputs at a few
	// indices. Such ops also evaluate inlined inputs and are the roots of
	// epilogue chains. Pointwise is the full set; nil: nothing is inlined.
	Inline func(op backend.Op) bool
	// Prologue reports whether a kernel of op (not itself inlined) also
	// evaluates inlined inputs (WebGPU: sum and max read a pointwise chain
	// as they reduce). nil: none besides the Inline ops.
	Prologue func(op backend.Op) bool
	// Core reports whether a kernel of op can run a pointwise chain that
	// reads its result as an epilogue (WebGPU: matmul, sum, max). A matmul
	// core binds its two operands first, each separately. nil: none.
	Core func(op backend.Op) bool
	// GroupUpdates joins runs of in-place updates into one kernel.
	GroupUpdates bool
}

// Fusion is a graph's fusion plan: which nodes share a kernel.
type Fusion struct {
	// Graph is the graph the kernels compute: Fuse's input with the
	// ReLU-mask rewrite applied (a copy; the input is not changed).
	Graph *backend.Graph
	// Inline[i]: node i is computed inside the kernel of the root that
	// reads it (a core included); it has no storage and no dispatch.
	Inline []bool
	// Core[r] is the node whose kernel computes root r with r's chain as
	// its epilogue, else -1.
	Core []int
	// Group[i] lists the in-place nodes dispatched together at i (the last
	// of them); Deferred marks the other members.
	Group    [][]int
	Deferred []bool
	// Words marks the get_rows of packed words (Graph.WordGathers): bits
	// that a generated kernel would move as f32 values, so nothing is
	// inlined into them (and only unpacks, which inline nothing, read
	// them).
	Words []bool
}

// Pointwise reports whether a node of op has its value at one index
// computed from its inputs at a few indices (no reduction, no scatter):
// the ops a generated kernel can evaluate inside its reader.
func Pointwise(op backend.Op) bool {
	if op.IsUnary() || op.IsBinary() {
		return true // by class: each is its row of backend.OpInfo
	}
	if op.IsComposite() {
		return false // a backend's native composite is a kernel of its own
	}
	switch op {
	case backend.OpFill, backend.OpReshape, backend.OpExpand, backend.OpPermute,
		backend.OpSliceRows, backend.OpGetRows, backend.OpOneHot:
		return true
	case backend.OpArg, backend.OpSum, backend.OpMax, backend.OpSoftmax, backend.OpLogSoftmax,
		backend.OpConcatRows, backend.OpScatterAddRows, backend.OpMatMul, backend.OpAttention,
		backend.OpAdamW, backend.OpSGD, backend.OpRandUniform,
		backend.OpPackF16, backend.OpUnpackF16, backend.OpPackBF16, backend.OpUnpackBF16:
		return false
	}
	backend.Unknown("plan.Pointwise", op)
	return false
}

// isIndexOnly reports whether a pointwise op only moves values of its one
// input (no arithmetic).
func isIndexOnly(op backend.Op) bool {
	switch op {
	case backend.OpReshape, backend.OpExpand, backend.OpPermute, backend.OpSliceRows:
		return true
	}
	return false
}

// Unfused is the plan of a backend that fuses nothing (every node its own
// kernel) over g itself.
func Unfused(g *backend.Graph) *Fusion {
	nn := len(g.Nodes)
	f := &Fusion{Graph: g, Inline: make([]bool, nn), Core: make([]int, nn), Group: make([][]int, nn),
		Deferred: make([]bool, nn), Words: g.WordGathers()}
	for i := range f.Core {
		f.Core[i] = -1
	}
	return f
}

// Fuse decides which nodes of g share a kernel within c. It does not
// change g.
func Fuse(g *backend.Graph, c FuseCaps) *Fusion {
	nn := len(g.Nodes)
	fg := &backend.Graph{Nodes: slices.Clone(g.Nodes), Outputs: g.Outputs, NumArgs: g.NumArgs}
	f := Unfused(fg)
	inlines := func(op backend.Op) bool { return c.Inline != nil && c.Inline(op) }
	accepts := func(op backend.Op) bool { return inlines(op) || c.Prologue != nil && c.Prologue(op) }
	core := func(op backend.Op) bool { return c.Core != nil && c.Core(op) }
	nodes := fg.Nodes
	// ReLU-mask rewrite: inside(x, a, b) with a >= 0 equals
	// inside(relu(x), a, b) (x <= 0 and NaN give 0 both ways). Not for an
	// x that lives in an arg: an in-place update between could change it.
	reluOf := map[int]int{}
	for i, n := range nodes {
		if n.Op == backend.OpReLU {
			if _, ok := reluOf[n.In[0]]; !ok {
				reluOf[n.In[0]] = i
			}
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if n.Op != backend.OpInside || !(n.A >= 0) {
			continue
		}
		if r, ok := reluOf[n.In[0]]; ok && r < i && argOf(fg, n.In[0]) < 0 {
			n.In = []int{r}
		}
	}

	isOut := make([]bool, nn)
	for _, o := range fg.Outputs {
		isOut[o.Node] = true
	}
	users := make([][]int, nn)
	for i, n := range nodes {
		for k, j := range n.In {
			if !slices.Contains(n.In[:k], j) {
				users[j] = append(users[j], i)
			}
		}
	}
	// inplaceBefore[i]: in-place nodes with index < i.
	inplaceBefore := make([]int, nn+1)
	for i, n := range nodes {
		inplaceBefore[i+1] = inplaceBefore[i]
		if n.Op.InPlace() {
			inplaceBefore[i+1]++
		}
	}
	between := func(j, c int) bool { return inplaceBefore[c]-inplaceBefore[j+1] > 0 }
	isConst := make([]bool, nn)
	for i, n := range nodes {
		switch {
		case n.Op == backend.OpFill:
			isConst[i] = true
		case inlines(n.Op) && len(n.In) > 0:
			c := true
			for _, j := range n.In {
				c = c && isConst[j]
			}
			isConst[i] = c
		}
	}
	for j, n := range nodes {
		if !inlines(n.Op) || isOut[j] || len(users[j]) == 0 {
			continue
		}
		all := true
		for _, u := range users[j] {
			all = all && accepts(nodes[u].Op) && !f.Words[u]
		}
		crosses := false
		for _, u := range users[j] {
			crosses = crosses || between(j, u)
		}
		switch {
		case isConst[j] && all:
			f.Inline[j] = true
		case len(users[j]) == 1 && all && !crosses:
			f.Inline[j] = true
		case isIndexOnly(n.Op) && !f.Inline[n.In[0]] && all && !crosses:
			// A view of a stored value costs an index computation in each
			// reader: cheaper than a copy.
			f.Inline[j] = true
		}
	}
	// Cores: a core op whose one reader is a pointwise chain that reads it
	// at the chain's own index.
	// rootOf follows single readers up to the root whose kernel computes
	// j, or returns -1 where a duplicated node has several.
	rootOf := func(j int) int {
		for f.Inline[j] {
			if len(users[j]) != 1 {
				return -1
			}
			j = users[j][0]
		}
		return j
	}
	for m, n := range nodes {
		if !core(n.Op) || isOut[m] || len(users[m]) != 1 {
			continue
		}
		u := users[m][0]
		if !inlines(nodes[u].Op) || between(m, u) {
			continue
		}
		r := rootOf(u)
		if r < 0 || !inlines(nodes[r].Op) || f.Core[r] >= 0 || between(m, r) || !f.identityPath(r, m) {
			continue
		}
		f.Core[r], f.Inline[m] = m, true
	}
	// Cut kernels that bind too many buffers or too large ones; repeat, as
	// cutting a constant shared by several kernels changes the others.
	for changed := true; changed; {
		changed = false
		for r := nn - 1; r >= 0; r-- {
			if f.Inline[r] || !f.Fused(r) {
				continue
			}
			for f.Fused(r) && !f.kernelFits(r, c) {
				changed = true
				if m := f.Core[r]; m >= 0 {
					f.Core[r], f.Inline[m] = -1, false
					continue
				}
				for _, j := range nodes[r].In {
					f.Inline[j] = false
				}
			}
		}
	}
	if c.GroupUpdates {
		f.groupUpdates(c)
	}
	return f
}

// identityPath reports whether every path from root r down to m through
// inlined nodes reads m at r's own linear index (unary ops, binaries whose
// operand has the node's shape, reshapes), as an epilogue needs.
func (f *Fusion) identityPath(r, m int) bool {
	ok := true
	var walk func(i int, ident bool)
	walk = func(i int, ident bool) {
		if i == m {
			ok = ok && ident
			return
		}
		if i != r && !f.Inline[i] {
			return
		}
		n := &f.Graph.Nodes[i]
		for _, j := range n.In {
			id := ident
			switch {
			case n.Op.IsUnary(), n.Op == backend.OpReshape:
			case n.Op.IsBinary():
				id = id && slices.Equal(f.Graph.Nodes[j].Shape, n.Shape)
			default:
				id = false
			}
			walk(j, id)
		}
	}
	walk(r, true)
	return ok
}

// Fused reports whether root r's kernel is generated by fusion (it inlines
// an input or has a core) rather than lowered node by node.
func (f *Fusion) Fused(r int) bool {
	if f.Core[r] >= 0 {
		return true
	}
	return slices.ContainsFunc(f.Graph.Nodes[r].In, func(j int) bool { return f.Inline[j] })
}

// Members returns the nodes root r's kernel computes: r and every node
// inlined into it (its core included), each once.
func (f *Fusion) Members(r int) []int {
	out := []int{r}
	seen := map[int]bool{r: true}
	var walk func(i int)
	walk = func(i int) {
		for _, j := range f.Graph.Nodes[i].In {
			if f.Inline[j] && !seen[j] {
				seen[j] = true
				out = append(out, j)
				walk(j)
			}
		}
	}
	walk(r)
	return out
}

// Computes returns the nodes the kernel at node i computes (a profiler
// shares its time among them): the update group dispatched at i, or i and
// the nodes inlined into it; nil where i has no kernel of its own (it is
// inlined or deferred into a group).
func (f *Fusion) Computes(i int) []int {
	switch {
	case f.Inline[i] || f.Deferred[i]:
		return nil
	case f.Group[i] != nil:
		return f.Group[i]
	}
	return f.Members(i)
}

// Kernels maps each kernel that computes more than its own node (a fused
// chain, an update group) to the nodes it computes, among the nodes needed
// (Plan.Needed): what a per-node clock (backend.NewNodeClock) splits a
// kernel's time among.
func (f *Fusion) Kernels(needed []bool) map[int][]int {
	out := map[int][]int{}
	for i := range f.Graph.Nodes {
		if ms := f.Computes(i); needed[i] && len(ms) > 1 {
			out[i] = ms
		}
	}
	return out
}

// Reads returns the stored nodes root r's kernel reads, each once, in the
// order first met (for a matmul core its two operands first).
func (f *Fusion) Reads(r int) []int {
	var out []int
	seen := map[int]bool{}
	add := func(j int) {
		if !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	if m := f.Core[r]; m >= 0 && f.Graph.Nodes[m].Op == backend.OpMatMul {
		add(f.Graph.Nodes[m].In[0])
		add(f.Graph.Nodes[m].In[1])
	}
	var walk func(i int)
	walk = func(i int) {
		for _, j := range f.Graph.Nodes[i].In {
			if f.Inline[j] {
				walk(j)
			} else {
				add(j)
			}
		}
	}
	walk(r)
	return out
}

// EpilogueReads reports whether root r's chain reads node j other than
// through its core m (an epilogue reading an operand of its matmul).
func (f *Fusion) EpilogueReads(r, m, j int) bool {
	var walk func(i int) bool
	walk = func(i int) bool {
		for _, x := range f.Graph.Nodes[i].In {
			if x == j || (x != m && f.Inline[x] && walk(x)) {
				return true
			}
		}
		return false
	}
	return walk(r)
}

// Options are the planner's options for the fused graph: inlined nodes
// have no storage, a fused kernel reads the leaves of its chain, and update
// groups run at their last member. The caller adds its limits and copy
// rules.
func (f *Fusion) Options() Options {
	g := f.Graph
	runsAt := make([]int, len(g.Nodes))
	for i := range runsAt {
		runsAt[i] = i
	}
	for last, members := range f.Group {
		for _, j := range members {
			runsAt[j] = last
		}
	}
	return Options{
		Inline: f.Inline,
		RunsAt: runsAt,
		Reads: func(i int) []int {
			if f.Fused(i) {
				return f.Reads(i)
			}
			return g.Nodes[i].In
		},
	}
}

// bindingFits reports whether a value of n elements fits one binding.
func (c FuseCaps) bindingFits(n int) bool {
	return c.MaxBindingBytes == 0 || uint64(n)*4 <= c.MaxBindingBytes
}

// kernelFits checks root r's fused kernel against the binding limits.
func (f *Fusion) kernelFits(r int, c FuseCaps) bool {
	rd := f.Reads(r)
	nb := len(rd) + c.FixedBindings + 1 // and the output
	if m := f.Core[r]; m >= 0 && f.Graph.Nodes[m].Op == backend.OpMatMul && f.Graph.Nodes[m].In[0] == f.Graph.Nodes[m].In[1] {
		nb++ // one stored node bound as both operands
	}
	if nb > c.MaxBindings || !c.bindingFits(backend.NumElems(f.Graph.Nodes[r].Shape)) {
		return false
	}
	for _, j := range rd {
		if !c.bindingFits(backend.NumElems(f.Graph.Nodes[j].Shape)) {
			return false
		}
	}
	return true
}

// argOf returns the arg a node's value lives in when it is a view of one
// (an arg node, a reshape of one, an in-place update of one), else -1.
func argOf(g *backend.Graph, i int) int {
	for {
		n := &g.Nodes[i]
		switch {
		case n.Op == backend.OpArg:
			return n.Arg
		case n.Op == backend.OpReshape, n.Op.InPlace():
			i = n.In[0]
		default:
			return -1
		}
	}
}

// groupUpdates joins runs of in-place updates of one op that only arg
// nodes separate into one dispatch at the last member. Members must write
// distinct args, read no arg another member writes, and the kernel must fit
// the binding limits (the fixed bindings, the distinct hyperparameter
// inputs, the last input of each, and the members' other operands).
func (f *Fusion) groupUpdates(c FuseCaps) {
	nodes := f.Graph.Nodes
	var cur []int
	flush := func() {
		if len(cur) > 1 {
			last := cur[len(cur)-1]
			f.Group[last] = cur
			for _, j := range cur[:len(cur)-1] {
				f.Deferred[j] = true
			}
		}
		cur = nil
	}
	fits := func(members []int) bool {
		hp := map[int]bool{}
		writes, reads := map[int]bool{}, map[int]bool{}
		nb := c.FixedBindings
		for _, j := range members {
			n := &nodes[j]
			hp[n.In[len(n.In)-1]] = true
			nb += len(n.In) - 1
			targets := backend.UpdateTargets(n.Op)
			for k, in := range n.In {
				a := argOf(f.Graph, in)
				if slices.Contains(targets, k) {
					if writes[a] || reads[a] {
						return false
					}
					writes[a] = true
				} else if a >= 0 {
					if writes[a] {
						return false
					}
					reads[a] = true
				}
				if !c.bindingFits(backend.NumElems(nodes[in].Shape)) {
					return false
				}
			}
		}
		return nb+len(hp) <= c.MaxBindings
	}
	for i, n := range nodes {
		switch {
		case n.Op == backend.OpArg:
			continue
		case n.Op.InPlace():
			if len(cur) > 0 && nodes[cur[0]].Op != n.Op {
				flush()
			}
			if fits(append(slices.Clone(cur), i)) {
				cur = append(cur, i)
			} else {
				flush()
				cur = []int{i}
			}
		default:
			flush()
		}
	}
	flush()
}
