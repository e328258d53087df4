package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/link/memlink"
	"github.com/rdma-go/rdma-go/wire"
)

// Tests of the UC transport (docs/spec/roce-wire.md §7.1): nothing flows back, the
// requester completes on send, and the responder drops whatever follows a
// gap up to the next FIRST or ONLY packet, so that a partial or mixed
// message is never delivered. This file also holds the helpers that the UD,
// SRQ and event tests share: pairs of any QP type and a lossy memlink world.

// newPairOf is newPair for any QP type and host addresses, with hc applied
// to both host configurations and qc to each QP configuration (isB tells
// which; the hosts exist by then). RC and UC
// QPs are connected as connect does; UD QPs get Q_Key udQKey and go to RTS.
func newPairOf(t *testing.T, typ QPType, a, b netip.Addr, hc func(*HostConfig), qc func(p *pair, isB bool, c *QPConfig)) *pair {
	t.Helper()
	p := &pair{t: t, now: time.Unix(1000, 0)}
	p.la, p.lb = &queueLink{}, &queueLink{}
	ca := HostConfig{Addr: a, Link: p.la, ICRC: wire.ICRCIPv4Strict}
	cb := HostConfig{Addr: b, Link: p.lb, ICRC: wire.ICRCIPv4Strict}
	if hc != nil {
		hc(&ca)
		hc(&cb)
	}
	p.ha, p.hb = NewHost(ca), NewHost(cb)
	p.acq, p.bcq, p.arq, p.brq = &sliceCQ{}, &sliceCQ{}, &sliceCQ{}, &sliceCQ{}
	for _, isB := range []bool{false, true} {
		cfg := QPConfig{Type: typ, PD: 1, MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInline: 64,
			SendCQ: p.acq, RecvCQ: p.arq}
		h, q := p.ha, &p.a
		if isB {
			cfg.SendCQ, cfg.RecvCQ = p.bcq, p.brq
			h, q = p.hb, &p.b
		}
		if qc != nil {
			qc(p, isB, &cfg)
		}
		var err error
		if *q, err = h.CreateQP(cfg); err != nil {
			t.Fatal(err)
		}
	}
	p.mema, p.memb = make([]byte, 1<<20), make([]byte, 1<<20)
	p.mra = p.ha.Mem().Register(1, p.mema, AccessLocalWrite|allRemote)
	p.mrb = p.hb.Mem().Register(1, p.memb, AccessLocalWrite|allRemote)
	if typ == QPTypeUD {
		udReady(p.now, p.a, udQKey)
		udReady(p.now, p.b, udQKey)
	} else {
		connect(p.now, p.a, p.b, b, 0x100, 0x200, 1024)
		connect(p.now, p.b, p.a, a, 0x200, 0x100, 1024)
	}
	return p
}

// newUCPair is two UC QPs on 127.0.0.1 and 127.0.0.2, PMTU 1024.
func newUCPair(t *testing.T) *pair { return newPairOf(t, QPTypeUC, addrA, addrB, nil, nil) }

// assertSilent fails if B sent anything: UC and UD never answer.
func assertSilent(t *testing.T, c *capture) {
	t.Helper()
	if n := len(c.sent(false)); n != 0 {
		t.Fatalf("B sent %d packets:\n%s", n, c.dump())
	}
}

// ucOps maps a UC opcode sequence for a message of n bytes (PMTU 1024).
func ucOps(op WROp, n int) []wire.Opcode {
	pk := max(1, (n+1023)/1024)
	var out []wire.Opcode
	for i := range pk {
		out = append(out, opcodeFor(QPTypeUC, op, i == 0, i == pk-1))
	}
	return out
}

