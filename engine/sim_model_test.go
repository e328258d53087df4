package engine

// The workload and the model of the simulation (sim_test.go).
//
// Each QP of a pair sends to its peer, so a pair carries two independent
// flows. A flow owns its memory, which keeps the model exact despite the
// concurrency:
//
//   - src: the sender's static gather source (never written after setup);
//   - dst: the sender's READ and atomic result slots, one per SQ entry;
//   - receive buffers: one slot per entry of the receiver's own RQ or, for
//     the QPs that use one, of its host's SRQ (then a QP takes receives in
//     post order, but not consecutive ones);
//   - warea: the receiver's region that the flow WRITEs and READs;
//   - aarea: the receiver's atomic counters for the flow.
//
// A responder executes one QP's requests in PSN order, which is post order,
// so the model applies WRITEs and atomics to its shadow copies in post order
// and snapshots a READ's expected data when it is posted. The one exception
// is a READ that is replayed after a later WRITE to the same bytes has
// executed; a WRITE that overlaps an outstanding READ therefore carries
// SendFence, as a real application must.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
	"unsafe"
)

const (
	simCanary    = 0xEE // fill of result and receive slots
	simCounters  = 4    // atomic counters per flow
	simMaxInline = 64
	simMaxSGE    = 4
	simPD        = 1
)

// simQP is one QP of the simulation with its model.
type simQP struct {
	idx     int
	host    *simHost
	peer    *simQP
	qp      *QP
	mtu     int
	maxMsg  int
	sqDepth int
	sigAll  bool
	// timerHint is the earliest deadline reported through OnDeadline
	// and not yet served by OnTimer.
	timerHint time.Time
	scq       *sliceCQ
	rcq       *sliceCQ

	slot    int // size of a dst or recv slot
	src     []byte
	srcCopy []byte // to check that src is never written
	srcMR   *MR
	dst     []byte
	dstMR   *MR
	warea   []byte
	wareaMR *MR
	aarea   []byte // 8-byte aligned
	aareaMR *MR

	// Requester model.
	budget   int    // send WRs still to post
	posted   uint64 // send WRs posted; the next one's ID
	done     uint64 // send WRs known complete
	wrs      []simWR
	sinceSig int
	shadow   []byte              // model of peer.warea
	counters [simCounters]uint64 // model of peer.aarea

	// Responder model.
	rq         *simRQ      // its own receive queue, or its host's SRQ
	recvDone   uint64      // receive completions
	lastRecvID uint64      // WR ID of the last one
	expect     []simExpect // messages from the peer that take a receive
}

// simRQ is the model of a receive queue: a QP's own, or a host's SRQ that
// several QPs share.
type simRQ struct {
	name     string
	shared   bool // an SRQ
	slot     int  // bytes per receive slot
	capacity int  // bytes a receive holds: at least any message sent to it
	buf      []byte
	mr       *MR
	post     func(wr *RecvWR) error
	queued   func() int // receives the engine holds
	idBase   uint64
	posted   uint64
	out      map[uint64]simRecv // posted and not completed, by WR ID
	free     []int              // free slot offsets

	starving    bool // not reposting, to provoke RNR NAKs
	starveUntil time.Time
	nextStarve  time.Time
}

// simWR is a posted send WR in the model.
type simWR struct {
	op       WROp
	signaled bool
	length   int
	sgl      []SGE  // READ/atomic: local scatter list into dst
	slotOff  int    // READ/atomic: offset of its dst slot
	want     []byte // READ: expected data; atomic: expected original value
	rOff     int    // READ: source range in peer.warea
	rLen     int
}

// simRecv is a posted receive in the model.
type simRecv struct {
	sgl     []SGE
	slotOff int
}

// simExpect is a message that will consume a receive at the responder.
type simExpect struct {
	op        WROp
	length    int
	imm       uint32
	data      []byte // SEND payload
	solicited bool
	inv       *MR // SEND_WITH_INV: the MR whose R_Key is invalidated
}

