package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// owedAck has A send one SEND that B receives the way its receive path
// does up to the end of a batch: B owes the coalesced ACK then.
func owedAck(t *testing.T, p *pair) {
	t.Helper()
	must(t, p.b.PostRecv(&RecvWR{ID: 1, SGL: p.sge(p.mrb, 0, 64)}))
	must(t, p.a.PostSend(p.now, &SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 64)}))
	if len(p.la.q) != 1 {
		t.Fatalf("A sent %d datagrams, want 1", len(p.la.q))
	}
	d := p.la.q[0]
	p.la.q = nil
	var pkt wire.Packet
	must(t, pkt.Parse(d.Buf))
	p.b.mu.Lock()
	tx := p.hb.getTx()
	p.b.handleRequest(p.now, &pkt, tx)
	p.hb.flush(tx)
	p.hb.putTx(tx)
	p.b.mu.Unlock()
	if len(p.lb.q) != 0 {
		t.Fatalf("B answered before the batch ended: %d datagrams", len(p.lb.q))
	}
}

// A QP destroyed while its receive path still owes a coalesced ACK sends the
// ACK first; otherwise the peer's last send never completes (it retransmits
// to a QP that no longer exists).
func TestDestroySendsDeferredAck(t *testing.T) {
	p := newPair(t, 0)
	owedAck(t, p)
	if c := p.brq.take(); len(c) != 1 {
		t.Fatalf("B's receive completions: %+v", c)
	}
	p.hb.DestroyQP(p.b)
	p.hb.pending = p.hb.pending[:0]
	if len(p.lb.q) != 1 {
		t.Fatalf("B sent %d datagrams on destroy, want the owed ACK", len(p.lb.q))
	}
	p.run(time.Second)
	if c := p.acq.take(); len(c) != 1 || c[0].Status != StatusSuccess {
		t.Fatalf("A's send completion: %+v", c)
	}
}

// gateLink is a queueLink whose first Send waits until the test opens the
// gate: a receive path preempted, or slow, while it sends a batch's answers.
type gateLink struct {
	queueLink
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (l *gateLink) Send(b []link.Datagram) error {
	l.once.Do(func() {
		close(l.entered)
		<-l.gate
	})
	return l.queueLink.Send(b)
}

// A QP destroyed while the batch that completed its last receive is still
// sending that receive's ACK returns only once the ACK is sent. An
// application polls the completion as soon as it is pushed, destroys its
// QPs and closes the device; if DestroyQP did not wait, the ACK left in the
// batch's answers went nowhere (the socket closed, the process exited) and
// the peer retransmitted its last send forever: ibv_srq_pingpong's rxe
// server then never counted its last send (interop srq-s1-rxeserver).
func TestDestroyWaitsForAckBeingSent(t *testing.T) {
	p := newPair(t, 0)
	g := &gateLink{entered: make(chan struct{}), gate: make(chan struct{})}
	p.hb.cfg.Link = g
	must(t, p.b.PostRecv(&RecvWR{ID: 1, SGL: p.sge(p.mrb, 0, 64)}))
	must(t, p.a.PostSend(p.now, &SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 64)}))
	reqs := p.la.q
	p.la.q = nil
	received := make(chan struct{})
	go func() {
		defer close(received)
		p.hb.Receive(p.now, reqs)
	}()
	<-g.entered // the ACK is taken from the QP and on its way out
	if c := p.brq.take(); len(c) != 1 || c[0].Status != StatusSuccess {
		t.Fatalf("B's receive completions: %+v", c)
	}
	destroyed := make(chan struct{})
	go func() {
		defer close(destroyed)
		p.hb.DestroyQP(p.b)
	}()
	select {
	case <-destroyed:
		t.Fatal("DestroyQP returned while the ACK of the QP's last receive was still being sent")
	case <-time.After(100 * time.Millisecond):
	}
	close(g.gate)
	<-received
	<-destroyed
	if len(g.q) != 1 {
		t.Fatalf("B sent %d datagrams, want the ACK", len(g.q))
	}
	p.lb.q = g.q
	p.run(time.Second)
	if c := p.acq.take(); len(c) != 1 || c[0].Status != StatusSuccess {
		t.Fatalf("A's send completion: %+v", c)
	}
}

