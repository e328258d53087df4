package wire

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
)

func TestCRCCheckValue(t *testing.T) {
	if got := ^crcRaw(0xFFFFFFFF, []byte("123456789")); got != 0xCBF43926 {
		t.Fatalf("CRC-32(123456789) = %#08x, want 0xCBF43926", got)
	}
	ff := bytes.Repeat([]byte{0xff}, 8)
	if got := crcRaw(0xFFFFFFFF, ff); got != 0xDEBB20E3 {
		t.Fatalf("raw state after 8×FF = %#08x, want rxe's seed 0xDEBB20E3", got)
	}
	// The slicing-by-8 loop against the bytewise definition, all lengths 0..64.
	buf := make([]byte, 64)
	for i := range buf {
		buf[i] = byte(i*37 + 11)
	}
	for n := range len(buf) + 1 {
		var s uint32 = 0x12345678
		for _, b := range buf[:n] {
			s = crcTab[0][byte(s)^b] ^ s>>8
		}
		if got := crcRaw(0x12345678, buf[:n]); got != s {
			t.Fatalf("crcRaw over %d bytes = %#08x, want %#08x", n, got, s)
		}
	}
}

// checkVector checks one full IP packet whose ICRC is known to be right.
func checkVector(t *testing.T, d ipDatagram, flips bool) {
	t.Helper()
	pkt := d.roce
	body := pkt[:len(pkt)-ICRCLen]
	want := binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:])
	if got := ICRCWithIPv4ID(d.src, d.dst, d.id, d.sport, d.dport, body); got != want {
		t.Errorf("ICRCWithIPv4ID(id %#04x) = %#08x, want %#08x", d.id, got, want)
	}
	if !d.v4 || d.id == 0 {
		if got := ICRC(d.src, d.dst, d.sport, d.dport, body); got != want {
			t.Errorf("ICRC = %#08x, want %#08x", got, want)
		}
	}
	if !VerifyICRC(d.src, d.dst, d.sport, d.dport, pkt, ICRCIPv4AnyID) {
		t.Errorf("VerifyICRC(AnyID) rejects the packet")
	}
	strictOK := !d.v4 || d.id == 0
	if got := VerifyICRC(d.src, d.dst, d.sport, d.dport, pkt, ICRCIPv4Strict); got != strictOK {
		t.Errorf("VerifyICRC(Strict) = %v, want %v (IPv4 %v, ID %#04x)", got, strictOK, d.v4, d.id)
	}
	id, ok := RecoverIPv4ID(d.src, d.dst, d.sport, d.dport, pkt)
	if d.v4 && (!ok || id != d.id) {
		t.Errorf("RecoverIPv4ID = %#04x, %v; want %#04x, true", id, ok, d.id)
	}
	if !d.v4 && ok {
		t.Errorf("RecoverIPv4ID on IPv6 = %#04x, true; want false", id)
	}
	// The same packet seen through IPv4-mapped addresses is the same packet.
	if d.v4 {
		ms, md := netip.AddrFrom16(d.src.As16()), netip.AddrFrom16(d.dst.As16())
		if !VerifyICRC(ms, md, d.sport, d.dport, pkt, ICRCIPv4AnyID) {
			t.Errorf("VerifyICRC with IPv4-mapped addresses rejects the packet")
		}
	}
	if !flips {
		return
	}
	// Any single flipped bit in the RoCE part (trailer included) outside the
	// masked BTH byte 4 is caught, in both modes: for these packets no
	// single-bit error lies in the span of the ID map.
	c := bytes.Clone(pkt)
	for bit := range len(c) * 8 {
		c[bit/8] ^= 1 << (bit % 8)
		if bit/8 == 4 { // BTH byte 4 (FECN, BECN, Resv6a) is masked: still valid
			if !VerifyICRC(d.src, d.dst, d.sport, d.dport, c, ICRCIPv4AnyID) {
				t.Errorf("VerifyICRC(AnyID) rejects the packet with masked bit %d flipped", bit)
			}
			c[bit/8] ^= 1 << (bit % 8)
			continue
		}
		if VerifyICRC(d.src, d.dst, d.sport, d.dport, c, ICRCIPv4AnyID) {
			t.Errorf("VerifyICRC(AnyID) accepts the packet with bit %d flipped", bit)
		}
		if VerifyICRC(d.src, d.dst, d.sport, d.dport, c, ICRCIPv4Strict) {
			t.Errorf("VerifyICRC(Strict) accepts the packet with bit %d flipped", bit)
		}
		c[bit/8] ^= 1 << (bit % 8)
	}
	// So is a change of any address or port byte.
	other := func(a netip.Addr) netip.Addr {
		b := a.As16()
		b[15] ^= 0x01
		if a.Is4() {
			return netip.AddrFrom16(b).Unmap()
		}
		return netip.AddrFrom16(b)
	}
	if VerifyICRC(other(d.src), d.dst, d.sport, d.dport, pkt, ICRCIPv4AnyID) ||
		VerifyICRC(d.src, other(d.dst), d.sport, d.dport, pkt, ICRCIPv4AnyID) ||
		VerifyICRC(d.src, d.dst, d.sport^1, d.dport, pkt, ICRCIPv4AnyID) ||
		VerifyICRC(d.src, d.dst, d.sport, d.dport^0x100, pkt, ICRCIPv4AnyID) {
		t.Errorf("VerifyICRC accepts the packet with a wrong address or port")
	}
}

