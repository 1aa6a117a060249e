package webgpu

import (
	"github.com/ag-go/ag/backend"
	"slices"
)

// Fusion: Compile cuts the number of dispatches (each costs several
// microseconds of barrier and launch on a GPU, most of a small training step)
// by computing chains of pointwise ops inside one generated kernel:
//
//   - A pointwise node (unary, binary, fill, reshape, expand, permute,
//     slice_rows, get_rows, one_hot) read by exactly one other node that can
//     evaluate it per element (a pointwise node or a sum/max) is inlined into
//     that reader: it gets no buffer and no dispatch. Constant subgraphs
//     (fills and pointwise ops of them) and views (reshape, expand, permute,
//     slice_rows) of stored values are inlined into every such reader.
//   - A matmul, sum or max read only by such a chain becomes the core of the
//     chain's root: the root's kernel is the matmul (reduction) kernel with
//     the chain as its epilogue, evaluated on each result before the store
//     (bias add + ReLU after a matmul, the ReLU mask after a backward matmul,
//     the loss scale after a sum).
//   - inside(x, A>=0, B) where relu(x) is also computed reads relu(x)
//     instead (the same mask), so x often has one reader left and fuses.
//   - Runs of AdamW (SGD) nodes separated only by arg nodes become one
//     dispatch over all their tensors at the position of the last one.
//
// Nothing is moved across an in-place op, and a kernel binds at most the
// device's storage buffers per stage, each within the binding size limit;
// where that fails the chain is cut into more kernels.

// fusePlan is Compile's fusion decision.
type fusePlan struct {
	g *backend.Graph // the graph with the ReLU-mask rewrite applied (a copy)
	// inl: the node is computed inside the kernel of the root that reads
	// it (a core included); it has no storage and no dispatch of its own.
	inl []bool
	// core[r] is the matmul/sum/max node whose kernel computes root r with
	// r's chain as epilogue, else -1.
	core []int
	// group[i] lists the in-place nodes dispatched together at i (the last
	// of them); deferred marks the other members.
	group    [][]int
	deferred []bool
	// words marks the get_rows of packed words (Graph.WordGathers): bits
	// that a generated kernel would move as f32 values, so nothing is
	// inlined into them (and only unpacks, which inline nothing, read them).
	words []bool
}