// setup creates the QP pairs, their memory and the initial receives.
func (s *sim) setup() {
	n := len(s.hosts)
	mtus := []int{256, 1024, 4096}
	for i := range s.cfg.pairs {
		ha := s.hosts[i%n]
		hb := s.hosts[(i%n+1+(i/n)%(n-1))%n]
		mtu := mtus[i%len(mtus)]
		rd := []uint8{1, 2, 4, 16}[s.rng.IntN(4)]
		par := simParams{
			mtu:      mtu,
			timeout:  s.cfg.minTimeout + uint8(s.rng.IntN(13-int(s.cfg.minTimeout))), // up to 16.8 ms
			rnrTimer: []uint8{1, 4, 8, 12}[s.rng.IntN(4)],                            // 10 µs .. 640 µs
			rdDest:   rd,                                                             // max_dest_rd_atomic
			rd:       max(1, rd>>s.rng.IntN(2)),                                      // max_rd_atomic, at most the peer's
			sqDepth:  []int{8, 16, 32, 64}[s.rng.IntN(4)],
			rqDepth:  []int{4, 16, 32}[s.rng.IntN(3)],
			srq:      [2]bool{s.rng.IntN(3) == 0, s.rng.IntN(3) == 0},
			retryCnt: s.cfg.retryCnt,
			psnA:     s.randPSN(),
			psnB:     s.randPSN(),
			sigAll:   [2]bool{i%4 == 3, s.rng.IntN(6) == 0},
		}
		a := s.newQP(ha, par, 0)
		b := s.newQP(hb, par, 1)
		a.peer, b.peer = b, a
		simConnect(s.now, a, b, par, par.psnA, par.psnB)
		simConnect(s.now, b, a, par, par.psnB, par.psnA)
	}
	per := s.cfg.wrs / len(s.qps)
	for i, q := range s.qps {
		q.budget = per
		if i < s.cfg.wrs%len(s.qps) {
			q.budget++
		}
		q.shadow = bytes.Clone(q.peer.warea)
		for j := range q.counters {
			q.counters[j] = binary.NativeEndian.Uint64(q.peer.aarea[8*j:])
		}
	}
	for _, rq := range s.rqs {
		rq.refill(s)
		rq.nextStarve = s.now.Add(time.Duration(1+s.rng.IntN(20)) * time.Millisecond)
	}
}

// newRQ returns the model of a receive queue of depth receives of capacity
// bytes each, in a fresh MR of host h.
func (s *sim) newRQ(h *simHost, name string, depth, capacity int, idBase uint64) *simRQ {
	rq := &simRQ{name: name, capacity: capacity, slot: (capacity + 64 + 7) &^ 7, idBase: idBase, out: make(map[uint64]simRecv)}
	rq.buf = make([]byte, depth*rq.slot)
	rq.mr = h.h.Mem().Register(simPD, rq.buf, AccessLocalWrite)
	for i := depth - 1; i >= 0; i-- {
		rq.free = append(rq.free, i*rq.slot)
	}
	s.rqs = append(s.rqs, rq)
	return rq
}

// setupSRQs gives every host an SRQ, which some QPs use.
func (s *sim) setupSRQs() {
	for _, h := range s.hosts {
		depth := []int{8, 32}[s.rng.IntN(2)]
		srq, err := h.h.CreateSRQ(simPD, depth, simMaxSGE)
		if err != nil {
			s.fatalf("CreateSRQ: %v", err)
		}
		h.srq = srq
		rq := s.newRQ(h, fmt.Sprintf("srq%d", h.idx), depth, simMaxMsg(4096), 1<<40)
		rq.shared = true
		rq.post = srq.PostRecv
		rq.queued = srq.Len
		h.rq = rq
	}
}

// simMaxMsg is the largest message on a path of PMTU mtu.
func simMaxMsg(mtu int) int { return max(4*mtu, 4096) + 100 }

type simParams struct {
	mtu              int
	timeout          uint8
	rnrTimer         uint8
	rd, rdDest       uint8
	sqDepth, rqDepth int
	psnA, psnB       uint32
	sigAll           [2]bool
	srq              [2]bool // use the host's SRQ
	retryCnt         uint8
}

// randPSN picks a start PSN, often just before the 24-bit wrap.
func (s *sim) randPSN() uint32 {
	if s.rng.IntN(2) == 0 {
		return 0xFFFFFF - uint32(s.rng.IntN(300))
	}
	return s.rng.Uint32() & 0xFFFFFF
}

