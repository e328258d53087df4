package engine

import (
	"errors"
	"time"
	"unsafe"

	"github.com/rdma-go/rdma-go/wire"
)

// maxUnackedPSNs bounds how far the requester runs ahead of the oldest
// unacknowledged PSN: 1 MiB at MTU 4096. (rxe's RXE_MAX_UNACKED_PSNS is
// 128; at 128 a stream of messages above 512 KiB, which only ACK
// requests inside the message acknowledge, ran at 0.55–0.7× of its
// 128 KiB rate: rdma-bench -curve, ib_write_bw -s 8388608.)
const maxUnackedPSNs = 256

// maxPktsPerAck forces AckReq on a FIRST or MIDDLE packet after this many
// packets without one: a sixteenth of the window, so that ACKs move the
// window along before it fills (rxe asks every 65, half its window, and
// the sender then waits a round trip with the window full).
const maxPktsPerAck = maxUnackedPSNs / 16

// infiniteRetry is the retry_cnt / rnr_retry value that never runs out.
// For rnr_retry that is IBTA's rule; for retry_cnt it is rxe's (IBTA and
// hardware make 7 seven retries, docs/spec/roce-wire.md §10). A soft
// device keeps rxe's: its ACKs wait for a process to be scheduled, and on a
// loaded machine seven 67 ms timeouts (the tools' default) can pass with a
// live peer's ACK still queued. A QP whose peer died then retries for
// ever; set retry_cnt below 7 to get RETRY_EXC_ERR.
const infiniteRetry = 7

// Errors returned by PostSend and PostRecv.
var (
	ErrQueueFull  = errors.New("engine: work queue full")
	ErrTooManySGE = errors.New("engine: too many scatter/gather elements")
	ErrBadState   = errors.New("engine: QP state does not allow posting")
	ErrBadOpcode  = errors.New("engine: opcode not supported on this QP type")
	ErrInline     = errors.New("engine: inline data larger than max_inline_data")
	ErrLength     = errors.New("engine: message too long")
	ErrNoAV       = errors.New("engine: UD work request without an address vector")
	ErrHasSRQ     = errors.New("engine: QP takes its receives from an SRQ; post to the SRQ")
)

// requester is the send side of an RC QP: segmentation, PSNs, the
// retransmission and RNR timers, and go-back-N.
type requester struct {
	psn     wire.PSN // next PSN to send
	highPSN wire.PSN // one past the highest PSN ever sent
	compPSN wire.PSN // oldest unacknowledged PSN
	next    uint64   // send queue index of the next WQE to transmit from
	started uint64   // WQEs before this index have PSNs assigned

	rdInFlight  int // READ/atomic WQEs started and not complete
	sinceAckReq int

	retryLeft uint8
	rnrLeft   uint8
	// retrying is set while a go-back-N retry (after a timeout, a PSN
	// sequence NAK or a lost READ/atomic response) has not yet made
	// progress. Until it has, further sequence NAKs and lost-response
	// signals are echoes of the same loss: they neither go back again
	// nor use up retry_cnt (rxe's comp.started_retry). Without this, a
	// burst of reordered packets made a stream of NAKs that each used up
	// a retry, and a QP with a finite retry_cnt failed with RETRY_EXC_ERR
	// within microseconds, with no timeout ever expiring.
	retrying bool
	// probing is set by a retransmission timeout until an
	// acknowledgement makes progress: only the oldest unacknowledged
	// packet goes out again, asking for an ACK, instead of everything
	// from it on. A timeout says nothing about what the responder lacks;
	// when it is only slow (a queue in front of it), resending whole
	// messages every timeout fills that queue with copies, and every ACK
	// and request behind them comes later still (with Linux rxe in an
	// emulated guest, 64-packet SENDs: rxe's own timers then fire, and
	// an ACK that reaches rxe in the middle of its retry leaves its WQE
	// neither complete nor resent, a hang). The ACK for the probe tells
	// the requester where to go on from. A NAK, which does say what is
	// missing, and an RNR wait still go back the whole way at once.
	probing   bool
	retransAt time.Time
	rnrAt     time.Time
}

func (r *requester) setStartPSN(p wire.PSN) {
	r.psn, r.highPSN, r.compPSN = p, p, p
}

func (r *requester) reset(p wire.PSN) {
	*r = requester{retryLeft: r.retryLeft, rnrLeft: r.rnrLeft}
	r.setStartPSN(p)
}

func (r *requester) stopTimers() { r.retransAt, r.rnrAt = time.Time{}, time.Time{} }

