package engine

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// FuzzHostReceive feeds arbitrary datagrams, with a valid ICRC so they get
// past the checksum, to a host whose QP is mid-transfer. Whatever arrives,
// the host must not panic, and a transfer started afterwards on a fresh pair
// must still complete.
func FuzzHostReceive(f *testing.F) {
	seed := func(op wire.Opcode, n int, psn uint32) []byte {
		b := make([]byte, wire.PacketLen(op, n))
		wire.BTH(b).Encode(op, false, wire.Pad(n), 0x11, true, wire.PSN(psn))
		return b
	}
	for _, op := range []wire.Opcode{wire.RCSendFirst, wire.RCSendOnly, wire.RCWriteOnly, wire.RCWriteFirst,
		wire.RCReadRequest, wire.RCReadResponseOnly, wire.RCAck, wire.RCAtomicAck, wire.RCCompareSwap,
		wire.RCFetchAdd, wire.RCSendOnlyInvalidate, wire.RCWriteMiddle, wire.RCSendLastImm} {
		f.Add(seed(op, 8, 0x200), true)
		f.Add(seed(op, 0, 0x1ff), false)
	}
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, pkt []byte, fixICRC bool) {
		p := newPair(t, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
		must(t, p.b.PostRecv(&RecvWR{ID: 1, SGL: p.sge(p.mrb, 0, 4096)}))
		must(t, p.a.PostSend(p.now, &SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 3000)}))
		b := append([]byte(nil), pkt...)
		if len(b) >= wire.BTHLen+wire.ICRCLen {
			// Aim at B's QP (or A's) and seal with a valid ICRC.
			if len(b) > 5 {
				wire.BTH(b).SetDestQP(p.b.QPN())
				if b[0]&1 == 1 {
					wire.BTH(b).SetDestQP(p.a.QPN())
				}
			}
			if fixICRC {
				wire.PutICRC(addrA, addrB, 0xC000, link.RoCEPort, b)
			}
		}
		for _, h := range []*Host{p.hb, p.ha} {
			src, dst := addrA, h.Addr()
			if h == p.ha {
				src = addrB
				if fixICRC && len(b) >= wire.BTHLen+wire.ICRCLen {
					wire.PutICRC(src, dst, 0xC000, link.RoCEPort, b)
				}
			}
			h.Receive(p.now, []link.Datagram{{Buf: b, Src: netip.AddrPortFrom(src, 0xC000), Dst: netip.AddrPortFrom(dst, link.RoCEPort)}})
		}
		p.run(10 * time.Second)
		// A fresh pair is unaffected by whatever happened to this one.
		q := newPair(t, AccessRemoteWrite)
		must(t, q.b.PostRecv(&RecvWR{ID: 9, SGL: q.sge(q.mrb, 0, 64)}))
		must(t, q.a.PostSend(q.now, &SendWR{ID: 9, Op: WRSend, Flags: SendSignaled, SGL: q.sge(q.mra, 0, 64)}))
		q.run(time.Second)
		if c := q.acq.take(); len(c) != 1 || c[0].Status != StatusSuccess {
			t.Fatalf("fresh pair: %+v", c)
		}
	})
}
