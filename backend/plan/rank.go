package plan

import (
	"fmt"
	"slices"
	"sync"

	"github.com/ag-go/ag/backend"
)

// This file lowers nodes of rank above a backend's kernels
// (Caps.KernelRank, backend.NativeRank by default) to nodes of rank at
// most backend.NativeRank, so that ranks up to backend.MaxRank run on
// every backend with no backend knowing of them (the generic rewrite done
// once, as ggml-backend's shared checks). Every rewrite moves or computes
// the same values in the same order (a reshape of contiguous data is
// free): the lowered graph is the original's values exactly.
//
// A lowered value is stored row-major whatever its lowered shape, so each
// reader views it (a reshape, a view in Make) in the grouping it needs.

// lowerer builds the lowered graph.
type lowerer struct {
	g, out *backend.Graph
	origin []int
	cur    int            // the node of g being lowered (origin of what add appends)
	at     []int          // node of g -> node of out holding its value
	views  map[string]int // reshapes made, by source node and shape
}

// lowerRank returns g with every node of rank above kernelRank, or
// reading one, rewritten into nodes of rank <= backend.NativeRank, and
// origin naming for each node of the result the node of g it comes from;
// g itself and nil when no node is above kernelRank or g is invalid.
// Composites above the rank are left (Expand decomposes them first).
func lowerRank(g *backend.Graph, kernelRank int) (*backend.Graph, []int) {
	high := make([]bool, len(g.Nodes))
	some := false
	for i := range g.Nodes {
		n := &g.Nodes[i]
		high[i] = len(n.Shape) > kernelRank
		for _, j := range n.In {
			if j >= 0 && j < i && len(g.Nodes[j].Shape) > kernelRank {
				high[i] = true
			}
		}
		some = some || high[i]
	}
	if !some || g.Validate() != nil {
		// an invalid graph (rank 7 included) stays as it is: Make names
		// what is wrong with it, where a lowering might hide it
		return g, nil
	}
	l := &lowerer{g: g, out: &backend.Graph{NumArgs: g.NumArgs, Nodes: make([]backend.Node, 0, 2*len(g.Nodes))},
		at: make([]int, len(g.Nodes)), views: map[string]int{}}
	for i := range g.Nodes {
		l.cur = i
		if !high[i] {
			n := g.Nodes[i]
			n.In = make([]int, len(n.In))
			for k, j := range g.Nodes[i].In {
				n.In[k] = l.view(l.at[j], g.Nodes[j].Shape) // its own shape: a node of g below the rank keeps it
			}
			l.at[i] = l.add(n)
			continue
		}
		l.at[i] = l.lower(&g.Nodes[i])
	}
	l.out.Outputs = make([]backend.Output, len(g.Outputs))
	for k, o := range g.Outputs {
		// an output is copied whole: its lowered shape holds the same values in the same order
		l.out.Outputs[k] = backend.Output{Node: l.at[o.Node], Arg: o.Arg}
	}
	return l.out, l.origin
}

// add appends m, its origin the node being lowered.
func (l *lowerer) add(m backend.Node) int {
	l.out.Nodes = append(l.out.Nodes, m)
	l.origin = append(l.origin, l.cur)
	return len(l.out.Nodes) - 1
}

// view returns node j of out seen as shape (a reshape of the same
// elements), j itself when it has that shape. A reshape of a reshape
// reads the first one's input.
func (l *lowerer) view(j int, shape []int) int {
	if slices.Equal(l.out.Nodes[j].Shape, shape) {
		return j
	}
	src := j
	if l.out.Nodes[j].Op == backend.OpReshape {
		src = l.out.Nodes[j].In[0]
		if slices.Equal(l.out.Nodes[src].Shape, shape) {
			return src
		}
	}
	key := fmt.Sprint(src, shape)
	if v, ok := l.views[key]; ok {
		return v
	}
	v := l.add(backend.Node{Op: backend.OpReshape, In: []int{src}, Shape: slices.Clone(shape)})
	l.views[key] = v
	return v
}

