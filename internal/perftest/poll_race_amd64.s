//go:build race

#include "textflag.h"

// func rawLoadByte(p *byte) byte
TEXT ·rawLoadByte(SB), NOSPLIT, $0-9
	MOVQ p+0(FP), AX
	MOVB (AX), AX
	MOVB AX, ret+8(FP)
	RET