// rewindTo keeps the transmit cursors inside the queue after WQEs retire.
func (r *requester) rewindTo(q *sendQueue) {
	if r.next < q.head {
		r.next = q.head
	}
	if r.started < q.head {
		r.started = q.head
	}
}

func (r *requester) deadline() (time.Time, bool) {
	d := r.retransAt
	if !r.rnrAt.IsZero() && (d.IsZero() || r.rnrAt.Before(d)) {
		d = r.rnrAt
	}
	return d, !d.IsZero()
}

func (r *requester) outstanding(q *sendQueue) bool { return q.head < r.started }

// PostSend validates a send work request, queues it and starts sending.
func (qp *QP) PostSend(now time.Time, wr *SendWR) error {
	_, err := qp.PostSendList(now, unsafe.Slice(wr, 1))
	return err
}

// PostSendList queues a chain of send work requests under one lock and then
// starts sending, so a long post list goes out in few batches. It returns
// how many were queued; on error, wrs[n] is the one refused.
func (qp *QP) PostSendList(now time.Time, wrs []SendWR) (n int, err error) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	n, err = qp.queueSends(now, wrs)
	qp.sendNow(now)
	return n, err
}

// sendNow sends what the send queue allows, at once, in a batch of its own.
func (qp *QP) sendNow(now time.Time) {
	t0 := stageStart()
	tx := qp.host.getTx()
	qp.startSends(now, tx)
	t1 := stageStart()
	stages.postBuild.done(t0)
	qp.host.flush(tx)
	stages.postSend.done(t1)
	qp.host.putTx(tx)
}

// queueSends queues wrs; it returns how many were queued and, if not all,
// why wrs[n] was refused.
func (qp *QP) queueSends(now time.Time, wrs []SendWR) (n int, err error) {
	for n = range wrs {
		if err = qp.postSendLocked(now, &wrs[n]); err != nil {
			return n, err
		}
	}
	return len(wrs), nil
}

// startSends sends what the send queue allows into tx, with an ACK that
// Host.ReceivePolled left pending.
func (qp *QP) startSends(now time.Time, tx *txBatch) {
	qp.req.progress(qp, now, tx)
	qp.settle(now, tx)
	qp.noteDeadline(now)
	if qp.ackPending {
		// An ACK that Host.ReceivePolled left pending goes out with
		// the new packets, in the same send (often one GSO send).
		qp.flushDeferredAck(tx)
	}
}

func (qp *QP) postSendLocked(now time.Time, wr *SendWR) error {
	switch qp.st {
	case StateRTS, StateSQD, StateErr:
	default:
		return ErrBadState
	}
	if qp.sq.full() {
		return ErrQueueFull
	}
	switch wr.Op {
	case WRSend, WRSendImm:
	case WRWrite, WRWriteImm:
		if qp.typ == QPTypeUD {
			return ErrBadOpcode
		}
	case WRRead, WRCompareSwap, WRFetchAdd, WRSendWithInv:
		if qp.typ != QPTypeRC {
			return ErrBadOpcode
		}
	case WRLocalInv, WRBindMW:
		if qp.typ == QPTypeUD || (wr.Op == WRBindMW && wr.Bind == nil) {
			return ErrBadOpcode
		}
	default:
		return ErrBadOpcode
	}
	if qp.typ == QPTypeUD && (wr.AV == nil || !wr.AV.Remote.IsValid()) {
		return ErrNoAV
	}
	if len(wr.SGL) > qp.sq.maxSGE {
		return ErrTooManySGE
	}
	w := qp.sq.push()
	// Field by field, leaving out the SGL (resolved into w.segs below) and
	// the pointers (copied into w): *wr does not escape, so a caller's
	// SGL literal can stay on its stack.
	w.wr = postedWR{ID: wr.ID, Op: wr.Op, Flags: wr.Flags, Imm: wr.Imm, RemoteAddr: wr.RemoteAddr, RKey: wr.RKey}
	atomic := wr.Op == WRCompareSwap || wr.Op == WRFetchAdd
	switch {
	case atomic:
		w.setAtomic(wr.CompareAdd, wr.Swap)
	case qp.typ == QPTypeUD:
		w.setUD(wr.AV, wr.RemoteQPN, wr.RemoteQKey)
	case wr.Op == WRBindMW:
		w.setBind(wr.Bind)
	}
	w.signaled = qp.sigAll || wr.Flags&SendSignaled != 0
	if qp.st == StateErr {
		w.status = StatusWRFlushErr
		qp.flushSQ()
		return nil
	}
	scatter := wr.Op == WRRead || atomic
	inline := wr.Flags&SendInline != 0 && !scatter
	for _, sge := range wr.SGL {
		if inline {
			if len(w.inline)+int(sge.Length) > cap(w.inline) {
				qp.sq.tail--
				return ErrInline
			}
			src, err := qp.host.mem.LocalCached(&qp.keys, qp.pd, sge, false)
			if err != nil {
				// Inline data is copied from plain memory: an L_Key is
				// not needed, but the range must still be registered
				// or be plain Go memory; without a key we cannot see
				// it, so fall back to the MR lookup result.
				w.status = StatusLocProtErr
				break
			}
			w.inline = append(w.inline, src...)
			continue
		}
		b, err := qp.host.mem.LocalCached(&qp.keys, qp.pd, sge, scatter)
		if err != nil {
			w.status = StatusLocProtErr
			break
		}
		w.segs = append(w.segs, b)
		w.length += len(b)
	}
	if inline && w.status == StatusSuccess {
		w.segs = append(w.segs, w.inline)
		w.length = len(w.inline)
	}
	if atomic && w.status == StatusSuccess && w.length != 8 {
		w.status = StatusLocLenErr
	}
	if w.length > 1<<31 {
		w.status = StatusLocLenErr
	}
	if w.status != StatusSuccess && qp.sq.tail-1 == qp.sq.head {
		// Nothing ahead of it: fail it now, as a local error does.
		qp.completeSend(w)
		qp.fatal(now, nil, "work request failed its local checks", w.status)
	}
	return nil
}