// in is input k of n, lowered and seen as shape.
func (l *lowerer) in(n *backend.Node, k int, shape []int) int {
	return l.view(l.at[n.In[k]], shape)
}

// inShape is the shape (in g) of input k of n.
func (l *lowerer) inShape(n *backend.Node, k int) []int { return l.g.Nodes[n.In[k]].Shape }

// canon is the shape a lowered value of shape s takes when no reader
// decides: its leading dimensions merged down to backend.NativeRank.
func canon(s []int) []int {
	const r = backend.NativeRank
	if len(s) <= r {
		return slices.Clone(s)
	}
	return append([]int{backend.NumElems(s[:len(s)-r+1])}, s[len(s)-r+1:]...)
}

// rows is s as [s[0], the rest]: rows stay rows.
func rows(s []int) []int { return []int{s[0], backend.NumElems(s[1:])} }

// lower appends n's lowering and returns the node holding its value.
func (l *lowerer) lower(n *backend.Node) int {
	m := *n
	m.Shape = canon(n.Shape)
	m.In = slices.Clone(n.In)
	switch {
	case n.Op == backend.OpArg, n.Op == backend.OpFill:
		// a buffer or a constant of the same elements
	case n.Op == backend.OpRandUniform:
		// values by flat index; the state keeps its shape
		m.In[0] = l.in(n, 0, l.inShape(n, 0))
	case n.Op.IsUnary(), n.Op == backend.OpSoftmax, n.Op == backend.OpLogSoftmax:
		// canon keeps the last axis, along which softmax works
		m.In[0] = l.in(n, 0, m.Shape)
	case n.Op.IsBinary():
		return l.binary(n)
	case n.Op == backend.OpSum, n.Op == backend.OpMax:
		s, ax := l.inShape(n, 0), n.Axis
		grouped := []int{backend.NumElems(s[:ax]), s[ax], backend.NumElems(s[ax+1:])}
		m.In[0] = l.in(n, 0, grouped)
		m.Shape = []int{grouped[0], 1, grouped[2]}
		m.Axis = 1
	case n.Op == backend.OpReshape:
		return l.in(n, 0, m.Shape)
	case n.Op == backend.OpPermute:
		return l.permute(l.at[n.In[0]], l.inShape(n, 0), n.Perm, n.Shape)
	case n.Op == backend.OpExpand:
		return l.expand(l.at[n.In[0]], l.inShape(n, 0), n.Shape)
	case n.Op == backend.OpSliceRows:
		m.In[0] = l.in(n, 0, rows(l.inShape(n, 0)))
		m.Shape = rows(n.Shape)
	case n.Op == backend.OpConcatRows:
		m.In[0] = l.in(n, 0, rows(l.inShape(n, 0)))
		m.In[1] = l.in(n, 1, rows(l.inShape(n, 1)))
		m.Shape = rows(n.Shape)
	case n.Op == backend.OpGetRows:
		m.In[0] = l.in(n, 0, rows(l.inShape(n, 0)))
		m.In[1] = l.in(n, 1, l.inShape(n, 1))
		m.Shape = rows(n.Shape)
	case n.Op == backend.OpScatterAddRows:
		m.In[0] = l.in(n, 0, rows(l.inShape(n, 0)))
		m.In[1] = l.in(n, 1, l.inShape(n, 1))
		m.Shape = rows(n.Shape)
	case n.Op == backend.OpMatMul:
		// batch dimensions are equal on both sides: one merged batch
		a, b, r := l.inShape(n, 0), l.inShape(n, 1), len(n.Shape)
		bt := backend.NumElems(n.Shape[:r-2])
		m.In[0] = l.in(n, 0, []int{bt, a[r-2], a[r-1]})
		m.In[1] = l.in(n, 1, []int{bt, b[r-2], b[r-1]})
		m.Shape = []int{bt, n.Shape[r-2], n.Shape[r-1]}
	case n.Op == backend.OpAttention:
		return l.attention(n)
	case n.Op.InPlace():
		// elementwise over the parameter's shape; the arg operands are
		// args of the canonical shape already (no reshape between)
		w := l.inShape(n, 0)
		for k := range n.In {
			if s := l.inShape(n, k); slices.Equal(s, w) {
				m.In[k] = l.in(n, k, m.Shape)
			} else {
				m.In[k] = l.in(n, k, s)
			}
		}
	case n.Op == backend.OpPackF16, n.Op == backend.OpPackBF16:
		m.In[0] = l.in(n, 0, []int{backend.NumElems(l.inShape(n, 0))})
	case n.Op == backend.OpUnpackF16, n.Op == backend.OpUnpackBF16:
		// flat words (of rank 1: an unpack reads its source unreshaped)
		m.In[0] = l.at[n.In[0]]
	case n.Op == backend.OpOneHot, n.Op.IsComposite():
		// one_hot is never above the rank; a composite above it was
		// decomposed: left as it is, Make names it
		for k := range n.In {
			m.In[k] = l.at[n.In[k]]
		}
		m.Shape = slices.Clone(n.Shape)
	default:
		backend.Unknown("plan.lowerRank", n.Op)
	}
	return l.add(m)
}

