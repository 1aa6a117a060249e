package webgpu

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
)

// exprGen writes the WGSL of a fused kernel's chain: one function
// `fn v<j>(i: u32, acc: f32) -> f32` per node j of the root's tree, giving
// the node's value at linear index i of its own shape. Stored inputs
// (leaves) read their binding; the core, if any, returns acc (the
// matmul/reduction result at the root's index). Shapes, strides and scalars
// are constants of the source, so each fused kernel is its own pipeline.
type exprGen struct {
	g    *backend.Graph
	fp   *plan.Fusion
	root int
	core int
	// leaf[j] is the binding expression prefix of stored node j: its name
	// and whether it is bound as an array of vec4.
	leafName map[int]string
	leafVec  map[int]bool
	done     map[int]bool
	w        strings.Builder
}

func newExprGen(fp *plan.Fusion, root int) *exprGen {
	return &exprGen{g: fp.Graph, fp: fp, root: root, core: fp.Core[root],
		leafName: map[int]string{}, leafVec: map[int]bool{}, done: map[int]bool{}}
}

// wgslF32 spells f exactly; infinities and NaN go through the helpers of
// wgslHelpers because Tint (Chromium) rejects them as constant expressions.
func wgslF32(f float32) string {
	switch {
	case f != f:
		return "qnan()"
	case math.IsInf(float64(f), -1):
		return "negInf()"
	case math.IsInf(float64(f), 1):
		return "(-negInf())"
	}
	return fmt.Sprintf("bitcast<f32>(0x%08xu)", f32bits(f))
}

// name returns the function computing node j, emitting it (and what it
// calls) on first use.
func (e *exprGen) name(j int) string {
	fn := fmt.Sprintf("v%d", j)
	if e.done[j] {
		return fn
	}
	e.done[j] = true
	n := &e.g.Nodes[j]
	var body string
	switch {
	case j == e.core:
		body = "return acc;"
	case j != e.root && !e.fp.Inline[j]:
		body = "return " + e.leafRead(j, "i") + ";"
	default:
		body = e.nodeBody(n)
	}
	fmt.Fprintf(&e.w, "fn %s(i: u32, acc: f32) -> f32 { %s }\n", fn, body)
	return fn
}

func (e *exprGen) leafRead(j int, idx string) string {
	name, ok := e.leafName[j]
	if !ok {
		panic(fmt.Sprintf("webgpu: fused kernel of node %d reads node %d, which has no binding", e.root, j))
	}
	if e.leafVec[j] {
		return fmt.Sprintf("%s[(%s) / 4u][(%s) %% 4u]", name, idx, idx)
	}
	return fmt.Sprintf("%s[%s]", name, idx)
}

// nodeBody is the WGSL body of a pointwise node over its inputs' functions.
func (e *exprGen) nodeBody(n *backend.Node) string {
	in := func(k int) *backend.Node { return &e.g.Nodes[n.In[k]] }
	call := func(k int, idx string) string { return fmt.Sprintf("%s(%s, acc)", e.name(n.In[k]), idx) }
	switch {
	case n.Op == backend.OpFill:
		return "return " + wgslF32(n.A) + ";"
	case n.Op.IsUnary():
		return fmt.Sprintf("let x = %s; let a = %s; let b = %s; return %s;", call(0, "i"), wgslF32(n.A), wgslF32(n.B), elemExpr(n.Op))
	case n.Op.IsBinary():
		ia := idxMap(n.Shape, backend.BroadcastStrides(in(0).Shape, n.Shape), in(0).Shape)
		ib := idxMap(n.Shape, backend.BroadcastStrides(in(1).Shape, n.Shape), in(1).Shape)
		return fmt.Sprintf("let x = %s; let y = %s; return %s;", call(0, ia), call(1, ib), elemExpr(n.Op))
	case n.Op == backend.OpReshape:
		return "return " + call(0, "i") + ";"
	case n.Op == backend.OpExpand:
		return "return " + call(0, idxMap(n.Shape, backend.BroadcastStrides(in(0).Shape, n.Shape), in(0).Shape)) + ";"
	case n.Op == backend.OpPermute:
		st := backend.Strides(in(0).Shape)
		ps := make([]int, len(n.Perm))
		for k, a := range n.Perm {
			ps[k] = st[a]
		}
		return "return " + call(0, idxMap(n.Shape, ps, nil)) + ";"
	case n.Op == backend.OpSliceRows:
		off := n.Start * backend.NumElems(n.Shape[1:])
		return "return " + call(0, fmt.Sprintf("i + %du", off)) + ";"
	case n.Op == backend.OpGetRows:
		t := in(0).Shape
		w := backend.NumElems(t[1:])
		return fmt.Sprintf("let r = idx(%s, %du); return %s;", call(1, fmt.Sprintf("i / %du", w)), t[0], call(0, fmt.Sprintf("r * %du + i %% %du", w, w)))
	case n.Op == backend.OpOneHot:
		c := n.Shape[1]
		return fmt.Sprintf("return select(0.0, 1.0, idx(%s, %du) == i %% %du);", call(0, fmt.Sprintf("i / %du", c)), c, c)
	}
	backend.Unknown("webgpu.nodeBody", n.Op)
	return ""
}

