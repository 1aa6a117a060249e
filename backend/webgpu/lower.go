package webgpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// lower turns node i into its dispatches. Elementwise ops, fills, optimizer
// updates and get_rows over buffers larger than one storage binding run as
// several dispatches over bound ranges; other ops fail to compile there.
func (p *program) lower(g *backend.Graph, i int, locs []loc) error {
	n := &g.Nodes[i]
	ne := backend.NumElems(n.Shape)
	ref := func(j int) bref {
		l := locs[j]
		return bref{kind: l.kind, idx: l.idx, size: uint64(backend.NumElems(g.Nodes[j].Shape)) * 4}
	}
	out := ref(i)
	in := func(k int) bref { return ref(n.In[k]) }
	inShape := func(k int) []int { return g.Nodes[n.In[k]].Shape }
	switch {
	case n.Op == backend.OpArg, n.Op == backend.OpReshape:
		return nil
	case n.Op == backend.OpFill:
		p.split(i, fillKernel(), []bref{out}, []bool{true}, ne, f32bits(n.A))
	case n.Op.IsUnary():
		p.split(i, unaryKernel(elemExpr(n.Op)), []bref{in(0), out}, []bool{true, true}, ne, f32bits(n.A), f32bits(n.B))
	case n.Op.IsBinary():
		a, b := inShape(0), inShape(1)
		if slices.Equal(a, n.Shape) && slices.Equal(b, n.Shape) {
			p.split(i, binarySameKernel(n.Op), []bref{in(0), in(1), out}, []bool{true, true, true}, ne)
			return nil
		}
		prm := []uint32{uint32(ne)}
		prm = append(prm, pad4(n.Shape, 1)...)
		prm = append(prm, pad4(backend.BroadcastStrides(a, n.Shape), 0)...)
		prm = append(prm, pad4(backend.BroadcastStrides(b, n.Shape), 0)...)
		x, y := p.grid(ne, wg)
		p.add(i, binaryBcastKernel(n.Op), []bref{in(0), in(1), out}, prm, x, y, 1)
	case n.Op == backend.OpSoftmax, n.Op == backend.OpLogSoftmax:
		c := 1
		if len(n.Shape) > 0 {
			c = n.Shape[len(n.Shape)-1]
		}
		p.softmax(i, in(0), out, ne/c, c, n.Op == backend.OpLogSoftmax)
	case n.Op == backend.OpPermute:
		if swapsLastTwo(n.Perm) {
			r, s := len(n.Perm), inShape(0)
			p.transpose(i, in(0), out, ne/(s[r-2]*s[r-1]), s[r-2], s[r-1])
			return nil
		}
		st := backend.Strides(inShape(0))
		ps := make([]int, len(n.Perm))
		for k, a := range n.Perm {
			ps[k] = st[a]
		}
		p.strided(i, in(0), out, ne, 0, 0, n.Shape, ps)
	case n.Op == backend.OpExpand:
		p.strided(i, in(0), out, ne, 0, 0, n.Shape, backend.BroadcastStrides(inShape(0), n.Shape))
	case n.Op == backend.OpSliceRows:
		row := backend.NumElems(n.Shape[1:])
		p.strided(i, in(0), out, ne, 0, n.Start*row, []int{ne}, []int{1})
	case n.Op == backend.OpConcatRows:
		na := backend.NumElems(inShape(0))
		nb := backend.NumElems(inShape(1))
		p.strided(i, in(0), out, na, 0, 0, []int{na}, []int{1})
		p.strided(i, in(1), out, nb, na, 0, []int{nb}, []int{1})
	case n.Op == backend.OpGetRows:
		return p.getRows(i, in(0), in(1), out, inShape(0), ne, p.fp.Words[i])
	case n.Op == backend.OpScatterAddRows:
		p.scatterAdd(i, in(0), in(1), out, n.Shape, inShape(1)[0])
	case n.Op == backend.OpOneHot:
		x, y := p.grid(ne, wg)
		p.add(i, oneHotKernel(), []bref{in(0), out}, []uint32{uint32(ne), uint32(n.Shape[1])}, x, y, 1)
	case n.Op == backend.OpMatMul:
		return p.lowerMatmul(i, i, locs)
	case n.Op == backend.OpMaxPool2dBack:
		return p.maxPoolBack(i, n, in(1), in(0), out, inShape(1))
	case n.Op == backend.OpBatchNorm:
		return p.batchNorm(i, n, inShape(0), in(0), bref{}, out)
	case n.Op == backend.OpBatchNormBack:
		return p.batchNorm(i, n, inShape(0), in(0), in(1), out)
	case n.Op == backend.OpBatchNormStats:
		return p.batchNorm(i, n, inShape(0), in(0), bref{}, out)
	case n.Op == backend.OpSumSquares:
		ins := make([]bref, len(n.In))
		for k := range n.In {
			ins[k] = in(k)
		}
		p.sumSquares(i, ins, out)
	case n.Op == backend.OpAttention:
		return p.attention(i, n, in(0), in(1), in(2), in(3), out, inShape(0), inShape(1), inShape(2), inShape(3))
	case n.Op == backend.OpAdamW:
		p.split(i, adamWKernel(backend.NumElems(inShape(4)) == 8), []bref{in(0), in(1), in(2), in(3), in(4)}, []bool{true, true, true, true, false}, ne)
	case n.Op == backend.OpSGD:
		p.split(i, sgdKernel(), []bref{in(0), in(1), in(2), in(3)}, []bool{true, true, true, false}, ne)
	case n.Op == backend.OpRandUniform:
		p.randUniform(i, in(0), out, ne, uint64(n.Start))
	case n.Op == backend.OpPackF16, n.Op == backend.OpPackBF16:
		p.halves(i, packKernel(n.Op == backend.OpPackBF16), in(0), out, backend.NumElems(inShape(0)), true)
	case n.Op == backend.OpUnpackF16, n.Op == backend.OpUnpackBF16:
		if s := inShape(0); len(s) == 2 {
			return p.unpackRows(i, n.Op == backend.OpUnpackBF16, in(0), out, s[0], n.Shape[1], s[1])
		}
		p.halves(i, unpackKernel(n.Op == backend.OpUnpackBF16), out, in(0), ne, false)
	default:
		backend.Unknown("webgpu.lower", n.Op) // sum and max lower through lowerFused
	}
	return nil
}

