//go:build amd64 && !purego

#include "textflag.h"

// func adamW16(n int, w, grad, m, v *float32, c *[9]float32)
// n is a multiple of 16; c holds the broadcast constants. Same order of
// operations, so the same rounding, as the scalar loop of adamW in optim.go:
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
//   w = w*decay - lr*(m*bc1) / (sqrt(v*bc2) + eps)
// c layout: 0 b1, 1 1-b1, 2 b2, 3 1-b2, 4 bc2, 5 eps, 6 decay, 7 lr, 8 bc1.
TEXT ·adamW16(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ w+8(FP), DI
	MOVQ grad+16(FP), SI
	MOVQ m+24(FP), R8
	MOVQ v+32(FP), R9
	MOVQ c+40(FP), AX
	VBROADCASTSS 0(AX), Z20
	VBROADCASTSS 4(AX), Z21
	VBROADCASTSS 8(AX), Z22
	VBROADCASTSS 12(AX), Z23
	VBROADCASTSS 16(AX), Z24
	VBROADCASTSS 20(AX), Z25
	VBROADCASTSS 24(AX), Z26
	VBROADCASTSS 28(AX), Z27
	VBROADCASTSS 32(AX), Z28
	XORQ BX, BX
adam_loop:
	CMPQ BX, CX
	JGE adam_done
	VMOVUPS (SI)(BX*4), Z0
	VMOVUPS (R8)(BX*4), Z1
	VMOVUPS (R9)(BX*4), Z2
	VMOVUPS (DI)(BX*4), Z3
	VMULPS Z20, Z1, Z1
	VMULPS Z21, Z0, Z4
	VADDPS Z4, Z1, Z1     // m = b1*m + (1-b1)*g
	VMULPS Z22, Z2, Z2
	VMULPS Z23, Z0, Z4
	VMULPS Z0, Z4, Z4
	VADDPS Z4, Z2, Z2     // v = b2*v + (1-b2)*g*g
	VMOVUPS Z1, (R8)(BX*4)
	VMOVUPS Z2, (R9)(BX*4)
	VMULPS Z24, Z2, Z5
	VSQRTPS Z5, Z5
	VADDPS Z25, Z5, Z5    // den = sqrt(v*bc2) + eps
	VMULPS Z28, Z1, Z6
	VMULPS Z27, Z6, Z6
	VDIVPS Z5, Z6, Z6     // lr*(m*bc1) / den
	VMULPS Z26, Z3, Z3
	VSUBPS Z6, Z3, Z3     // w*decay - ...
	VMOVUPS Z3, (DI)(BX*4)
	ADDQ $16, BX
	JMP adam_loop
adam_done:
	VZEROUPPER
	RET
