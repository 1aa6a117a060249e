package webgpu

import (
	"fmt"
	"strings"

	"github.com/ag-go/ag/backend"
)

// The WGSL kernels. Every kernel binds P (binding 0), a read-only array<u32>
// slice of the program's parameter buffer holding the kernel's sizes, strides
// and scalars (f32 scalars as their bits), then its tensors. Sources are
// generated per variant (op, transposes, workgroup size) and the Backend
// caches one pipeline per distinct source.

// kernel is one WGSL compute shader and its binding layout.
type kernel struct {
	name     string
	src      string
	readOnly []bool // per binding, binding 0 (P) included
}

// wg is the workgroup size of the one-dimensional kernels: WebGPU guarantees
// 256 invocations and 256 in x.
const wg = 256

// maxTrips bounds the iterations of each loop whose length follows the data,
// per invocation. Mesa's llvmpipe (lavapipe) counts the iterations of all
// loops of an invocation together and, after 65535
// (LP_MAX_TGSI_LOOP_ITERATIONS), leaves every loop silently as if it had
// finished: a column sum over 1M rows by 8 lanes kept 65535*8 of them. A
// kernel runs at most three such loops (softmax) besides its tree
// reductions (log2(wg) iterations each), 3*maxTrips + 2*9 < 65535; longer
// extents are spread over more invocations or more passes. GPUs have no
// such limit, and sizes below it run as before.
const maxTrips = 1 << 14

// splitTrips is what a lane loops over once a reduction is split into parts
// because of maxTrips: parts short enough for a GPU to run many of them at
// once, whose partial results a second pass combines.
const splitTrips = 1024

// ceilDiv is a/b rounded up, for positive b.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

type bindDecl struct {
	name string
	rw   bool
	vec4 bool // bound as array<vec4<f32>> (16-byte loads and stores)
	u32  bool // bound as array<u32>: packed 16-bit values (pack_f16 ...)
}

// newKernel assembles a shader from its tensor bindings and its body.
func newKernel(name string, binds []bindDecl, body string) *kernel {
	var b strings.Builder
	b.WriteString("@group(0) @binding(0) var<storage, read> P: array<u32>;\n")
	ro := []bool{true}
	for i, d := range binds {
		acc := "read"
		if d.rw {
			acc = "read_write"
		}
		typ := "f32"
		switch {
		case d.vec4:
			typ = "vec4<f32>"
		case d.u32:
			typ = "u32"
		}
		fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, %s> %s: array<%s>;\n", i+1, acc, d.name, typ)
		ro = append(ro, !d.rw)
	}
	b.WriteString(wgslHelpers)
	b.WriteString(body)
	return &kernel{name: name, src: b.String(), readOnly: ro}
}

