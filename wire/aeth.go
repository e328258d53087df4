package wire

import (
	"encoding/binary"
	"time"
)

// AETH is the 4-byte ACK extended header: a syndrome byte and a 24-bit MSN.
type AETH []byte

// Syndrome returns the raw syndrome byte.
func (h AETH) Syndrome() Syndrome { return Syndrome(h[0]) }

// MSN returns the 24-bit message sequence number.
func (h AETH) MSN() uint32 { return get24(h[1:4]) }

// Encode writes the syndrome and MSN.
func (h AETH) Encode(s Syndrome, msn uint32) {
	binary.BigEndian.PutUint32(h[0:4], uint32(s)<<24|msn&0xFFFFFF)
}

// Syndrome is the AETH syndrome: bits 6–5 give the kind, bits 4–0 its value.
type Syndrome uint8

// SyndromeKind is the kind encoded in syndrome bits 6–5.
type SyndromeKind uint8

// Syndrome kinds.
const (
	KindACK SyndromeKind = 0
	KindRNR SyndromeKind = 1
	KindRsv SyndromeKind = 2
	KindNAK SyndromeKind = 3
)

// NAK codes (syndrome bits 4–0 when the kind is KindNAK).
const (
	NAKPSNSequence     = 0
	NAKInvalidRequest  = 1
	NAKRemoteAccess    = 2
	NAKRemoteOperation = 3
	NAKInvalidRDReq    = 4
)

// Common syndromes.
const (
	SyndromeACK          Syndrome = 0x1F // ACK with credit code 31: no end-to-end credits, as rxe
	SyndromePSNSeqErr    Syndrome = 0x60
	SyndromeInvalidReq   Syndrome = 0x61
	SyndromeRemoteAccess Syndrome = 0x62
	SyndromeRemoteOp     Syndrome = 0x63
)

// Kind returns the syndrome kind.
func (s Syndrome) Kind() SyndromeKind { return SyndromeKind(s>>5) & 3 }

// Value returns bits 4–0: credit code, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1F }

// RNRSyndrome returns the RNR NAK syndrome for a timer code.
func RNRSyndrome(timerCode uint8) Syndrome { return Syndrome(0x20 | timerCode&0x1F) }

// NAKSyndrome returns the NAK syndrome for a NAK code.
func NAKSyndrome(code uint8) Syndrome { return Syndrome(0x60 | code&0x1F) }

var creditTable = [32]int{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, -1}

// Credits returns the credit count of an ACK credit code; -1 means "invalid",
// that is, no end-to-end flow control.
func Credits(code uint8) int { return creditTable[code&0x1F] }

var rnrTable = [32]uint32{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520}

// RNRDelay returns the delay that an RNR NAK timer code asks for (IBTA table;
// code 25 is 61.44 ms, not rxe's 61.41 ms typo).
func RNRDelay(code uint8) time.Duration { return time.Duration(rnrTable[code&0x1F]) * time.Microsecond }

// AckTimeout returns the local ACK timeout 4.096 µs × 2^timeout for timeout
// 1..31, and 0 (the timer is disabled) for timeout 0.
func AckTimeout(timeout uint8) time.Duration {
	if timeout == 0 || timeout > 31 {
		return 0
	}
	return time.Duration(4096) << timeout * time.Nanosecond
}
