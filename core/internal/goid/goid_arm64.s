#include "textflag.h"

// func getg() uintptr: the address of the running goroutine's g (register g).
TEXT ·getg(SB),NOSPLIT,$0-8
	MOVD g, R0
	MOVD R0, ret+0(FP)
	RET
