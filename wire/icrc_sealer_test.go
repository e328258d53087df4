package wire

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"pgregory.net/rapid"
)

// TestICRCFlow checks that an ICRCFlow seals packets of any length, whole
// and in parts, as PutICRC does: any addresses (IPv4, IPv4-mapped, IPv6),
// ports, headers and payloads up to a jumbo frame's, so that the length
// fields' table look-ups are checked with and without a carry into the
// high byte.
func TestICRCFlow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		addr := func(label string) netip.Addr {
			b := rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label)
			switch rapid.IntRange(0, 2).Draw(t, label+"-family") {
			case 0:
				return netip.AddrFrom4([4]byte(b[:4]))
			case 1:
				return netip.AddrFrom16(netip.AddrFrom4([4]byte(b[:4])).As16())
			}
			return netip.AddrFrom16([16]byte(b))
		}
		src, dst := addr("src"), addr("dst")
		if src.Is4() != dst.Is4() && !src.Is4In6() && !dst.Is4In6() {
			dst = src // one family: a mixed pair is not a packet
		}
		sport, dport := rapid.Uint16().Draw(t, "sport"), rapid.Uint16().Draw(t, "dport")
		hdr := rapid.SampledFrom([]int{BTHLen, BTHLen + RETHLen, BTHLen + AETHLen, BTHLen + RETHLen + ImmDtLen}).Draw(t, "hdr")
		n := rapid.IntRange(0, 9000).Draw(t, "payload")
		want := make([]byte, hdr+n+Pad(n)+ICRCLen)
		fill := rapid.Uint64().Draw(t, "fill")
		for j := range want[:hdr+n] {
			want[j] = byte(fill >> (j % 8 * 8))
		}
		PutICRC(src, dst, sport, dport, want)
		f := NewICRCFlow(src, dst, sport, dport)

		got := bytes.Clone(want)
		clear(got[len(got)-ICRCLen:])
		f.Put(got)
		if !bytes.Equal(got, want) {
			t.Fatalf("trailer %x, want %x", got[len(got)-ICRCLen:], want[len(want)-ICRCLen:])
		}
		head := make([]byte, hdr+Pad(n)+ICRCLen)
		copy(head, want[:hdr])
		f.PutParts(head, hdr, want[hdr:hdr+n])
		if g, w := head[len(head)-ICRCLen:], want[len(want)-ICRCLen:]; !bytes.Equal(g, w) {
			t.Fatalf("in parts: trailer %x, want %x", g, w)
		}
	})
}

// TestICRCSealer runs one ICRCSealer over packets of a few flows and sizes
// in random order, so that its saved state is both reused and replaced, and
// checks every trailer, whole and in parts, against PutICRC's.
func TestICRCSealer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	type flow struct {
		src, dst     netip.Addr
		sport, dport uint16
	}
	flows := []flow{
		{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2"), 0xc000, 4791},
		{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2"), 0xc001, 4791},
		{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.3"), 0xc000, 4791},
		{netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("198.51.100.1"), 0xc000, 4792},
		{netip.MustParseAddr("::ffff:198.51.100.1"), netip.MustParseAddr("::ffff:198.51.100.2"), 0xc000, 4791},
		{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 0xc000, 4791},
		{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::3"), 0xc000, 4791},
	}
	sizes := []int{0, 1, 8, 36, 51, 52, 64, 4096}
	var whole, parts ICRCSealer
	for i := range 3000 {
		f := flows[rng.IntN(len(flows))]
		if i%2 == 0 { // runs of one flow, as a QP's stream
			f = flows[0]
		}
		n := sizes[rng.IntN(len(sizes))]
		if rng.IntN(8) == 0 {
			n = rng.IntN(4097)
		}
		hdr := BTHLen + []int{0, RETHLen, AETHLen, RETHLen + ImmDtLen}[rng.IntN(4)]
		want := make([]byte, hdr+n+Pad(n)+ICRCLen)
		for j := range want[:hdr+n] {
			want[j] = byte(rng.Uint32())
		}
		PutICRC(f.src, f.dst, f.sport, f.dport, want)

		got := bytes.Clone(want)
		clear(got[len(got)-ICRCLen:])
		whole.Put(f.src, f.dst, f.sport, f.dport, got)
		if !bytes.Equal(got, want) {
			t.Fatalf("packet %d (%v, %d+%d bytes): trailer %x, want %x", i, f, hdr, n, got[len(got)-ICRCLen:], want[len(want)-ICRCLen:])
		}

		head := make([]byte, hdr+Pad(n)+ICRCLen)
		copy(head, want[:hdr])
		parts.PutParts(f.src, f.dst, f.sport, f.dport, head, hdr, want[hdr:hdr+n])
		if g, w := head[len(head)-ICRCLen:], want[len(want)-ICRCLen:]; !bytes.Equal(g, w) {
			t.Fatalf("packet %d (%v, %d+%d bytes) in parts: trailer %x, want %x", i, f, hdr, n, g, w)
		}
	}
}

// TestICRCSealerMasksBTH checks that the sealer, like PutICRC, ignores the
// BTH's variant bits (FECN, BECN, Resv6a) and not its others.
func TestICRCSealerMasksBTH(t *testing.T) {
	src, dst := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	pkt := make([]byte, PacketLen(RCWriteOnly, 8))
	BTH(pkt).Encode(RCWriteOnly, false, 0, 0x12, true, 7)
	var s ICRCSealer
	s.Put(src, dst, 0xc000, 4791, pkt)
	base := bytes.Clone(pkt[len(pkt)-ICRCLen:])
	pkt[4] ^= 0xc0 // FECN, BECN
	s.Put(src, dst, 0xc000, 4791, pkt)
	if !bytes.Equal(pkt[len(pkt)-ICRCLen:], base) {
		t.Fatalf("FECN/BECN changed the ICRC")
	}
	pkt[11] ^= 1 // the PSN
	s.Put(src, dst, 0xc000, 4791, pkt)
	if bytes.Equal(pkt[len(pkt)-ICRCLen:], base) {
		t.Fatalf("a different PSN left the ICRC the same")
	}
}