// TestUCOperations: SEND, SEND with immediate, WRITE and WRITE with
// immediate, single- and multi-packet. The send completes when its last
// packet is on the wire (before any delivery), the opcodes are UC's, and
// nothing comes back.
func TestUCOperations(t *testing.T) {
	for _, op := range []WROp{WRSend, WRSendImm, WRWrite, WRWriteImm} {
		for _, n := range []int{0, 1, 3, 1023, 1024, 1025, 4096, 5000, 9000} {
			t.Run(fmt.Sprintf("op=%d/len=%d", op, n), func(t *testing.T) {
				p := newUCPair(t)
				fill(p.mema, byte(n))
				c := p.capture()
				p.recvB(50, p.mrb, 0, 16384)
				const wOff = 65536
				wr := SendWR{ID: 7, Op: op, Flags: SendSignaled | SendSolicited, Imm: 0xA1B2C3D4, SGL: p.sge(p.mra, 100, n)}
				if op == WRWrite || op == WRWriteImm {
					wr.RemoteAddr, wr.RKey = p.mrb.Addr+wOff, p.mrb.RKey
				}
				p.postA(wr)
				// Complete on send: before B has seen a single packet.
				sc := p.acq.take()
				checkWCs(t, "A send", sc, wc{7, StatusSuccess})
				wantOp := WCSend
				if op == WRWrite || op == WRWriteImm {
					wantOp = WCWrite
				}
				if sc[0].Opcode != wantOp || sc[0].ByteLen != uint32(n) || sc[0].QPN != p.a.QPN() {
					t.Fatalf("send completion %+v", sc[0])
				}
				if len(p.la.q) != len(ucOps(op, n)) {
					t.Fatalf("%d packets queued, want %d", len(p.la.q), len(ucOps(op, n)))
				}
				p.run(time.Second)
				assertSilent(t, c)
				got := c.sent(true)
				want := ucOps(op, n)
				if len(got) != len(want) {
					t.Fatalf("A sent %d packets, want %d:\n%s", len(got), len(want), c.dump())
				}
				for i, s := range got {
					if s.p.Op != want[i] || s.p.BTH.PSN() != wire.PSN(0x100+i) || s.p.BTH.DestQP() != p.b.QPN() {
						t.Fatalf("packet %d: %v, want %v", i, s, want[i])
					}
				}
				if s := p.ha.Stats(); s.Retransmits.Load() != 0 {
					t.Fatal("UC retransmitted")
				}
				noDeadline(t, "A", p.a)
				if a := p.a.Attr(); a.SQPSN != uint32(0x100+len(want)) {
					t.Fatalf("A next PSN %#x", a.SQPSN)
				}
				if a := p.b.Attr(); a.RQPSN != uint32(0x100+len(want)) {
					t.Fatalf("B expected PSN %#x", a.RQPSN)
				}
				rc := p.brq.take()
				switch op {
				case WRWrite:
					checkWCs(t, "B recv", rc)
				default:
					checkWCs(t, "B recv", rc, wc{50, StatusSuccess})
					r := rc[0]
					wantOp, wantFlags := WCRecv, uint32(0)
					if op == WRWriteImm {
						wantOp = WCRecvRDMAWithImm
					}
					if op != WRSend {
						wantFlags = WCFlagWithImm
					}
					if r.Opcode != wantOp || r.Flags != wantFlags || r.ByteLen != uint32(n) || r.QPN != p.b.QPN() || r.SrcQP != p.a.QPN() || !r.Solicited {
						t.Fatalf("recv completion %+v", r)
					}
					if op != WRSend && r.Imm != 0xA1B2C3D4 {
						t.Fatalf("imm %#x", r.Imm)
					}
				}
				dst := p.memb[:n]
				if op == WRWrite || op == WRWriteImm {
					dst = p.memb[wOff : wOff+n]
				}
				if !bytes.Equal(dst, p.mema[100:100+n]) {
					t.Fatal("data damaged")
				}
				if p.a.State() != StateRTS || p.b.State() != StateRTS {
					t.Fatalf("states %d %d", p.a.State(), p.b.State())
				}
			})
		}
	}
}