// idxMap is the WGSL index into an operand read at index i of shape out
// through strides st (0 on broadcast dimensions). in, when given, is the
// operand's shape: equal shapes read at i itself.
func idxMap(out, st []int, in []int) string {
	if in != nil && slices.Equal(in, out) {
		return "i"
	}
	var terms []string
	inner := 1
	for d := len(out) - 1; d >= 0; d-- {
		if st[d] != 0 && out[d] > 1 {
			c := "i"
			if inner > 1 {
				c = fmt.Sprintf("(i / %du)", inner)
			}
			if backend.NumElems(out[:d]) > 1 {
				c = fmt.Sprintf("(%s %% %du)", c, out[d])
			}
			if st[d] != 1 {
				c = fmt.Sprintf("%s * %du", c, st[d])
			}
			terms = append(terms, c)
		}
		inner *= out[d]
	}
	if len(terms) == 0 {
		return "0u"
	}
	return strings.Join(terms, " + ")
}

// lowerFused adds the dispatch of fused root r: a matmul with epilogue, a
// reduction with prologue (and epilogue), or a pointwise map.
func (p *program) lowerFused(fp *plan.Fusion, r int, locs []loc) error {
	g := fp.Graph
	n := &g.Nodes[r]
	ne := backend.NumElems(n.Shape)
	rd := fp.Reads(r)
	ref := func(j int) bref {
		l := locs[j]
		return bref{kind: l.kind, idx: l.idx, size: uint64(backend.NumElems(g.Nodes[j].Shape)) * 4}
	}
	e := newExprGen(fp, r)
	m := fp.Core[r]
	if m >= 0 && g.Nodes[m].Op == backend.OpMatMul {
		return p.lowerMatmul(r, m, locs)
	}
	var decls []bindDecl
	var binds []bref
	for k, j := range rd {
		name := fmt.Sprintf("L%d", k)
		e.leafName[j] = name
		decls = append(decls, bindDecl{name: name})
		binds = append(binds, ref(j))
	}
	decls = append(decls, bindDecl{name: "Y", rw: true})
	binds = append(binds, ref(r))
	red := -1
	switch {
	case n.Op == backend.OpSum || n.Op == backend.OpMax:
		red = r
	case m >= 0:
		red = m
	}
	if red < 0 {
		fn := e.name(r)
		src := e.w.String() + linearHead + fmt.Sprintf("\tif (i >= %du) { return; }\n\tY[i] = %s(i, 0.0);\n}\n", ne, fn)
		x, y := p.grid(ne, wg)
		p.add(r, newKernel("fused_map", decls, src), binds, nil, x, y, 1)
		return nil
	}
	rn := &g.Nodes[red]
	s := g.Nodes[rn.In[0]].Shape
	outer := backend.NumElems(s[:rn.Axis])
	rlen := s[rn.Axis]
	inner := backend.NumElems(s[rn.Axis+1:])
	isMax := rn.Op == backend.OpMax
	src := e.name(rn.In[0])
	epi := "r"
	if red != r {
		epi = e.name(r) + "(o, r)"
	}
	term := func(fn, idx string) string { return fmt.Sprintf("%s(%s, 0.0)", fn, idx) }
	fns := e.w.String()
	if inner == 1 {
		reduce := "reduceSum"
		if isMax {
			reduce = "reduceMax"
		}
		if (rlen < splitRowMin || outer >= splitRowMaxRows) && ceilDiv(rlen, wg) <= p.b.maxTrips {
			body := fmt.Sprintf(`
	%s%s
	let r = %s(acc, lid);
	let o = row;
	if (lid == 0u) { Y[o] = %s; }
}
`, accDecl(isMax), accLoop(isMax, fmt.Sprintf("for (var c = lid; c < C; c = c + %du)", wg), term(src, "base + c")), reduce, epi)
			x, y := p.grid(outer, 1)
			p.add(r, newKernel("fused_reduce_row", decls, fns+rowHead+body), binds, []uint32{uint32(outer), uint32(rlen)}, x, y, 1)
			return nil
		}
		// Few long rows, or rows longer than a workgroup's lanes may loop
		// over (maxTrips): parts of each row reduced by many workgroups into
		// the scratch buffer, then one workgroup per row reduces its parts.
		parts := max(min(splitRowMaxParts, ceilDiv(rlen, splitRowChunk)), ceilDiv(rlen, wg*p.b.maxTrips))
		chunk := (rlen + parts - 1) / parts
		part := bref{kind: refScratch, size: uint64(outer*parts) * 4}
		p.scratchBytes = max(p.scratchBytes, part.size)
		d1 := append(append([]bindDecl(nil), decls[:len(decls)-1]...), bindDecl{name: "Y", rw: true})
		b1 := append(append([]bref(nil), binds[:len(binds)-1]...), part)
		body1 := fmt.Sprintf(`
	let rr = row / %[1]du; let ch = row %% %[1]du;
	let lo = rr * %[2]du + ch * %[3]du;
	let hi = rr * %[2]du + min(%[2]du, ch * %[3]du + %[3]du);
	%[4]s%[5]s
	let r = %[6]s(acc, lid);
	if (lid == 0u) { Y[row] = r; }
}
`, parts, rlen, chunk, accDecl(isMax), accLoop(isMax, fmt.Sprintf("for (var c = lo + lid; c < hi; c = c + %du)", wg), term(src, "c")), reduce)
		x, y := p.grid(outer*parts, 1)
		p.add(r, newKernel("reduce_parts", d1, fns+rowHead+body1), b1, []uint32{uint32(outer * parts), uint32(rlen)}, x, y, 1)
		d2 := append([]bindDecl{{name: "Part"}}, decls...)
		b2 := append([]bref{part}, binds...)
		body2 := fmt.Sprintf(`
	%s%s
	let r = %s(acc, lid);
	let o = row;
	if (lid == 0u) { Y[o] = %s; }
}
`, accDecl(isMax), accLoop(isMax, fmt.Sprintf("for (var c = lid; c < C; c = c + %du)", wg), "Part[base + c]"), reduce, epi)
		x, y = p.grid(outer, 1)
		p.add(r, newKernel("reduce_combine", d2, fns+rowHead+body2), b2, []uint32{uint32(outer), uint32(parts)}, x, y, 1)
		return nil
	}
	// Reduction along a middle axis.
	comb := "red[lid] + red[lid + %du]"
	if isMax {
		comb = "maxp(red[lid], red[lid + %du])"
	}
	var tree strings.Builder
	for s := colLanes / 2; s >= 1; s /= 2 {
		fmt.Fprintf(&tree, "\tif (lane < %du) { red[lid] = %s; }\n\tworkgroupBarrier();\n", s, fmt.Sprintf(comb, s*colWidth))
	}
	colTerm := func(fn string) func(string) string {
		return func(idx string) string { return term(fn, idx) }
	}
	// An axis longer than colLanes lanes may loop over (maxTrips), or on a
	// GPU one with too few outputs to fill it (a bias gradient: 1024
	// columns are 32 workgroups), is reduced in parts into the scratch
	// buffer as [parts, ne], then along the parts the same way (with the
	// epilogue). The order stays a tree of sequential runs.
	parts := 1
	if ceilDiv(rlen, colLanes) > p.b.maxTrips {
		parts = ceilDiv(rlen, colLanes*min(splitTrips, p.b.maxTrips))
	}
	if g := ceilDiv(ne, colWidth); p.gpuPlans() && g < colSplitTarget {
		parts = max(parts, min(ceilDiv(colSplitTarget, g), rlen/(colLanes*colMinRun)))
	}
	if parts <= 1 {
		body := colReduceSrc(ne, inner, rlen, 1, isMax, colTerm(src), tree.String(), "Y[o] = "+epi+";")
		x, y := p.grid(ceilDiv(ne, colWidth), 1)
		p.add(r, newKernel("fused_reduce_col", decls, fns+body), binds, nil, x, y, 1)
		return nil
	}
	part := bref{kind: refScratch, size: uint64(parts*ne) * 4}
	p.scratchBytes = max(p.scratchBytes, part.size)
	d1 := append(append([]bindDecl(nil), decls[:len(decls)-1]...), bindDecl{name: "Y", rw: true})
	b1 := append(append([]bref(nil), binds[:len(binds)-1]...), part)
	body1 := colReduceSrc(ne, inner, rlen, parts, isMax, colTerm(src), tree.String(), fmt.Sprintf("Y[p * %du + o] = r;", ne))
	x, y := p.grid(parts*ceilDiv(ne, colWidth), 1)
	p.add(r, newKernel("reduce_col_parts", d1, fns+body1), b1, nil, x, y, 1)
	d2 := append([]bindDecl{{name: "Part"}}, decls...)
	b2 := append([]bref{part}, binds...)
	fns2 := fns + "fn part(i: u32, acc: f32) -> f32 { return Part[i]; }\n"
	body2 := colReduceSrc(ne, ne, parts, 1, isMax, colTerm("part"), tree.String(), "Y[o] = "+epi+";")
	x, y = p.grid(ceilDiv(ne, colWidth), 1)
	p.add(r, newKernel("reduce_col_combine", d2, fns2+body2), b2, nil, x, y, 1)
	return nil
}