// maxPoolBack adds max_pool2d_back's one dispatch (maxPoolBackKernel),
// which binds its three buffers whole.
func (p *program) maxPoolBack(node int, n *backend.Node, g, x, y bref, gs []int) error {
	ne := backend.NumElems(n.Shape)
	if b := uint64(ne) * 4; b > uint64(p.lim.MaxBindingBytes) {
		return fmt.Errorf("max_pool2d_back of shape %v: its image takes %d bytes, more than the %d one binding holds on this device", n.Shape, b, p.lim.MaxBindingBytes)
	}
	w := backend.WindowOf(n)
	prm := []uint32{uint32(ne), uint32(n.Shape[3]), uint32(n.Shape[2]), uint32(gs[3]), uint32(gs[2]),
		uint32(w.KH), uint32(w.KW), uint32(w.SH), uint32(w.SW), uint32(w.PH), uint32(w.PW)}
	gx, gy := p.grid(ne, wg)
	p.add(node, maxPoolBackKernel(), []bref{g, x, y}, prm, gx, gy, 1)
	return nil
}

// batchNorm adds batch_norm's (with dy, batch_norm_back's) three
// dispatches: the chunks' partial sums (bnPartsKernel), the channels'
// statistics (bnMergeKernel) and the elementwise pass (bnApplyKernel), in
// the scratch buffer; x (of shape xs), dy and y are bound whole.
// batch_norm_stats is the first two, the second writing y.
func (p *program) batchNorm(node int, n *backend.Node, xs []int, x, dy, y bref) error {
	ne := backend.NumElems(xs)
	if b := uint64(ne) * 4; b > uint64(p.lim.MaxBindingBytes) {
		return fmt.Errorf("%s of shape %v: it takes %d bytes, more than the %d one binding holds on this device", n.Op.Info().Name, xs, b, p.lim.MaxBindingBytes)
	}
	c, s := xs[1], backend.BatchNormSplits(xs)
	part := bref{kind: refScratch, size: uint64(4*c*(s+1)) * 4}
	p.scratchBytes = max(p.scratchBytes, part.size)
	back, stats := n.Op == backend.OpBatchNormBack, n.Op == backend.OpBatchNormStats
	prm := []uint32{uint32(ne / (xs[0] * c)), uint32(c), uint32(xs[0]), uint32(s), f32bits(n.A), uint32(ne)}
	parts, apply := []bref{x, part}, []bref{x, part, y}
	if back {
		parts, apply = []bref{x, dy, part}, []bref{x, part, dy, y}
	}
	gx, gy := p.grid(c*s, 1)
	p.add(node, bnPartsKernel(back), parts, prm, gx, gy, 1)
	gx, gy = p.grid(c, wg)
	if stats {
		p.add(node, bnMergeKernel(false, true), []bref{part, y}, prm, gx, gy, 1)
		return nil
	}
	p.add(node, bnMergeKernel(back, false), []bref{part}, prm, gx, gy, 1)
	gx, gy = p.grid(ne, wg)
	p.add(node, bnApplyKernel(back), apply, prm, gx, gy, 1)
	return nil
}

