package cpu

// microKernel computes one register tile: C[mr x nr] = (accum ? C : 0) +
// A*B over kc steps, with A packed (mr floats per k step), B rows ldb floats
// apart and C rows ldc floats apart.
type microKernel struct {
	name   string
	mr, nr int
	fn     func(kc int, a, b []float32, ldb int, c []float32, ldc int, accum bool)
	// fnRA is fn reading A in place (row r at a[r*lda:]); nil if absent.
	fnRA func(kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accum bool)
	// block, when set, computes every tile of a block in one call (the wasm
	// SIMD kernel, whose calls cost a microsecond each); the GEMM then calls
	// it instead of fn and fnRA.
	block func(*blockCall)
	// Blocking: kc steps per packed panel (the B micro-panel kc x nr stays in
	// L1), mc rows per packed A block (L2), nc columns per packed B block.
	kc, mc, nc int
}

// blockCall is one call of a block kernel: C = (accum ? C : 0) + A*B over
// kc steps for every mr x nr tile of a rows x cols block of C. Strides
// count floats. A tile's rows past the block come from A rows that exist
// (packed, zero-padded) or are not read (see simdgen_js.go); B is read nr
// columns wide per tile.
type blockCall struct {
	kc            int
	a             []float32 // A(i, p) = a[(i/mr)*aps + (i%mr)*ars + p*aks]
	ars, aks, aps int
	rows          int
	b             []float32 // B(p, j) = b[(j/nr)*bps + p*ldb + j%nr]
	ldb, bps      int
	cols          int
	c             []float32 // C(i, j) = c[i*crs + j*ccs]
	crs, ccs      int
	accum         bool
	tile          []float32 // mr*nr floats of scratch
}

// kern is the micro-kernel used by every matmul; selected at start-up by
// kernels_*.go (the best the CPU supports) and switched by tests.
var kern = bestKernel()

// kernelName names the running kernel, and why it is the portable one
// where this platform has a faster one it could not use.
func kernelName() string {
	if kern.name == goKernel.name && fallbackWhy != "" {
		return kern.name + " (" + fallbackWhy + ")"
	}
	return kern.name
}

// fallbackWhy says why the best kernel of this platform cannot run here, or
// is "" (set by kernels_js.go).
var fallbackWhy string

// goKernel is the portable micro-kernel (wasm, -tags purego, CPUs without
// the assembly kernels): 4x3 accumulators, 24 flops per 7 loads. Go's wasm
// port has 16 float registers; 12 accumulators, three B values and one A
// value fill them, while 4x4's 16 accumulators spilled to linear memory:
// in Node (V8) 4.8 against 3.8 GFLOP/s at 512 (`GOOS=js GOARCH=wasm go test
// -exec=$(go env GOROOT)/lib/wasm/go_js_wasm_exec -bench MatMul
// ./backend/cpu/`); natively (amd64, -tags purego) the two are equal.
var goKernel = microKernel{name: "go-4x3", mr: 4, nr: 3, fn: kernGo4x3, kc: 256, mc: 64, nc: 1020}

func kernGo4x3(kc int, a, b []float32, ldb int, c []float32, ldc int, accum bool) {
	a = a[:4*kc]
	_ = b[(kc-1)*ldb+2]
	_ = c[3*ldc+2]
	var c00, c01, c02, c10, c11, c12, c20, c21, c22, c30, c31, c32 float32
	for k := 0; k < kc; k++ {
		ak := a[4*k : 4*k+4 : 4*k+4]
		bk := b[k*ldb : k*ldb+3 : k*ldb+3]
		b0, b1, b2 := bk[0], bk[1], bk[2]
		// One A value live at a time keeps the loop within 16 registers.
		a0 := ak[0]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		a1 := ak[1]
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		a2 := ak[2]
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		a3 := ak[3]
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
	}
	// Row by row: four rows' accumulators and slices live at once made Go's
	// wasm register allocator spill inside the loop (15% slower).
	r0 := c[0:3:3]
	if accum {
		c00, c01, c02 = c00+r0[0], c01+r0[1], c02+r0[2]
	}
	r0[0], r0[1], r0[2] = c00, c01, c02
	r1 := c[ldc : ldc+3 : ldc+3]
	if accum {
		c10, c11, c12 = c10+r1[0], c11+r1[1], c12+r1[2]
	}
	r1[0], r1[1], r1[2] = c10, c11, c12
	r2 := c[2*ldc : 2*ldc+3 : 2*ldc+3]
	if accum {
		c20, c21, c22 = c20+r2[0], c21+r2[1], c22+r2[2]
	}
	r2[0], r2[1], r2[2] = c20, c21, c22
	r3 := c[3*ldc : 3*ldc+3 : 3*ldc+3]
	if accum {
		c30, c31, c32 = c30+r3[0], c31+r3[1], c32+r3[2]
	}
	r3[0], r3[1], r3[2] = c30, c31, c32
}