func (s *sim) newQP(h *simHost, par simParams, end int) *simQP {
	q := &simQP{idx: len(s.qps), host: h, mtu: par.mtu, maxMsg: simMaxMsg(par.mtu),
		sqDepth: par.sqDepth, sigAll: par.sigAll[end], scq: &sliceCQ{}, rcq: &sliceCQ{}}
	var srq *SRQ
	if par.srq[end] {
		srq, q.rq = h.srq, h.rq
		s.res.srqQPs++
	}
	var err error
	q.qp, err = h.h.CreateQP(QPConfig{Type: QPTypeRC, PD: simPD, SendCQ: q.scq, RecvCQ: q.rcq,
		MaxSendWR: q.sqDepth, MaxRecvWR: par.rqDepth, MaxSendSGE: simMaxSGE, MaxRecvSGE: simMaxSGE,
		MaxInline: simMaxInline, SigAll: q.sigAll, SRQ: srq,
		OnDeadline: DeadlineFunc(func(_, at time.Time) {
			if at.IsZero() {
				q.timerHint = time.Time{} // no deadline left
				return
			}
			if q.timerHint.IsZero() || at.Before(q.timerHint) {
				q.timerHint = at
			}
		})})
	if err != nil {
		s.fatalf("CreateQP: %v", err)
	}
	mem := h.h.Mem()
	q.slot = (q.maxMsg + 64 + 7) &^ 7
	q.src = make([]byte, 2*q.maxMsg)
	simFillRand(s, q.src)
	q.srcCopy = bytes.Clone(q.src)
	q.srcMR = mem.Register(simPD, q.src, 0)
	q.dst = make([]byte, q.sqDepth*q.slot)
	q.dstMR = mem.Register(simPD, q.dst, AccessLocalWrite)
	if q.rq == nil {
		q.rq = s.newRQ(h, fmt.Sprintf("rq of qp%d", q.idx), par.rqDepth, q.maxMsg, 0)
		q.rq.post = func(wr *RecvWR) error { return q.qp.PostRecv(wr) }
		q.rq.queued = func() int {
			q.qp.mu.Lock()
			defer q.qp.mu.Unlock()
			return q.qp.rq.len()
		}
	}
	q.warea = make([]byte, 2*q.maxMsg+512)
	simFillRand(s, q.warea)
	q.wareaMR = mem.Register(simPD, q.warea, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	words := make([]uint64, simCounters)
	q.aarea = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 8*simCounters)
	simFillRand(s, q.aarea)
	q.aareaMR = mem.Register(simPD, q.aarea, AccessLocalWrite|AccessRemoteAtomic)
	q.wrs = make([]simWR, q.sqDepth)
	s.qps = append(s.qps, q)
	return q
}

func simFillRand(s *sim, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], s.rng.Uint64())
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(s.rng.Uint32())
	}
}

// simConnect moves q through INIT, RTR and RTS towards peer.
func simConnect(now time.Time, q, peer *simQP, par simParams, sqPSN, rqPSN uint32) {
	q.qp.Modify(now, &Attr{State: StateInit, AccessFlags: AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic}, AttrState|AttrAccessFlags)
	q.qp.Modify(now, &Attr{State: StateRTR, Remote: peer.host.addr, PathMTU: par.mtu, DestQPN: peer.qp.QPN(), RQPSN: rqPSN,
		MaxDestRDAtomic: par.rdDest, MinRNRTimer: par.rnrTimer},
		AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRDAtomic|AttrMinRNRTimer)
	q.qp.Modify(now, &Attr{State: StateRTS, SQPSN: sqPSN, Timeout: par.timeout, RetryCnt: par.retryCnt, RNRRetry: 7, MaxRDAtomic: par.rd},
		AttrState|AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRDAtomic)
}

func (s *sim) workloadPosted() bool {
	for _, q := range s.qps {
		if q.budget > 0 {
			return false
		}
	}
	return true
}

func (s *sim) anyStarving() bool {
	for _, rq := range s.rqs {
		if rq.starving {
			return true
		}
	}
	return false
}

// tick is one workload step: receive starvation starts and ends, and each
// QP may post a list of send WRs.
func (s *sim) tick() {
	s.partitions()
	for _, rq := range s.rqs {
		switch {
		case rq.starving && !s.now.Before(rq.starveUntil):
			rq.endStarve(s)
		case !rq.starving && !s.calm && !s.now.Before(rq.nextStarve):
			rq.starving = true
			rq.starveUntil = s.now.Add(time.Duration(200+s.rng.IntN(2800)) * time.Microsecond)
		}
	}
	for _, q := range s.qps {
		if q.budget > 0 && s.rng.IntN(3) != 0 {
			q.post(s)
		}
	}
}

