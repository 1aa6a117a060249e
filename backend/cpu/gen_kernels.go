//go:build ignore

// gen_kernels writes kernels_amd64.s: the register-tiled f32 matmul
// micro-kernels (AVX-512 and AVX2+FMA) that gemm.go drives. Generated rather
// than hand-written because each kernel is a fully unrolled MR x NR tile and
// a typo in one of dozens of near-identical lines would be silent.
//
//	go run gen_kernels.go
package main

import (
	"bytes"
	"fmt"
	"os"
)

// kernel describes one micro-kernel: C[MR x NR] (+)= A[MR x kc] * B[kc x NR],
// A packed k-major (MR floats per k), B rows ldb floats apart.
type kernel struct {
	name   string
	mr     int    // rows of the tile
	vecs   int    // vector registers per row (NR = vecs*lanes)
	lanes  int    // floats per vector register
	reg    string // register prefix: "Z" or "Y"
	unroll int    // k steps per loop iteration
	rowA   bool   // A read in place: row r at a + r*lda (else packed)
}

func (k kernel) nr() int { return k.vecs * k.lanes }

// accReg returns the accumulator register for tile row r, vector v. X15 is
// the ABIInternal zero register: the ABI0 wrapper restores it, but we leave
// it alone anyway. AVX2 has only 16 registers (Y16+ need AVX-512's EVEX
// encoding), so its kernels use one A register and Y3..Y14; AVX-512 ones
// alternate two A registers and start at Z4, skipping Z15.
func (k kernel) accReg(r, v int) string {
	if k.reg == "Y" {
		return fmt.Sprintf("Y%d", 3+r*k.vecs+v)
	}
	i := 4 + r*k.vecs + v
	if i >= 15 {
		i++
	}
	return fmt.Sprintf("%s%d", k.reg, i)
}

// aReg is the register A values are broadcast into for tile row r.
func (k kernel) aReg(r int) string {
	if k.reg == "Y" {
		return "Y2"
	}
	return fmt.Sprintf("Z%d", 2+r%2)
}