// completeSend retires the head WQE w and reports its completion when it is
// signaled or failed.
func (qp *QP) completeSend(w *sendWQE) {
	if w.started && w.isReadOrAtomic() && qp.req.rdInFlight > 0 {
		qp.req.rdInFlight--
	}
	if w.status == StatusSuccess && (w.wr.Op == WRSend || w.wr.Op == WRSendImm || w.wr.Op == WRSendWithInv) {
		qp.countOwn(&qp.host.stats.RDMASends, &qp.sends)
	}
	if w.signaled || w.status != StatusSuccess {
		c := Completion{WRID: w.wr.ID, Status: w.status, QPN: qp.qpn, ByteLen: uint32(w.length)}
		switch w.wr.Op {
		case WRSend, WRSendImm, WRSendWithInv:
			c.Opcode = WCSend
		case WRWrite, WRWriteImm:
			c.Opcode = WCWrite
		case WRRead:
			c.Opcode = WCRead
		case WRCompareSwap:
			c.Opcode = WCCompareSwap
		case WRFetchAdd:
			c.Opcode = WCFetchAdd
		case WRBindMW:
			c.Opcode = WCBindMW
		case WRLocalInv:
			c.Opcode = WCLocalInv
		}
		qp.pushSend(&c)
	}
	qp.sq.pop()
	qp.req.rewindTo(&qp.sq)
}

// progress transmits packets while the queue, the PSN window and the
// READ/atomic limit allow.
func (r *requester) progress(qp *QP, now time.Time, tx *txBatch) {
	if qp.st != StateRTS || !r.rnrAt.IsZero() {
		return
	}
	for r.next < qp.sq.tail {
		w := qp.sq.at(r.next)
		if w.status != StatusSuccess {
			// A WQE that failed its local checks: the ones before it
			// complete first, then it fails and takes the QP down.
			if r.next == qp.sq.head {
				qp.completeSend(w)
				qp.fatal(now, tx, "work request failed its local checks", w.status)
			}
			return
		}
		if w.wr.Op == WRLocalInv || w.wr.Op == WRBindMW {
			// Local operations take no PSN. They run once everything
			// before them has completed, so completions stay in order.
			if r.next != qp.sq.head {
				return
			}
			r.next++
			r.started = max(r.started, r.next)
			qp.executeLocal(w)
			failed := w.status != StatusSuccess
			qp.completeSend(w)
			if failed {
				qp.fatal(now, tx, "local operation failed", w.status)
				return
			}
			continue
		}
		if qp.typ == QPTypeRC && (r.psn.Diff(r.compPSN) >= maxUnackedPSNs || r.probing && r.psn != r.compPSN) {
			return
		}
		if !w.started {
			if w.wr.Flags&SendFence != 0 && r.rdInFlight > 0 {
				return
			}
			if w.isReadOrAtomic() {
				if r.rdInFlight >= max(int(qp.attr.MaxRDAtomic), 1) {
					return
				}
				r.rdInFlight++
			}
			w.started = true
			w.firstPSN = r.psn
			w.npkts = 1
			if w.wr.Op != WRCompareSwap && w.wr.Op != WRFetchAdd && w.length > qp.mtu {
				w.npkts = (w.length + qp.mtu - 1) / qp.mtu
			}
			w.lastPSN = w.firstPSN.Add(w.npkts - 1)
			r.started = r.next + 1
		}
		idx := r.next
		if qp.typ == QPTypeUD {
			r.sendUD(qp, w, tx)
		} else {
			r.sendPacket(qp, w, tx)
		}
		if r.psn.After(r.highPSN) {
			r.highPSN = r.psn
		}
		if qp.typ != QPTypeRC {
			// UC and UD: nothing is acknowledged, so a WQE completes
			// once its last packet is on the wire.
			if r.next > idx {
				r.compPSN = r.psn
				qp.completeSend(w)
			}
			continue
		}
		if r.retransAt.IsZero() && qp.attr.Timeout != 0 {
			r.retransAt = now.Add(wire.AckTimeout(qp.attr.Timeout))
		}
	}
}

