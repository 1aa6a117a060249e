package webgpu

import (
	"fmt"
	"strings"

	"github.com/ag-go/ag/backend"
)

// Attention (backend.OpAttention) runs as one fused kernel in the manner of
// FlashAttention: the [Tq, Tk] scores and weights are never stored. A
// workgroup owns a block of BQ queries of one batch (one query per
// invocation) and streams the keys through workgroup memory in tiles of BK:
// per tile the invocations load the K and V rows together (coalesced), then
// each invocation, reading the shared rows (all at the same address at
// once, a broadcast), computes its BK scores q·k_j into a column of
// workgroup memory and their maximum, rescales what it has summed by
// exp(m_old - m_new) if its running maximum m grew (online softmax), and
// adds exp(s_j - m) * v_j into its output accumulators and exp(s_j - m)
// into its running sum l. q and the accumulators stay in registers; the
// output is divided by l once at the end.
//
// Workgroup memory holds one tile: BK x (a chunk of D) of K, BK x (a slice
// of Dv) of V, the scores and the keep bits, within WebGPU's default 16
// KiB. A D longer than one chunk (64) adds each chunk's part of the dot
// products into the scores, q read per chunk (it stays in the L1 cache);
// a Dv longer than one slice (64) runs one workgroup per slice, each
// computing the scores again, so that an invocation holds at most 64
// accumulators (with q, about 150 registers).
//
// Masked keys: the invocations read the tile's keep values together into
// bit sets (one per query) and each skips the keys whose bit is clear: a
// masked key's score never enters the maximum and its v row is never
// multiplied, so whatever its K or V rows hold (NaN, Inf) cannot reach the
// result, as ir.go requires. An invocation visits its first attended key
// to its last (a causal mask's upper tiles are skipped, though the
// invocation still helps load them); a tile it attends whole runs a loop
// of constant length, which unrolls.
//
// Special values (ir.go's attention line, softmax's rule): the maximum
// propagates NaN (maxp); a NaN or +Inf maximum makes the query NaN, as
// exp(s - max) does in softmax; attended scores of -Inf weigh 0 (while the
// maximum is -Inf too, exp(-Inf - 0) rather than exp(-Inf - -Inf) = NaN;
// 0 times a NaN in v is still NaN, as in the reference's sum), and a query
// whose attended scores are all -Inf is NaN (softmax's row of -Inf); a
// query that attends no key is 0.
//
// Limits: an invocation's loops (tiles, the keys of each, chunks of D) run
// at most maxTrips iterations in all; longer key ranges are split into
// parts whose partial results (m, l, whether any key was attended, and the
// unnormalized output) go to the scratch buffer and are combined by a
// second kernel, as flash-decoding does. The same split spreads the keys
// over more workgroups when batch x query blocks alone would leave a GPU
// idle. Workgroups (batch, part, slice, query block) are numbered linearly
// and folded into two grid dimensions.

// attnCfg is one variant of the attention kernel.
type attnCfg struct {
	BQ, BK   int  // queries (one per invocation) per workgroup; keys per tile
	DC4, DV4 int  // vec4s of q and k per chunk of D; of the output per slice of Dv
	chunks   bool // D spans several chunks: scores go through workgroup memory
	vecD     bool // D % 4 == 0: q and k are bound as vec4 arrays
	vecV     bool // Dv % 4 == 0: v and the output are bound as vec4 arrays
	split    bool // the keys are split into parts: write partial results
}

// attnTuning is the tiling attention picks from (tests and benchmarks may
// force another through Backend.attnForce).
type attnTuning struct {
	BQ       int // queries per workgroup (32 where Tq <= 32)
	BK       int // keys per tile (at most 32: a tile's keep bits are one u32)
	BKChunks int // keys per tile when D has several chunks
	Chunk4   int // vec4s of a chunk of D
	Slice4   int // vec4s of a slice of Dv
	// With fewer workgroups than SplitBelow, the keys are split into
	// parts until about that many run (an H200 has 132 SMs that each hold
	// several workgroups), each part keeping MinTiles tiles at least.
	SplitBelow, MinTiles, MaxParts int
}

