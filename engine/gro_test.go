package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// A datagram the link coalesced (UDP GRO: Datagram.SegSize) is split back
// into its packets, the last of which may be shorter.
func TestReceiveCoalesced(t *testing.T) {
	p := newPair(t, allRemote)
	fill(p.mema[:4096], 0x5A)
	p.recvB(50, p.mrb, 0, 8192)
	const n = 4*1024 - 10
	p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, n)})
	reqs := p.la.q
	p.la.q = nil
	if len(reqs) != 4 {
		t.Fatalf("A sent %d packets, want 4", len(reqs))
	}
	size := len(reqs[1].Buf)
	var buf []byte
	for _, d := range reqs[1:] {
		buf = append(buf, d.Buf...)
	}
	if len(reqs[3].Buf) >= size {
		t.Fatalf("LAST is %d bytes, MIDDLE %d: want it shorter", len(reqs[3].Buf), size)
	}
	p.hb.Receive(p.now, []link.Datagram{reqs[0], {Buf: buf, Src: reqs[1].Src, Dst: reqs[1].Dst, SegSize: size}})
	if got := p.hb.Stats().Received.Load(); got != 4 {
		t.Fatalf("B counted %d received packets, want 4", got)
	}
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
	checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
	if !bytes.Equal(p.memb[:n], p.mema[:n]) {
		t.Fatal("message damaged")
	}
}

// ReceivePolled leaves the coalesced ACK pending: it goes out with the
// QP's next send, in the same flush, or at FlushAcks.
func TestReceivePolledDefersAck(t *testing.T) {
	p := newPair(t, allRemote)
	p.recvB(50, p.mrb, 0, 64)
	p.recvB(51, p.mrb, 64, 64)
	must(t, p.a.PostRecv(&RecvWR{ID: 60, SGL: p.sge(p.mra, 256, 64)}))
	p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8)})
	reqs := p.la.q
	p.la.q = nil
	if !p.hb.ReceivePolled(p.now, reqs) {
		t.Fatal("ReceivePolled reports no pending ACK")
	}
	if len(p.lb.q) != 0 {
		t.Fatalf("B sent %d packets, want the ACK held back", len(p.lb.q))
	}
	checkWCs(t, "B recv", p.brq.take(), wc{50, StatusSuccess})
	// B's reply carries the ACK in the same flush, after the SEND.
	if err := p.b.PostSend(p.now, &SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mrb, 128, 8)}); err != nil {
		t.Fatal(err)
	}
	var pk [2]wire.Packet
	if len(p.lb.q) != 2 || pk[0].Parse(p.lb.q[0].Buf) != nil || pk[1].Parse(p.lb.q[1].Buf) != nil ||
		pk[0].Op != wire.RCSendOnly || pk[1].Op != wire.RCAck {
		t.Fatalf("B sent %d packets, want SEND then ACK", len(p.lb.q))
	}
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
	checkWCs(t, "B send", p.bcq.take(), wc{2, StatusSuccess})

	// Without a send, FlushAcks sends it.
	p.postA(SendWR{ID: 3, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8)})
	reqs = p.la.q
	p.la.q = nil
	p.hb.ReceivePolled(p.now, reqs)
	if len(p.lb.q) != 0 {
		t.Fatalf("B sent %d packets, want the ACK held back", len(p.lb.q))
	}
	p.hb.FlushAcks()
	if len(p.lb.q) != 1 || pk[0].Parse(p.lb.q[0].Buf) != nil || pk[0].Op != wire.RCAck {
		t.Fatalf("FlushAcks sent %d packets, want one ACK", len(p.lb.q))
	}
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{3, StatusSuccess})
}
