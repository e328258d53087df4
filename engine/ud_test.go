package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

// Tests of the UD transport (docs/spec/roce-wire.md §7.2): DETH, Q_Keys, the
// 40-byte GRH area, the MTU limit, and silent drops.

// udQKey is the Q_Key of the test UD QPs (bit 31 clear: not controlled).
const udQKey = 0x11223344

var (
	addr6A = netip.MustParseAddr("fd00::1")
	addr6B = netip.MustParseAddr("fd00::2")
)

// udReady takes a UD QP from RESET to RTS with Q_Key qkey.
func udReady(now time.Time, q *QP, qkey uint32) {
	q.Modify(now, &Attr{State: StateInit, QKey: qkey}, AttrState|AttrQKey)
	q.Modify(now, &Attr{State: StateRTR}, AttrState)
	q.Modify(now, &Attr{State: StateRTS, SQPSN: 0x10}, AttrState|AttrSQPSN)
}

// udTo returns a UD send work request from A's MR to QP qpn at addr.
func (p *pair) udTo(id uint64, op WROp, addr netip.Addr, qpn, qkey uint32, off, n int) SendWR {
	return SendWR{ID: id, Op: op, Flags: SendSignaled, Imm: uint32(id) * 0x01010101, SGL: p.sge(p.mra, off, n),
		AV: &AV{Remote: addr}, RemoteQPN: qpn, RemoteQKey: qkey}
}

// checkGRH checks the 40-byte GRH area of a UD receive: 20 zero bytes and a
// valid IPv4 header, or an IPv6 header, for a datagram of pktLen bytes
// (BTH through ICRC) from src to dst.
func checkGRH(t *testing.T, g []byte, src, dst netip.Addr, pktLen int) {
	t.Helper()
	udpLen := wire.UDPHeaderLen + pktLen
	if src.Is4() {
		if !bytes.Equal(g[:20], make([]byte, 20)) {
			t.Fatalf("GRH area: first 20 bytes % x, want zeros", g[:20])
		}
		ip := g[20:40]
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		for sum > 0xFFFF {
			sum = sum&0xFFFF + sum>>16
		}
		s, d := src.As4(), dst.As4()
		switch {
		case ip[0] != 0x45:
			t.Fatalf("IPv4 version/IHL %#x", ip[0])
		case int(binary.BigEndian.Uint16(ip[2:])) != wire.IPv4HeaderLen+udpLen:
			t.Fatalf("IPv4 total length %d, want %d", binary.BigEndian.Uint16(ip[2:]), wire.IPv4HeaderLen+udpLen)
		case ip[9] != 17:
			t.Fatalf("IPv4 protocol %d", ip[9])
		case sum != 0xFFFF:
			t.Fatalf("IPv4 header checksum wrong: % x", ip)
		case !bytes.Equal(ip[12:16], s[:]) || !bytes.Equal(ip[16:20], d[:]):
			t.Fatalf("IPv4 addresses % x", ip[12:20])
		}
		return
	}
	s, d := src.As16(), dst.As16()
	switch {
	case g[0]>>4 != 6:
		t.Fatalf("IPv6 version %d", g[0]>>4)
	case int(binary.BigEndian.Uint16(g[4:])) != udpLen:
		t.Fatalf("IPv6 payload length %d, want %d", binary.BigEndian.Uint16(g[4:]), udpLen)
	case g[6] != 17:
		t.Fatalf("IPv6 next header %d", g[6])
	case g[7] == 0:
		t.Fatal("IPv6 hop limit 0")
	case !bytes.Equal(g[8:24], s[:]) || !bytes.Equal(g[24:40], d[:]):
		t.Fatalf("IPv6 addresses % x", g[8:40])
	}
}

