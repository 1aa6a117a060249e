package webgpu

import (
	"fmt"
	"strings"

	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// The register-blocked matmul. A workgroup computes a BM x BN tile of C with
// (BM/TM)*(BN/TN) invocations, each holding TM x TN accumulators as vec4
// rows. Per step of BK along K the tiles of A and B are staged in workgroup
// memory as vec4s, A transposed (k-major) so that an invocation reads its TM
// rows of one k as TM/4 vec4 loads; the next step's tiles are loaded into
// registers while the current one is multiplied (and, double-buffered, stored
// into the other half of workgroup memory so one barrier per step suffices).
// An invocation's rows and columns are spread in groups of 4 at a stride of
// BM/(TM/4) (BN/(TN/4)), so neighbouring invocations read neighbouring vec4s
// (no bank conflicts) and write neighbouring vec4s of C.
//
// With M, N and K multiples of 4 (vec), A, B and C are bound as vec4 arrays:
// global loads and stores are 16 bytes. Otherwise each element is loaded on
// its own with its bounds check; the tiling is the same.

// mmCfg is one tiling of the matmul kernel.
type mmCfg struct {
	BM, BN, BK int
	TM, TN     int  // outputs per invocation: multiples of 4
	DB         bool // double-buffered workgroup memory
}

func (c mmCfg) String() string {
	db := ""
	if c.DB {
		db = "db"
	}
	return fmt.Sprintf("%dx%dx%d/%dx%d%s", c.BM, c.BN, c.BK, c.TM, c.TN, db)
}

func (c mmCfg) threads() int { return (c.BM / c.TM) * (c.BN / c.TN) }

// sharedBytes is the workgroup memory the kernel declares.
func (c mmCfg) sharedBytes() int {
	f := 1
	if c.DB {
		f = 2
	}
	return f * c.BK * (c.BM + c.BN) * 4
}

// fits reports whether the device runs this tiling.
func (c mmCfg) fits(info gpu.Info) bool {
	t := c.threads()
	return t <= int(info.MaxInvocations) && t <= int(info.MaxWGSizeX) && c.sharedBytes() <= int(info.MaxWGStorage)
}

// The tilings matmul picks from. Measured on an H200 (TestSweepMatmul, by
// the device clock): mmLarge reaches 30-33 TFLOP/s from 2048 up, mmMedium
// 23-25 at 1024; products with fewer than splitBelow mmSmall tiles (a
// batch of 64 or 256 rows through a 1024-wide layer) run mmSmall with K
// split so that about splitTarget workgroups share the work: 16 TFLOP/s at
// 256x1024x1024 against 9 unsplit, 7.7 against 2.2 at 64x1024x1024.
// Where B is not transposed, mmWide (128 invocations of 8x8, double
// buffered) does 35-36 at 2048 and 4096 where mmLarge does 30-34; with B
// transposed it does 29-30 and mmLarge stays. Padding each k row of the
// workgroup tiles by a vec4 (the transposing store of A then meets 2 banks
// per address where it met 4) gained nothing: 32.4 against 36.2 at 4096,
// 20.2 double-buffered (bench/results/h200-2026-12-03-s7-sweep-padded.txt).
//
// mmSoft is the tiling of software adapters (SwiftShader, lavapipe), which
// run a few workgroups at a time on CPU cores: a K split for occupancy only
// adds a reduction, and more outputs per invocation win. On SwiftShader a
// 64x256x256 product took 3.2 ms with it and 14.7 ms with the GPU's plan
// (mmSmall, K in four parts); on lavapipe 1.2 and 1.7 ms. (Its vec4 kernel
// only, see pickMatmul.)
var (
	mmSoft  = mmCfg{BM: 64, BN: 64, BK: 16, TM: 8, TN: 8}
	mmWide  = mmCfg{BM: 128, BN: 64, BK: 16, TM: 8, TN: 8, DB: true}
	mmLarge = mmCfg{BM: 128, BN: 128, BK: 8, TM: 8, TN: 8}
	// mmTN is the tiling of large products laid out A stored transposed,
	// B not (see pickTN): 256 invocations of 8x8, K steps of 32.
	mmTN     = mmCfg{BM: 128, BN: 128, BK: 32, TM: 8, TN: 8}
	mmMedium = mmCfg{BM: 128, BN: 64, BK: 16, TM: 8, TN: 4}
	mmSmall  = mmCfg{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
	// mmTiny always fits (WebGPU guarantees 256 invocations, 16 KiB).
	mmTiny = mmCfg{BM: 32, BN: 32, BK: 8, TM: 4, TN: 4}
)

// mmPlan is how one matmul runs: a tiling and how many parts K is split
// into (1: none; else partial products are summed by a second kernel).
type mmPlan struct {
	cfg   mmCfg
	split int
	// tB: B (stored transposed) is copied transposed into scratch first
	// and the product runs as if B were not transposed.
	tB bool
	// tA: A (not stored transposed) is copied transposed into scratch
	// first and the product runs as if A were stored transposed.
	tA bool
}

const (
	largeGroups  = 200 // mmLarge (mmWide) from this many workgroups up
	mediumGroups = 120 // mmMedium from this many
	splitBelow   = 200 // split K below this many mmSmall workgroups
	splitTarget  = 512 // workgroups a split aims at
	splitMinK    = 64  // the least K extent of a part
	splitMax     = 16
	deepK        = 2048    // from this K, a product too small for the large tiles splits K instead
	deepMinK     = 512     // the least K extent of a part of such a split
	midMinRows   = 512     // a middle-sized product runs wide tiles from this many rows
	midGroups    = 256     // ... split until this many of them run
	midMinK      = 256     // ... in parts at least this deep
	tbMinRows    = 2048    // B stored transposed is transposed first from this many rows
	tnMin        = 1024    // mmTN for products with M, N and K from this
	tnWideN      = 2048    // ... A not stored transposed is transposed first from this N
	tnWork       = 1 << 32 // ... and this M*N*K
	tnGroups     = 128     // ... K split until this many tiles run
	tnMinK       = 512     // ... in parts at least this deep
)

// pickLarge is the large tiling for B stored transposed or not.
func pickLarge(info gpu.Info, transB bool) mmCfg {
	if !transB && mmWide.fits(info) {
		return mmWide
	}
	return mmLarge
}

// pickMatmul returns the plan for a batch of m x n x k products (A, B
// stored transposed: transA, transB) on a GPU (gpu) or a software adapter,
// the partial products of a split and the transposed copies of operands
// kept within maxPart bytes.
func pickMatmul(info gpu.Info, gpu bool, m, n, k, batch int, transA, transB bool, maxPart uint64) mmPlan {
	return pickMatmulTB(info, gpu, m, n, k, batch, transA, transB, maxPart, tbMinRows, true)
}

// pickMatmulTB is pickMatmul transposing B first from tbRows rows (never
// if tbRows < 0) and A only if taOK.
func pickMatmulTB(info gpu.Info, gpu bool, m, n, k, batch int, transA, transB bool, maxPart uint64, tbRows int, taOK bool) mmPlan {
	if !gpu {
		// The scalar kernel (a dimension not a multiple of 4) of mmSoft's
		// 8x8 blocks is a shader large enough that compiling it in
		// Chromium's SwiftShader lost the device; mmSmall's compiles.
		if m%4 == 0 && n%4 == 0 && k%4 == 0 && mmSoft.fits(info) {
			return mmPlan{cfg: mmSoft, split: 1}
		}
		if mmSmall.fits(info) {
			return mmPlan{cfg: mmSmall, split: 1}
		}
		return mmPlan{cfg: mmTiny, split: 1}
	}
	if pl, ok := pickTN(info, m, n, k, batch, transA, transB, maxPart, tbRows >= 0, taOK, false); ok {
		return pl
	}
	// B stored transposed ([N, K]: dX = dY W^T) loads both tiles along
	// K, which ran at 17-22 TFLOP/s at 4096^3 on an H200 against 36 for B
	// not transposed; transposing B first (8*N*K bytes of traffic against
	// 2*M*N*K flops: 2-4 per cent from M = 2048) did 34.7
	// (bench/results/h200-2026-12-03-s8a-sweep.txt). Inside the 4x1024
	// step at batch 4096 the program took 2.95 ms with it, 3.06 without;
	// from 1024 rows it lost (26.0 against 25.2 ms in the 8x4096 step at
	// batch 1024; s8c, s8e). The copy lives in a scratch buffer of its
	// own.
	if tbRows >= 0 && transB && m >= tbRows && uint64(batch*n*k)*4 <= maxPart {
		pl := pickMatmulTB(info, gpu, m, n, k, batch, transA, false, maxPart, tbRows, false)
		pl.tB = true
		return pl
	}
	groups := func(c mmCfg) int { return ((m + c.BM - 1) / c.BM) * ((n + c.BN - 1) / c.BN) * batch }
	big := pickLarge(info, transB)
	if big.fits(info) && groups(mmLarge) >= largeGroups {
		return mmPlan{cfg: big, split: 1}
	}
	// fill is the least split of K (a power of two) that runs at least
	// target tiles of c in parts at least minK deep, if there is one.
	fill := func(c mmCfg, target, minK int) (int, bool) {
		return fillSplit(groups(c), target, k, minK, m*n*batch, maxPart)
	}
	// Deep products with a small output (a weight gradient X^T dY over a
	// large batch): split K so that the large tiles fill the GPU, where
	// the medium tiles would leave it underused.
	if k >= deepK && big.fits(info) {
		if s, ok := fill(big, largeGroups, deepMinK); ok {
			return mmPlan{cfg: big, split: s}
		}
	}
	// Middle-sized products (a 1024-wide layer at batch 512-2048): wide
	// tiles, K split until about two waves of them run. At 1024^3 on an
	// H200 mmWide in two parts did 27.4 / 27.8 / 25.4 TFLOP/s (NN, TN, NT)
	// where mmMedium unsplit did 23.9 / 26.2 / 22.8; at 512x1024x1024 in
	// four parts 22.6 against 20.2 for mmSmall in four
	// (bench/results/h200-2026-12-03-s7c-sweep-skinny.txt). With fewer
	// rows wide tiles are mostly padding, and shallower parts lose.
	if m >= midMinRows && mmWide.fits(info) {
		if s, ok := fill(mmWide, midGroups, midMinK); ok {
			return mmPlan{cfg: mmWide, split: s}
		}
	}
	switch {
	case mmMedium.fits(info) && groups(mmMedium) >= mediumGroups:
		return mmPlan{cfg: mmMedium, split: 1}
	case !mmSmall.fits(info):
		return mmPlan{cfg: mmTiny, split: 1}
	}
	g := groups(mmSmall)
	s := 1
	if g < splitBelow {
		for s*2 <= splitMax && g*s*2 <= splitTarget && k/(s*2) >= splitMinK &&
			uint64(s*2)*uint64(m*n*batch)*4 <= maxPart {
			s *= 2
		}
	}
	return mmPlan{cfg: mmSmall, split: s}
}

// pickTN returns the plan of a large product as A stored transposed and B
// not, where it is one or its operands are worth transposing first (only
// A if taOK, only B if tbOK). In that layout both tiles are loaded along M
// and N and stored into workgroup memory as loaded, and mmTN's tiles ran
// at 40.3 TFLOP/s at 4096^3 on an H200 against 36.5 for the best of the
// other tilings, 36.2 NN (mmWide) and 28.6 NT; 38.0 against 35.0 at
// 2048^3, 39.3 against 35.7 at 1024x4096x4096 (M x K x N), 34.7 in four
// parts against 32.8 at 1024x4096x1024 (a weight gradient over a batch of
// 4096). The same tiles ran at 30.2 NN and 28.5 NT: not the tiling but the
// layout pays (bench/results/h200-2026-12-04-s14d-sweep-layouts.txt);
// swizzling the tiles so that the transposing stores of a tile loaded
// along K meet no bank conflicts brought them to 33.8 and 34.6, short of
// copying (h200-2026-12-04-s14f-sweep-swizzle.txt). Variants of mmTN's
// kernel lost 10-20%: a subgroup's invocations blocked 8x4 (its workgroup
// reads 128 bytes wide), no prefetch into registers (fewer live
// registers), a loop over the tile's K in steps of 8, and 128x128x16
// double-buffered (h200-2026-12-05-s17b-sweep-variants.txt).
// From 2^32 multiply-adds: at 1024^3 they did 28.6 in two parts against
// 27.8, which the 4x1024 step at batch 1024 did not show. A transposed
// copy of an R x K operand moves 8RK bytes at 2.0-2.8 TB/s, which costs
// about 76/C per cent of the product's time at 40 TFLOP/s, C the other
// operand's width: A not stored transposed is copied from N = 2048 (8% of
// 4096x1024x4096 NN gained, 1.5% lost at N = 1024), both operands of an
// NT product always (9% gained at 4096^3, 20% at 1024x4096x4096, about
// even at 4096x1024x1024). With all (tests) the sizes do not matter.
func pickTN(info gpu.Info, m, n, k, batch int, transA, transB bool, maxPart uint64, tbOK, taOK, all bool) (mmPlan, bool) {
	tA, tB := !transA, transB
	switch {
	case !mmTN.fits(info), tA && !taOK, tB && !tbOK:
		return mmPlan{}, false
	case tA && uint64(batch*m*k)*4 > maxPart, tB && uint64(batch*n*k)*4 > maxPart:
		return mmPlan{}, false
	case tA && tB && uint64(batch*(m+n)*k)*4+uint64(info.StorageAlign) > info.MaxBuffer:
		// both copies share the scratch buffer
		return mmPlan{}, false
	case all:
	case m < tnMin || n < tnMin || k < tnMin:
		return mmPlan{}, false
	case uint64(m)*uint64(n)*uint64(k) < tnWork:
		return mmPlan{}, false
	case tA && !tB && n < tnWideN:
		return mmPlan{}, false
	case !tA && tB && m < tnWideN:
		return mmPlan{}, false
	}
	s, _ := fillSplit(ceilDiv(m, mmTN.BM)*ceilDiv(n, mmTN.BN)*batch, tnGroups, k, tnMinK, m*n*batch, maxPart)
	return mmPlan{cfg: mmTN, split: s, tA: tA, tB: tB}, true
}

// fillSplit is the least split of K (a power of two, at most splitMax) that
// runs at least target workgroups of a product of tiles tiles, each part at
// least minK deep and the partial products (outs floats a part) within
// maxPart bytes; ok reports whether it reaches target.
func fillSplit(tiles, target, k, minK, outs int, maxPart uint64) (s int, ok bool) {
	s = 1
	for tiles*s < target && s*2 <= splitMax && k/(s*2) >= minK && uint64(s*2)*uint64(outs)*4 <= maxPart {
		s *= 2
	}
	return s, tiles*s >= target
}

// minSplit is the least number of parts K must be split into so that an
// invocation loops at most trips times, one K step of bk per iteration:
// longer products run as a split-K sum, whatever the tiling chose.
func minSplit(k, bk, trips int) int { return ceilDiv(ceilDiv(k, bk), trips) }

// splitK returns the K extent of each part: a multiple of the tile's BK
// (and so of 4), the parts covering k.
func splitK(k, s, bk int) int {
	kc := (k + s - 1) / s
	return (kc + bk - 1) / bk * bk
}

// epilogue is what a fused matmul applies to each result before storing it:
// extra read-only bindings (after P, A, B, Y) and WGSL functions ending in
// `fn epi(i: u32, acc: f32) -> f32`, i being the element's linear index in C.
type epilogue struct {
	binds []bindDecl
	fns   string
}

// matmulKernel2 generates the register-blocked matmul for one tiling and
// operand layout. Params [M, N, K, Kc, S, GX, GY, GZ]: the tiles form a
// GX x GY x GZ grid (GX = ceil(N/BN), GY = ceil(M/BM), GZ = batch*S),
// numbered x fastest and dispatched folded into the two dimensions of
// linear workgroup ids, so none of the three is bounded by
// maxComputeWorkgroupsPerDimension. With S > 1 tile z = b*S + s multiplies
// K range [s*Kc, s*Kc+Kc) of batch b and stores that partial product as
// matrix z of Y (epi must be nil: the reduction applies it).
//
// half (shader-f16) stages the tiles in workgroup memory as f16: for
// operands whose values are all f16 values (the matmul precision switch's
// RoundF16), so the conversion is exact. Products and sums stay f32, each
// product of two f16 values is exact in f32, and the order of the sums is
// the same: the result is bit for bit that of the f32 tiles, with half the
// workgroup memory traffic.
func matmulKernel2(c mmCfg, transA, transB, vec, half bool, epi *epilogue) *kernel {
	U := 1 // elements per global load
	if vec {
		U = 4
	}
	th := c.threads()
	TX, TY := c.BN/c.TN, c.BM/c.TM
	scal, tile := "f32", "vec4<f32>" // workgroup memory's element and vec4
	if half {
		scal, tile = "f16", "vec4<f16>"
	}
	RM, RN := c.TM/4, c.TN/4
	qA, qB := c.BK*c.BM/4, c.BK*c.BN/4 // vec4s of one A (B) tile
	var w strings.Builder
	pr := func(f string, a ...any) { fmt.Fprintf(&w, f, a...) }

	// loads: the global loads of one tile into registers ra<l> / rb<l>, and
	// the stores of those registers into workgroup memory at buffer offset.
	type operand struct {
		name, reg    string
		contigK      bool // the stored operand is contiguous along K
		rows         int  // BM or BN: the tile's extent along M (N)
		rowsName     string
		base         string // batch offset
		dimName      string // M or N
		strideOuterK string // stride of a K step when !contigK (M or N)
		off0         string // m0 or n0
	}
	A := operand{name: "A", reg: "ra", contigK: !transA, rows: c.BM, base: "aOff", dimName: "M", off0: "m0"}
	B := operand{name: "B", reg: "rb", contigK: transB, rows: c.BN, base: "bOff", dimName: "N", off0: "n0"}
	units := func(o operand) int { return o.rows * c.BK / U }
	perThread := func(o operand) int { return (units(o) + th - 1) / th }
	regType := "f32"
	zero := "0.0"
	if vec {
		regType, zero = "vec4<f32>", "vec4<f32>(0.0)"
	}
	loadCode := func(o operand, k0 string) string {
		var b strings.Builder
		n := perThread(o)
		arrName := o.name
		if vec {
			arrName += "4"
		}
		for l := 0; l < n; l++ {
			fmt.Fprintf(&b, "\t\t{ let e = lid + %du;\n", l*th)
			guard := ""
			if (l+1)*th > units(o) {
				guard = "e < " + fmt.Sprint(units(o)) + "u && "
			}
			if o.contigK {
				// e -> (row r of the tile, unit q along K)
				per := c.BK / U
				fmt.Fprintf(&b, "\t\t  let r = e / %du; let q = e %% %du;\n", per, per)
				fmt.Fprintf(&b, "\t\t  %s%d = %s;\n", o.reg, l, zero)
				fmt.Fprintf(&b, "\t\t  if (%s%s + r < %s && %s + q * %du < kEnd) { %s%d = %s[(%s + (%s + r) * K + %s + q * %du) / %du]; } }\n",
					guard, o.off0, o.dimName, k0, U, o.reg, l, arrName, o.base, o.off0, k0, U, U)
			} else {
				per := o.rows / U
				fmt.Fprintf(&b, "\t\t  let r = e / %du; let q = e %% %du;\n", per, per)
				fmt.Fprintf(&b, "\t\t  %s%d = %s;\n", o.reg, l, zero)
				fmt.Fprintf(&b, "\t\t  if (%s%s + r < kEnd && %s + q * %du < %s) { %s%d = %s[(%s + (%s + r) * %s + %s + q * %du) / %du]; } }\n",
					guard, k0, o.off0, U, o.dimName, o.reg, l, arrName, o.base, k0, o.dimName, o.off0, U, U)
			}
		}
		return b.String()
	}
	storeCode := func(o operand, sh string, buf string) string {
		var b strings.Builder
		n := perThread(o)
		q4 := o.rows / 4 // vec4s per k row of the tile
		for l := 0; l < n; l++ {
			fmt.Fprintf(&b, "\t\t{ let e = lid + %du;\n", l*th)
			open := ""
			if (l+1)*th > units(o) {
				open = fmt.Sprintf("if (e < %du) ", units(o))
			}
			if o.contigK {
				per := c.BK / U
				fmt.Fprintf(&b, "\t\t  let r = e / %du; let q = e %% %du;\n", per, per)
				if vec {
					fmt.Fprintf(&b, "\t\t  %s{\n", open)
					for cc := 0; cc < 4; cc++ {
						fmt.Fprintf(&b, "\t\t    %s[%s + (q * 4u + %du) * %du + r / 4u][r %% 4u] = %s(%s%d[%d]);\n", sh, buf, cc, q4, scal, o.reg, l, cc)
					}
					b.WriteString("\t\t  } }\n")
				} else {
					fmt.Fprintf(&b, "\t\t  %s{ %s[%s + q * %du + r / 4u][r %% 4u] = %s(%s%d); } }\n", open, sh, buf, q4, scal, o.reg, l)
				}
			} else {
				per := o.rows / U
				fmt.Fprintf(&b, "\t\t  let r = e / %du; let q = e %% %du;\n", per, per)
				if vec {
					fmt.Fprintf(&b, "\t\t  %s{ %s[%s + r * %du + q] = %s(%s%d); } }\n", open, sh, buf, q4, tile, o.reg, l)
				} else {
					fmt.Fprintf(&b, "\t\t  %s{ %s[%s + r * %du + q / 4u][q %% 4u] = %s(%s%d); } }\n", open, sh, buf, q4, scal, o.reg, l)
				}
			}
		}
		return b.String()
	}
	computeCode := func(bufA, bufB string) string {
		var b strings.Builder
		for kk := 0; kk < c.BK; kk++ {
			b.WriteString("\t\t{\n")
			for q := 0; q < RM; q++ {
				fmt.Fprintf(&b, "\t\t  let a%d = vec4<f32>(As[%s + %du + ty + %du]);\n", q, bufA, kk*c.BM/4, q*TY)
			}
			for q := 0; q < RN; q++ {
				fmt.Fprintf(&b, "\t\t  let b%d = vec4<f32>(Bs[%s + %du + tx + %du]);\n", q, bufB, kk*c.BN/4, q*TX)
			}
			for qa := 0; qa < RM; qa++ {
				for j := 0; j < 4; j++ {
					for qb := 0; qb < RN; qb++ {
						v := fmt.Sprintf("c%d_%d", qa*4+j, qb)
						fmt.Fprintf(&b, "\t\t  %s = fma(vec4<f32>(a%d[%d]), b%d, %s);\n", v, qa, j, qb, v)
					}
				}
			}
			b.WriteString("\t\t}\n")
		}
		return b.String()
	}

	pr("const BK = %du;\n", c.BK)
	nbuf := 1
	if c.DB {
		nbuf = 2
	}
	pr("var<workgroup> As: array<%s, %d>;\n", tile, nbuf*qA)
	pr("var<workgroup> Bs: array<%s, %d>;\n", tile, nbuf*qB)
	if epi != nil {
		w.WriteString(epi.fns)
	}
	pr("@compute @workgroup_size(%d)\n", th)
	pr("fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n")
	// The tile (wx, wy, wz) of the linear workgroup id; the folded grid
	// may hold more workgroups than tiles.
	pr("\tlet M = P[0]; let N = P[1]; let K = P[2]; let Kc = P[3]; let S = P[4];\n")
	pr("\tlet t = wid.y * nwg.x + wid.x; let gxy = P[5] * P[6];\n")
	pr("\tif (t >= gxy * P[7]) { return; }\n")
	pr("\tlet wz = t / gxy; let wy = (t %% gxy) / P[5]; let wx = t %% P[5];\n")
	// Split along K (S > 1): tile z = batch*S + s multiplies the K range
	// [s*Kc, s*Kc+Kc) and writes its partial product at z.
	pr("\tlet bz = wz / S; let kBeg = (wz %% S) * Kc; let kEnd = min(K, kBeg + Kc);\n")
	pr("\tlet aOff = bz * M * K; let bOff = bz * K * N; let cOff = wz * M * N;\n")
	pr("\tlet m0 = wy * %du; let n0 = wx * %du;\n", c.BM, c.BN)
	pr("\tlet tx = lid %% %du; let ty = lid / %du;\n", TX, TX)
	for r := 0; r < c.TM; r++ {
		for q := 0; q < RN; q++ {
			pr("\tvar c%d_%d = vec4<f32>(0.0);\n", r, q)
		}
	}
	for l := 0; l < perThread(A); l++ {
		pr("\tvar ra%d: %s;\n", l, regType)
	}
	for l := 0; l < perThread(B); l++ {
		pr("\tvar rb%d: %s;\n", l, regType)
	}
	w.WriteString(loadCode(A, "kBeg"))
	w.WriteString(loadCode(B, "kBeg"))
	if c.DB {
		w.WriteString(storeCode(A, "As", "0u"))
		w.WriteString(storeCode(B, "Bs", "0u"))
		w.WriteString("\tworkgroupBarrier();\n")
		w.WriteString("\tvar cur = 0u;\n")
		w.WriteString("\tfor (var k0 = kBeg; k0 < kEnd; k0 = k0 + BK) {\n")
		w.WriteString("\t\tlet more = k0 + BK < kEnd;\n")
		w.WriteString("\t\tif (more) {\n")
		w.WriteString(loadCode(A, "k0 + BK"))
		w.WriteString(loadCode(B, "k0 + BK"))
		w.WriteString("\t\t}\n")
		pr("\t\tlet oa = cur * %du; let ob = cur * %du;\n", qA, qB)
		w.WriteString(computeCode("oa", "ob"))
		w.WriteString("\t\tif (more) {\n")
		pr("\t\tlet na = (1u - cur) * %du; let nb = (1u - cur) * %du;\n", qA, qB)
		w.WriteString(storeCode(A, "As", "na"))
		w.WriteString(storeCode(B, "Bs", "nb"))
		w.WriteString("\t\t}\n")
		w.WriteString("\t\tworkgroupBarrier();\n")
		w.WriteString("\t\tcur = 1u - cur;\n")
		w.WriteString("\t}\n")
	} else {
		w.WriteString("\tfor (var k0 = kBeg; k0 < kEnd; k0 = k0 + BK) {\n")
		w.WriteString(storeCode(A, "As", "0u"))
		w.WriteString(storeCode(B, "Bs", "0u"))
		w.WriteString("\t\tworkgroupBarrier();\n")
		w.WriteString("\t\tif (k0 + BK < kEnd) {\n")
		w.WriteString(loadCode(A, "k0 + BK"))
		w.WriteString(loadCode(B, "k0 + BK"))
		w.WriteString("\t\t}\n")
		w.WriteString(computeCode("0u", "0u"))
		w.WriteString("\t\tworkgroupBarrier();\n")
		w.WriteString("\t}\n")
	}
	// Store: rows (ty + qa*TY)*4 + j, columns (tx + qb*TX)*4 .. +3.
	for qa := 0; qa < RM; qa++ {
		for j := 0; j < 4; j++ {
			r := qa*4 + j
			pr("\t{ let row = m0 + (ty + %du) * 4u + %du;\n", qa*TY, j)
			pr("\t  if (row < M) {\n")
			for qb := 0; qb < RN; qb++ {
				v := fmt.Sprintf("c%d_%d", r, qb)
				pr("\t    { let col = n0 + (tx + %du) * 4u; let i = cOff + row * N + col;\n", qb*TX)
				switch {
				case vec && epi == nil:
					pr("\t      if (col < N) { Y4[i / 4u] = %s; } }\n", v)
				case vec:
					pr("\t      if (col < N) { Y4[i / 4u] = vec4<f32>(epi(i, %s.x), epi(i + 1u, %s.y), epi(i + 2u, %s.z), epi(i + 3u, %s.w)); } }\n", v, v, v, v)
				default:
					e := func(k int) string {
						if epi == nil {
							return fmt.Sprintf("%s[%d]", v, k)
						}
						return fmt.Sprintf("epi(i + %du, %s[%d])", k, v, k)
					}
					for k := 0; k < 4; k++ {
						pr("\t      if (col + %du < N) { Y[i + %du] = %s; }\n", k, k, e(k))
					}
					pr("\t    }\n")
				}
			}
			pr("\t  }\n\t}\n")
		}
	}
	w.WriteString("}\n")

	binds := []bindDecl{{name: "A"}, {name: "B"}, {name: "Y", rw: true}}
	if vec {
		binds = []bindDecl{{name: "A4", vec4: true}, {name: "B4", vec4: true}, {name: "Y4", rw: true, vec4: true}}
	}
	name := fmt.Sprintf("matmul_%s_%t_%t", c, transA, transB)
	if half {
		name += "_f16"
	}
	if epi != nil {
		binds = append(binds, epi.binds...)
		name += "_fused"
	}
	k := newKernel(name, binds, w.String())
	if half {
		k.src = f16Enable + k.src
	}
	return k
}
