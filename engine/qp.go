package engine

import (
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"github.com/rdma-go/rdma-go/wire"
)

// QPType is the transport service; values equal ibv_qp_type.
type QPType uint8

// QP types.
const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

// QPState is the QP state; values equal ibv_qp_state.
type QPState uint8

// QP states.
const (
	StateReset QPState = 0
	StateInit  QPState = 1
	StateRTR   QPState = 2
	StateRTS   QPState = 3
	StateSQD   QPState = 4
	StateSQE   QPState = 5
	StateErr   QPState = 6
)

// Attribute mask bits; values equal ibv_qp_attr_mask.
const (
	AttrState           = 1 << 0
	AttrAccessFlags     = 1 << 3
	AttrQKey            = 1 << 6
	AttrAV              = 1 << 7
	AttrPathMTU         = 1 << 8
	AttrTimeout         = 1 << 9
	AttrRetryCnt        = 1 << 10
	AttrRNRRetry        = 1 << 11
	AttrRQPSN           = 1 << 12
	AttrMaxQPRDAtomic   = 1 << 13
	AttrMinRNRTimer     = 1 << 15
	AttrSQPSN           = 1 << 16
	AttrMaxDestRDAtomic = 1 << 17
	AttrDestQPN         = 1 << 20
)

// Attr carries the QP attributes the engine uses. The verbs layer validates
// them (state transitions, ranges) before calling Modify.
type Attr struct {
	// The fields a post and a received packet read come first (see QP).
	Remote          netip.Addr // destination IP, from the AV's destination GID
	DestQPN         uint32
	AccessFlags     uint32
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	State           QPState
	QKey            uint32
	FlowLabel       uint32
	PathMTU         int // bytes
	RQPSN           uint32
	SQPSN           uint32
	MaxRDAtomic     uint8
	MaxDestRDAtomic uint8
	MinRNRTimer     uint8
}

// QPConfig is what a QP is created with. (The QP keeps what it needs of
// it where it reads it; see QP.)
type QPConfig struct {
	Type       QPType
	PD         uint32
	SigAll     bool // every send WR is signaled (sq_sig_all)
	MaxSendSGE int
	MaxInline  int
	// OnDeadline, if set, is told (with the QP locked) whenever the QP's
	// earliest timer deadline moves earlier or is newly set. The caller then
	// arranges for OnTimer to run at that time. It is told the zero time
	// when a QP that had a deadline has none left (everything it sent is
	// acknowledged): the caller may then cancel its timer, so that a QP
	// that sent once does not cost a timer expiry later. It must not call
	// back into the QP.
	OnDeadline DeadlineHook
	SendCQ     CompletionQueue
	RecvCQ     CompletionQueue
	MaxSendWR  int
	MaxRecvWR  int
	MaxRecvSGE int
	// SRQ, if set, supplies the receives instead of the QP's own queue.
	SRQ *SRQ
	// Owner is the caller's handle for the QP (returned by Owner), so
	// events can be routed back to it.
	Owner any
}

// DeadlineHook is told a QP's timer deadlines (QPConfig.OnDeadline), with
// the time of the call that set them (the now the engine was given, so
// that the hook need not read the clock again). An interface rather than
// a func: the hook is usually the caller's per-QP timer itself, and a
// method value would be one more object (one more cache line to fetch) on
// every send of a QP not used for a while.
type DeadlineHook interface {
	Deadline(now, at time.Time)
}

// DeadlineFunc adapts a function to DeadlineHook.
type DeadlineFunc func(now, at time.Time)

// Deadline calls f(now, at).
func (f DeadlineFunc) Deadline(now, at time.Time) { f(now, at) }

