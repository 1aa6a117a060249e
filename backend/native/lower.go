//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
)

type tensor = *C.struct_ggml_tensor

// argLeaf is a leaf tensor that Run points at args[arg].
type argLeaf struct {
	t     tensor
	arg   int
	elems int  // elements the node reads or writes
	write bool // the destination of an output copy (the graph only writes it)
}

// fillConst is a constant tensor (OpFill and helper constants), set once at
// Compile in the program's constant buffer.
type fillConst struct {
	t     tensor
	value float32
}

// lowering builds one ggml graph from an IR graph. It checks every shape it
// hands to ggml first: a failed GGML_ASSERT would abort the whole process.
type lowering struct {
	d      *device
	g      *backend.Graph
	needed []bool                 // plan.Plan.Needed: the nodes lowered
	loc    []plan.Loc             // plan.Plan.Loc: outputs the planner placed in their args (directOutputs)
	ctx    *C.struct_ggml_context // no_alloc: graph and intermediate tensors
	cctx   *C.struct_ggml_context // no_alloc: constants
	gf     *C.struct_ggml_cgraph
	val    []tensor // the value of each IR node
	args   []argLeaf
	fills  []fillConst
	rands  []randLeaf
	// nodeEnd[i] is the graph's node count after IR node i was expanded, so a
	// failed supports_op can name the IR node that produced the ggml node.
	nodeEnd []int
	// copies are the output copies after the IR nodes: the graph's node
	// count after each, and the IR node it copies (for RunTimed).
	copies []outCopy
	// Copies made once and shared by later users (each ggml node costs a
	// dispatch): contiguous transposes by source, clamped indices by source
	// and row count, attention masks by keep (maskKey). Cleared at every
	// in-place update, whose arg they may copy.
	tmemo    map[viewKey]tensor
	idxmemo  map[idxKey][2]tensor
	maskmemo map[maskKey][2]tensor
	binmemo  map[binKey]tensor // add, sub, mul and div by operands
	// dropmemo holds dropout's scaled masks by draws and probability
	// (ggml-vulkan): the gradient's dropout reuses the forward's.
	dropmemo map[dropKey]tensor
	// bnmemo holds batch norm's partial sums by input (ggml-vulkan): the
	// running statistics' batch_norm_stats reads the forward's.
	bnmemo map[tensor]tensor
	// thin marks the expands whose value is their input, not repeated:
	// every reader is a broadcasting binary op (see thinExpand).
	thin map[int]bool
	// users[j] lists the nodes that read node j (made on first use).
	users [][]int
	// uses[j] counts the nodes and outputs that read IR node j.
	uses []int
	// words marks the get_rows of packed words (Graph.WordGathers): they
	// get no ggml node of their own; each unpack that reads one gathers
	// its 16-bit records itself (see unpackRows).
	words []bool
	// mm forces the plan of f32 products (the tuner's lowerings).
	mm mmPlan
}

type outCopy struct{ end, node int }

// randLeaf is a rand_uniform value that ggml-vulkan cannot compute (it runs
// no custom ops): a tensor of the constant buffer that every Run fills on
// the host from the state arg (a 32-byte read, then the values' upload),
// with the same Philox code as ggml-cpu's custom op.
type randLeaf struct {
	t     tensor
	arg   int // the state's arg
	start uint64
}

// binKey is a binary op on two ggml tensors: autograd repeats some
// (x*x's gradient multiplies g by x twice), and each is a dispatch.
type binKey struct {
	op   backend.Op
	a, b tensor
}

type idxKey struct {
	t    tensor
	rows int
}

// tensorsFor bounds how many ggml tensors lowering one IR node creates
// (lowerNode checks it), so the no_alloc context is sized up front and can
// never overflow (ggml would abort).
func tensorsFor(n *backend.Node) int {
	if n.Op.IsComposite() {
		c := nativeComposites[n.Op]
		if c.sized != nil {
			return c.sized(n)
		}
		return c.tensors + c.perInput*len(n.In)
	}
	switch n.Op {
	case backend.OpAdamW:
		return 48
	case backend.OpAttention:
		return 64 // the composite path, its mask and a long-K split (attention.go)
	case backend.OpSGD:
		return 24
	case backend.OpPowConst, backend.OpGetRows, backend.OpOneHot, backend.OpLogSoftmax, backend.OpInside, backend.OpKeep:
		return 24
	case backend.OpMax, backend.OpMaximum:
		return 40 // nanAxisMax's staged pools (7 each up to 2^31) and its -Inf and NaN fixes
	case backend.OpMatMul, backend.OpScatterAddRows, backend.OpSum:
		// a product split along K (mulMat: ~20 tensors) after its
		// operands' copies; a short axis summed as adds (sumShortAxis: 2
		// per element of the axis)
		return 48
	default:
		return 16
	}
}

func newLowering(d *device, g *backend.Graph) (*lowering, error) {
	budget := 64
	for i := range g.Nodes {
		budget += tensorsFor(&g.Nodes[i])
	}
	budget += 8 * len(g.Outputs) // a copy, or a pack's conversion into its arg (packSource)
	mem := C.size_t(budget)*C.ggml_tensor_overhead() + C.ggml_graph_overhead_custom(C.size_t(budget), false)
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: mem, no_alloc: true})
	// At most two constants per node (ggml-cpu's clamp bounds).
	cctx := C.ggml_init(C.struct_ggml_init_params{mem_size: C.size_t(2*len(g.Nodes)+8) * C.ggml_tensor_overhead(), no_alloc: true})
	if ctx == nil || cctx == nil {
		return nil, fmt.Errorf("ggml_init of %d bytes failed", mem)
	}
	l := &lowering{d: d, g: g, ctx: ctx, cctx: cctx, val: make([]tensor, len(g.Nodes)), nodeEnd: make([]int, len(g.Nodes)), uses: make([]int, len(g.Nodes)), words: g.WordGathers()}
	for i := range g.Nodes {
		for _, j := range g.Nodes[i].In {
			l.uses[j]++
		}
	}
	for _, o := range g.Outputs {
		l.uses[o.Node]++
	}
	l.gf = C.ggml_new_graph_custom(ctx, C.size_t(budget), false)
	return l, nil
}

func (l *lowering) free() {
	if l.ctx != nil {
		C.ggml_free(l.ctx)
	}
	if l.cctx != nil {
		C.ggml_free(l.cctx)
	}
	l.ctx, l.cctx = nil, nil
}

// ne maps a row-major IR shape to ggml's ne (ne[0] is the fastest axis).
func ne(shape []int) [4]C.int64_t {
	out := [4]C.int64_t{1, 1, 1, 1}
	for i, d := range shape {
		out[len(shape)-1-i] = C.int64_t(d)
	}
	return out
}

func (l *lowering) newTensor(ctx *C.struct_ggml_context, shape []int) tensor {
	n := ne(shape)
	return C.ggml_new_tensor(ctx, C.GGML_TYPE_F32, 4, &n[0])
}

func (l *lowering) newArg(shape []int, arg int) tensor {
	t := l.newTensor(l.ctx, shape)
	l.args = append(l.args, argLeaf{t: t, arg: arg, elems: backend.NumElems(shape)})
	return t
}

// newWordsArg is args[arg]'s first words 32-bit words seen as 2*words
// 16-bit values of typ (F16 or BF16): packed values in an arg.
func (l *lowering) newWordsArg(typ C.enum_ggml_type, words, arg int) tensor {
	t := C.ggml_new_tensor_1d(l.ctx, typ, C.int64_t(2*words))
	l.args = append(l.args, argLeaf{t: t, arg: arg, elems: words})
	return t
}

// halfType is the ggml type of a pack or unpack op's 16-bit values.
func halfType(op backend.Op) C.enum_ggml_type {
	if op == backend.OpPackBF16 || op == backend.OpUnpackBF16 {
		return C.GGML_TYPE_BF16
	}
	return C.GGML_TYPE_F16
}

// packSource is the f32 values a pack converts: its input, flat and
// contiguous, with a 0 after an odd count (the last word's high half).
// A pack's value is the cast of it, a ggml tensor of 2*PackedLen(n)
// 16-bit values: the words' bytes (Validate lets only unpack ops and
// outputs read it).
func (l *lowering) packSource(n *backend.Node) tensor {
	x := l.in(n, 0)
	if !bool(C.ggml_is_contiguous(x)) {
		x = C.ggml_cont(l.ctx, x)
	}
	nv := backend.NumElems(l.inShape(n, 0))
	x = C.ggml_reshape_1d(l.ctx, x, C.int64_t(nv))
	if nv%2 == 1 {
		x = C.ggml_pad(l.ctx, x, 1, 0, 0, 0)
	}
	return x
}

// unpack converts a pack's 16-bit values (or an arg's words) to f32.
func (l *lowering) unpack(n *backend.Node) (tensor, error) {
	if len(l.inShape(n, 0)) == 2 {
		return l.unpackRows(n)
	}
	return C.ggml_cast(l.ctx, l.packedValues(n), C.GGML_TYPE_F32), nil
}

// unpackRows lowers the rows form of an unpack: records of w 16-bit values
// in an arg's table of [R, W] words, read with a row stride of W words (an
// odd w's padding half is skipped), gathered by the indices of the
// get_rows it reads - ggml's get_rows of an F16 or BF16 table gives f32,
// so the pair is one node - or converted whole. A format whose flat
// unpack the device cannot run (Caps.Unsupported: bf16 on ggml-vulkan) is
// refused here too, though its get_rows might run: the capability is the
// op's, one answer for both forms.
func (l *lowering) unpackRows(n *backend.Node) (tensor, error) {
	if slices.Contains(l.d.caps.Unsupported, n.Op) {
		return nil, fmt.Errorf("%s cannot run %s (Caps.Unsupported)", l.d.name, n.Op)
	}
	src := &l.g.Nodes[n.In[0]]
	tab := src
	if src.Op == backend.OpGetRows {
		tab = &l.g.Nodes[src.In[0]]
	}
	if tab.Op != backend.OpArg {
		return nil, fmt.Errorf("the rows form reads the words of %s, want an arg's (a bug: Validate checks it)", tab.Op)
	}
	rows, words, w := tab.Shape[0], tab.Shape[1], n.Shape[1]
	h := l.newWordsArg(halfType(n.Op), rows*words, tab.Arg)
	recs := C.ggml_view_2d(l.ctx, h, C.int64_t(w), C.int64_t(rows), C.size_t(4*words), 0)
	if src.Op == backend.OpGetRows {
		_, idx := l.indices(l.in(src, 1), rows)
		return C.ggml_get_rows(l.ctx, recs, idx), nil
	}
	return C.ggml_cast(l.ctx, recs, C.GGML_TYPE_F32), nil
}