// A post that fails its local checks moves the QP to ERR from the
// application's goroutine, where no transmit batch exists; a coalesced ACK
// the responder still owes must go out then, not crash the device.
func TestLocalErrorSendsDeferredAck(t *testing.T) {
	p := newPair(t, 0)
	owedAck(t, p)
	bad := p.sge(p.mrb, 0, 64)
	bad[0].LKey ^= 0x5a5a5a
	must(t, p.b.PostSend(p.now, &SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: bad}))
	if len(p.lb.q) != 1 {
		t.Fatalf("B sent %d datagrams on its local error, want the owed ACK", len(p.lb.q))
	}
	if c := p.bcq.take(); len(c) != 1 || c[0].Status != StatusLocProtErr {
		t.Fatalf("B's send completion: %+v", c)
	}
	p.run(time.Second)
	if c := p.acq.take(); len(c) != 1 || c[0].Status != StatusSuccess {
		t.Fatalf("A's send completion: %+v", c)
	}
}

// The host's count of owed ACKs follows each way an owed ACK goes: out
// with the QP's next send, out at FlushAcks, or dropped by a reset. FlushAcks
// skips the listed QPs (and their locks) when the count is zero, so a count
// that stayed too low would strand an ACK.
func TestAcksOwedCount(t *testing.T) {
	p := newPair(t, 0)
	owed := func(want int64) {
		t.Helper()
		if n := p.hb.acksOwed.Load(); n != want {
			t.Fatalf("acksOwed = %d, want %d", n, want)
		}
	}
	owedAck(t, p)
	owed(1)
	must(t, p.b.PostSend(p.now, &SendWR{ID: 2, Op: WRSend, SGL: p.sge(p.mrb, 0, 8)}))
	owed(0)
	if len(p.lb.q) != 2 {
		t.Fatalf("B's send carried %d datagrams, want the SEND and the owed ACK", len(p.lb.q))
	}
	p.lb.q = nil
	p.hb.FlushAcks()
	if len(p.lb.q) != 0 || len(p.hb.pending) != 0 {
		t.Fatalf("FlushAcks with nothing owed sent %d datagrams, left %d listed", len(p.lb.q), len(p.hb.pending))
	}

	owedAck(t, p)
	owed(1)
	p.hb.FlushAcks()
	owed(0)
	if len(p.lb.q) != 1 {
		t.Fatalf("FlushAcks sent %d datagrams, want the owed ACK", len(p.lb.q))
	}
	p.lb.q = nil

	owedAck(t, p)
	owed(1)
	p.b.Modify(p.now, &Attr{State: StateReset}, AttrState)
	owed(0)
}

// A batch that ends owing no ACK leaves the host's list of QPs that came
// to owe one empty, even though no FlushAcks follows (ReceivePolled reports
// none pending): here a READ request after a SEND, whose response implies
// the SEND's ACK. Otherwise the list would grow batch after batch.
func TestPendingAckListCleared(t *testing.T) {
	p := newPair(t, allRemote)
	for i := range 50 {
		must(t, p.b.PostRecv(&RecvWR{ID: uint64(i), SGL: p.sge(p.mrb, 0, 64)}))
		must(t, p.a.PostSend(p.now, &SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, 8)}))
		must(t, p.a.PostSend(p.now, &SendWR{ID: 2, Op: WRRead, SGL: p.sge(p.mra, 64, 8), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey}))
		batch := p.la.q
		p.la.q = nil
		if len(batch) != 2 {
			t.Fatalf("A sent %d datagrams, want the SEND and the READ request", len(batch))
		}
		if owed := p.hb.ReceivePolled(p.now, batch); owed {
			t.Fatal("ReceivePolled reports ACKs pending after the READ response implied the SEND's")
		}
		if n := len(p.hb.pending); n != 0 {
			t.Fatalf("after %d batches the host lists %d QPs", i+1, n)
		}
		p.run(time.Second)
		p.brq.take()
	}
}