func (k kernel) gen(b *bytes.Buffer) {
	if n := 3 + k.mr*k.vecs; k.reg == "Y" && n > 15 {
		panic(fmt.Sprintf("%s needs %d Y registers", k.name, n))
	}
	vb := k.lanes * 4 // bytes per vector
	if k.rowA {
		fmt.Fprintf(b, "// func %s(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, accum int)\n", k.name)
		fmt.Fprintf(b, "// C[%d x %d] = (accum ? C : 0) + A*B over kc steps, A rows lda floats apart.\n", k.mr, k.nr())
		fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", k.name)
		b.WriteString("\tMOVQ kc+0(FP), CX\n\tMOVQ a+8(FP), AX\n\tMOVQ lda+16(FP), R10\n\tSHLQ $2, R10\n")
		b.WriteString("\tMOVQ b+24(FP), BX\n\tMOVQ ldb+32(FP), R8\n\tSHLQ $2, R8\n")
		b.WriteString("\tMOVQ c+40(FP), DX\n\tMOVQ ldc+48(FP), R9\n\tSHLQ $2, R9\n")
		// R11 = 3*lda; R12, R13 = rows 4 and 8.
		b.WriteString("\tLEAQ (R10)(R10*2), R11\n\tLEAQ (AX)(R10*4), R12\n\tLEAQ (R12)(R10*4), R13\n")
	} else {
		fmt.Fprintf(b, "// func %s(kc int, a, b *float32, ldb int, c *float32, ldc int, accum int)\n", k.name)
		fmt.Fprintf(b, "// C[%d x %d] = (accum ? C : 0) + A*B over kc steps.\n", k.mr, k.nr())
		fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-56\n", k.name)
		b.WriteString("\tMOVQ kc+0(FP), CX\n\tMOVQ a+8(FP), AX\n\tMOVQ b+16(FP), BX\n\tMOVQ ldb+24(FP), R8\n\tSHLQ $2, R8\n")
		b.WriteString("\tMOVQ c+32(FP), DX\n\tMOVQ ldc+40(FP), R9\n\tSHLQ $2, R9\n")
	}
	for r := 0; r < k.mr; r++ {
		for v := 0; v < k.vecs; v++ {
			a := k.accReg(r, v)
			fmt.Fprintf(b, "\tVXORPS %s, %s, %s\n", a, a, a)
		}
	}
	step := func(bcast int) {
		for v := 0; v < k.vecs; v++ {
			fmt.Fprintf(b, "\tVMOVUPS %d(BX), %s%d\n", v*vb, k.reg, v)
		}
		b.WriteString("\tADDQ R8, BX\n")
		for r := 0; r < k.mr; r++ {
			areg := k.aReg(r)
			if k.rowA { // bcast counts k steps here
				base := [...]string{"AX", "R12", "R13"}[r/4]
				idx := [...]string{"", "(R10*1)", "(R10*2)", "(R11*1)"}[r%4]
				fmt.Fprintf(b, "\tVBROADCASTSS %d(%s)%s, %s\n", 4*bcast, base, idx, areg)
			} else {
				fmt.Fprintf(b, "\tVBROADCASTSS %d(AX), %s\n", 4*(bcast+r), areg)
			}
			for v := 0; v < k.vecs; v++ {
				fmt.Fprintf(b, "\tVFMADD231PS %s, %s%d, %s\n", areg, k.reg, v, k.accReg(r, v))
			}
		}
	}
	// Unrolled main loop, then a remainder loop of single k steps.
	fmt.Fprintf(b, "\tCMPQ CX, $%d\n\tJLT %s_tail\n", k.unroll, k.name)
	fmt.Fprintf(b, "%s_loop:\n", k.name)
	perStep := k.mr // floats of A consumed per k step
	if k.rowA {
		perStep = 1
	}
	advance := func(steps int) {
		fmt.Fprintf(b, "\tADDQ $%d, AX\n", 4*perStep*steps)
		if k.rowA {
			fmt.Fprintf(b, "\tADDQ $%d, R12\n\tADDQ $%d, R13\n", 4*steps, 4*steps)
		}
	}
	for u := 0; u < k.unroll; u++ {
		step(u * perStep)
	}
	advance(k.unroll)
	fmt.Fprintf(b, "\tSUBQ $%d, CX\n\tCMPQ CX, $%d\n\tJGE %s_loop\n", k.unroll, k.unroll, k.name)
	fmt.Fprintf(b, "%s_tail:\n\tTESTQ CX, CX\n\tJEQ %s_store\n", k.name, k.name)
	step(0)
	advance(1)
	fmt.Fprintf(b, "\tDECQ CX\n\tJMP %s_tail\n", k.name)
	accOff := 48
	if k.rowA {
		accOff = 56
	}
	fmt.Fprintf(b, "%s_store:\n\tMOVQ accum+%d(FP), R10\n\tTESTQ R10, R10\n\tJEQ %s_put\n", k.name, accOff, k.name)
	b.WriteString("\tMOVQ DX, R11\n")
	for r := 0; r < k.mr; r++ {
		for v := 0; v < k.vecs; v++ {
			a := k.accReg(r, v)
			fmt.Fprintf(b, "\tVADDPS %d(R11), %s, %s\n", v*vb, a, a)
		}
		if r < k.mr-1 {
			b.WriteString("\tADDQ R9, R11\n")
		}
	}
	fmt.Fprintf(b, "%s_put:\n", k.name)
	for r := 0; r < k.mr; r++ {
		for v := 0; v < k.vecs; v++ {
			fmt.Fprintf(b, "\tVMOVUPS %s, %d(DX)\n", k.accReg(r, v), v*vb)
		}
		if r < k.mr-1 {
			b.WriteString("\tADDQ R9, DX\n")
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n\n")
}

func main() {
	var b bytes.Buffer
	b.WriteString("// Code generated by gen_kernels.go; DO NOT EDIT.\n\n//go:build amd64 && !purego\n\n#include \"textflag.h\"\n\n")
	for _, k := range []kernel{
		{name: "kernAVX512_12x32", mr: 12, vecs: 2, lanes: 16, reg: "Z", unroll: 4},
		{name: "kernAVX2_6x16", mr: 6, vecs: 2, lanes: 8, reg: "Y", unroll: 4},
		{name: "kernAVX512_12x32ra", mr: 12, vecs: 2, lanes: 16, reg: "Z", unroll: 4, rowA: true},
		{name: "kernAVX2_6x16ra", mr: 6, vecs: 2, lanes: 8, reg: "Y", unroll: 4, rowA: true},
	} {
		k.gen(&b)
	}
	if err := os.WriteFile("kernels_amd64.s", b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