// packedValues is the 16-bit values unpack node n reads, as a tensor of
// n's shape: a view of its pack's value (2*PackedLen(n) values, see
// packSource) or of its arg's words.
func (l *lowering) packedValues(n *backend.Node) tensor {
	h := l.in(n, 0)
	if src := &l.g.Nodes[n.In[0]]; src.Op == backend.OpArg {
		h = l.newWordsArg(halfType(n.Op), src.Shape[0], src.Arg)
	}
	if nv := backend.NumElems(n.Shape); nv%2 == 1 {
		h = C.ggml_view_1d(l.ctx, h, C.int64_t(nv), 0)
	}
	w := ne(n.Shape)
	return C.ggml_reshape_4d(l.ctx, h, w[0], w[1], w[2], w[3])
}

func (l *lowering) constant(shape []int, v float32) tensor {
	t := l.newTensor(l.cctx, shape)
	l.fills = append(l.fills, fillConst{t, v})
	return t
}

func (l *lowering) expand(t tensor) { C.ggml_build_forward_expand(l.gf, t) }

func (l *lowering) tensorsUsed() int {
	return int(C.ggml_used_mem(l.ctx) / C.ggml_tensor_overhead())
}

// build lowers every node in IR order, so ggml executes them in that order
// (reads of an arg stay on their side of an in-place update), then copies
// the outputs into their args after the last node, as backendtest.Eval
// defines: an OpArg node's output is the arg's final state.
func (l *lowering) build() error {
	for i := range l.g.Nodes {
		n := &l.g.Nodes[i]
		if l.needed != nil && !l.needed[i] || l.words[i] {
			// no output depends on it, or its unpacks gather the words
			l.nodeEnd[i] = int(C.ggml_graph_n_nodes(l.gf))
			continue
		}
		before := l.tensorsUsed()
		v, effects, err := l.lowerNode(i, n)
		if err != nil {
			return fmt.Errorf("node %d (%s %v): %w", i, n.Op, n.Shape, err)
		}
		if l.aliasesMutatedArg(i, v) {
			// A view of an arg that an in-place op updates later: the IR
			// value is the arg at this position, so take a copy now.
			v = C.ggml_cont(l.ctx, v)
		}
		if n.Op.InPlace() {
			l.tmemo, l.idxmemo, l.maskmemo, l.binmemo, l.dropmemo, l.bnmemo = nil, nil, nil, nil, nil, nil
		}
		if used := l.tensorsUsed() - before; used > tensorsFor(n) {
			return fmt.Errorf("node %d (%s): lowering made %d ggml tensors, more than its budget %d (a bug in package native)", i, n.Op, used, tensorsFor(n))
		}
		l.val[i] = v
		for _, e := range effects {
			l.expand(e)
		}
		if n.Op == backend.OpRoundF16 && v.op == C.GGML_OP_CPY && v.src[0] != nil {
			// Only the f16 cast here: the f16 products read it (halfSource),
			// and the cast back to f32 joins the graph where a node reads it,
			// so a round read by products alone costs one copy, not two. The
			// cast it reads is never written, so a later place is as good.
			v = v.src[0]
		}
		l.expand(v)
		l.nodeEnd[i] = int(C.ggml_graph_n_nodes(l.gf))
	}
	direct := l.directOutputs()
	for _, o := range l.g.Outputs {
		if l.holdsArg(o.Node, o.Arg) {
			continue // the value already lives in that arg
		}
		if t := direct[o]; t != nil {
			// The node computes straight into the arg: no copy node.
			l.args = append(l.args, argLeaf{t: t, arg: o.Arg, elems: backend.NumElems(l.g.Nodes[o.Node].Shape), write: true})
			C.ggml_set_output(t)
			l.expand(t) // a round's f32 value may be in no node's inputs yet
			continue
		}
		on := &l.g.Nodes[o.Node]
		var dst, src tensor
		if on.Op == backend.OpPackF16 || on.Op == backend.OpPackBF16 {
			// The words go straight into the arg: the cast writes them.
			dst, src = l.newWordsArg(halfType(on.Op), on.Shape[0], o.Arg), l.packSource(on)
		} else {
			dst, src = l.newArg(on.Shape, o.Arg), l.val[o.Node]
		}
		l.args[len(l.args)-1].write = true
		l.expand(C.ggml_cpy(l.ctx, src, dst))
		l.copies = append(l.copies, outCopy{int(C.ggml_graph_n_nodes(l.gf)), o.Node})
	}
	return nil
}

// thinExpand reports whether expand node i can stay its input, unrepeated:
// each node that reads it is an add, sub, mul or div of the expand's shape
// whose other operand is no expand, with the expand as src1 (an add or
// mul may take it as src0: the lowering swaps them), and it is no output.
// ggml broadcasts src1 in those ops itself, so the REPEAT node (a
// dispatch, and a full-size tensor) is not needed. An IR expand only adds
// leading axes or stretches axes of 1, which ggml's ne (reversed) repeats
// as they are.
func (l *lowering) thinExpand(i int, n *backend.Node) bool {
	if l.isOutput(i) {
		return false
	}
	us := l.usersOf(i)
	if len(us) == 0 {
		return false
	}
	for _, j := range us {
		m := &l.g.Nodes[j]
		if m.Op != backend.OpAdd && m.Op != backend.OpSub && m.Op != backend.OpMul && m.Op != backend.OpDiv ||
			!slices.Equal(m.Shape, n.Shape) || m.In[0] == m.In[1] {
			return false
		}
		other := m.In[0]
		if m.In[0] == i {
			if m.Op == backend.OpSub || m.Op == backend.OpDiv {
				return false
			}
			other = m.In[1]
		}
		if l.g.Nodes[other].Op == backend.OpExpand {
			return false
		}
	}
	return true
}

// usersOf lists the nodes that read node i (l.users, made on first use).
func (l *lowering) usersOf(i int) []int {
	if l.users == nil {
		l.users = make([][]int, len(l.g.Nodes))
		for j := range l.g.Nodes {
			for _, k := range l.g.Nodes[j].In {
				l.users[k] = append(l.users[k], j)
			}
		}
	}
	return l.users[i]
}

// directOutputs gives the outputs that the shared planner placed straight
// in their args (plan.Plan.Loc) the ggml tensor that computes them, so Run
// binds the arg's buffer as that tensor's memory (as it binds the args a
// graph reads) instead of copying the value at the end: on ggml-vulkan each
// copy is a dispatch and a barrier (a training step's gradients and loss
// were 10 of its 103). ggml adds its own conditions to the planner's:
//   - the arg is read by no node at all, not merely by none after the
//     value is computed, since ggml may reorder the graph's nodes (and it is
//     written by this output alone);
//   - the tensor is a computed f32 node with memory of its own (no leaf,
//     arg, constant or view of one), contiguous and of the output's size,
//     or a whole, contiguous view of one (a reshape): a lowering may have
//     made the IR value a view the planner does not know of;
//   - no node writes into that tensor afterwards (an in-place op or a copy
//     into a view of it), and no other output takes the same tensor.
func (l *lowering) directOutputs() map[backend.Output]tensor {
	outs := map[int]int{} // arg -> outputs into it
	for _, o := range l.g.Outputs {
		outs[o.Arg]++
	}
	read := map[int]bool{}
	for _, a := range l.args { // before the outputs' args: reads only
		read[a.arg] = true
	}
	written := map[tensor]bool{} // targets of in-place writes
	nn := int(C.ggml_graph_n_nodes(l.gf))
	for k := 0; k < nn; k++ {
		t := C.ggml_graph_node(l.gf, C.int(k))
		if t.view_src != nil && !noOp(t) {
			written[t.view_src] = true
		}
	}
	taken := map[tensor]bool{}
	direct := map[backend.Output]tensor{}
	for _, o := range l.g.Outputs {
		on := &l.g.Nodes[o.Node]
		if pl := l.loc; pl != nil && (pl[o.Node] != plan.Loc{Kind: plan.Arg, Idx: o.Arg}) {
			continue // the planner copies it
		}
		if outs[o.Arg] != 1 || read[o.Arg] || l.holdsArg(o.Node, o.Arg) || on.Op == backend.OpPackF16 || on.Op == backend.OpPackBF16 {
			continue
		}
		v := l.val[o.Node]
		base := v
		if v.view_src != nil {
			base = v.view_src
			if v.view_offs != 0 || C.ggml_nbytes(v) != C.ggml_nbytes(base) || !bool(C.ggml_is_contiguous(v)) {
				continue
			}
		}
		if base.op == C.GGML_OP_NONE || base.view_src != nil || base._type != C.GGML_TYPE_F32 || !bool(C.ggml_is_contiguous(base)) ||
			int(C.ggml_nelements(base)) != backend.NumElems(on.Shape) || written[base] || taken[base] {
			continue
		}
		taken[base] = true
		direct[o] = base
	}
	return direct
}

// aliasesMutatedArg reports whether v, the value of node i (not itself an
// OpArg or in-place op), shares memory with an arg that an in-place op after
// node i updates.
func (l *lowering) aliasesMutatedArg(i int, v tensor) bool {
	n := &l.g.Nodes[i]
	if n.Op == backend.OpArg || n.Op.InPlace() {
		return false
	}
	root := v
	if v.view_src != nil {
		root = v.view_src
	}
	arg := -1
	for _, a := range l.args {
		if a.t == root {
			arg = a.arg
		}
	}
	if arg < 0 {
		return false
	}
	for j := i + 1; j < len(l.g.Nodes); j++ {
		m := &l.g.Nodes[j]
		if !m.Op.InPlace() {
			continue
		}
		for _, k := range backend.UpdateTargets(m.Op) {
			if l.argOf(m.In[k]) == arg {
				return true
			}
		}
	}
	return false
}

