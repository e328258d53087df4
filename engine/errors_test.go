package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// Tests of the RC error paths (docs/spec/roce-wire.md §6.3–§6.7, §8): remote
// access errors, retry and RNR exhaustion, misaligned atomics, unsignaled
// error completions, opcode sequence errors and the receive-path filters.
// Loss-recovery rules that end in success live in rc_test.go.

const allRemote = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

// sentPkt is one datagram a host handed to its link, as a capture saw it.
type sentPkt struct {
	at      time.Time
	fromA   bool
	dropped bool
	d       link.Datagram // with a private copy of Buf
	p       wire.Packet
}

// syndrome returns the AETH syndrome, if the packet has an AETH.
func (s *sentPkt) syndrome() (wire.Syndrome, bool) {
	if a := s.p.AETH(); a != nil {
		return a.Syndrome(), true
	}
	return 0, false
}

func (s *sentPkt) String() string {
	from := "B"
	if s.fromA {
		from = "A"
	}
	syn := ""
	if x, ok := s.syndrome(); ok {
		syn = fmt.Sprintf(" syn=%#02x", uint8(x))
	}
	return fmt.Sprintf("%s %v psn=%#x len=%d%s dropped=%v", from, s.p.Op, uint32(s.p.BTH.PSN()), len(s.p.Payload), syn, s.dropped)
}

// capture records every datagram both hosts of a pair send (dropped ones
// too, marked) and drops those its hooks select.
type capture struct {
	p            *pair
	log          []*sentPkt
	dropA, dropB func(s *sentPkt) bool
}

// capture installs a capture on both links of p.
func (p *pair) capture() *capture {
	c := &capture{p: p}
	p.la.drop = func(d link.Datagram) bool { return c.record(true, d) }
	p.lb.drop = func(d link.Datagram) bool { return c.record(false, d) }
	return c
}

func (c *capture) record(fromA bool, d link.Datagram) bool {
	s := &sentPkt{at: c.p.now, fromA: fromA, d: d}
	s.d.Buf = append([]byte(nil), d.Buf...)
	if err := s.p.Parse(s.d.Buf); err != nil {
		c.p.t.Errorf("host sent an unparsable datagram: %v", err)
		return true
	}
	drop := c.dropB
	if fromA {
		drop = c.dropA
	}
	s.dropped = drop != nil && drop(s)
	c.log = append(c.log, s)
	return s.dropped
}

