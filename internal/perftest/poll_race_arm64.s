//go:build race

#include "textflag.h"

// func rawLoadByte(p *byte) byte
TEXT ·rawLoadByte(SB), NOSPLIT, $0-9
	MOVD p+0(FP), R0
	MOVBU (R0), R0
	MOVB R0, ret+8(FP)
	RET