// TestUCLostMiddle: a SEND that loses a middle packet is not delivered; its
// receive WQE is reset and the next message lands in it intact.
func TestUCLostMiddle(t *testing.T) {
	for _, next := range []WROp{WRSend, WRSendImm, WRWriteImm} {
		for _, lost := range []int{1, 2, 3} { // packet index of a 4-packet message; 3 is the LAST
			t.Run(fmt.Sprintf("next=%d/lost=%d", next, lost), func(t *testing.T) {
				p := newUCPair(t)
				fill(p.mema[:8192], 0x10)
				fill(p.mema[8192:16384], 0x77)
				c := p.capture()
				c.dropA = once(func(s *sentPkt) bool { return s.p.BTH.PSN() == wire.PSN(0x100+lost) })
				p.recvB(50, p.mrb, 0, 8192)
				p.recvB(51, p.mrb, 8192, 8192)
				p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 4000)})
				p.run(time.Second)
				checkWCs(t, "B recv after the damaged message", p.brq.take())
				const n2 = 2500
				wr := SendWR{ID: 2, Op: next, Flags: SendSignaled, Imm: 99, SGL: p.sge(p.mra, 8192, n2)}
				if next == WRWriteImm {
					wr.RemoteAddr, wr.RKey = p.mrb.Addr+100000, p.mrb.RKey
				}
				p.postA(wr)
				p.run(time.Second)
				checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess}, wc{2, StatusSuccess})
				r := p.brq.take()
				checkWCs(t, "B recv", r, wc{50, StatusSuccess})
				if r[0].ByteLen != n2 {
					t.Fatalf("byte_len %d", r[0].ByteLen)
				}
				if next == WRWriteImm {
					if r[0].Opcode != WCRecvRDMAWithImm || r[0].Imm != 99 || !bytes.Equal(p.memb[100000:100000+n2], p.mema[8192:8192+n2]) {
						t.Fatalf("write with imm: %+v", r[0])
					}
				} else if !bytes.Equal(p.memb[:n2], p.mema[8192:8192+n2]) {
					t.Fatal("second message damaged")
				}
				// The next message takes WQE 51: nothing was leaked.
				p.postA(SendWR{ID: 3, Op: WRSend, SGL: p.sge(p.mra, 0, 10)})
				p.run(time.Second)
				checkWCs(t, "B recv", p.brq.take(), wc{51, StatusSuccess})
				assertSilent(t, c)
				if p.b.State() != StateRTS {
					t.Fatalf("B state %d", p.b.State())
				}
				st := p.hb.Stats()
				if lost < 3 && st.DropOutOfSequence.Load() != uint64(3-lost) {
					t.Fatalf("DropOutOfSequence = %d, want %d", st.DropOutOfSequence.Load(), 3-lost)
				}
			})
		}
	}
}

// TestUCLostFirst: without its FIRST packet the rest of a message is
// dropped (SEND: no receive consumed; WRITE: memory untouched).
func TestUCLostFirst(t *testing.T) {
	for _, op := range []WROp{WRSend, WRWrite, WRWriteImm} {
		t.Run(fmt.Sprintf("op=%d", op), func(t *testing.T) {
			p := newUCPair(t)
			fill(p.mema, 0x31)
			c := p.capture()
			c.dropA = once(func(s *sentPkt) bool { return s.p.BTH.PSN() == 0x100 })
			p.recvB(50, p.mrb, 0, 8192)
			snap := clone(p.memb)
			p.postA(SendWR{ID: 1, Op: op, Imm: 5, SGL: p.sge(p.mra, 0, 4000), RemoteAddr: p.mrb.Addr + 65536, RKey: p.mrb.RKey})
			p.run(time.Second)
			checkWCs(t, "B recv", p.brq.take())
			if !bytes.Equal(p.memb, snap) {
				t.Fatal("B's memory changed")
			}
			if n := p.hb.Stats().DropOutOfSequence.Load(); n != 3 {
				t.Fatalf("DropOutOfSequence = %d, want 3", n)
			}
			p.postA(SendWR{ID: 2, Op: WRSend, SGL: p.sge(p.mra, 0, 1500)})
			p.run(time.Second)
			r := p.brq.take()
			checkWCs(t, "B recv", r, wc{50, StatusSuccess})
			if r[0].ByteLen != 1500 || !bytes.Equal(p.memb[:1500], p.mema[:1500]) {
				t.Fatal("second message damaged")
			}
			assertSilent(t, c)
		})
	}
}

