package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

// Tests of RC loss recovery and rules that end in success (spec §6.4, §6.6):
// go-back-N after a PSN sequence NAK, lost ACKs, partial READ retry, atomic
// replay from the responder resources, max_rd_atomic, RESET and reconnect,
// and zero-length messages. Helpers are in errors_test.go.

// 5. One lost packet in a 5-packet SEND: B sends one PSN sequence NAK, A goes
// back to the missing PSN at once, and the message arrives once, intact. A
// lost LAST has no packet after it to reveal the gap: the timeout repairs it.
func TestPSNSequenceNAK(t *testing.T) {
	const n = 5*1024 - 100
	T := wire.AckTimeout(14)
	for lost := range 5 {
		t.Run(fmt.Sprintf("lost=%d", lost), func(t *testing.T) {
			p := newPair(t, allRemote)
			fill(p.mema, 0x55)
			p.recvB(50, p.mrb, 0, 8192)
			c := p.capture()
			lostPSN := wire.PSN(0x100).Add(lost)
			c.dropA = once(func(s *sentPkt) bool { return s.p.BTH.PSN() == lostPSN })
			t0 := p.now
			p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, n)})
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
			r := p.brq.take()
			checkWCs(t, "B recv", r, wc{50, StatusSuccess})
			if r[0].ByteLen != n || !bytes.Equal(p.memb[:n], p.mema[:n]) {
				t.Fatal("message damaged")
			}
			naks := c.acks(false, wire.SyndromePSNSeqErr)
			sends := c.sent(true)
			if lost == 4 {
				if len(naks) != 0 || p.now.Sub(t0) != T || p.ha.Stats().Retransmits.Load() != 1 {
					t.Fatalf("lost LAST: %d NAKs, done after %v:\n%s", len(naks), p.now.Sub(t0), c.dump())
				}
				// Nothing was acknowledged (only the LAST asks for an
				// ACK), so the timeout sends the oldest packet again,
				// asking for an ACK (a probe); B, which has the first
				// four, acknowledges them, and A goes on with the LAST.
				if len(sends) != 7 || sends[5].p.BTH.PSN() != 0x100 || sends[5].p.Op != wire.RCSendFirst || !sends[5].p.BTH.AckReq() ||
					sends[6].p.BTH.PSN() != 0x104 || sends[6].p.Op != wire.RCSendLast {
					t.Fatalf("retransmission:\n%s", c.dump())
				}
				if got := p.hb.Stats().Duplicates.Load(); got != 1 {
					t.Fatalf("B duplicates = %d", got)
				}
				return
			}
			if len(naks) != 1 || naks[0].p.BTH.PSN() != lostPSN {
				t.Fatalf("want one sequence NAK for %#x:\n%s", uint32(lostPSN), c.dump())
			}
			if p.now != t0 || p.ha.Stats().Retransmits.Load() != 0 {
				t.Fatalf("needed a timeout (done after %v)", p.now.Sub(t0))
			}
			if got := p.ha.Stats().SeqNAKsReceived.Load(); got != 1 {
				t.Fatalf("SeqNAKsReceived = %d", got)
			}
			// 5 packets, then go-back-N from the lost one: the packet at
			// each PSN keeps its opcode (a MIDDLE or LAST with no FIRST).
			if len(sends) != 5+5-lost {
				t.Fatalf("A sent %d packets:\n%s", len(sends), c.dump())
			}
			for i, s := range sends[5:] {
				orig := sends[lost+i]
				if s.p.BTH.PSN() != orig.p.BTH.PSN() || s.p.Op != orig.p.Op || !bytes.Equal(s.p.Payload, orig.p.Payload) {
					t.Fatalf("resent %v, originally %v", s, orig)
				}
			}
		})
	}
}