// holdsArg reports whether node i's value is stored in args[arg] itself: an
// OpArg node of that arg, or an in-place update of it.
func (l *lowering) holdsArg(i, arg int) bool {
	n := &l.g.Nodes[i]
	switch {
	case n.Op == backend.OpArg:
		return n.Arg == arg
	case n.Op.InPlace():
		return l.g.Nodes[n.In[0]].Arg == arg
	}
	return false
}

// checkSupported asks the device about every ggml node of the graph.
func (l *lowering) checkSupported() error {
	nn := int(C.ggml_graph_n_nodes(l.gf))
	irNode := 0
	for k := 0; k < nn; k++ {
		for irNode < len(l.nodeEnd) && k >= l.nodeEnd[irNode] {
			irNode++
		}
		t := C.ggml_graph_node(l.gf, C.int(k))
		switch t.op {
		case C.GGML_OP_NONE, C.GGML_OP_VIEW, C.GGML_OP_RESHAPE, C.GGML_OP_PERMUTE, C.GGML_OP_TRANSPOSE:
			continue
		}
		if !C.ggml_backend_supports_op(l.d.be, t) {
			if irNode == len(l.g.Nodes) {
				return fmt.Errorf("%s cannot run ggml op %s [%d %d %d %d] of an output copy",
					l.d.name, C.GoString(C.ggml_op_desc(t)), t.ne[0], t.ne[1], t.ne[2], t.ne[3])
			}
			n := &l.g.Nodes[irNode]
			return fmt.Errorf("%s cannot run ggml op %s [%d %d %d %d] needed by node %d (%s %v)",
				l.d.name, C.GoString(C.ggml_op_desc(t)), t.ne[0], t.ne[1], t.ne[2], t.ne[3], irNode, n.Op, n.Shape)
		}
	}
	return nil
}

func (l *lowering) in(n *backend.Node, k int) tensor { return l.val[n.In[k]] }

func (l *lowering) inShape(n *backend.Node, k int) []int { return l.g.Nodes[n.In[k]].Shape }

func sameNe(t tensor, want [4]C.int64_t) bool {
	return t.ne[0] == want[0] && t.ne[1] == want[1] && t.ne[2] == want[2] && t.ne[3] == want[3]
}

// broadcastTo repeats t to shape (numpy rules, already validated).
func (l *lowering) broadcastTo(t tensor, shape []int) tensor {
	w := ne(shape)
	if sameNe(t, w) {
		return t
	}
	return C.ggml_repeat_4d(l.ctx, t, w[0], w[1], w[2], w[3])
}

func (l *lowering) reshape(t tensor, shape []int) tensor {
	w := ne(shape)
	if sameNe(t, w) {
		return t
	}
	return C.ggml_reshape_4d(l.ctx, t, w[0], w[1], w[2], w[3])
}

func (l *lowering) scaleBias(t tensor, s, b float32) tensor {
	return C.ggml_scale_bias(l.ctx, t, C.float(s), C.float(b))
}

// scalar is element k of a contiguous f32 tensor, as a one-element view.
func (l *lowering) scalar(t tensor, k int) tensor {
	return C.ggml_view_1d(l.ctx, t, 1, C.size_t(4*k))
}

// lowerNode returns the node's value and the side-effect nodes (in-place
// copies) that must run before it.
func (l *lowering) lowerNode(i int, n *backend.Node) (tensor, []tensor, error) {
	ctx := l.ctx
	switch {
	case n.Op == backend.OpArg:
		return l.newArg(n.Shape, n.Arg), nil, nil
	case n.Op == backend.OpFill:
		return l.constant(n.Shape, n.A), nil, nil
	case n.Op.IsBinary():
		x, y := l.in(n, 0), l.in(n, 1)
		if l.thin[n.In[0]] { // an add or mul (thinExpand): ggml broadcasts src1
			x, y = y, x
		}
		a := l.broadcastTo(x, n.Shape) // ggml broadcasts src1 only
		b := y
		if n.Op == backend.OpAdd && !l.d.isCPU && l.onlyHalfRounds(i) {
			return l.addToHalf(a, b), nil, nil
		}
		key := binKey{n.Op, a, b}
		if t, ok := l.binmemo[key]; ok {
			return t, nil, nil
		}
		var t tensor
		switch n.Op {
		case backend.OpAdd:
			t = C.ggml_add(ctx, a, b)
		case backend.OpSub:
			t = C.ggml_sub(ctx, a, b)
		case backend.OpMul:
			t = C.ggml_mul(ctx, a, b)
		case backend.OpDiv:
			t = C.ggml_div(ctx, a, b)
		case backend.OpMaximum:
			return l.maximum(a, l.broadcastTo(b, n.Shape)), nil, nil
		case backend.OpKeep:
			return l.keep(a, l.broadcastTo(b, n.Shape)), nil, nil
		default:
			backend.Unknown("native.lowerNode", n.Op)
		}
		if l.binmemo == nil {
			l.binmemo = map[binKey]tensor{}
		}
		l.binmemo[key] = t
		return t, nil, nil
	case n.Op.IsUnary():
		return l.lowerUnary(n), nil, nil
	case n.Op == backend.OpSum || n.Op == backend.OpMax:
		return l.lowerReduce(n), nil, nil
	case n.Op == backend.OpSoftmax:
		return C.ggml_soft_max(ctx, l.in(n, 0)), nil, nil
	case n.Op == backend.OpLogSoftmax:
		return l.logSoftmax(l.in(n, 0)), nil, nil
	case n.Op == backend.OpReshape:
		return l.reshape(l.in(n, 0), n.Shape), nil, nil
	case n.Op == backend.OpPermute:
		return l.lowerPermute(i, n), nil, nil
	case n.Op == backend.OpExpand:
		if l.thinExpand(i, n) {
			if l.thin == nil {
				l.thin = map[int]bool{}
			}
			l.thin[i] = true
			return l.in(n, 0), nil, nil
		}
		return l.broadcastTo(l.in(n, 0), n.Shape), nil, nil
	case n.Op == backend.OpSliceRows:
		x := l.in(n, 0)
		r := len(n.Shape)
		w := ne(n.Shape)
		off := C.size_t(n.Start) * x.nb[r-1]
		// The strides past the sliced (outermost) axis are the view's own
		// extents, not x's: ggml_scale_bias asserts ggml_is_padded_1d, which
		// reads them even where ne is 1, and aborted the process on x's.
		nb := x.nb
		for k := r; k < 4; k++ {
			nb[k] = nb[k-1] * C.size_t(w[k-1])
		}
		v := C.ggml_view_4d(ctx, x, w[0], w[1], w[2], w[3], nb[1], nb[2], nb[3], off)
		if a := l.d.viewAlign; a > 1 && v.view_offs%a != 0 {
			// ggml-vulkan's kernels but the binary ones and copies assert
			// that a source starts at the alignment, and abort: a copy
			// (which reads any offset) starts where they can read it
			v = C.ggml_cont(ctx, v)
		}
		return v, nil, nil
	case n.Op == backend.OpConcatRows:
		return C.ggml_concat(ctx, l.in(n, 0), l.in(n, 1), C.int(len(n.Shape)-1)), nil, nil
	case n.Op == backend.OpGetRows:
		tab := l.in(n, 0)
		ts := l.inShape(n, 0)
		rows := ts[0]
		width := backend.NumElems(ts[1:])
		_, idx := l.indices(l.in(n, 1), rows)
		t2 := C.ggml_reshape_2d(ctx, tab, C.int64_t(width), C.int64_t(rows))
		return l.reshape(C.ggml_get_rows(ctx, t2, idx), n.Shape), nil, nil
	case n.Op == backend.OpScatterAddRows:
		return l.lowerScatterAdd(n), nil, nil
	case n.Op == backend.OpOneHot:
		return l.oneHot(l.in(n, 0), l.inShape(n, 0)[0], n.Shape[1]), nil, nil
	case n.Op == backend.OpMatMul:
		return l.lowerMatMul(n), nil, nil
	case n.Op == backend.OpAttention:
		return l.lowerAttention(i, n), nil, nil
	case n.Op == backend.OpAdamW:
		return l.lowerAdamW(i, n)
	case n.Op == backend.OpSGD:
		return l.lowerSGD(n)
	case n.Op == backend.OpRandUniform:
		return l.lowerRand(n)
	case n.Op.IsComposite():
		return nativeComposites[n.Op].lower(l, n), nil, nil
	case n.Op == backend.OpPackF16 || n.Op == backend.OpPackBF16:
		return C.ggml_cast(ctx, l.packSource(n), halfType(n.Op)), nil, nil
	case n.Op == backend.OpUnpackF16 || n.Op == backend.OpUnpackBF16:
		v, err := l.unpack(n)
		return v, nil, err
	}
	backend.Unknown("native.lowerNode", n.Op)
	return nil, nil, nil
}

// lowerRand lowers rand_uniform: ag_rand_uniform on ggml-cpu; on
// ggml-vulkan ag_philox_op where probeDraw found it (patch 0010), else a
// leaf Run fills on the host (see randLeaf), which needs the state to be
// an arg (core's always is).
func (l *lowering) lowerRand(n *backend.Node) (tensor, []tensor, error) {
	w := ne(n.Shape)
	if l.d.isCPU {
		return C.ag_rand_uniform_op(l.ctx, l.in(n, 0), w[0], w[1], w[2], w[3], C.uint64_t(n.Start)), nil, nil
	}
	if l.d.drawsPhilox {
		return C.ag_philox_op(l.ctx, l.contiguous(l.in(n, 0)), w[0], w[1], w[2], w[3], C.uint64_t(n.Start)), nil, nil
	}
	st := &l.g.Nodes[n.In[0]]
	if st.Op != backend.OpArg {
		return nil, nil, fmt.Errorf("rand_uniform on %s reads its state from an arg (it fills on the host), not from node %d (%s)", l.d.name, n.In[0], st.Op)
	}
	t := l.newTensor(l.cctx, n.Shape)
	l.rands = append(l.rands, randLeaf{t: t, arg: st.Arg, start: uint64(n.Start)})
	return t, nil, nil
}