// TestUCWriteRejected: a WRITE with a bad R_Key, outside its MR, to an MR
// or QP without REMOTE_WRITE is dropped silently; memory is untouched, the
// QP stays in RTS, a WRITE with immediate consumes no receive, and the next
// message is delivered.
func TestUCWriteRejected(t *testing.T) {
	cases := []struct {
		name string
		prep func(p *pair) (va uint64, rkey uint32)
	}{
		{"bad-rkey", func(p *pair) (uint64, uint32) { return p.mrb.Addr, p.mrb.RKey ^ 1 }},
		{"past-end", func(p *pair) (uint64, uint32) { return p.mrb.Addr + uint64(len(p.memb)) - 50, p.mrb.RKey }},
		{"mr-without-remote-write", func(p *pair) (uint64, uint32) {
			mr := p.hb.Mem().Register(1, p.memb[:65536], AccessLocalWrite|AccessRemoteRead)
			return mr.Addr, mr.RKey
		}},
		{"qp-without-remote-write", func(p *pair) (uint64, uint32) {
			p.b.Modify(p.now, &Attr{AccessFlags: AccessRemoteRead}, AttrAccessFlags)
			return p.mrb.Addr, p.mrb.RKey
		}},
	}
	for _, tc := range cases {
		for _, op := range []WROp{WRWrite, WRWriteImm} {
			for _, n := range []int{100, 3000} {
				t.Run(fmt.Sprintf("%s/op=%d/len=%d", tc.name, op, n), func(t *testing.T) {
					p := newUCPair(t)
					fill(p.mema, 0x42)
					fill(p.memb, 0x24)
					rbuf := make([]byte, 8192)
					rmr := p.hb.Mem().Register(1, rbuf, AccessLocalWrite)
					p.recvB(50, rmr, 0, 8192)
					va, rkey := tc.prep(p)
					snap := clone(p.memb)
					c := p.capture()
					p.postA(SendWR{ID: 1, Op: op, Flags: SendSignaled, Imm: 1, SGL: p.sge(p.mra, 0, n), RemoteAddr: va, RKey: rkey})
					p.run(time.Second)
					checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
					checkWCs(t, "B recv", p.brq.take())
					if !bytes.Equal(p.memb, snap) {
						t.Fatal("B's memory changed")
					}
					if p.b.State() != StateRTS || p.a.State() != StateRTS {
						t.Fatalf("states %d %d", p.a.State(), p.b.State())
					}
					if p.hb.Stats().DropUCMessage.Load() == 0 {
						t.Fatal("drop not counted")
					}
					p.postA(SendWR{ID: 2, Op: WRSend, SGL: p.sge(p.mra, 0, 700)})
					p.run(time.Second)
					r := p.brq.take()
					checkWCs(t, "B recv", r, wc{50, StatusSuccess})
					if r[0].ByteLen != 700 || !bytes.Equal(rbuf[:700], p.mema[:700]) {
						t.Fatal("next message damaged")
					}
					assertSilent(t, c)
				})
			}
		}
	}
}