// A slow responder (its packets wait in a queue longer than the local ACK
// timeout): each timeout sends one packet again, the oldest, asking for an
// ACK, not the whole 64-packet message. Resending whole messages every
// timeout filled the queue in front of an emulated peer with copies, and
// every ACK behind them came later still (interop: ibv_rc_pingpong and
// ibv_srq_pingpong at 64 KiB with Linux rxe in a TCG guest).
func TestTimeoutProbesSlowResponder(t *testing.T) {
	const n, npk, timeouts = 64 * 1024, 64, 3
	p := newPair(t, allRemote)
	fill(p.mema, 0x77)
	p.recvB(50, p.mrb, 0, n)
	c := p.capture()
	p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, n)})
	queued := p.la.q
	p.la.q = nil
	for range timeouts {
		d, ok := p.a.Deadline()
		if !ok {
			t.Fatal("no retransmission timer")
		}
		p.now = d
		p.a.OnTimer(p.now)
		queued = append(queued, p.la.q...)
		p.la.q = nil
	}
	sent := c.sent(true)
	if len(sent) != npk+timeouts {
		t.Fatalf("A sent %d packets in %d timeouts, want %d and one per timeout:\n%s", len(sent), timeouts, npk, c.dump())
	}
	for _, s := range sent[npk:] {
		if s.p.BTH.PSN() != 0x100 || s.p.Op != wire.RCSendFirst || !s.p.BTH.AckReq() {
			t.Fatalf("timeout sent %v, want the first packet asking for an ACK", s)
		}
	}
	// The queue drains: B takes the message, then the copies of its first
	// packet as duplicates, and acknowledges the whole message.
	p.hb.Receive(p.now, queued)
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
	checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
	if got := p.hb.Stats().Duplicates.Load(); got != timeouts {
		t.Fatalf("B duplicates = %d, want %d", got, timeouts)
	}
	if len(c.sent(true)) != npk+timeouts || !bytes.Equal(p.memb[:n], p.mema[:n]) {
		t.Fatalf("after the ACK:\n%s", c.dump())
	}
}

// 6. A lost ACK: A times out and sends the message's first packet again,
// asking for an ACK (a probe, not the whole message); B recognises the
// duplicate, ACKs all it has and does not deliver the message again.
func TestLostACK(t *testing.T) {
	T := wire.AckTimeout(14)
	cases := []struct {
		name string
		op   WROp
		n    int
	}{
		{"send-1-packet", WRSend, 100},
		{"send-3-packets", WRSend, 3000},
		{"write-imm-3-packets", WRWriteImm, 3000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, allRemote)
			fill(p.mema, 0x66)
			p.recvB(50, p.mrb, 0, 4096)
			p.recvB(51, p.mrb, 4096, 4096)
			c := p.capture()
			c.dropB = once(func(s *sentPkt) bool { return s.p.Op == wire.RCAck })
			t0 := p.now
			p.postA(SendWR{ID: 1, Op: tc.op, Flags: SendSignaled, Imm: 0x1234, SGL: p.sge(p.mra, 0, tc.n), RemoteAddr: p.mrb.Addr + 65536, RKey: p.mrb.RKey})
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
			checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
			if p.now.Sub(t0) != T {
				t.Fatalf("done after %v, want one timeout %v", p.now.Sub(t0), T)
			}
			npk := (tc.n + 1023) / 1024
			sent := c.sent(true)
			if len(sent) != npk+1 || sent[npk].p.BTH.PSN() != sent[0].p.BTH.PSN() || !sent[npk].p.BTH.AckReq() {
				t.Fatalf("A sent %d packets, want %d and then the first again, asking for an ACK:\n%s", len(sent), npk, c.dump())
			}
			if got := p.hb.Stats().Duplicates.Load(); got != 1 {
				t.Fatalf("B duplicates = %d, want 1", got)
			}
			dst := p.memb[:tc.n]
			if tc.op == WRWriteImm {
				dst = p.memb[65536 : 65536+tc.n]
			}
			if !bytes.Equal(dst, p.mema[:tc.n]) {
				t.Fatal("data damaged")
			}
			if p.a.State() != StateRTS || p.b.State() != StateRTS {
				t.Fatal("state")
			}
		})
	}
}