// sumSquares adds sum_squares's dispatches: the sums of squares of chunks
// of up to MaxStorageBuffers-2 inputs per dispatch (sumSquaresPartsKernel;
// an input larger than one binding in bound ranges, each an input of its
// own), then those partial sums added in order (sumSquaresTotalKernel),
// in the scratch buffer: no atomics, the same sums every run. Decomposed,
// it was a square, a sum and an add per input: a GPT 12x768 step's
// gradient norm took about 450 dispatches and 3.3 ms on an H100.
func (p *program) sumSquares(node int, ins []bref, y bref) {
	type piece struct {
		r        bref
		n, parts int
	}
	var pieces []piece
	total := 0
	for _, r := range ins {
		ne := int(r.size / 4)
		c := ne
		if !p.lim.Fits(ne) {
			c = p.lim.RangeRecords(1)
		}
		for off := 0; off < ne; off += c {
			l := min(c, ne-off)
			pr := r
			pr.off, pr.size = r.off+uint64(off)*4, uint64(l)*4
			// chunks of about ssChunk values, each lane looping at most maxTrips
			s := max(ceilDiv(l, ssChunk), ceilDiv(l, wg*p.b.maxTrips), 1)
			pieces = append(pieces, piece{pr, l, s})
			total += s
		}
	}
	part := bref{kind: refScratch, size: uint64(total) * 4}
	p.scratchBytes = max(p.scratchBytes, part.size)
	per := max(int(p.b.info.MaxStorageBuffers)-2, 1)
	first := 0
	for k := 0; k < len(pieces); k += per {
		group := pieces[k:min(k+per, len(pieces))]
		prm := []uint32{uint32(len(group))}
		binds := make([]bref, 0, len(group)+1)
		wgs := 0
		for _, pc := range group {
			prm = append(prm, uint32(pc.n), uint32(pc.parts), uint32(first))
			binds = append(binds, pc.r)
			first += pc.parts
			wgs += pc.parts
		}
		gx, gy := p.grid(wgs, 1)
		p.add(node, sumSquaresPartsKernel(len(group)), append(binds, part), prm, gx, gy, 1)
	}
	p.add(node, sumSquaresTotalKernel(), []bref{part, y}, []uint32{uint32(total)}, 1, 1, 1)
}

// ssChunk is about how many values one workgroup of sumSquaresPartsKernel
// sums: 64 per lane.
const ssChunk = 64 * wg

// softmax adds the dispatches of a softmax (log-softmax) over rows of c:
// one workgroup per row, or for rows longer than its lanes may loop over
// (maxTrips), parts of wg*splitTrips elements combined in the scratch
// buffer.
func (p *program) softmax(node int, x, y bref, rows, c int, log bool) {
	if ceilDiv(c, wg) <= p.b.maxTrips {
		gx, gy := p.grid(rows, 1)
		p.add(node, softmaxKernel(log), []bref{x, y}, []uint32{uint32(rows), uint32(c)}, gx, gy, 1)
		return
	}
	chunk := min(c, wg*min(splitTrips, p.b.maxTrips))
	np := ceilDiv(c, chunk)
	part := bref{kind: refScratch, size: uint64(2*rows*np) * 4}
	p.scratchBytes = max(p.scratchBytes, part.size)
	gx, gy := p.grid(rows*np, 1)
	p.add(node, softmaxPartsKernel(), []bref{x, part}, []uint32{uint32(rows * np), uint32(c), uint32(np), uint32(chunk)}, gx, gy, 1)
	gx, gy = p.grid(rows, 1)
	p.add(node, softmaxCombineKernel(), []bref{part}, []uint32{uint32(rows), uint32(c), uint32(np)}, gx, gy, 1)
	gx, gy = p.grid(rows*c, wg)
	p.add(node, softmaxApplyKernel(log), []bref{x, part, y}, []uint32{uint32(rows * c), uint32(c), uint32(np)}, gx, gy, 1)
}