func TestICRCVectors(t *testing.T) {
	for _, v := range icrcVectors {
		t.Run(v.name, func(t *testing.T) {
			b := unhexDump(t, v.dump)
			d, err := parseIP(b)
			if err != nil {
				t.Fatal(err)
			}
			if d.id != v.id {
				t.Fatalf("IP ID %#04x, want %#04x", d.id, v.id)
			}
			if d.v4 && d.flags != 0x4000 {
				t.Fatalf("IP flags %#04x, want 0x4000", d.flags)
			}
			if got := trailer(d.roce); got != v.crc {
				t.Fatalf("trailer %#08x, want %#08x", got, v.crc)
			}
			var p Packet
			if err := p.Parse(d.roce); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if p.Op != v.op {
				t.Fatalf("opcode %v, want %v", p.Op, v.op)
			}
			checkVector(t, d, true)
		})
	}
}

// TestICRCInputV1 checks the exact CRC input the spec gives for V1.
func TestICRCInputV1(t *testing.T) {
	v := icrcVectors[1]
	d, err := parseIP(unhexDump(t, v.dump))
	if err != nil {
		t.Fatal(err)
	}
	body := d.roce[:len(d.roce)-ICRCLen]
	var buf [v6PHLen]byte
	n := pseudoHeader(&buf, d.src, d.dst, d.id, d.sport, d.dport, uint16(UDPHeaderLen+len(d.roce)), body)
	got := append(buf[:n:n], body[BTHLen:]...)
	want := unhexDump(t, v.input)
	if !bytes.Equal(got, want) {
		t.Fatalf("CRC input\n got %x\nwant %x", got, want)
	}
	if c := ^crcRaw(0xFFFFFFFF, got); c != v.crc {
		t.Fatalf("CRC-32 of the input = %#08x, want %#08x", c, v.crc)
	}
	// The IPv6 input starts as the spec says for V4.
	v4 := icrcVectors[4]
	d, err = parseIP(unhexDump(t, v4.dump))
	if err != nil {
		t.Fatal(err)
	}
	n = pseudoHeader(&buf, d.src, d.dst, 0, d.sport, d.dport, uint16(UDPHeaderLen+len(d.roce)), d.roce)
	wantHead := unhexDump(t, "ff ff ff ff ff ff ff ff 6f ff ff ff 00 24 11 ff")
	wantTail := unhexDump(t, "c2 42 12 b7 00 24 ff ff 64 00 ff ff ff 00 00 22")
	if n != v6PHLen || !bytes.Equal(buf[:16], wantHead) || !bytes.Equal(buf[48:64], wantTail) {
		t.Fatalf("IPv6 pseudo header %x", buf[:n])
	}
}