// partitions heals cuts that are due and, while faults are on, now and then
// cuts the path between two hosts for a while (up to a few retransmission
// timeouts), dropping everything between them, in flight included.
func (s *sim) partitions() {
	for i := 0; i < len(s.cuts); {
		c := s.cuts[i]
		if s.calm || !s.now.Before(c.until) {
			s.net.Partition(s.hosts[c.a].addr, s.hosts[c.b].addr, false)
			s.cuts = append(s.cuts[:i], s.cuts[i+1:]...)
			continue
		}
		i++
	}
	if s.calm || !s.cfg.partitions || s.now.Before(s.nextCut) {
		return
	}
	a := s.rng.IntN(len(s.hosts))
	b := (a + 1 + s.rng.IntN(len(s.hosts)-1)) % len(s.hosts)
	s.net.Partition(s.hosts[a].addr, s.hosts[b].addr, true)
	s.cuts = append(s.cuts, simCut{a: a, b: b, until: s.now.Add(time.Duration(300+s.rng.IntN(4000)) * time.Microsecond)})
	s.nextCut = s.now.Add(time.Duration(5+s.rng.IntN(40)) * time.Millisecond)
	s.res.partitions++
}

// simCut is a partition between hosts a and b.
type simCut struct {
	a, b  int
	until time.Time
}

// endStarve refills the receive queue and schedules the next starvation.
func (rq *simRQ) endStarve(s *sim) {
	rq.starving = false
	rq.refill(s)
	rq.nextStarve = s.now.Add(time.Duration(2+s.rng.IntN(30)) * time.Millisecond)
}

// refill posts receives into every free slot.
func (rq *simRQ) refill(s *sim) {
	for len(rq.free) > 0 {
		rq.postOne(s)
	}
}

// postOne posts one receive covering a free slot with 1..4 SGEs.
func (rq *simRQ) postOne(s *sim) {
	off := rq.free[len(rq.free)-1]
	rq.free = rq.free[:len(rq.free)-1]
	simFill(rq.buf[off:off+rq.slot], simCanary)
	sgl := s.scatter(rq.mr, off, rq.capacity)
	id := rq.idBase + rq.posted
	rq.posted++
	rq.out[id] = simRecv{sgl: sgl, slotOff: off}
	if err := rq.post(&RecvWR{ID: id, SGL: sgl}); err != nil {
		s.fatalf("%s: PostRecv %d: %v", rq.name, id, err)
	}
	s.res.recvs++
}

func simFill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// scatter returns 1..4 SGEs of mr that start at byte off and hold n bytes
// in total, with small gaps between them (the gaps stay canary). n == 0
// gives no SGE or one empty SGE.
func (s *sim) scatter(mr *MR, off, n int) []SGE {
	if n == 0 {
		if s.rng.IntN(2) == 0 {
			return nil
		}
		return []SGE{{Addr: mr.Addr + uint64(off), LKey: mr.LKey}}
	}
	k := 1 + s.rng.IntN(simMaxSGE)
	cuts := s.cutPoints(n, k)
	sgl := make([]SGE, 0, k)
	pos := off
	for i := range k {
		l := cuts[i+1] - cuts[i]
		sgl = append(sgl, SGE{Addr: mr.Addr + uint64(pos), Length: uint32(l), LKey: mr.LKey})
		pos += l + s.rng.IntN(17)
	}
	return sgl
}