// colReduceSrc is the main function of a reduction along the middle axis of
// an [outer, rlen, inner] view into its ne = outer*inner outputs: a
// workgroup owns colWidth consecutive outputs o (coalesced reads) of one of
// parts equal parts p of the axis, and colLanes lanes split the part, then
// combine through workgroup memory (tree). term gives the step of the
// accumulation acc for the element at index idx; store writes r, the result
// of output o of part p.
func colReduceSrc(ne, inner, rlen, parts int, isMax bool, term func(idx string) string, tree, store string) string {
	chunk := ceilDiv(rlen, parts)
	groups := ceilDiv(ne, colWidth) // per part
	return fmt.Sprintf(`var<workgroup> red: array<f32, %[1]d>;
@compute @workgroup_size(%[1]d)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let lane = lid / %[2]du;
	let g = wid.y * nwg.x + wid.x;
	let p = g / %[3]du;
	let o = (g %% %[3]du) * %[2]du + lid %% %[2]du;
	let live = p < %[4]du && o < %[5]du;
	%[6]s
	if (live) {
		let base = (o / %[7]du) * %[8]du + o %% %[7]du;
		let end = min(%[9]du, p * %[10]du + %[10]du);
		%[12]s
	}
	red[lid] = acc;
	workgroupBarrier();
%[13]s	if (lane == 0u && live) { let r = red[lid]; %[14]s }
}
`, colWidth*colLanes, colWidth, groups, parts, ne, accDecl(isMax), inner, rlen*inner, rlen, chunk, colLanes,
		accLoop(isMax, fmt.Sprintf("for (var k = p * %du + lane; k < end; k = k + %du)", chunk, colLanes), term(fmt.Sprintf("base + k * %du", inner))), tree, store)
}