// QP is one queue pair's transport state. Its methods are safe for
// concurrent use.
//
// A QP not used for a while (one of many connections) costs a post or a
// packet one cache miss per line of it that they read, so its fields are
// laid out by who reads them: first what only a post and the
// acknowledgements of what it sent read (the requester's side), then what
// every post and every received packet read, then what only a received
// request reads (the responder's side), then the rest. Each side reads one
// run of lines: a post the first PostBytes of the QP, which its caller may
// ask the CPU for at once (see provider.Prefetch). What the QP
// keeps of its QPConfig is in the same places.
type QP struct {
	// The requester's side.
	sq1    sendWQE // the send queue's first ring (sendQueue.first)
	sq     sendQueue
	sendCQ CompletionQueue
	sends  uint64 // the QP's RDMASends (see countOwn)
	req    requester

	// What both sides read.
	deadline time.Time // the deadline last reported through OnDeadline
	// pumpAt is when the READ being answered (rsp.rd) sends its next
	// burst, zero when none is waiting.
	pumpAt time.Time
	mu     sync.Mutex
	st     QPState
	typ    QPType
	sigAll bool
	// ackPending says an ACK for rsp.ackPSN is owed; it changes only
	// through setAckPending, which keeps the host's count.
	ackPending bool
	overflow   bool   // a completion was lost to a full CQ
	commEst    bool   // COMM_EST was raised
	rung       bool   // on the host's doorbell list (PostSendDeferred)
	sport      uint16 // the UDP source port on the wire (the link may not honour the rxe-style choice; see link.Link.SourcePort)
	qpn        uint32
	pd         uint32
	host       *Host
	mtu        int
	// icrc is the ICRC start of the packets to the peer (attr.Remote,
	// from sport), kept with them.
	icrc wire.ICRCFlow
	// sent and received are the QP's Sent and Received counters, kept
	// here under mu (Counters reads them) rather than as atomics in
	// stats: they change with every packet.
	sent, received uint64
	// keys caches the MRs last named by this QP's work requests and by
	// its peer's requests (see KeyCache).
	keys       KeyCache
	onDeadline DeadlineHook
	attr       Attr

	// The responder's side.
	recvs, acksDeferred uint64 // the QP's RDMARecvs and AckDeferred (see countOwn)
	rsp                 responder
	recvCQ              CompletionQueue
	srq                 *SRQ // supplies the receives instead of rq, if set
	// stats are the QP's own counters but those kept as fields (Sent,
	// Received and those of countOwn; see QP.Counters).
	stats Stats

	rq    recvQueue
	owner any // QPConfig.Owner
}

// PostBytes is how far into a QP a post reads: the requester's side and
// what both sides read (see QP).
const PostBytes = unsafe.Offsetof(QP{}.attr) + unsafe.Sizeof(Attr{})

// Owner returns QPConfig.Owner.
func (qp *QP) Owner() any { return qp.owner }

// QPN returns the queue pair number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// State returns the current state (the engine may have moved it to ERR).
func (qp *QP) State() QPState {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.st
}

// Attr returns a copy of the current attributes, with State current and
// SQPSN/RQPSN as the next PSNs the requester will send and the responder
// expects.
func (qp *QP) Attr() Attr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	a := qp.attr
	a.State = qp.st
	// The live PSNs, as documented (rxe's query reports req.psn and
	// resp.psn); qp.attr keeps the configured starting values for reset.
	a.SQPSN = uint32(qp.req.psn)
	a.RQPSN = uint32(qp.rsp.ePSN)
	return a
}

