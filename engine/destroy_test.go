package engine

import (
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

// A QP destroyed while its receive path still owes a coalesced ACK sends the
// ACK first; otherwise the peer's last send never completes (it retransmits
// to a QP that no longer exists).
func TestDestroySendsDeferredAck(t *testing.T) {
	p := newPair(t, 0)
	must(t, p.b.PostRecv(p.now, &RecvWR{ID: 1, SGL: p.sge(p.mrb, 0, 64)}))
	must(t, p.a.PostSend(p.now, &SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 64)}))
	if len(p.la.q) != 1 {
		t.Fatalf("A sent %d datagrams, want 1", len(p.la.q))
	}
	// Deliver the SEND to B by hand, the way the receive path does up to
	// the point where it would flush the deferred ACK at batch end.
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
