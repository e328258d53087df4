package engine

import (
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

// handleUCRequest is the UC responder (spec §7.1): no ACKs and no NAKs. A
// PSN gap drops the rest of the message — a FIRST or ONLY packet is taken
// whatever its PSN — so a partial message is never delivered; a receive WQE
// left half-filled by an interrupted SEND is reused for the next one.
func (qp *QP) handleUCRequest(now time.Time, p *wire.Packet) {
	s := &qp.rsp
	h := qp.host
	if qp.st != StateRTR && qp.st != StateRTS && qp.st != StateSQD {
		qp.count(&h.stats.DropState)
		return
	}
	psn, f := p.BTH.PSN(), p.Flags
	first := f&wire.IsFirst != 0
	if psn != s.ePSN || s.ucDropping {
		if !first {
			qp.count(&h.stats.DropOutOfSequence)
			s.ucDropping = true
			s.ePSN = psn.Next()
			return
		}
		s.ucDropping = false
	}
	s.ePSN = psn.Next()
	if first {
		// A new message: anything unfinished is abandoned. A WRITE's
		// landed bytes stay (no completion); a SEND's receive WQE is
		// kept in s.cur for reuse.
		if s.kind == msgWrite {
			s.wrBuf = nil
		}
		s.kind = msgNone
	} else if (s.kind == msgSend) != (f&wire.IsSend != 0) || s.kind == msgNone {
		qp.ucDrop()
		return
	}
	n := len(p.Payload)
	if (f&wire.IsLast == 0 && n != qp.mtu) || n > qp.mtu || p.BTH.PadCount() != wire.Pad(n) || (!first && f&wire.IsLast != 0 && n == 0) {
		qp.ucDrop()
		return
	}
	if f&wire.IsSend != 0 {
		qp.ucSend(p, first)
		return
	}
	qp.ucWrite(p, first)
}

// ucDrop abandons the message in progress until the next FIRST or ONLY.
func (qp *QP) ucDrop() {
	s := &qp.rsp
	qp.count(&qp.host.stats.DropUCMessage)
	s.ucDropping = true
	if s.kind == msgWrite {
		s.wrBuf = nil
	}
	s.kind = msgNone
}

func (qp *QP) ucSend(p *wire.Packet, first bool) {
	s := &qp.rsp
	if first {
		if s.cur == nil {
			if s.cur = qp.takeRecv(nil, 0); s.cur == nil {
				qp.count(&qp.host.stats.DropNoRecv)
				s.ucDropping = true
				return
			}
		}
		s.curOff, s.kind = 0, msgSend
	}
	r := s.cur
	n := len(p.Payload)
	if s.curOff+n > r.length {
		// Too long for the receive: it completes in error, as on RC.
		qp.pushRecv(&Completion{WRID: r.id, Status: StatusLocLenErr, QPN: qp.qpn})
		s.cur, s.kind = nil, msgNone
		s.ucDropping = true
		return
	}
	copyTo(r.segs, s.curOff, p.Payload)
	s.curOff += n
	if p.Flags&wire.IsLast == 0 {
		return
	}
	c := Completion{WRID: r.id, Opcode: WCRecv, ByteLen: uint32(s.curOff), QPN: qp.qpn, SrcQP: qp.attr.DestQPN, Solicited: p.BTH.SE()}
	if imm := p.ImmDt(); imm != nil {
		c.Flags |= WCFlagWithImm
		c.Imm = imm.Imm()
	}
	s.cur, s.kind = nil, msgNone
	qp.pushRecv(&c)
}

func (qp *QP) ucWrite(p *wire.Packet, first bool) {
	s := &qp.rsp
	f := p.Flags
	n := len(p.Payload)
	last := f&wire.IsLast != 0
	if qp.attr.AccessFlags&AccessRemoteWrite == 0 {
		qp.ucDrop()
		return
	}
	if first {
		reth := p.RETH()
		total := reth.DMALen()
		if total > 1<<31 || (last && int(total) != n) || (!last && int(total) <= n) {
			qp.ucDrop()
			return
		}
		var buf []byte
		if total > 0 {
			b, err := qp.host.mem.RemoteCached(&qp.keys, qp.pd, qp.qpn, reth.RKey(), reth.VA(), uint64(total), AccessRemoteWrite)
			if err != nil {
				qp.ucDrop()
				return
			}
			buf = b
		}
		s.wrBuf, s.wrOff, s.wrTotal, s.kind = buf, 0, int(total), msgWrite
	}
	if s.wrOff+n > s.wrTotal || (last && s.wrOff+n != s.wrTotal) {
		qp.ucDrop()
		return
	}
	var r *recvWQE
	if last && f&wire.NeedsRecvWQE != 0 {
		if s.cur != nil {
			r, s.cur = s.cur, nil // an abandoned SEND's receive is reused
		} else if r = qp.takeRecv(nil, 0); r == nil {
			qp.count(&qp.host.stats.DropNoRecv)
			qp.ucDrop()
			return
		}
	}
	copy(s.wrBuf[s.wrOff:], p.Payload)
	s.wrOff += n
	if !last {
		return
	}
	s.kind, s.wrBuf = msgNone, nil
	if r != nil {
		qp.pushRecv(&Completion{WRID: r.id, Opcode: WCRecvRDMAWithImm, Flags: WCFlagWithImm,
			Imm: p.ImmDt().Imm(), ByteLen: uint32(s.wrTotal), QPN: qp.qpn, SrcQP: qp.attr.DestQPN, Solicited: p.BTH.SE()})
	}
}