// groups merges adjacent axes of out (right-aligned operand shapes ins)
// that every operand reads alike: an axis of size 1 in out joins any
// group; the others group by which operands are broadcast along them.
// It returns the grouped output shape and each operand's grouped shape,
// at least one axis each.
func groups(out []int, ins ...[]int) (gOut []int, gIn [][]int) {
	r := len(out)
	pad := make([][]int, len(ins))
	for k, s := range ins {
		pad[k] = append(slices.Repeat([]int{1}, r-len(s)), s...)
	}
	gIn = make([][]int, len(ins))
	var last []bool
	for ax := 0; ax < r; ax++ {
		if out[ax] == 1 {
			continue
		}
		pat := make([]bool, len(ins)) // operand k is broadcast along ax
		for k := range ins {
			pat[k] = pad[k][ax] == 1
		}
		if last != nil && slices.Equal(pat, last) {
			gOut[len(gOut)-1] *= out[ax]
			for k := range ins {
				gIn[k][len(gIn[k])-1] *= pad[k][ax]
			}
			continue
		}
		last = pat
		gOut = append(gOut, out[ax])
		for k := range ins {
			gIn[k] = append(gIn[k], pad[k][ax])
		}
	}
	if len(gOut) == 0 {
		gOut = []int{1}
		for k := range ins {
			gIn[k] = []int{1}
		}
	}
	return gOut, gIn
}

// binary lowers a broadcasting binary op: its axes grouped by the
// operands' broadcast pattern; where more groups than the kernels' rank
// remain, an operand is broadcast (materialised) first.
func (l *lowerer) binary(n *backend.Node) int {
	a, b := l.at[n.In[0]], l.at[n.In[1]]
	sa, sb := l.inShape(n, 0), l.inShape(n, 1)
	gOut, gIn := groups(n.Shape, sa, sb)
	if len(gOut) > backend.NativeRank {
		onlyB, _ := groups(n.Shape, sb)
		onlyA, _ := groups(n.Shape, sa)
		switch {
		case len(onlyB) <= backend.NativeRank:
			a, sa = l.expand(a, sa, n.Shape), n.Shape
		case len(onlyA) <= backend.NativeRank:
			b, sb = l.expand(b, sb, n.Shape), n.Shape
		default:
			a, sa = l.expand(a, sa, n.Shape), n.Shape
			b, sb = l.expand(b, sb, n.Shape), n.Shape
		}
		gOut, gIn = groups(n.Shape, sa, sb)
	}
	m := *n
	m.In = []int{l.view(a, gIn[0]), l.view(b, gIn[1])}
	m.Shape = gOut
	return l.add(m)
}