// sumBlock is the run of terms a lane adds before folding them into its
// total: a lane's thousands of terms then add like a two-level tree, whose
// rounding grows with the number of blocks rather than of terms (the sum of
// 2^25 x 0.1 is 4e-6 off in one run, 1e-7 in blocks). Plain additions keep
// IEEE's NaN and Inf, which compensated sums would not.
const sumBlock = 32

// accDecl declares a lane's accumulator acc (and for sums its block).
func accDecl(isMax bool) string {
	if isMax {
		return "var acc = negInf();\n"
	}
	return "var acc = 0.0; var blk = 0.0; var nb = 0u;\n"
}

// accLoop runs loop over term into acc: a NaN-propagating max, or a sum in
// blocks of sumBlock terms.
func accLoop(isMax bool, loop, term string) string {
	if isMax {
		return fmt.Sprintf("\t%s { acc = maxp(acc, %s); }\n", loop, term)
	}
	return fmt.Sprintf("\t%s { blk = blk + %s; nb = nb + 1u; if (nb == %du) { acc = acc + blk; blk = 0.0; nb = 0u; } }\n\tacc = acc + blk;\n", loop, term, sumBlock)
}

// dotMaxOutputs is the largest product (batch*M*N outputs) that runs as
// dot products rather than tiles: a 64x64 tile would compute thousands of
// padding products per output, and one tile with a long K leaves a GPU idle.
const dotMaxOutputs = 16

