package engine

import (
	"encoding/binary"
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

// handleResponse is the completer: it processes ACKs, NAKs, READ responses
// and atomic ACKs for the requester side of an RC QP.
func (qp *QP) handleResponse(now time.Time, p *wire.Packet, tx *txBatch) {
	r := &qp.req
	if qp.st != StateRTS && qp.st != StateSQD {
		qp.count(&qp.host.stats.DropState)
		return
	}
	psn := p.BTH.PSN()
	// A response for a PSN never sent is bogus.
	if !psn.Before(r.highPSN) {
		qp.count(&qp.host.stats.DropBadResponse)
		return
	}
	aeth := p.AETH()
	if aeth != nil && aeth.Syndrome().Kind() != wire.KindACK {
		qp.handleNAK(now, psn, aeth.Syndrome(), tx)
		r.progress(qp, now, tx)
		return
	}
	var upto wire.PSN
	switch p.Op {
	case wire.RCAck:
		upto = psn.Next()
	default: // READ responses and atomic ACKs acknowledge what came before
		upto = psn
	}
	progressed, lost := r.acknowledge(qp, upto)
	if lost {
		qp.responseLost(now, tx)
	} else if p.Op != wire.RCAck {
		if qp.placeResponse(p, psn) {
			progressed = true
		}
	}
	if progressed {
		r.madeProgress(qp, now)
	}
	r.progress(qp, now, tx)
}

// acknowledge retires every SEND/WRITE WQE whose last PSN is before upto and
// moves compPSN forward. It reports whether anything moved, and whether a
// READ or atomic before upto is still missing its response.
func (r *requester) acknowledge(qp *QP, upto wire.PSN) (progressed, lost bool) {
	if !upto.After(r.compPSN) {
		return false, false
	}
	for qp.sq.head < r.started {
		w := qp.sq.oldest()
		if !w.lastPSN.Before(upto) {
			if !w.isReadOrAtomic() {
				r.compPSN = upto
				progressed = true
			}
			return progressed, false
		}
		if w.isReadOrAtomic() {
			return progressed, true
		}
		r.compPSN = w.lastPSN.Next()
		progressed = true
		qp.completeSend(w)
	}
	return progressed, false
}

// responseLost handles an acknowledgement past a READ or atomic whose
// response never came: go back to it, using up one retry, unless a retry
// is already under way (see requester.retrying).
func (qp *QP) responseLost(now time.Time, tx *txBatch) {
	r := &qp.req
	if r.retrying {
		return
	}
	if !r.consumeRetry(qp, now, tx, &r.retryLeft, StatusRetryExcErr) {
		return
	}
	qp.count(&qp.host.stats.Retries)
	r.retry(qp)
	r.retrying = true
}

// placeResponse stores a READ response or atomic ACK at the head WQE. Only the
// next expected PSN is accepted; a gap is repaired by the timeout.
func (qp *QP) placeResponse(p *wire.Packet, psn wire.PSN) bool {
	r := &qp.req
	if psn != r.compPSN || qp.sq.head >= r.started {
		qp.count(&qp.host.stats.DropOutOfOrderResponse)
		return false
	}
	w := qp.sq.oldest()
	switch p.Op {
	case wire.RCAtomicAck:
		if w.wr.Op != WRCompareSwap && w.wr.Op != WRFetchAdd || psn != w.firstPSN {
			qp.count(&qp.host.stats.DropBadResponse)
			return false
		}
		var v [8]byte
		binary.NativeEndian.PutUint64(v[:], p.AtomicAckETH().OrigValue())
		copyTo(w.segs, 0, v[:])
		r.compPSN = psn.Next()
		qp.completeSend(w)
		return true
	case wire.RCReadResponseFirst, wire.RCReadResponseMiddle, wire.RCReadResponseLast, wire.RCReadResponseOnly:
		if w.wr.Op != WRRead {
			qp.count(&qp.host.stats.DropBadResponse)
			return false
		}
		off := psn.Diff(w.firstPSN) * qp.mtu
		n := len(p.Payload)
		want := min(qp.mtu, w.length-off)
		if off > w.length || n != want {
			qp.count(&qp.host.stats.DropBadResponse)
			return false
		}
		copyTo(w.segs, off, p.Payload)
		r.compPSN = psn.Next()
		if off+n == w.length {
			qp.completeSend(w)
		}
		return true
	}
	qp.count(&qp.host.stats.DropBadResponse)
	return false
}

// handleNAK processes an RNR NAK or a NAK.
func (qp *QP) handleNAK(now time.Time, psn wire.PSN, s wire.Syndrome, tx *txBatch) {
	r := &qp.req
	if psn.Before(r.compPSN) {
		qp.count(&qp.host.stats.DropStaleNAK)
		return
	}
	progressed, lost := r.acknowledge(qp, psn)
	if progressed {
		r.madeProgress(qp, now)
	}
	if lost {
		// The NAK is for a PSN after a READ or atomic whose response
		// never came, so it is not about that WQE: ask for it again
		// rather than fail it with the NAK's status (rxe's check_psn
		// returns COMPST_ERROR_RETRY before looking at the syndrome).
		qp.responseLost(now, tx)
		return
	}
	if qp.sq.head >= r.started {
		return
	}
	switch s.Kind() {
	case wire.KindRNR:
		qp.count(&qp.host.stats.RNRNAKsReceived)
		if !r.consumeRetry(qp, now, tx, &r.rnrLeft, StatusRNRRetryExcErr) {
			return
		}
		r.retry(qp)
		r.retransAt = time.Time{}
		r.rnrAt = now.Add(wire.RNRDelay(s.Value()))
		// The responder answers at the oldest PSN: it is not behind,
		// so after the RNR wait everything goes again, not a probe.
		r.probing = false
	case wire.KindNAK:
		if s.Value() == wire.NAKPSNSequence {
			qp.count(&qp.host.stats.SeqNAKsReceived)
			if r.retrying {
				// An echo of the loss being repaired (a
				// duplicate, or a NAK sent before our
				// retransmission arrived): no progress since.
				return
			}
			if !r.consumeRetry(qp, now, tx, &r.retryLeft, StatusRetryExcErr) {
				return
			}
			qp.count(&qp.host.stats.Retries)
			r.retry(qp)
			r.retrying = true
			return
		}
		w := qp.sq.oldest()
		switch s.Value() {
		case wire.NAKInvalidRequest:
			qp.count(&qp.host.stats.InvalidRequestNAKsReceived)
			w.status = StatusRemInvReqErr
		case wire.NAKRemoteAccess:
			qp.count(&qp.host.stats.RemoteAccessNAKsReceived)
			w.status = StatusRemAccessErr
		default:
			qp.count(&qp.host.stats.RemoteOpNAKsReceived)
			w.status = StatusRemOpErr
		}
		qp.completeSend(w)
		qp.fatal(now, tx, "NAK received", w.status)
	default:
		qp.count(&qp.host.stats.DropBadResponse)
	}
}