// indices clamps f32 indices to 0..rows-1 and rounds them to whole numbers,
// halves away from zero as reference.ClampIndex does. It returns both the
// whole-number f32 values and the i32 tensor. ggml's own relu turns NaN (and
// negatives) into 0 on both devices, which is what ir.go asks of a NaN index
// (ggml-vulkan's clamp would keep the NaN, and an i32 cast of NaN is
// undefined); the clamp works in place on relu's result.
func (l *lowering) indices(idx tensor, rows int) (f32, i32 tensor) {
	key := idxKey{idx, rows}
	if m, ok := l.idxmemo[key]; ok {
		return m[0], m[1]
	}
	if l.d.isCPU {
		// One custom op (ag_index) instead of ten nodes; the f32 copy
		// joins the graph only where a node reads it.
		i32 = C.ag_index_op(l.ctx, l.contiguous(idx), C.int64_t(rows))
		f32 = C.ggml_cast(l.ctx, i32, C.GGML_TYPE_F32)
	} else {
		c := l.clampIndex(idx, rows)
		// An i32 cast truncates, and ggml_round is floor(x + 0.5) on
		// ggml-vulkan (odd whole numbers from 2^23 round up): c >= 0, so
		// round(c) is trunc(c) + [c - trunc(c) >= 0.5], the fraction exact.
		t := C.ggml_cast(l.ctx, C.ggml_cast(l.ctx, c, C.GGML_TYPE_I32), C.GGML_TYPE_F32)
		below := l.positive(l.scaleBias(C.ggml_sub(l.ctx, c, t), -1, 0.5)) // fraction < 0.5
		f32 = C.ggml_add(l.ctx, t, l.scaleBias(below, -1, 1))
		i32 = C.ggml_cast(l.ctx, f32, C.GGML_TYPE_I32)
	}
	if l.idxmemo == nil {
		l.idxmemo = map[idxKey][2]tensor{}
	}
	l.idxmemo[key] = [2]tensor{f32, i32}
	return f32, i32
}

// clampIndex is relu(idx) clamped to 0..rows-1 (see indices), not rounded.
// The bound is the largest f32 not above rows-1: from 2^24 rows on,
// float32(rows-1) may round up to rows or past it, and get_rows then
// aborted the process (ggml-cpu's assert) or read outside the table.
func (l *lowering) clampIndex(idx tensor, rows int) tensor {
	hi := float32(rows - 1)
	if int(hi) > rows-1 {
		hi = math.Nextafter32(hi, 0)
	}
	return C.ggml_clamp(l.ctx, C.ggml_relu(l.ctx, idx), 0, C.float(hi))
}

// viewKey names the memory a tensor reads: its base tensor (itself, or the
// tensor it views), offset, type, shape and strides. Two reshapes of one
// value are two ggml nodes but one viewKey.
type viewKey struct {
	base   tensor
	offs   C.size_t
	typ    C.enum_ggml_type
	ne, nb [4]int64
}

func keyOf(x tensor) viewKey {
	k := viewKey{base: x, typ: x._type}
	if x.view_src != nil {
		k.base, k.offs = x.view_src, x.view_offs
	}
	for i := range 4 {
		k.ne[i], k.nb[i] = int64(x.ne[i]), int64(x.nb[i])
	}
	return k
}

// transposed is a contiguous copy of x with ne0 and ne1 swapped, made once
// per source memory and view (viewKey): a layer's gradient feeds both its
// weight gradient and its bias gradient, and a layer norm's output feeds
// the weight gradients of q, k and v, each through a reshape of its own.
func (l *lowering) transposed(x tensor) tensor {
	key := keyOf(x)
	if t, ok := l.tmemo[key]; ok {
		return t
	}
	var t tensor
	if l.d.isCPU {
		// ggml-cpu copies a transposed view element by element with a
		// 4 KiB read stride (3.5 ms for 1024x1024 on 2 cores); the tiled
		// copy takes a fraction of that (see ag_transpose).
		src := [1]tensor{x}
		t = C.ggml_custom_4d(l.ctx, C.GGML_TYPE_F32, x.ne[1], x.ne[0], x.ne[2], x.ne[3], &src[0], 1, C.ggml_custom_op_t(C.ag_transpose), C.GGML_N_TASKS_MAX, nil)
	} else {
		t = C.ggml_cont(l.ctx, C.ggml_transpose(l.ctx, x))
	}
	if l.tmemo == nil {
		l.tmemo = map[viewKey]tensor{}
	}
	l.tmemo[key] = t
	return t
}

// positive is 1 where y > 0, else 0 (NaN too), whichever way the device's
// step treats 0: one step where it is ggml's (y > 0, probeStep), else
// [y >= 0] * (1 - [-y >= 0]) for an unpatched ggml-vulkan's.
func (l *lowering) positive(y tensor) tensor {
	if l.d.stepStrict {
		return C.ggml_step(l.ctx, y)
	}
	neg := l.scaleBias(C.ggml_step(l.ctx, C.ggml_neg(l.ctx, y)), -1, 1)
	return C.ggml_mul(l.ctx, C.ggml_step(l.ctx, y), neg)
}

// clamp is min(max(x, lo), hi) into a new tensor, NaN staying NaN (ir.go).
// ggml-cpu's clamp turns NaN into hi, so there it is ag_clamp. On
// ggml-vulkan, NVIDIA's shader compiler turned clamp's compare chain into
// min/max, which drop NaN (relu(NaN) gave +Inf and clamp(NaN) its bound on
// an H200; lavapipe keeps it). build.sh's patch 0004 tests the bits in the
// shader; where the device's probe (probeClamp) confirms that, a clamp is
// one node. Else the NaN comes back through a flag, 0*tanh(x) - 0 for every
// number, the infinities too, and NaN for NaN - added to the clamp: five
// nodes. ggml's clamp works in place, so it gets a copy of x there:
// ggml-vulkan may reorder the graph, and the flag must read x unclamped.
func (l *lowering) clamp(x tensor, lo, hi float32) tensor {
	if l.d.isCPU {
		one := []int{1}
		return l.custom(C.ggml_custom_op_t(C.ag_clamp), x.ne, x, l.constant(one, lo), l.constant(one, hi))
	}
	if l.d.clampKeepsNaN {
		return C.ag_clamp_to(l.ctx, x, C.float(lo), C.float(hi))
	}
	flag := l.scaleBias(C.ggml_tanh(l.ctx, x), 0, 0)
	y := C.ggml_clamp(l.ctx, C.ggml_cont(l.ctx, x), C.float(lo), C.float(hi))
	return C.ggml_add(l.ctx, y, flag)
}

// logSoftmax is x - max - log(sum(exp(x - max))) along rows: stable where
// log(softmax) underflows.
func (l *lowering) logSoftmax(x tensor) tensor {
	d := C.ggml_sub(l.ctx, x, l.rowMax(x))
	lse := C.ggml_log(l.ctx, l.sumRows(C.ggml_exp(l.ctx, d)))
	return C.ggml_sub(l.ctx, d, lse)
}

// oneHot is the [cnt, c] one-hot of indices idx (rounded and clamped as
// get_rows'): onehot[i][c] = relu(1 - |c - idx[i]|), exactly 0 or 1 for
// whole indices. On a GPU with no more classes than indices, the rows of
// a [c, c] identity (ggml_diag of ones) gathered at the indices instead:
// two nodes where that is seven (a convnet's cross-entropy gradient), the
// indices the forward's (indices memoizes them).
func (l *lowering) oneHot(idx tensor, cnt, c int) tensor {
	ctx := l.ctx
	if !l.d.isCPU && c <= cnt {
		_, i32 := l.indices(idx, c)
		eye := C.ggml_diag(ctx, l.constant([]int{c}, 1))
		return C.ggml_get_rows(ctx, eye, C.ggml_reshape_1d(ctx, i32, C.int64_t(cnt)))
	}
	idxF, _ := l.indices(idx, c)
	ar := C.ggml_repeat_4d(ctx, C.ggml_arange(ctx, 0, C.float(c), 1), C.int64_t(c), C.int64_t(cnt), 1, 1)
	ix := C.ggml_repeat_4d(ctx, C.ggml_reshape_2d(ctx, idxF, 1, C.int64_t(cnt)), C.int64_t(c), C.int64_t(cnt), 1, 1)
	d := C.ggml_abs(ctx, C.ggml_sub(ctx, ar, ix))
	return C.ggml_relu(ctx, l.scaleBias(d, -1, 1))
}

// contiguous is x, copied when it is a strided view: ggml's norm kernels
// read whole rows (ggml-vulkan's refuse strided sources).
func (l *lowering) contiguous(x tensor) tensor {
	if bool(C.ggml_is_contiguous(x)) {
		return x
	}
	return C.ggml_cont(l.ctx, x)
}

// custom is a ggml-cpu custom op of f32 result shape ne over srcs.
func (l *lowering) custom(fn C.ggml_custom_op_t, ne [4]C.int64_t, srcs ...tensor) tensor {
	return C.ggml_custom_4d(l.ctx, C.GGML_TYPE_F32, ne[0], ne[1], ne[2], ne[3], &srcs[0], C.int(len(srcs)), fn, C.GGML_N_TASKS_MAX, nil)
}

// relu is max(x, 0) with NaN staying NaN (ir.go); ggml's relu turns NaN
// into 0 on both devices. ggml-vulkan's clamp to [0, +Inf] keeps NaN and
// gives 0 for -Inf (see clamp).
func (l *lowering) relu(x tensor) tensor {
	if l.d.isCPU {
		return l.custom(C.ggml_custom_op_t(C.ag_relu), x.ne, x)
	}
	return l.clamp(x, 0, float32(math.Inf(1)))
}

// angle reduces x to about [-pi, pi] for sin and cos on ggml-vulkan,
// whose GLSL sin and cos are approximate far from 0 (NVIDIA's sin(1000)
// was 5e-3 off on an H200): x - k*2*pi with k = round(x/(2*pi)) and 2*pi in
// two parts, k*6.28125 exact for |k| < 2^16 (as the WebGPU kernels do).
// ±Inf and NaN become NaN, as sin's and cos's are. ggml-cpu calls libm,
// which reduces exactly: x as it is.
func (l *lowering) angle(x tensor) tensor {
	if l.d.isCPU {
		return x
	}
	k := C.ggml_round(l.ctx, l.scaleBias(x, 0.15915494309189535, 0))
	r := C.ggml_sub(l.ctx, x, l.scaleBias(k, 6.28125, 0))
	return C.ggml_sub(l.ctx, r, l.scaleBias(k, 0.0019353071795864769, 0))
}

