package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// Regression tests for a bug the simulation (sim_test.go) found: every PSN
// sequence NAK, and every acknowledgement past a READ whose response was
// lost, started a new go-back-N and used up one retry_cnt, even while a
// retry for the same loss was under way. Reordering alone (no loss) then
// made a QP with a finite retry_cnt fail with RETRY_EXC_ERR in tens of
// microseconds, long before any timeout. rxe starts one retry and ignores
// the echoes until the retry makes progress (comp.started_retry).

// take returns and clears what a test link has queued.
func (l *queueLink) take() []link.Datagram { q := l.q; l.q = nil; return q }

// A NAK delivered three times (the network duplicated it) uses up one
// retry, not three.
func TestSeqNAKEchoesUseOneRetry(t *testing.T) {
	p := newPair(t, allRemote)
	p.a.Modify(p.now, &Attr{RetryCnt: 1}, AttrRetryCnt)
	fill(p.mema[:4096], 0x33)
	p.recvB(50, p.mrb, 0, 8192)
	const n = 4*1024 - 10
	p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, n)})
	reqs := p.la.take()
	if len(reqs) != 4 {
		t.Fatalf("A sent %d packets, want 4", len(reqs))
	}
	// The FIRST is overtaken: B sees a gap and sends one sequence NAK.
	p.hb.Receive(p.now, reqs[1:])
	naks := p.lb.take()
	var pk wire.Packet
	if len(naks) != 1 || pk.Parse(naks[0].Buf) != nil || pk.AETH() == nil || pk.AETH().Syndrome() != wire.SyndromePSNSeqErr {
		t.Fatalf("B answered %d packets, want one sequence NAK", len(naks))
	}
	for range 3 {
		d := naks[0]
		d.Buf = clone(d.Buf)
		p.ha.Receive(p.now, []link.Datagram{d})
	}
	if st := p.a.State(); st != StateRTS {
		t.Fatalf("A in state %d after the NAK echoes; completions %+v", st, p.acq.take())
	}
	if got := len(p.la.q); got != 4 {
		t.Fatalf("A retransmitted %d packets, want the 4 of one go-back-N", got)
	}
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
	checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
	if !bytes.Equal(p.memb[:n], p.mema[:n]) {
		t.Fatal("message damaged")
	}
}

// Two ACKs past a READ whose response was lost use up one retry, not two.
func TestLostResponseEchoesUseOneRetry(t *testing.T) {
	p := newPair(t, allRemote)
	p.a.Modify(p.now, &Attr{RetryCnt: 1}, AttrRetryCnt)
	fill(p.memb[:100], 0x44)
	p.recvB(50, p.mrb, 8192, 100)
	p.recvB(51, p.mrb, 8292, 100)
	p.postA(SendWR{ID: 1, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
	p.postA(SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 1000, 10)})
	p.postA(SendWR{ID: 3, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 1000, 10)})
	reqs := p.la.take()
	if len(reqs) != 3 {
		t.Fatalf("A sent %d packets, want 3", len(reqs))
	}
	var resps [][]link.Datagram // READ response, ACK, ACK
	for _, d := range reqs {
		p.hb.Receive(p.now, []link.Datagram{d})
		resps = append(resps, p.lb.take())
	}
	// The READ response is lost; the two ACKs arrive one by one.
	p.ha.Receive(p.now, resps[1])
	p.ha.Receive(p.now, resps[2])
	if st := p.a.State(); st != StateRTS {
		t.Fatalf("A in state %d after two ACKs past the READ; completions %+v", st, p.acq.take())
	}
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess}, wc{2, StatusSuccess}, wc{3, StatusSuccess})
	checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess}, wc{51, StatusSuccess})
	if !bytes.Equal(p.mema[:100], p.memb[:100]) {
		t.Fatal("READ data damaged")
	}
}