// TestUCNoReceive: a SEND (or WRITE with immediate) with no receive posted
// is dropped silently — no RNR NAK — and the QP keeps working.
func TestUCNoReceive(t *testing.T) {
	for _, op := range []WROp{WRSend, WRSendImm, WRWriteImm} {
		for _, n := range []int{10, 3000} {
			t.Run(fmt.Sprintf("op=%d/len=%d", op, n), func(t *testing.T) {
				p := newUCPair(t)
				fill(p.mema, 0x55)
				c := p.capture()
				p.postA(SendWR{ID: 1, Op: op, Flags: SendSignaled, SGL: p.sge(p.mra, 0, n), RemoteAddr: p.mrb.Addr + 65536, RKey: p.mrb.RKey})
				p.run(time.Second)
				checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
				checkWCs(t, "B recv", p.brq.take())
				st := p.hb.Stats()
				if st.DropNoRecv.Load() != 1 || st.RNRNAKsSent.Load() != 0 {
					t.Fatalf("DropNoRecv %d, RNR NAKs %d", st.DropNoRecv.Load(), st.RNRNAKsSent.Load())
				}
				assertSilent(t, c)
				if p.b.State() != StateRTS {
					t.Fatalf("B state %d", p.b.State())
				}
				p.recvB(50, p.mrb, 0, 8192)
				p.postA(SendWR{ID: 2, Op: op, SGL: p.sge(p.mra, 0, n), RemoteAddr: p.mrb.Addr + 65536, RKey: p.mrb.RKey})
				p.run(time.Second)
				r := p.brq.take()
				checkWCs(t, "B recv", r, wc{50, StatusSuccess})
				if r[0].ByteLen != uint32(n) {
					t.Fatalf("byte_len %d", r[0].ByteLen)
				}
				assertSilent(t, c)
			})
		}
	}
}

// ucModel is the responder rule of §7.1 applied to a packet order: which
// messages (indexed by their first PSN) it delivers.
func ucModel(start wire.PSN, pkts []*sentPkt) map[wire.PSN]bool {
	e, dropping := start, false
	var cur wire.PSN
	inMsg := false
	out := map[wire.PSN]bool{}
	for _, s := range pkts {
		psn, f := s.p.BTH.PSN(), s.p.Flags
		if psn != e || dropping {
			if f&wire.IsFirst == 0 {
				dropping, e = true, psn.Next()
				inMsg = false
				continue
			}
			dropping = false
		}
		e = psn.Next()
		if f&wire.IsFirst != 0 {
			cur, inMsg = psn, true
		}
		if f&wire.IsLast != 0 && inMsg {
			out[cur] = true
			inMsg = false
		}
	}
	return out
}

// TestUCReorder delivers the packets of two multi-packet SENDs in many
// orders: a delivered message is always one whole message, never part of one
// or a mix of both, and exactly the messages the §7.1 rule accepts arrive.
func TestUCReorder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const n1, n2 = 3000, 2100 // 3 packets each
	perms := [][]int{{0, 1, 2, 3, 4, 5}, {3, 4, 5, 0, 1, 2}, {0, 3, 1, 4, 2, 5}, {0, 1, 3, 2, 4, 5}, {5, 4, 3, 2, 1, 0}, {0, 1, 2, 2, 3, 4, 5}}
	for range 300 {
		perm := rng.Perm(6)
		if rng.IntN(4) == 0 { // duplicate one packet
			perm = append(perm, perm[rng.IntN(6)])
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		perms = append(perms, perm)
	}
	for _, perm := range perms {
		p := newUCPair(t)
		fill(p.mema[:n1], 0xA0)
		fill(p.mema[4096:4096+n2], 0x0B)
		c := p.capture()
		p.recvB(50, p.mrb, 0, 8192)
		p.recvB(51, p.mrb, 8192, 8192)
		p.recvB(52, p.mrb, 16384, 8192)
		p.postA(SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, n1)})
		p.postA(SendWR{ID: 2, Op: WRSendImm, Imm: 2, SGL: p.sge(p.mra, 4096, n2)})
		real := p.la.q
		p.la.q = nil
		if len(real) != 6 {
			t.Fatalf("%d packets", len(real))
		}
		var order []*sentPkt
		for _, i := range perm {
			p.hb.Receive(p.now, []link.Datagram{real[i]})
			order = append(order, c.sent(true)[i])
		}
		want := ucModel(0x100, order)
		got := map[wire.PSN]bool{}
		for k, r := range p.brq.take() {
			if r.Status != StatusSuccess || r.WRID != uint64(50+k) {
				t.Fatalf("perm %v: completion %d: %+v", perm, k, r)
			}
			buf := p.memb[k*8192:]
			switch {
			case r.ByteLen == n1 && r.Flags == 0 && bytes.Equal(buf[:n1], p.mema[:n1]):
				got[0x100] = true
			case r.ByteLen == n2 && r.Flags == WCFlagWithImm && r.Imm == 2 && bytes.Equal(buf[:n2], p.mema[4096:4096+n2]):
				got[0x103] = true
			default:
				t.Fatalf("perm %v: completion %+v is not one whole message", perm, r)
			}
		}
		if len(got) != len(want) || got[0x100] != want[0x100] || got[0x103] != want[0x103] {
			t.Fatalf("perm %v: delivered %v, the §7.1 rule delivers %v", perm, got, want)
		}
		if p.b.State() != StateRTS {
			t.Fatalf("perm %v: state %d", perm, p.b.State())
		}
		assertSilent(t, c)
	}
}

