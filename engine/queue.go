package engine

import (
	"fmt"
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

// sendWQE is a send work request in the send queue, with its gather list
// resolved to memory and its place in the PSN sequence.
type sendWQE struct {
	wr       SendWR
	segs     [][]byte // resolved gather (or, for READ/atomic, scatter) list
	inline   []byte   // backing store for inline data
	length   int      // total message length
	signaled bool
	status   Status

	started  bool // PSNs assigned
	firstPSN wire.PSN
	lastPSN  wire.PSN
	npkts    int
	av       AV   // UD destination, copied from the work request
	bind     Bind // BIND_MW arguments, copied from the work request
}

func (w *sendWQE) isReadOrAtomic() bool {
	return w.wr.Op == WRRead || w.wr.Op == WRCompareSwap || w.wr.Op == WRFetchAdd
}

// sendQueue is a fixed ring of send WQEs indexed by ever-increasing counters.
type sendQueue struct {
	slots      []sendWQE
	head, tail uint64
}

func newSendQueue(depth, maxSGE, maxInline int) sendQueue {
	q := sendQueue{slots: make([]sendWQE, depth)}
	for i := range q.slots {
		q.slots[i].segs = make([][]byte, 0, max(maxSGE, 1))
		q.slots[i].inline = make([]byte, 0, maxInline)
	}
	return q
}

func (q *sendQueue) at(i uint64) *sendWQE { return &q.slots[i%uint64(len(q.slots))] }
func (q *sendQueue) empty() bool          { return q.head == q.tail }
func (q *sendQueue) full() bool           { return q.tail-q.head >= uint64(len(q.slots)) }
func (q *sendQueue) len() int             { return int(q.tail - q.head) }

// head returns the oldest outstanding WQE; the queue must not be empty.
func (q *sendQueue) oldest() *sendWQE { return q.at(q.head) }

func (q *sendQueue) push() *sendWQE {
	w := q.at(q.tail)
	q.tail++
	segs, inline := w.segs[:0], w.inline[:0]
	*w = sendWQE{segs: segs, inline: inline}
	return w
}

func (q *sendQueue) pop() { q.head++ }

func (q *sendQueue) clear() { q.head = q.tail }

// recvWQE is a posted receive with its scatter list resolved.
type recvWQE struct {
	id     uint64
	segs   [][]byte
	length int
}

// copyFrom makes w a copy of r with its own scatter list, so r's ring slot
// may be reused while w is still being filled.
func (w *recvWQE) copyFrom(r *recvWQE) {
	w.id, w.length = r.id, r.length
	w.segs = append(w.segs[:0], r.segs...)
}

// recvQueue is a fixed ring of receive WQEs.
type recvQueue struct {
	slots      []recvWQE
	head, tail uint64
}

func newRecvQueue(depth, maxSGE int) recvQueue {
	q := recvQueue{slots: make([]recvWQE, depth)}
	for i := range q.slots {
		q.slots[i].segs = make([][]byte, 0, max(maxSGE, 1))
	}
	return q
}

func (q *recvQueue) at(i uint64) *recvWQE { return &q.slots[i%uint64(len(q.slots))] }
func (q *recvQueue) empty() bool          { return q.head == q.tail }
func (q *recvQueue) full() bool           { return q.tail-q.head >= uint64(len(q.slots)) }
func (q *recvQueue) len() int             { return int(q.tail - q.head) }

func (q *recvQueue) push() *recvWQE {
	r := q.at(q.tail)
	q.tail++
	r.segs = r.segs[:0]
	r.length = 0
	return r
}

// pop removes and returns the oldest receive. The returned WQE stays valid
// until the slot is reused by a later push.
func (q *recvQueue) pop() *recvWQE {
	r := q.at(q.head)
	q.head++
	return r
}

func (q *recvQueue) clear() { q.head = q.tail }

// copyTo scatters src into segs starting at byte offset off.
func copyTo(segs [][]byte, off int, src []byte) {
	for _, s := range segs {
		if len(src) == 0 {
			return
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(s[off:], src)
		src = src[n:]
		off = 0
	}
}

// copyFrom gathers len(dst) bytes from segs starting at byte offset off.
func copyFrom(dst []byte, segs [][]byte, off int) {
	for _, s := range segs {
		if len(dst) == 0 {
			return
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(dst, s[off:])
		dst = dst[n:]
		off = 0
	}
}

// PostRecv validates a receive work request and queues it. On a QP in ERR
// the receive completes at once with WR_FLUSH_ERR.
func (qp *QP) PostRecv(now time.Time, wr *RecvWR) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.st == StateReset {
		return ErrBadState
	}
	if qp.cfg.SRQ != nil {
		return ErrHasSRQ
	}
	if qp.rq.full() {
		return ErrQueueFull
	}
	if len(wr.SGL) > max(qp.cfg.MaxRecvSGE, 1) {
		return ErrTooManySGE
	}
	if qp.st == StateErr {
		qp.pushRecv(&Completion{WRID: wr.ID, Status: StatusWRFlushErr, QPN: qp.qpn})
		return nil
	}
	r := qp.rq.push()
	r.id = wr.ID
	for _, sge := range wr.SGL {
		b, err := qp.host.mem.Local(qp.cfg.PD, sge, true)
		if err != nil {
			qp.rq.tail--
			return fmt.Errorf("engine: receive SGE (addr 0x%x, length %d, lkey 0x%x): %w", sge.Addr, sge.Length, sge.LKey, err)
		}
		r.segs = append(r.segs, b)
		r.length += len(b)
	}
	return nil
}