// lowerDot adds the dispatches of a matmul with few outputs computing root
// r (r == mi: plain; else r's chain is the epilogue): each output is a dot
// product over K, reduced by a workgroup's lanes per part of K (one part
// up to wg*splitTrips, so no lane loops past maxTrips), then the parts of
// each output summed with the epilogue (a second pass where K has several).
func (p *program) lowerDot(r, mi int, locs []loc) error {
	fp := p.fp
	g := fp.Graph
	ref := func(j int) bref {
		l := locs[j]
		return bref{kind: l.kind, idx: l.idx, size: uint64(backend.NumElems(g.Nodes[j].Shape)) * 4}
	}
	mn := &g.Nodes[mi]
	rk := len(mn.Shape)
	M, N := mn.Shape[rk-2], mn.Shape[rk-1]
	a := g.Nodes[mn.In[0]].Shape
	K := a[rk-1]
	if mn.TransA {
		K = a[rk-2]
	}
	ne := backend.NumElems(mn.Shape)
	chunk := min(K, wg*min(splitTrips, p.b.maxTrips))
	parts := ceilDiv(K, chunk)
	// The element k of the dot product of output o = (b, m, n).
	a0, sa := "b * %[1]du + m * %[3]du", "1u"
	if mn.TransA {
		a0, sa = "b * %[1]du + m", "%[4]du"
	}
	b0, sb := "b * %[2]du + n", "%[5]du"
	if mn.TransB {
		b0, sb = "b * %[2]du + n * %[3]du", "1u"
	}
	index := func(f string) string {
		if !strings.Contains(f, "%") {
			return f
		}
		return fmt.Sprintf(f, M*K, K*N, K, M, N)
	}
	e := newExprGen(fp, r)
	var rd []int
	if r != mi {
		rd = fp.Reads(r)
	}
	// epilogue binds what the epilogue reads (an operand too, under its
	// own name where the kernel does not bind it as A or B) and returns
	// the WGSL functions and the expression of the result of output o.
	epilogue := func(named bool) ([]bindDecl, []bref, string, string) {
		if r == mi {
			return nil, nil, "", "r"
		}
		var ds []bindDecl
		var bs []bref
		for _, j := range rd {
			if named && (j == mn.In[0] || j == mn.In[1]) {
				continue
			}
			name := fmt.Sprintf("L%d", len(ds))
			e.leafName[j] = name
			ds = append(ds, bindDecl{name: name})
			bs = append(bs, ref(j))
		}
		epi := e.name(r) + "(o, r)"
		return ds, bs, e.w.String(), epi
	}
	body1 := fmt.Sprintf(`
	let o = row / %[1]du; let p = row %% %[1]du;
	let b = o / %[2]du; let m = (o / %[3]du) %% %[4]du; let n = o %% %[3]du;
	let a0 = %[5]s; let b0 = %[6]s;
	let lo = p * %[7]du; let hi = min(%[8]du, lo + %[7]du);
	var acc = 0.0;
	for (var k = lo + lid; k < hi; k = k + %[9]du) { acc = acc + A[a0 + k * %[10]s] * B[b0 + k * %[11]s]; }
	let r = reduceSum(acc, lid);
`, parts, M*N, N, M, index(a0), index(b0), chunk, K, wg, index(sa), index(sb))
	decls := []bindDecl{{name: "A"}, {name: "B"}}
	binds := []bref{ref(mn.In[0]), ref(mn.In[1])}
	x, y := p.grid(ne*parts, 1)
	prm := []uint32{uint32(ne * parts), uint32(K)}
	if parts == 1 {
		e.leafName[mn.In[0]], e.leafName[mn.In[1]] = "A", "B"
		ds, bs, fns, epi := epilogue(true)
		decls = append(append(decls, ds...), bindDecl{name: "Y", rw: true})
		binds = append(append(binds, bs...), ref(r))
		src := fns + rowHead + body1 + fmt.Sprintf("\tif (lid == 0u) { Y[o] = %s; }\n}\n", epi)
		p.add(r, newKernel("matmul_dot", decls, src), binds, prm, x, y, 1)
		return nil
	}
	part := bref{kind: refScratch, size: uint64(ne*parts) * 4}
	p.scratchBytes = max(p.scratchBytes, part.size)
	decls = append(decls, bindDecl{name: "Part", rw: true})
	binds = append(binds, part)
	p.add(r, newKernel("matmul_dot_parts", decls, rowHead+body1+"\tif (lid == 0u) { Part[row] = r; }\n}\n"), binds, prm, x, y, 1)
	ds, bs, fns, epi := epilogue(false)
	decls2 := append(append([]bindDecl{{name: "Part"}}, ds...), bindDecl{name: "Y", rw: true})
	binds2 := append(append([]bref{part}, bs...), ref(r))
	body2 := fmt.Sprintf(`
	var acc = 0.0;
	for (var c = lid; c < C; c = c + %du) { acc = acc + Part[base + c]; }
	let r = reduceSum(acc, lid);
	let o = row;
	if (lid == 0u) { Y[o] = %s; }
}
`, wg, epi)
	x, y = p.grid(ne, 1)
	p.add(r, newKernel("matmul_dot_combine", decls2, fns+rowHead+body2), binds2, []uint32{uint32(ne), uint32(parts)}, x, y, 1)
	return nil
}