// log is the natural log. lavapipe's log of a subnormal is log(2^-127) (-88
// for 1e-45, which is neither the log nor the -Inf of a flushed input), so
// on ggml-vulkan it is 2*log(sqrt(x)): sqrt of a subnormal is normal (or 0
// where the device flushes), and every special value maps as log does.
// logHalf returns log(x)/k and k, so a caller that scales anyway (pow)
// folds the 2 into its own factor.
func (l *lowering) logHalf(x tensor) (tensor, float32) {
	if l.d.isCPU {
		return C.ggml_log(l.ctx, x), 1
	}
	return C.ggml_log(l.ctx, C.ggml_sqrt(l.ctx, x)), 2
}

func (l *lowering) lowerUnary(n *backend.Node) tensor {
	ctx := l.ctx
	x := l.in(n, 0)
	switch n.Op {
	case backend.OpNeg:
		return C.ggml_neg(ctx, x)
	case backend.OpExp:
		return C.ggml_exp(ctx, x)
	case backend.OpExpm1:
		// exp(x) - 1: ggml-vulkan has no expm1 and ggml-cpu's is expf(x) -
		// 1 too, so near 0 the error is absolute (about 1e-7, the rounding
		// of e^x), not relative; the special values are expm1's.
		return l.scaleBias(C.ggml_exp(ctx, x), 1, -1)
	case backend.OpLog:
		lg, k := l.logHalf(x)
		if k == 1 {
			return lg
		}
		return l.scaleBias(lg, k, 0)
	case backend.OpSqrt:
		return C.ggml_sqrt(ctx, x)
	case backend.OpReLU:
		return l.relu(x)
	case backend.OpSigmoid:
		return C.ggml_sigmoid(ctx, x)
	case backend.OpTanh:
		return C.ggml_tanh(ctx, x)
	case backend.OpAffine:
		return l.scaleBias(x, n.A, n.B)
	case backend.OpClamp:
		return l.clamp(x, n.A, n.B)
	case backend.OpAbs:
		return C.ggml_abs(ctx, x)
	case backend.OpSin:
		return C.ggml_sin(ctx, l.angle(x))
	case backend.OpCos:
		return C.ggml_cos(ctx, l.angle(x))
	case backend.OpRoundF16:
		if x._type == C.GGML_TYPE_F16 {
			// an add's f16 sum (addToHalf), maybe permuted: the f16
			// products read the contiguous f16 values (halfSource)
			return C.ggml_cast(ctx, l.contiguous(x), C.GGML_TYPE_F32)
		}
		return C.ggml_cast(ctx, C.ggml_cast(ctx, x, C.GGML_TYPE_F16), C.GGML_TYPE_F32)
	case backend.OpRoundBF16:
		// ggml-vulkan converts f32 to bf16 but not back: Caps.Unsupported
		// lists round_bf16 there (the probe sees the refused cast).
		return C.ggml_cast(ctx, C.ggml_cast(ctx, x, C.GGML_TYPE_BF16), C.GGML_TYPE_F32)
	case backend.OpInside:
		if !(n.A < n.B) {
			return l.constant(n.Shape, 0) // an empty interval
		}
		if math.IsInf(float64(n.B), 1) || math.IsInf(float64(n.A), -1) {
			// One bound infinite (ReLU' is inside(x, 0, +Inf)): p =
			// (x-A)*(B-x) is a finite nonzero times an infinity, so +Inf
			// exactly inside, and -Inf or NaN (x on a bound, x infinite, NaN)
			// outside. No p is 0, so both devices' step gives the mask:
			// 3 ggml nodes instead of 13.
			u := x
			if n.A != 0 {
				u = l.scaleBias(x, 1, -n.A)
			}
			return C.ggml_step(ctx, C.ggml_mul(ctx, u, l.scaleBias(x, -1, n.B)))
		}
		// [x > A] * [x < B] from ggml's step, whose value at 0 differed by
		// device (ggml-cpu: x > 0, ggml-vulkan without patch 0006: x >= 0):
		// positive(y) is [y > 0] under both, and 0 for NaN. y = x-A is
		// exact in sign.
		return C.ggml_mul(ctx, l.positive(l.scaleBias(x, 1, -n.A)), l.positive(l.scaleBias(x, -1, n.B)))
	case backend.OpPowConst:
		return l.lowerPow(n, x)
	}
	backend.Unknown("native.lowerUnary", n.Op)
	return nil
}

// lowerPow computes x^A. ggml has no pow: common exponents use exact ops,
// the rest exp(A*log|x|), with the sign restored for odd whole A and NaN for
// x < 0 with a fractional A (log of a negative), as C's powf gives. The
// forms keep C's special values (ir.go): x^0 = 1 for NaN too, and a zero or
// infinite x gives 0 or ±Inf with the sign of x where A is odd.
func (l *lowering) lowerPow(n *backend.Node, x tensor) tensor {
	ctx := l.ctx
	a := float64(n.A)
	switch a {
	case 0:
		return l.constant(n.Shape, 1)
	case 1:
		return x
	case 2:
		return C.ggml_sqr(ctx, x)
	case 3:
		return C.ggml_mul(ctx, C.ggml_sqr(ctx, x), x)
	case 0.5:
		return C.ggml_sqrt(ctx, x)
	case -1:
		return C.ggml_div(ctx, l.constant(n.Shape, 1), x)
	case -0.5:
		// C's (-0)^-0.5 is +Inf, 1/sqrt(-0) is -Inf: abs turns sqrt's -0
		// into +0 (and keeps its NaN for x < 0).
		return C.ggml_div(ctx, l.constant(n.Shape, 1), C.ggml_abs(ctx, C.ggml_sqrt(ctx, x)))
	case -2:
		return C.ggml_div(ctx, l.constant(n.Shape, 1), C.ggml_sqr(ctx, x))
	}
	whole := a == math.Trunc(a) && math.Abs(a) < 1<<24
	odd := whole && math.Mod(a, 2) != 0
	base := x
	if whole {
		base = C.ggml_abs(ctx, x)
	}
	// An odd A multiplies |x|^(A-1) by x (or, A < 0, divides |x|^(A+1) by
	// x): x carries its sign, -0 and infinities included, where a sign
	// factor would meet 0*Inf at x = 0.
	e := a
	switch {
	case odd && a > 0:
		e = a - 1
	case odd:
		e = a + 1
	}
	lg, k := l.logHalf(base)
	r := C.ggml_exp(ctx, l.scaleBias(lg, float32(e)*k, 0))
	switch {
	case odd && a > 0:
		r = C.ggml_mul(ctx, r, x)
	case odd:
		r = C.ggml_div(ctx, r, x)
	}
	return r
}

// toFront permutes ggml dim d to position 0, keeping the other dims in
// order, and makes it contiguous: a row-wise op then reduces along d, and
// its result (with ne0 = 1) has the memory order of the reduced shape.
func (l *lowering) toFront(x tensor, d int) tensor {
	if d == 0 {
		return x
	}
	if d == 1 {
		return l.transposed(x) // the same permutation
	}
	var ax [4]C.int
	for s := 0; s < 4; s++ {
		switch {
		case s < d:
			ax[s] = C.int(s + 1)
		case s == d:
			ax[s] = 0
		default:
			ax[s] = C.int(s)
		}
	}
	return C.ggml_cont(l.ctx, C.ggml_permute(l.ctx, x, ax[0], ax[1], ax[2], ax[3]))
}

// Device loops. ggml-vulkan's pool, sum_rows and mul_mat shaders loop over
// a window, a row or K in one invocation or a few lanes, and lavapipe ends
// an invocation's loops after 65535 iterations in all, carrying on as if
// they had finished (a row max over 4M values read the first 65535). Long
// extents are therefore reduced in two stages on a GPU device; ggml-cpu
// has no such limit and keeps one.
const (
	// poolStage is the window of a GPU device's pools over a long axis
	// (see poolStages), a power of two. On an H100 the f16 GPT 12x768
	// step took 37.8-38.0 ms with 16, 38.0-38.1 with 8, 38.8 with 32,
	// 42.2 with 64 and 44.3 with 128 (more pools, each invocation looping
	// less); the MLP 8x4096 and the convnet were fastest at 16 or 8 too
	// (bench/results/h100-2026-12-07-s31c-ab.txt).
	poolStage = 16
	// sumChunk is the row length of a two-stage sum whose rows have no
	// divisor in 64..1024 (they are padded with zeros to a multiple).
	sumChunk = 1024
	// maxMatmulK is the longest K one mul_mat takes; longer products are
	// summed over parts of matmulKChunk (lavapipe cut its matrix-vector
	// kernel at K = 65535*64).
	maxMatmulK   = 1 << 20
	matmulKChunk = 1 << 18
)

// rowMax is the maximum along ne0, through a max pool whose window is a row
// (ggml has no max reduction). Its start value is -FLT_MAX, so a row of
// -Inf gives -FLT_MAX (see poolAxis).
func (l *lowering) rowMax(x tensor) tensor {
	return l.poolAxis(x, 0, C.GGML_OP_POOL_MAX)
}

// poolAxis pools the contiguous x along its ggml dim d (0 or 1) by op, one
// window covering the whole axis in the end: [1, ne1, ...] or [ne0, 1,
// ...] (see poolStages).
func (l *lowering) poolAxis(x tensor, d int, op C.enum_ggml_op_pool) tensor {
	p, _ := l.poolStages(x, d, op)
	return p
}

