package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// pktFields holds every field a packet of any opcode can carry.
type pktFields struct {
	op                Opcode
	se, migReq, becn  bool
	destQP            uint32
	ackReq            bool
	psn               PSN
	va                uint64 // RETH / AtomicETH
	rkey, dmaLen      uint32
	syn               Syndrome
	msn               uint32
	swapAdd, compare  uint64
	orig              uint64
	imm, iethKey      uint32
	qkey, srcQP, feth uint32
	payload           []byte
}

// build encodes f with the spec's header order, written independently of
// Packet.offset, and a correct ICRC.
func (f *pktFields) build() []byte {
	b := make([]byte, PacketLen(f.op, len(f.payload)))
	bth := BTH(b)
	bth.Encode(f.op, f.se, Pad(len(f.payload)), f.destQP, f.ackReq, f.psn)
	bth.SetFlags(f.se, f.migReq, Pad(len(f.payload)))
	bth.SetBECN(f.becn)
	off := BTHLen
	has := func(h OpFlags, n int) []byte {
		if !f.op.Has(h) {
			return nil
		}
		off += n
		return b[off-n : off]
	}
	if h := has(HasDETH, DETHLen); h != nil {
		DETH(h).Encode(f.qkey, f.srcQP)
	}
	if h := has(HasFETH, FETHLen); h != nil {
		binary.BigEndian.PutUint32(h, f.feth)
	}
	if h := has(HasRETH, RETHLen); h != nil {
		RETH(h).Encode(f.va, f.rkey, f.dmaLen)
	}
	if h := has(HasAtomicETH, AtomicETHLen); h != nil {
		AtomicETH(h).Encode(f.va, f.rkey, f.swapAdd, f.compare)
	}
	if h := has(HasAETH, AETHLen); h != nil {
		AETH(h).Encode(f.syn, f.msn)
	}
	if h := has(HasAtomicAckETH, AtomicAckETHLen); h != nil {
		AtomicAckETH(h).SetOrigValue(f.orig)
	}
	if h := has(HasImmDt, ImmDtLen); h != nil {
		ImmDt(h).SetImm(f.imm)
	}
	if h := has(HasIETH, IETHLen); h != nil {
		IETH(h).SetRKey(f.iethKey)
	}
	if f.op == CNP {
		off += CNPPadLen
	}
	if off != f.op.HdrLen() {
		panic("header lengths disagree for " + f.op.String())
	}
	copy(b[off:], f.payload)
	PutICRC(addr4a, addr4b, 0xC000, RoCEv2Port, b)
	return b
}

// fataler is what check needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// check parses b and compares every field with f.
func (f *pktFields) check(t fataler, b []byte) {
	t.Helper()
	var p Packet
	if err := p.Parse(b); err != nil {
		t.Fatalf("%v: Parse: %v", f.op, err)
	}
	bth := p.BTH
	if p.Op != f.op || p.Flags != f.op.Flags() || p.HdrLen() != f.op.HdrLen() || len(p.Buf) != len(b) {
		t.Fatalf("%v: parsed op %v flags %#x hdr %d", f.op, p.Op, p.Flags, p.HdrLen())
	}
	if bth.SE() != f.se || bth.MigReq() != f.migReq || bth.BECN() != f.becn || bth.DestQP() != f.destQP&0xFFFFFF ||
		bth.AckReq() != f.ackReq || bth.PSN() != f.psn&PSNMask || bth.PKey() != DefaultPKey ||
		bth.PadCount() != Pad(len(f.payload)) || bth.TVer() != 0 {
		t.Fatalf("%v: BTH % x", f.op, []byte(bth))
	}
	if !bytes.Equal(p.Payload, f.payload) {
		t.Fatalf("%v: payload %x, want %x", f.op, p.Payload, f.payload)
	}
	present := func(h OpFlags, n int) bool {
		if f.op.Has(h) != (n != 0) {
			t.Fatalf("%v: header %#x has length %d", f.op, h, n)
		}
		return n != 0
	}
	if r := p.RETH(); present(HasRETH, len(r)) && (r.VA() != f.va || r.RKey() != f.rkey || r.DMALen() != f.dmaLen) {
		t.Fatalf("%v: RETH % x", f.op, []byte(r))
	}
	if a := p.AtomicETH(); present(HasAtomicETH, len(a)) &&
		(a.VA() != f.va || a.RKey() != f.rkey || a.SwapAdd() != f.swapAdd || a.Compare() != f.compare) {
		t.Fatalf("%v: AtomicETH % x", f.op, []byte(a))
	}
	if a := p.AETH(); present(HasAETH, len(a)) && (a.Syndrome() != f.syn || a.MSN() != f.msn&0xFFFFFF) {
		t.Fatalf("%v: AETH % x", f.op, []byte(a))
	}
	if a := p.AtomicAckETH(); present(HasAtomicAckETH, len(a)) && a.OrigValue() != f.orig {
		t.Fatalf("%v: AtomicAckETH % x", f.op, []byte(a))
	}
	if i := p.ImmDt(); present(HasImmDt, len(i)) && i.Imm() != f.imm {
		t.Fatalf("%v: ImmDt % x", f.op, []byte(i))
	}
	if i := p.IETH(); present(HasIETH, len(i)) && i.RKey() != f.iethKey {
		t.Fatalf("%v: IETH % x", f.op, []byte(i))
	}
	if d := p.DETH(); present(HasDETH, len(d)) && (d.QKey() != f.qkey || d.SrcQP() != f.srcQP&0xFFFFFF) {
		t.Fatalf("%v: DETH % x", f.op, []byte(d))
	}
	if h := p.FETH(); present(HasFETH, len(h)) &&
		(h.PlacementType() != uint8(f.feth&0xF) || h.SelectivityLevel() != uint8(f.feth>>4&3)) {
		t.Fatalf("%v: FETH % x", f.op, []byte(h))
	}
	// The extended header views do not reach into the payload.
	for _, h := range [][]byte{p.RETH(), p.AETH(), p.AtomicETH(), p.AtomicAckETH(), p.ImmDt(), p.IETH(), p.DETH(), p.FETH()} {
		if cap(h) != len(h) {
			t.Fatalf("%v: header view has spare capacity", f.op)
		}
	}
	if !VerifyICRC(addr4a, addr4b, 0xC000, RoCEv2Port, b, ICRCIPv4Strict) {
		t.Fatalf("%v: ICRC", f.op)
	}
}

