package engine

import (
	"fmt"
	"unsafe"

	"github.com/rdma-go/rdma-go/wire"
)

// sendWQE is a send work request in the send queue, with its gather list
// resolved to memory and its place in the PSN sequence. What a SEND or a
// WRITE uses is in it and the rest hangs off ext: a WQE is 144 bytes (it
// was 216 with every work request field in it), fewer cache lines to
// fetch when a QP not used for a while posts.
type sendWQE struct {
	wr       postedWR
	length   int // total message length
	npkts    int
	firstPSN wire.PSN
	lastPSN  wire.PSN
	signaled bool
	status   Status
	started  bool     // PSNs assigned
	segs     [][]byte // resolved gather (or, for READ/atomic, scatter) list
	// seg1 backs segs when the QP takes one SGE per work request (most):
	// no separate array to fetch.
	seg1   [1][]byte
	inline []byte // backing store for inline data
	// ext holds what only some work requests carry, made at the slot's
	// first such work request and kept with the slot.
	ext *sendExt
}

// postedWR is what a send WQE keeps of its work request for every opcode.
type postedWR struct {
	ID         uint64
	RemoteAddr uint64
	Flags      uint32
	Imm        uint32
	RKey       uint32
	Op         WROp
}

// sendExt is the part of a send WQE that only atomics, UD sends and binds
// use. A WQE's fields here are valid only for the work request that set
// them (setAtomic, setUD, setBind).
type sendExt struct {
	compareAdd, swap      uint64 // atomic operands
	remoteQPN, remoteQKey uint32 // UD destination QP
	av                    AV     // UD destination
	bind                  Bind   // BIND_MW arguments
}

// extension returns w's extension, made at its first use.
func (w *sendWQE) extension() *sendExt {
	if w.ext == nil {
		w.ext = new(sendExt)
	}
	return w.ext
}

// setAtomic keeps an atomic work request's operands.
func (w *sendWQE) setAtomic(compareAdd, swap uint64) {
	e := w.extension()
	e.compareAdd, e.swap = compareAdd, swap
}

// setUD keeps a UD work request's destination.
func (w *sendWQE) setUD(av *AV, qpn, qkey uint32) {
	e := w.extension()
	e.av, e.remoteQPN, e.remoteQKey = *av, qpn, qkey
}

// setBind keeps a BIND_MW's arguments.
func (w *sendWQE) setBind(b *Bind) { w.extension().bind = *b }

func (w *sendWQE) isReadOrAtomic() bool {
	return w.wr.Op == WRRead || w.wr.Op == WRCompareSwap || w.wr.Op == WRFetchAdd
}

// sendQueue is a ring of send WQEs indexed by ever-increasing counters. Its
// first ring is one slot, inside the QP (first): a QP with one send
// outstanding at a time, as in a ping-pong or with many connections, finds
// its slot with the rest of its state rather than in another object. When
// more WQEs are outstanding than it has slots, the ring grows to
// sqFirstSlots, then doubles, up to its depth: one with a deep queue that
// it never fills (most connections) keeps a few hundred bytes, not depth ×
// sizeof(sendWQE).
type sendQueue struct {
	slots             []sendWQE
	depth             int // the most WQEs outstanding (max_send_wr)
	maxSGE, maxInline int
	head, tail        uint64
	first             *sendWQE // the first ring's slot (QP.sq1), or nil
}

// sqFirstSlots is the number of slots a send queue makes at its first post.
const sqFirstSlots = 4

func newSendQueue(depth, maxSGE, maxInline int) sendQueue {
	return sendQueue{depth: depth, maxSGE: max(maxSGE, 1), maxInline: maxInline}
}

// grownSize is the ring size after used slots (all in use) of a ring of
// depth: first slots at the first push, then double, capped at depth.
func grownSize(used, first, depth int) int {
	return min(max(2*used, first), depth)
}

// makeSlots makes n slots (the QP's own for a first ring of one), each
// slot's scatter list and inline buffer carved from one array each
// (capped, so an append never spills into the next slot), or the scatter
// list in the slot when it holds one SGE: at most three allocations, not
// 2n+1.
func (q *sendQueue) makeSlots(n int) []sendWQE {
	var slots []sendWQE
	if n == 1 && q.first != nil {
		slots = unsafe.Slice(q.first, 1)
	} else {
		slots = make([]sendWQE, n)
	}
	k, m := q.maxSGE, q.maxInline
	var segs [][]byte
	if k > 1 {
		segs = make([][]byte, n*k)
	}
	var inline []byte
	if m > 0 {
		inline = make([]byte, n*m)
	}
	for i := range slots {
		if k == 1 {
			slots[i].segs = slots[i].seg1[:0:1]
		} else {
			slots[i].segs = segs[i*k : i*k : (i+1)*k]
		}
		slots[i].inline = inline[i*m : i*m : (i+1)*m]
	}
	return slots
}

