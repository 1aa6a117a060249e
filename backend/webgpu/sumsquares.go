package webgpu

import (
	"fmt"
	"strings"

	"github.com/ag-go/ag/backend"
)

// nativeComposites are the composite ops webgpu lowers itself
// (Caps.Composites); plan.Expand decomposes the others, whose primitives
// its generated kernels fuse.
var nativeComposites = []backend.Op{backend.OpSumSquares}

// sumSquares lowers backend.OpSumSquares natively. Its decomposition is a
// reduction per input and a chain of adds: two or three dispatches per
// input, and a transformer's gradient clipping reads some fifty tensors
// (about a hundred dispatches). Here one dispatch per group of inputs (as
// many as a kernel binds) writes the sums of squares of chunks of them,
// whatever their sizes, into the scratch buffer, and one more adds those
// up. An input larger than one binding is bound in ranges, each a piece of
// its own. Squares and sums are f32, as the decomposition's: past f32's
// range the sum is +Inf, a NaN anywhere makes it NaN.
func (p *program) sumSquares(node int, ins []bref, sizes []int, out bref) {
	type piece struct {
		r bref
		n int
	}
	var pieces []piece
	rng := p.lim.RangeRecords(1)
	for k, r := range ins {
		for off := 0; off < sizes[k]; off += rng {
			l := min(rng, sizes[k]-off)
			pr := r
			pr.off += uint64(off) * 4
			pr.size = uint64(l) * 4
			pieces = append(pieces, piece{pr, l})
		}
	}
	group := max(1, int(p.b.info.MaxStorageBuffers)-2) // P and the partial sums bind too
	chunk := wg * min(splitTrips, p.b.maxTrips)
	total := 0
	for _, pc := range pieces {
		total += ceilDiv(pc.n, chunk)
	}
	part := bref{kind: refScratch, size: uint64(total) * 4}
	p.scratchBytes = max(p.scratchBytes, part.size)
	base := 0
	for g0 := 0; g0 < len(pieces); g0 += group {
		gs := pieces[g0:min(len(pieces), g0+group)]
		prm := []uint32{uint32(base), uint32(chunk), uint32(len(gs))}
		binds := make([]bref, 0, len(gs)+1)
		wgs := 0
		for _, pc := range gs {
			prm = append(prm, uint32(wgs), uint32(pc.n))
			binds = append(binds, pc.r)
			wgs += ceilDiv(pc.n, chunk)
		}
		binds = append(binds, part)
		x, y := p.grid(wgs, 1)
		p.add(node, sumSquaresPartsKernel(len(gs)), binds, prm, x, y, 1)
		base += wgs
	}
	// the partial sums, in ranges a workgroup's lanes may loop over, each
	// dispatch adding its range to the sum so far
	span := wg * p.b.maxTrips
	for lo := 0; lo < total; lo += span {
		first := uint32(0)
		if lo == 0 {
			first = 1
		}
		p.add(node, sumPartsKernel(), []bref{part, out}, []uint32{uint32(lo), uint32(min(total, lo+span)), first}, 1, 1, 1)
	}
}

// reduceHead declares a workgroup's tree sum (sum over its lanes' v) and
// the main function's header: g is the workgroup, lid the lane.
var reduceHead = fmt.Sprintf(`
var<workgroup> sh: array<f32, %[1]d>;
fn reduceSum(v: f32, lid: u32) -> f32 {
	sh[lid] = v;
	workgroupBarrier();
	for (var s = %[2]du; s > 0u; s = s >> 1u) {
		if (lid < s) { sh[lid] = sh[lid] + sh[lid + s]; }
		workgroupBarrier();
	}
	return sh[0];
}
@compute @workgroup_size(%[1]d)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.y * nwg.x + wid.x;
`, wg, wg/2)

// sumSquaresPartsKernel binds m inputs L0..L{m-1} and the partial sums Y:
// workgroup g sums the squares of its chunk of one input (the inputs own
// consecutive runs of workgroups) into Y[base + g]. Params [base, chunk,
// m, then for each input its first workgroup and its length].
func sumSquaresPartsKernel(m int) *kernel {
	binds := make([]bindDecl, 0, m+1)
	var ld strings.Builder
	ld.WriteString("fn ld(k: u32, e: u32) -> f32 {\n\tswitch k {\n")
	for k := range m {
		binds = append(binds, bindDecl{name: fmt.Sprintf("L%d", k)})
		if k < m-1 {
			fmt.Fprintf(&ld, "\t\tcase %du: { return L%d[e]; }\n", k, k)
		} else {
			fmt.Fprintf(&ld, "\t\tdefault: { return L%d[e]; }\n", k)
		}
	}
	ld.WriteString("\t}\n}\n")
	binds = append(binds, bindDecl{name: "Y", rw: true})
	return newKernel(fmt.Sprintf("sum_squares_parts_%d", m), binds, ld.String()+reduceHead+fmt.Sprintf(`
	let m = P[2];
	let last = P[3u + 2u * (m - 1u)] + (P[4u + 2u * (m - 1u)] + P[1] - 1u) / P[1];
	if (g >= last) { return; }
	var k = 0u;
	for (var j = 1u; j < m; j = j + 1u) {
		if (g >= P[3u + 2u * j]) { k = j; }
	}
	let lo = (g - P[3u + 2u * k]) * P[1];
	let hi = min(P[4u + 2u * k], lo + P[1]);
	var acc = 0.0;
	for (var e = lo + lid; e < hi; e = e + %du) { let v = ld(k, e); acc = acc + v * v; }
	let s = reduceSum(acc, lid);
	if (lid == 0u) { Y[P[0] + g] = s; }
}
`, wg))
}

// sumPartsKernel adds Part[lo:hi] in one workgroup into Y[0], or onto it
// unless first. Params [lo, hi, first].
func sumPartsKernel() *kernel {
	return newKernel("sum_parts", []bindDecl{{name: "Part"}, {name: "Y", rw: true}}, reduceHead+fmt.Sprintf(`
	var acc = 0.0;
	for (var c = P[0] + lid; c < P[1]; c = c + %du) { acc = acc + Part[c]; }
	let s = reduceSum(acc, lid);
	if (lid == 0u) { Y[0] = select(Y[0] + s, s, P[2] != 0u); }
}
`, wg))
}