// attnDefault: measured on an H200 (TestSweepAttention, all-ones and
// causal masks, 32-128 heads of 128-2048 tokens, D 32-256), 128 queries
// and 8 keys a tile beat 64 x 16 by 1.1-1.7x on the larger shapes and
// 64 x 8 on most (not at 32 heads of 1024 x 64, 16.2 against 12.4, nor on
// the small first rows, which ran while the clock rose); a tile of 16 keys
// does not fit beside 128 queries' scores in 16 KiB.
var attnDefault = attnTuning{BQ: 128, BK: 8, BKChunks: 8, Chunk4: 16, Slice4: 16, SplitBelow: 128, MinTiles: 8, MaxParts: 64}

// sharedBytes is the workgroup memory the kernel declares.
func (c attnCfg) sharedBytes() int {
	return c.BK*(c.DC4+c.DV4)*16 + c.BQ*(c.BK/4+1)*4 + c.BK*c.BQ*4
}

// trips is the most loop iterations one invocation runs per tile: the
// tile loop, the keys' scores and sums and, with chunks of D, the chunk
// loop and its keys.
func (c attnCfg) trips(d4 int) int {
	n := 1 + 2*c.BK
	if c.chunks {
		n += ceilDiv(d4, c.DC4)*(1+c.BK) + c.BK
	}
	return n
}

// attnPartWidth is the floats of one partial result in the scratch buffer:
// m, l, any, then the unnormalized output (Dv values).
func attnPartWidth(dv int) int { return dv + 3 }

// attention adds the dispatches of attention node n: q [..., Tq, D], k
// [..., Tk, D], v [..., Tk, Dv], keep broadcast to [..., Tq, Tk].
func (p *program) attention(node int, n *backend.Node, q, k, v, keep, out bref, qs, ks, vs, keeps []int) error {
	r := len(qs)
	tq, d, tk, dv := qs[r-2], qs[r-1], ks[r-2], vs[r-1]
	batch := backend.NumElems(qs[:r-2])
	scores := append(append([]int(nil), qs[:r-1]...), tk)
	kst := pad4(backend.BroadcastStrides(keeps, scores), 0)
	sd := pad4(scores, 1)
	tu := attnDefault
	if p.b.attnForce != nil {
		tu = *p.b.attnForce
	}
	d4, dv4 := ceilDiv(d, 4), ceilDiv(dv, 4)
	c := attnCfg{BQ: tu.BQ, BK: tu.BK, DC4: min(d4, tu.Chunk4), DV4: min(dv4, tu.Slice4), vecD: d%4 == 0, vecV: dv%4 == 0}
	if tq <= 32 {
		c.BQ = 32 // short query blocks (decoding, small tests) idle fewer lanes
	}
	c.chunks = d4 > c.DC4
	if c.chunks {
		c.BK = tu.BKChunks
	}
	info := p.b.info
	for c.sharedBytes() > int(info.MaxWGStorage) && c.BK > 4 {
		c.BK /= 2 // a tiling forced for larger limits
	}
	if c.sharedBytes() > int(info.MaxWGStorage) || c.BQ > int(info.MaxInvocations) || c.BQ > int(info.MaxWGSizeX) {
		return fmt.Errorf("attention needs %d bytes of workgroup memory and %d invocations, the device offers %d and %d", c.sharedBytes(), c.BQ, info.MaxWGStorage, info.MaxInvocations)
	}
	nQB, nS := ceilDiv(tq, c.BQ), ceilDiv(dv4, c.DV4)
	tiles := ceilDiv(tk, c.BK)
	parts := ceilDiv(tiles, max(p.b.maxTrips/c.trips(d4), 1))
	groups := batch * nQB * nS
	rows := batch * tq
	scratch := func(np int) uint64 { return uint64(rows*np*attnPartWidth(dv)) * 4 }
	for parts*2 <= tu.MaxParts && groups*parts < tu.SplitBelow && tiles/(parts*2) >= tu.MinTiles && scratch(parts*2) <= p.b.bindLimit {
		parts *= 2
	}
	perPart := ceilDiv(tiles, parts) * c.BK // keys per part
	parts = ceilDiv(tk, perPart)            // no empty part
	c.split = parts > 1
	total := groups * parts
	prm := []uint32{uint32(total), uint32(tq), uint32(tk), uint32(d), uint32(dv), uint32(nQB), uint32(nS), uint32(parts), uint32(perPart),
		f32bits(n.A), uint32(sd[1]), uint32(kst[0]), uint32(kst[1]), uint32(kst[2]), uint32(kst[3])}
	gx, gy := p.grid(total, 1)
	if !c.split {
		p.add(node, attentionKernel(c), []bref{q, k, v, keep, out}, prm, gx, gy, 1)
		return nil
	}
	part := bref{kind: refScratch, size: scratch(parts)}
	if part.size > p.b.bindLimit {
		return fmt.Errorf("attention over %d keys in %d parts needs %d bytes of partial results, past the binding limit of %d", tk, parts, part.size, p.b.bindLimit)
	}
	p.scratchBytes = max(p.scratchBytes, part.size)
	p.add(node, attentionKernel(c), []bref{q, k, v, keep, part}, prm, gx, gy, 1)
	gx, gy = p.grid(rows*dv, wg)
	p.add(node, attentionCombineKernel(), []bref{part, out}, []uint32{uint32(rows * dv), uint32(dv), uint32(parts)}, gx, gy, 1)
	return nil
}