// cutPoints splits n into k pieces (some may be empty): k+1 ascending points
// from 0 to n.
func (s *sim) cutPoints(n, k int) []int {
	c := make([]int, k+1)
	c[k] = n
	for i := 1; i < k; i++ {
		c[i] = s.rng.IntN(n + 1)
	}
	for i := 1; i < k; i++ { // insertion sort, k <= 4
		for j := i; j > 1 && c[j] < c[j-1]; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
	return c
}

// gather picks a gather list of n bytes from src, 1..4 pieces at random
// places, and returns it with the bytes it names.
func (q *simQP) gather(s *sim, n int) ([]SGE, []byte) {
	if n == 0 && s.rng.IntN(2) == 0 {
		return nil, nil
	}
	k := 1 + s.rng.IntN(simMaxSGE)
	cuts := s.cutPoints(n, k)
	sgl := make([]SGE, 0, k)
	data := make([]byte, 0, n)
	for i := range k {
		l := cuts[i+1] - cuts[i]
		off := s.rng.IntN(len(q.src) - l + 1)
		sgl = append(sgl, SGE{Addr: q.srcMR.Addr + uint64(off), Length: uint32(l), LKey: q.srcMR.LKey})
		data = append(data, q.src[off:off+l]...)
	}
	return sgl, data
}

// msgLen draws a message length: empty, tiny, up to one MTU, whole MTUs,
// or anything up to maxMsg (over four MTUs, and over 16 for PMTU 256).
func (q *simQP) msgLen(s *sim) int {
	switch x := s.rng.IntN(100); {
	case x < 8:
		return 0
	case x < 30:
		return 1 + s.rng.IntN(64)
	case x < 55:
		return 1 + s.rng.IntN(q.mtu)
	case x < 65:
		return q.mtu * (1 + s.rng.IntN(4))
	default:
		return 1 + s.rng.IntN(q.maxMsg)
	}
}

// simOpWeights is the opcode mix.
var simOpWeights = []simOpWeight{
	{WRSend, 17}, {WRSendImm, 13}, {WRSendWithInv, 5}, {WRWrite, 20}, {WRWriteImm, 10},
	{WRRead, 17}, {WRCompareSwap, 9}, {WRFetchAdd, 9},
}

type simOpWeight struct {
	op WROp
	w  int
}

func (s *sim) pickOp() WROp {
	total := 0
	for _, o := range s.cfg.ops {
		total += o.w
	}
	x := s.rng.IntN(total)
	for _, o := range s.cfg.ops {
		if x < o.w {
			return o.op
		}
		x -= o.w
	}
	panic("unreachable")
}

// post posts a list of 1..4 send WRs, as the SQ and the budget allow.
func (q *simQP) post(s *sim) {
	n := min(q.sqDepth-int(q.posted-q.done), q.budget, 1+s.rng.IntN(4))
	if n <= 0 {
		return
	}
	wrs := make([]SendWR, n)
	for i := range wrs {
		q.makeWR(s, &wrs[i])
	}
	if got, err := q.qp.PostSendList(s.now, wrs); err != nil || got != n {
		s.fatalf("qp%d PostSendList(%d WRs): posted %d, %v", q.idx, n, got, err)
	}
}

// makeWR builds the next send WR and applies it to the model.
func (q *simQP) makeWR(s *sim, wr *SendWR) {
	p := q.peer
	seq := q.posted
	q.posted++
	q.budget--
	slotIdx := int(seq % uint64(q.sqDepth))
	w := &q.wrs[slotIdx]
	*w = simWR{op: s.pickOp()}
	*wr = SendWR{ID: seq, Op: w.op}
	s.res.sendWRs++
	s.res.opCount[w.op]++
	switch w.op {
	case WRSend, WRSendImm, WRSendWithInv, WRWrite, WRWriteImm:
		n := q.msgLen(s)
		w.length = n
		wr.SGL, w.want = q.gather(s, n)
		if n <= simMaxInline && s.rng.IntN(4) == 0 {
			wr.Flags |= SendInline
		}
		if w.op == WRSendImm || w.op == WRWriteImm {
			wr.Imm = s.rng.Uint32()
		}
		if w.op != WRWrite && s.rng.IntN(4) == 0 {
			wr.Flags |= SendSolicited
		}
		e := simExpect{op: w.op, length: n, imm: wr.Imm, solicited: wr.Flags&SendSolicited != 0}
		switch w.op {
		case WRWrite, WRWriteImm:
			off := s.rng.IntN(len(p.warea) - n + 1)
			wr.RemoteAddr, wr.RKey = p.wareaMR.Addr+uint64(off), p.wareaMR.RKey
			copy(q.shadow[off:], w.want)
			if q.readOverlaps(off, n) {
				wr.Flags |= SendFence
			}
			w.want = nil
			if w.op == WRWrite {
				break
			}
			p.expect = append(p.expect, e)
		default:
			e.data = w.want
			w.want = nil
			if w.op == WRSendWithInv {
				// A fresh MR of the peer for each SEND with invalidate:
				// its R_Key must be valid when the SEND executes.
				e.inv = p.host.h.Mem().Register(simPD, make([]byte, 64), AccessLocalWrite|AccessRemoteWrite)
				wr.Imm = e.inv.RKey
			}
			p.expect = append(p.expect, e)
		}
	case WRRead:
		n := q.msgLen(s)
		w.length = n
		off := s.rng.IntN(len(p.warea) - n + 1)
		wr.RemoteAddr, wr.RKey = p.wareaMR.Addr+uint64(off), p.wareaMR.RKey
		w.want = bytes.Clone(q.shadow[off : off+n])
		w.rOff, w.rLen = off, n
		w.slotOff = slotIdx * q.slot
		simFill(q.dst[w.slotOff:w.slotOff+q.slot], simCanary)
		w.sgl = s.scatter(q.dstMR, w.slotOff, n)
		wr.SGL = w.sgl
	case WRCompareSwap, WRFetchAdd:
		w.length = 8
		i := s.rng.IntN(simCounters)
		old := q.counters[i]
		w.want = binary.NativeEndian.AppendUint64(nil, old)
		wr.RemoteAddr, wr.RKey = p.aareaMR.Addr+uint64(8*i), p.aareaMR.RKey
		if w.op == WRFetchAdd {
			wr.CompareAdd = s.rng.Uint64() >> s.rng.IntN(64)
			q.counters[i] = old + wr.CompareAdd
		} else {
			wr.CompareAdd, wr.Swap = old, s.rng.Uint64()
			if s.rng.IntN(3) == 0 {
				wr.CompareAdd ^= 1 << s.rng.IntN(64) // fails: no swap
			}
			if wr.CompareAdd == old {
				q.counters[i] = wr.Swap
			}
		}
		w.slotOff = slotIdx * q.slot
		simFill(q.dst[w.slotOff:w.slotOff+q.slot], simCanary)
		if s.rng.IntN(4) == 0 {
			w.sgl = []SGE{{Addr: q.dstMR.Addr + uint64(w.slotOff), Length: 3, LKey: q.dstMR.LKey},
				{Addr: q.dstMR.Addr + uint64(w.slotOff) + 8, Length: 5, LKey: q.dstMR.LKey}}
		} else {
			w.sgl = []SGE{{Addr: q.dstMR.Addr + uint64(w.slotOff), Length: 8, LKey: q.dstMR.LKey}}
		}
		wr.SGL = w.sgl
	}
	// Signal at random, at least every sqDepth/2 WRs, on the WR that
	// fills the SQ as the model sees it, and on the last WR.
	sigEvery := max(2, q.sqDepth/2)
	w.signaled = q.sigAll || s.rng.IntN(2) == 0 || q.sinceSig >= sigEvery-1 ||
		int(q.posted-q.done) >= q.sqDepth || q.budget == 0
	if w.signaled && (!q.sigAll || s.rng.IntN(2) == 0) {
		wr.Flags |= SendSignaled
	}
	if w.signaled {
		q.sinceSig = 0
		s.res.signaled++
	} else {
		q.sinceSig++
	}
}

// readOverlaps reports whether [off, off+n) of the peer's write area is the
// source of a READ this QP posted and has not seen complete.
func (q *simQP) readOverlaps(off, n int) bool {
	for x := q.done; x < q.posted-1; x++ {
		w := &q.wrs[x%uint64(q.sqDepth)]
		if w.op == WRRead && off < w.rOff+w.rLen && w.rOff < off+n {
			return true
		}
	}
	return false
}

// pollAll drains every CQ and checks each completion against the model.
// Error completions are reported first, the root cause (any status but
// WR_FLUSH_ERR) ahead of the flushes it caused.
func (s *sim) pollAll() {
	var errs []string
	for pass := range 2 {
		for _, q := range s.qps {
			for _, cq := range []*sliceCQ{q.scq, q.rcq} {
				for _, c := range cq.c {
					if c.Status != StatusSuccess && (pass == 1) == (c.Status == StatusWRFlushErr) {
						errs = append(errs, fmt.Sprintf("qp%d (%s CQ): %+v", q.idx, map[bool]string{true: "recv", false: "send"}[cq == q.rcq], c))
					}
				}
			}
		}
	}
	if len(errs) > 0 {
		s.fatalf("%d error completions:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	for _, q := range s.qps {
		for _, c := range q.scq.take() {
			s.traceCompletion(q, false, &c)
			q.sendCompletion(s, &c)
		}
		for _, c := range q.rcq.take() {
			s.traceCompletion(q, true, &c)
			q.recvCompletion(s, &c)
		}
	}
}

var simWCOp = map[WROp]WCOp{WRSend: WCSend, WRSendImm: WCSend, WRSendWithInv: WCSend, WRWrite: WCWrite,
	WRWriteImm: WCWrite, WRRead: WCRead, WRCompareSwap: WCCompareSwap, WRFetchAdd: WCFetchAdd}

// sendCompletion checks a send completion: it must be the next signaled WR,
// and it completes every unsignaled WR before it.
func (q *simQP) sendCompletion(s *sim, c *Completion) {
	if c.Status != StatusSuccess {
		s.fatalf("qp%d: send completion %+v: status %d", q.idx, *c, c.Status)
	}
	seq := c.WRID
	if seq < q.done || seq >= q.posted {
		s.fatalf("qp%d: send completion for WR %d, outstanding are [%d, %d): duplicate or bogus", q.idx, seq, q.done, q.posted)
	}
	for x := q.done; x <= seq; x++ {
		w := &q.wrs[x%uint64(q.sqDepth)]
		if x < seq && w.signaled {
			s.fatalf("qp%d: completion for WR %d came before signaled WR %d's", q.idx, seq, x)
		}
		if x == seq {
			if !w.signaled {
				s.fatalf("qp%d: completion for unsignaled WR %d", q.idx, seq)
			}
			if c.Opcode != simWCOp[w.op] || c.QPN != q.qp.QPN() || int(c.ByteLen) != w.length {
				s.fatalf("qp%d: WR %d (op %d, %d bytes): completion %+v", q.idx, seq, w.op, w.length, *c)
			}
		}
		if w.op == WRRead || w.op == WRCompareSwap || w.op == WRFetchAdd {
			if err := simCheckScatter(q.dst, q.dstMR.Addr, w.slotOff, q.slot, w.sgl, w.want); err != "" {
				s.fatalf("qp%d: WR %d (op %d, %d bytes): result: %s", q.idx, x, w.op, w.length, err)
			}
		}
		*w = simWR{}
	}
	q.done = seq + 1
}

// recvCompletion checks a receive completion against the next message the
// peer sent that takes a receive.
func (q *simQP) recvCompletion(s *sim, c *Completion) {
	if c.Status != StatusSuccess {
		s.fatalf("qp%d: receive completion %+v: status %d", q.idx, *c, c.Status)
	}
	rq := q.rq
	r, ok := rq.out[c.WRID]
	// A QP takes receives in the order they were posted: from its own
	// queue, the next one; from an SRQ, a later one than before (other
	// QPs take those in between).
	inOrder := c.WRID == rq.idBase+q.recvDone
	if rq.shared {
		inOrder = q.recvDone == 0 || c.WRID > q.lastRecvID
	}
	if len(q.expect) == 0 || !ok || !inOrder {
		s.fatalf("qp%d: receive completion %+v from %s: posted %v, in order %v (%d before, last WR %d), %d messages due",
			q.idx, *c, rq.name, ok, inOrder, q.recvDone, q.lastRecvID, len(q.expect))
	}
	delete(rq.out, c.WRID)
	e := q.expect[0]
	q.expect[0] = simExpect{}
	q.expect = q.expect[1:]
	q.recvDone++
	q.lastRecvID = c.WRID
	var wantOp WCOp
	var wantFlags uint32
	wantImm := e.imm
	switch e.op {
	case WRSend:
		wantOp = WCRecv
	case WRSendImm:
		wantOp, wantFlags = WCRecv, WCFlagWithImm
	case WRSendWithInv:
		wantOp, wantFlags, wantImm = WCRecv, WCFlagWithInv, e.inv.RKey
	case WRWriteImm:
		wantOp, wantFlags = WCRecvRDMAWithImm, WCFlagWithImm
	}
	if c.Opcode != wantOp || c.Flags != wantFlags || int(c.ByteLen) != e.length || c.QPN != q.qp.QPN() ||
		c.SrcQP != q.peer.qp.QPN() || c.Solicited != e.solicited || (wantFlags != 0 && c.Imm != wantImm) {
		s.fatalf("qp%d: receive completion %+v: want op %d flags %d len %d imm 0x%x solicited %v", q.idx, *c, wantOp, wantFlags, e.length, wantImm, e.solicited)
	}
	if err := simCheckScatter(rq.buf, rq.mr.Addr, r.slotOff, rq.slot, r.sgl, e.data); err != "" {
		s.fatalf("qp%d: receive %d (op %d, %d bytes): %s", q.idx, c.WRID, e.op, e.length, err)
	}
	if e.inv != nil {
		if _, err := q.host.h.Mem().Remote(simPD, q.qp.QPN(), e.inv.RKey, e.inv.Addr, 8, AccessRemoteWrite); err == nil {
			s.fatalf("qp%d: R_Key 0x%x still valid after SEND with invalidate", q.idx, e.inv.RKey)
		}
		q.host.h.Mem().Deregister(e.inv)
	}
	rq.free = append(rq.free, r.slotOff)
	if !rq.starving {
		rq.postOne(s)
	}
}

// checkScatter checks a slot of region (which starts at address base): the
// bytes the scatter list sgl covers hold want, in order, and every other
// byte of the slot is still canary.
func simCheckScatter(region []byte, base uint64, slotOff, slotSize int, sgl []SGE, want []byte) string {
	cur, rest := slotOff, want
	for _, g := range sgl {
		off := int(g.Addr - base)
		if !simAllCanary(region[cur:off]) {
			return "scribbled between SGEs"
		}
		take := min(len(rest), int(g.Length))
		if !bytes.Equal(region[off:off+take], rest[:take]) {
			return "data differs: " + simFirstDiff(region[off:off+take], rest[:take])
		}
		if !simAllCanary(region[off+take : off+int(g.Length)]) {
			return "written past the data"
		}
		rest = rest[take:]
		cur = off + int(g.Length)
	}
	if len(rest) != 0 {
		return "model error: data longer than the scatter list"
	}
	if !simAllCanary(region[cur : slotOff+slotSize]) {
		return "written past the scatter list"
	}
	return ""
}

func simAllCanary(b []byte) bool {
	for _, v := range b {
		if v != simCanary {
			return false
		}
	}
	return true
}

func simFirstDiff(got, want []byte) string {
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("first at byte %d of %d: 0x%02x, want 0x%02x", i, len(want), got[i], want[i])
		}
	}
	return "none"
}