// pairwise sums terms as a balanced tree, so the rounding error of many
// terms grows with log2 of their number (a K split into many parts).
func pairwise(terms []string) string {
	if len(terms) == 1 {
		return terms[0]
	}
	h := len(terms) / 2
	return "(" + pairwise(terms[:h]) + " + " + pairwise(terms[h:]) + ")"
}

// Reduction shapes. A row reduction of fewer than splitRowMaxRows rows of
// at least splitRowMin elements runs in two steps (one workgroup per row
// would leave a GPU idle): parts of splitRowChunk elements, at most
// splitRowMaxParts per row (more where a part would take a lane past
// maxTrips). Column reductions use colWidth x colLanes invocations per
// workgroup, in two steps where the lanes would loop past maxTrips, or on
// a GPU where fewer than colSplitTarget workgroups would run: then in
// parts (up to that many workgroups) of at least colMinRun terms per lane.
// The bias gradients of the 4x1024 step at batch 4096 ([4096, 1024] to
// 1024) took 38-50 us each on an H200 in one step (32 workgroups).
const (
	colSplitTarget   = 256
	colMinRun        = 32
	splitRowMin      = 8192
	splitRowMaxRows  = 64
	splitRowChunk    = 2048
	splitRowMaxParts = 256
	colWidth         = 32
	colLanes         = 8
)

// lowerGroup adds the one dispatch of an optimizer group ending at node
// last, and keeps the members' own dispatches as its fallback for runs
// where bound buffers alias (one dispatch cannot write a buffer another
// binding of it reads).
func (p *program) lowerGroup(fp *plan.Fusion, last int, locs []loc) error {
	g := fp.Graph
	members := fp.Group[last]
	ref := func(j int) bref {
		l := locs[j]
		return bref{kind: l.kind, idx: l.idx, size: uint64(backend.NumElems(g.Nodes[j].Shape)) * 4}
	}
	op := g.Nodes[last].Op
	var decls []bindDecl
	var binds []bref
	hp := map[int]string{}
	for _, j := range members {
		n := &g.Nodes[j]
		h := n.In[len(n.In)-1]
		if _, ok := hp[h]; !ok {
			hp[h] = fmt.Sprintf("H%d", len(hp))
			decls = append(decls, bindDecl{name: hp[h]})
			binds = append(binds, ref(h))
		}
	}
	// Tensors of whole vec4s are updated 4 elements per invocation.
	u := 4
	for _, j := range members {
		if backend.NumElems(g.Nodes[j].Shape)%4 != 0 {
			u = 1
		}
	}
	vec := u == 4
	var body strings.Builder
	total := 0
	for k, j := range members {
		n := &g.Nodes[j]
		ne := backend.NumElems(n.Shape) / u
		W, G, Mo, V := fmt.Sprintf("W%d", k), fmt.Sprintf("G%d", k), fmt.Sprintf("M%d", k), fmt.Sprintf("V%d", k)
		H := hp[n.In[len(n.In)-1]]
		if k > 0 {
			body.WriteString(" else ")
		} else {
			body.WriteString("\t")
		}
		fmt.Fprintf(&body, "if (i < %du) {\n\t\tlet e = i - %du;\n", total+ne, total)
		if op == backend.OpAdamW {
			decls = append(decls, bindDecl{name: W, rw: true, vec4: vec}, bindDecl{name: G, vec4: vec}, bindDecl{name: Mo, rw: true, vec4: vec}, bindDecl{name: V, rw: true, vec4: vec})
			binds = append(binds, ref(n.In[0]), ref(n.In[1]), ref(n.In[2]), ref(n.In[3]))
			scale := "" // the gradient's scale, an 8th hyperparameter
			if backend.NumElems(g.Nodes[n.In[4]].Shape) == 8 {
				scale = fmt.Sprintf(" * %s[7]", H)
			}
			fmt.Fprintf(&body, `		let lr = %[5]s[0]; let b1 = %[5]s[1]; let b2 = %[5]s[2]; let eps = %[5]s[3]; let wd = %[5]s[4]; let bc1 = %[5]s[5]; let bc2 = %[5]s[6];
		let g = %[2]s[e]%[6]s;
		let m = b1 * %[3]s[e] + (1.0 - b1) * g;
		let v = b2 * %[4]s[e] + (1.0 - b2) * g * g;
		%[3]s[e] = m;
		%[4]s[e] = v;
		%[1]s[e] = %[1]s[e] * (1.0 - lr * wd) - lr * (m * bc1) / (sqrt(v * bc2) + eps);
	}`, W, G, Mo, V, H, scale)
		} else {
			decls = append(decls, bindDecl{name: W, rw: true, vec4: vec}, bindDecl{name: G, vec4: vec}, bindDecl{name: V, rw: true, vec4: vec})
			binds = append(binds, ref(n.In[0]), ref(n.In[1]), ref(n.In[2]))
			fmt.Fprintf(&body, `		let lr = %[4]s[0]; let mom = %[4]s[1]; let wd = %[4]s[2];
		let w = %[1]s[e];
		let g = %[2]s[e] + wd * w;
		let vel = mom * %[3]s[e] + g;
		%[3]s[e] = vel;
		%[1]s[e] = w - lr * vel;
	}`, W, G, V, H)
		}
		total += ne
	}
	src := linearHead + body.String() + "\n}\n"
	x, y := p.grid(total, wg)
	p.add(last, newKernel("group_"+op.String(), decls, src), binds, nil, x, y, 1)
	gs := &p.steps[len(p.steps)-1]
	// The fallback: each member's own dispatches.
	saved := p.steps
	p.steps = nil
	for _, j := range members {
		if err := p.lower(g, j, locs); err != nil {
			p.steps = saved
			return err
		}
	}
	alt := p.steps
	p.steps = saved
	gs.alt = alt
	return nil
}