// ---- A lossy memlink world, shared by the UC, UD and SRQ tests ----

// lossyNet runs hosts over one memlink.Network on a fake clock.
type lossyNet struct {
	t     *testing.T
	start time.Time
	now   time.Time
	net   *memlink.Network
	hosts map[netip.Addr]*Host
	addrs []netip.Addr // in creation order, for deterministic delivery
	qps   []*QP
}

// lossyLink is a host's Sender into the network.
type lossyLink struct{ n *lossyNet }

func (l lossyLink) Send(b []link.Datagram) error {
	for _, d := range b {
		l.n.net.Send(l.n.now, d)
	}
	return nil
}

func (l lossyLink) SourcePort(w uint16) uint16 { return w }

func newLossyNet(t *testing.T, seed int64, f memlink.Faults) *lossyNet {
	n := &lossyNet{t: t, start: time.Unix(5000, 0), net: memlink.NewNetwork(seed, f), hosts: map[netip.Addr]*Host{}}
	n.now = n.start
	return n
}

func (n *lossyNet) host(a netip.Addr, hc func(*HostConfig)) *Host {
	cfg := HostConfig{Addr: a, Link: lossyLink{n}, ICRC: wire.ICRCIPv4Strict}
	if hc != nil {
		hc(&cfg)
	}
	h := NewHost(cfg)
	n.hosts[a] = h
	n.addrs = append(n.addrs, a)
	return h
}

// qp creates a QP on h and registers it for timers.
func (n *lossyNet) qp(h *Host, cfg QPConfig) *QP {
	q, err := h.CreateQP(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	n.qps = append(n.qps, q)
	return q
}

// step moves the clock to the next delivery or QP deadline, or to limit if
// none comes first, delivers what is due (one Receive per host) and runs
// expired timers. It reports whether anything was due before limit.
func (n *lossyNet) step(limit time.Time) bool {
	next, ok := n.net.NextDelivery()
	for _, q := range n.qps {
		if d, has := q.Deadline(); has && (!ok || d.Before(next)) {
			next, ok = d, true
		}
	}
	if !ok || next.After(limit) {
		if limit.After(n.now) {
			n.now = limit
		}
		return false
	}
	if next.After(n.now) {
		n.now = next
	}
	batches := map[netip.Addr][]link.Datagram{}
	for {
		d, ok := n.net.Pop(n.now)
		if !ok {
			break
		}
		a := d.Dst.Addr().Unmap()
		if n.hosts[a] == nil {
			n.t.Fatalf("datagram for unknown host %v", a)
		}
		batches[a] = append(batches[a], d)
	}
	for _, a := range n.addrs {
		if b := batches[a]; len(b) > 0 {
			n.hosts[a].Receive(n.now, b)
		}
	}
	for _, q := range n.qps {
		if d, has := q.Deadline(); has && !d.After(n.now) {
			q.OnTimer(n.now)
		}
	}
	return true
}

// idle reports whether nothing is in flight and no timer is armed.
func (n *lossyNet) idle() bool {
	if _, ok := n.net.NextDelivery(); ok {
		return false
	}
	for _, q := range n.qps {
		if _, ok := q.Deadline(); ok {
			return false
		}
	}
	return true
}

// lossyFaults are the faults of the lossy runs; Jitter is 0 so that the
// Reorder fault is the only source of reordering.
var lossyFaults = memlink.Faults{Drop: 0.05, Reorder: 0.05, Duplicate: 0.01, Corrupt: 0.01,
	Delay: 5 * time.Microsecond, ReorderDelay: 150 * time.Microsecond}

// Stamped messages: seq (4 bytes), length (4), bytes derived from seq, and
// a CRC-32 of everything before it (4). Minimum length stampMin.
const stampMin = 12

func stamp(b []byte, seq uint32) {
	binary.LittleEndian.PutUint32(b, seq)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)))
	x := seq*2654435761 + 1
	for i := 8; i < len(b)-4; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
}