// sent returns the datagrams sent by A (fromA) or by B whose opcode is one of
// ops, or all of them when ops is empty.
func (c *capture) sent(fromA bool, ops ...wire.Opcode) []*sentPkt {
	var out []*sentPkt
	for _, s := range c.log {
		if s.fromA != fromA {
			continue
		}
		if len(ops) == 0 {
			out = append(out, s)
			continue
		}
		for _, op := range ops {
			if s.p.Op == op {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// acks returns the ACKNOWLEDGE packets sent by A or B with syndrome syn.
func (c *capture) acks(fromA bool, syn wire.Syndrome) []*sentPkt {
	var out []*sentPkt
	for _, s := range c.sent(fromA, wire.RCAck) {
		if x, _ := s.syndrome(); x == syn {
			out = append(out, s)
		}
	}
	return out
}

func (c *capture) dump() string {
	var b bytes.Buffer
	for _, s := range c.log {
		fmt.Fprintf(&b, "  %v +%v\n", s, s.at.Sub(time.Unix(1000, 0)))
	}
	return b.String()
}

// once returns a drop hook that drops the first datagram match selects.
func once(match func(s *sentPkt) bool) func(*sentPkt) bool {
	done := false
	return func(s *sentPkt) bool {
		if !done && match(s) {
			done = true
			return true
		}
		return false
	}
}

func dropAll(*sentPkt) bool { return true }

// wc is an expected completion: WR ID and status.
type wc struct {
	id uint64
	st Status
}

// checkWCs asserts that got holds exactly want, in order.
func checkWCs(t *testing.T, what string, got []Completion, want ...wc) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i].WRID == want[i].id && got[i].Status == want[i].st
	}
	if !ok {
		var g []wc
		for _, c := range got {
			g = append(g, wc{c.WRID, c.Status})
		}
		t.Fatalf("%s completions: got %v, want %v", what, g, want)
	}
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7+i>>8) ^ seed
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func (p *pair) postA(wr SendWR) {
	p.t.Helper()
	must(p.t, p.a.PostSend(p.now, &wr))
}

func (p *pair) recvB(id uint64, mr *MR, off, n int) {
	p.t.Helper()
	must(p.t, p.b.PostRecv(&RecvWR{ID: id, SGL: p.sge(mr, off, n)}))
}

// seal writes the ICRC of b as sent from src to dst with A's source port and
// returns the datagram.
func (p *pair) seal(b []byte, src, dst netip.Addr) link.Datagram {
	sport := p.a.sport
	wire.PutICRC(src, dst, sport, link.RoCEPort, b)
	return link.Datagram{Buf: b, Src: netip.AddrPortFrom(src, sport), Dst: netip.AddrPortFrom(dst, link.RoCEPort)}
}

// forge builds a request packet from A to B's QP: opcode op at psn, ext
// filling the extended headers, then payload, with a correct ICRC.
func (p *pair) forge(op wire.Opcode, psn wire.PSN, ext func(h []byte), payload []byte) link.Datagram {
	b := make([]byte, wire.PacketLen(op, len(payload)))
	if ext != nil {
		ext(b[wire.BTHLen:op.HdrLen()])
	}
	copy(b[op.HdrLen():], payload)
	wire.BTH(b).Encode(op, false, wire.Pad(len(payload)), p.b.QPN(), op.Has(wire.IsLast), psn)
	return p.seal(b, addrA, addrB)
}

// noDeadline asserts that q has no timer armed.
func noDeadline(t *testing.T, name string, q *QP) {
	t.Helper()
	if d, ok := q.Deadline(); ok {
		t.Fatalf("%s still has a timer armed at %v", name, d)
	}
}

// 1. Remote access errors (§6.3 step 6, §8): the requester gets
// REM_ACCESS_ERR (R_Key/range/MR access) or REM_INV_REQ_ERR (QP access
// flags), memory is untouched, both QPs go to ERR, and everything else
// queued on either side is flushed in order.
func TestRemoteAccessErrors(t *testing.T) {
	type prep func(p *pair) (wr SendWR, guard []byte)
	// mrOn registers a fresh 8 KiB buffer at B with the given access.
	mrOn := func(p *pair, pd uint32, access uint32) (*MR, []byte) {
		buf := make([]byte, 8192)
		fill(buf, 0x5A)
		return p.hb.Mem().Register(pd, buf, access), buf
	}
	write := func(p *pair, va uint64, rkey uint32, n int) SendWR {
		return SendWR{Op: WRWrite, SGL: p.sge(p.mra, 0, n), RemoteAddr: va, RKey: rkey}
	}
	read := func(p *pair, va uint64, rkey uint32, n int) SendWR {
		return SendWR{Op: WRRead, SGL: p.sge(p.mra, 65536, n), RemoteAddr: va, RKey: rkey}
	}
	fadd := func(p *pair, va uint64, rkey uint32) SendWR {
		return SendWR{Op: WRFetchAdd, SGL: p.sge(p.mra, 65536, 8), RemoteAddr: va, RKey: rkey, CompareAdd: 1}
	}
	qpAccess := func(p *pair, flags uint32) {
		p.b.Modify(p.now, &Attr{AccessFlags: flags}, AttrAccessFlags)
	}
	cases := []struct {
		name string
		prep prep
		syn  wire.Syndrome
		want Status
	}{
		{"write/rkey-variant", func(p *pair) (SendWR, []byte) {
			return write(p, p.mrb.Addr, p.mrb.RKey^0x01, 100), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"write/rkey-index", func(p *pair) (SendWR, []byte) {
			return write(p, p.mrb.Addr, p.mrb.RKey+0x700, 100), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"write/rkey-zero-of-local-only-mr", func(p *pair) (SendWR, []byte) {
			mr, buf := mrOn(p, 1, AccessLocalWrite)
			if mr.RKey != 0 {
				p.t.Fatalf("local-only MR has R_Key %#x", mr.RKey)
			}
			return write(p, mr.Addr, 0, 100), buf
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"write/past-end", func(p *pair) (SendWR, []byte) {
			return write(p, p.mrb.Addr+uint64(len(p.memb))-50, p.mrb.RKey, 100), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"write/before-start", func(p *pair) (SendWR, []byte) {
			return write(p, p.mrb.Addr-8, p.mrb.RKey, 100), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"write/multi-packet-past-end", func(p *pair) (SendWR, []byte) {
			return write(p, p.mrb.Addr+uint64(len(p.memb))-2000, p.mrb.RKey, 3000), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"write/mr-without-remote-write", func(p *pair) (SendWR, []byte) {
			mr, buf := mrOn(p, 1, AccessLocalWrite|AccessRemoteRead)
			return write(p, mr.Addr, mr.RKey, 100), buf
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"write/mr-of-other-pd", func(p *pair) (SendWR, []byte) {
			mr, buf := mrOn(p, 2, AccessLocalWrite|allRemote)
			return write(p, mr.Addr, mr.RKey, 100), buf
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"write/deregistered-mr", func(p *pair) (SendWR, []byte) {
			mr, buf := mrOn(p, 1, AccessLocalWrite|allRemote)
			p.hb.Mem().Deregister(mr)
			return write(p, mr.Addr, mr.RKey, 100), buf
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"read/rkey", func(p *pair) (SendWR, []byte) {
			return read(p, p.mrb.Addr, p.mrb.RKey^0x80, 100), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"read/mr-without-remote-read", func(p *pair) (SendWR, []byte) {
			mr, buf := mrOn(p, 1, AccessLocalWrite|AccessRemoteWrite)
			return read(p, mr.Addr, mr.RKey, 100), buf
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"read/multi-packet-past-end", func(p *pair) (SendWR, []byte) {
			return read(p, p.mrb.Addr+uint64(len(p.memb))-1000, p.mrb.RKey, 3000), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"atomic/rkey", func(p *pair) (SendWR, []byte) {
			return fadd(p, p.mrb.Addr+64, p.mrb.RKey^0x02), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"atomic/mr-without-remote-atomic", func(p *pair) (SendWR, []byte) {
			mr, buf := mrOn(p, 1, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
			return fadd(p, mr.Addr+64, mr.RKey), buf
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"atomic/past-end", func(p *pair) (SendWR, []byte) {
			return fadd(p, p.mrb.Addr+uint64(len(p.memb)), p.mrb.RKey), nil
		}, wire.SyndromeRemoteAccess, StatusRemAccessErr},
		{"qp-access/write", func(p *pair) (SendWR, []byte) {
			qpAccess(p, AccessRemoteRead|AccessRemoteAtomic)
			return write(p, p.mrb.Addr, p.mrb.RKey, 100), nil
		}, wire.SyndromeInvalidReq, StatusRemInvReqErr},
		{"qp-access/write-zero-length", func(p *pair) (SendWR, []byte) {
			qpAccess(p, AccessRemoteRead|AccessRemoteAtomic)
			return write(p, 0, 0, 0), nil
		}, wire.SyndromeInvalidReq, StatusRemInvReqErr},
		{"qp-access/read", func(p *pair) (SendWR, []byte) {
			qpAccess(p, AccessRemoteWrite|AccessRemoteAtomic)
			return read(p, p.mrb.Addr, p.mrb.RKey, 100), nil
		}, wire.SyndromeInvalidReq, StatusRemInvReqErr},
		{"qp-access/atomic", func(p *pair) (SendWR, []byte) {
			qpAccess(p, AccessRemoteWrite|AccessRemoteRead)
			return fadd(p, p.mrb.Addr+64, p.mrb.RKey), nil
		}, wire.SyndromeInvalidReq, StatusRemInvReqErr},
	}
	for _, tc := range cases {
		for _, prefix := range []bool{false, true} {
			name := tc.name
			if prefix {
				name += "/after-good-send"
			}
			t.Run(name, func(t *testing.T) {
				p := newPair(t, allRemote)
				fill(p.mema, 0x11)
				fill(p.memb, 0x22)
				// Receives live in their own MR so that p.memb must stay
				// byte-for-byte the same.
				rbuf := make([]byte, 4*4096)
				rmr := p.hb.Mem().Register(1, rbuf, AccessLocalWrite)
				for i := range 3 {
					p.recvB(uint64(100+i), rmr, i*4096, 4096)
				}
				wr, guard := tc.prep(p)
				snapA, snapB, snapG := clone(p.mema), clone(p.memb), clone(guard)
				c := p.capture()

				var want []wc
				id := uint64(1)
				badPSN := wire.PSN(0x100)
				if prefix {
					p.postA(SendWR{ID: id, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 200)})
					want = append(want, wc{id, StatusSuccess})
					id++
					badPSN++
				}
				wr.ID, wr.Flags = id, SendSignaled
				p.postA(wr)
				want = append(want, wc{id, tc.want})
				// Two more before the error is discovered: they go on the
				// wire, and B (in ERR by then) must ignore them.
				p.postA(SendWR{ID: id + 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100)})
				p.postA(SendWR{ID: id + 2, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
				want = append(want, wc{id + 1, StatusWRFlushErr}, wc{id + 2, StatusWRFlushErr})
				p.run(time.Second)
				sentByA := len(c.sent(true))

				// Three more after it: flushed at once, nothing sent.
				for i := uint64(3); i < 6; i++ {
					p.postA(SendWR{ID: id + i, Op: WRSend, SGL: p.sge(p.mra, 0, 10)})
					want = append(want, wc{id + i, StatusWRFlushErr})
				}
				p.run(time.Second)
				checkWCs(t, "A send", p.acq.take(), want...)
				if st := p.a.State(); st != StateErr {
					t.Fatalf("requester state %d, want ERR", st)
				}
				if st := p.b.State(); st != StateErr {
					t.Fatalf("responder state %d, want ERR", st)
				}
				if n := len(c.sent(true)); n != sentByA {
					t.Fatalf("A sent %d packets after entering ERR", n-sentByA)
				}
				noDeadline(t, "A", p.a)

				// Receives at B: flushed in order (after the prefix SEND's
				// success), and new ones flush at once.
				p.recvB(103, rmr, 3*4096, 4096)
				var wantR []wc
				first := uint64(100)
				if prefix {
					wantR = append(wantR, wc{100, StatusSuccess})
					first++
				}
				for i := first; i <= 103; i++ {
					wantR = append(wantR, wc{i, StatusWRFlushErr})
				}
				checkWCs(t, "B recv", p.brq.take(), wantR...)
				checkWCs(t, "B send", p.bcq.take())

				// Exactly one NAK from B, with the offending PSN, and
				// nothing after it.
				fromB := c.sent(false)
				naks := c.acks(false, tc.syn)
				if len(naks) != 1 || naks[0].p.BTH.PSN() != badPSN || fromB[len(fromB)-1] != naks[0] {
					t.Fatalf("want one NAK %#x for PSN %#x as B's last packet; traffic:\n%s", uint8(tc.syn), uint32(badPSN), c.dump())
				}
				if !bytes.Equal(p.memb, snapB) {
					t.Fatal("responder memory changed")
				}
				if !bytes.Equal(guard, snapG) {
					t.Fatal("responder MR memory changed")
				}
				if !bytes.Equal(p.mema, snapA) {
					t.Fatal("requester memory changed")
				}
			})
		}
	}
}

// 2. Peer gone: every ACK lost. With retry_cnt N the WQE fails with
// RETRY_EXC_ERR after exactly N retransmissions, (N+1) local ACK timeouts
// after it was sent; 7 retries forever.
func TestRetryExceeded(t *testing.T) {
	const timeout = 14
	T := wire.AckTimeout(timeout)
	if T != 4096*(1<<timeout)*time.Nanosecond {
		t.Fatalf("AckTimeout(%d) = %v", timeout, T)
	}
	for _, retry := range []uint8{0, 1, 3, 6} {
		t.Run(fmt.Sprintf("retry_cnt=%d", retry), func(t *testing.T) {
			p := newPair(t, allRemote)
			p.a.Modify(p.now, &Attr{RetryCnt: retry}, AttrRetryCnt)
			c := p.capture()
			c.dropB = dropAll
			p.recvB(50, p.mrb, 0, 4096)
			t0 := p.now
			p.postA(SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, 100)}) // unsignaled: the error must still complete
			p.run(time.Duration(retry+5) * T)
			p.postA(SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100)})
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusRetryExcErr}, wc{2, StatusWRFlushErr})
			if st := p.a.State(); st != StateErr {
				t.Fatalf("state %d, want ERR", st)
			}
			if got, want := p.now.Sub(t0), time.Duration(retry+1)*T; got != want {
				t.Fatalf("failed after %v, want %v", got, want)
			}
			sends := c.sent(true)
			if len(sends) != int(retry)+1 {
				t.Fatalf("A sent %d packets, want %d:\n%s", len(sends), retry+1, c.dump())
			}
			for i, s := range sends {
				if s.p.Op != wire.RCSendOnly || s.p.BTH.PSN() != 0x100 || s.at.Sub(t0) != time.Duration(i)*T {
					t.Fatalf("packet %d: %v at +%v", i, s, s.at.Sub(t0))
				}
			}
			if n := p.ha.Stats().Retransmits.Load(); n != uint64(retry) {
				t.Fatalf("Retransmits = %d, want %d", n, retry)
			}
			// B saw the message once and the copies as duplicates.
			checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
			if n := p.hb.Stats().Duplicates.Load(); n != uint64(retry) {
				t.Fatalf("B duplicates = %d, want %d", n, retry)
			}
			noDeadline(t, "A", p.a)
		})
	}
	t.Run("retry_cnt=7-is-infinite", func(t *testing.T) {
		p := newPair(t, allRemote)
		c := p.capture()
		c.dropB = dropAll
		p.recvB(50, p.mrb, 0, 4096)
		p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100)})
		const rounds = 20
		p.run(rounds*T + T/2)
		if c := p.acq.take(); len(c) != 0 {
			t.Fatalf("completions %+v", c)
		}
		if st := p.a.State(); st != StateRTS {
			t.Fatalf("state %d", st)
		}
		if n := len(c.sent(true)); n != rounds+1 {
			t.Fatalf("A sent %d packets, want %d", n, rounds+1)
		}
		// The peer comes back: the next retransmission completes it.
		c.dropB = nil
		p.run(2 * T)
		checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
		checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
	})
	t.Run("counter-resets-on-progress", func(t *testing.T) {
		// retry_cnt 1: each of three WQEs loses its first ACK. Every ACK
		// that makes progress restores the count, so none of them fails.
		p := newPair(t, allRemote)
		p.a.Modify(p.now, &Attr{RetryCnt: 1}, AttrRetryCnt)
		c := p.capture()
		lost := map[wire.PSN]bool{}
		c.dropB = func(s *sentPkt) bool {
			psn := s.p.BTH.PSN()
			if s.p.Op == wire.RCAck && !lost[psn] {
				lost[psn] = true
				return true
			}
			return false
		}
		for i := range 3 {
			p.recvB(uint64(50+i), p.mrb, i*4096, 4096)
			p.postA(SendWR{ID: uint64(i + 1), Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100)})
			p.run(10 * T)
		}
		checkWCs(t, "A send", p.acq.take(), wc{1, 0}, wc{2, 0}, wc{3, 0})
		if n := p.ha.Stats().Retransmits.Load(); n != 3 {
			t.Fatalf("Retransmits = %d, want 3", n)
		}
	})
}

// 3. RNR: the responder NAKs a SEND it has no receive for, with its
// min_rnr_timer; the requester waits the NAK's delay (not its own setting)
// and retries, rnr_retry times (7: forever).
func TestRNR(t *testing.T) {
	if d := wire.RNRDelay(12); d != 640*time.Microsecond {
		t.Fatalf("RNR timer 12 = %v, want 640µs", d)
	}
	for _, code := range []uint8{1, 12, 18} {
		t.Run(fmt.Sprintf("infinite/timer=%d", code), func(t *testing.T) {
			p := newPair(t, allRemote)
			p.b.Modify(p.now, &Attr{MinRNRTimer: code}, AttrMinRNRTimer) // A keeps 12
			d := wire.RNRDelay(code)
			c := p.capture()
			fill(p.mema, 0x33)
			t0 := p.now
			p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 700)})
			const attempts = 9
			p.run((attempts-1)*d + d/2)
			if got := p.hb.Stats().RNRNAKsSent.Load(); got != attempts {
				t.Fatalf("RNR NAKs sent = %d, want %d", got, attempts)
			}
			rnr := c.acks(false, wire.RNRSyndrome(code))
			if len(rnr) != attempts {
				t.Fatalf("%d RNR NAKs with timer %d on the wire:\n%s", len(rnr), code, c.dump())
			}
			sends := c.sent(true)
			if len(sends) != attempts {
				t.Fatalf("A sent %d packets, want %d", len(sends), attempts)
			}
			for i, s := range sends {
				if s.p.BTH.PSN() != 0x100 || s.at.Sub(t0) != time.Duration(i)*d {
					t.Fatalf("attempt %d: %v at +%v, want +%v", i, s, s.at.Sub(t0), time.Duration(i)*d)
				}
			}
			if c := p.acq.take(); len(c) != 0 {
				t.Fatalf("completed early: %+v", c)
			}
			if p.a.State() != StateRTS || p.b.State() != StateRTS {
				t.Fatalf("states %d %d", p.a.State(), p.b.State())
			}
			p.recvB(50, p.mrb, 0, 4096)
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
			r := p.brq.take()
			checkWCs(t, "B recv", r, wc{50, StatusSuccess})
			if r[0].ByteLen != 700 || !bytes.Equal(p.memb[:700], p.mema[:700]) {
				t.Fatalf("received %d bytes, data equal %v", r[0].ByteLen, bytes.Equal(p.memb[:700], p.mema[:700]))
			}
			if got := p.ha.Stats().RNRNAKsReceived.Load(); got != attempts {
				t.Fatalf("RNR NAKs received = %d", got)
			}
		})
	}
	for _, rnrRetry := range []uint8{0, 2, 6} {
		t.Run(fmt.Sprintf("rnr_retry=%d", rnrRetry), func(t *testing.T) {
			p := newPair(t, allRemote)
			p.a.Modify(p.now, &Attr{RNRRetry: rnrRetry}, AttrRNRRetry)
			d := wire.RNRDelay(12)
			c := p.capture()
			t0 := p.now
			p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100)})
			p.postA(SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100)})
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusRNRRetryExcErr}, wc{2, StatusWRFlushErr})
			want := int(rnrRetry) + 1
			if got := p.hb.Stats().RNRNAKsSent.Load(); got != uint64(want) {
				t.Fatalf("RNR NAKs sent = %d, want %d:\n%s", got, want, c.dump())
			}
			first := c.sent(true, wire.RCSendOnly)
			var attempts []*sentPkt
			for _, s := range first {
				if s.p.BTH.PSN() == 0x100 {
					attempts = append(attempts, s)
				}
			}
			if len(attempts) != want {
				t.Fatalf("A sent WQE 1 %d times, want %d", len(attempts), want)
			}
			for i, s := range attempts {
				if s.at.Sub(t0) != time.Duration(i)*d {
					t.Fatalf("attempt %d at +%v, want +%v", i, s.at.Sub(t0), time.Duration(i)*d)
				}
			}
			if got := p.now.Sub(t0); got != time.Duration(rnrRetry)*d {
				t.Fatalf("failed after %v", got)
			}
			if st := p.a.State(); st != StateErr {
				t.Fatalf("requester state %d", st)
			}
			// RNR is not an error for the responder.
			if st := p.b.State(); st != StateRTS {
				t.Fatalf("responder state %d", st)
			}
			noDeadline(t, "A", p.a)
		})
	}
}