// TestICRCPcap checks every RoCEv2 packet of real Linux rxe captures.
func TestICRCPcap(t *testing.T) {
	for _, path := range pcapFiles {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ds := pcapRoCE(t, path)
			if len(ds) == 0 {
				t.Fatal("no RoCEv2 packets")
			}
			var nonZero int
			for i, d := range ds {
				if d.flags != 0x4000 {
					t.Fatalf("packet %d: IP flags %#04x", i, d.flags)
				}
				var p Packet
				if err := p.Parse(d.roce); err != nil {
					t.Fatalf("packet %d: Parse: %v", i, err)
				}
				if d.id != 0 {
					nonZero++
				}
				// Bit flips over every packet would be slow; do it for the short ones.
				checkVector(t, d, len(d.roce) <= 128)
			}
			if nonZero == 0 {
				t.Fatal("expected rxe packets with non-zero IP IDs")
			}
			t.Logf("%d RoCEv2 packets, %d with a non-zero IP ID", len(ds), nonZero)
		})
	}
}

// TestICRCPcapLongFlips flips every bit of one long rxe packet. In AnyID mode
// a single-bit error escapes only if it happens to lie in the span of the ID
// map (probability about 2^-16 per bit); this packet has none.
func TestICRCPcapLongFlips(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	for _, d := range pcapRoCE(t, pcapFiles[0]) {
		if len(d.roce) > 1000 && d.id != 0 {
			checkVector(t, d, true)
			return
		}
	}
	t.Fatal("no long packet with a non-zero ID")
}

var (
	addr4a = netip.MustParseAddr("192.0.2.1")
	addr4b = netip.MustParseAddr("192.0.2.2")
	addr6a = netip.MustParseAddr("2001:db8::1")
	addr6b = netip.MustParseAddr("2001:db8::2")
)

// TestIDImage checks the linear ID map against direct computation, for many
// lengths (including ones no valid packet has, and ones beyond the cache).
func TestIDImage(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 3, 4, 11, 12, 13, 16, 20, 28, 60, 1024 + 28, 4096 + 32, 9000, maxCachedLen, maxCachedLen + 4, 12000, 65000}
	for range 40 {
		lengths = append(lengths, r.IntN(2000))
	}
	for _, n := range lengths {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(r.Uint32())
		}
		pkt := make([]byte, n+ICRCLen)
		copy(pkt, body)
		sport := uint16(r.Uint32())
		c0 := ICRC(addr4a, addr4b, sport, RoCEv2Port, body)
		if c0 != ICRCWithIPv4ID(addr4a, addr4b, 0, sport, RoCEv2Port, body) {
			t.Fatalf("len %d: ICRC != ICRCWithIPv4ID(0)", n)
		}
		for _, id := range []uint16{1, 0x8000, 0xFFFF, 0x718c, uint16(r.Uint32()), uint16(r.Uint32())} {
			ci := ICRCWithIPv4ID(addr4a, addr4b, id, sport, RoCEv2Port, body)
			after := lrhLen + IPv4HeaderLen + UDPHeaderLen + n - idEnd
			if got := idImage(id, after); got != c0^ci {
				t.Fatalf("len %d id %#04x: L_N = %#08x, want %#08x", n, id, got, c0^ci)
			}
			binary.LittleEndian.PutUint32(pkt[n:], ci)
			if !VerifyICRC(addr4a, addr4b, sport, RoCEv2Port, pkt, ICRCIPv4AnyID) {
				t.Fatalf("len %d id %#04x: AnyID rejects", n, id)
			}
			if VerifyICRC(addr4a, addr4b, sport, RoCEv2Port, pkt, ICRCIPv4Strict) {
				t.Fatalf("len %d id %#04x: Strict accepts", n, id)
			}
			if got, ok := RecoverIPv4ID(addr4a, addr4b, sport, RoCEv2Port, pkt); !ok || got != id {
				t.Fatalf("len %d: RecoverIPv4ID = %#04x, %v; want %#04x", n, got, ok, id)
			}
		}
	}
}