// scatterAdd adds the dispatches of scatter_add_rows of n source rows into
// out (shape s): invocations own a column of rb output rows and scan the
// source rows, at most maxTrips/2 of them per dispatch (rb is kept to
// maxTrips/2 as well), so one invocation never loops past maxTrips.
func (p *program) scatterAdd(node int, src, ids, out bref, s []int, n int) {
	r := s[0]
	w := backend.NumElems(s[1:])
	half := max(p.b.maxTrips/2, 1)
	rb := max(1, min(r, ceilDiv(r*w, 16384), half))
	threads := w * ceilDiv(r, rb)
	x, y := p.grid(threads, wg)
	for k0 := 0; k0 == 0 || k0 < n; k0 += half {
		zero := uint32(0)
		if k0 == 0 {
			zero = 1
		}
		prm := []uint32{uint32(threads), uint32(r), uint32(w), uint32(min(n, k0+half)), uint32(rb), uint32(k0), zero}
		p.add(node, scatterAddKernel(), []bref{src, ids, out}, prm, x, y, 1)
	}
}

// matmulPlan picks the matmul tiling and split (pickMatmul, or what a test
// forces); with tbOK (taOK) false B (A) is never transposed first.
func (p *program) matmulPlan(m, n, k, batch int, transA, transB, taOK, tbOK bool) mmPlan {
	tbRows := tbMinRows
	if p.b.tbRows != 0 {
		tbRows = p.b.tbRows
	}
	if !tbOK {
		tbRows = -1
	}
	pl := pickMatmulTB(*p.b.info, p.gpuPlans(), m, n, k, batch, transA, transB, p.b.bindLimit, tbRows, taOK && p.b.tbRows >= 0)
	if p.b.tnAll && p.gpuPlans() {
		if tn, ok := pickTN(*p.b.info, m, n, k, batch, transA, transB, p.b.bindLimit, tbOK, taOK, true); ok {
			pl = tn
		}
	}
	if f := p.b.matmulForce; f != nil {
		pl = *f
		pl.tB = pl.tB && tbOK
		pl.tA = pl.tA && taOK
	}
	pl.split = max(pl.split, 1, minSplit(k, pl.cfg.BK, p.b.maxTrips))
	return pl
}

// gpuPlans reports whether matmuls are planned for a GPU (see
// Backend.gpuPlans and mmSoft).
func (p *program) gpuPlans() bool { return p.b.info.GPU || p.b.gpuPlans }

// add appends one dispatch; binds[0] (the parameters) is filled in later.
func (p *program) add(node int, k *kernel, binds []bref, params []uint32, x, y, z uint32) {
	p.steps = append(p.steps, step{node: node, k: k, binds: append([]bref{{}}, binds...), params: params, x: x, y: y, z: z})
}

// grid covers n items with groups of per items (plan.DispatchLimits.Grid).
func (p *program) grid(n, per int) (x, y uint32) { return p.lim.Grid(n, per) }

// split runs an elementwise kernel over ne elements as one dispatch, or
// over several bound ranges when a buffer exceeds the binding limit. Binds
// with chunked set are indexed by element; the others are bound whole.
// The kernel's params are [chunk length, extra...].
func (p *program) split(node int, k *kernel, binds []bref, chunked []bool, ne int, extra ...uint32) {
	c := ne
	if !p.lim.Fits(ne) {
		c = p.lim.RangeRecords(1)
	}
	for off := 0; off < ne; off += c {
		l := min(c, ne-off)
		bs := make([]bref, len(binds))
		for j, r := range binds {
			if chunked[j] {
				r.off, r.size = uint64(off)*4, uint64(l)*4
			}
			bs[j] = r
		}
		x, y := p.grid(l, wg)
		p.add(node, k, bs, append([]uint32{uint32(l)}, extra...), x, y, 1)
	}
}