// sendPacket sends the packet of w at r.psn and advances r.psn (and r.next
// after the WQE's last packet).
func (r *requester) sendPacket(qp *QP, w *sendWQE, tx *txBatch) {
	idx := r.psn.Diff(w.firstPSN)
	off := idx * qp.mtu
	switch w.wr.Op {
	case WRRead:
		b := tx.packet(qp, wire.RCReadRequest, 0)
		wire.RETH(b[wire.BTHLen:]).Encode(w.wr.RemoteAddr+uint64(off), w.wr.RKey, uint32(w.length-off))
		wire.BTH(b).Encode(wire.RCReadRequest, false, 0, qp.attr.DestQPN, true, r.psn)
		tx.commit(qp, b)
		r.sinceAckReq = 0
		r.psn = w.lastPSN.Next()
		r.next++
		return
	case WRCompareSwap, WRFetchAdd:
		op := wire.RCCompareSwap
		if w.wr.Op == WRFetchAdd {
			op = wire.RCFetchAdd
		}
		b := tx.packet(qp, op, 0)
		wire.AtomicETH(b[wire.BTHLen:]).Encode(w.wr.RemoteAddr, w.wr.RKey, w.swapAdd(), w.ext.compareAdd)
		wire.BTH(b).Encode(op, false, 0, qp.attr.DestQPN, true, r.psn)
		tx.commit(qp, b)
		r.sinceAckReq = 0
		r.psn = r.psn.Next()
		r.next++
		return
	}
	n := min(qp.mtu, w.length-off)
	first, last := off == 0, off+n == w.length
	op := opcodeFor(qp.typ, w.wr.Op, first, last)
	ref := payloadRef(w.segs, off, n)
	b := tx.dataPacket(qp, op, n, ref)
	h := wire.BTHLen
	if op.Has(wire.HasRETH) {
		wire.RETH(b[h:]).Encode(w.wr.RemoteAddr, w.wr.RKey, uint32(w.length))
		h += wire.RETHLen
	}
	if op.Has(wire.HasImmDt) {
		wire.ImmDt(b[h:]).SetImm(w.wr.Imm)
		h += wire.ImmDtLen
	}
	if op.Has(wire.HasIETH) {
		wire.IETH(b[h:]).SetRKey(w.wr.Imm)
		h += wire.IETHLen
	}
	if ref == nil {
		copyFrom(b[h:h+n], w.segs, off)
	}
	r.sinceAckReq++
	ackReq := last || r.sinceAckReq > maxPktsPerAck || r.probing
	if ackReq {
		r.sinceAckReq = 0
	}
	se := last && w.wr.Flags&SendSolicited != 0 && (w.wr.Op != WRWrite)
	wire.BTH(b).Encode(op, se, wire.Pad(n), qp.attr.DestQPN, ackReq, r.psn)
	tx.commitData(qp, b, h, ref)
	r.psn = r.psn.Next()
	if last {
		r.next++
	}
}

// executeLocal performs a BIND_MW or LOCAL_INV work request.
func (qp *QP) executeLocal(w *sendWQE) {
	var err error
	if w.wr.Op == WRBindMW {
		err = qp.host.mem.BindMW(qp.pd, qp.qpn, &w.ext.bind)
		if err != nil {
			w.status = StatusMWBindErr
		}
		return
	}
	if err = qp.host.mem.Invalidate(qp.pd, w.wr.Imm); err != nil {
		w.status = StatusLocProtErr
	}
}