// TestAnyIDStrength estimates the false-accept rate of the AnyID path on
// random trailers: it must be about 2^-16.
func TestAnyIDStrength(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pkt := make([]byte, 1024+BTHLen+ICRCLen)
	for i := range pkt {
		pkt[i] = byte(r.Uint32())
	}
	const tries = 1 << 20
	var accepted int
	for range tries {
		binary.LittleEndian.PutUint32(pkt[len(pkt)-4:], r.Uint32())
		if VerifyICRC(addr4a, addr4b, 0xC000, RoCEv2Port, pkt, ICRCIPv4AnyID) {
			accepted++
		}
	}
	// Expect 16; anything up to 64 is plausible, more means a weak check.
	if accepted > 64 {
		t.Fatalf("%d of %d random trailers accepted", accepted, tries)
	}
	t.Logf("%d of %d random trailers accepted (expected ~%d)", accepted, tries, tries>>16)
}

func TestPutICRC(t *testing.T) {
	for _, a := range [][2]netip.Addr{{addr4a, addr4b}, {addr6a, addr6b}} {
		pkt := make([]byte, PacketLen(RCSendOnly, 5))
		BTH(pkt).Encode(RCSendOnly, false, Pad(5), 0x12, true, 0x123456)
		copy(pkt[BTHLen:], "Hello")
		PutICRC(a[0], a[1], 0xC132, RoCEv2Port, pkt)
		want := ICRC(a[0], a[1], 0xC132, RoCEv2Port, pkt[:len(pkt)-4])
		if got := binary.LittleEndian.Uint32(pkt[len(pkt)-4:]); got != want {
			t.Fatalf("%v: trailer %#08x, want %#08x", a, got, want)
		}
		for _, m := range []ICRCMode{ICRCIPv4AnyID, ICRCIPv4Strict} {
			if !VerifyICRC(a[0], a[1], 0xC132, RoCEv2Port, pkt, m) {
				t.Fatalf("%v: VerifyICRC(%v) rejects PutICRC's output", a, m)
			}
		}
		// FECN/BECN and the reserved bits of BTH byte 4 are masked.
		pkt[4] = 0xC0
		if !VerifyICRC(a[0], a[1], 0xC132, RoCEv2Port, pkt, ICRCIPv4Strict) {
			t.Fatalf("%v: BTH byte 4 is not masked", a)
		}
		// IPv6 never uses the ID path.
		if a[0].Is6() {
			pkt[len(pkt)-1] ^= 1
			if VerifyICRC(a[0], a[1], 0xC132, RoCEv2Port, pkt, ICRCIPv4AnyID) {
				t.Fatal("IPv6 accepts a wrong trailer")
			}
		}
	}
	// V1 rebuilt with our sender's ID 0 verifies in Strict mode.
	d, _ := parseIP(unhexDump(t, icrcVectors[1].dump))
	pkt := bytes.Clone(d.roce)
	PutICRC(d.src, d.dst, d.sport, d.dport, pkt)
	if !VerifyICRC(d.src, d.dst, d.sport, d.dport, pkt, ICRCIPv4Strict) {
		t.Fatal("V1 with ID 0 rejected in Strict mode")
	}
	if got, ok := RecoverIPv4ID(d.src, d.dst, d.sport, d.dport, pkt); !ok || got != 0 {
		t.Fatalf("RecoverIPv4ID = %#04x, %v; want 0, true", got, ok)
	}
}

