package wire

import (
	"strings"
	"testing"
)

// specOpcode is one row of docs/spec/roce-wire.md §4.1 (plus UD and CNP, §4.1/§4.3).
type specOpcode struct {
	op      Opcode
	hdr     int  // the "hdr" column
	payload bool // the "P" column
	pos     OpFlags
	rwr     bool // the "RWR" column
	ext     OpFlags
}

const (
	first  = IsFirst
	middle = IsMiddle
	last   = IsLast
	only   = IsOnly
)

var specOpcodes = []specOpcode{
	// RC
	{0x00, 12, true, first, true, 0},
	{0x01, 12, true, middle, false, 0},
	{0x02, 12, true, last, false, 0},
	{0x03, 16, true, last, false, HasImmDt},
	{0x04, 12, true, only, true, 0},
	{0x05, 16, true, only, true, HasImmDt},
	{0x06, 28, true, first, false, HasRETH},
	{0x07, 12, true, middle, false, 0},
	{0x08, 12, true, last, false, 0},
	{0x09, 16, true, last, true, HasImmDt},
	{0x0A, 28, true, only, false, HasRETH},
	{0x0B, 32, true, only, true, HasRETH | HasImmDt},
	{0x0C, 28, false, only, false, HasRETH},
	{0x0D, 16, true, first, false, HasAETH},
	{0x0E, 12, true, middle, false, 0},
	{0x0F, 16, true, last, false, HasAETH},
	{0x10, 16, true, only, false, HasAETH},
	{0x11, 16, false, only, false, HasAETH},
	{0x12, 24, false, only, false, HasAETH | HasAtomicAckETH},
	{0x13, 40, false, only, false, HasAtomicETH},
	{0x14, 40, false, only, false, HasAtomicETH},
	{0x16, 16, true, last, false, HasIETH},
	{0x17, 16, true, only, true, HasIETH},
	{0x1C, 32, false, only, false, HasFETH | HasRETH},
	{0x1D, 28, true, only, false, HasRETH},
	// UC
	{0x20, 12, true, first, true, 0},
	{0x21, 12, true, middle, false, 0},
	{0x22, 12, true, last, false, 0},
	{0x23, 16, true, last, false, HasImmDt},
	{0x24, 12, true, only, true, 0},
	{0x25, 16, true, only, true, HasImmDt},
	{0x26, 28, true, first, false, HasRETH},
	{0x27, 12, true, middle, false, 0},
	{0x28, 12, true, last, false, 0},
	{0x29, 16, true, last, true, HasImmDt},
	{0x2A, 28, true, only, false, HasRETH},
	{0x2B, 32, true, only, true, HasRETH | HasImmDt},
	// UD
	{0x64, 20, true, only, true, HasDETH},
	{0x65, 24, true, only, true, HasDETH | HasImmDt},
	// CNP: BTH and 16 reserved bytes, no payload.
	{0x81, 28, false, only, false, 0},
}

const extFlags = HasRETH | HasAETH | HasAtomicETH | HasAtomicAckETH | HasImmDt | HasIETH | HasDETH | HasFETH

func TestOpcodeTable(t *testing.T) {
	known := map[Opcode]bool{}
	for _, r := range specOpcodes {
		known[r.op] = true
		t.Run(r.op.String(), func(t *testing.T) {
			info, ok := r.op.Info()
			if !ok || !r.op.Valid() {
				t.Fatalf("%#02x not known", uint8(r.op))
			}
			if info.HdrLen != r.hdr || r.op.HdrLen() != r.hdr {
				t.Errorf("HdrLen %d, want %d", info.HdrLen, r.hdr)
			}
			if got := r.op.Has(HasPayload); got != r.payload {
				t.Errorf("HasPayload %v, want %v", got, r.payload)
			}
			if got := r.op.Has(NeedsRecvWQE); got != r.rwr {
				t.Errorf("NeedsRecvWQE %v, want %v", got, r.rwr)
			}
			if got := r.op.Flags() & (IsFirst | IsMiddle | IsLast); got != r.pos {
				t.Errorf("position %#x, want %#x", got, r.pos)
			}
			if got := r.op.Flags() & extFlags; got != r.ext {
				t.Errorf("extended headers %#x, want %#x", got, r.ext)
			}
			if r.op.Flags() != info.Flags {
				t.Errorf("Flags() != Info().Flags")
			}
			if info.Name == "" || strings.HasPrefix(r.op.String(), "UNKNOWN") {
				t.Errorf("no name")
			}
			// Transport class.
			want := map[Opcode]Opcode{0x00: TransportRC, 0x20: TransportUC, 0x60: TransportUD, 0x80: TransportCNP}[r.op&0xE0]
			if r.op.Transport() != want {
				t.Errorf("Transport %#x, want %#x", r.op.Transport(), want)
			}
			// Roles (§4.2): responses are the READ responses and the ACKs.
			resp := r.op >= 0x0D && r.op <= 0x12
			if r.op.Has(IsResponse) != resp {
				t.Errorf("IsResponse %v, want %v", r.op.Has(IsResponse), resp)
			}
			// UC mirrors RC's SEND/WRITE rows.
			if r.op.Transport() == TransportUC {
				rc := r.op &^ 0xE0
				if rc.HdrLen() != r.op.HdrLen() || rc.Flags() != r.op.Flags() {
					t.Errorf("UC row differs from RC %v", rc)
				}
			}
		})
	}
	for i := range 256 {
		op := Opcode(i)
		if known[op] {
			continue
		}
		if op.Valid() || op.HdrLen() != 0 || op.Flags() != 0 || op.Has(HasPayload) {
			t.Errorf("%#02x should be unknown", i)
		}
		if _, ok := op.Info(); ok {
			t.Errorf("%#02x: Info ok", i)
		}
		if !strings.HasPrefix(op.String(), "UNKNOWN_OPCODE(0x") {
			t.Errorf("%#02x: String %q", i, op.String())
		}
	}
	if len(known) != 40 {
		t.Fatalf("%d opcodes in the spec table", len(known))
	}
	if Opcode(0x15).String() != "UNKNOWN_OPCODE(0x15)" {
		t.Errorf("String(0x15) = %q", Opcode(0x15).String())
	}
	if RCSendOnly.String() != "RC_SEND_ONLY" || UDSendOnlyImm.String() != "UD_SEND_ONLY_WITH_IMMEDIATE" {
		t.Errorf("names: %v %v", RCSendOnly, UDSendOnlyImm)
	}
}