// poolStages pools x along its ggml dim d by op down to length 1 and
// returns the result and, for an average, what its values are divided by
// (each pool divides by its whole window). ggml-vulkan's pool shader is
// one invocation per result, looping over its window: a long window with
// few results is a few hundred serial loads per invocation on a GPU
// mostly idle (on an H100 the MLP 8x4096 step's bias gradients, column
// sums of [1024, 4096], took 2.5 ms of its 8.6 ms, and the GPT 12x768
// step's row maxima of [512, 512] masks 3.2 ms). So on a GPU device an
// axis longer than 2*poolStage is pooled in windows of poolStage first,
// and again, until it is short; padding it by poolStage-1 on both sides
// (padded places are skipped) makes the windows cover any length, the
// first holding element 0 alone. ggml's average multiplies each value by
// 1/window (padded places count), so every window is a power of two,
// whose reciprocal is exact: on a GPU device the last one too, padded in
// front from the rest's length L to the next power of two (a window of L
// made a bias gradient over 1e6 rows of ones 999999.94).
func (l *lowering) poolStages(x tensor, d int, op C.enum_ggml_op_pool) (tensor, float64) {
	pool := func(t tensor, w, pad int) tensor {
		if d == 0 {
			return C.ggml_pool_2d(l.ctx, t, op, C.int(w), 1, C.int(w), 1, C.float(pad), 0)
		}
		return C.ggml_pool_2d(l.ctx, t, op, 1, C.int(w), 1, C.int(w), 0, C.float(pad))
	}
	div := 1.0
	for !l.d.isCPU && x.ne[d] > 2*poolStage {
		pad := 0
		if x.ne[d]%poolStage != 0 {
			pad = poolStage - 1
		}
		x, div = pool(x, poolStage, pad), div*poolStage
	}
	L := int(x.ne[d])
	w := L
	if !l.d.isCPU && op == C.GGML_OP_POOL_AVG {
		w = 1 << bits.Len(uint(L-1))
	}
	// one window, starting w-L places before the axis (ggml pads both
	// sides; the padding behind it falls outside the only window)
	return pool(x, w, w-L), div * float64(w)
}

func (l *lowering) lowerReduce(n *backend.Node) tensor {
	x := l.in(n, 0)
	d := len(n.Shape) - 1 - n.Axis
	if n.Op == backend.OpSum {
		return l.reshape(l.sumAxis(x, d), n.Shape)
	}
	if !l.d.isCPU {
		return l.reshape(l.nanAxisMax(x, d), n.Shape)
	}
	return l.reshape(l.nanRowMax(l.toFront(x, d)), n.Shape)
}

// nanRowMax is the maximum along ne0 as ir.go defines it: NaN if the row
// holds one, -Inf for a row of -Inf. ggml-cpu runs ag_row_max; a GPU
// device nanAxisMax.
func (l *lowering) nanRowMax(x tensor) tensor {
	if l.d.isCPU {
		ne := x.ne
		ne[0] = 1
		return l.custom(C.ggml_custom_op_t(C.ag_row_max), ne, x)
	}
	return l.nanAxisMax(x, 0)
}

// nanAxisMax is nanRowMax along ggml dim d on a GPU device, the result
// keeping d with size 1: pools over x in its own layout (dims merged so d
// is ne0 or ne1), with no permuted copy. The max pool skips NaN and -Inf
// (it starts at -FLT_MAX), so its result r is taken times 2 where it is
// -FLT_MAX (a row of -Inf: 2*-FLT_MAX = -Inf; a row whose true maximum is
// -FLT_MAX reads -Inf too, the one value this gets wrong), and times 1 +
// 0*avg(tanh(x)), which is 1 unless the row holds a NaN (tanh maps ±Inf to
// ±1, so only a NaN makes the average NaN). (Halving x for the pool and
// doubling its result did the first without a comparison, but flushed
// maxima near the smallest normal to 0 on devices without subnormals:
// NVIDIA's.) The NaN test was a sum_rows of the tanhs, which gives each row
// a workgroup of a subgroup's lanes: the convnet's max-pool gradient took
// the maximum of 1.6M rows of 4 and (Maximum's pairs) 6.4M rows of 2 that
// way, most of 29 SUM_ROWS' 9.7 ms of a 21 ms step on an H100
// (GGML_VK_PERF_LOGGER); the average pool is one invocation per row, as the
// max pool. About ten ggml nodes (14 with an unpatched step).
func (l *lowering) nanAxisMax(x tensor, d int) tensor {
	x = l.contiguous(x)
	if d >= 2 {
		ne := x.ne
		inner := ne[0] * ne[1]
		if d == 2 {
			x = C.ggml_reshape_3d(l.ctx, x, inner, ne[2], ne[3])
		} else {
			x = C.ggml_reshape_2d(l.ctx, x, inner*ne[2], ne[3])
		}
		d = 1
	}
	return l.poolFix(l.poolAxis(x, d, C.GGML_OP_POOL_MAX), l.poolAxis(C.ggml_tanh(l.ctx, x), d, C.GGML_OP_POOL_AVG))
}

// poolFix turns r, the maxima of ggml's max pool (which starts at -FLT_MAX
// and skips NaN), into ir.go's: -Inf where r is -FLT_MAX, NaN where tanhs,
// a sum or average of the tanh of the pooled values (NaN only where one is
// NaN), is.
func (l *lowering) poolFix(r, tanhs tensor) tensor {
	// low is 2 exactly where r is -FLT_MAX (r + FLT_MAX is 0), else 1
	// (r >= -FLT_MAX, no NaN), whichever way the device's step treats 0.
	low := l.scaleBias(l.positive(l.scaleBias(r, 1, math.MaxFloat32)), -1, 2)
	nan := l.scaleBias(tanhs, 0, 1)
	return C.ggml_mul(l.ctx, C.ggml_mul(l.ctx, r, low), nan)
}

// maximum is ir.go's elementwise maximum of a and b (one shape): ggml has
// no binary max, so the pairs (a, b) become rows of two and take
// nanRowMax, which keeps NaN, gives a on ties (ag_row_max keeps the first
// of equal values; on ggml-vulkan the two are equal), and is exact.
func (l *lowering) maximum(a, b tensor) tensor {
	ne := a.ne
	n := C.int64_t(ne[0] * ne[1] * ne[2] * ne[3])
	pairs := C.ggml_concat(l.ctx, C.ggml_reshape_2d(l.ctx, C.ggml_cont(l.ctx, a), 1, n), C.ggml_reshape_2d(l.ctx, C.ggml_cont(l.ctx, b), 1, n), 0)
	return C.ggml_reshape_4d(l.ctx, C.ggml_cont(l.ctx, l.nanRowMax(pairs)), ne[0], ne[1], ne[2], ne[3])
}

// keep is ir.go's keep(a, b) (one shape): ggml has no select, and b*[a !=
// 0] would be NaN where b is infinite, so each pair (b, -0) is a table of
// two rows of one element, and a batched get_rows (one table per element)
// picks row 1 where a is ±0 and row 0 elsewhere. The row index is 1 -
// |a|*2^149, made by two scales (|a|*2^127 is at least 2^-22 for every
// nonzero a, subnormals included), which clampIndex clamps to 0..1: 1 at ±0,
// 0 for a nonzero a, and 0 for NaN (relu turns NaN into 0 there).
func (l *lowering) keep(a, b tensor) tensor {
	ctx := l.ctx
	ne := b.ne
	n := C.int64_t(ne[0] * ne[1] * ne[2] * ne[3])
	mag := l.scaleBias(l.scaleBias(C.ggml_abs(ctx, a), 0x1p127, 0), -0x1p22, 1)
	// mag is 1 or at most 0: clamped, it is whole already (no rounding)
	idx := C.ggml_cast(ctx, l.clampIndex(C.ggml_reshape_2d(ctx, C.ggml_cont(ctx, mag), 1, n), 2), C.GGML_TYPE_I32)
	zero := l.constant([]int{int(n), 1, 1}, float32(math.Copysign(0, -1))) // ne = (1, 1, n)
	tab := C.ggml_concat(ctx, C.ggml_reshape_3d(ctx, C.ggml_cont(ctx, b), 1, 1, n), zero, 1)
	return C.ggml_reshape_4d(ctx, C.ggml_get_rows(ctx, tab, idx), ne[0], ne[1], ne[2], ne[3])
}

// maxShortSum is the longest axis a GPU device sums as adds of its slices
// (sumShortAxis) rather than with sum_rows.
const maxShortSum = 16

// sumAxis sums x along its ggml dim d (the result keeps d with size 1, or
// moves it to ne0): a short axis on a GPU device as adds of its slices
// (sumShortAxis), else the rows of x with d brought to the front.
func (l *lowering) sumAxis(x tensor, d int) tensor {
	if !l.d.isCPU && x.ne[d] >= 2 && x.ne[d] <= maxShortSum {
		return l.sumShortAxis(x, d)
	}
	if d == 0 {
		return l.sumRows(x)
	}
	return l.sumRows(l.toFront(x, d))
}

// sumShortAxis sums x along its ggml dim d, of length 2..maxShortSum, as
// adds of the slices along d, views in x's own layout: ggml-vulkan's
// sum_rows gives every row a workgroup, so the 1.6M rows of two values a
// convnet's max-pool gradient sums took 100+ us there (GGML_VK_PERF_LOGGER
// on an H100), where one add over them takes a few; and no permuted copy
// brings d to the front. The sum runs in slice order.
func (l *lowering) sumShortAxis(x tensor, d int) tensor {
	ne, nb := x.ne, x.nb
	ne[d] = 1
	slice := func(k int) tensor {
		return C.ggml_view_4d(l.ctx, x, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], C.size_t(k)*nb[d])
	}
	r := slice(0)
	for k := 1; k < int(x.ne[d]); k++ {
		r = C.ggml_add(l.ctx, r, slice(k))
	}
	return r
}

// sumRows sums along ne0. ggml-vulkan reduces each row in one workgroup,
// so a long row (a loss over a whole batch: 262144 values at batch 256)
// takes one SM for hundreds of microseconds, and on lavapipe a row longer
// than its lanes may loop over (65535 times the subgroup, 8 there) lost
// its tail; a long row is summed in two stages instead (chunks of c
// values, then the chunk sums), padded with zeros to a multiple of
// sumChunk where no c in 64..1024 divides it.
func (l *lowering) sumRows(f tensor) tensor {
	if l.d.isCPU || int(f.ne[0]) < stagedRowLen {
		return C.ggml_sum_rows(l.ctx, f)
	}
	// The chunk sums are summed the same way while they are many (2^25
	// values: 32768 sums of 1024, then 32), so that no f32 running sum
	// is thousands of terms long: 2^25 x 0.1 was 4e-5 off in two stages.
	sum := l.sumRows(l.sumRowsStage(f))
	return C.ggml_reshape_4d(l.ctx, sum, 1, f.ne[1], f.ne[2], f.ne[3])
}

// stagedRowLen is the row length from which a GPU device's sumRows sums
// in stages.
const stagedRowLen = 8192

