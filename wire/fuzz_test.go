package wire

import (
	"bytes"
	"net/netip"
	"testing"
)

// FuzzParse feeds arbitrary datagrams to Packet.Parse, every accessor of the
// parsed packet and the ICRC functions. None of them may panic, and the
// parsed lengths must add up.
func FuzzParse(f *testing.F) {
	for _, v := range icrcVectors {
		d, err := parseIP(unhexDump(f, v.dump))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d.roce)
	}
	for _, path := range pcapFiles {
		seen := map[int]bool{}
		for _, d := range pcapRoCE(f, path) {
			if !seen[len(d.roce)] { // one packet of each length is enough
				seen[len(d.roce)] = true
				f.Add(d.roce)
			}
		}
	}
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		verify(t, b)
		var p Packet
		if err := p.Parse(b); err != nil {
			if p.Buf != nil {
				t.Fatal("failed Parse filled the packet")
			}
			return
		}
		if !p.Op.Valid() || p.Flags != p.Op.Flags() || p.HdrLen() != p.Op.HdrLen() || p.BTH.TVer() != 0 {
			t.Fatalf("inconsistent packet %+v", p)
		}
		if p.HdrLen()+len(p.Payload)+p.BTH.PadCount()+ICRCLen != len(b) {
			t.Fatalf("lengths: hdr %d payload %d pad %d total %d", p.HdrLen(), len(p.Payload), p.BTH.PadCount(), len(b))
		}
		bth := p.BTH
		_, _, _, _, _, _ = bth.Opcode(), bth.SE(), bth.MigReq(), bth.PadCount(), bth.PKey(), bth.FECN()
		_, _, _, _ = bth.BECN(), bth.DestQP(), bth.AckReq(), bth.PSN()
		if h := p.RETH(); h != nil {
			_, _, _ = h.VA(), h.RKey(), h.DMALen()
		}
		if h := p.AETH(); h != nil {
			s := h.Syndrome()
			_, _, _ = s.Kind(), s.Value(), h.MSN()
			_, _ = Credits(s.Value()), RNRDelay(s.Value())
		}
		if h := p.AtomicETH(); h != nil {
			_, _, _, _ = h.VA(), h.RKey(), h.SwapAdd(), h.Compare()
		}
		if h := p.AtomicAckETH(); h != nil {
			_ = h.OrigValue()
		}
		if h := p.ImmDt(); h != nil {
			_ = h.Imm()
		}
		if h := p.IETH(); h != nil {
			_ = h.RKey()
		}
		if h := p.DETH(); h != nil {
			_, _ = h.QKey(), h.SrcQP()
		}
		if h := p.FETH(); h != nil {
			_, _ = h.PlacementType(), h.SelectivityLevel()
		}
		_ = p.Op.String()
		// Header views stay inside the headers.
		for _, h := range [][]byte{p.RETH(), p.AETH(), p.AtomicETH(), p.AtomicAckETH(), p.ImmDt(), p.IETH(), p.DETH(), p.FETH()} {
			if len(h) > 0 && (&h[0] == &b[0] || cap(h) != len(h)) {
				t.Fatal("header view overlaps the BTH or has spare capacity")
			}
		}
	})
}

// verify runs the ICRC functions on b with fixed addresses.
func verify(t *testing.T, b []byte) {
	for _, addrs := range [][2]netip.Addr{{addr4a, addr4b}, {addr6a, addr6b}} {
		s, d := addrs[0], addrs[1]
		strict := VerifyICRC(s, d, 0xC000, RoCEv2Port, b, ICRCIPv4Strict)
		anyID := VerifyICRC(s, d, 0xC000, RoCEv2Port, b, ICRCIPv4AnyID)
		if strict && !anyID {
			t.Fatal("Strict accepts what AnyID rejects")
		}
		id, ok := RecoverIPv4ID(s, d, 0xC000, RoCEv2Port, b)
		if s.Is4() && ok != anyID {
			t.Fatalf("RecoverIPv4ID ok=%v, VerifyICRC=%v", ok, anyID)
		}
		if ok && len(b) >= ICRCLen && ICRCWithIPv4ID(s, d, id, 0xC000, RoCEv2Port, b[:len(b)-ICRCLen]) != trailer(b) {
			t.Fatalf("recovered ID %#04x does not reproduce the trailer", id)
		}
		_ = ICRC(s, d, 0xC000, RoCEv2Port, b)
		if len(b) >= ICRCLen {
			c := bytes.Clone(b)
			PutICRC(s, d, 0xC000, RoCEv2Port, c)
			if !VerifyICRC(s, d, 0xC000, RoCEv2Port, c, ICRCIPv4Strict) {
				t.Fatal("PutICRC output rejected")
			}
		}
	}
}