// unstamp checks that b is exactly one whole stamped message and returns its
// sequence number.
func unstamp(b []byte) (uint32, error) {
	if len(b) < stampMin {
		return 0, fmt.Errorf("%d bytes: shorter than a stamp", len(b))
	}
	seq := binary.LittleEndian.Uint32(b)
	if n := binary.LittleEndian.Uint32(b[4:]); n != uint32(len(b)) {
		return seq, fmt.Errorf("seq %d: %d bytes delivered, stamped length %d", seq, len(b), n)
	}
	want := make([]byte, len(b))
	stamp(want, seq)
	if !bytes.Equal(b, want) {
		return seq, fmt.Errorf("seq %d: %d bytes do not match the message", seq, len(b))
	}
	return seq, nil
}

// TestUCLossy sends 2,000 UC messages of random sizes (1 to 6 packets,
// SEND and SEND with immediate) over a lossy network. Every delivered
// message is whole and intact. With drops and corruption only, deliveries
// are in strictly increasing order; with reordering and duplication, §7.1
// accepts any FIRST or ONLY packet whatever its PSN, so a late or duplicated
// message may be delivered again or out of order — but only as a whole
// message, and no more often than the network reordered or duplicated.
func TestUCLossy(t *testing.T) {
	inOrder := memlink.Faults{Drop: 0.05, Corrupt: 0.01, Delay: 5 * time.Microsecond}
	for _, tc := range []struct {
		name   string
		f      memlink.Faults
		strict bool
	}{{"drop+corrupt", inOrder, true}, {"drop+reorder+dup+corrupt", lossyFaults, false}} {
		for _, seed := range []int64{1, 2} {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				ucLossy(t, seed, tc.f, tc.strict)
			})
		}
	}
}

