#include "textflag.h"

// func newlines(p []byte, out []int32) (n int, done int)
//
// 32 bytes a step with SSE2, which every amd64 has: compare each byte to
// '\n', and write the index of each match, in order, to out. Once out has
// room for fewer than 32 more it returns, unless it found none yet: then,
// as for the last bytes (fewer than 32), it goes a byte at a time until
// out is full.
TEXT ·newlines(SB), NOSPLIT, $0-64
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), CX
	MOVQ out_base+24(FP), DI
	MOVQ out_len+32(FP), R9
	XORQ R8, R8 // matches written
	XORQ DX, DX // bytes searched
	MOVQ $0x0a0a0a0a0a0a0a0a, AX
	MOVQ AX, X0
	PUNPCKLQDQ X0, X0

loop:
	LEAQ 32(DX), BX
	CMPQ BX, CX
	JA   tail
	LEAQ 32(R8), BX
	CMPQ BX, R9
	JA   full
	MOVOU (SI)(DX*1), X1
	MOVOU 16(SI)(DX*1), X2
	PCMPEQB X0, X1
	PCMPEQB X0, X2
	PMOVMSKB X1, AX
	PMOVMSKB X2, BX
	SHLL $16, BX
	ORL  BX, AX
	JZ   next

bits:
	BSFL AX, BX
	ADDL DX, BX
	MOVL BX, (DI)(R8*4)
	INCQ R8
	LEAL -1(AX), BX
	ANDL BX, AX
	JNZ  bits

next:
	ADDQ $32, DX
	JMP  loop

full:
	// Room for fewer than 32: return what was found, or, with nothing
	// found yet, go on a byte at a time.
	TESTQ R8, R8
	JNZ  stop

tail:
	CMPQ DX, CX
	JAE  stop
	CMPQ R8, R9
	JAE  stop
	MOVBLZX (SI)(DX*1), AX
	CMPB AL, $0x0a
	JNE  tailnext
	MOVL DX, (DI)(R8*4)
	INCQ R8

tailnext:
	INCQ DX
	JMP  tail

stop:
	MOVQ R8, n+48(FP)
	MOVQ DX, done+56(FP)
	RET