// f16Valued reports whether every value of node j is an f16 value (or
// Inf or NaN) by its op: a RoundF16 (the matmul precision switch's
// operands) or an unpack_f16, seen through reshapes.
func f16Valued(g *backend.Graph, j int) bool {
	for {
		n := &g.Nodes[j]
		switch n.Op {
		case backend.OpReshape:
			j = n.In[0]
		case backend.OpRoundF16, backend.OpUnpackF16:
			return true
		default:
			return false
		}
	}
}

// lowerMatmul adds the dispatches of matmul node mi computing root r (r ==
// mi: a plain matmul; else r's chain is the epilogue): one register-blocked
// kernel, or with K split, the partial products into the program's scratch
// buffer and a kernel summing them and applying the epilogue.
func (p *program) lowerMatmul(r, mi int, locs []loc) error {
	fp := p.fp
	g := fp.Graph
	ref := func(j int) bref {
		l := locs[j]
		return bref{kind: l.kind, idx: l.idx, size: uint64(backend.NumElems(g.Nodes[j].Shape)) * 4}
	}
	mn := &g.Nodes[mi]
	rk := len(mn.Shape)
	M, N := mn.Shape[rk-2], mn.Shape[rk-1]
	a := g.Nodes[mn.In[0]].Shape
	K := a[rk-1]
	if mn.TransA {
		K = a[rk-2]
	}
	batch := backend.NumElems(mn.Shape[:rk-2])
	// (On a software adapter the tiles win here too: SwiftShader took
	// 4.5 ms for a 4x4x4 product as dot products, 0.6 ms as one tile.)
	if batch*M*N <= dotMaxOutputs && p.b.matmulForce == nil && p.gpuPlans() {
		return p.lowerDot(r, mi, locs)
	}
	vec := M%4 == 0 && N%4 == 0 && K%4 == 0
	var rd []int
	if r != mi {
		rd = fp.Reads(r)
	}
	// An epilogue that reads an operand reads it as stored: then that
	// operand is not transposed first, and the tiles are those for it as
	// stored.
	pl := p.matmulPlan(M, N, K, batch, mn.TransA, mn.TransB, r == mi || !fp.EpilogueReads(r, mi, mn.In[0]), r == mi || !fp.EpilogueReads(r, mi, mn.In[1]))
	if r != mi && pl.cfg == mmLarge && p.b.matmulForce == nil {
		// With an epilogue the 128x128 tiling ran twice as slow as plain
		// on an H200 (TestSweepStep); 128x64 is within 3% of it unfused.
		// The wide tiles keep their speed: with them the fused products
		// of the 8x4096 step at batch 4096 took 3.79 ms where the medium
		// tiles took 4.21, the step 90.1 ms against 96.2
		// (bench/results/h200-2026-12-03-s8c-step-8x4096.txt).
		pl.cfg = mmMedium
	}
	c := pl.cfg
	half := p.b.info.F16 && !p.b.noF16 && f16Valued(g, mn.In[0]) && f16Valued(g, mn.In[1])
	// refA (refB) is what the kernel reads as A (B): the operand itself or
	// its transposed copy, both copies in the one scratch buffer.
	refA, transA := ref(mn.In[0]), mn.TransA
	refB, transB := ref(mn.In[1]), mn.TransB
	var tEnd uint64
	if pl.tB && transB {
		nb := backend.NumElems(g.Nodes[mn.In[1]].Shape)
		t := bref{kind: refScratchT, size: uint64(nb) * 4}
		tEnd = t.size
		p.transpose(r, refB, t, batch, N, K)
		refB, transB = t, false
	}
	if pl.tA && !transA {
		na := backend.NumElems(g.Nodes[mn.In[0]].Shape)
		al := uint64(max(p.b.info.StorageAlign, 4))
		t := bref{kind: refScratchT, off: (tEnd + al - 1) / al * al, size: uint64(na) * 4}
		tEnd = t.off + t.size
		p.transpose(r, refA, t, batch, M, K)
		refA, transA = t, true
	}
	p.scratchTBytes = max(p.scratchTBytes, tEnd)
	gx, gy, gz := ceilDiv(N, c.BN), ceilDiv(M, c.BM), batch*pl.split
	if mx := uint64(max(p.b.info.MaxWGPerDim, 1)); uint64(gx)*uint64(gy)*uint64(gz) > mx*mx {
		return fmt.Errorf("matmul grid %dx%dx%d exceeds %d workgroups in two dimensions", gx, gy, gz, mx)
	}
	if pl.split > 1 && uint64(pl.split*batch*M*N)*4 > p.b.bindLimit {
		return fmt.Errorf("matmul %dx%dx%d (batch %d): K split into %d parts (at most %d steps of %d per invocation) needs %d bytes of partial products, more than a binding holds (%d)",
			M, K, N, batch, pl.split, p.b.maxTrips, c.BK, uint64(pl.split*batch*M*N)*4, p.b.bindLimit)
	}
	tiles := []uint32{uint32(gx), uint32(gy), uint32(gz)}
	x, y := p.grid(gx*gy*gz, 1)
	e := newExprGen(fp, r)
	if pl.split <= 1 {
		kc := K
		binds := []bref{refA, refB, ref(r)}
		var epi *epilogue
		if r != mi {
			e.leafName[mn.In[0]], e.leafName[mn.In[1]] = "A", "B"
			if vec {
				e.leafName[mn.In[0]], e.leafName[mn.In[1]] = "A4", "B4"
				e.leafVec[mn.In[0]], e.leafVec[mn.In[1]] = true, true
			}
			epi = &epilogue{}
			for _, j := range rd {
				if _, ok := e.leafName[j]; ok {
					continue // an operand of the matmul, bound already
				}
				name := fmt.Sprintf("L%d", len(epi.binds))
				e.leafName[j] = name
				epi.binds = append(epi.binds, bindDecl{name: name})
				binds = append(binds, ref(j))
			}
			e.w.WriteString("fn epi(i: u32, acc: f32) -> f32 { return " + e.name(r) + "(i, acc); }\n")
			epi.fns = e.w.String()
		}
		p.add(r, matmulKernel2(c, transA, transB, vec, half, epi), binds,
			append([]uint32{uint32(M), uint32(N), uint32(K), uint32(kc), 1}, tiles...), x, y, 1)
		return nil
	}
	S := pl.split
	ne := batch * M * N
	part := bref{kind: refScratch, size: uint64(S*ne) * 4}
	p.scratchBytes = max(p.scratchBytes, part.size)
	p.add(r, matmulKernel2(c, transA, transB, vec, half, nil), []bref{refA, refB, part},
		append([]uint32{uint32(M), uint32(N), uint32(K), uint32(splitK(K, S, c.BK)), uint32(S)}, tiles...), x, y, 1)
	// The sum of the parts, pairwise, and the epilogue.
	decls := []bindDecl{{name: "Part"}}
	binds := []bref{part}
	for _, j := range rd {
		if _, ok := e.leafName[j]; ok {
			continue
		}
		name := fmt.Sprintf("L%d", len(binds)-1)
		e.leafName[j] = name
		decls = append(decls, bindDecl{name: name})
		binds = append(binds, ref(j))
	}
	decls = append(decls, bindDecl{name: "Y", rw: true})
	binds = append(binds, ref(r))
	epi := "acc"
	if r != mi {
		epi = e.name(r) + "(i, acc)"
	}
	mnn := M * N
	terms := make([]string, S)
	for k := range terms {
		terms[k] = fmt.Sprintf("Part[base + %du]", k*mnn)
	}
	src := e.w.String() + linearHead + fmt.Sprintf(`	if (i >= %du) { return; }
	let base = (i / %du) * %du + i %% %du;
	let acc = %s;
	Y[i] = %s;
}
`, ne, mnn, S*mnn, mnn, pairwise(terms), epi)
	x, y = p.grid(ne, wg)
	p.add(r, newKernel("matmul_split_sum", decls, src), binds, nil, x, y, 1)
	return nil
}