const wgslHelpers = `
fn pf(i: u32) -> f32 { return bitcast<f32>(P[i]); }
// negInf and qnan come from a var: as constant expressions Tint (Chromium's
// WGSL compiler) rejects them ("value inf cannot be represented as 'f32'").
fn negInf() -> f32 { var b = 0xff800000u; return bitcast<f32>(b); }
fn qnan() -> f32 { var b = 0x7fc00000u; return bitcast<f32>(b); }
// The special values of ir.go. WGSL lets a compiler assume that no NaN or
// infinity occurs and leaves built-ins undefined outside their domain, so
// x != x may fold to false, max, min, clamp and comparisons may drop a NaN,
// and built-ins give numbers for NaN (lavapipe: relu(NaN) = 0, pow(NaN, 4) =
// 0; Chromium's SwiftShader: exp(NaN) = +Inf, log(NaN) = 89, log(-1) a
// number): these helpers test the bits, which no compiler can fold.
fn isNaNBits(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// roundf16/roundbf16 round to the nearest f16/bf16 value by the bits
// (backend.RoundF16): pack2x16float's rounding and overflow are not
// specified. f16 subnormals: round() is to even by WGSL's definition.
fn roundf16(x: f32) -> f32 {
	let u = bitcast<u32>(x);
	let s = u & 0x80000000u;
	let a = u & 0x7fffffffu;
	if (a >= 0x7f800000u) { return x; }
	if (a >= 0x477ff000u) { return bitcast<f32>(s | 0x7f800000u); }
	if (a < 0x38800000u) { return bitcast<f32>(s | bitcast<u32>(round(bitcast<f32>(a) * 16777216.0) / 16777216.0)); }
	return bitcast<f32>(s | ((a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u));
}
fn roundbf16(x: f32) -> f32 {
	let u = bitcast<u32>(x);
	if ((u & 0x7fffffffu) > 0x7f800000u) { return x; }
	return bitcast<f32>((u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u);
}
// maxp is max that is NaN when either operand is (IEEE 754's maximum).
fn maxp(a: f32, b: f32) -> f32 { return select(select(max(a, b), b, isNaNBits(b)), a, isNaNBits(a)); }
fn expp(x: f32) -> f32 { return select(exp(x), x, isNaNBits(x)); }
// logp is log with NaN kept, x < 0 (-Inf too) NaN, and zero and subnormal
// inputs flushed to a zero (log = -Inf): lavapipe's log of a subnormal is
// neither the log nor -Inf (-88 for 1e-45).
fn logp(x: f32) -> f32 {
	let b = bitcast<u32>(x);
	if ((b & 0x7fffffffu) > 0x7f800000u) { return x; }
	if ((b & 0x7f800000u) == 0u) { return negInf(); }
	if (b >= 0x80000000u) { return qnan(); }
	return log(x);
}
// sqrtp is sqrt with NaN kept and x < 0 (-Inf too, not -0) NaN.
fn sqrtp(x: f32) -> f32 {
	let b = bitcast<u32>(x);
	return select(sqrt(x), qnan(), (b & 0x7fffffffu) > 0x7f800000u || (b > 0x80000000u));
}
// sinp and cosp reduce x to about [-pi, pi] first with 2*pi in two parts
// (k*6.28125 is exact for |k| < 2^16; the rest adds k*1e-10), then to a
// quarter turn y, |y| <= pi/4, and evaluate Cephes' sinf/cosf polynomials
// (about 1e-7): WGSL promises its own sin and cos only to 2^-11 absolute,
// and SwiftShader's were 1.9e-4 off. ±Inf and NaN give NaN.
fn redp(x: f32) -> f32 {
	let k = round(x * 0.15915494309189535);
	return (x - k * 6.28125) - k * 0.0019353071795864769;
}
fn quarterp(r: f32, shift: i32) -> f32 {
	let j = round(r * 0.6366197723675814);
	let y = (r - j * 1.5703125) - j * 0.00048382679489661923;
	let z = y * y;
	let s = y + y * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
	let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
	let q = (i32(j) + shift) & 3;
	if (q == 0) { return s; }
	if (q == 1) { return c; }
	if (q == 2) { return -s; }
	return -c;
}
// maxab is ir.go's maximum: NaN if either is (by bits, which no compiler
// folds away), else b where b > a, a on ties.
fn maxab(a: f32, b: f32) -> f32 {
	let nan = (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u || (bitcast<u32>(b) & 0x7fffffffu) > 0x7f800000u;
	return select(select(a, b, b > a), qnan(), nan);
}
// keepab is ir.go's keep: b where a is nonzero or NaN (by bits, as maxab),
// else -0.
fn keepab(a: f32, b: f32) -> f32 {
	return select(bitcast<f32>(0x80000000u), b, (bitcast<u32>(a) & 0x7fffffffu) != 0u);
}
fn sinp(x: f32) -> f32 {
	if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u) { return qnan(); }
	return quarterp(redp(x), 0);
}
fn cosp(x: f32) -> f32 {
	if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u) { return qnan(); }
	return quarterp(redp(x), 1);
}
// powAbs is |x|^a for a finite a other than 0, as C's powf at the special
// values, which WGSL's pow leaves undefined: NaN stays NaN, 0 (and a
// subnormal, flushed) gives 0 or +Inf by the sign of a, +Inf gives +Inf or 0.
fn powAbs(x: f32, a: f32) -> f32 {
	let u = bitcast<u32>(x) & 0x7fffffffu;
	let big = select(0.0, -negInf(), a > 0.0);
	if (u > 0x7f800000u) { return x; }
	if (u < 0x00800000u) { return select(-negInf(), 0.0, a > 0.0); }
	if (u == 0x7f800000u) { return big; }
	return pow(bitcast<f32>(u), a);
}
// powOdd is x^a for an odd whole a: |x|^a with the sign bit of x (so -0
// gives -Inf for a < 0, as in C).
fn powOdd(x: f32, a: f32) -> f32 {
	let r = powAbs(x, a);
	return select(r, -r, (bitcast<u32>(x) & 0x80000000u) != 0u);
}
// powc is x^a for a finite a as C's powf (ir.go): exact forms for the
// common exponents, C's sign rules for whole exponents of negative bases
// and NaN for other ones, -Inf included (WGSL's pow is undefined for
// x <= 0). a is a constant of the kernel (a literal in a fused chain, a
// uniform otherwise), so the branches fold or stay uniform.
fn powc(x: f32, a: f32) -> f32 {
	if (a == 0.0) { return 1.0; }
	if (a == 1.0) { return x; }
	if (a == 2.0) { return x * x; }
	if (a == 3.0) { return x * x * x; }
	if (a == -1.0) { return 1.0 / x; }
	if (a == 0.5) { return sqrtp(x); }
	if (a == trunc(a)) {
		if (abs(a) - 2.0 * trunc(abs(a) * 0.5) == 1.0) { return powOdd(x, a); }
		return powAbs(x, a);
	}
	return select(powAbs(x, a), qnan(), x < 0.0);
}
// idx rounds an index (halves away from zero), counts NaN as 0 and clamps it
// into 0..n-1 so that no index can reach outside its table. The fraction
// v - trunc(v) is exact; floor(|v| + 0.5) was not: it rounded odd whole
// numbers from 2^23 up to the next even one and 0.49999997 up to 1.
fn idx(v: f32, n: u32) -> u32 {
	if ((bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u) { return 0u; }
	let t = trunc(v);
	let r = select(t, t + sign(v), abs(v - t) >= 0.5);
	return min(u32(clamp(r, 0.0, f32(n - 1u))), n - 1u);
}
`

// linearHead opens a kernel with one invocation per element i over a 2-D
// grid of workgroups (the x dimension is limited to 65535 groups).
var linearHead = fmt.Sprintf(`
@compute @workgroup_size(%d)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let i = (wid.y * nwg.x + wid.x) * %du + lid;
`, wg, wg)