func ucLossy(t *testing.T, seed int64, f memlink.Faults, strict bool) {
	const (
		msgs    = 2000
		maxLen  = 6000
		slot    = 8192
		nRecv   = 64
		perTick = 3
		tick    = 40 * time.Microsecond
	)
	n := newLossyNet(t, seed, f)
	ha, hb := n.host(addrA, nil), n.host(addrB, nil)
	acq, brq := &sliceCQ{}, &sliceCQ{}
	cfg := QPConfig{Type: QPTypeUC, PD: 1, MaxSendWR: 64, MaxRecvWR: nRecv, MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: acq}
	a := n.qp(ha, cfg)
	cfg.SendCQ, cfg.RecvCQ = nil, brq
	b := n.qp(hb, cfg)
	connect(n.now, a, b, addrB, 0x100, 0x100, 1024)
	connect(n.now, b, a, addrA, 0x100, 0x100, 1024)
	mema, memb := make([]byte, 64*slot), make([]byte, nRecv*slot)
	mra := ha.Mem().Register(1, mema, AccessLocalWrite)
	mrb := hb.Mem().Register(1, memb, AccessLocalWrite)
	for i := range nRecv {
		must(t, b.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{{Addr: mrb.Addr + uint64(i*slot), Length: slot, LKey: mrb.LKey}}}))
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0xC0FFEE))
	var delivered []uint32
	sent, anomalies := 0, 0
	maxSeen := -1
	counts := make([]int, msgs)
	drain := func() {
		for _, r := range brq.take() {
			if r.Status != StatusSuccess {
				t.Fatalf("receive completion %+v", r)
			}
			seq, err := unstamp(memb[int(r.WRID)*slot:][:r.ByteLen])
			if err != nil {
				t.Fatalf("delivered a damaged message: %v", err)
			}
			if seq >= msgs {
				t.Fatalf("seq %d never sent", seq)
			}
			if r.Flags&WCFlagWithImm != 0 && r.Imm != seq {
				t.Fatalf("seq %d: imm %d", seq, r.Imm)
			}
			if r.SrcQP != a.QPN() || r.QPN != b.QPN() {
				t.Fatalf("completion %+v", r)
			}
			counts[seq]++
			if int(seq) <= maxSeen {
				anomalies++
			} else {
				maxSeen = int(seq)
			}
			delivered = append(delivered, seq)
			must(t, b.PostRecv(&RecvWR{ID: r.WRID, SGL: []SGE{{Addr: mrb.Addr + r.WRID*slot, Length: slot, LKey: mrb.LKey}}}))
		}
	}
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
				ln := stampMin + rng.IntN(maxLen-stampMin)
				if rng.IntN(3) == 0 {
					ln = stampMin + rng.IntN(1024-stampMin+1)
				}
				off := (sent % 64) * slot
				stamp(mema[off:off+ln], uint32(sent))
				op := WRSend
				if rng.IntN(2) == 0 {
					op = WRSendImm
				}
				must(t, a.PostSend(n.now, &SendWR{ID: uint64(sent), Op: op, Flags: SendSignaled, Imm: uint32(sent),
					SGL: []SGE{{Addr: mra.Addr + uint64(off), Length: uint32(ln), LKey: mra.LKey}}}))
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
		t.Fatalf("%d send completions, want %d", len(sc), msgs)
	}
	for i, c := range sc {
		if c.Status != StatusSuccess || c.WRID != uint64(i) {
			t.Fatalf("send completion %d: %+v", i, c)
		}
	}
	ns := n.net.Stats()
	if strict {
		if anomalies != 0 {
			t.Fatalf("%d deliveries out of order or repeated without reordering or duplication", anomalies)
		}
	} else if anomalies > int(ns.Duplicated+ns.Reordered) {
		t.Fatalf("%d deliveries out of order or repeated, more than the %d reordered and %d duplicated datagrams", anomalies, ns.Reordered, ns.Duplicated)
	}
	uniq := 0
	for _, c := range counts {
		if c > 0 {
			uniq++
		}
	}
	// About 5% of packets are lost, and a message of k packets survives
	// with probability ~0.94^k: well over half must arrive.
	if uniq < msgs/2 {
		t.Fatalf("only %d of %d messages delivered", uniq, msgs)
	}
	if uniq == msgs {
		t.Fatal("every message arrived: the faults did nothing")
	}
	st := hb.Stats()
	if ns.Corrupted == 0 || st.DropICRC.Load() == 0 || st.DropOutOfSequence.Load() == 0 {
		t.Fatalf("faults not exercised: corrupted %d, ICRC drops %d, out of sequence %d", ns.Corrupted, st.DropICRC.Load(), st.DropOutOfSequence.Load())
	}
	if b.State() != StateRTS || a.State() != StateRTS {
		t.Fatalf("states %d %d", a.State(), b.State())
	}
	t.Logf("delivered %d (%d distinct) of %d; %d anomalies; net %+v; B drops: ICRC %d, out of sequence %d, UC messages %d, no receive %d",
		len(delivered), uniq, msgs, anomalies, ns, st.DropICRC.Load(), st.DropOutOfSequence.Load(), st.DropUCMessage.Load(), st.DropNoRecv.Load())
}