func TestICRCShortInputs(t *testing.T) {
	for n := range BTHLen + ICRCLen + 2 {
		pkt := make([]byte, n)
		for _, m := range []ICRCMode{ICRCIPv4AnyID, ICRCIPv4Strict} {
			_ = VerifyICRC(addr4a, addr4b, 1, 2, pkt, m)
			_ = VerifyICRC(addr6a, addr6b, 1, 2, pkt, m)
			_ = VerifyICRC(netip.Addr{}, netip.Addr{}, 1, 2, pkt, m)
		}
		_, _ = RecoverIPv4ID(addr4a, addr4b, 1, 2, pkt)
		_ = ICRC(addr4a, addr4b, 1, 2, pkt)
		_ = ICRC(addr4a, addr6b, 1, 2, pkt)
		if n >= ICRCLen {
			PutICRC(addr4a, addr4b, 1, 2, pkt)
			if !VerifyICRC(addr4a, addr4b, 1, 2, pkt, ICRCIPv4Strict) {
				t.Fatalf("len %d: PutICRC output rejected", n)
			}
		} else if VerifyICRC(addr4a, addr4b, 1, 2, pkt, ICRCIPv4AnyID) {
			t.Fatalf("len %d: a packet without a trailer is accepted", n)
		}
	}
}

// TestVerifyICRCConcurrent fills the solver cache from many goroutines at once.
func TestVerifyICRCConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range 200 {
				n := 4 * (i%50 + 3)
				pkt := make([]byte, n+ICRCLen)
				for j := range pkt {
					pkt[j] = byte(r.Uint32())
				}
				id := uint16(r.Uint32()) | 1
				binary.LittleEndian.PutUint32(pkt[n:], ICRCWithIPv4ID(addr4a, addr4b, id, 0xC000, RoCEv2Port, pkt[:n]))
				if got, ok := RecoverIPv4ID(addr4a, addr4b, 0xC000, RoCEv2Port, pkt); !ok || got != id {
					t.Errorf("len %d: RecoverIPv4ID = %#04x, %v; want %#04x", n, got, ok, id)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestICRCNoAllocs(t *testing.T) {
	pkt := make([]byte, PacketLen(RCWriteFirst, 1024))
	BTH(pkt).Encode(RCWriteFirst, false, 0, 0x12, false, 7)
	body := pkt[:len(pkt)-ICRCLen]
	binary.LittleEndian.PutUint32(pkt[len(body):], ICRCWithIPv4ID(addr4a, addr4b, 0x1234, 0xC000, RoCEv2Port, body))
	VerifyICRC(addr4a, addr4b, 0xC000, RoCEv2Port, pkt, ICRCIPv4AnyID) // warm the solver cache
	odd := make([]byte, 103)                                           // an uncached length
	for name, f := range map[string]func(){
		"ICRC4":       func() { ICRC(addr4a, addr4b, 0xC000, RoCEv2Port, body) },
		"ICRC6":       func() { ICRC(addr6a, addr6b, 0xC000, RoCEv2Port, body) },
		"VerifyAnyID": func() { VerifyICRC(addr4a, addr4b, 0xC000, RoCEv2Port, pkt, ICRCIPv4AnyID) },
		"VerifyOdd":   func() { VerifyICRC(addr4a, addr4b, 0xC000, RoCEv2Port, odd, ICRCIPv4AnyID) },
		"Recover":     func() { RecoverIPv4ID(addr4a, addr4b, 0xC000, RoCEv2Port, pkt) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocs per run", name, a)
		}
	}
	if a := testing.AllocsPerRun(100, func() { PutICRC(addr4a, addr4b, 0xC000, RoCEv2Port, pkt) }); a != 0 {
		t.Errorf("PutICRC: %v allocs per run", a)
	}
}

func TestICRCModeString(t *testing.T) {
	if ICRCIPv4AnyID.String() != "ipv4-any-id" || ICRCIPv4Strict.String() != "ipv4-strict" || ICRCMode(7).String() != "ICRCMode(07)" {
		t.Fatal("ICRCMode.String")
	}
}

// TestRetagICRC checks that retagging a trailer from one IPv4 ID to another
// gives the ICRC computed directly with the new ID, for cached and uncached
// lengths.
func TestRetagICRC(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 12, 13, 40, 1052, 4096 + 16, 4097, maxCachedLen, maxCachedLen + 4, 20000} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(r.Uint32())
		}
		pkt := append(bytes.Clone(body), 0, 0, 0, 0)
		PutICRC(addr4a, addr4b, 0xC132, RoCEv2Port, pkt)
		prev := uint16(0)
		for _, id := range []uint16{0, 1, 2, 63, 0x8000, 0xFFFF, uint16(r.Uint32()), 0} {
			RetagICRC(pkt, prev, id)
			prev = id
			want := ICRCWithIPv4ID(addr4a, addr4b, id, 0xC132, RoCEv2Port, body)
			if got := binary.LittleEndian.Uint32(pkt[n:]); got != want {
				t.Fatalf("len %d id %#04x: trailer %#08x, want %#08x", n, id, got, want)
			}
			if got, ok := RecoverIPv4ID(addr4a, addr4b, 0xC132, RoCEv2Port, pkt); !ok || got != id {
				t.Fatalf("len %d: RecoverIPv4ID = %#04x, %v; want %#04x", n, got, ok, id)
			}
		}
	}
	pkt := make([]byte, 1052)
	RetagICRC(pkt, 0, 1) // warm the cache
	if a := testing.AllocsPerRun(100, func() { RetagICRC(pkt, 0, 7); RetagICRC(pkt, 7, 0) }); a != 0 {
		t.Fatalf("RetagICRC allocates %v times", a)
	}
}