// TestUDSendRecv: a UD SEND (with or without immediate) arrives with the
// GRH area filled, GRH and immediate flags, the sender's QPN and byte_len
// 40 + length; the wire shows the DETH (Q_Key, source QPN) and the target
// QPN; nothing comes back; the send completes at once.
func TestUDSendRecv(t *testing.T) {
	for _, fam := range []struct {
		name string
		a, b netip.Addr
	}{{"ipv4", addrA, addrB}, {"ipv6", addr6A, addr6B}} {
		for _, op := range []WROp{WRSend, WRSendImm} {
			for _, n := range []int{0, 1, 5, 1000, 1024} {
				for _, split := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/op=%d/len=%d/split=%v", fam.name, op, n, split), func(t *testing.T) {
						p := newPairOf(t, QPTypeUD, fam.a, fam.b, nil, nil)
						fill(p.mema, byte(n))
						for i := range p.memb {
							p.memb[i] = 0xEE
						}
						c := p.capture()
						// Exactly 40 + n bytes, in one SGE or split inside
						// the GRH area.
						sgl := p.sge(p.mrb, 0, GRHLen+n)
						if split {
							sgl = []SGE{{Addr: p.mrb.Addr, Length: 16, LKey: p.mrb.LKey}, {Addr: p.mrb.Addr + 16, Length: uint32(GRHLen + n - 16), LKey: p.mrb.LKey}}
						}
						must(t, p.b.PostRecv(&RecvWR{ID: 50, SGL: sgl}))
						p.postA(SendWR{ID: 1, Op: op, Flags: SendSignaled | SendSolicited, Imm: 0xCAFEF00D, SGL: p.sge(p.mra, 64, n),
							AV: &AV{Remote: fam.b}, RemoteQPN: p.b.QPN(), RemoteQKey: udQKey})
						sc := p.acq.take()
						checkWCs(t, "A send", sc, wc{1, StatusSuccess})
						if sc[0].Opcode != WCSend {
							t.Fatalf("send completion %+v", sc[0])
						}
						p.run(time.Second)
						assertSilent(t, c)
						pk := c.sent(true)
						wantOp := wire.UDSendOnly
						if op == WRSendImm {
							wantOp = wire.UDSendOnlyImm
						}
						if len(pk) != 1 {
							t.Fatalf("A sent:\n%s", c.dump())
						}
						s := pk[0]
						deth := s.p.DETH()
						if s.p.Op != wantOp || s.p.BTH.DestQP() != p.b.QPN() || deth.QKey() != udQKey || deth.SrcQP() != p.a.QPN() ||
							s.p.BTH.PSN() != 0x10 || s.d.Dst.Addr() != fam.b || s.d.Dst.Port() != 4791 || !s.p.BTH.SE() {
							t.Fatalf("packet %v dst %v qkey %#x srcqp %#x", s, s.d.Dst, deth.QKey(), deth.SrcQP())
						}
						if s.d.Src.Port() != wire.UDSourcePort(p.a.QPN()) {
							t.Fatalf("source port %d", s.d.Src.Port())
						}
						rc := p.brq.take()
						checkWCs(t, "B recv", rc, wc{50, StatusSuccess})
						r := rc[0]
						wantFlags := uint32(WCFlagGRH)
						if op == WRSendImm {
							wantFlags |= WCFlagWithImm
						}
						if r.Opcode != WCRecv || r.Flags != wantFlags || r.ByteLen != uint32(GRHLen+n) || r.SrcQP != p.a.QPN() || r.QPN != p.b.QPN() || !r.Solicited {
							t.Fatalf("recv completion %+v", r)
						}
						if op == WRSendImm && r.Imm != 0xCAFEF00D {
							t.Fatalf("imm %#x", r.Imm)
						}
						checkGRH(t, p.memb[:GRHLen], fam.a, fam.b, len(s.d.Buf))
						if !bytes.Equal(p.memb[GRHLen:GRHLen+n], p.mema[64:64+n]) {
							t.Fatal("payload damaged")
						}
						if p.memb[GRHLen+n] != 0xEE {
							t.Fatal("wrote past the message")
						}
					})
				}
			}
		}
	}
}