// expand appends the broadcast of node x of out (of logical shape s) to
// shape to. Grouped, it is one expand when few enough groups remain, else
// a chain: the longest suffix of axes that fits is expanded first, then
// the rest with that suffix one group.
func (l *lowerer) expand(x int, s, to []int) int {
	gTo, gIn := groups(to, s)
	if len(gTo) <= backend.NativeRank {
		if slices.Equal(gTo, gIn[0]) {
			return x // nothing to broadcast
		}
		return l.add(backend.Node{Op: backend.OpExpand, In: []int{l.view(x, gIn[0])}, Shape: gTo})
	}
	pad := append(slices.Repeat([]int{1}, len(to)-len(s)), s...)
	for cut := 1; cut < len(to); cut++ {
		mid := append(slices.Clone(pad[:cut]), to[cut:]...)
		if g, _ := groups(mid, pad); len(g) <= backend.NativeRank {
			return l.expand(l.expand(x, pad, mid), mid, to)
		}
	}
	panic(fmt.Sprintf("plan: expand of %v to %v found no split", s, to)) // cut = len(to)-1 always fits
}

// permute appends the permutation perm of node x of out (of logical shape
// s, giving to). Axes of size 1 drop out and runs of input axes that stay
// adjacent and in order merge; when more groups than the kernels' rank
// remain, the permutation runs as the shortest chain of permutes of at
// most 4 contiguous groups each (chainOf).
func (l *lowerer) permute(x int, s, perm, to []int) int {
	// the input axes kept, in output order
	var order []int
	for _, p := range perm {
		if s[p] != 1 {
			order = append(order, p)
		}
	}
	// runs: output groups, each a run of consecutive kept input axes
	kept := func(a int) int { // the next kept input axis after a, or -1
		for b := a + 1; b < len(s); b++ {
			if s[b] != 1 {
				return b
			}
		}
		return -1
	}
	var runs [][]int
	for k, p := range order {
		if k > 0 && kept(order[k-1]) == p {
			runs[len(runs)-1] = append(runs[len(runs)-1], p)
			continue
		}
		runs = append(runs, []int{p})
	}
	// groups in input order, and the permutation of them
	byIn := slices.Clone(runs)
	slices.SortFunc(byIn, func(a, b []int) int { return a[0] - b[0] })
	size := make([]int, len(byIn))
	id := map[int]int{} // first input axis of a group -> its input position
	for k, r := range byIn {
		size[k] = 1
		for _, a := range r {
			size[k] *= s[a]
		}
		id[r[0]] = k
	}
	q := make([]int, len(runs)) // output group k is input group q[k]
	for k, r := range runs {
		q[k] = id[r[0]]
	}
	if len(q) <= 1 || slices.IsSorted(q) {
		return l.view(x, canon(to)) // the same order: a reshape
	}
	if len(q) <= backend.NativeRank {
		gTo := make([]int, len(q))
		for k, p := range q {
			gTo[k] = size[p]
		}
		return l.add(backend.Node{Op: backend.OpPermute, In: []int{l.view(x, size)}, Shape: gTo, Perm: q})
	}
	// a chain of permutes of at most 4 contiguous groups each, the
	// fewest that reach q (chainOf); cur is the order of the groups in x
	cur := identity(len(q))
	for _, mv := range chainOf(q) {
		in := make([]int, len(mv.cuts)-1)
		segs := make([][]int, len(in))
		for k := range in {
			segs[k] = cur[mv.cuts[k]:mv.cuts[k+1]]
			in[k] = 1
			for _, g := range segs[k] {
				in[k] *= size[g]
			}
		}
		out := make([]int, len(in))
		var next []int
		for k, p := range mv.perm {
			out[k] = in[p]
			next = append(next, segs[p]...)
		}
		x = l.add(backend.Node{Op: backend.OpPermute, In: []int{l.view(x, in)}, Shape: out, Perm: slices.Clone(mv.perm)})
		cur = next
	}
	return x
}

// move is one permute of a chain: the sequence cut at cuts (from 0 to
// its length) into at most 4 contiguous segments, reordered by perm.
type move struct{ cuts, perm []int }

// chainTrees caches chainTree by the number of groups.
var chainTrees sync.Map

// step is how chainTree reached an order: from order prev by mv.
type step struct {
	prev int
	mv   move
}

// encode packs an order of at most 8 groups into an int, 3 bits a group.
func encode(s []int) int {
	k := 0
	for _, g := range s {
		k = k<<3 | g
	}
	return k
}