// 4. Atomics: a misaligned VA is NAKed Invalid Request (0x61) and takes both
// QPs down; a local SGE that is not 8 bytes fails locally without touching
// the wire.
func TestAtomicErrors(t *testing.T) {
	for _, op := range []WROp{WRFetchAdd, WRCompareSwap} {
		for _, off := range []uint64{1, 4, 7} {
			t.Run(fmt.Sprintf("misaligned/op=%d/off=%d", op, off), func(t *testing.T) {
				p := newPair(t, allRemote)
				fill(p.mema, 1)
				fill(p.memb, 2)
				snapA, snapB := clone(p.mema), clone(p.memb)
				c := p.capture()
				p.recvB(50, p.mrb, 8192, 1024)
				p.postA(SendWR{ID: 1, Op: op, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8), RemoteAddr: p.mrb.Addr + 64 + off, RKey: p.mrb.RKey, CompareAdd: 3, Swap: 4})
				p.postA(SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8)})
				p.run(time.Second)
				checkWCs(t, "A send", p.acq.take(), wc{1, StatusRemInvReqErr}, wc{2, StatusWRFlushErr})
				checkWCs(t, "B recv", p.brq.take(), wc{50, StatusWRFlushErr})
				if n := len(c.acks(false, wire.SyndromeInvalidReq)); n != 1 {
					t.Fatalf("%d NAK 0x61 from B", n)
				}
				if p.a.State() != StateErr || p.b.State() != StateErr {
					t.Fatalf("states %d %d", p.a.State(), p.b.State())
				}
				if !bytes.Equal(p.mema, snapA) || !bytes.Equal(p.memb, snapB) {
					t.Fatal("memory changed")
				}
			})
		}
	}
	for _, n := range []int{0, 4, 16} {
		for _, behind := range []bool{false, true} {
			t.Run(fmt.Sprintf("local-length=%d/behind-send=%v", n, behind), func(t *testing.T) {
				p := newPair(t, allRemote)
				c := p.capture()
				p.recvB(50, p.mrb, 8192, 1024)
				var want []wc
				if behind {
					p.postA(SendWR{ID: 9, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8)})
					want = append(want, wc{9, StatusSuccess})
				}
				var sgl []SGE
				if n > 0 {
					sgl = p.sge(p.mra, 0, n)
				}
				p.postA(SendWR{ID: 1, Op: WRFetchAdd, Flags: SendSignaled, SGL: sgl, RemoteAddr: p.mrb.Addr + 64, RKey: p.mrb.RKey, CompareAdd: 1})
				p.postA(SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8)})
				p.run(time.Second)
				want = append(want, wc{1, StatusLocLenErr}, wc{2, StatusWRFlushErr})
				checkWCs(t, "A send", p.acq.take(), want...)
				if st := p.a.State(); st != StateErr {
					t.Fatalf("state %d", st)
				}
				if n := len(c.sent(true, wire.RCFetchAdd)); n != 0 {
					t.Fatalf("the bad atomic went on the wire")
				}
				wantPkts := 0
				if behind {
					wantPkts = 1
				}
				if got := len(c.sent(true)); got != wantPkts {
					t.Fatalf("A sent %d packets, want %d:\n%s", got, wantPkts, c.dump())
				}
			})
		}
	}
}

