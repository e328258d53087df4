package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
)

// Tests of the asynchronous events (HostConfig.OnEvent): COMM_EST, and a CQ
// overflow that raises CQ_ERR and QP_FATAL and takes the QP to ERR. The
// SRQ events are tested in srq_test.go.

// evLog records the events of the hosts it is installed on.
type evLog struct {
	mu sync.Mutex
	ev []Event
}

func (l *evLog) add(e Event) {
	l.mu.Lock()
	l.ev = append(l.ev, e)
	l.mu.Unlock()
}

// hook returns a HostConfig modifier that installs l.
func (l *evLog) hook() func(*HostConfig) { return func(c *HostConfig) { c.OnEvent = l.add } }

func (l *evLog) take() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.ev
	l.ev = nil
	return e
}

func evString(e Event) string {
	s := fmt.Sprintf("{type %d", e.Type)
	if e.QP != nil {
		s += fmt.Sprintf(" qp %#x", e.QP.QPN())
	}
	if e.SRQ != nil {
		s += " srq"
	}
	if e.CQ != nil {
		s += " cq"
	}
	return s + "}"
}

// checkEvents asserts that got is exactly want (type and object).
func checkEvents(t *testing.T, got []Event, want ...Event) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i] == want[i]
	}
	if !ok {
		var g, w []string
		for _, e := range got {
			g = append(g, evString(e))
		}
		for _, e := range want {
			w = append(w, evString(e))
		}
		t.Fatalf("events: got %v, want %v", g, w)
	}
}

