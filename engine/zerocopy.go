package engine

import (
	"net/netip"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// zeroCopyMin is the smallest payload that a data packet sends from the
// memory it lies in (link.Datagram.Payload) rather than copied into the
// packet buffer. Copying a few hundred bytes costs about what the kernel
// spends on two more iovecs, so small packets keep their single buffer
// (and GSO runs of them their one iovec per datagram).
const zeroCopyMin = 512

// payloadRef returns the n bytes at offset off of the scatter list segs
// as one slice of the memory they lie in, or nil when they span segments
// or are too few to be worth sending in place.
func payloadRef(segs [][]byte, off, n int) []byte {
	if n < zeroCopyMin {
		return nil
	}
	for _, s := range segs {
		if off < len(s) {
			if off+n > len(s) {
				return nil
			}
			return s[off : off+n : off+n]
		}
		off -= len(s)
	}
	return nil
}

// dataPacket is packet for a packet with an n-byte payload. If ref is not
// nil it is that payload, sent from where it lies (see payloadRef), and b
// has no room for it: b holds the opcode's headers (zeroed), then the pad
// and the ICRC. Fill the headers, copy the payload in if ref is nil, and
// pass b to commitData.
func (t *txBatch) dataPacket(qp *QP, op wire.Opcode, n int, ref []byte) []byte {
	if ref == nil {
		return t.packet(qp, op, n)
	}
	if len(t.dg) == cap(t.dg) {
		t.h.flush(t)
	}
	b := t.store[len(t.dg)][:wire.PacketLen(op, n)-n]
	clear(b)
	return b
}

// commitData is commit for a packet from dataPacket, whose payload ref (if
// not nil) goes between its first hdr bytes and the rest. The payload's
// memory must stay as it is until the batch is flushed, as a message's
// buffer must until its work request completes.
func (t *txBatch) commitData(qp *QP, b []byte, hdr int, ref []byte) {
	if ref == nil {
		t.commit(qp, b)
		return
	}
	h := t.h
	raceReadPayload(ref)
	qp.icrc.PutParts(b, hdr, ref)
	qp.sent++
	t.dg = append(t.dg, link.Datagram{Buf: b, Payload: ref, PayloadAt: hdr,
		Src: netip.AddrPortFrom(h.cfg.Addr, qp.sport), Dst: netip.AddrPortFrom(qp.attr.Remote, h.cfg.Port)})
}