// attentionKernel generates the kernel of one variant. Params [workgroups,
// Tq, Tk, D, Dv, query blocks, slices, parts, keys per part, scale, the
// scores' second batch dimension (of four, right-aligned), keep's four
// strides over the scores]. Bindings Q, K, V, M (keep), then Y (the output)
// or, split, the partial results.
//
// Only the work along D and Dv is unrolled here (a few dozen vec4
// statements); the keys of a tile are loops, left to the GPU's compiler to
// unroll. Tiles unrolled here (32 keys x 32 vec4s) took lavapipe's LLVM
// from seconds to minutes to compile.
func attentionKernel(c attnCfg) *kernel {
	var w strings.Builder
	pr := func(f string, a ...any) { fmt.Fprintf(&w, f, a...) }
	bk, bq := c.BK, c.BQ

	pr("var<workgroup> Ks: array<vec4<f32>, %d>; // key j, vec4 c of the chunk of D at j*%d + c\n", bk*c.DC4, c.DC4)
	pr("var<workgroup> Vs: array<vec4<f32>, %d>; // key j, vec4 c of the slice of Dv at j*%d + c\n", bk*c.DV4, c.DV4)
	pr("var<workgroup> Ss: array<f32, %d>; // the score of key j for invocation i at j*%d + i\n", bk*bq, bq)
	// (rows padded by one word: the invocations reading their own rows
	// hit distinct banks)
	pr("var<workgroup> Mn: array<u32, %d>; // keep bits of keys 4g..4g+3 for invocation i at i*%d + g\n", bq*(bk/4+1), bk/4+1)
	// ldX(r, c, n) reads vec4 c of row r of a tensor with rows of n
	// elements, zero past the row's end.
	for _, t := range []struct {
		name string
		vec  bool
	}{{"Q", c.vecD}, {"K", c.vecD}, {"V", c.vecV}} {
		if t.vec {
			pr("fn ld%[1]s(r: u32, c: u32, n: u32) -> vec4<f32> { if (c * 4u >= n) { return vec4<f32>(0.0); } return %[1]s4[r * (n / 4u) + c]; }\n", t.name)
			continue
		}
		pr("fn ld%[1]s1(i: u32, ok: bool) -> f32 { if (ok) { return %[1]s[i]; } return 0.0; }\n", t.name)
		pr("fn ld%s(r: u32, c: u32, n: u32) -> vec4<f32> { let e = c * 4u; let b = r * n + e;\n", t.name)
		pr("\treturn vec4<f32>(ld%[1]s1(b, e < n), ld%[1]s1(b + 1u, e + 1u < n), ld%[1]s1(b + 2u, e + 2u < n), ld%[1]s1(b + 3u, e + 3u < n)); }\n", t.name)
	}
	// A keep value attends where it is nonzero or NaN: by its bits, which
	// no compiler folds (-0 is zero).
	pr("fn attends(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) != 0u; }\n")

	pr("@compute @workgroup_size(%d)\n", bq)
	pr("fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n")
	pr("\tlet t = wid.y * nwg.x + wid.x;\n")
	pr("\tif (t >= P[0]) { return; }\n")
	pr("\tlet Tq = P[1]; let Tk = P[2]; let D = P[3]; let Dv = P[4];\n")
	pr("\tlet nQB = P[5]; let nS = P[6]; let nP = P[7];\n")
	pr("\tlet scale = pf(9u);\n")
	// Workgroup t is (batch b, part, slice sv, query block qb), qb fastest:
	// the workgroups that share K and V rows run together.
	pr("\tlet qb = t %% nQB; let r1 = t / nQB; let sv = r1 %% nS; let r2 = r1 / nS; let part = r2 %% nP; let b = r2 / nP;\n")
	pr("\tlet i = qb * %du + lid;\n", bq)
	pr("\tlet live = i < Tq; // invocations past Tq only help load the tiles\n")
	pr("\tlet row = b * Tq + i;\n")
	pr("\tlet kBeg = part * P[8]; let kEnd = min(Tk, kBeg + P[8]);\n")
	pr("\tlet kvb = b * Tk; // the batch's first row of K and V\n")
	pr("\tlet mbb = (b / P[10]) * P[11] + (b %% P[10]) * P[12]; let ms = P[14];\n")
	pr("\tlet mb = mbb + i * P[13]; // keep of (b, i, key) at mb + key*ms\n")
	pr("\tlet v0 = sv * %du; // the slice's first vec4 of Dv\n", c.DV4)

	// q in registers for the whole run when D is one chunk.
	if !c.chunks {
		for cc := 0; cc < c.DC4; cc++ {
			pr("\tvar q%d = vec4<f32>(0.0);\n", cc)
		}
		pr("\tif (live) {\n")
		for cc := 0; cc < c.DC4; cc++ {
			pr("\t\tq%d = ldQ(row, %du, D);\n", cc, cc)
		}
		pr("\t}\n")
	}
	pr("\tvar m = negInf(); // the running maximum of the attended scores\n")
	pr("\tvar l = 0.0; // the running sum of exp(score - m)\n")
	pr("\tvar seen = false; // whether the query attends any key\n")
	for cc := 0; cc < c.DV4; cc++ {
		pr("\tvar o%d = vec4<f32>(0.0);\n", cc)
	}

	// load writes rows of the tile's keys into workgroup memory: vec4 c of
	// key j at arr[j*per + c], from ldX(row, first + c, n); each
	// invocation a few vec4s, consecutive invocations consecutive vec4s.
	load := func(ind, arr, ldX, first, n string, per int) {
		units := bk * per
		for l := 0; l < ceilDiv(units, bq); l++ {
			pr("%s{ let e = lid + %du; let key = k0 + e / %du;\n", ind, l*bq, per)
			in := ind + "  "
			if (l+1)*bq > units {
				pr("%s  if (e < %du) {\n", ind, units)
				in += "  "
			}
			pr("%sif (key < kEnd) { %s[e] = %s(kvb + key, %s + e %% %du, %s); } else { %s[e] = vec4<f32>(0.0); }\n", in, arr, ldX, first, per, n, arr)
			if (l+1)*bq > units {
				pr("%s  }\n", ind)
			}
			pr("%s}\n", ind)
		}
	}
	// dot is q·k_j over the chunk in memory, as a balanced tree of vec4
	// dot products (independent, so they overlap).
	var terms []string
	for cc := 0; cc < c.DC4; cc++ {
		terms = append(terms, fmt.Sprintf("dot(q%d, Ks[kj + %du])", cc, cc))
	}
	dot := pairwise(terms)

	pr("\tfor (var k0 = kBeg; k0 < kEnd; k0 = k0 + %du) {\n", bk)
	// The query's keep bits of the tile: bit j for key k0 + j. A keep
	// broadcast along the keys is one read per tile. Otherwise the
	// invocations read the BQ x BK keep values of the tile together, four
	// consecutive keys each (consecutive invocations reading consecutive
	// memory, where one row per invocation would touch BQ cache lines per
	// load), into nibbles in workgroup memory, and each assembles its row
	// after the barrier. Every load is unconditional (an index of 0 where
	// out of range), so that they all issue at once.
	pr("\t\tvar bits = 0u;\n")
	pr("\t\tif (ms == 0u) {\n")
	pr("\t\t\tlet n = min(kEnd - k0, %du);\n", bk)
	pr("\t\t\tif (live && attends(M[mb])) { bits = select((1u << n) - 1u, 0xffffffffu, n == 32u); }\n")
	pr("\t\t} else {\n")
	g := bk / 4
	for u := 0; u < g; u++ {
		pr("\t\t\t{ let e = lid + %du; let r = e / %du; let kk = k0 + (e %% %du) * 4u; let qi = qb * %du + r;\n", u*bq, g, g, bq)
		pr("\t\t\t  let mr = mbb + qi * P[13]; var nib = 0u;\n")
		for bit := 0; bit < 4; bit++ {
			pr("\t\t\t  { let ok = qi < Tq && kk + %[1]du < kEnd; let x = M[select(0u, mr + (kk + %[1]du) * ms, ok)]; nib = nib | select(0u, %[2]du, ok && attends(x)); }\n", bit, 1<<bit)
		}
		pr("\t\t\t  Mn[r * %du + e %% %du] = nib; }\n", g+1, g)
	}
	pr("\t\t}\n")
	// bitsFromMn assembles this invocation's bits from the nibbles, then
	// the range of keys to visit.
	bitsFromMn := func(ind, decl string) {
		pr("%sif (ms != 0u) {\n", ind)
		pr("%s\tbits = ", ind)
		for gg := 0; gg < g; gg++ {
			if gg > 0 {
				pr(" | ")
			}
			pr("(Mn[lid * %du + %du] << %du)", g+1, gg, 4*gg)
		}
		pr(";\n%s}\n", ind)
		// The keys to visit: from the first attended to the last (a
		// causal mask's diagonal tile stops early; the others skip it).
		pr("%s%sj0 = countTrailingZeros(bits); %sj1 = 32u - countLeadingZeros(bits);\n", ind, decl, decl)
	}
	// Per tile, in three phases that each give the GPU independent work
	// (a key at a time, every step waited on the one before: 9 TFLOP/s on
	// an H200): the scaled scores of the attended keys into Ss and their
	// maximum; one rescale of what was summed if the maximum grew; then
	// exp(s - m) * v_j added for each key.
	pr("\t\tvar mt = m;\n")
	score := func(ind, val string) {
		pr("%slet s = %s;\n", ind, val)
		pr("%sSs[j * %du + lid] = s;\n", ind, bq)
		pr("%smt = select(mt, maxp(mt, s), (bits & (1u << j)) != 0u);\n", ind)
	}
	if !c.chunks {
		pr("\t\tlet c0 = 0u;\n")
		load("\t\t", "Ks", "ldK", "c0", "D", c.DC4)
		load("\t\t", "Vs", "ldV", "v0", "Dv", c.DV4)
		pr("\t\tworkgroupBarrier();\n")
		bitsFromMn("\t\t", "let ")
		// Every key of the range, attended or not (no branch; a masked
		// key's score is never used); a whole tile in a loop of constant
		// length, which unrolls.
		pr("\t\tif (bits == %du) {\n", uint32(1<<bk-1))
		pr("\t\t\tfor (var j = 0u; j < %du; j = j + 1u) {\n", bk)
		pr("\t\t\t\tlet kj = j * %du;\n", c.DC4)
		score("\t\t\t\t", "scale * "+dot)
		pr("\t\t\t}\n")
		pr("\t\t} else if (bits != 0u) {\n")
		pr("\t\t\tfor (var j = j0; j < j1; j = j + 1u) {\n")
		pr("\t\t\t\tlet kj = j * %du;\n", c.DC4)
		score("\t\t\t\t", "scale * "+dot)
		pr("\t\t\t}\n")
		pr("\t\t}\n")
	} else {
		pr("\t\tvar j0 = 0u; var j1 = 0u;\n")
		// D in chunks: each chunk's part of the dot products adds into
		// Ss (the first chunk stores), q read per chunk (it stays in L1).
		pr("\t\tfor (var c0 = 0u; c0 * 4u < D; c0 = c0 + %du) {\n", c.DC4)
		load("\t\t\t", "Ks", "ldK", "c0", "D", c.DC4)
		pr("\t\t\tif (c0 == 0u) {\n")
		load("\t\t\t\t", "Vs", "ldV", "v0", "Dv", c.DV4)
		pr("\t\t\t}\n")
		pr("\t\t\tworkgroupBarrier();\n")
		pr("\t\t\tif (c0 == 0u) {\n")
		bitsFromMn("\t\t\t\t", "")
		pr("\t\t\t}\n")
		pr("\t\t\tif (bits != 0u) {\n")
		for cc := 0; cc < c.DC4; cc++ {
			pr("\t\t\t\tlet q%d = ldQ(row, c0 + %du, D);\n", cc, cc)
		}
		pr("\t\t\t\tfor (var j = j0; j < j1; j = j + 1u) {\n")
		pr("\t\t\t\t\tlet kj = j * %du;\n", c.DC4)
		pr("\t\t\t\t\tlet d = %s;\n", dot)
		pr("\t\t\t\t\tlet si = j * %du + lid;\n", bq)
		pr("\t\t\t\t\tSs[si] = select(Ss[si] + d, d, c0 == 0u);\n")
		pr("\t\t\t\t}\n")
		pr("\t\t\t}\n")
		pr("\t\t\tworkgroupBarrier(); // before the next chunk overwrites Ks\n")
		pr("\t\t}\n")
		pr("\t\tif (bits != 0u) {\n")
		pr("\t\t\tfor (var j = j0; j < j1; j = j + 1u) {\n")
		score("\t\t\t\t", fmt.Sprintf("scale * Ss[j * %du + lid]", bq))
		pr("\t\t\t}\n")
		pr("\t\t}\n")
	}
	pr("\t\tif (bits != 0u) {\n")
	pr("\t\t\tseen = true;\n")
	// A new maximum rescales what was summed under the old one. Compared
	// by bits: NaN != NaN would rescale a NaN forever, and a compiler may
	// fold comparisons with NaN. From m = -Inf the factor is exp(-Inf) =
	// 0; to a NaN or +Inf maximum it is NaN or 0, and the query is NaN at
	// the end anyway.
	pr("\t\t\tif (bitcast<u32>(mt) != bitcast<u32>(m)) {\n")
	pr("\t\t\t\tlet a = expp(m - mt);\n")
	pr("\t\t\t\tl = l * a;\n")
	for cc := 0; cc < c.DV4; cc++ {
		pr("\t\t\t\to%d = o%d * a;\n", cc, cc)
	}
	pr("\t\t\t\tm = mt;\n")
	pr("\t\t\t}\n")
	// While m is -Inf every attended score is -Inf: its weight is 0
	// (whether a finite maximum comes later or, if none does, the query
	// is NaN at the end), but 0 times a NaN or Inf in v is NaN, as in the
	// reference's sum. Subtracting 0 instead of m gives exp(-Inf) = 0
	// rather than exp(-Inf - -Inf) = NaN.
	pr("\t\t\tlet mm = select(m, 0.0, bitcast<u32>(m) == 0xff800000u);\n")
	acc := func(ind string) {
		pr("%slet p = exp(Ss[j * %du + lid] - mm);\n", ind, bq)
		pr("%sl = l + p;\n", ind)
		pr("%slet pv = vec4<f32>(p); let vj = j * %du;\n", ind, c.DV4)
		for cc := 0; cc < c.DV4; cc++ {
			pr("%so%d = fma(pv, Vs[vj + %du], o%d);\n", ind, cc, cc, cc)
		}
	}
	// A tile whose keys are all attended (no mask, or below a causal
	// mask's diagonal) runs a loop of constant length, which unrolls;
	// the others visit the attended keys only (a masked key's v may hold
	// NaN or Inf, and 0 times that is NaN).
	pr("\t\t\tif (bits == %du) {\n", uint32(1<<bk-1))
	pr("\t\t\t\tfor (var j = 0u; j < %du; j = j + 1u) {\n", bk)
	acc("\t\t\t\t\t")
	pr("\t\t\t\t}\n")
	pr("\t\t\t} else {\n")
	pr("\t\t\t\tfor (var j = j0; j < j1; j = j + 1u) {\n")
	pr("\t\t\t\t\tif ((bits & (1u << j)) == 0u) { continue; }\n")
	acc("\t\t\t\t\t")
	pr("\t\t\t\t}\n")
	pr("\t\t\t}\n")
	pr("\t\t}\n")
	pr("\t\tworkgroupBarrier(); // before the next tile overwrites Ks, Vs, Ss and Mn\n")
	pr("\t}\n")
	pr("\tif (!live) { return; }\n")

	if c.split {
		// The part's result: m, l, seen, then the unnormalized outputs
		// of this slice (the header is the same in every slice).
		pr("\tlet h = (row * nP + part) * (Dv + 3u);\n")
		pr("\tif (sv == 0u) { Y[h] = m; Y[h + 1u] = l; Y[h + 2u] = select(0.0, 1.0, seen); }\n")
		for cc := 0; cc < c.DV4; cc++ {
			pr("\t{ let e = (v0 + %du) * 4u;\n", cc)
			for u := 0; u < 4; u++ {
				pr("\t  if (e + %[1]du < Dv) { Y[h + 3u + e + %[1]du] = o%[2]d[%[1]d]; }\n", u, cc)
			}
			pr("\t}\n")
		}
		pr("}\n")
	} else {
		// No key: 0. A NaN or infinite maximum (with any key): NaN.
		pr("\tlet bad = seen && (bitcast<u32>(m) & 0x7fffffffu) >= 0x7f800000u;\n")
		pr("\tlet inv = select(0.0, 1.0 / l, seen && !bad); // l >= 1 where m is finite\n")
		pr("\tlet nan4 = vec4<f32>(qnan());\n")
		for cc := 0; cc < c.DV4; cc++ {
			pr("\t{ let r = select(o%d * inv, nan4, bad); let e4 = v0 + %du;\n", cc, cc)
			if c.vecV {
				pr("\t  if (e4 * 4u < Dv) { Y4[row * (Dv / 4u) + e4] = r; }\n")
			} else {
				for u := 0; u < 4; u++ {
					pr("\t  if (e4 * 4u + %[1]du < Dv) { Y[row * Dv + e4 * 4u + %[1]du] = r[%[1]d]; }\n", u)
				}
			}
			pr("\t}\n")
		}
		pr("}\n")
	}

	binds := []bindDecl{{name: "Q"}, {name: "K"}, {name: "V"}, {name: "M"}, {name: "Y", rw: true}}
	if c.vecD {
		binds[0], binds[1] = bindDecl{name: "Q4", vec4: true}, bindDecl{name: "K4", vec4: true}
	}
	if c.vecV {
		binds[2] = bindDecl{name: "V4", vec4: true}
		if !c.split {
			binds[4] = bindDecl{name: "Y4", rw: true, vec4: true}
		}
	}
	name := fmt.Sprintf("attention_%dx%d_%dx%d", bq, bk, c.DC4, c.DV4)
	if c.split {
		name += "_parts"
	}
	return newKernel(name, binds, w.String())
}