// halves adds the dispatches of a pack (the n values vals into words) or
// an unpack (words into vals): one invocation per word, over bound ranges
// of whole words when the values exceed the binding limit (a range's
// values start at twice its first word, so they are aligned too). The
// kernel's bindings are its input, then its output; params [words, values].
func (p *program) halves(node int, k *kernel, vals, words bref, n int, pack bool) {
	nw := backend.PackedLen(n)
	c := nw
	if !p.lim.Fits(n) {
		c = p.lim.RangeRecords(1, 2) // a word and its two values
	}
	for off := 0; off < nw; off += c {
		l := min(c, nw-off)
		nv := min(2*l, n-2*off)
		wr := bref{kind: words.kind, idx: words.idx, off: uint64(off) * 4, size: uint64(l) * 4}
		vr := bref{kind: vals.kind, idx: vals.idx, off: uint64(2*off) * 4, size: uint64(nv) * 4}
		binds := []bref{wr, vr}
		if pack {
			binds = []bref{vr, wr}
		}
		x, y := p.grid(l, wg)
		p.add(node, k, binds, []uint32{uint32(l), uint32(nv)}, x, y, 1)
	}
}

// randUniform adds the dispatches of a rand_uniform of ne values, one
// invocation per Philox block: like split, over bound ranges of the output
// when it exceeds the binding limit, each range starting at a whole block
// and told its element offset, so the counters stay global.
func (p *program) randUniform(node int, state, out bref, ne int, start uint64) {
	c := ne
	if !p.lim.Fits(ne) {
		c = 4 * p.lim.RangeRecords(4) // ranges start at whole blocks
	}
	for off := 0; off < ne; off += c {
		l := min(c, ne-off)
		o := out
		o.off, o.size = uint64(off)*4, uint64(l)*4
		x, y := p.grid(ceilDiv(l, 4), wg)
		p.add(node, randUniformKernel(), []bref{state, o}, []uint32{uint32(l), uint32(off), uint32(start), uint32(start >> 32)}, x, y, 1)
	}
}

// strided adds a copy Y[dstOff+i] = X[srcOff + index(i)·strides] over the
// output shape d (up to 4-D).
func (p *program) strided(node int, x, y bref, n, dstOff, srcOff int, d, strides []int) {
	prm := []uint32{uint32(n), uint32(dstOff), uint32(srcOff)}
	prm = append(prm, pad4(d, 1)...)
	prm = append(prm, pad4(strides, 0)...)
	gx, gy := p.grid(n, wg)
	p.add(node, stridedKernel(), []bref{x, y}, prm, gx, gy, 1)
}

// transpose adds the dispatch swapping the last two axes of x ([batch, r,
// c]) into y.
func (p *program) transpose(node int, x, y bref, batch, r, c int) {
	tc, tr := ceilDiv(c, 32), ceilDiv(r, 32)
	gx, gy := p.grid(tc*tr*batch, 1)
	p.add(node, transposeKernel(), []bref{x, y}, []uint32{uint32(r), uint32(c), uint32(tc), uint32(tr), uint32(batch)}, gx, gy, 1)
}

// swapsLastTwo reports whether perm swaps the last two axes and keeps the
// others in place.
func swapsLastTwo(perm []int) bool {
	r := len(perm)
	if r < 2 || perm[r-2] != r-1 || perm[r-1] != r-2 {
		return false
	}
	for i := range r - 2 {
		if perm[i] != i {
			return false
		}
	}
	return true
}

// getRows selects rows, splitting a table larger than one binding into
// ranges of rows, each dispatch writing the outputs whose index falls in it.
// words: the table holds packed 16-bit values (see words.go).
func (p *program) getRows(node int, table, ids, out bref, tshape []int, ne int, words bool) error {
	r := tshape[0]
	w := backend.NumElems(tshape[1:])
	rc := r
	if !p.lim.Fits(r * w) {
		if rc = p.lim.RangeRecords(w); rc == 0 {
			return fmt.Errorf("a row of %d elements exceeds the binding limit of %d bytes", w, p.b.bindLimit)
		}
	}
	for r0 := 0; r0 < r; r0 += rc {
		l := min(rc, r-r0)
		t := table
		t.off, t.size = uint64(r0*w)*4, uint64(l*w)*4
		x, y := p.grid(ne, wg)
		p.add(node, getRowsKernel(words), []bref{t, ids, out}, []uint32{uint32(ne), uint32(w), uint32(r), uint32(r0), uint32(l)}, x, y, 1)
	}
	return nil
}

func f32bits(f float32) uint32 { return math.Float32bits(f) }

// pad4 right-aligns s into 4 values, filling the front with fill.
func pad4(s []int, fill int) []uint32 {
	out := []uint32{uint32(fill), uint32(fill), uint32(fill), uint32(fill)}
	for k := range s {
		out[4-len(s)+k] = uint32(s[k])
	}
	return out
}