// 7. A lost READ response: after the timeout the requester asks again for
// only the missing part (new READ request at the first missing PSN, VA
// advanced and length reduced), and B replays it from its resources.
func TestReadPartialRetry(t *testing.T) {
	T := wire.AckTimeout(14)
	for _, tc := range []struct {
		n    int
		lost int
	}{{6144, 2}, {6144, 0}, {6144, 5}, {5500, 5}, {5500, 3}} {
		t.Run(fmt.Sprintf("len=%d/lost=%d", tc.n, tc.lost), func(t *testing.T) {
			p := newPair(t, allRemote)
			fill(p.memb, 0x77)
			c := p.capture()
			lostPSN := wire.PSN(0x100).Add(tc.lost)
			c.dropB = once(func(s *sentPkt) bool { return s.p.BTH.PSN() == lostPSN })
			t0 := p.now
			src := p.mrb.Addr + 8192
			p.postA(SendWR{ID: 1, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 4096, tc.n), RemoteAddr: src, RKey: p.mrb.RKey})
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
			if !bytes.Equal(p.mema[4096:4096+tc.n], p.memb[8192:8192+tc.n]) {
				t.Fatal("data damaged")
			}
			if p.now.Sub(t0) != T {
				t.Fatalf("done after %v", p.now.Sub(t0))
			}
			reqs := c.sent(true, wire.RCReadRequest)
			if len(reqs) != 2 {
				t.Fatalf("%d READ requests:\n%s", len(reqs), c.dump())
			}
			off := tc.lost * 1024
			for i, want := range []struct {
				psn wire.PSN
				va  uint64
				n   uint32
			}{{0x100, src, uint32(tc.n)}, {lostPSN, src + uint64(off), uint32(tc.n - off)}} {
				reth := reqs[i].p.RETH()
				if reqs[i].p.BTH.PSN() != want.psn || reth.VA() != want.va || reth.DMALen() != want.n || reth.RKey() != p.mrb.RKey {
					t.Fatalf("request %d: psn %#x va +%d len %d, want psn %#x va +%d len %d", i,
						uint32(reqs[i].p.BTH.PSN()), reth.VA()-src, reth.DMALen(), uint32(want.psn), want.va-src, want.n)
				}
			}
			// B replayed exactly the missing PSNs.
			npk := (tc.n + 1023) / 1024
			resp := c.sent(false)
			if len(resp) != npk+npk-tc.lost {
				t.Fatalf("B sent %d packets:\n%s", len(resp), c.dump())
			}
			for i, s := range resp[npk:] {
				if s.p.BTH.PSN() != lostPSN.Add(i) {
					t.Fatalf("replay %d: %v", i, s)
				}
			}
			if got := p.hb.Stats().Duplicates.Load(); got != 1 {
				t.Fatalf("B duplicates = %d", got)
			}
		})
	}
}

// 8. A lost ATOMIC ACK: the retried atomic is answered from the responder
// resource with the saved original value and not executed again. Lost by
// timeout, or revealed early by a later ACK (implicit NAK, §6.6.1).
func TestAtomicReplay(t *testing.T) {
	T := wire.AckTimeout(14)
	for _, tc := range []struct {
		name      string
		op        WROp
		cmp, swap uint64
		final     uint64
		thenSend  bool
	}{
		{"fetch-add", WRFetchAdd, 5, 0, 1005, false},
		{"cmp-swap", WRCompareSwap, 1000, 7, 7, false},
		{"fetch-add/then-send", WRFetchAdd, 5, 0, 1005, true},
		{"cmp-swap/then-send", WRCompareSwap, 1000, 7, 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, allRemote)
			binary.NativeEndian.PutUint64(p.memb[64:], 1000)
			c := p.capture()
			c.dropB = once(func(s *sentPkt) bool { return s.p.Op == wire.RCAtomicAck })
			t0 := p.now
			p.postA(SendWR{ID: 1, Op: tc.op, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8), RemoteAddr: p.mrb.Addr + 64, RKey: p.mrb.RKey, CompareAdd: tc.cmp, Swap: tc.swap})
			want := []wc{{1, StatusSuccess}}
			if tc.thenSend {
				p.recvB(50, p.mrb, 8192, 1024)
				p.postA(SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 100, 10)})
				want = append(want, wc{2, StatusSuccess})
			}
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), want...)
			if got := nativeWord(p.memb[64:]); got != tc.final {
				t.Fatalf("memory word %d, want %d (executed twice?)", got, tc.final)
			}
			if got := nativeWord(p.mema[0:]); got != 1000 {
				t.Fatalf("returned original %d, want 1000", got)
			}
			acks := c.sent(false, wire.RCAtomicAck)
			if len(acks) != 2 || acks[0].p.AtomicAckETH().OrigValue() != 1000 || acks[1].p.AtomicAckETH().OrigValue() != 1000 {
				t.Fatalf("atomic ACKs:\n%s", c.dump())
			}
			if got := p.hb.Stats().Duplicates.Load(); got < 1 {
				t.Fatal("no duplicate seen")
			}
			if tc.thenSend {
				checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
				if p.now != t0 {
					t.Fatalf("waited %v for a timeout; the SEND's ACK should have revealed the loss", p.now.Sub(t0))
				}
			} else if p.now.Sub(t0) != T {
				t.Fatalf("done after %v", p.now.Sub(t0))
			}
		})
	}
}

