//go:build amd64 && !purego

#include "textflag.h"

// TRANSPOSE4 transposes rows r0..r3 (16 columns each) and stores them at
// column offsets of 48 bytes, plus off bytes for the group's rows.
#define TRANSPOSE4(r0, r1, r2, r3, off) \
	VUNPCKLPS r1, r0, Z12; \
	VUNPCKHPS r1, r0, Z13; \
	VUNPCKLPS r3, r2, Z14; \
	VUNPCKHPS r3, r2, Z20; \
	VUNPCKLPD Z14, Z12, Z16; \
	VUNPCKHPD Z14, Z12, Z17; \
	VUNPCKLPD Z20, Z13, Z18; \
	VUNPCKHPD Z20, Z13, Z19; \
	VMOVUPS X16, 0+off(DX); \
	VEXTRACTF32X4 $1, Z16, 192+off(DX); \
	VEXTRACTF32X4 $2, Z16, 384+off(DX); \
	VEXTRACTF32X4 $3, Z16, 576+off(DX); \
	VMOVUPS X17, 48+off(DX); \
	VEXTRACTF32X4 $1, Z17, 240+off(DX); \
	VEXTRACTF32X4 $2, Z17, 432+off(DX); \
	VEXTRACTF32X4 $3, Z17, 624+off(DX); \
	VMOVUPS X18, 96+off(DX); \
	VEXTRACTF32X4 $1, Z18, 288+off(DX); \
	VEXTRACTF32X4 $2, Z18, 480+off(DX); \
	VEXTRACTF32X4 $3, Z18, 672+off(DX); \
	VMOVUPS X19, 144+off(DX); \
	VEXTRACTF32X4 $1, Z19, 336+off(DX); \
	VEXTRACTF32X4 $2, Z19, 528+off(DX); \
	VEXTRACTF32X4 $3, Z19, 720+off(DX)

// func packT12x16(n int, src *float32, rs int, dst *float32)
// Packs 12 rows, rs floats apart, of n (a positive multiple of 16) columns:
// dst[p*12 + r] = src[r*rs + p]. Per 16 columns, each group of four rows is
// transposed in registers (two rounds of unpacks leave, in each 128-bit
// lane j of U0..U3, the four rows of column 4j+i) and stored 16 bytes at a
// time: lane j of Ui goes to column 4j+i, row offset 4*group.
TEXT ·packT12x16(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ src+8(FP), SI
	MOVQ rs+16(FP), R8
	SHLQ $2, R8
	MOVQ dst+24(FP), DX
	LEAQ (R8)(R8*2), R9   // 3 rows
	LEAQ (SI)(R8*4), R10  // row 4
	LEAQ (R10)(R8*4), R11 // row 8
	SHRQ $4, CX
loop:
	VMOVUPS (SI), Z0
	VMOVUPS (SI)(R8*1), Z1
	VMOVUPS (SI)(R8*2), Z2
	VMOVUPS (SI)(R9*1), Z3
	VMOVUPS (R10), Z4
	VMOVUPS (R10)(R8*1), Z5
	VMOVUPS (R10)(R8*2), Z6
	VMOVUPS (R10)(R9*1), Z7
	VMOVUPS (R11), Z8
	VMOVUPS (R11)(R8*1), Z9
	VMOVUPS (R11)(R8*2), Z10
	VMOVUPS (R11)(R9*1), Z11
	TRANSPOSE4(Z0, Z1, Z2, Z3, 0)
	TRANSPOSE4(Z4, Z5, Z6, Z7, 16)
	TRANSPOSE4(Z8, Z9, Z10, Z11, 32)
	ADDQ $64, SI
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $768, DX // 16 columns of 12 floats
	DECQ CX
	JNZ loop
	VZEROUPPER
	RET

// func packCopy(n int, src *float32, ss int, dst *float32, ds int, masks uint64)
// Copies n rows of up to 32 floats, ss floats apart, to rows ds floats
// apart: masks' low 32 bits select the floats read, its high 32 bits those
// written (the written ones not read are zeroed). Masked lanes are not
// accessed, so the rows may end anywhere.
TEXT ·packCopy(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ src+8(FP), SI
	MOVQ ss+16(FP), R8
	SHLQ $2, R8
	MOVQ dst+24(FP), DX
	MOVQ ds+32(FP), R9
	SHLQ $2, R9
	MOVQ masks+40(FP), AX
	KMOVW AX, K1
	SHRQ $16, AX
	KMOVW AX, K2
	SHRQ $16, AX
	KMOVW AX, K3
	SHRQ $16, AX
	KMOVW AX, K4
copy:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z 64(SI), K2, Z1
	VMOVUPS Z0, K3, (DX)
	VMOVUPS Z1, K4, 64(DX)
	ADDQ R8, SI
	ADDQ R9, DX
	DECQ CX
	JNZ copy
	VZEROUPPER
	RET