// elemExpr is the WGSL expression of an elementwise op, its row's
// template (backend.OpInfo.WGSL) over x, y, a and b, which the caller binds.
func elemExpr(op backend.Op) string {
	e := op.Info().WGSL
	if e == "" {
		backend.Unknown("webgpu.elemExpr", op)
	}
	return e
}

// unaryKernel: params [n, a, b].
func unaryKernel(expr string) *kernel {
	return newKernel("unary", []bindDecl{{name: "X"}, {name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	let a = pf(1u); let b = pf(2u);
	let x = X[i];
	Y[i] = `+expr+`;
}
`)
}

// binarySameKernel: both operands have the output's shape; params [n].
func binarySameKernel(op backend.Op) *kernel {
	return newKernel("binary_same", []bindDecl{{name: "A"}, {name: "B"}, {name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	let x = A[i]; let y = B[i];
	Y[i] = `+elemExpr(op)+`;
}
`)
}

// binaryBcastKernel: params [n, d0..d3, sa0..sa3, sb0..sb3] with the output
// shape right-aligned into 4 dimensions and broadcast strides (0 where an
// operand is broadcast).
func binaryBcastKernel(op backend.Op) *kernel {
	return newKernel("binary_bcast", []bindDecl{{name: "A"}, {name: "B"}, {name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	var r = i;
	let i3 = r % P[4]; r = r / P[4];
	let i2 = r % P[3]; r = r / P[3];
	let i1 = r % P[2]; let i0 = r / P[2];
	let ia = i0 * P[5] + i1 * P[6] + i2 * P[7] + i3 * P[8];
	let ib = i0 * P[9] + i1 * P[10] + i2 * P[11] + i3 * P[12];
	let x = A[ia]; let y = B[ib];
	Y[i] = `+elemExpr(op)+`;
}
`)
}

// fillKernel: params [n, value].
func fillKernel() *kernel {
	return newKernel("fill", []bindDecl{{name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	Y[i] = pf(1u);
}
`)
}

// stridedKernel copies Y[dstOff + i] = X[srcOff + sum_k idx_k * s_k] for the
// output index (idx_0..idx_3) of i in shape d: expand, permute, slices and
// concatenation. Params [n, dstOff, srcOff, d0..d3, s0..s3].
func stridedKernel() *kernel {
	return newKernel("strided", []bindDecl{{name: "X"}, {name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	var r = i;
	let i3 = r % P[6]; r = r / P[6];
	let i2 = r % P[5]; r = r / P[5];
	let i1 = r % P[4]; let i0 = r / P[4];
	Y[P[1] + i] = X[P[2] + i0 * P[7] + i1 * P[8] + i2 * P[9] + i3 * P[10]];
}
`)
}

// transposeKernel swaps the last two axes of [batch, R, C] through 32x32
// tiles in workgroup memory (a row padded by one against bank conflicts),
// so that both the loads and the stores are contiguous: the strided
// kernel's one divided index per element moved 64 MiB in 200 us on an
// H200. Params [R, C, tiles along C, tiles along R, batch]; the tiles
// are numbered over the linear workgroup id.
func transposeKernel() *kernel {
	return newKernel("transpose", []bindDecl{{name: "X"}, {name: "Y", rw: true}}, `
var<workgroup> T: array<f32, 1056>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let R = P[0]; let C = P[1]; let tc = P[2]; let per = P[2] * P[3];
	let t = wid.y * nwg.x + wid.x;
	if (t >= per * P[4]) { return; }
	let base = (t / per) * R * C; let u = t % per;
	let r0 = (u / tc) * 32u; let c0 = (u % tc) * 32u;
	let lx = lid % 32u; let ly = lid / 32u;
	for (var j = 0u; j < 32u; j = j + 8u) {
		let r = r0 + ly + j; let c = c0 + lx;
		if (r < R && c < C) { T[(ly + j) * 33u + lx] = X[base + r * C + c]; }
	}
	workgroupBarrier();
	for (var j = 0u; j < 32u; j = j + 8u) {
		let c = c0 + ly + j; let r = r0 + lx;
		if (c < C && r < R) { Y[base + c * R + r] = T[lx * 33u + ly + j]; }
	}
}
`)
}

// rowHead opens a kernel with one workgroup per row of a [rows, C] view and
// a shared array for tree reductions. Params start [rows, C].
var rowHead = fmt.Sprintf(`
var<workgroup> sh: array<f32, %d>;
fn reduceMax(v: f32, lid: u32) -> f32 {
	sh[lid] = v;
	workgroupBarrier();
	for (var s = %du; s > 0u; s = s >> 1u) {
		if (lid < s) { sh[lid] = maxp(sh[lid], sh[lid + s]); }
		workgroupBarrier();
	}
	let r = sh[0];
	workgroupBarrier();
	return r;
}
%s@compute @workgroup_size(%d)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row = wid.y * nwg.x + wid.x;
	if (row >= P[0]) { return; }
	let C = P[1];
	let base = row * C;
`, wg, wg/2, reduceSumFn, wg)

// reduceSumFn is a tree sum of one value per lane over the workgroup in
// the shared array sh (of wg values), the same order every run.
var reduceSumFn = fmt.Sprintf(`fn reduceSum(v: f32, lid: u32) -> f32 {
	sh[lid] = v;
	workgroupBarrier();
	for (var s = %du; s > 0u; s = s >> 1u) {
		if (lid < s) { sh[lid] = sh[lid] + sh[lid + s]; }
		workgroupBarrier();
	}
	let r = sh[0];
	workgroupBarrier();
	return r;
}
`, wg/2)

// softmaxOut is the output of softmax (log-softmax) for x in a row of
// maximum m and sum of exp(x - m) s.
func softmaxOut(log bool) string {
	if log {
		return "x - m - logp(s)"
	}
	return "expp(x - m) / s"
}

// softmaxKernel: softmax or log-softmax of each row, one workgroup per row.
// The sums of exp run in blocks (accLoop), here and in softmaxPartsKernel:
// a lane of a 2^22 row adds 2^14 terms, whose one running sum put every
// output 4e-5 off (cpu and ggml: under 4e-7).
func softmaxKernel(log bool) *kernel {
	return newKernel("softmax", []bindDecl{{name: "X"}, {name: "Y", rw: true}}, rowHead+fmt.Sprintf(`
	var mx = negInf();
	for (var c = lid; c < C; c = c + %du) { mx = maxp(mx, X[base + c]); }
	let m = reduceMax(mx, lid);
	%s%s	let s = reduceSum(acc, lid);
	for (var c = lid; c < C; c = c + %du) { let x = X[base + c]; Y[base + c] = %s; }
}
`, wg, accDecl(false), accLoop(false, fmt.Sprintf("for (var c = lid; c < C; c = c + %du)", wg), "expp(X[base + c] - m)"), wg, softmaxOut(log)))
}

// Softmax of rows longer than a workgroup's loops may cover (maxTrips per
// lane) runs in three passes through the scratch buffer Part, which holds
// a (max, sum of exp(x - max)) pair per part of each row: the parts, their
// combination per row (written over the row's first pair), and the output.

// softmaxPartsKernel: workgroup g reduces part g %% np of row g / np (parts
// of chunk elements) into Part[2g], Part[2g+1]. Params [rows*np, C, np,
// chunk].
func softmaxPartsKernel() *kernel {
	return newKernel("softmax_parts", []bindDecl{{name: "X"}, {name: "Part", rw: true}}, rowHead+fmt.Sprintf(`
	let b = (row / P[2]) * C;
	let lo = (row %% P[2]) * P[3];
	let hi = min(C, lo + P[3]);
	var mx = negInf();
	for (var c = lo + lid; c < hi; c = c + %du) { mx = maxp(mx, X[b + c]); }
	let m = reduceMax(mx, lid);
	%s%s	let s = reduceSum(acc, lid);
	// A part of -inf adds nothing (expp(-inf - -inf) would be NaN).
	if (lid == 0u) { Part[2u * row] = m; Part[2u * row + 1u] = select(s, 0.0, m == negInf()); }
}
`, wg, accDecl(false), accLoop(false, fmt.Sprintf("for (var c = lo + lid; c < hi; c = c + %du)", wg), "expp(X[b + c] - m)")))
}

// softmaxCombineKernel: one workgroup per row combines the row's np pairs
// into its first: the maximum M and the sum of s_p * exp(m_p - M). Params
// [rows, C, np].
func softmaxCombineKernel() *kernel {
	return newKernel("softmax_combine", []bindDecl{{name: "Part", rw: true}}, rowHead+fmt.Sprintf(`
	let np = P[2];
	let b = 2u * row * np;
	var mx = negInf();
	for (var c = lid; c < np; c = c + %du) { mx = maxp(mx, Part[b + 2u * c]); }
	let m = reduceMax(mx, lid);
	var acc = 0.0;
	for (var c = lid; c < np; c = c + %du) { acc = acc + Part[b + 2u * c + 1u] * expp(Part[b + 2u * c] - m); }
	let s = reduceSum(acc, lid);
	if (lid == 0u) { Part[b] = m; Part[b + 1u] = s; }
}
`, wg, wg))
}

// softmaxApplyKernel: Y[i] for every element from its row's combined pair.
// Params [rows*C, C, np].
func softmaxApplyKernel(log bool) *kernel {
	return newKernel("softmax_apply", []bindDecl{{name: "X"}, {name: "Part"}, {name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	let b = 2u * (i / P[1]) * P[2];
	let m = Part[b]; let s = Part[b + 1u];
	let x = X[i];
	Y[i] = `+softmaxOut(log)+`;
}
`)
}