// sumRowsStage is one stage of sumRows on a GPU device: the sums of the
// chunks of each row of f [L, ...] (L >= stagedRowLen), as [L/c, rows]:
// chunks of the largest length from 1024 down to 64 that divides L, else
// of sumChunk with the row padded with zeros.
func (l *lowering) sumRowsStage(f tensor) tensor {
	L := int(f.ne[0])
	if !bool(C.ggml_is_contiguous(f)) {
		f = C.ggml_cont(l.ctx, f)
	}
	c := 0
	for k := 1024; k >= 64; k-- {
		if L%k == 0 {
			c = k
			break
		}
	}
	x := f
	if c == 0 {
		c = sumChunk
		x = C.ggml_pad(l.ctx, f, C.int(ceilDiv(L, c)*c-L), 0, 0, 0)
		L = ceilDiv(L, c) * c
	}
	rows := C.int64_t(f.ne[1] * f.ne[2] * f.ne[3])
	part := C.ggml_sum_rows(l.ctx, C.ggml_reshape_3d(l.ctx, x, C.int64_t(c), C.int64_t(L/c), rows))
	return C.ggml_reshape_2d(l.ctx, part, C.int64_t(L/c), rows)
}

// mulMat is ggml_mul_mat(x, y) (x [K, N, ...], y [K, M, ...]: y * x^T).
// On a GPU device a flat product with K past maxMatmulK, or with a long K
// and few output tiles (splitKChunk), is the sum of the products of parts
// along K (zero-padded to a multiple): the parts become a batch of one
// mul_mat, whose results sum_rows adds.
func (l *lowering) mulMat(x, y tensor) tensor {
	K := int(x.ne[0])
	flat := x.ne[2] == 1 && x.ne[3] == 1 && y.ne[2] == 1 && y.ne[3] == 1
	if l.d.isCPU || !flat {
		return C.ggml_mul_mat(l.ctx, x, y)
	}
	kc := matmulKChunk
	if K <= maxMatmulK {
		if kc = splitKChunk(K, int(y.ne[1]), int(x.ne[1])); kc == 0 {
			return C.ggml_mul_mat(l.ctx, x, y)
		}
	}
	s := ceilDiv(K, kc)
	parts := func(t tensor) tensor { // [K, R] -> [kc, R, s]
		if !bool(C.ggml_is_contiguous(t)) {
			t = C.ggml_cont(l.ctx, t)
		}
		if s*kc != K {
			t = C.ggml_pad(l.ctx, t, C.int(s*kc-K), 0, 0, 0)
		}
		t3 := C.ggml_reshape_3d(l.ctx, t, C.int64_t(kc), C.int64_t(s), t.ne[1])
		return C.ggml_cont(l.ctx, C.ggml_permute(l.ctx, t3, 0, 2, 1, 3))
	}
	p := C.ggml_mul_mat(l.ctx, parts(x), parts(y))                 // [N, M, s]
	ps := C.ggml_cont(l.ctx, C.ggml_permute(l.ctx, p, 1, 2, 0, 3)) // [s, N, M]
	return C.ggml_reshape_2d(l.ctx, l.sumRows(ps), x.ne[1], y.ne[1])
}

// splitKChunk is the part of K that a GPU device's product of M x N
// outputs sums in one workgroup when the outputs are few tiles and K is
// long, else 0 (one mul_mat). ggml-vulkan splits K itself only where M and
// N fill a tile each (and at most 8 ways), so a convnet's first weight
// gradient (M=9, N=32, K=N*H*W=50176 at batch 64) ran in one workgroup:
// 2.2 ms of the 10 ms step on an H100 (GGML_VK_PERF_LOGGER). Parts below
// 512 (448) are not split again by ggml (patch 0008); about 256 workgroups
// in all (tiles of 64x64 times parts) fill an H100's 132 SMs twice.
func splitKChunk(K, M, N int) int {
	const minPart, align = 448, 64
	tiles := ceilDiv(M, 64) * ceilDiv(N, 64)
	if K < 8*minPart || tiles > 32 {
		return 0
	}
	s := min(ceilDiv(K, minPart), max(2, 256/tiles))
	return ceilDiv(ceilDiv(K, s), align) * align
}

// lowerPermute lowers node i, a permute: a contiguous copy of the permuted
// view (ggml's kernels but copies want their sources contiguous), or the
// view itself where its strides are a new tensor's (denseStrides) or only
// rounds read it.
func (l *lowering) lowerPermute(i int, n *backend.Node) tensor {
	r := len(n.Shape)
	var ax [4]C.int
	for s := 0; s < 4; s++ {
		ax[s] = C.int(s)
	}
	// Output ggml dim j is IR output axis r-1-j, which is IR input axis
	// Perm[r-1-j], which is ggml input dim r-1-Perm[r-1-j].
	for j := 0; j < r; j++ {
		ax[r-1-n.Perm[r-1-j]] = C.int(j)
	}
	x := l.in(n, 0)
	p := C.ggml_permute(l.ctx, x, ax[0], ax[1], ax[2], ax[3])
	if denseStrides(p) {
		return p // x was a view in another order (attnResult)
	}
	if l.onlyRead(i, backend.OpRoundF16, backend.OpRoundBF16) {
		// The rounds' casts read any strides: each writes its contiguous
		// copy straight from the permuted view (attention's heads split
		// from q, k and v at f16 precision: a pass over each saved).
		return p
	}
	return C.ggml_cont(l.ctx, p)
}

// onlyHalfRounds reports whether node i is read by round_f16 nodes only,
// directly or through reshapes and permutes read that way (the heads
// split from q, k and v), and is no output.
func (l *lowering) onlyHalfRounds(i int) bool {
	if l.isOutput(i) {
		return false
	}
	us := l.usersOf(i)
	for _, j := range us {
		switch op := l.g.Nodes[j].Op; {
		case op == backend.OpRoundF16:
		case (op == backend.OpReshape || op == backend.OpPermute) && l.onlyHalfRounds(j):
		default:
			return false
		}
	}
	return len(us) > 0
}

// addToHalf is a + b written as f16: the sum of an add that only rounds to
// f16 read (onlyHalfRounds: a layer norm's output plus its bias, read by
// the next layer's f16 products; q, k and v plus theirs). ggml-vulkan's
// add sums in f32 and converts once, as the round's cast does, so the
// round is that f16 tensor with no copy of its own: an f32 write, and a
// pass reading it back, saved. ggml_add_cast takes only 16-bit or
// quantized a, so the f32 add's result is retyped.
func (l *lowering) addToHalf(a, b tensor) tensor {
	t := C.ggml_add(l.ctx, a, b)
	t._type = C.GGML_TYPE_F16
	t.nb[0] = C.ggml_type_size(C.GGML_TYPE_F16)
	for k := 1; k < 4; k++ {
		t.nb[k] = t.nb[k-1] * C.size_t(t.ne[k-1])
	}
	return t
}

// denseStrides reports whether t's strides are those of a new tensor of
// its shape: row-major, ne0 of stride its element size, each dimension's
// stride the one below times its size, ones included. ggml_is_contiguous
// passes a view that moved an axis of 1 into dim 0, whose nb0 ggml-cpu's
// unary kernels refuse (nb00 == sizeof(src0_t)).
func denseStrides(t tensor) bool {
	nb := C.ggml_type_size(t._type)
	for k := range 4 {
		if t.nb[k] != nb {
			return false
		}
		nb *= C.size_t(t.ne[k])
	}
	return true
}

// isOutput reports whether node i's value is one of the graph's outputs.
func (l *lowering) isOutput(i int) bool {
	for _, o := range l.g.Outputs {
		if o.Node == i {
			return true
		}
	}
	return false
}

// onlyRead reports whether node i is read by nodes of the ops given only,
// one at least, and is no output.
func (l *lowering) onlyRead(i int, ops ...backend.Op) bool {
	if l.isOutput(i) {
		return false
	}
	us := l.usersOf(i)
	for _, j := range us {
		if !slices.Contains(ops, l.g.Nodes[j].Op) {
			return false
		}
	}
	return len(us) > 0
}

// lowerMatMul maps C[M,N] = op(A)[M,K] x op(B)[K,N] (row-major) onto
// ggml_mul_mat (see matMul).
func (l *lowering) lowerMatMul(n *backend.Node) tensor {
	a, b := l.in(n, 0), l.in(n, 1)
	if l.d.isCPU && n.TransA && !n.TransB && rowsContiguous(a) && rowsContiguous(b) {
		return l.matmulTN(a, b)
	}
	ra := l.inShape(n, 0)
	k := ra[len(ra)-1]
	if n.TransA {
		k = ra[len(ra)-2]
	}
	half := false
	if a16, b16, ok := l.halfOperands(n, k); ok {
		a, b, half = a16, b16, true
	}
	return l.matMul(a, b, n.TransA, n.TransB, half)
}

// matmulTN is A^T B on ggml-cpu for A stored [K, M] and B [K, N] whose
// rows are evenly strided (evenRows; K counts the rows of every batch): a
// weight gradient, with no transposed copies, and a kernel that suits the
// small K of a batch (see ag_matmul_tn).
func (l *lowering) matmulTN(a, b tensor) tensor {
	src := [2]tensor{a, b}
	return C.ggml_custom_4d(l.ctx, C.GGML_TYPE_F32, b.ne[0], a.ne[0], 1, 1, &src[0], 2, C.ggml_custom_op_t(C.ag_matmul_tn), C.GGML_N_TASKS_MAX, nil)
}

// matMul is op(a) x op(b) of ggml tensors holding row-major matrices (and
// equal batches), through ggml_mul_mat(x, y), which gives y * x^T with K
// as both operands' ne0: y must hold op(a) as [M rows of K], x must hold
// op(b)^T as [N rows of K]. half: a and b are f16 tensors of f16-rounded
// operands (core's PrecisionF16): ggml-vulkan's f16 matmul on the f16
// values themselves, summing in f32 - the same numbers as the f32 product
// of the rounded values.
func (l *lowering) matMul(a, b tensor, transA, transB, half bool) tensor {
	if !half {
		if r, ok := l.vkMatMul(a, b, transA, transB); ok {
			return r
		}
	}
	y := a
	if transA { // stored [K,M]
		y = l.transposed(a)
	}
	x := b
	if !transB { // stored [K,N]
		x = l.transposed(b)
	}
	M, N := int(y.ne[1]), int(x.ne[1])
	flat := y.ne[2] == 1 && y.ne[3] == 1 && x.ne[2] == 1 && x.ne[3] == 1
	if rows := l.d.mmSplitRows(M, N, half); rows > 0 && flat && y.ne[0] <= maxMatmulK && bool(C.ggml_is_contiguous(y)) {
		// Split y's M rows into M/rows matmuls of one batch (x broadcast):
		// the same memory, but ggml-vulkan picks its tile size from the
		// smaller of the two row counts, so the GPU gets enough workgroups.
		K := y.ne[0]
		y3 := C.ggml_reshape_3d(l.ctx, y, K, C.int64_t(rows), C.int64_t(M/rows))
		r := C.ggml_mul_mat(l.ctx, x, y3)
		if half {
			C.ggml_mul_mat_set_prec(r, C.GGML_PREC_F32)
		}
		return C.ggml_reshape_2d(l.ctx, r, C.int64_t(N), C.int64_t(M))
	}
	if half {
		r := C.ggml_mul_mat(l.ctx, x, y)
		C.ggml_mul_mat_set_prec(r, C.GGML_PREC_F32)
		return r
	}
	return l.mulMat(x, y)
}

