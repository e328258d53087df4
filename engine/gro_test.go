package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
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
