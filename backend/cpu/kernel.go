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
	// Blocking: kc steps per packed panel (the B micro-panel kc x nr stays in
	// L1), mc rows per packed A block (L2), nc columns per packed B block.
	kc, mc, nc int
}

// kern is the micro-kernel used by every matmul; selected at start-up by
// kernels_*.go (the best the CPU supports) and switched by tests.
var kern = bestKernel()

func kernelName() string { return kern.name }

// goKernel is the portable micro-kernel: 4x4 accumulators that the compiler
// keeps in registers (or wasm locals), 16 multiply-adds per 8 loads.
var goKernel = microKernel{name: "go-4x4", mr: 4, nr: 4, fn: kernGo4x4, kc: 256, mc: 64, nc: 1024}

func kernGo4x4(kc int, a, b []float32, ldb int, c []float32, ldc int, accum bool) {
	a = a[:4*kc]
	_ = b[(kc-1)*ldb+3]
	_ = c[3*ldc+3]
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	for k := 0; k < kc; k++ {
		ak := a[4*k : 4*k+4 : 4*k+4]
		bk := b[k*ldb : k*ldb+4 : k*ldb+4]
		a0, a1, a2, a3 := ak[0], ak[1], ak[2], ak[3]
		b0, b1, b2, b3 := bk[0], bk[1], bk[2], bk[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	r0 := c[0:4:4]
	r1 := c[ldc : ldc+4 : ldc+4]
	r2 := c[2*ldc : 2*ldc+4 : 2*ldc+4]
	r3 := c[3*ldc : 3*ldc+4 : 3*ldc+4]
	if accum {
		c00, c01, c02, c03 = c00+r0[0], c01+r0[1], c02+r0[2], c03+r0[3]
		c10, c11, c12, c13 = c10+r1[0], c11+r1[1], c12+r1[2], c13+r1[3]
		c20, c21, c22, c23 = c20+r2[0], c21+r2[1], c22+r2[2], c23+r2[3]
		c30, c31, c32, c33 = c30+r3[0], c31+r3[1], c32+r3[2], c33+r3[3]
	}
	r0[0], r0[1], r0[2], r0[3] = c00, c01, c02, c03
	r1[0], r1[1], r1[2], r1[3] = c10, c11, c12, c13
	r2[0], r2[1], r2[2], r2[3] = c20, c21, c22, c23
	r3[0], r3[1], r3[2], r3[3] = c30, c31, c32, c33
}