// chainOf returns the shortest chain of moves that turns the order
// 0..len(q)-1 into q. Every move copies the tensor once, so fewer is
// faster.
func chainOf(q []int) []move {
	tree := chainTree(len(q))
	var chain []move
	start := encode(identity(len(q)))
	for k := encode(q); k != start; k = tree[k].prev {
		chain = append(chain, tree[k].mv)
	}
	slices.Reverse(chain)
	return chain
}

func identity(n int) []int {
	s := make([]int, n)
	for k := range s {
		s[k] = k
	}
	return s
}

// chainTree is a breadth-first search from the order 0..n-1 over the n!
// orders (720 for 6 groups), each move a permute of at most 4 contiguous
// segments: for every order, the step that first reached it.
func chainTree(n int) map[int]step {
	if t, ok := chainTrees.Load(n); ok {
		return t.(map[int]step)
	}
	var moves []move
	for _, cuts := range cutSets(n) {
		for _, perm := range perms(len(cuts) - 1) {
			moves = append(moves, move{cuts, perm})
		}
	}
	start := identity(n)
	tree := map[int]step{encode(start): {prev: -1}}
	s := make([]int, 0, n)
	for frontier := [][]int{start}; len(frontier) > 0; {
		var next [][]int
		for _, cur := range frontier {
			for _, mv := range moves {
				s = s[:0]
				for _, p := range mv.perm {
					s = append(s, cur[mv.cuts[p]:mv.cuts[p+1]]...)
				}
				k := encode(s)
				if _, ok := tree[k]; ok {
					continue
				}
				tree[k] = step{encode(cur), mv}
				next = append(next, slices.Clone(s))
			}
		}
		frontier = next
	}
	chainTrees.Store(n, tree)
	return tree
}

// cutSets are the ways to cut a sequence of n into 2 to 4 contiguous
// segments: the cut positions with 0 and n at the ends.
func cutSets(n int) [][]int {
	var out [][]int
	var rec func(cuts []int)
	rec = func(cuts []int) {
		last := cuts[len(cuts)-1]
		if len(cuts) > 1 {
			out = append(out, append(slices.Clone(cuts), n))
		}
		if len(cuts) == backend.NativeRank {
			return
		}
		for c := last + 1; c < n; c++ {
			rec(append(slices.Clone(cuts), c))
		}
	}
	rec([]int{0})
	return out
}

// perms are the permutations of 0..k-1 but the identity.
func perms(k int) [][]int {
	var out [][]int
	var rec func(p []int, used int)
	rec = func(p []int, used int) {
		if len(p) == k {
			if !slices.IsSorted(p) {
				out = append(out, slices.Clone(p))
			}
			return
		}
		for i := range k {
			if used&(1<<i) == 0 {
				rec(append(p, i), used|1<<i)
			}
		}
	}
	rec(nil, 0)
	return out
}

// attention lowers fused attention: the batch axes (all but the last
// two) grouped by keep's broadcast pattern, keep broadcast along the
// batch first where more than two groups would remain.
func (l *lowerer) attention(n *backend.Node) int {
	q, k, v, keep := l.inShape(n, 0), l.inShape(n, 1), l.inShape(n, 2), l.inShape(n, 3)
	r := len(q)
	kp := l.at[n.In[3]]
	gB, gK := groups(q[:r-2], keep[:r-2])
	if len(gB) > backend.NativeRank-2 {
		full := append(slices.Clone(q[:r-2]), keep[r-2:]...)
		kp, keep = l.expand(kp, keep, full), full
		gB, gK = groups(q[:r-2], keep[:r-2])
	}
	with := func(batch []int, s []int) []int { return append(slices.Clone(batch), s[r-2:]...) }
	m := *n
	m.In = []int{l.in(n, 0, with(gB, q)), l.in(n, 1, with(gB, k)), l.in(n, 2, with(gB, v)), l.view(kp, with(gK[0], keep))}
	m.Shape = with(gB, n.Shape)
	return l.add(m)
}