// TestEventCommEst: the first packet a QP receives in RTR raises COMM_EST,
// once; a QP that is already in RTS when its first packet comes raises
// nothing, nor do packets dropped before they reach the QP.
func TestEventCommEst(t *testing.T) {
	for _, typ := range []QPType{QPTypeRC, QPTypeUC} {
		t.Run(fmt.Sprintf("type=%d", typ), func(t *testing.T) {
			var ev evLog
			p := newPairOf(t, typ, addrA, addrB, ev.hook(), nil)
			checkEvents(t, ev.take())
			p.b.Modify(p.now, &Attr{State: StateRTR}, AttrState)
			for i := range 3 {
				p.recvB(uint64(50+i), p.mrb, i*4096, 4096)
			}
			// A packet with a bad ICRC reaches no QP: no event.
			p.postA(SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
			bad := p.la.q[0]
			p.la.q = nil
			bad.Buf[len(bad.Buf)-1] ^= 1
			p.hb.Receive(p.now, []link.Datagram{bad})
			checkEvents(t, ev.take())
			p.postA(SendWR{ID: 2, Op: WRSend, SGL: p.sge(p.mra, 0, 3000)})
			p.postA(SendWR{ID: 3, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
			p.run(time.Second)
			checkEvents(t, ev.take(), Event{Type: EventCommEst, QP: p.b})
			if st := p.b.State(); st != StateRTR {
				t.Fatalf("B state %d: COMM_EST must not change it", st)
			}
			// RC recovers the corrupted message 1; UC loses it.
			next := uint64(52)
			if typ == QPTypeRC {
				checkWCs(t, "B recv", p.brq.take(), wc{50, 0}, wc{51, 0}, wc{52, 0})
				next = 53
			} else {
				checkWCs(t, "B recv", p.brq.take(), wc{50, 0}, wc{51, 0})
			}
			// RTS: more traffic, in both directions, raises nothing.
			p.b.Modify(p.now, &Attr{State: StateRTS}, AttrState)
			p.recvB(53, p.mrb, 16384, 4096)
			must(t, p.a.PostRecv(&RecvWR{ID: 9, SGL: p.sge(p.mra, 65536, 4096)}))
			p.postA(SendWR{ID: 4, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
			must(t, p.b.PostSend(p.now, &SendWR{ID: 5, Op: WRSend, SGL: p.sge(p.mrb, 0, 100)}))
			p.run(time.Second)
			checkEvents(t, ev.take())
			checkWCs(t, "A recv", p.arq.take(), wc{9, 0})
			checkWCs(t, "B recv", p.brq.take(), wc{next, 0})
			// After RESET the QP raises it again in its next RTR.
			p.b.Modify(p.now, &Attr{State: StateReset}, AttrState)
			p.b.Modify(p.now, &Attr{State: StateInit}, AttrState)
			p.b.Modify(p.now, &Attr{State: StateRTR, RQPSN: p.a.Attr().SQPSN}, AttrState|AttrRQPSN)
			p.recvB(60, p.mrb, 0, 4096)
			p.postA(SendWR{ID: 6, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
			p.run(time.Second)
			checkEvents(t, ev.take(), Event{Type: EventCommEst, QP: p.b})
			checkWCs(t, "B recv", p.brq.take(), wc{60, 0})
		})
	}
}

// TestEventCQOverflow: a completion the CQ refuses raises CQ_ERR for the CQ
// and QP_FATAL for the QP, once, and the QP goes to ERR.
func TestEventCQOverflow(t *testing.T) {
	t.Run("rc-recv", func(t *testing.T) {
		var ev evLog
		p := newPairOf(t, QPTypeRC, addrA, addrB, ev.hook(), nil)
		p.brq.cap = 1
		for i := range 4 {
			p.recvB(uint64(50+i), p.mrb, i*4096, 4096)
		}
		p.postA(SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
		p.run(time.Second)
		checkEvents(t, ev.take())
		p.postA(SendWR{ID: 2, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
		p.postA(SendWR{ID: 3, Op: WRSend, SGL: p.sge(p.mra, 0, 100)})
		p.run(10 * time.Millisecond)
		checkEvents(t, ev.take(), Event{Type: EventCQErr, CQ: p.brq}, Event{Type: EventQPFatal, QP: p.b})
		if st := p.b.State(); st != StateErr {
			t.Fatalf("B state %d, want ERR", st)
		}
		checkWCs(t, "B recv", p.brq.take(), wc{50, 0})
		if n := p.hb.Stats().CQOverflow.Load(); n < 1 {
			t.Fatalf("CQOverflow = %d", n)
		}
		// Nothing more is raised while the QP stays in ERR.
		p.run(time.Second)
		checkEvents(t, ev.take())
	})
	for _, typ := range []QPType{QPTypeRC, QPTypeUC, QPTypeUD} {
		t.Run(fmt.Sprintf("send/type=%d", typ), func(t *testing.T) {
			var ev evLog
			p := newPairOf(t, typ, addrA, addrB, ev.hook(), nil)
			p.acq.cap = 2
			for i := range 4 {
				p.recvB(uint64(50+i), p.mrb, i*4096, 4096)
			}
			wr := func(id uint64) SendWR {
				if typ == QPTypeUD {
					return p.udTo(id, WRSend, addrB, p.b.QPN(), udQKey, 0, 100)
				}
				return SendWR{ID: id, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100)}
			}
			for i := uint64(1); i <= 3; i++ {
				p.postA(wr(i))
			}
			p.run(10 * time.Millisecond)
			checkEvents(t, ev.take(), Event{Type: EventCQErr, CQ: p.acq}, Event{Type: EventQPFatal, QP: p.a})
			if st := p.a.State(); st != StateErr {
				t.Fatalf("A state %d, want ERR", st)
			}
			checkWCs(t, "A send", p.acq.take(), wc{1, 0}, wc{2, 0})
			// Posting to the QP in ERR flushes at once; no new events.
			p.postA(wr(4))
			checkWCs(t, "A send", p.acq.take(), wc{4, StatusWRFlushErr})
			checkEvents(t, ev.take())
			if typ != QPTypeRC {
				// UC/UD completed all three on the wire before the QP went
				// down; B got them.
				if n := len(p.brq.take()); n != 3 {
					t.Fatalf("B received %d", n)
				}
			}
			// RESET and back: the QP works and the CQ (drained) takes
			// completions again.
			next := p.a.Attr().SQPSN
			p.a.Modify(p.now, &Attr{State: StateReset}, AttrState)
			if typ == QPTypeUD {
				udReady(p.now, p.a, udQKey)
			} else {
				connect(p.now, p.a, p.b, addrB, next, 0x200, 1024)
			}
			p.postA(wr(5))
			p.run(time.Second)
			checkWCs(t, "A send", p.acq.take(), wc{5, 0})
			checkEvents(t, ev.take())
		})
	}
}

// TestEventCQOverflowOnModify: sends queued in SQD go out when the QP moves
// back to RTS; a send CQ overflow then takes the QP to ERR at once.
func TestEventCQOverflowOnModify(t *testing.T) {
	var ev evLog
	p := newPairOf(t, QPTypeUC, addrA, addrB, ev.hook(), nil)
	p.acq.cap = 1
	p.a.Modify(p.now, &Attr{State: StateSQD}, AttrState)
	for i := uint64(1); i <= 3; i++ {
		p.postA(SendWR{ID: i, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 10), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
	}
	checkWCs(t, "A send in SQD", p.acq.take())
	p.a.Modify(p.now, &Attr{State: StateRTS}, AttrState)
	checkEvents(t, ev.take(), Event{Type: EventCQErr, CQ: p.acq}, Event{Type: EventQPFatal, QP: p.a})
	if st := p.a.State(); st != StateErr {
		t.Fatalf("A state %d, want ERR", st)
	}
	checkWCs(t, "A send", p.acq.take(), wc{1, 0})
}

// TestEventResponderErrors: a responder that NAKs a request for a remote
// access violation raises QP_ACCESS_ERR; for an invalid request (here, an
// atomic at a misaligned address), QP_REQ_ERR. The requester gets only its
// error completion.
func TestEventResponderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		wr   func(p *pair) SendWR
		want EventType
	}{
		{"bad rkey", func(p *pair) SendWR {
			return SendWR{ID: 1, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey ^ 0x55}
		}, EventQPAccessErr},
		{"misaligned atomic", func(p *pair) SendWR {
			return SendWR{ID: 1, Op: WRFetchAdd, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8), RemoteAddr: p.mrb.Addr + 4, RKey: p.mrb.RKey}
		}, EventQPReqErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev evLog
			p := newPairOf(t, QPTypeRC, addrA, addrB, ev.hook(), nil)
			must(t, p.a.PostSend(p.now, ptr(tc.wr(p))))
			p.run(time.Second)
			var got []Event
			for _, e := range ev.take() {
				if e.Type != EventCommEst {
					got = append(got, e)
				}
			}
			checkEvents(t, got, Event{Type: tc.want, QP: p.b})
		})
	}
}

func ptr[T any](v T) *T { return &v }