// isPointwise reports whether a node's value at one index can be computed
// from its inputs at a few indices (no reduction): such a node can be
// inlined into its reader's kernel.
func isPointwise(op backend.Op) bool {
	switch {
	case op.IsUnary(), op.IsBinary():
		return true
	}
	switch op {
	case backend.OpFill, backend.OpReshape, backend.OpExpand, backend.OpPermute,
		backend.OpSliceRows, backend.OpGetRows, backend.OpOneHot:
		return true
	}
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

// acceptsInline reports whether a node's kernel can evaluate inlined inputs.
func acceptsInline(op backend.Op) bool {
	return isPointwise(op) || op == backend.OpSum || op == backend.OpMax
}

// fuseLimits is what planFusion needs of the device.
type fuseLimits struct {
	maxBinds  int    // storage buffers per shader stage
	bindLimit uint64 // bytes per binding
}

// planFusion decides what Compile fuses. It does not change g.
func planFusion(g *backend.Graph, lim fuseLimits, enabled bool) *fusePlan {
	nn := len(g.Nodes)
	fg := &backend.Graph{Nodes: append([]backend.Node(nil), g.Nodes...), Outputs: g.Outputs, NumArgs: g.NumArgs}
	fp := &fusePlan{g: fg, inl: make([]bool, nn), core: make([]int, nn), group: make([][]int, nn), deferred: make([]bool, nn), words: g.WordGathers()}
	for i := range fp.core {
		fp.core[i] = -1
	}
	if !enabled {
		return fp
	}
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
			dup := false
			for _, jj := range n.In[:k] {
				dup = dup || jj == j
			}
			if !dup {
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
		case isPointwise(n.Op) && len(n.In) > 0:
			c := true
			for _, j := range n.In {
				c = c && isConst[j]
			}
			isConst[i] = c
		}
	}
	for j, n := range nodes {
		if !isPointwise(n.Op) || isOut[j] || len(users[j]) == 0 {
			continue
		}
		all := true
		for _, u := range users[j] {
			all = all && acceptsInline(nodes[u].Op) && !fp.words[u]
		}
		crosses := false
		for _, u := range users[j] {
			crosses = crosses || between(j, u)
		}
		switch {
		case isConst[j] && all:
			fp.inl[j] = true
		case len(users[j]) == 1 && all && !crosses:
			fp.inl[j] = true
		case isIndexOnly(n.Op) && !fp.inl[n.In[0]] && all && !crosses:
			// A view of a stored value costs an index computation in each
			// reader: cheaper than a copy.
			fp.inl[j] = true
		}
	}
	// Cores: a matmul/sum/max whose one reader is a pointwise chain that
	// reads it at the chain's own index.
	// rootOf follows single readers up to the root whose kernel computes
	// j, or returns -1 where a duplicated node has several.
	rootOf := func(j int) int {
		for fp.inl[j] {
			if len(users[j]) != 1 {
				return -1
			}
			j = users[j][0]
		}
		return j
	}
	for m, n := range nodes {
		if (n.Op != backend.OpMatMul && n.Op != backend.OpSum && n.Op != backend.OpMax) || isOut[m] || len(users[m]) != 1 {
			continue
		}
		c := users[m][0]
		if !isPointwise(nodes[c].Op) || between(m, c) {
			continue
		}
		r := rootOf(c)
		if r < 0 || !isPointwise(nodes[r].Op) || fp.core[r] >= 0 || between(m, r) || !fp.identityPath(r, m) {
			continue
		}
		fp.core[r], fp.inl[m] = m, true
	}
	// Cut kernels that bind too many buffers or too large ones; repeat, as
	// cutting a constant shared by several kernels changes the others.
	for changed := true; changed; {
		changed = false
		for r := nn - 1; r >= 0; r-- {
			if fp.inl[r] || !fp.fused(r) {
				continue
			}
			for fp.fused(r) && !fp.kernelFits(r, lim) {
				changed = true
				if m := fp.core[r]; m >= 0 {
					fp.core[r], fp.inl[m] = -1, false
					continue
				}
				for _, j := range nodes[r].In {
					fp.inl[j] = false
				}
			}
		}
	}
	fp.groupOptimizers(lim)
	return fp
}

// identityPath reports whether every path from root r down to m through
// inlined nodes reads m at r's own linear index (unary ops, binaries whose
// operand has the node's shape, reshapes), as an epilogue needs.
func (fp *fusePlan) identityPath(r, m int) bool {
	ok := true
	var walk func(i int, ident bool)
	walk = func(i int, ident bool) {
		if i == m {
			ok = ok && ident
			return
		}
		if i != r && !fp.inl[i] {
			return
		}
		n := &fp.g.Nodes[i]
		for _, j := range n.In {
			id := ident
			switch {
			case n.Op.IsUnary(), n.Op == backend.OpReshape:
			case n.Op.IsBinary():
				id = id && slices.Equal(fp.g.Nodes[j].Shape, n.Shape)
			default:
				id = false
			}
			walk(j, id)
		}
	}
	walk(r, true)
	return ok
}

// fused reports whether root r's kernel is generated by fusion (it inlines
// an input or has a core) rather than lowered node by node.
func (fp *fusePlan) fused(r int) bool {
	if fp.core[r] >= 0 {
		return true
	}
	for _, j := range fp.g.Nodes[r].In {
		if fp.inl[j] {
			return true
		}
	}
	return false
}

