package wire

import (
	"bytes"
	"testing"
)

func filled(n int) []byte { return bytes.Repeat([]byte{0xA5}, n) }

func TestBTHRoundTrip(t *testing.T) {
	for _, c := range []struct {
		op     Opcode
		se     bool
		pad    int
		destQP uint32
		ackReq bool
		psn    PSN
	}{
		{RCSendOnly, false, 3, 0x000012, true, 0x123456},
		{RCSendLastImm, true, 1, 0xFFFFFF, false, 0xFFFFFF},
		{UDSendOnly, true, 0, MulticastQPN, true, 0},
		{CNP, false, 2, 0x000118, false, 0x800000},
	} {
		b := BTH(filled(BTHLen)) // garbage first: Encode must clear reserved bits
		b.Encode(c.op, c.se, c.pad, c.destQP, c.ackReq, c.psn)
		if b.Opcode() != c.op || b.SE() != c.se || b.PadCount() != c.pad || b.DestQP() != c.destQP ||
			b.AckReq() != c.ackReq || b.PSN() != c.psn {
			t.Errorf("%v: read back %v %v %d %#x %v %#x", c.op, b.Opcode(), b.SE(), b.PadCount(), b.DestQP(), b.AckReq(), b.PSN())
		}
		if b.PKey() != 0xFFFF || b.PKey() != DefaultPKey {
			t.Errorf("P_Key %#04x", b.PKey())
		}
		if b.MigReq() || b.TVer() != 0 || b.FECN() || b.BECN() || b[4] != 0 || b[8]&0x7F != 0 || b[1]&0x0F != 0 {
			t.Errorf("%v: reserved bits not zero: % x", c.op, []byte(b))
		}
	}
	// The spec's V1 BTH, byte for byte.
	b := BTH(make([]byte, BTHLen))
	b.Encode(RCSendOnly, false, 3, 0x12, true, 0x123456)
	if want := []byte{0x04, 0x30, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x80, 0x12, 0x34, 0x56}; !bytes.Equal(b, want) {
		t.Fatalf("V1 BTH % x, want % x", []byte(b), want)
	}
	// Setters one at a time.
	b.SetOpcode(RCAck)
	b.SetFlags(true, true, 2)
	b.SetPKey(0x7FFF)
	b.SetBECN(true)
	b.SetDestQP(0xABCDEF)
	b.SetAckReqPSN(false, 0xFEDCBA)
	if b.Opcode() != RCAck || !b.SE() || !b.MigReq() || b.PadCount() != 2 || b.TVer() != 0 || b.PKey() != 0x7FFF ||
		!b.BECN() || b.FECN() || b.DestQP() != 0xABCDEF || b.AckReq() || b.PSN() != 0xFEDCBA {
		t.Fatalf("setters: % x", []byte(b))
	}
	b.SetBECN(false)
	b.SetFlags(false, false, 0)
	if b.BECN() || b[4] != 0 || b[1] != 0 {
		t.Fatalf("clear: % x", []byte(b))
	}
	// V0's BECN byte.
	b.SetBECN(true)
	if b[4] != 0x40 {
		t.Fatalf("BECN byte %#02x, want 0x40", b[4])
	}
	// TVer and FECN are read from the wire as they are.
	b[1] = 0x0F
	b[4] = 0x80
	if b.TVer() != 0x0F || !b.FECN() {
		t.Fatal("TVer/FECN")
	}
}

func TestExtHeadersRoundTrip(t *testing.T) {
	r := RETH(filled(RETHLen))
	r.Encode(0x00007f1234560000, 0x1a2b, 0x2000)
	if r.VA() != 0x00007f1234560000 || r.RKey() != 0x1a2b || r.DMALen() != 0x2000 {
		t.Errorf("RETH %x", []byte(r))
	}
	// The spec's V5 RETH, byte for byte.
	if want := []byte{0, 0, 0x7f, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0x1a, 0x2b, 0, 0, 0x20, 0}; !bytes.Equal(r, want) {
		t.Errorf("RETH % x, want % x", []byte(r), want)
	}

	a := AtomicETH(filled(AtomicETHLen))
	a.Encode(0x1122334455667788, 0x99AABBCC, 0xDDEEFF0011223344, 0x5566778899AABBCC)
	if a.VA() != 0x1122334455667788 || a.RKey() != 0x99AABBCC || a.SwapAdd() != 0xDDEEFF0011223344 || a.Compare() != 0x5566778899AABBCC {
		t.Errorf("AtomicETH %x", []byte(a))
	}
	if a[0] != 0x11 || a[8] != 0x99 || a[12] != 0xDD || a[20] != 0x55 || a[27] != 0xCC {
		t.Errorf("AtomicETH layout %x", []byte(a))
	}

	k := AtomicAckETH(filled(AtomicAckETHLen))
	k.SetOrigValue(0x0102030405060708)
	if k.OrigValue() != 0x0102030405060708 || k[0] != 1 || k[7] != 8 {
		t.Errorf("AtomicAckETH %x", []byte(k))
	}

	i := ImmDt(filled(ImmDtLen))
	i.SetImm(0xDEADBEEF)
	if i.Imm() != 0xDEADBEEF || i[0] != 0xDE {
		t.Errorf("ImmDt %x", []byte(i))
	}

	e := IETH(filled(IETHLen))
	e.SetRKey(0x12345678)
	if e.RKey() != 0x12345678 || e[0] != 0x12 {
		t.Errorf("IETH %x", []byte(e))
	}

	d := DETH(filled(DETHLen))
	d.Encode(0x11111111, 0x000011)
	if d.QKey() != 0x11111111 || d.SrcQP() != 0x11 || d[4] != 0 {
		t.Errorf("DETH %x", []byte(d))
	}
	// The spec's V4 DETH.
	if want := []byte{0x11, 0x11, 0x11, 0x11, 0, 0, 0, 0x11}; !bytes.Equal(d, want) {
		t.Errorf("DETH % x, want % x", []byte(d), want)
	}
	d.Encode(0x80010000, 0xFFFFFF)
	if d.QKey() != 0x80010000 || d.SrcQP() != 0xFFFFFF {
		t.Errorf("DETH %x", []byte(d))
	}

	f := FETH([]byte{0xFF, 0xFF, 0xFF, 0x2A}) // selectivity 2, placement 0xA
	if f.PlacementType() != 0xA || f.SelectivityLevel() != 2 {
		t.Errorf("FETH %d %d", f.PlacementType(), f.SelectivityLevel())
	}

	h := AETH(filled(AETHLen))
	h.Encode(SyndromeACK, 1)
	if h.Syndrome() != 0x1F || h.MSN() != 1 || !bytes.Equal(h, []byte{0x1f, 0, 0, 1}) {
		t.Errorf("AETH % x", []byte(h))
	}
	h.Encode(SyndromePSNSeqErr, 0x1FFFFFF) // MSN is 24 bits
	if h.Syndrome() != 0x60 || h.MSN() != 0xFFFFFF {
		t.Errorf("AETH % x", []byte(h))
	}
}