// grow makes the first slot, or grows the ring (up to depth), moving the
// outstanding WQEs to their places in the new one. A moved WQE keeps its
// inline buffer (the old array stays alive through it) and its ext; a
// scatter list in the slot moves with it. No *sendWQE is held across a
// push, so nothing else points into the old ring.
func (q *sendQueue) grow() {
	old := q.slots
	n := grownSize(len(old), sqFirstSlots, q.depth)
	if len(old) == 0 && q.first != nil {
		n = 1 // the QP's own slot first
	}
	q.slots = q.makeSlots(n)
	moveRing(old, q.slots, q.head, q.tail)
	if q.maxSGE == 1 {
		for i := q.head; i != q.tail; i++ {
			w := q.at(i)
			w.segs = w.seg1[:len(w.segs):1]
		}
	}
}

// moveRing moves the entries [head, tail) of the ring old to their places
// in the larger ring slots (entries are at index mod ring size).
func moveRing[T any](old, slots []T, head, tail uint64) {
	for i := head; i != tail; i++ {
		slots[i%uint64(len(slots))] = old[i%uint64(len(old))]
	}
}

func (q *sendQueue) at(i uint64) *sendWQE { return &q.slots[i%uint64(len(q.slots))] }
func (q *sendQueue) empty() bool          { return q.head == q.tail }
func (q *sendQueue) full() bool           { return q.tail-q.head >= uint64(q.depth) }
func (q *sendQueue) len() int             { return int(q.tail - q.head) }

// head returns the oldest outstanding WQE; the queue must not be empty.
func (q *sendQueue) oldest() *sendWQE { return q.at(q.head) }

// push takes the next slot, growing the ring first if every slot is in
// use; the queue must not be full.
func (q *sendQueue) push() *sendWQE {
	if q.tail-q.head == uint64(len(q.slots)) {
		q.grow()
	}
	w := q.at(q.tail)
	q.tail++
	segs, inline, ext := w.segs[:0], w.inline[:0], w.ext
	*w = sendWQE{segs: segs, inline: inline, ext: ext}
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

// recvQueue is a ring of receive WQEs that, as sendQueue, has no slots
// until the first post and then doubles up to its depth.
type recvQueue struct {
	slots      []recvWQE
	depth      int // the most receives posted (max_recv_wr)
	maxSGE     int
	head, tail uint64
}

// rqFirstSlots is the number of slots a receive queue makes at its first
// post.
const rqFirstSlots = 4

func newRecvQueue(depth, maxSGE int) recvQueue {
	return recvQueue{depth: depth, maxSGE: max(maxSGE, 1)}
}

// makeSlots makes n slots, their scatter lists carved from one array.
func (q *recvQueue) makeSlots(n int) []recvWQE {
	slots := make([]recvWQE, n)
	k := q.maxSGE
	segs := make([][]byte, n*k)
	for i := range slots {
		slots[i].segs = segs[i*k : i*k : (i+1)*k]
	}
	return slots
}

func (q *recvQueue) at(i uint64) *recvWQE { return &q.slots[i%uint64(len(q.slots))] }
func (q *recvQueue) empty() bool          { return q.head == q.tail }
func (q *recvQueue) full() bool           { return q.tail-q.head >= uint64(q.depth) }
func (q *recvQueue) len() int             { return int(q.tail - q.head) }

// push takes the next slot, growing the ring first if every slot is in
// use; the queue must not be full. A growth leaves a WQE pop returned as
// it is (in the old ring).
func (q *recvQueue) push() *recvWQE {
	if q.tail-q.head == uint64(len(q.slots)) {
		old := q.slots
		q.slots = q.makeSlots(grownSize(len(old), rqFirstSlots, q.depth))
		moveRing(old, q.slots, q.head, q.tail)
	}
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
func (qp *QP) PostRecv(wr *RecvWR) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.st == StateReset {
		return ErrBadState
	}
	if qp.srq != nil {
		return ErrHasSRQ
	}
	if qp.rq.full() {
		return ErrQueueFull
	}
	if len(wr.SGL) > qp.rq.maxSGE {
		return ErrTooManySGE
	}
	if qp.st == StateErr {
		qp.pushRecv(&Completion{WRID: wr.ID, Status: StatusWRFlushErr, QPN: qp.qpn})
		return nil
	}
	r := qp.rq.push()
	r.id = wr.ID
	for _, sge := range wr.SGL {
		b, err := qp.host.mem.LocalCached(&qp.keys, qp.pd, sge, true)
		if err != nil {
			qp.rq.tail--
			return fmt.Errorf("engine: receive SGE (addr 0x%x, length %d, lkey 0x%x): %w", sge.Addr, sge.Length, sge.LKey, err)
		}
		r.segs = append(r.segs, b)
		r.length += len(b)
	}
	return nil
}