// TestUDAddressing: one UD QP sends to two QPs, two QPs send to one; the
// receiver learns each sender from src_qp. A QP in RTR already receives; one
// in INIT drops.
func TestUDAddressing(t *testing.T) {
	p := newPairOf(t, QPTypeUD, addrA, addrB, nil, nil)
	b2cq := &sliceCQ{}
	b2, err := p.hb.CreateQP(QPConfig{Type: QPTypeUD, PD: 1, MaxSendWR: 4, MaxRecvWR: 4, MaxRecvSGE: 1, RecvCQ: b2cq})
	must(t, err)
	b2.Modify(p.now, &Attr{State: StateInit, QKey: udQKey}, AttrState|AttrQKey)
	a2, err := p.ha.CreateQP(QPConfig{Type: QPTypeUD, PD: 1, MaxSendWR: 4, MaxRecvWR: 1, MaxSendSGE: 1, SendCQ: p.acq})
	must(t, err)
	udReady(p.now, a2, udQKey)
	fill(p.mema, 3)
	for i := range 4 {
		p.recvB(uint64(50+i), p.mrb, i*2048, 2048)
		must(t, b2.PostRecv(&RecvWR{ID: uint64(60 + i), SGL: p.sge(p.mrb, 65536+i*2048, 2048)}))
	}
	c := p.capture()
	// b2 is in INIT: dropped.
	p.postA(p.udTo(1, WRSend, addrB, b2.QPN(), udQKey, 0, 100))
	p.run(time.Second)
	checkWCs(t, "b2 recv in INIT", b2cq.take())
	if n := p.hb.Stats().DropState.Load(); n != 1 {
		t.Fatalf("DropState = %d", n)
	}
	b2.Modify(p.now, &Attr{State: StateRTR}, AttrState)
	p.postA(p.udTo(2, WRSend, addrB, b2.QPN(), udQKey, 0, 100))
	p.postA(p.udTo(3, WRSend, addrB, p.b.QPN(), udQKey, 0, 200))
	must(t, a2.PostSend(p.now, &SendWR{ID: 4, Op: WRSendImm, Flags: SendSignaled, Imm: 4, SGL: p.sge(p.mra, 0, 300), AV: &AV{Remote: addrB}, RemoteQPN: p.b.QPN(), RemoteQKey: udQKey}))
	must(t, a2.PostSend(p.now, &SendWR{ID: 5, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 400), AV: &AV{Remote: addrB}, RemoteQPN: b2.QPN(), RemoteQKey: udQKey}))
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, 0}, wc{2, 0}, wc{3, 0}, wc{4, 0}, wc{5, 0})
	rb := p.brq.take()
	checkWCs(t, "B recv", rb, wc{50, 0}, wc{51, 0})
	if rb[0].SrcQP != p.a.QPN() || rb[0].ByteLen != GRHLen+200 || rb[1].SrcQP != a2.QPN() || rb[1].ByteLen != GRHLen+300 || rb[1].Imm != 4 {
		t.Fatalf("B completions %+v", rb)
	}
	r2 := b2cq.take()
	checkWCs(t, "b2 recv", r2, wc{60, 0}, wc{61, 0})
	if r2[0].SrcQP != p.a.QPN() || r2[0].ByteLen != GRHLen+100 || r2[1].SrcQP != a2.QPN() || r2[1].ByteLen != GRHLen+400 || r2[0].QPN != b2.QPN() {
		t.Fatalf("b2 completions %+v", r2)
	}
	assertSilent(t, c)
}

