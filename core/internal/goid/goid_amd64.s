#include "textflag.h"

// func getg() uintptr: the address of the running goroutine's g (TLS slot).
TEXT ·getg(SB),NOSPLIT,$0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
