package engine

import (
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

type msgKind uint8

const (
	msgNone msgKind = iota
	msgSend
	msgWrite
)

// resource is a responder resource: a READ or atomic kept so that a
// duplicate request can be answered again (rxe's responder resources).
type resource struct {
	valid    bool
	atomic   bool
	firstPSN wire.PSN
	lastPSN  wire.PSN
	va       uint64
	rkey     uint32
	length   uint32
	orig     uint64
}

// responder is the receive side of an RC QP. (Whether an ACK is owed,
// and when a READ's next burst goes out, are the QP's: ackPending and
// pumpAt, which a post reads too.) What every request reads comes first.
type responder struct {
	ePSN    wire.PSN // next expected PSN
	msn     uint32
	ackPSN  wire.PSN // the PSN the ACK owed acknowledges (QP.ackPending)
	nakSent bool     // a PSN sequence NAK is outstanding
	// ucDropping: UC is dropping the rest of a message after a gap.
	ucDropping bool
	dropped    bool // see rd
	kind       msgKind

	// rd is the READ being answered. Its responses go out readBurst
	// packets at a time (the rest from OnTimer, the QP's pumpAt being
	// due), and every request that arrives meanwhile is dropped (dropped
	// is set): when the last response is out, a PSN sequence NAK sends the
	// requester back to them. A peer thus cannot hold the receive path
	// for longer than one burst, however much it asks to read.
	rd readCursor

	wrBuf   []byte // target of the WRITE in progress
	wrOff   int
	wrTotal int
	cur     *recvWQE // &wqe while a multi-packet SEND fills it
	curOff  int
	wqe     recvWQE // the receive taken for the message in progress

	// res are the READ/atomic responder resources (max_dest_rd_atomic of
	// them, resCap), made at the first READ or atomic the QP answers: a
	// QP that never answers one does not carry them.
	res     []resource
	resCap  int
	resNext int
}

// readCursor is a READ being answered: length bytes at va under rkey,
// numbered from psn; off bytes and the PSNs before next are sent.
type readCursor struct {
	active bool
	psn    wire.PSN
	next   wire.PSN
	va     uint64
	rkey   uint32
	length uint32
	off    uint32
}

func (s *responder) reset(p wire.PSN) {
	res, segs := s.res, s.wqe.segs[:0]
	for i := range res {
		res[i] = resource{}
	}
	*s = responder{ePSN: p, res: res, resCap: s.resCap}
	s.wqe.segs = segs
}

func (s *responder) resizeResources(n int) {
	n = max(n, 1)
	if s.resCap != n {
		s.resCap = n
		s.res, s.resNext = nil, 0
	}
}

func (s *responder) saveResource(r resource) {
	if s.res == nil {
		s.res = make([]resource, max(s.resCap, 1))
	}
	s.res[s.resNext] = r
	s.resNext = (s.resNext + 1) % len(s.res)
}

// handleRequest is the responder: it checks and executes one request packet
// (rxe's order of checks, spec §6.3).
func (qp *QP) handleRequest(now time.Time, p *wire.Packet, tx *txBatch) {
	s := &qp.rsp
	if qp.st != StateRTR && qp.st != StateRTS && qp.st != StateSQD {
		qp.count(&qp.host.stats.DropState)
		return
	}
	psn := p.BTH.PSN()
	if s.rd.active {
		// A duplicate needs nothing: the responses going out acknowledge
		// what came before the READ, and a repeated READ request is
		// being answered. A new request is asked for again later.
		qp.count(&qp.host.stats.DropResponding)
		if !psn.Before(s.ePSN) {
			s.dropped = true
		}
		return
	}
	switch c := psn.Cmp(s.ePSN); {
	case c > 0:
		qp.count(&qp.host.stats.DropOutOfSequence)
		if !s.nakSent {
			s.nakSent = true
			qp.count(&qp.host.stats.SeqNAKsSent)
			qp.sendAck(tx, wire.SyndromePSNSeqErr, s.ePSN)
		}
		return
	case c < 0:
		qp.count(&qp.host.stats.Duplicates)
		qp.duplicate(now, p, psn, tx)
		return
	}
	s.nakSent = false
	f := p.Flags
	n := len(p.Payload)

	// Opcode sequence (step 5).
	cont := f&(wire.IsMiddle|wire.IsLast) != 0 && f&wire.IsFirst == 0
	switch s.kind {
	case msgSend:
		if !(f&wire.IsSend != 0 && cont) {
			qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
			return
		}
	case msgWrite:
		if !(f&wire.IsWrite != 0 && cont) {
			qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
			return
		}
	default:
		if cont {
			qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
			return
		}
	}
	// QP access flags (step 6).
	var need uint32
	switch {
	case f&(wire.IsWrite|wire.IsAtomicWrite) != 0:
		need = AccessRemoteWrite
	case f&wire.IsRead != 0:
		need = AccessRemoteRead
	case f&wire.IsAtomic != 0:
		need = AccessRemoteAtomic
	}
	if qp.attr.AccessFlags&need != need {
		qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
		return
	}
	// Lengths (step 8).
	switch {
	case f&wire.IsFirst != 0 && f&wire.IsLast == 0, f&wire.IsMiddle != 0:
		if n != qp.mtu {
			qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
			return
		}
	case f&wire.IsFirst == 0: // LAST
		if n < 1 || n > qp.mtu {
			qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
			return
		}
	default: // ONLY
		if n > qp.mtu {
			qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
			return
		}
	}
	if f&wire.HasPayload != 0 && p.BTH.PadCount() != wire.Pad(n) {
		qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
		return
	}

	switch {
	case f&wire.IsSend != 0:
		if !qp.executeSend(now, p, tx) {
			return
		}
	case f&wire.IsWrite != 0:
		if !qp.executeWrite(now, p, tx) {
			return
		}
	case f&wire.IsRead != 0:
		qp.executeRead(now, p, tx)
		return
	case f&wire.IsAtomic != 0:
		qp.executeAtomic(now, p, tx)
		return
	default:
		qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
		return
	}
	if qp.overflow {
		// The receive completion of this message was lost to a full
		// CQ, and the QP goes to ERR (settle): the request is not
		// acknowledged but fails at the requester with a remote
		// operational error, as a NIC's responder reports its own
		// failure.
		qp.nak(tx, wire.SyndromeRemoteOp, psn)
		return
	}
	s.ePSN = psn.Next()
	if p.BTH.AckReq() {
		qp.deferAck(psn)
	}
}

// nak sends a fatal NAK (invalid request, remote access or remote
// operational error) for psn and counts it.
func (qp *QP) nak(tx *txBatch, syn wire.Syndrome, psn wire.PSN) {
	st := &qp.host.stats
	qp.count(&st.RequestErrors)
	switch syn {
	case wire.SyndromeInvalidReq:
		qp.count(&st.InvalidRequestNAKsSent)
	case wire.SyndromeRemoteAccess:
		qp.count(&st.RemoteAccessNAKsSent)
	default:
		qp.count(&st.RemoteOpNAKsSent)
	}
	qp.sendAck(tx, syn, psn)
}

// requestError answers a class A/C error: a NAK with the offending PSN, an
// error completion for a receive already taken, and the QP to ERR.
func (qp *QP) requestError(now time.Time, tx *txBatch, psn wire.PSN, syn wire.Syndrome, st Status) {
	s := &qp.rsp
	qp.nak(tx, syn, psn)
	if s.cur != nil {
		qp.pushRecv(&Completion{WRID: s.cur.id, Status: st, QPN: qp.qpn})
		s.cur = nil
	}
	// The responder's own error is reported as an async event, as
	// libibverbs has it: an access violation, or an invalid request.
	ev := EventQPReqErr
	if syn == wire.SyndromeRemoteAccess {
		ev = EventQPAccessErr
	}
	qp.host.event(Event{Type: ev, QP: qp})
	qp.fatal(now, tx, "responder refused a request (NAK sent)", st)
}

// takeRecv returns the receive WQE for a packet that needs one — from the
// QP's SRQ if it has one — or sends an RNR NAK and returns nil. The WQE is
// copied into the responder, so its ring slot can be reposted at once.
func (qp *QP) takeRecv(tx *txBatch, psn wire.PSN) *recvWQE {
	w := &qp.rsp.wqe
	if srq := qp.srq; srq != nil {
		if srq.take(w) {
			return w
		}
	} else if !qp.rq.empty() {
		w.copyFrom(qp.rq.pop())
		return w
	}
	if qp.typ != QPTypeRC {
		return nil // UC and UD drop the message silently
	}
	qp.count(&qp.host.stats.RNRNAKsSent)
	qp.sendAck(tx, wire.RNRSyndrome(qp.attr.MinRNRTimer), psn)
	return nil
}

func (qp *QP) executeSend(now time.Time, p *wire.Packet, tx *txBatch) bool {
	s := &qp.rsp
	psn := p.BTH.PSN()
	if p.Flags&wire.IsFirst != 0 {
		r := qp.takeRecv(tx, psn)
		if r == nil {
			return false
		}
		s.cur, s.curOff, s.kind = r, 0, msgSend
	}
	r := s.cur
	n := len(p.Payload)
	if s.curOff+n > r.length {
		qp.nak(tx, wire.SyndromeInvalidReq, psn)
		qp.pushRecv(&Completion{WRID: r.id, Status: StatusLocLenErr, QPN: qp.qpn})
		s.cur = nil
		qp.fatal(now, tx, "message longer than the receive buffer", StatusLocLenErr)
		return false
	}
	copyTo(r.segs, s.curOff, p.Payload)
	s.curOff += n
	if p.Flags&wire.IsLast == 0 {
		return true
	}
	c := Completion{WRID: r.id, Opcode: WCRecv, ByteLen: uint32(s.curOff), QPN: qp.qpn, SrcQP: qp.attr.DestQPN, Solicited: p.BTH.SE()}
	if imm := p.ImmDt(); imm != nil {
		c.Flags |= WCFlagWithImm
		c.Imm = imm.Imm()
	}
	if ieth := p.IETH(); ieth != nil {
		if qp.host.mem.Invalidate(qp.pd, ieth.RKey()) != nil {
			qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
			return false
		}
		c.Flags |= WCFlagWithInv
		c.Imm = ieth.RKey()
	}
	s.cur, s.kind = nil, msgNone
	s.msn = (s.msn + 1) & 0xFFFFFF
	qp.pushRecv(&c)
	return true
}

func (qp *QP) executeWrite(now time.Time, p *wire.Packet, tx *txBatch) bool {
	s := &qp.rsp
	psn := p.BTH.PSN()
	n := len(p.Payload)
	f := p.Flags
	if f&wire.IsFirst != 0 {
		reth := p.RETH()
		total := reth.DMALen()
		if total > 1<<31 || (f&wire.IsLast != 0 && int(total) != n) || (f&wire.IsLast == 0 && int(total) <= n) {
			qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
			return false
		}
		var buf []byte
		if total > 0 {
			b, err := qp.host.mem.RemoteCached(&qp.keys, qp.pd, qp.qpn, reth.RKey(), reth.VA(), uint64(total), AccessRemoteWrite)
			if err != nil {
				qp.requestError(now, tx, psn, wire.SyndromeRemoteAccess, StatusRemAccessErr)
				return false
			}
			buf = b
		}
		s.wrBuf, s.wrOff, s.wrTotal, s.kind = buf, 0, int(total), msgWrite
	}
	last := f&wire.IsLast != 0
	if s.wrOff+n > s.wrTotal || (last && s.wrOff+n != s.wrTotal) {
		qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
		return false
	}
	var r *recvWQE
	if last && f&wire.NeedsRecvWQE != 0 {
		if r = qp.takeRecv(tx, psn); r == nil {
			if f&wire.IsFirst != 0 {
				// WRITE ONLY with immediate: nothing was accepted, so
				// forget the message state set above; the retried ONLY
				// packet must not look like a new FIRST inside a
				// WRITE (an opcode sequence error).
				s.kind, s.wrBuf = msgNone, nil
			}
			return false
		}
	}
	copy(s.wrBuf[s.wrOff:], p.Payload)
	s.wrOff += n
	if !last {
		return true
	}
	s.kind, s.wrBuf = msgNone, nil
	s.msn = (s.msn + 1) & 0xFFFFFF
	if r != nil {
		qp.pushRecv(&Completion{WRID: r.id, Opcode: WCRecvRDMAWithImm, Flags: WCFlagWithImm,
			Imm: p.ImmDt().Imm(), ByteLen: uint32(s.wrTotal), QPN: qp.qpn, SrcQP: qp.attr.DestQPN, Solicited: p.BTH.SE()})
	}
	return true
}

func (qp *QP) executeRead(now time.Time, p *wire.Packet, tx *txBatch) {
	s := &qp.rsp
	psn := p.BTH.PSN()
	reth := p.RETH()
	total := reth.DMALen()
	if qp.attr.MaxDestRDAtomic == 0 || total > 1<<31 {
		qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
		return
	}
	if total > 0 {
		if _, err := qp.host.mem.RemoteCached(&qp.keys, qp.pd, qp.qpn, reth.RKey(), reth.VA(), uint64(total), AccessRemoteRead); err != nil {
			qp.requestError(now, tx, psn, wire.SyndromeRemoteAccess, StatusRemAccessErr)
			return
		}
	}
	npkts := max(1, (int(total)+qp.mtu-1)/qp.mtu)
	last := psn.Add(npkts - 1)
	s.saveResource(resource{valid: true, firstPSN: psn, lastPSN: last, va: reth.VA(), rkey: reth.RKey(), length: total})
	s.msn = (s.msn + 1) & 0xFFFFFF
	s.ePSN = last.Next()
	qp.sendReadResponses(now, tx, psn, reth.VA(), reth.RKey(), total)
}

// sendReadResponses starts the responses of a READ of length bytes at va,
// numbered from psn: the first burst now, the rest from OnTimer.
func (qp *QP) sendReadResponses(now time.Time, tx *txBatch, psn wire.PSN, va uint64, rkey, length uint32) {
	qp.rsp.rd = readCursor{active: true, psn: psn, next: psn, va: va, rkey: rkey, length: length}
	qp.pumpRead(now, tx)
}

// pumpRead sends the next burst of READ responses (HostConfig.ReadBurst
// packets). The MR is checked again for every packet, as rxe does. When the
// last is out, a PSN sequence NAK asks again for the requests dropped
// meanwhile.
func (qp *QP) pumpRead(now time.Time, tx *txBatch) {
	s := &qp.rsp
	c := &s.rd
	qp.pumpAt = time.Time{}
	if !c.active {
		return
	}
	if qp.st != StateRTR && qp.st != StateRTS && qp.st != StateSQD {
		c.active, s.dropped = false, false
		return
	}
	qp.clearDeferredAck(tx, c.next)
	for burst := qp.host.cfg.ReadBurst; ; burst-- {
		if burst == 0 {
			qp.pumpAt = now
			return
		}
		psn, off, length, va, rkey := c.next, int(c.off), c.length, c.va, c.rkey
		n := min(qp.mtu, int(length)-off)
		first, last := off == 0, off+n == int(length)
		var op wire.Opcode
		switch {
		case first && last:
			op = wire.RCReadResponseOnly
		case first:
			op = wire.RCReadResponseFirst
		case last:
			op = wire.RCReadResponseLast
		default:
			op = wire.RCReadResponseMiddle
		}
		var src []byte
		if n > 0 {
			b, err := qp.host.mem.RemoteCached(&qp.keys, qp.pd, qp.qpn, rkey, va+uint64(off), uint64(n), AccessRemoteRead)
			if err != nil {
				c.active, s.dropped = false, false
				qp.requestError(now, tx, psn, wire.SyndromeRemoteAccess, StatusRemAccessErr)
				return
			}
			src = b
		}
		ref := payloadRef([][]byte{src}, 0, n)
		b := tx.dataPacket(qp, op, n, ref)
		h := wire.BTHLen
		if op.Has(wire.HasAETH) {
			wire.AETH(b[h:]).Encode(wire.SyndromeACK, qp.rsp.msn)
			h += wire.AETHLen
		}
		wire.BTH(b).Encode(op, false, wire.Pad(n), qp.attr.DestQPN, false, psn)
		if ref == nil {
			copy(b[h:], src)
		}
		tx.commitData(qp, b, h, ref)
		if last {
			break
		}
		c.off += uint32(n)
		c.next = psn.Next()
	}
	c.active = false
	if s.dropped {
		s.dropped = false
		s.nakSent = true
		qp.count(&qp.host.stats.SeqNAKsSent)
		qp.writeAck(tx, wire.SyndromePSNSeqErr, s.ePSN)
	}
}

func (qp *QP) executeAtomic(now time.Time, p *wire.Packet, tx *txBatch) {
	s := &qp.rsp
	psn := p.BTH.PSN()
	a := p.AtomicETH()
	if qp.attr.MaxDestRDAtomic == 0 || a.VA()%8 != 0 {
		qp.requestError(now, tx, psn, wire.SyndromeInvalidReq, StatusRemInvReqErr)
		return
	}
	w, err := qp.host.mem.RemoteCached(&qp.keys, qp.pd, qp.qpn, a.RKey(), a.VA(), 8, AccessRemoteAtomic)
	if err != nil {
		qp.requestError(now, tx, psn, wire.SyndromeRemoteAccess, StatusRemAccessErr)
		return
	}
	op := WRCompareSwap
	if p.Op == wire.RCFetchAdd {
		op = WRFetchAdd
	}
	var orig uint64
	if op == WRFetchAdd {
		orig = doAtomic(w, op, a.SwapAdd(), 0)
	} else {
		orig = doAtomic(w, op, a.Compare(), a.SwapAdd())
	}
	s.saveResource(resource{valid: true, atomic: true, firstPSN: psn, lastPSN: psn, orig: orig})
	s.msn = (s.msn + 1) & 0xFFFFFF
	s.ePSN = psn.Next()
	qp.sendAtomicAck(tx, psn, orig)
}

// duplicate answers a request whose PSN is before the expected one.
func (qp *QP) duplicate(now time.Time, p *wire.Packet, psn wire.PSN, tx *txBatch) {
	s := &qp.rsp
	switch {
	case p.Flags&wire.IsRead != 0:
		reth := p.RETH()
		for i := range s.res {
			r := &s.res[i]
			if !r.valid || r.atomic || psn.Before(r.firstPSN) || psn.After(r.lastPSN) {
				continue
			}
			va, n := reth.VA(), uint64(reth.DMALen())
			if reth.RKey() != r.rkey || va < r.va || va+n > r.va+uint64(r.length) {
				break
			}
			qp.sendReadResponses(now, tx, psn, va, r.rkey, uint32(n))
			return
		}
		qp.count(&qp.host.stats.DropDuplicate)
	case p.Flags&wire.IsAtomic != 0:
		for i := range s.res {
			r := &s.res[i]
			if r.valid && r.atomic && r.firstPSN == psn {
				qp.sendAtomicAck(tx, psn, r.orig)
				return
			}
		}
		qp.count(&qp.host.stats.DropDuplicate)
	default:
		qp.deferAck(s.ePSN.Add(-1))
	}
}

// deferAck records that an ACK for psn is owed. ACKs are coalesced: the host
// sends one per QP after each received batch.
func (qp *QP) deferAck(psn wire.PSN) {
	s := &qp.rsp
	qp.countOwn(&qp.host.stats.AckDeferred, &qp.acksDeferred)
	if !qp.ackPending {
		s.ackPSN = psn
		qp.host.pending = append(qp.host.pending, qp)
		qp.setAckPending(true)
	} else if psn.After(s.ackPSN) {
		s.ackPSN = psn
	}
}

// setAckPending records whether qp owes a coalesced ACK, and counts the
// change in the host's acksOwed.
func (qp *QP) setAckPending(owed bool) {
	if qp.ackPending == owed {
		return
	}
	qp.ackPending = owed
	if owed {
		qp.host.acksOwed.Add(1)
	} else {
		qp.host.acksOwed.Add(-1)
	}
}

// clearDeferredAck is called before another response with PSN psn goes out:
// a later response implies the ACK; an earlier one must not overtake it.
func (qp *QP) clearDeferredAck(tx *txBatch, psn wire.PSN) {
	s := &qp.rsp
	if !qp.ackPending {
		return
	}
	qp.setAckPending(false)
	if psn.Before(s.ackPSN) {
		qp.writeAck(tx, wire.SyndromeACK, s.ackPSN)
	}
}

// flushDeferredAck sends a coalesced ACK if one is owed.
func (qp *QP) flushDeferredAck(tx *txBatch) {
	owed := qp.ackPending
	qp.setAckPending(false)
	if owed && qp.st != StateErr {
		qp.writeAck(tx, wire.SyndromeACK, qp.rsp.ackPSN)
	}
}

// sendAck sends an ACKNOWLEDGE packet (ACK, RNR NAK or NAK) now.
func (qp *QP) sendAck(tx *txBatch, syn wire.Syndrome, psn wire.PSN) {
	qp.clearDeferredAck(tx, psn)
	qp.writeAck(tx, syn, psn)
}

func (qp *QP) writeAck(tx *txBatch, syn wire.Syndrome, psn wire.PSN) {
	b := tx.packet(qp, wire.RCAck, 0)
	wire.AETH(b[wire.BTHLen:]).Encode(syn, qp.rsp.msn)
	wire.BTH(b).Encode(wire.RCAck, false, 0, qp.attr.DestQPN, false, psn)
	tx.commit(qp, b)
}

func (qp *QP) sendAtomicAck(tx *txBatch, psn wire.PSN, orig uint64) {
	qp.clearDeferredAck(tx, psn)
	b := tx.packet(qp, wire.RCAtomicAck, 0)
	wire.AETH(b[wire.BTHLen:]).Encode(wire.SyndromeACK, qp.rsp.msn)
	wire.AtomicAckETH(b[wire.BTHLen+wire.AETHLen:]).SetOrigValue(orig)
	wire.BTH(b).Encode(wire.RCAtomicAck, false, 0, qp.attr.DestQPN, false, psn)
	tx.commit(qp, b)
}