// TestUDQKey: a Q_Key mismatch is dropped and counted, leaving the receive
// for the next datagram; a work request Q_Key with bit 31 set (controlled)
// makes the sender use its own QP's Q_Key.
func TestUDQKey(t *testing.T) {
	cases := []struct {
		name      string
		senderKey uint32 // the sending QP's own Q_Key
		wrKey     uint32
		wireKey   uint32
		delivered bool
	}{
		{"match", udQKey, udQKey, udQKey, true},
		{"mismatch", udQKey, udQKey + 1, udQKey + 1, false},
		{"mismatch-bit31", udQKey, udQKey | 0x80000000, udQKey, true}, // controlled: the QP's own key, which matches
		{"controlled-own-key-matches", udQKey, 0x80000000, udQKey, true},
		{"controlled-own-key-differs", 0x0BAD, 0x8000FFFF, 0x0BAD, false},
		{"uncontrolled-ignores-own-key", 0x0BAD, udQKey, udQKey, true},
		{"controlled-receiver-key", 0x80010000, 0x80010000, 0x80010000, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPairOf(t, QPTypeUD, addrA, addrB, nil, nil)
			p.a.Modify(p.now, &Attr{QKey: tc.senderKey}, AttrQKey)
			c := p.capture()
			p.recvB(50, p.mrb, 0, 2048)
			p.postA(p.udTo(1, WRSend, addrB, p.b.QPN(), tc.wrKey, 0, 100))
			p.run(time.Second)
			if got := c.sent(true)[0].p.DETH().QKey(); got != tc.wireKey {
				t.Fatalf("DETH Q_Key %#x, want %#x", got, tc.wireKey)
			}
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
			drops := p.hb.Stats().DropQKey.Load()
			if tc.delivered {
				checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
				if drops != 0 {
					t.Fatalf("DropQKey = %d", drops)
				}
				return
			}
			checkWCs(t, "B recv", p.brq.take())
			if drops != 1 {
				t.Fatalf("DropQKey = %d, want 1", drops)
			}
			assertSilent(t, c)
			// The receive is still there for a datagram with the right key.
			p.postA(p.udTo(2, WRSend, addrB, p.b.QPN(), udQKey, 0, 10))
			p.run(time.Second)
			checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
		})
	}
}

// TestUDTooLong: a message larger than the port MTU sends nothing and still
// completes successfully; one of exactly the MTU is sent.
func TestUDTooLong(t *testing.T) {
	for _, mtu := range []int{0, 1024, 2048, 4096, 9000} { // above 4096: clamped to 4096
		t.Run(fmt.Sprintf("mtu=%d", mtu), func(t *testing.T) {
			p := newPairOf(t, QPTypeUD, addrA, addrB, func(c *HostConfig) { c.MTU = mtu }, nil)
			eff := mtu
			if eff == 0 {
				eff = 1024 // the default
			}
			eff = min(eff, 4096)
			fill(p.mema, 9)
			c := p.capture()
			p.recvB(50, p.mrb, 0, 8192)
			p.recvB(51, p.mrb, 8192, 8192)
			p.postA(p.udTo(1, WRSend, addrB, p.b.QPN(), udQKey, 0, eff+1))
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
			if len(p.la.q) != 0 {
				t.Fatalf("a too-long UD message went out")
			}
			p.postA(p.udTo(2, WRSend, addrB, p.b.QPN(), udQKey, 0, 2*eff+7))
			p.postA(p.udTo(3, WRSendImm, addrB, p.b.QPN(), udQKey, 0, eff))
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{2, StatusSuccess}, wc{3, StatusSuccess})
			if n := p.ha.Stats().DropUDTooLong.Load(); n != 2 {
				t.Fatalf("DropUDTooLong = %d", n)
			}
			if pk := c.sent(true); len(pk) != 1 || len(pk[0].p.Payload) != eff {
				t.Fatalf("A sent:\n%s", c.dump())
			}
			r := p.brq.take()
			checkWCs(t, "B recv", r, wc{50, StatusSuccess})
			if r[0].ByteLen != uint32(GRHLen+eff) || !bytes.Equal(p.memb[GRHLen:GRHLen+eff], p.mema[:eff]) {
				t.Fatalf("recv %+v", r[0])
			}
			if p.a.State() != StateRTS {
				t.Fatalf("A state %d", p.a.State())
			}
		})
	}
}