// getRowsKernel: Y[i] = T[idx(I[i / W]) * W + i %% W] for the table rows
// r0..r0+rc-1 bound (large tables run as several dispatches over bound
// ranges). With words, T and Y are bound as u32: the table holds packed
// 16-bit values, whose words are copied as bits. Params [n, W, R, r0, rc].
func getRowsKernel(words bool) *kernel {
	name, t, y := "get_rows", bindDecl{name: "T"}, bindDecl{name: "Y", rw: true}
	if words {
		name, t.u32, y.u32 = "get_rows_words", true, true
	}
	return newKernel(name, []bindDecl{t, {name: "I"}, y}, linearHead+`
	if (i >= P[0]) { return; }
	let W = P[1];
	let r = idx(I[i / W], P[2]);
	if (r < P[3] || r >= P[3] + P[4]) { return; }
	Y[i] = T[(r - P[3]) * W + i % W];
}
`)
}

// scatterAddKernel: invocation t owns column t %% W of the output rows
// [rb*RB, rb*RB+RB) with rb = t / W: it zeroes them when zero is set and
// adds every source row k0 <= k < k1 whose index falls there, in order (no
// float atomics in WGSL, and the sum order is deterministic). More source
// rows than maxTrips run as several dispatches over ranges of k. Params
// [threads, R, W, k1, RB, k0, zero].
func scatterAddKernel() *kernel {
	return newKernel("scatter_add_rows", []bindDecl{{name: "S"}, {name: "I"}, {name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	let R = P[1]; let W = P[2]; let k1 = P[3]; let RB = P[4];
	let j = i % W;
	let lo = (i / W) * RB;
	let hi = min(R, lo + RB);
	if (P[6] != 0u) {
		for (var r = lo; r < hi; r = r + 1u) { Y[r * W + j] = 0.0; }
	}
	for (var k = P[5]; k < k1; k = k + 1u) {
		let r = idx(I[k], R);
		if (r >= lo && r < hi) { Y[r * W + j] = Y[r * W + j] + S[k * W + j]; }
	}
}
`)
}

// oneHotKernel: params [n*C, C].
func oneHotKernel() *kernel {
	return newKernel("one_hot", []bindDecl{{name: "I"}, {name: "Y", rw: true}}, linearHead+`
	if (i >= P[0]) { return; }
	let C = P[1];
	Y[i] = select(0.0, 1.0, idx(I[i / C], C) == i % C);
}
`)
}

// maxPoolBackKernel is backend.OpMaxPool2dBack, one invocation per
// element of x gathering the gradients of the windows whose first maximum
// it is (no atomics: the same sums in the same order every run). Values
// are ordered by their bits (orderKey), so a device that flushes
// subnormals in float compares still tells them apart, and -0 ties +0; a
// padded place is -Inf, the first NaN wins. Params [elements, W, H, OW,
// OH, KH, KW, SH, SW, PH, PW]; bindings G (the output's gradient), X, Y.
func maxPoolBackKernel() *kernel {
	return newKernel("max_pool2d_back", []bindDecl{{name: "G"}, {name: "X"}, {name: "Y", rw: true}}, `
fn orderKey(b0: u32) -> u32 {
	var b = b0;
	if ((b & 0x7fffffffu) == 0u) { b = 0u; }
	if ((b & 0x80000000u) != 0u) { return ~b; }
	return b | 0x80000000u;
}
`+linearHead+`
	if (i >= P[0]) { return; }
	let W = i32(P[1]); let H = i32(P[2]); let OW = i32(P[3]); let OH = i32(P[4]);
	let kh = i32(P[5]); let kw = i32(P[6]); let sh = i32(P[7]); let sw = i32(P[8]);
	let ph = i32(P[9]); let pw = i32(P[10]);
	let hw = u32(H * W);
	let xb = (i / hw) * hw;
	let gb = (i / hw) * u32(OH * OW);
	let ih = i32((i % hw) / u32(W));
	let iw = i32(i % u32(W));
	// the windows holding (ih, iw): oh*sh - ph <= ih <= oh*sh - ph + kh - 1
	let ah = ih + ph - kh + 1;
	let aw = iw + pw - kw + 1;
	var oh0 = 0;
	if (ah > 0) { oh0 = (ah + sh - 1) / sh; }
	var ow0 = 0;
	if (aw > 0) { ow0 = (aw + sw - 1) / sw; }
	let oh1 = min(OH - 1, (ih + ph) / sh);
	let ow1 = min(OW - 1, (iw + pw) / sw);
	let ninf = orderKey(0xff800000u);
	var acc = 0.0;
	var got = false;
	for (var oh = oh0; oh <= oh1; oh++) {
		for (var ow = ow0; ow <= ow1; ow++) {
			let h0 = oh * sh - ph;
			let w0 = ow * sw - pw;
			var bh = h0;
			var bw = w0;
			var best = 0u;
			var isNaN = false;
			for (var a = 0; a < kh && !isNaN; a++) {
				for (var b = 0; b < kw; b++) {
					let y = h0 + a;
					let x = w0 + b;
					var key = ninf;
					if (y >= 0 && y < H && x >= 0 && x < W) {
						let bits = bitcast<u32>(X[xb + u32(y * W + x)]);
						if ((bits & 0x7fffffffu) > 0x7f800000u) {
							bh = y;
							bw = x;
							isNaN = true;
							break;
						}
						key = orderKey(bits);
					}
					if ((a == 0 && b == 0) || key > best) {
						best = key;
						bh = y;
						bw = x;
					}
				}
			}
			if (bh == ih && bw == iw) {
				let gv = G[gb + u32(oh * OW + ow)];
				acc = select(gv, acc + gv, got);
				got = true;
			}
		}
	}
	Y[i] = acc;
}
`)
}

// packKernel is pack_f16 (bf false) or pack_bf16 over a range of words:
// word i holds X[2i] (low half) and X[2i+1] (high half, 0 past the
// values' end). The bits are computed by integer operations, as the Go
// kernels (backend.F16Bits): pack2x16float leaves overflow undefined.
// Params [words, values].
func packKernel(bf bool) *kernel {
	enc, name := "f16bits", "pack_f16"
	if bf {
		enc, name = "bf16bits", "pack_bf16"
	}
	return newKernel(name, []bindDecl{{name: "X"}, {name: "Y", rw: true, u32: true}}, halfBits+linearHead+`
	if (i >= P[0]) { return; }
	var hi = 0u;
	if (2u * i + 1u < P[1]) { hi = `+enc+`(X[2u * i + 1u]); }
	Y[i] = `+enc+`(X[2u * i]) | (hi << 16u);
}
`)
}

// unpackKernel is unpack_f16 (bf false) or unpack_bf16 over a range of
// words, each writing its two values (one for the last of an odd count).
// Params [words, values].
func unpackKernel(bf bool) *kernel {
	dec, name := "f16val", "unpack_f16"
	if bf {
		dec, name = "bf16val", "unpack_bf16"
	}
	return newKernel(name, []bindDecl{{name: "X", u32: true}, {name: "Y", rw: true}}, halfBits+linearHead+`
	if (i >= P[0]) { return; }
	let w = X[i];
	Y[2u * i] = `+dec+`(w & 0xffffu);
	if (2u * i + 1u < P[1]) { Y[2u * i + 1u] = `+dec+`(w >> 16u); }
}
`)
}

// halfBits encodes and decodes 16-bit floats by their bits
// (backend.F16Bits, F16Value, BF16Bits, BF16Value).
const halfBits = `
fn f16bits(x: f32) -> u32 {
	let r = bitcast<u32>(roundf16(x));
	let s = (r >> 16u) & 0x8000u;
	let a = r & 0x7fffffffu;
	if (a > 0x7f800000u) { return s | 0x7e00u; }
	if (a == 0x7f800000u) { return s | 0x7c00u; }
	// an f16 subnormal or zero: a whole multiple of 2^-24, exact in f32
	if (a < 0x38800000u) { return s | u32(bitcast<f32>(a) * 16777216.0); }
	return s | (((a >> 23u) - 112u) << 10u) | ((a >> 13u) & 0x3ffu);
}
fn f16val(h: u32) -> f32 {
	let s = (h & 0x8000u) << 16u;
	let e = (h >> 10u) & 0x1fu;
	let m = h & 0x3ffu;
	if (e == 0u) { return bitcast<f32>(s | bitcast<u32>(f32(m) / 16777216.0)); }
	if (e == 31u) { return bitcast<f32>(s | select(0x7f800000u, 0x7fc00000u | (m << 13u), m != 0u)); }
	return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}