// TestOpcodeConstants pins the exported constants to the numbers of ib_pack.h.
func TestOpcodeConstants(t *testing.T) {
	for _, c := range []struct {
		op   Opcode
		want uint8
	}{
		{RCSendFirst, 0x00}, {RCSendMiddle, 0x01}, {RCSendLast, 0x02}, {RCSendLastImm, 0x03},
		{RCSendOnly, 0x04}, {RCSendOnlyImm, 0x05}, {RCWriteFirst, 0x06}, {RCWriteMiddle, 0x07},
		{RCWriteLast, 0x08}, {RCWriteLastImm, 0x09}, {RCWriteOnly, 0x0A}, {RCWriteOnlyImm, 0x0B},
		{RCReadRequest, 0x0C}, {RCReadResponseFirst, 0x0D}, {RCReadResponseMiddle, 0x0E},
		{RCReadResponseLast, 0x0F}, {RCReadResponseOnly, 0x10}, {RCAck, 0x11}, {RCAtomicAck, 0x12},
		{RCCompareSwap, 0x13}, {RCFetchAdd, 0x14}, {RCSendLastInvalidate, 0x16},
		{RCSendOnlyInvalidate, 0x17}, {RCFlush, 0x1C}, {RCAtomicWrite, 0x1D},
		{UCSendFirst, 0x20}, {UCSendMiddle, 0x21}, {UCSendLast, 0x22}, {UCSendLastImm, 0x23},
		{UCSendOnly, 0x24}, {UCSendOnlyImm, 0x25}, {UCWriteFirst, 0x26}, {UCWriteMiddle, 0x27},
		{UCWriteLast, 0x28}, {UCWriteLastImm, 0x29}, {UCWriteOnly, 0x2A}, {UCWriteOnlyImm, 0x2B},
		{UDSendOnly, 0x64}, {UDSendOnlyImm, 0x65}, {CNP, 0x81},
	} {
		if uint8(c.op) != c.want {
			t.Errorf("%v = %#02x, want %#02x", c.op, uint8(c.op), c.want)
		}
	}
}

func TestPadAndPacketLen(t *testing.T) {
	for n, want := range []int{0, 3, 2, 1, 0, 3, 2, 1} {
		if Pad(n) != want {
			t.Errorf("Pad(%d) = %d, want %d", n, Pad(n), want)
		}
	}
	for _, c := range []struct {
		op   Opcode
		n    int
		want int
	}{
		{RCSendOnly, 5, 12 + 5 + 3 + 4},           // V1's RoCE part
		{RCAck, 0, 20},                            // V2
		{RCWriteOnly, 8, 40},                      // V3
		{UDSendOnly, 4, 28},                       // V4
		{RCReadRequest, 0, 32},                    // V5
		{CNP, 0, 32},                              // V0
		{RCWriteFirst, 1024, 1024 + 28 + 4},       // §1.6: 1084 - 20 - 8
		{RCWriteOnlyImm, 1024, 1024 + 32 + 4},     // §1.6: 1088 - 20 - 8
		{RCSendFirst, 1024, 1040},                 // pcap: SEND_FIRST len=1040
		{RCSendLast, 976, 992},                    // pcap: SEND_LAST len=992
		{RCReadResponseMiddle, 4096, 4096 + 16},   // no pad
		{RCReadResponseLast, 4095, 16 + 4096 + 4}, // pad 1
	} {
		if got := PacketLen(c.op, c.n); got != c.want {
			t.Errorf("PacketLen(%v, %d) = %d, want %d", c.op, c.n, got, c.want)
		}
	}
}