// finalCheck runs after the drain: no QP in ERR, all queues empty, every WR
// and message accounted for, memory equal to the model.
func (s *sim) finalCheck() {
	s.pollAll()
	if st := s.net.Stats(); st.InFlight != 0 {
		s.fatalf("%d datagrams still in flight", st.InFlight)
	}
	for _, q := range s.qps {
		qp := q.qp
		if st := qp.State(); st != StateRTS {
			s.fatalf("qp%d ended in state %d", q.idx, st)
		}
		if q.budget != 0 || q.done != q.posted {
			s.fatalf("qp%d: %d of %d send WRs completed, %d not posted", q.idx, q.done, q.posted, q.budget)
		}
		if len(q.expect) != 0 {
			s.fatalf("qp%d: %d messages never received", q.idx, len(q.expect))
		}
		qp.mu.Lock()
		sqEmpty, ownRQ := qp.sq.empty(), qp.rq.len()
		r := qp.req
		cur, kind := qp.rsp.cur, qp.rsp.kind
		qp.mu.Unlock()
		if !sqEmpty || r.psn != r.compPSN || r.psn != r.highPSN || r.rdInFlight != 0 || !r.retransAt.IsZero() || !r.rnrAt.IsZero() {
			s.fatalf("qp%d: requester not idle", q.idx)
		}
		if cur != nil || kind != msgNone || (q.rq.shared && ownRQ != 0) {
			s.fatalf("qp%d: responder: message in progress %v/%d, %d receives on its own queue", q.idx, cur != nil, kind, ownRQ)
		}
		if !bytes.Equal(q.peer.warea, q.shadow) {
			s.fatalf("qp%d: peer's write area differs from the model: %s", q.idx, simFirstDiff(q.peer.warea, q.shadow))
		}
		for j, want := range q.counters {
			if got := binary.NativeEndian.Uint64(q.peer.aarea[8*j:]); got != want {
				s.fatalf("qp%d: counter %d is 0x%x, model 0x%x", q.idx, j, got, want)
			}
		}
	}
	// Faults only drop, delay, duplicate and corrupt: a correct engine
	// never sees a response it did not ask for, never answers a request
	// with a fatal NAK, and never meets a packet its QP state or peer
	// check refuses (a corrupted one fails its ICRC first).
	for _, rq := range s.rqs {
		if n := rq.queued(); n != len(rq.out) {
			s.fatalf("%s: %d receives queued, model %d", rq.name, n, len(rq.out))
		}
	}
	for _, h := range s.hosts {
		st := h.h.Stats()
		for _, c := range []struct {
			name string
			n    uint64
		}{
			{"CQ overflows", st.CQOverflow.Load()}, {"send errors", st.SendErrors.Load()},
			{"bad responses", st.DropBadResponse.Load()}, {"request errors", st.RequestErrors.Load()},
			{"wrong-source drops", st.DropWrongSource.Load()}, {"state drops", st.DropState.Load()},
			{"not-for-us drops", st.DropNotForUs.Load()},
		} {
			if c.n != 0 {
				s.fatalf("host %d: %d %s", h.idx, c.n, c.name)
			}
		}
	}
	for _, q := range s.qps {
		if !bytes.Equal(q.src, q.srcCopy) {
			s.fatalf("qp%d: gather source memory was written: %s", q.idx, simFirstDiff(q.src, q.srcCopy))
		}
	}
}