func validOpcodes() []Opcode {
	var ops []Opcode
	for i := range 256 {
		if Opcode(i).Valid() {
			ops = append(ops, Opcode(i))
		}
	}
	return ops
}

func TestParseEveryOpcode(t *testing.T) {
	for _, op := range validOpcodes() {
		sizes := []int{0}
		if op.Has(HasPayload) {
			sizes = []int{0, 1, 2, 3, 4, 5, 1024}
		}
		for _, n := range sizes {
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i + 1)
			}
			f := pktFields{
				op: op, se: true, migReq: true, becn: op == CNP, destQP: 0xABCDEF, ackReq: true, psn: 0xFFFFFE,
				va: 0x0102030405060708, rkey: 0x11223344, dmaLen: 0x55667788,
				syn: SyndromeACK, msn: 0x998877, swapAdd: 0xA1A2A3A4A5A6A7A8, compare: 0xB1B2B3B4B5B6B7B8,
				orig: 0xC1C2C3C4C5C6C7C8, imm: 0xD1D2D3D4, iethKey: 0xE1E2E3E4, qkey: 0x80010000, srcQP: 0x000011,
				feth: 0x00000021, payload: payload,
			}
			f.check(t, f.build())
		}
	}
}

// TestParseVectors parses the RoCE parts of the spec's vectors.
func TestParseVectors(t *testing.T) {
	for _, v := range icrcVectors {
		d, err := parseIP(unhexDump(t, v.dump))
		if err != nil {
			t.Fatal(err)
		}
		var p Packet
		if err := p.Parse(d.roce); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		switch v.op {
		case CNP:
			if !p.BTH.BECN() || p.BTH.DestQP() != 0x118 || p.BTH.PSN() != 0 || len(p.Payload) != 0 {
				t.Errorf("V0: % x", []byte(p.BTH))
			}
		case RCSendOnly:
			if string(p.Payload) != "Hello" || p.BTH.PadCount() != 3 || !p.BTH.AckReq() || p.BTH.PSN() != 0x123456 {
				t.Errorf("V1: payload %q", p.Payload)
			}
		case RCAck:
			if p.AETH().Syndrome() != SyndromeACK || p.AETH().MSN() != 1 || p.BTH.DestQP() != 0x11 {
				t.Errorf("V2: AETH % x", []byte(p.AETH()))
			}
		case RCWriteOnly:
			if p.RETH().VA() != 0x00007f1234560000 || p.RETH().RKey() != 0x1a2b || p.RETH().DMALen() != 8 ||
				!bytes.Equal(p.Payload, []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
				t.Errorf("V3: RETH % x", []byte(p.RETH()))
			}
		case UDSendOnly:
			if p.DETH().QKey() != 0x11111111 || p.DETH().SrcQP() != 0x11 || p.BTH.DestQP() != 0x22 ||
				!bytes.Equal(p.Payload, []byte{0xde, 0xad, 0xbe, 0xef}) {
				t.Errorf("V4: DETH % x", []byte(p.DETH()))
			}
		case RCReadRequest:
			if p.RETH().DMALen() != 0x2000 || p.BTH.PSN() != 2 || len(p.Payload) != 0 {
				t.Errorf("V5: RETH % x", []byte(p.RETH()))
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := func(op Opcode, n int) []byte {
		f := pktFields{op: op, payload: make([]byte, n)}
		return f.build()
	}
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTooShort},
		{"15 bytes", make([]byte, 15), ErrTooShort},
		{"BTH without ICRC", good(RCSendOnly, 0)[:12], ErrTooShort},
		{"RETH cut", good(RCWriteOnly, 0)[:24], ErrTooShort},
		{"AtomicETH cut", good(RCCompareSwap, 0)[:43], ErrTooShort},
		{"DETH cut", good(UDSendOnly, 0)[:20], ErrTooShort},
		{"CNP reserved bytes cut", good(CNP, 0)[:28], ErrTooShort},
		{"unknown 0x15", func() []byte { b := good(RCSendOnly, 4); b[0] = 0x15; return b }(), ErrUnknownOpcode},
		{"unknown RD 0x40", func() []byte { b := good(RCSendOnly, 4); b[0] = 0x40; return b }(), ErrUnknownOpcode},
		{"unknown 0xFF", func() []byte { b := good(RCSendOnly, 4); b[0] = 0xFF; return b }(), ErrUnknownOpcode},
		{"TVer 1", func() []byte { b := good(RCSendOnly, 4); b[1] |= 1; return b }(), ErrBadTVer},
		{"TVer 15", func() []byte { b := good(RCAck, 0); b[1] |= 0x0F; return b }(), ErrBadTVer},
		{"pad 1, no payload", func() []byte { b := good(RCSendOnly, 0); b[1] |= 1 << 4; return b }(), ErrBadPad},
		{"pad 3, 2-byte area", func() []byte { b := good(RCSendOnly, 1); b[1] = 3 << 4; return b[:len(b)-2] }(), ErrBadPad},
		{"pad on ACK", func() []byte { b := good(RCAck, 0); b[1] |= 3 << 4; return b }(), ErrBadPad},
	} {
		var p Packet
		if err := p.Parse(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: Parse = %v, want %v", c.name, err, c.want)
		}
		if p.Buf != nil || p.Payload != nil || p.RETH() != nil {
			t.Errorf("%s: a failed Parse filled the packet", c.name)
		}
	}
	// Pad equal to the payload area is fine: a 0-byte payload with pad 3 in a 3-byte area.
	b := good(RCSendOnly, 1) // 1 byte payload + 3 pad
	b[1] = 3<<4 | b[1]&0xCF  // claim pad 3 of the 4 bytes: payload 1
	var p Packet
	if err := p.Parse(b); err != nil || len(p.Payload) != 1 {
		t.Fatalf("Parse = %v, payload %d", err, len(p.Payload))
	}
}

// TestParseRapid encodes random headers for a random opcode, parses the
// result and reads back every field and the payload.
func TestParseRapid(t *testing.T) {
	ops := validOpcodes()
	rapid.Check(t, func(t *rapid.T) {
		op := rapid.SampledFrom(ops).Draw(t, "op")
		var payload []byte
		if op.Has(HasPayload) {
			payload = rapid.SliceOfN(rapid.Byte(), 0, 4200).Draw(t, "payload")
		}
		u32 := func(name string) uint32 { return rapid.Uint32().Draw(t, name) }
		u64 := func(name string) uint64 { return rapid.Uint64().Draw(t, name) }
		f := pktFields{
			op: op, se: rapid.Bool().Draw(t, "se"), migReq: rapid.Bool().Draw(t, "migReq"),
			becn: rapid.Bool().Draw(t, "becn"), destQP: u32("destQP") & 0xFFFFFF, ackReq: rapid.Bool().Draw(t, "ackReq"),
			psn: PSN(u32("psn") & PSNMask), va: u64("va"), rkey: u32("rkey"), dmaLen: u32("dmaLen"),
			syn: Syndrome(rapid.Uint8().Draw(t, "syn")), msn: u32("msn") & 0xFFFFFF,
			swapAdd: u64("swapAdd"), compare: u64("compare"), orig: u64("orig"), imm: u32("imm"),
			iethKey: u32("iethKey"), qkey: u32("qkey"), srcQP: u32("srcQP") & 0xFFFFFF, feth: u32("feth"),
			payload: payload,
		}
		if len(f.payload) == 0 {
			f.payload = nil
		}
		b := f.build()
		f.check(t, b)
		if f.payload == nil && op.Has(HasPayload) {
			var p Packet
			_ = p.Parse(b)
			if len(p.Payload) != 0 {
				t.Fatalf("payload %x", p.Payload)
			}
		}
	})
}