// Modify applies the attributes selected by mask. A move to RESET clears all
// transport state; a move to ERR flushes every outstanding work request.
func (qp *QP) Modify(now time.Time, a *Attr, mask uint32) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	tx := qp.host.getTx()
	defer qp.host.putTx(tx)
	if mask&AttrAccessFlags != 0 {
		qp.attr.AccessFlags = a.AccessFlags
	}
	if mask&AttrQKey != 0 {
		qp.attr.QKey = a.QKey
	}
	if mask&AttrAV != 0 {
		qp.attr.Remote = a.Remote.Unmap()
		qp.attr.FlowLabel = a.FlowLabel
	}
	if mask&AttrPathMTU != 0 {
		qp.attr.PathMTU = a.PathMTU
		qp.mtu = a.PathMTU
	}
	if mask&AttrTimeout != 0 {
		qp.attr.Timeout = a.Timeout
	}
	if mask&AttrRetryCnt != 0 {
		qp.attr.RetryCnt = a.RetryCnt
		qp.req.retryLeft = a.RetryCnt
	}
	if mask&AttrRNRRetry != 0 {
		qp.attr.RNRRetry = a.RNRRetry
		qp.req.rnrLeft = a.RNRRetry
	}
	if mask&AttrRQPSN != 0 {
		qp.attr.RQPSN = a.RQPSN & wire.PSNMask
		qp.rsp.ePSN = wire.PSN(qp.attr.RQPSN)
	}
	if mask&AttrSQPSN != 0 {
		qp.attr.SQPSN = a.SQPSN & wire.PSNMask
		qp.req.setStartPSN(wire.PSN(qp.attr.SQPSN))
	}
	if mask&AttrMaxQPRDAtomic != 0 {
		qp.attr.MaxRDAtomic = a.MaxRDAtomic
	}
	if mask&AttrMaxDestRDAtomic != 0 {
		qp.attr.MaxDestRDAtomic = a.MaxDestRDAtomic
		qp.rsp.resizeResources(int(a.MaxDestRDAtomic))
	}
	if mask&AttrMinRNRTimer != 0 {
		qp.attr.MinRNRTimer = a.MinRNRTimer
	}
	if mask&AttrDestQPN != 0 {
		qp.attr.DestQPN = a.DestQPN & 0xFFFFFF
	}
	if mask&(AttrAV|AttrDestQPN) != 0 && qp.attr.DestQPN != 0 {
		want := wire.SourcePort(qp.qpn, qp.attr.DestQPN, qp.attr.FlowLabel)
		qp.sport = qp.host.sourcePort(want)
	}
	if mask&(AttrAV|AttrDestQPN) != 0 {
		h := qp.host
		qp.icrc = wire.NewICRCFlow(h.cfg.Addr, qp.attr.Remote, qp.sport, h.cfg.Port)
	}
	if mask&AttrState != 0 {
		qp.host.log.Debug("engine: QP modify", "qpn", qp.qpn, "from", int(qp.st), "to", int(a.State))
		switch a.State {
		case StateReset:
			qp.reset()
		case StateErr:
			qp.enterError(now, tx)
		default:
			qp.st = a.State
		}
		if qp.st == StateRTS {
			qp.req.progress(qp, now, tx)
			qp.settle(now, tx) // a CQ overflow while sending takes the QP to ERR
		}
	}
	qp.noteDeadline(now)
	qp.host.flush(tx)
}

// reset returns the QP to RESET: queues emptied without completions, PSNs,
// MSN, opcode state and responder resources cleared.
func (qp *QP) reset() {
	qp.st = StateReset
	qp.sq.clear()
	qp.rq.clear()
	qp.req.reset(wire.PSN(qp.attr.SQPSN))
	// req.reset zeroes the transmit cursors, but the send ring's indices
	// keep counting: move the cursors to the (now empty) head, or the next
	// post would transmit stale ring slots from index 0 on.
	qp.req.rewindTo(&qp.sq)
	// Retry budgets start full again (a QP that failed with RETRY_EXC_ERR
	// has used them up).
	qp.req.retryLeft, qp.req.rnrLeft = qp.attr.RetryCnt, qp.attr.RNRRetry
	qp.setAckPending(false) // before rsp.reset clears it uncounted
	qp.rsp.reset(wire.PSN(qp.attr.RQPSN))
	qp.deadline, qp.pumpAt = time.Time{}, time.Time{}
	qp.overflow, qp.commEst = false, false
}

// enterError moves the QP to ERR and flushes every outstanding send and
// receive work request with WR_FLUSH_ERR.
func (qp *QP) enterError(now time.Time, tx *txBatch) {
	if qp.st == StateErr {
		return
	}
	// An ACK the responder still owes goes out first: the application may
	// have polled the receive it acknowledges and then moved the QP to
	// ERR (a disconnect), and without the ACK the peer retransmits its
	// last message until its retries run out. Callers outside the
	// receive path (a post that fails its local checks) have no batch.
	if tx == nil && qp.ackPending {
		tx = qp.host.getTx()
		defer func() { qp.host.flush(tx); qp.host.putTx(tx) }()
	}
	qp.flushDeferredAck(tx)
	qp.st = StateErr
	qp.req.stopTimers()
	qp.flushSQ()
	qp.flushRQ()
}

func (qp *QP) flushSQ() {
	for !qp.sq.empty() {
		w := qp.sq.oldest()
		if w.status == StatusSuccess {
			w.status = StatusWRFlushErr
		}
		qp.completeSend(w)
	}
	qp.req.rewindTo(&qp.sq)
}