fn bf16bits(x: f32) -> u32 {
	let u = bitcast<u32>(x);
	if ((u & 0x7fffffffu) > 0x7f800000u) { return ((u >> 16u) & 0x8000u) | 0x7fc0u; }
	return bitcast<u32>(roundbf16(x)) >> 16u;
}
fn bf16val(h: u32) -> f32 { return bitcast<f32>(h << 16u); }
`

// adamWKernel updates w, m, v in place per ir.go; scaled: H has the 8th
// value, the gradient's scale. Params [n].
func adamWKernel(scaled bool) *kernel {
	name, g := "adamw", "G[i]"
	if scaled {
		name, g = "adamw_scaled", "G[i] * H[7]"
	}
	return newKernel(name, []bindDecl{{name: "W", rw: true}, {name: "G"}, {name: "Mo", rw: true}, {name: "V", rw: true}, {name: "H"}}, linearHead+`
	if (i >= P[0]) { return; }
	let lr = H[0]; let b1 = H[1]; let b2 = H[2]; let eps = H[3]; let wd = H[4]; let bc1 = H[5]; let bc2 = H[6];
	let g = `+g+`;
	let m = b1 * Mo[i] + (1.0 - b1) * g;
	let v = b2 * V[i] + (1.0 - b2) * g * g;
	Mo[i] = m;
	V[i] = v;
	W[i] = W[i] * (1.0 - lr * wd) - lr * (m * bc1) / (sqrt(v * bc2) + eps);
}
`)
}

// sgdKernel updates w and the velocity in place per ir.go. Params [n].
func sgdKernel() *kernel {
	return newKernel("sgd", []bindDecl{{name: "W", rw: true}, {name: "G"}, {name: "V", rw: true}, {name: "H"}}, linearHead+`
	if (i >= P[0]) { return; }
	let lr = H[0]; let mom = H[1]; let wd = H[2];
	let w = W[i];
	let g = G[i] + wd * w;
	let vel = mom * V[i] + g;
	V[i] = vel;
	W[i] = w - lr * vel;
}
`)
}

// randUniformKernel computes rand_uniform (backend/philox.go) with u32
// arithmetic only: WGSL has no 32x32->64 product, so Philox's high words
// come from 16-bit halves. One invocation per block of 4 values (a few
// hundred integer operations). Params [n, element offset of this range (a
// multiple of 4), Start low, Start high]; S is the state (RandStateLen
// whole numbers, 16 bits each).
func randUniformKernel() *kernel {
	return newKernel("rand_uniform", []bindDecl{{name: "S"}, {name: "Y", rw: true}}, `