// halfOperands returns f16 tensors of the inputs of product n (a matmul or
// a composite product) when both hold f16 values by construction
// (halfSource), on ggml-vulkan (whose f16 matmul is its fast one) and when
// its summed length k needs no splitting (see mulMat); else ok is false.
func (l *lowering) halfOperands(n *backend.Node, k int) (a, b tensor, ok bool) {
	if l.d.isCPU || k > maxMatmulK {
		return nil, nil, false
	}
	a, okA := l.halfSource(n.In[0])
	b, okB := l.halfSource(n.In[1])
	return a, b, okA && okB
}

// halfSource returns an f16 tensor of node j's values when they are f16
// values by construction: a round_f16 (the cast of its input), or an
// unpack_f16 of a pack_f16 (the pack's own 16-bit values: activations that
// core.Device.SetActivationStorage stored, read by a backward product).
// The f16 product of such values sums the same exact products.
func (l *lowering) halfSource(j int) (tensor, bool) {
	nd := &l.g.Nodes[j]
	switch nd.Op {
	case backend.OpRoundF16:
		// The round's own f16 cast (lowerUnary: f16, then back to f32):
		// every product of it shares that one copy, made where the round
		// is, instead of a cast of its input of its own.
		if v := l.val[j]; v != nil && v.op == C.GGML_OP_CPY && v.src[0] != nil && v.src[0]._type == C.GGML_TYPE_F16 {
			return v.src[0], true
		}
		return C.ggml_cast(l.ctx, l.in(nd, 0), C.GGML_TYPE_F16), true
	case backend.OpUnpackF16:
		if l.g.Nodes[nd.In[0]].Op != backend.OpPackF16 {
			return nil, false
		}
		return l.packedValues(nd), true
	}
	return nil, false
}

// rowsContiguous reports whether t is a 2-D f32 matrix whose rows are
// contiguous (any row stride).
func rowsContiguous(t tensor) bool {
	return t.ne[2] == 1 && t.ne[3] == 1 && t.nb[0] == 4 && t.nb[1] >= C.size_t(4*t.ne[0])
}

// evenRows reports whether t's f32 rows are contiguous and evenly strided
// across its batches (dims 2 and 3 continue dim 1's stride), so that
// ag_matmul_tn reads its ne1*ne2*ne3 rows as one matrix.
func evenRows(t tensor) bool {
	s := t.nb[1]
	return t.nb[0] == 4 && s >= C.size_t(4*t.ne[0]) &&
		(t.ne[2] == 1 || t.nb[2] == s*C.size_t(t.ne[1])) &&
		(t.ne[3] == 1 || t.nb[3] == s*C.size_t(t.ne[1]*t.ne[2]))
}

// lowerScatterAdd: out[R, ...] = 0, then row idx[i] += src[i]. ggml-cpu has
// GET_ROWS_BACK (an exact scatter-add); elsewhere it is onehot^T x src as a
// matmul, exact too since every product is src*1 or src*0.
func (l *lowering) lowerScatterAdd(n *backend.Node) tensor {
	ctx := l.ctx
	src := l.in(n, 0)
	cnt := l.inShape(n, 0)[0]
	rows := n.Shape[0]
	width := backend.NumElems(n.Shape[1:])
	idxF, idxI := l.indices(l.in(n, 1), rows)
	src2 := C.ggml_reshape_2d(ctx, src, C.int64_t(width), C.int64_t(cnt))
	if l.d.getRowsBack {
		shape := C.ggml_new_tensor_2d(ctx, C.GGML_TYPE_F32, C.int64_t(width), C.int64_t(rows))
		return l.reshape(C.ggml_get_rows_back(ctx, src2, idxI, shape), n.Shape)
	}
	// ohT[r][i] = relu(1 - |r - idx[i]|), ne = (cnt, rows).
	ar := C.ggml_repeat_4d(ctx, C.ggml_reshape_2d(ctx, C.ggml_arange(ctx, 0, C.float(rows), 1), 1, C.int64_t(rows)), C.int64_t(cnt), C.int64_t(rows), 1, 1)
	ix := C.ggml_repeat_4d(ctx, idxF, C.int64_t(cnt), C.int64_t(rows), 1, 1)
	ohT := C.ggml_relu(ctx, l.scaleBias(C.ggml_abs(ctx, C.ggml_sub(ctx, ar, ix)), -1, 1))
	srcT := C.ggml_cont(ctx, C.ggml_transpose(ctx, src2)) // ne = (cnt, width)
	return l.reshape(l.mulMat(srcT, ohT), n.Shape)
}

// argOf returns the arg index behind node k if it is an OpArg, else -1.
func (l *lowering) argOf(k int) int {
	if l.g.Nodes[k].Op == backend.OpArg {
		return l.g.Nodes[k].Arg
	}
	return -1
}

// privateArgs reports whether the given args are touched by node i only:
// no other node reads them and no output is written to them.
func (l *lowering) privateArgs(i int, args ...int) bool {
	mine := map[int]bool{}
	for _, a := range args {
		mine[a] = true
	}
	for j := range l.g.Nodes {
		for k, in := range l.g.Nodes[j].In {
			if a := l.argOf(in); a >= 0 && mine[a] && (j != i || (k != 2 && k != 3)) {
				return false
			}
		}
	}
	for _, o := range l.g.Outputs {
		if mine[o.Arg] || mine[l.argOf(o.Node)] {
			return false
		}
	}
	return true
}

// lowerAdamW uses ggml's fused opt_step_adamw (its params layout is the
// IR's: patches/0009 gives it the 8th value, the gradient's scale) where it
// is safe. ggml-vulkan orders nodes by the memory each
// writes as its result, and the fused op also writes m and v without saying
// so: when another node reads or writes m or v, the update is composed of
// ordinary ops with explicit copies, which the Vulkan backend does order.
func (l *lowering) lowerAdamW(i int, n *backend.Node) (tensor, []tensor, error) {
	ctx := l.ctx
	w, g, m, v, hp := l.in(n, 0), l.in(n, 1), l.in(n, 2), l.in(n, 3), l.in(n, 4)
	wArg, mArg, vArg := l.argOf(n.In[0]), l.argOf(n.In[2]), l.argOf(n.In[3])
	if wArg == mArg || wArg == vArg || mArg == vArg {
		return nil, nil, fmt.Errorf("w, m and v must be distinct args (got %d, %d, %d)", wArg, mArg, vArg)
	}
	if l.d.isCPU || l.privateArgs(i, mArg, vArg) {
		C.ggml_set_param(w) // opt_step_adamw asserts it
		return C.ggml_opt_step_adamw(ctx, w, g, m, v, hp), nil, nil
	}
	lr, b1, b2, eps := l.scalar(hp, 0), l.scalar(hp, 1), l.scalar(hp, 2), l.scalar(hp, 3)
	wd, bc1, bc2 := l.scalar(hp, 4), l.scalar(hp, 5), l.scalar(hp, 6)
	if backend.NumElems(l.g.Nodes[n.In[4]].Shape) == 8 {
		g = C.ggml_mul(ctx, g, l.scalar(hp, 7)) // the gradient's scale
	}
	m2 := C.ggml_add(ctx, C.ggml_mul(ctx, m, b1), C.ggml_mul(ctx, g, l.scaleBias(b1, -1, 1)))
	v2 := C.ggml_add(ctx, C.ggml_mul(ctx, v, b2), C.ggml_mul(ctx, C.ggml_sqr(ctx, g), l.scaleBias(b2, -1, 1)))
	cm := C.ggml_cpy(ctx, m2, m)
	cv := C.ggml_cpy(ctx, v2, v)
	keep := l.scaleBias(C.ggml_mul(ctx, lr, wd), -1, 1)
	den := C.ggml_add(ctx, C.ggml_sqrt(ctx, C.ggml_mul(ctx, v2, bc2)), eps)
	upd := C.ggml_mul(ctx, C.ggml_div(ctx, C.ggml_mul(ctx, m2, bc1), den), lr)
	w2 := C.ggml_sub(ctx, C.ggml_mul(ctx, w, keep), upd)
	return C.ggml_cpy(ctx, w2, w), []tensor{cm, cv}, nil
}

// lowerSGD composes the momentum update (ggml's opt_step_sgd has no
// momentum): g' = g + wd*w; vel = momentum*vel + g'; w = w - lr*vel.
func (l *lowering) lowerSGD(n *backend.Node) (tensor, []tensor, error) {
	ctx := l.ctx
	w, g, vel, hp := l.in(n, 0), l.in(n, 1), l.in(n, 2), l.in(n, 3)
	if a, b := l.argOf(n.In[0]), l.argOf(n.In[2]); a == b {
		return nil, nil, fmt.Errorf("w and velocity must be distinct args (both %d)", a)
	}
	lr, mom, wd := l.scalar(hp, 0), l.scalar(hp, 1), l.scalar(hp, 2)
	gp := C.ggml_add(ctx, g, C.ggml_mul(ctx, w, wd))
	vel2 := C.ggml_add(ctx, C.ggml_mul(ctx, vel, mom), gp)
	cv := C.ggml_cpy(ctx, vel2, vel)
	w2 := C.ggml_sub(ctx, w, C.ggml_mul(ctx, vel2, lr))
	return C.ggml_cpy(ctx, w2, w), []tensor{cv}, nil
}