// 9. max_rd_atomic bounds the READ/atomic requests outstanding on the wire.
func TestMaxRDAtomic(t *testing.T) {
	for _, limit := range []uint8{1, 2} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			p := newPair(t, allRemote)
			p.a.Modify(p.now, &Attr{MaxRDAtomic: limit}, AttrMaxQPRDAtomic)
			fill(p.memb, 0x88)
			c := p.capture()
			ops := []WROp{WRRead, WRRead, WRFetchAdd, WRRead, WRCompareSwap, WRRead}
			for i, op := range ops {
				p.postA(SendWR{ID: uint64(i + 1), Op: op, Flags: SendSignaled, SGL: p.sge(p.mra, i*4096, map[bool]int{true: 3000, false: 8}[op == WRRead]),
					RemoteAddr: p.mrb.Addr + uint64(i*4096), RKey: p.mrb.RKey, CompareAdd: 1})
			}
			// A plain SEND behind them is not limited.
			p.recvB(50, p.mrb, 65536, 1024)
			p.postA(SendWR{ID: 99, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 65536, 10)})
			p.run(time.Second)
			var want []wc
			for i := range ops {
				want = append(want, wc{uint64(i + 1), StatusSuccess})
			}
			want = append(want, wc{99, StatusSuccess})
			checkWCs(t, "A send", p.acq.take(), want...)
			out, peak, reqs := 0, 0, 0
			for _, s := range c.log {
				switch s.p.Op {
				case wire.RCReadRequest, wire.RCFetchAdd, wire.RCCompareSwap:
					out++
					reqs++
				case wire.RCReadResponseLast, wire.RCReadResponseOnly, wire.RCAtomicAck:
					out--
				}
				peak = max(peak, out)
			}
			if peak != int(limit) || out != 0 || reqs != len(ops) {
				t.Fatalf("peak %d outstanding (limit %d), %d left, %d requests:\n%s", peak, limit, out, reqs, c.dump())
			}
			for i, op := range ops {
				if op == WRRead && !bytes.Equal(p.mema[i*4096:i*4096+3000], p.memb[i*4096:i*4096+3000]) {
					t.Fatalf("READ %d data damaged", i)
				}
			}
		})
	}
}

// 11. RESET empties the queues without completions and stops the timers;
// the QP can then be connected again with new PSNs.
func TestResetReconnect(t *testing.T) {
	for _, how := range []string{"after-error", "while-in-flight"} {
		t.Run(how, func(t *testing.T) {
			p := newPair(t, allRemote)
			c := p.capture()
			for i := range 4 {
				p.recvB(uint64(50+i), p.mrb, 0, 1024)
				p.postA(SendWR{ID: uint64(i + 1), Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 10)})
			}
			switch how {
			case "after-error":
				p.postA(SendWR{ID: 5, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 10), RemoteAddr: p.mrb.Addr, RKey: 0})
				p.postA(SendWR{ID: 6, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 10)})
				p.run(time.Second)
				if p.a.State() != StateErr || p.b.State() != StateErr {
					t.Fatal("not in ERR")
				}
			case "while-in-flight":
				c.dropA = dropAll
				p.run(0)
			}
			p.acq.take()
			p.brq.take()
			for _, q := range []*QP{p.a, p.b} {
				q.Modify(p.now, &Attr{State: StateReset}, AttrState)
				if q.State() != StateReset {
					t.Fatal("not in RESET")
				}
				noDeadline(t, "QP", q)
			}
			if err := p.a.PostSend(p.now, &SendWR{ID: 7, Op: WRSend, SGL: p.sge(p.mra, 0, 10)}); err != ErrBadState {
				t.Fatalf("PostSend in RESET: %v", err)
			}
			if err := p.b.PostRecv(&RecvWR{ID: 7, SGL: p.sge(p.mrb, 0, 10)}); err != ErrBadState {
				t.Fatalf("PostRecv in RESET: %v", err)
			}
			p.run(10 * wire.AckTimeout(14))
			if c := append(p.acq.take(), p.brq.take()...); len(c) != 0 {
				t.Fatalf("RESET produced completions %+v", c)
			}
			c.dropA = nil
			c.log = nil

			connect(p.now, p.a, p.b, addrB, 0x5000, 0x6000, 1024)
			connect(p.now, p.b, p.a, addrA, 0x6000, 0x5000, 1024)
			if a := p.a.Attr(); a.SQPSN != 0x5000 || a.RQPSN != 0x6000 {
				t.Fatalf("A attr PSNs sq %#x rq %#x", a.SQPSN, a.RQPSN)
			}
			fill(p.mema, 0x99)
			p.recvB(60, p.mrb, 0, 4096)
			p.postA(SendWR{ID: 10, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 2000)})
			p.postA(SendWR{ID: 11, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 8192, 100), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{10, StatusSuccess}, wc{11, StatusSuccess})
			checkWCs(t, "B recv", p.brq.take(), wc{60, StatusSuccess})
			if !bytes.Equal(p.memb[:2000], p.mema[:2000]) || !bytes.Equal(p.mema[8192:8292], p.memb[:100]) {
				t.Fatal("data damaged")
			}
			// Only the new WQEs went out, with the new PSNs.
			sends := c.sent(true)
			if len(sends) != 3 || sends[0].p.BTH.PSN() != 0x5000 || sends[1].p.BTH.PSN() != 0x5001 || sends[2].p.BTH.PSN() != 0x5002 {
				t.Fatalf("after reconnect A sent:\n%s", c.dump())
			}
			if a := p.a.Attr(); a.SQPSN != 0x5003 {
				t.Fatalf("A next PSN %#x, want 0x5003", a.SQPSN)
			}
			if b := p.b.Attr(); b.RQPSN != 0x5003 {
				t.Fatalf("B expected PSN %#x, want 0x5003", b.RQPSN)
			}
		})
	}
}

