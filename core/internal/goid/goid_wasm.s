#include "textflag.h"

// func getg() uintptr: the running goroutine's g (the wasm global g).
TEXT ·getg(SB),NOSPLIT,$0-8
	MOVD g, ret+0(FP)
	RET