fn mulhi(a: u32, b: u32) -> u32 {
	let a0 = a & 0xffffu; let a1 = a >> 16u;
	let b0 = b & 0xffffu; let b1 = b >> 16u;
	let p01 = a0 * b1; let p10 = a1 * b0;
	let mid = ((a0 * b0) >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
	return a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
}
fn piece(k: u32) -> u32 { return u32(S[k]) & 0xffffu; }
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
	let lo = a.x + b.x;
	return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
`+linearHead+`
	let q0 = 4u * i;
	if (q0 >= P[0]) { return; }
	let e = P[1] + q0;
	var k0 = piece(0u) | (piece(1u) << 16u);
	var k1 = piece(2u) | (piece(3u) << 16u);
	let base = vec2<u32>(piece(4u) | (piece(5u) << 16u), piece(6u) | (piece(7u) << 16u));
	let blk = add64(add64(base, vec2<u32>(P[2], P[3])), vec2<u32>(e / 4u, 0u));
	var c = vec4<u32>(blk.x, blk.y, 0u, 0u);
	for (var r = 0u; r < 10u; r = r + 1u) {
		if (r > 0u) { k0 = k0 + 0x9E3779B9u; k1 = k1 + 0xBB67AE85u; }
		let hi0 = mulhi(0xD2511F53u, c.x); let lo0 = 0xD2511F53u * c.x;
		let hi1 = mulhi(0xCD9E8D57u, c.z); let lo1 = 0xCD9E8D57u * c.z;
		c = vec4<u32>(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
	}
	for (var q = 0u; q < 4u; q = q + 1u) {
		if (q0 + q < P[0]) { Y[q0 + q] = f32(c[q] >> 8u) * 5.9604644775390625e-8; }
	}
}
`)
}

// The batch norm kernels (backend.OpBatchNorm, OpBatchNormBack) over x [N,
// C, L], each channel over its N*L values, which split into S chunks so
// that C*S workgroups share the reading (no atomics: the same sums in the
// same order every run). Part holds the chunks' sums, [4, S, C] from 0,
// and after them the channels' statistics, [4, C]. Params [L, C, N, S, eps,
// elements]. bnHead opens each; at(c, j) is the place of value j of
// channel c.
var bnHead = fmt.Sprintf(`
var<workgroup> bs: array<vec3<f32>, %d>;
fn sumAll(v: vec3<f32>, lid: u32) -> vec3<f32> {
	bs[lid] = v;
	workgroupBarrier();
	for (var s = %du; s > 0u; s = s >> 1u) {
		if (lid < s) { bs[lid] = bs[lid] + bs[lid + s]; }
		workgroupBarrier();
	}
	let r = bs[0];
	workgroupBarrier();
	return r;
}
fn finite(v: f32) -> bool { return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u; }
fn at(c: u32, j: u32) -> u32 { return ((j / P[0]) * P[1] + c) * P[0] + j %% P[0]; }
@compute @workgroup_size(%d)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let L = P[0]; let C = P[1]; let N = P[2]; let S = P[3]; let eps = pf(4u);
	let M = N * L; let q = M / S; let rem = M %% S;
`, wg, wg/2, wg)

// bnPartsKernel: workgroup w sums chunk w %% S of channel w / S: its mean,
// the sum of squares about that mean and (back) the sums of dy and of
// dy*(x - the chunk's mean).
func bnPartsKernel(back bool) *kernel {
	binds, acc := []bindDecl{{name: "X"}, {name: "Part", rw: true}}, ""
	if back {
		binds = []bindDecl{{name: "X"}, {name: "DY"}, {name: "Part", rw: true}}
		acc = "let g = DY[i]; v.y = v.y + g; v.z = v.z + g * d;"
	}
	return newKernel("batch_norm_parts", binds, bnHead+fmt.Sprintf(`
	let w = wid.y * nwg.x + wid.x;
	if (w >= C * S) { return; }
	let c = w / S; let s = w %% S;
	let j0 = s * q + min(s, rem);
	let cnt = q + select(0u, 1u, s < rem);
	var a = 0.0;
	for (var j = lid; j < cnt; j = j + %du) { a = a + X[at(c, j0 + j)]; }
	let mean = sumAll(vec3<f32>(a, 0.0, 0.0), lid).x / f32(cnt);
	var v = vec3<f32>(0.0);
	for (var j = lid; j < cnt; j = j + %du) {
		let i = at(c, j0 + j);
		let d = X[i] - mean;
		v.x = v.x + d * d;
		%s
	}
	v = sumAll(v, lid);
	if (lid == 0u) { Part[4u * w] = mean; Part[4u * w + 1u] = v.x; Part[4u * w + 2u] = v.y; Part[4u * w + 3u] = v.z; }
}
`, wg, wg, acc))
}

// bnMergeKernel: per channel the chunks merged (Chan et al.'s update, so a
// channel far from 0 for its spread does not cancel): mean, r = 1/sqrt(var
// + eps), mean(dy), r^2*mean(dy*(x - mean)), after the parts; a channel
// whose sums are not finite gets NaN for all four. With stats, the mean
// and the biased variance instead, as Y [2, C] (batch_norm_stats).
func bnMergeKernel(back, stats bool) *kernel {
	binds, name := []bindDecl{{name: "Part", rw: true}}, "batch_norm_merge"
	if stats {
		binds, name = append(binds, bindDecl{name: "Y", rw: true}), "batch_norm_stats"
	}
	tail := fmt.Sprintf(`	let r = 1.0 / sqrt(m2 / f32(M) + eps);
	var o = vec4<f32>(m, r, sdy / f32(M), r * r * sdx / f32(M));
	if (!finite(m) || !finite(m2) || (%t && (!finite(sdy) || !finite(sdx)))) { o = vec4<f32>(qnan()); }
	let k = 4u * (C * S + c);
	Part[k] = o.x; Part[k + 1u] = o.y; Part[k + 2u] = o.z; Part[k + 3u] = o.w;