func (qp *QP) flushRQ() {
	if r := qp.rsp.cur; r != nil {
		// A receive partly filled by a SEND in progress (or kept by UC
		// after a gap) was taken off its queue but is still this QP's:
		// it completes first, being the oldest, even if it came from an
		// SRQ.
		qp.rsp.cur = nil
		qp.pushRecv(&Completion{WRID: r.id, Status: StatusWRFlushErr, QPN: qp.qpn})
	}
	for !qp.rq.empty() {
		r := qp.rq.pop()
		qp.pushRecv(&Completion{WRID: r.id, Status: StatusWRFlushErr, QPN: qp.qpn})
	}
	if qp.srq != nil {
		// The SRQ's receives belong to every attached QP and stay.
		qp.host.event(Event{Type: EventQPLastWQEReached, QP: qp})
	}
}

// fatal puts the QP into ERR after a transport error, saying why in the
// "qp" debug log (RDMA_GO_DEBUG=qp) with the work completion status that
// reports it.
func (qp *QP) fatal(now time.Time, tx *txBatch, why string, st Status) {
	qp.host.log.Debug("engine: QP to ERR", "qpn", qp.qpn, "why", why, "status", int(st))
	qp.enterError(now, tx)
}

// Deadline returns the QP's earliest pending timer deadline.
func (qp *QP) Deadline() (time.Time, bool) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.nextDeadline()
}

// nextDeadline is the earliest of the requester's timers and the
// responder's next READ burst.
func (qp *QP) nextDeadline() (time.Time, bool) {
	d, ok := qp.req.deadline()
	if at := qp.pumpAt; !at.IsZero() && (!ok || at.Before(d)) {
		d, ok = at, true
	}
	return d, ok
}

// OnTimer runs the QP's expired timers: retransmission and the RNR wait.
// Calling it early, or when nothing is due, is harmless.
func (qp *QP) OnTimer(now time.Time) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	tx := qp.host.getTx()
	qp.deadline = time.Time{}
	if at := qp.pumpAt; !at.IsZero() && !now.Before(at) {
		qp.pumpRead(now, tx)
	}
	qp.req.onTimer(qp, now, tx)
	qp.settle(now, tx)
	qp.noteDeadline(now)
	qp.host.flush(tx)
	qp.host.putTx(tx)
}

// noteDeadline reports a new earliest deadline through OnDeadline, or
// the zero time when the deadline it reported last is gone.
func (qp *QP) noteDeadline(now time.Time) {
	if qp.onDeadline == nil {
		return
	}
	d, ok := qp.nextDeadline()
	if !ok {
		if !qp.deadline.IsZero() {
			qp.deadline = time.Time{}
			qp.onDeadline.Deadline(now, time.Time{})
		}
		return
	}
	if qp.deadline.IsZero() || d.Before(qp.deadline) {
		qp.deadline = d
		qp.onDeadline.Deadline(now, d)
	}
}

// pushSend and pushRecv hand c to the QP's CQs. They run with qp.mu held.
func (qp *QP) pushSend(c *Completion) {
	if qp.sendCQ != nil && !qp.sendCQ.Push(*c) {
		qp.cqOverflow(qp.sendCQ)
	}
}

func (qp *QP) pushRecv(c *Completion) {
	if c.Status == StatusSuccess {
		qp.countOwn(&qp.host.stats.RDMARecvs, &qp.recvs)
	}
	if qp.recvCQ != nil && !qp.recvCQ.Push(*c) {
		qp.cqOverflow(qp.recvCQ)
	}
}

// cqOverflow records a lost completion: the CQ gets a CQ_ERR event and the
// QP a QP_FATAL event, and the QP goes to ERR when the current event is
// over (see settle).
func (qp *QP) cqOverflow(cq CompletionQueue) {
	qp.count(&qp.host.stats.CQOverflow)
	if !qp.overflow {
		qp.overflow = true
		qp.host.event(Event{Type: EventCQErr, CQ: cq})
		qp.host.event(Event{Type: EventQPFatal, QP: qp})
	}
}

// settle finishes an event: a CQ overflow during it takes the QP to ERR.
func (qp *QP) settle(now time.Time, tx *txBatch) {
	if qp.overflow && qp.st != StateErr {
		qp.host.log.Debug("engine: QP to ERR", "qpn", qp.qpn, "why", "CQ overflow")
		qp.enterError(now, tx)
	}
}

// commEstablished raises COMM_EST for the first packet a QP in RTR receives.
func (qp *QP) commEstablished() {
	if qp.st == StateRTR && !qp.commEst && qp.typ != QPTypeUD {
		qp.commEst = true
		qp.host.event(Event{Type: EventCommEst, QP: qp})
	}
}