// members returns the nodes root r's kernel computes: r and every node
// inlined into it (its core included), each once.
func (fp *fusePlan) members(r int) []int {
	out := []int{r}
	seen := map[int]bool{r: true}
	var walk func(i int)
	walk = func(i int) {
		for _, j := range fp.g.Nodes[i].In {
			if fp.inl[j] && !seen[j] {
				seen[j] = true
				out = append(out, j)
				walk(j)
			}
		}
	}
	walk(r)
	return out
}

// reads returns the stored nodes root r's kernel reads, each once, in the
// order first met (for a matmul core its two operands first).
func (fp *fusePlan) reads(r int) []int {
	var out []int
	seen := map[int]bool{}
	add := func(j int) {
		if !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	if m := fp.core[r]; m >= 0 && fp.g.Nodes[m].Op == backend.OpMatMul {
		add(fp.g.Nodes[m].In[0])
		add(fp.g.Nodes[m].In[1])
	}
	var walk func(i int)
	walk = func(i int) {
		for _, j := range fp.g.Nodes[i].In {
			if fp.inl[j] {
				walk(j)
			} else {
				add(j)
			}
		}
	}
	walk(r)
	return out
}

// epiReads reports whether root r's chain reads node j other than through
// its matmul mi (an epilogue reading an operand of its matmul).
func (fp *fusePlan) epiReads(r, mi, j int) bool {
	var walk func(i int) bool
	walk = func(i int) bool {
		for _, x := range fp.g.Nodes[i].In {
			if x == j || (x != mi && fp.inl[x] && walk(x)) {
				return true
			}
		}
		return false
	}
	return walk(r)
}

// kernelFits checks root r's fused kernel against the binding limits.
func (fp *fusePlan) kernelFits(r int, lim fuseLimits) bool {
	rd := fp.reads(r)
	nb := len(rd) + 2 // P and the output
	if m := fp.core[r]; m >= 0 && fp.g.Nodes[m].Op == backend.OpMatMul && fp.g.Nodes[m].In[0] == fp.g.Nodes[m].In[1] {
		nb++ // one stored node bound as both operands
	}
	if nb > lim.maxBinds {
		return false
	}
	if uint64(backend.NumElems(fp.g.Nodes[r].Shape))*4 > lim.bindLimit {
		return false
	}
	for _, j := range rd {
		if uint64(backend.NumElems(fp.g.Nodes[j].Shape))*4 > lim.bindLimit {
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

// groupOptimizers joins runs of in-place updates of one kind that only arg
// nodes separate into one dispatch at the last member. Members must write
// distinct args, read no arg another member writes, and the kernel must fit
// the binding limits (the P binding, the distinct hyperparameter inputs and
// the member tensors).
func (fp *fusePlan) groupOptimizers(lim fuseLimits) {
	nodes := fp.g.Nodes
	per := 4 // w, g, m, v
	var cur []int
	flush := func() {
		if len(cur) > 1 {
			last := cur[len(cur)-1]
			fp.group[last] = cur
			for _, j := range cur[:len(cur)-1] {
				fp.deferred[j] = true
			}
		}
		cur = nil
	}
	fits := func(members []int) bool {
		hp := map[int]bool{}
		writes, reads := map[int]bool{}, map[int]bool{}
		for _, j := range members {
			n := &nodes[j]
			hp[n.In[len(n.In)-1]] = true
			for k, in := range n.In {
				a := argOf(fp.g, in)
				isTarget := k == 0 || k == 2 || (n.Op == backend.OpAdamW && k == 3)
				if isTarget {
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
				if uint64(backend.NumElems(nodes[in].Shape))*4 > lim.bindLimit {
					return false
				}
			}
		}
		nb := 1 + len(hp) + len(members)*per
		return nb <= lim.maxBinds
	}
	for i, n := range nodes {
		switch {
		case n.Op == backend.OpArg:
			continue
		case n.Op.InPlace():
			if n.Op == backend.OpSGD {
				per = 3
			} else {
				per = 4
			}
			if len(cur) > 0 && nodes[cur[0]].Op != n.Op {
				flush()
			}
			if fits(append(append([]int(nil), cur...), i)) {
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