// 13. Zero-length SEND, WRITE and READ (a READ gets one READ Response Only,
// and zero-length RDMA skips the R_Key check, §8).
func TestZeroLength(t *testing.T) {
	p := newPair(t, allRemote)
	c := p.capture()
	p.recvB(50, p.mrb, 0, 1024)
	p.recvB(51, p.mrb, 0, 1024)
	p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled})
	p.postA(SendWR{ID: 2, Op: WRWrite, Flags: SendSignaled, RemoteAddr: 0, RKey: 0})
	p.postA(SendWR{ID: 3, Op: WRRead, Flags: SendSignaled, RemoteAddr: 0, RKey: 0})
	p.postA(SendWR{ID: 4, Op: WRWriteImm, Flags: SendSignaled, Imm: 42, RemoteAddr: 0x1234, RKey: 0x5678})
	p.postA(SendWR{ID: 5, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 0), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
	p.run(time.Second)
	got := p.acq.take()
	checkWCs(t, "A send", got, wc{1, 0}, wc{2, 0}, wc{3, 0}, wc{4, 0}, wc{5, 0})
	for _, x := range got {
		if x.ByteLen != 0 {
			t.Fatalf("completion %+v", x)
		}
	}
	r := p.brq.take()
	checkWCs(t, "B recv", r, wc{50, 0}, wc{51, 0})
	if r[0].ByteLen != 0 || r[0].Opcode != WCRecv || r[1].Opcode != WCRecvRDMAWithImm || r[1].Imm != 42 {
		t.Fatalf("recv completions %+v", r)
	}
	want := []wire.Opcode{wire.RCSendOnly, wire.RCWriteOnly, wire.RCReadRequest, wire.RCWriteOnlyImm, wire.RCReadRequest}
	sends := c.sent(true)
	if len(sends) != len(want) {
		t.Fatalf("A sent:\n%s", c.dump())
	}
	for i, s := range sends {
		if s.p.Op != want[i] || len(s.p.Payload) != 0 || s.p.BTH.PSN() != wire.PSN(0x100+i) {
			t.Fatalf("packet %d: %v", i, s)
		}
	}
	resp := c.sent(false, wire.RCReadResponseFirst, wire.RCReadResponseMiddle, wire.RCReadResponseLast, wire.RCReadResponseOnly)
	if len(resp) != 2 || resp[0].p.Op != wire.RCReadResponseOnly || len(resp[0].p.Payload) != 0 || resp[0].p.BTH.PSN() != 0x102 ||
		resp[1].p.Op != wire.RCReadResponseOnly || resp[1].p.BTH.PSN() != 0x104 {
		t.Fatalf("READ responses:\n%s", c.dump())
	}
	if p.a.State() != StateRTS || p.b.State() != StateRTS {
		t.Fatal("state")
	}
}