`, back)
	if stats {
		tail = "\tY[c] = m; Y[C + c] = m2 / f32(M);\n"
	}
	return newKernel(name, binds, bnHead+fmt.Sprintf(`
	let c = (wid.y * nwg.x + wid.x) * %du + lid;
	if (c >= C) { return; }
	let b = 4u * c * S;
	var m = Part[b];
	if (S > 1u) {
		m = 0.0;
		for (var s = 0u; s < S; s = s + 1u) { m = m + f32(q + select(0u, 1u, s < rem)) * Part[b + 4u * s]; }
		m = m / f32(M);
	}
	var m2 = 0.0; var sdy = 0.0; var sdx = 0.0;
	for (var s = 0u; s < S; s = s + 1u) {
		let dm = Part[b + 4u * s] - m;
		m2 = m2 + Part[b + 4u * s + 1u] + f32(q + select(0u, 1u, s < rem)) * dm * dm;
		sdy = sdy + Part[b + 4u * s + 2u];
		sdx = sdx + Part[b + 4u * s + 3u] + dm * Part[b + 4u * s + 2u];
	}
%s}
`, wg, tail))
}

// bnApplyKernel: y = (x - mean)*r, or (back) dx = r*(dy - mean(dy) - (x -
// mean)*r^2*mean(dy*(x - mean))), from the channel's statistics.
func bnApplyKernel(back bool) *kernel {
	binds, out := []bindDecl{{name: "X"}, {name: "Part"}, {name: "Y", rw: true}}, "(X[i] - st.x) * st.y"
	if back {
		binds = []bindDecl{{name: "X"}, {name: "Part"}, {name: "DY"}, {name: "Y", rw: true}}
		out = "st.y * (DY[i] - st.z - (X[i] - st.x) * st.w)"
	}
	return newKernel("batch_norm_apply", binds, bnHead+fmt.Sprintf(`
	let i = (wid.y * nwg.x + wid.x) * %du + lid;
	if (i >= P[5]) { return; }
	let k = 4u * (C * S + (i / L) %% C);
	let st = vec4<f32>(Part[k], Part[k + 1u], Part[k + 2u], Part[k + 3u]);
	Y[i] = %s;
}
`, wg, out))
}

// ssHead is the reduction helper of the sum_squares kernels.
var ssHead = fmt.Sprintf("var<workgroup> sh: array<f32, %d>;\n", wg) + reduceSumFn

// sumSquaresPartsKernel sums the squares of chunks of g inputs X0..X<g-1>
// into Part: P = [g, then per input its length, chunks and first partial
// sum's index]; workgroup w takes input i (the first whose chunks reach
// past w) and its chunk w - (the chunks before i). A workgroup's input is
// uniform, so the switch over the bindings is too.
func sumSquaresPartsKernel(g int) *kernel {
	binds := make([]bindDecl, g, g+1)
	var cases strings.Builder
	for k := range g {
		binds[k] = bindDecl{name: fmt.Sprintf("X%d", k)}
		fmt.Fprintf(&cases, "\t\tcase %du: { for (var j = lid; j < cnt; j = j + %du) { let v = X%d[j0 + j]; a = a + v * v; } }\n", k, wg, k)
	}
	binds = append(binds, bindDecl{name: "Part", rw: true})
	return newKernel(fmt.Sprintf("sum_squares_parts_%d", g), binds, ssHead+fmt.Sprintf(`@compute @workgroup_size(%d)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	var w = wid.y * nwg.x + wid.x;
	let g = P[0];
	var i = 0u;
	for (; i < g; i = i + 1u) {
		let s = P[2u + 3u * i];
		if (w < s) { break; }
		w = w - s;
	}
	if (i >= g) { return; }
	let n = P[1u + 3u * i]; let S = P[2u + 3u * i];
	let q = n / S; let rem = n %% S;
	let j0 = w * q + min(w, rem);
	let cnt = q + select(0u, 1u, w < rem);
	var a = 0.0;
	switch i {
%s		default: {}
	}
	a = reduceSum(a, lid);
	if (lid == 0u) { Part[P[3u + 3u * i] + w] = a; }
}
`, wg, cases.String()))
}

// sumSquaresTotalKernel adds the P[0] partial sums of Part in one
// workgroup (each lane its strided share in order, then a tree): Y[0].
func sumSquaresTotalKernel() *kernel {
	return newKernel("sum_squares_total", []bindDecl{{name: "Part"}, {name: "Y", rw: true}}, ssHead+fmt.Sprintf(`@compute @workgroup_size(%d)
fn main(@builtin(local_invocation_index) lid: u32) {
	var a = 0.0;
	for (var j = lid; j < P[0]; j = j + %du) { a = a + Part[j]; }
	a = reduceSum(a, lid);
	if (lid == 0u) { Y[0] = a; }
}
`, wg, wg))
}