// TestPutICRCParts: a packet sealed in parts (headers, payload elsewhere,
// pad) gets the trailer PutICRC gives the joined packet, for IPv4 and
// IPv6, any split and any payload length; RetagTrailer on that trailer
// matches RetagICRC on the joined packet.
func TestPutICRCParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	pairs := [][2]netip.Addr{
		{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")},
		{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")},
	}
	for i := range 300 {
		p := pairs[i%2]
		n := rng.IntN(4097)
		hdr := BTHLen + []int{0, RETHLen, AETHLen}[rng.IntN(3)]
		whole := make([]byte, hdr+n+Pad(n)+ICRCLen)
		for j := range whole[:hdr+n] {
			whole[j] = byte(rng.Uint32())
		}
		sport := uint16(rng.Uint32())
		PutICRC(p[0], p[1], sport, 4791, whole)

		head := make([]byte, hdr+Pad(n)+ICRCLen)
		copy(head, whole[:hdr])
		payload := whole[hdr : hdr+n]
		PutICRCParts(p[0], p[1], sport, 4791, head, hdr, payload)
		if got, want := head[len(head)-ICRCLen:], whole[len(whole)-ICRCLen:]; !bytes.Equal(got, want) {
			t.Fatalf("case %d (%s, %d+%d bytes): trailer %x, want %x", i, p[0], hdr, n, got, want)
		}
		if p[0].Is4() {
			id := uint16(rng.Uint32())
			RetagICRC(whole, 0, id)
			RetagTrailer(head[len(head)-ICRCLen:], len(whole)-ICRCLen, 0, id)
			if got, want := head[len(head)-ICRCLen:], whole[len(whole)-ICRCLen:]; !bytes.Equal(got, want) {
				t.Fatalf("case %d: retagged trailer %x, want %x", i, got, want)
			}
			if !VerifyICRC(p[0], p[1], sport, 4791, whole, ICRCIPv4AnyID) {
				t.Fatalf("case %d: retagged packet does not verify", i)
			}
		}
	}
}