func (w *sendWQE) swapAdd() uint64 {
	if w.wr.Op == WRFetchAdd {
		return w.ext.compareAdd
	}
	return w.ext.swap
}

// opcodeFor returns the wire opcode of a SEND or WRITE packet.
func opcodeFor(t QPType, op WROp, first, last bool) wire.Opcode {
	var o wire.Opcode
	switch op {
	case WRSend, WRSendImm, WRSendWithInv:
		switch {
		case first && last:
			o = wire.RCSendOnly
		case first:
			o = wire.RCSendFirst
		case last:
			o = wire.RCSendLast
		default:
			o = wire.RCSendMiddle
		}
		if last && op == WRSendImm {
			o++ // SEND_LAST_WITH_IMMEDIATE / SEND_ONLY_WITH_IMMEDIATE
		}
		if last && op == WRSendWithInv {
			if first {
				o = wire.RCSendOnlyInvalidate
			} else {
				o = wire.RCSendLastInvalidate
			}
		}
	default:
		switch {
		case first && last:
			o = wire.RCWriteOnly
		case first:
			o = wire.RCWriteFirst
		case last:
			o = wire.RCWriteLast
		default:
			o = wire.RCWriteMiddle
		}
		if last && op == WRWriteImm {
			o++ // WRITE_LAST_WITH_IMMEDIATE / WRITE_ONLY_WITH_IMMEDIATE
		}
	}
	if t == QPTypeUC {
		o |= wire.TransportUC
	}
	return o
}

// retry rewinds to the oldest unacknowledged PSN (go-back-N).
func (r *requester) retry(qp *QP) {
	r.next = qp.sq.head
	r.psn = r.compPSN
	r.sinceAckReq = 0
}

// onTimer handles an expired RNR wait or retransmission timeout.
func (r *requester) onTimer(qp *QP, now time.Time, tx *txBatch) {
	if qp.st == StateErr {
		r.stopTimers()
		return
	}
	if !r.rnrAt.IsZero() && !now.Before(r.rnrAt) {
		r.rnrAt = time.Time{}
		r.retry(qp)
		r.progress(qp, now, tx)
	}
	if !r.retransAt.IsZero() && !now.Before(r.retransAt) {
		r.retransAt = time.Time{}
		if !r.outstanding(&qp.sq) {
			return
		}
		if !r.consumeRetry(qp, now, tx, &r.retryLeft, StatusRetryExcErr) {
			return
		}
		qp.count(&qp.host.stats.Retransmits)
		qp.count(&qp.host.stats.Retries)
		r.retry(qp)
		r.retrying = true
		r.probing = true
		r.progress(qp, now, tx)
		if r.retransAt.IsZero() && r.outstanding(&qp.sq) && qp.attr.Timeout != 0 {
			r.retransAt = now.Add(wire.AckTimeout(qp.attr.Timeout))
		}
	}
}

// consumeRetry uses up one retry from *left, or fails the oldest WQE with
// status and moves the QP to ERR when none is left. It reports whether the
// caller may retry.
func (r *requester) consumeRetry(qp *QP, now time.Time, tx *txBatch, left *uint8, status Status) bool {
	if *left == 0 {
		if status == StatusRetryExcErr {
			qp.count(&qp.host.stats.RetryExceeded)
		} else {
			qp.count(&qp.host.stats.RNRRetryExceeded)
		}
		w := qp.sq.oldest()
		w.status = status
		qp.completeSend(w)
		qp.fatal(now, tx, "retries exhausted", status)
		return false
	}
	if *left != infiniteRetry {
		*left--
	}
	return true
}

// madeProgress resets the retry counters and re-arms the retransmission
// timer after an acknowledgement moved the requester forward.
func (r *requester) madeProgress(qp *QP, now time.Time) {
	r.retryLeft = qp.attr.RetryCnt
	r.rnrLeft = qp.attr.RNRRetry
	r.retrying = false
	r.probing = false
	if r.compPSN.After(r.psn) {
		// The responder had more than the probe: go on after what it
		// acknowledged, in the oldest WQE not yet complete.
		r.psn = r.compPSN
		r.next = qp.sq.head
		r.sinceAckReq = 0
	}
	if r.outstanding(&qp.sq) && qp.attr.Timeout != 0 {
		r.retransAt = now.Add(wire.AckTimeout(qp.attr.Timeout))
	} else {
		r.retransAt = time.Time{}
	}
}