// TestUDNoReceive: no receive posted: a silent, counted drop.
func TestUDNoReceive(t *testing.T) {
	p := newPairOf(t, QPTypeUD, addrA, addrB, nil, nil)
	c := p.capture()
	p.postA(p.udTo(1, WRSend, addrB, p.b.QPN(), udQKey, 0, 100))
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
	checkWCs(t, "B recv", p.brq.take())
	if n := p.hb.Stats().DropNoRecv.Load(); n != 1 {
		t.Fatalf("DropNoRecv = %d", n)
	}
	assertSilent(t, c)
	p.recvB(50, p.mrb, 0, 2048)
	p.postA(p.udTo(2, WRSend, addrB, p.b.QPN(), udQKey, 0, 100))
	p.run(time.Second)
	checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
	if p.b.State() != StateRTS {
		t.Fatalf("B state %d", p.b.State())
	}
}

// TestUDSmallBuffer: a receive smaller than 40 + length completes with
// LOC_LEN_ERR; the QP keeps working.
func TestUDSmallBuffer(t *testing.T) {
	for _, tc := range []struct{ n, buf int }{{100, 139}, {100, 100}, {0, 39}, {0, 0}, {1024, 1063}} {
		t.Run(fmt.Sprintf("len=%d/buf=%d", tc.n, tc.buf), func(t *testing.T) {
			p := newPairOf(t, QPTypeUD, addrA, addrB, nil, nil)
			fill(p.mema, 1)
			c := p.capture()
			var sgl []SGE
			if tc.buf > 0 {
				sgl = p.sge(p.mrb, 0, tc.buf)
			}
			must(t, p.b.PostRecv(&RecvWR{ID: 50, SGL: sgl}))
			p.recvB(51, p.mrb, 8192, GRHLen+tc.n)
			p.postA(p.udTo(1, WRSend, addrB, p.b.QPN(), udQKey, 0, tc.n))
			p.postA(p.udTo(2, WRSend, addrB, p.b.QPN(), udQKey, 0, tc.n))
			p.run(time.Second)
			r := p.brq.take()
			checkWCs(t, "B recv", r, wc{50, StatusLocLenErr}, wc{51, StatusSuccess})
			if r[1].ByteLen != uint32(GRHLen+tc.n) || !bytes.Equal(p.memb[8192+GRHLen:8192+GRHLen+tc.n], p.mema[:tc.n]) {
				t.Fatalf("second receive %+v", r[1])
			}
			if p.b.State() != StateRTS {
				t.Fatalf("B state %d", p.b.State())
			}
			assertSilent(t, c)
		})
	}
}

// TestUDLossy sends 2,000 UD datagrams of random sizes over a lossy network
// (IPv4 and IPv6): each delivered datagram is intact, with a valid GRH area;
// lost ones are simply absent; the sender completes everything.
func TestUDLossy(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b netip.Addr
		seed int64
	}{{"ipv4", addrA, addrB, 11}, {"ipv6", addr6A, addr6B, 12}} {
		t.Run(tc.name, func(t *testing.T) { udLossy(t, tc.a, tc.b, tc.seed) })
	}
}

