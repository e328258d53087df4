package engine

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// GRHLen is the space at the start of every UD receive buffer that receives
// the network header (spec §7.2): the IPv6 header, or 20 zero bytes and the
// IPv4 header.
const GRHLen = 40

// controlledQKey is the Q_Key bit that, in a send work request, means "use
// the QP's own Q_Key" (IBTA C10-15).
const controlledQKey = 0x80000000

// sendUD sends w as one UD packet. A message larger than the port MTU is not
// sent at all and still completes successfully, as IBTA C10-93.1.1 and rxe
// have it.
func (r *requester) sendUD(qp *QP, w *sendWQE, tx *txBatch) {
	r.next++
	if w.length > qp.host.cfg.MTU {
		qp.count(&qp.host.stats.DropUDTooLong)
		return
	}
	if qp.sport == 0 {
		qp.sport = qp.host.sourcePort(wire.UDSourcePort(qp.qpn))
	}
	op := wire.UDSendOnly
	if w.wr.Op == WRSendImm {
		op = wire.UDSendOnlyImm
	}
	n := w.length
	b := tx.packet(qp, op, n)
	qkey := w.ext.remoteQKey
	if qkey&controlledQKey != 0 {
		qkey = qp.attr.QKey
	}
	wire.DETH(b[wire.BTHLen:]).Encode(qkey, qp.qpn)
	h := wire.BTHLen + wire.DETHLen
	if op == wire.UDSendOnlyImm {
		wire.ImmDt(b[h:]).SetImm(w.wr.Imm)
		h += wire.ImmDtLen
	}
	copyFrom(b[h:h+n], w.segs, 0)
	wire.BTH(b).Encode(op, w.wr.Flags&SendSolicited != 0, wire.Pad(n), w.ext.remoteQPN, true, r.psn)
	r.psn = r.psn.Next()
	tx.commitTo(qp, b, w.ext.av.Remote)
}

// handleUD receives one UD datagram: Q_Key check, a receive WQE (none: a
// silent drop), the 40-byte GRH area, then the payload.
func (qp *QP) handleUD(now time.Time, p *wire.Packet, d *link.Datagram) {
	h := qp.host
	if qp.st != StateRTR && qp.st != StateRTS && qp.st != StateSQD {
		qp.count(&h.stats.DropState)
		return
	}
	deth := p.DETH()
	if deth.QKey() != qp.attr.QKey {
		qp.count(&h.stats.DropQKey)
		return
	}
	r := qp.takeRecv(nil, 0)
	if r == nil {
		qp.count(&h.stats.DropNoRecv)
		return
	}
	n := len(p.Payload)
	if GRHLen+n > r.length {
		qp.pushRecv(&Completion{WRID: r.id, Status: StatusLocLenErr, QPN: qp.qpn})
		return
	}
	var grh [GRHLen]byte
	fillGRH(&grh, d.Src.Addr(), d.Dst.Addr(), len(d.Buf))
	copyTo(r.segs, 0, grh[:])
	copyTo(r.segs, GRHLen, p.Payload)
	c := Completion{WRID: r.id, Opcode: WCRecv, Flags: WCFlagGRH, ByteLen: uint32(GRHLen + n), QPN: qp.qpn,
		SrcQP: deth.SrcQP(), Solicited: p.BTH.SE()}
	if imm := p.ImmDt(); imm != nil {
		c.Flags |= WCFlagWithImm
		c.Imm = imm.Imm()
	}
	qp.pushRecv(&c)
}

// fillGRH writes the network header of a received datagram of udpPayload
// bytes as rxe puts it in the GRH area: for IPv4, 20 zero bytes and the IPv4
// header; for IPv6, the IPv6 header. A UDP socket does not show the
// sender's TOS, TTL or IP ID, so they read 0, 64 and 0.
func fillGRH(g *[GRHLen]byte, src, dst netip.Addr, udpPayload int) {
	*g = [GRHLen]byte{}
	udpLen := wire.UDPHeaderLen + udpPayload
	if src.Unmap().Is4() {
		ip := g[20:]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(wire.IPv4HeaderLen+udpLen))
		binary.BigEndian.PutUint16(ip[6:], 0x4000)
		ip[8], ip[9] = 64, 17
		s, dd := src.Unmap().As4(), dst.Unmap().As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], dd[:])
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		for sum > 0xFFFF {
			sum = sum&0xFFFF + sum>>16
		}
		binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
		return
	}
	g[0] = 0x60
	binary.BigEndian.PutUint16(g[4:], uint16(udpLen))
	g[6], g[7] = 17, 64
	s, dd := src.As16(), dst.As16()
	copy(g[8:24], s[:])
	copy(g[24:40], dd[:])
}