// 10. Unsignaled WRs complete silently on success but always report a
// failure; sq_sig_all signals everything.
func TestSignaling(t *testing.T) {
	t.Run("unsignaled-success", func(t *testing.T) {
		p := newPair(t, allRemote)
		for i := range 3 {
			p.recvB(uint64(50+i), p.mrb, i*1024, 1024)
			p.postA(SendWR{ID: uint64(i + 1), Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
		}
		p.postA(SendWR{ID: 4, Op: WRWrite, SGL: p.sge(p.mra, 0, 100), RemoteAddr: p.mrb.Addr + 8192, RKey: p.mrb.RKey})
		p.postA(SendWR{ID: 5, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 4096, 100), RemoteAddr: p.mrb.Addr + 8192, RKey: p.mrb.RKey})
		p.run(time.Second)
		checkWCs(t, "A send", p.acq.take(), wc{5, StatusSuccess})
		checkWCs(t, "B recv", p.brq.take(), wc{50, 0}, wc{51, 0}, wc{52, 0})
		noDeadline(t, "A", p.a)
	})
	t.Run("unsignaled-failure", func(t *testing.T) {
		p := newPair(t, allRemote)
		p.recvB(50, p.mrb, 0, 1024)
		p.postA(SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
		p.postA(SendWR{ID: 2, Op: WRWrite, SGL: p.sge(p.mra, 0, 100), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey ^ 1})
		p.postA(SendWR{ID: 3, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
		p.run(time.Second)
		checkWCs(t, "A send", p.acq.take(), wc{2, StatusRemAccessErr}, wc{3, StatusWRFlushErr})
	})
	t.Run("unsignaled-local-failure", func(t *testing.T) {
		p := newPair(t, allRemote)
		p.postA(SendWR{ID: 1, Op: WRSend, SGL: []SGE{{Addr: p.mra.Addr, Length: 10, LKey: p.mra.LKey ^ 1}}})
		checkWCs(t, "A send", p.acq.take(), wc{1, StatusLocProtErr})
		if st := p.a.State(); st != StateErr {
			t.Fatalf("state %d", st)
		}
	})
	t.Run("sig-all", func(t *testing.T) {
		p := newPair(t, allRemote)
		p.a.mu.Lock()
		p.a.sigAll = true
		p.a.mu.Unlock()
		for i := range 3 {
			p.recvB(uint64(50+i), p.mrb, i*1024, 1024)
			p.postA(SendWR{ID: uint64(i + 1), Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
		}
		p.postA(SendWR{ID: 4, Op: WRWrite, SGL: p.sge(p.mra, 0, 100), RemoteAddr: p.mrb.Addr + 8192, RKey: p.mrb.RKey})
		p.run(time.Second)
		checkWCs(t, "A send", p.acq.take(), wc{1, 0}, wc{2, 0}, wc{3, 0}, wc{4, 0})
	})
}

// 12. Opcode sequence errors (§6.3 step 5): a MIDDLE or LAST with no FIRST,
// or a new message inside another, gets NAK Invalid Request and puts the
// responder in ERR; a receive already taken completes with REM_INV_REQ_ERR.
func TestOpcodeSequenceError(t *testing.T) {
	mtu := make([]byte, 1024)
	fill(mtu, 9)
	type pk struct {
		op   wire.Opcode
		n    int
		reth bool
	}
	cases := []struct {
		name    string
		pkts    []pk
		recvErr bool // the receive taken by the first packet fails
	}{
		{"send-middle-alone", []pk{{wire.RCSendMiddle, 1024, false}}, false},
		{"send-last-alone", []pk{{wire.RCSendLast, 100, false}}, false},
		{"write-middle-alone", []pk{{wire.RCWriteMiddle, 1024, false}}, false},
		{"write-last-alone", []pk{{wire.RCWriteLast, 100, false}}, false},
		{"send-first-then-send-only", []pk{{wire.RCSendFirst, 1024, false}, {wire.RCSendOnly, 100, false}}, true},
		{"send-first-then-write-middle", []pk{{wire.RCSendFirst, 1024, false}, {wire.RCWriteMiddle, 1024, false}}, true},
		{"send-first-then-read", []pk{{wire.RCSendFirst, 1024, false}, {wire.RCReadRequest, 0, true}}, true},
		{"write-first-then-send-last", []pk{{wire.RCWriteFirst, 1024, true}, {wire.RCSendLast, 100, false}}, false},
		{"write-first-then-write-first", []pk{{wire.RCWriteFirst, 1024, true}, {wire.RCWriteFirst, 1024, true}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, allRemote)
			fill(p.memb, 4)
			p.recvB(50, p.mrb, 65536, 8192)
			p.recvB(51, p.mrb, 65536+8192, 8192)
			c := p.capture()
			psn := wire.PSN(0x100) // B's rq_psn
			for i, x := range tc.pkts {
				ext := func(h []byte) {}
				if x.reth {
					ext = func(h []byte) { wire.RETH(h).Encode(p.mrb.Addr, p.mrb.RKey, 3072) }
				}
				d := p.forge(x.op, psn.Add(i), ext, mtu[:x.n])
				p.hb.Receive(p.now, []link.Datagram{d})
			}
			bad := psn.Add(len(tc.pkts) - 1)
			naks := c.acks(false, wire.SyndromeInvalidReq)
			if len(naks) != 1 || naks[0].p.BTH.PSN() != bad || len(c.sent(false)) != 1 {
				t.Fatalf("want exactly one NAK 0x61 for PSN %#x:\n%s", uint32(bad), c.dump())
			}
			if st := p.b.State(); st != StateErr {
				t.Fatalf("responder state %d", st)
			}
			if tc.recvErr {
				checkWCs(t, "B recv", p.brq.take(), wc{50, StatusRemInvReqErr}, wc{51, StatusWRFlushErr})
			} else {
				checkWCs(t, "B recv", p.brq.take(), wc{50, StatusWRFlushErr}, wc{51, StatusWRFlushErr})
			}
			if p.hb.Stats().RequestErrors.Load() != 1 {
				t.Fatalf("RequestErrors = %d", p.hb.Stats().RequestErrors.Load())
			}
			// A (nothing outstanding) ignores the NAK.
			p.run(time.Second)
			if st := p.a.State(); st != StateRTS {
				t.Fatalf("requester state %d", st)
			}
		})
	}
}

// 14. The receive path drops (and counts) malformed, misaddressed and
// corrupted datagrams, and they do not disturb a transfer in progress: each
// forged copy of a real packet carries the expected PSN and altered payload,
// so accepting any of them would corrupt the message.
func TestReceiveFilters(t *testing.T) {
	p := newPair(t, allRemote)
	fill(p.mema, 0x44)
	p.recvB(50, p.mrb, 0, 8192)
	c := p.capture()
	const n = 5*1024 - 300
	p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, n)})
	real := p.la.q
	p.la.q = nil
	if len(real) != 5 {
		t.Fatalf("%d packets queued", len(real))
	}
	victim := real[1] // SEND MIDDLE, PSN 0x101
	// variant copies the victim, corrupts its payload, applies mod and, if
	// reseal, recomputes the ICRC for the datagram's addresses.
	variant := func(mod func(d *link.Datagram), reseal bool) link.Datagram {
		d := victim
		d.Buf = clone(victim.Buf)
		d.Buf[wire.BTHLen+10] ^= 0xFF
		if mod != nil {
			mod(&d)
		}
		if reseal {
			wire.PutICRC(d.Src.Addr(), d.Dst.Addr(), d.Src.Port(), d.Dst.Port(), d.Buf)
		}
		return d
	}
	if wire.Opcode(0xFF).Valid() {
		t.Fatal("0xFF is a valid opcode")
	}
	garbage := make([]byte, 64)
	fill(garbage, 0x99)
	garbage[0] = 0xFF
	junk := []link.Datagram{
		{Buf: garbage, Src: victim.Src, Dst: victim.Dst},         // unknown opcode
		{Buf: []byte{1, 2, 3}, Src: victim.Src, Dst: victim.Dst}, // short
		{Buf: victim.Buf[:wire.BTHLen], Src: victim.Src, Dst: victim.Dst},
		variant(func(d *link.Datagram) { d.Buf[1] |= 0x01 }, true), // TVer 1
		variant(func(d *link.Datagram) { d.Dst = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.9"), link.RoCEPort) }, true),
		variant(func(d *link.Datagram) { wire.BTH(d.Buf).SetDestQP(0x777777) }, true),
		variant(func(d *link.Datagram) { wire.BTH(d.Buf).SetDestQP(0) }, true),
		variant(nil, false), // bad ICRC
		variant(func(d *link.Datagram) { d.Src = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.3"), d.Src.Port()) }, true),
		variant(func(d *link.Datagram) { wire.BTH(d.Buf).SetOpcode(wire.UCSendMiddle) }, true),
		variant(func(d *link.Datagram) { wire.BTH(d.Buf).SetPKey(0x1234) }, true),
	}
	// Junk first, then the real packets with the junk again before the
	// victim and at the end.
	var q []link.Datagram
	q = append(q, junk...)
	q = append(q, real[0])
	q = append(q, junk...)
	q = append(q, real[1:]...)
	q = append(q, junk...)
	p.la.q = q

	// And a forged ACK to A for a PSN it never sent.
	ack := make([]byte, wire.PacketLen(wire.RCAck, 0))
	wire.AETH(ack[wire.BTHLen:]).Encode(wire.SyndromeACK, 0)
	wire.BTH(ack).Encode(wire.RCAck, false, 0, p.a.QPN(), false, 0x100+50)
	wire.PutICRC(addrB, addrA, p.b.sport, link.RoCEPort, ack)
	p.lb.q = append(p.lb.q, link.Datagram{Buf: ack, Src: netip.AddrPortFrom(addrB, p.b.sport), Dst: netip.AddrPortFrom(addrA, link.RoCEPort)})

	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
	r := p.brq.take()
	checkWCs(t, "B recv", r, wc{50, StatusSuccess})
	if r[0].ByteLen != n || !bytes.Equal(p.memb[:n], p.mema[:n]) {
		t.Fatalf("message damaged: %d bytes", r[0].ByteLen)
	}
	if len(c.sent(true)) != 5 {
		t.Fatalf("A retransmitted:\n%s", c.dump())
	}
	st := p.hb.Stats()
	for _, x := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"Received", st.Received.Load(), uint64(3*len(junk) + 5)},
		{"DropMalformed", st.DropMalformed.Load(), 3 * 4},
		{"DropNotForUs", st.DropNotForUs.Load(), 3},
		{"DropUnknownQP", st.DropUnknownQP.Load(), 3 * 2},
		{"DropICRC", st.DropICRC.Load(), 3},
		{"DropWrongSource", st.DropWrongSource.Load(), 3},
		{"DropWrongTransport", st.DropWrongTransport.Load(), 3},
		{"DropPKey", st.DropPKey.Load(), 3},
		{"Duplicates", st.Duplicates.Load(), 0},
		{"DropOutOfSequence", st.DropOutOfSequence.Load(), 0},
		{"RequestErrors", st.RequestErrors.Load(), 0},
	} {
		if x.got != x.want {
			t.Errorf("B %s = %d, want %d", x.name, x.got, x.want)
		}
	}
	if got := p.ha.Stats().DropBadResponse.Load(); got != 1 {
		t.Errorf("A DropBadResponse = %d, want 1", got)
	}
	if p.a.State() != StateRTS || p.b.State() != StateRTS {
		t.Fatalf("states %d %d", p.a.State(), p.b.State())
	}
}

// nativeWord reads the 8-byte word at b in native byte order.
func nativeWord(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

// RNR on a WRITE with immediate (it needs a receive only at its LAST/ONLY
// packet): after the RNR wait the packet is resent and must be accepted
// once a receive is posted, with the data written once.
func TestRNRWriteImm(t *testing.T) {
	for _, n := range []int{0, 700, 3000} {
		t.Run(fmt.Sprintf("len=%d", n), func(t *testing.T) {
			p := newPair(t, allRemote)
			fill(p.mema, 0x21)
			c := p.capture()
			d := wire.RNRDelay(12)
			p.postA(SendWR{ID: 1, Op: WRWriteImm, Flags: SendSignaled, Imm: 77, SGL: p.sge(p.mra, 0, n), RemoteAddr: p.mrb.Addr + 4096, RKey: p.mrb.RKey})
			p.run(3*d + d/2)
			if got := p.hb.Stats().RNRNAKsSent.Load(); got != 4 {
				t.Fatalf("RNR NAKs = %d:\n%s", got, c.dump())
			}
			p.recvB(50, p.mrb, 0, 16)
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
			r := p.brq.take()
			checkWCs(t, "B recv", r, wc{50, StatusSuccess})
			if r[0].Opcode != WCRecvRDMAWithImm || r[0].Imm != 77 || r[0].ByteLen != uint32(n) {
				t.Fatalf("recv completion %+v", r[0])
			}
			if !bytes.Equal(p.memb[4096:4096+n], p.mema[:n]) {
				t.Fatal("data damaged")
			}
			if p.hb.Stats().RequestErrors.Load() != 0 || p.b.State() != StateRTS {
				t.Fatalf("responder failed: state %d:\n%s", p.b.State(), c.dump())
			}
		})
	}
}

// A NAK for a PSN after a READ (or atomic) whose response was lost is not
// about that READ: the requester must ask for the READ again (rxe's
// check_psn: COMPST_ERROR_RETRY), not fail it with the NAK's status. Here
// the responder is in ERR after the NAK, so the READ ends in RETRY_EXC_ERR.
func TestNAKAfterLostReadResponse(t *testing.T) {
	for _, op := range []WROp{WRRead, WRFetchAdd} {
		t.Run(fmt.Sprintf("op=%d", op), func(t *testing.T) {
			p := newPair(t, allRemote)
			p.a.Modify(p.now, &Attr{RetryCnt: 2}, AttrRetryCnt)
			c := p.capture()
			c.dropB = once(func(s *sentPkt) bool { return s.p.Op != wire.RCAck })
			p.postA(SendWR{ID: 1, Op: op, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8), RemoteAddr: p.mrb.Addr + 64, RKey: p.mrb.RKey, CompareAdd: 1})
			p.postA(SendWR{ID: 2, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey ^ 1})
			p.postA(SendWR{ID: 3, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8)})
			p.run(time.Minute)
			checkWCs(t, "A send", p.acq.take(), wc{1, StatusRetryExcErr}, wc{2, StatusWRFlushErr}, wc{3, StatusWRFlushErr})
			if p.a.State() != StateErr || p.b.State() != StateErr {
				t.Fatal("state")
			}
		})
	}
}

// 15. TrustLoopback: a host that trusts loopback takes a packet from a
// loopback address whatever its ICRC, and still checks every other
// packet; a host that does not checks all of them.
func TestTrustLoopbackICRC(t *testing.T) {
	wan := [2]netip.Addr{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")}
	for _, c := range []struct {
		name     string
		a, b     netip.Addr
		trust    bool
		accepted bool
	}{
		{"loopback trusted", addrA, addrB, true, true},
		{"loopback checked", addrA, addrB, false, false},
		{"other address with trust", wan[0], wan[1], true, false},
		{"other address", wan[0], wan[1], false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPairOf(t, QPTypeRC, c.a, c.b, func(h *HostConfig) { h.TrustLoopback = c.trust }, nil)
			fill(p.mema, 0x5A)
			p.postA(SendWR{ID: 1, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 512),
				RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
			if len(p.la.q) != 1 {
				t.Fatalf("%d packets queued", len(p.la.q))
			}
			d := &p.la.q[0]
			d.Buf[len(d.Buf)-1] ^= 0x01 // the ICRC's last byte: the payload stays right
			p.hb.Receive(p.now, p.la.q)
			p.la.q = nil
			st := p.hb.Stats()
			if got, want := st.DropICRC.Load(), uint64(1); c.accepted {
				if got != 0 || !bytes.Equal(p.memb[:512], p.mema[:512]) {
					t.Fatalf("DropICRC %d, written %v: want the packet taken", got, bytes.Equal(p.memb[:512], p.mema[:512]))
				}
			} else if got != want || p.memb[0] != 0 {
				t.Fatalf("DropICRC %d, memory %#x: want the packet dropped", got, p.memb[0])
			}
			// Either way the transfer completes (a dropped packet is resent).
			p.run(time.Minute)
			checkWCs(t, "A write", p.acq.take(), wc{1, StatusSuccess})
			if !bytes.Equal(p.memb[:512], p.mema[:512]) {
				t.Fatal("memory differs after the transfer")
			}
		})
	}
}