func udLossy(t *testing.T, aAddr, bAddr netip.Addr, seed int64) {
	const (
		msgs    = 2000
		slot    = GRHLen + 1024
		nRecv   = 64
		perTick = 4
		tick    = 30 * time.Microsecond
	)
	n := newLossyNet(t, seed, lossyFaults)
	ha, hb := n.host(aAddr, nil), n.host(bAddr, nil)
	acq, brq := &sliceCQ{}, &sliceCQ{}
	a := n.qp(ha, QPConfig{Type: QPTypeUD, PD: 1, MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, SendCQ: acq})
	b := n.qp(hb, QPConfig{Type: QPTypeUD, PD: 1, MaxSendWR: 1, MaxRecvWR: nRecv, MaxRecvSGE: 1, RecvCQ: brq})
	udReady(n.now, a, udQKey)
	udReady(n.now, b, udQKey)
	mema, memb := make([]byte, 64*1024), make([]byte, nRecv*slot)
	mra := ha.Mem().Register(1, mema, AccessLocalWrite)
	mrb := hb.Mem().Register(1, memb, AccessLocalWrite)
	post := func(id uint64) {
		must(t, b.PostRecv(&RecvWR{ID: id, SGL: []SGE{{Addr: mrb.Addr + id*slot, Length: slot, LKey: mrb.LKey}}}))
	}
	for i := range nRecv {
		post(uint64(i))
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0xD06))
	counts := make([]int, msgs)
	lens := make([]int, msgs)
	total := 0
	drain := func() {
		for _, r := range brq.take() {
			if r.Status != StatusSuccess || r.Flags&WCFlagGRH == 0 || r.SrcQP != a.QPN() || r.ByteLen < GRHLen {
				t.Fatalf("receive completion %+v", r)
			}
			buf := memb[int(r.WRID)*slot:][:r.ByteLen]
			seq, err := unstamp(buf[GRHLen:])
			if err != nil {
				t.Fatalf("delivered a damaged datagram: %v", err)
			}
			if int(seq) >= msgs || lens[seq] != int(r.ByteLen)-GRHLen {
				t.Fatalf("seq %d: %d bytes", seq, r.ByteLen)
			}
			if r.Flags&WCFlagWithImm != 0 && r.Imm != seq {
				t.Fatalf("seq %d: imm %d", seq, r.Imm)
			}
			pktLen := wire.PacketLen(wire.UDSendOnly, lens[seq])
			if r.Flags&WCFlagWithImm != 0 {
				pktLen = wire.PacketLen(wire.UDSendOnlyImm, lens[seq])
			}
			checkGRH(t, buf[:GRHLen], aAddr, bAddr, pktLen)
			counts[seq]++
			total++
			post(r.WRID)
		}
	}
	sent := 0
	nextPost := n.now
	for iter := 0; ; iter++ {
		if iter > 1_000_000 {
			t.Fatal("no end")
		}
		if sent < msgs && !n.now.Before(nextPost) {
			for range perTick {
				if sent == msgs {
					break
				}
				ln := stampMin + rng.IntN(1024-stampMin+1)
				lens[sent] = ln
				off := (sent % 64) * 1024
				stamp(mema[off:off+ln], uint32(sent))
				op := WRSend
				if rng.IntN(2) == 0 {
					op = WRSendImm
				}
				must(t, a.PostSend(n.now, &SendWR{ID: uint64(sent), Op: op, Flags: SendSignaled, Imm: uint32(sent),
					SGL: []SGE{{Addr: mra.Addr + uint64(off), Length: uint32(ln), LKey: mra.LKey}},
					AV:  &AV{Remote: bAddr}, RemoteQPN: b.QPN(), RemoteQKey: udQKey}))
				sent++
			}
			nextPost = n.now.Add(tick)
		}
		limit := nextPost
		if sent == msgs {
			limit = n.now.Add(time.Second)
		}
		moved := n.step(limit)
		drain()
		if sent == msgs && !moved && n.idle() {
			break
		}
	}
	sc := acq.take()
	if len(sc) != msgs {
		t.Fatalf("%d send completions", len(sc))
	}
	for i, c := range sc {
		if c.Status != StatusSuccess || c.WRID != uint64(i) {
			t.Fatalf("send completion %d: %+v", i, c)
		}
	}
	uniq := 0
	for _, c := range counts {
		if c > 0 {
			uniq++
		}
	}
	ns := n.net.Stats()
	st := hb.Stats()
	if uniq < msgs*8/10 || uniq == msgs {
		t.Fatalf("%d of %d datagrams delivered", uniq, msgs)
	}
	if total-uniq > int(ns.Duplicated) {
		t.Fatalf("%d repeats, more than the %d duplicated datagrams", total-uniq, ns.Duplicated)
	}
	if ns.Corrupted == 0 || st.DropICRC.Load() == 0 {
		t.Fatalf("corruption not exercised: %d corrupted, %d ICRC drops", ns.Corrupted, st.DropICRC.Load())
	}
	t.Logf("delivered %d (%d distinct) of %d; net %+v; B drops: ICRC %d, Q_Key %d, no receive %d",
		total, uniq, msgs, ns, st.DropICRC.Load(), st.DropQKey.Load(), st.DropNoRecv.Load())
}