// attentionCombineKernel combines the parts of a split attention: output
// element (row, e) from the parts' (m, l, seen, o) as the online softmax
// would have. Params [rows*Dv, Dv, parts].
func attentionCombineKernel() *kernel {
	return newKernel("attention_combine", []bindDecl{{name: "Part"}, {name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	let Dv = P[1]; let nP = P[2]; let W = Dv + 3u;
	let row = i / Dv; let e = i % Dv;
	let b0 = row * nP * W;
	var M = negInf();
	var seen = false;
	for (var p = 0u; p < nP; p = p + 1u) {
		let h = b0 + p * W;
		if (Part[h + 2u] != 0.0) { seen = true; M = maxp(M, Part[h]); }
	}
	if (!seen) { Y[i] = 0.0; return; }
	// NaN, +Inf, or every attended score -Inf: NaN (softmax's rule).
	if ((bitcast<u32>(M) & 0x7fffffffu) >= 0x7f800000u) { Y[i] = qnan(); return; }
	var L = 0.0;
	var O = 0.0;
	for (var p = 0u; p < nP; p = p + 1u) {
		let h = b0 + p * W;
		// A part whose scores were all -Inf has m = -Inf: weight 0, and
		// its l and o are 0.
		if (Part[h + 2u] != 0.0) { let a = exp(Part[h] - M); L = L + Part[h + 1u] * a; O = O + Part[h + 3u + e] * a; }
	}
	Y[i] = O / L;
}
`)
}
