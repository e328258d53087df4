package soft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/provider"
	"github.com/rdma-go/rdma-go/provider/soft/internal/softdev"
)

var pdHandles atomic.Uint32

// pd is a protection domain: a handle the engine checks keys against.
type pd struct {
	ctx    *Context
	handle uint32
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (provider.PD, error) {
	return &pd{ctx: c, handle: pdHandles.Add(1)}, nil
}

func (p *pd) Dealloc() error { return nil }

// mr is a memory region or a memory window of the engine.
type mr struct {
	ctx *Context
	e   *engine.MR
}

func (p *pd) RegMR(buf []byte, access provider.AccessFlags) (provider.MR, error) {
	if uint64(len(buf)) > maxMsgSize*2 {
		return nil, provider.Errorf(provider.ErrInvalidArgument, "MR of %d bytes too large", len(buf))
	}
	return &mr{ctx: p.ctx, e: p.ctx.host().Mem().Register(p.handle, buf, uint32(access&0x1F))}, nil
}

func (m *mr) Addr() uint64 { return m.e.Addr }
func (m *mr) LKey() uint32 { return m.e.LKey }
func (m *mr) RKey() uint32 { return m.e.RKey }

func (m *mr) Dereg() error {
	if n := m.e.Windows(); n > 0 {
		return provider.Errorf(provider.ErrBusy, "MR has %d memory window(s) bound", n)
	}
	m.ctx.host().Mem().Deregister(m.e)
	return nil
}

// mw is a memory window.
type mw struct{ mr }

func (p *pd) AllocMW(t provider.MWType) (provider.MW, error) {
	return &mw{mr{ctx: p.ctx, e: p.ctx.host().Mem().AllocMW(p.handle, uint8(t))}}, nil
}

func (w *mw) RKey() uint32 { return w.ctx.host().Mem().CurrentRKey(w.e) }

func (w *mw) Dealloc() error {
	w.ctx.host().Mem().Deregister(w.e)
	return nil
}

// ah is an address handle: the engine's address vector.
type ah struct{ av engine.AV }

func (p *pd) CreateAH(attr *provider.AHAttr) (provider.AH, error) {
	av, err := p.ctx.addressVector(attr)
	if err != nil {
		return nil, err
	}
	return &ah{av: av}, nil
}

func (*ah) Destroy() error { return nil }

// cq is a completion queue: a ring the engine pushes completions into
// (engine.CompletionQueue) and Poll drains.
type cq struct {
	ctx   *Context
	ch    *compChannel
	owner any

	mu sync.Mutex
	// ring starts small and doubles up to cqe as completions pile up:
	// a deep CQ that stays nearly empty (most) costs little memory.
	ring      []engine.Completion
	cqe       int
	head, n   int
	armed     bool
	solOnly   bool
	overflow  bool
	events    uint32 // events delivered
	acked     uint32
	destroyed bool
	// nonEmpty has a token when a completion arrived since the last Wait.
	nonEmpty chan struct{}
	// dead is closed by Destroy, waking every Wait.
	dead chan struct{}
}

// CreateCQ creates a completion queue.
func (c *Context) CreateCQ(cqe int, ch provider.CompChannel, owner any) (provider.CQ, error) {
	q := &cq{ctx: c, owner: owner, cqe: cqe,
		nonEmpty: make(chan struct{}, 1), dead: make(chan struct{})}
	if ch != nil {
		sc, ok := ch.(*compChannel)
		if !ok || sc.ctx != c {
			return nil, provider.Errorf(provider.ErrInvalidArgument, "completion channel belongs to another context")
		}
		q.ch = sc
	}
	return q, nil
}

func (q *cq) Cap() int {
	q.mu.Lock() // Resize changes it
	defer q.mu.Unlock()
	return q.cqe
}

// cqFirstSlots is the size of a CQ's ring at its first completion (a CQ
// that has had none has no ring); the ring doubles from there, up to the
// CQ's size, as completions queue up.
const cqFirstSlots = 8

// regrow moves the queued completions into a new ring of size slots.
func (q *cq) regrow(size int) {
	ring := make([]engine.Completion, size)
	for i := 0; i < q.n; i++ {
		ring[i] = q.ring[(q.head+i)%len(q.ring)]
	}
	q.ring, q.head = ring, 0
}

// Push implements engine.CompletionQueue. It reports false when the CQ is
// full; the completion is then lost and the CQ marked overflowed.
func (q *cq) Push(c engine.Completion) bool {
	q.mu.Lock()
	if q.n == q.cqe || q.destroyed {
		q.overflow = true
		q.mu.Unlock()
		return false
	}
	if q.n == len(q.ring) {
		q.regrow(min(max(2*len(q.ring), cqFirstSlots), q.cqe))
	}
	q.ring[(q.head+q.n)%len(q.ring)] = c
	q.n++
	if q.n == 1 {
		select {
		case q.nonEmpty <- struct{}{}:
		default:
		}
	}
	notify := q.armed && (!q.solOnly || c.Solicited || c.Status != engine.StatusSuccess)
	if notify {
		q.armed = false
		q.events++
	}
	q.mu.Unlock()
	if notify && q.ch != nil {
		q.ch.post(q)
	}
	return true
}

// Poll drains completions. When the CQ is empty it first lets the device
// receive and process what its socket holds, on the calling goroutine, as a
// NIC driver's poll routine would: a busy poller then sees a completion
// without waiting for the device's receive goroutine to be woken.
func (q *cq) Poll(wc []provider.WC) (int, error) {
	q.ctx.run.FlushPosts()
	n, err := q.poll(wc)
	switch {
	case n > 0:
		q.ctx.run.Polled()
	case err == nil && len(wc) > 0 && q.ctx.run.Poll():
		n, err = q.poll(wc)
	}
	return n, err
}

func (q *cq) poll(wc []provider.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return 0, provider.Errorf(provider.ErrClosed, "CQ destroyed")
	}
	k := 0
	for k < len(wc) && q.n > 0 {
		fromCompletion(&wc[k], &q.ring[q.head])
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		k++
	}
	return k, nil
}

func fromCompletion(wc *provider.WC, c *engine.Completion) {
	*wc = provider.WC{
		WRID: c.WRID, Status: provider.WCStatus(c.Status), Opcode: provider.WCOpcode(c.Opcode), VendorErr: c.VendorErr,
		ByteLen: c.ByteLen, ImmData: c.Imm, QPNum: c.QPN, SrcQP: c.SrcQP, Flags: provider.WCFlags(c.Flags),
	}
}

func (q *cq) Resize(cqe int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return provider.Errorf(provider.ErrClosed, "CQ destroyed")
	}
	if cqe < 1 || cqe > maxCQE || cqe < q.n {
		return provider.Errorf(provider.ErrInvalidArgument, "CQ size %d: must be %d..%d (completions queued: %d)", cqe, max(q.n, 1), maxCQE, q.n)
	}
	q.cqe = cqe
	if len(q.ring) > cqe {
		q.regrow(max(q.n, min(cqe, cqFirstSlots)))
	}
	return nil
}

func (q *cq) Wait(ctx context.Context) error {
	for {
		q.mu.Lock()
		n, destroyed := q.n, q.destroyed
		q.mu.Unlock()
		if destroyed {
			return provider.Errorf(provider.ErrClosed, "CQ destroyed")
		}
		if n > 0 {
			return nil
		}
		q.ctx.run.Blocking() // send the ACKs Poll left pending, wake the receive goroutine
		select {
		case <-q.nonEmpty:
		case <-q.dead:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (q *cq) Overflowed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.overflow
}

func (q *cq) ReqNotify(solicitedOnly bool) error {
	if q.ch == nil {
		return provider.Errorf(provider.ErrInvalidArgument, "CQ has no completion channel")
	}
	q.mu.Lock()
	if q.destroyed {
		q.mu.Unlock()
		return provider.Errorf(provider.ErrClosed, "CQ destroyed")
	}
	// As on Linux rxe and RDMA NICs, only a completion added after
	// arming raises the event: completions already queued do not, so
	// code that forgets to poll once more after arming stalls here as
	// it would on a real device, not only in production.
	q.armed, q.solOnly = true, solicitedOnly
	q.mu.Unlock()
	return nil
}

func (q *cq) AckEvents(n int) {
	q.mu.Lock()
	q.acked += uint32(n)
	q.mu.Unlock()
}

func (q *cq) Destroy() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return provider.Errorf(provider.ErrClosed, "CQ already destroyed")
	}
	q.destroyed = true
	close(q.dead)
	return nil
}

// compChannel is a completion event channel: a queue of the CQs that
// fired, in order. Each CQ fires at most once per ReqNotify, so the queue
// is bounded by the armed CQs; it never drops an event, and keeps its
// array from one event to the next (no garbage per event).
type compChannel struct {
	ctx    *Context
	mu     sync.Mutex
	events []*cq // events[head:] are queued
	head   int
	ready  chan struct{} // a token when events may be queued
	done   chan struct{}
	once   sync.Once
}

// CreateCompChannel creates a completion channel.
func (c *Context) CreateCompChannel() (provider.CompChannel, error) {
	return &compChannel{ctx: c, ready: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

func (ch *compChannel) post(q *cq) {
	ch.mu.Lock()
	if len(ch.events) == cap(ch.events) && ch.head > 0 {
		// Full, with taken events at the front: move the queue there.
		n := copy(ch.events, ch.events[ch.head:])
		clear(ch.events[n:])
		ch.events, ch.head = ch.events[:n], 0
	}
	ch.events = append(ch.events, q)
	ch.mu.Unlock()
	select {
	case ch.ready <- struct{}{}:
	default: // a token is there already
	}
}

// next takes the oldest event, if any.
func (ch *compChannel) next() (*cq, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.head == len(ch.events) {
		return nil, false
	}
	q := ch.events[ch.head]
	ch.events[ch.head] = nil
	if ch.head++; ch.head == len(ch.events) {
		ch.events, ch.head = ch.events[:0], 0
	}
	return q, true
}

func (ch *compChannel) GetEvent(ctx context.Context) (any, error) {
	for blocked := false; ; blocked = true {
		if q, ok := ch.next(); ok {
			return q.owner, nil
		}
		if !blocked {
			ch.ctx.run.Blocking() // send the ACKs CQ.Poll left pending, wake the receive goroutine
		}
		select {
		case <-ch.ready:
		case <-ch.done:
			return nil, provider.Errorf(provider.ErrClosed, "completion channel destroyed")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (ch *compChannel) Destroy() error {
	ch.once.Do(func() { close(ch.done) })
	return nil
}

// srq is a shared receive queue.
type srq struct {
	ctx   *Context
	e     *engine.SRQ
	sge   uint32
	owner any
}

func (p *pd) CreateSRQ(attr provider.SRQAttr, owner any) (provider.SRQ, error) {
	sge := max(attr.MaxSGE, 1)
	e, err := p.ctx.host().CreateSRQ(p.handle, int(attr.MaxWR), int(sge))
	if err != nil {
		return nil, provider.Errorf(provider.ErrNoMemory, "create SRQ: %v", err)
	}
	s := &srq{ctx: p.ctx, e: e, sge: sge, owner: owner}
	e.Owner = s
	if attr.SRQLimit > 0 {
		e.SetLimit(int(attr.SRQLimit))
	}
	return s, nil
}

func (s *srq) PostRecv(wrs []provider.RecvWR) (int, error) {
	for i := range wrs {
		if err := s.e.PostRecv(&engine.RecvWR{ID: wrs[i].ID, SGL: engineSGL(wrs[i].SGL)}); err != nil {
			return i, postErr(err)
		}
	}
	return len(wrs), nil
}

func (s *srq) Modify(attr provider.SRQAttr, mask provider.SRQAttrMask) error {
	if mask&provider.SRQMaxWR != 0 {
		if attr.MaxWR == 0 || attr.MaxWR > maxSRQWR || int(attr.MaxWR) < s.e.Cap() {
			return provider.Errorf(provider.ErrInvalidArgument, "SRQ max_wr %d: must be %d..%d", attr.MaxWR, s.e.Cap(), maxSRQWR)
		}
		if err := s.e.Resize(int(attr.MaxWR)); err != nil {
			return provider.Errorf(provider.ErrInvalidArgument, "%v", err)
		}
	}
	if mask&provider.SRQLimit != 0 {
		if err := s.e.SetLimit(int(attr.SRQLimit)); err != nil {
			return provider.Errorf(provider.ErrInvalidArgument, "SRQ limit %d above max_wr %d", attr.SRQLimit, s.e.Cap())
		}
	}
	return nil
}

func (s *srq) Query() (provider.SRQAttr, error) {
	return provider.SRQAttr{MaxWR: uint32(s.e.Cap()), MaxSGE: s.sge, SRQLimit: uint32(s.e.Limit())}, nil
}

func (s *srq) Len() int { return s.e.Len() }

func (s *srq) Destroy() error { return nil }

// qp is a QP of the soft device: an engine QP, with the timer that drives
// its deadlines. Both live inside it, so that a post to a QP not used for a
// while (one of many connections) fetches one object from memory, not
// three one after the other.
type qp struct {
	ctx   *Context
	eqp   *engine.QP // &e
	typ   provider.QPType
	timer softdev.QPTimer
	e     engine.QP // what a post reads first (see engine.QP)
	owner any
}

// QPStorage holds a soft QP in memory its caller allocates (see
// CreateQPIn): the verbs layer keeps it in the same object as its own QP,
// so that a post to a QP not used for a while starts with one cache miss,
// not two one after the other (rdma-core's providers embed ibv_qp in their
// QP for the same reason).
type QPStorage struct{ q qp }

// QPStoragePostBytes is how far into a QPStorage a post reads: what
// precedes the engine QP (the context, the timer) and the engine QP's
// first engine.PostBytes.
const QPStoragePostBytes = unsafe.Offsetof(QPStorage{}.q.e) + engine.PostBytes

// CreateQPIn is CreateQP with the QP built in s, which must be zero and
// must not be moved or reused while the QP exists.
func (p *pd) CreateQPIn(s *QPStorage, init *provider.QPInitAttr, owner any) (provider.QP, error) {
	return p.createQPIn(&s.q, init, owner)
}

func (p *pd) CreateQP(init *provider.QPInitAttr, owner any) (provider.QP, error) {
	return p.createQPIn(new(qp), init, owner)
}

// createQPIn builds a QP in the zero q.
func (p *pd) createQPIn(q *qp, init *provider.QPInitAttr, owner any) (provider.QP, error) {
	c := p.ctx
	scq, ok1 := init.SendCQ.(*cq)
	rcq, ok2 := init.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq.ctx != c || rcq.ctx != c {
		return nil, provider.Errorf(provider.ErrInvalidArgument, "CQ belongs to another context")
	}
	var esrq *engine.SRQ
	if init.SRQ != nil {
		s, ok := init.SRQ.(*srq)
		if !ok || s.ctx != c {
			return nil, provider.Errorf(provider.ErrInvalidArgument, "SRQ belongs to another context")
		}
		esrq = s.e
	}
	q.ctx, q.typ, q.owner = c, init.Type, owner
	q.eqp = &q.e
	c.run.InitQPTimer(&q.timer)
	cp := &init.Cap
	err := c.host().CreateQPIn(q.eqp, engine.QPConfig{
		Type: engine.QPType(init.Type), PD: p.handle, SendCQ: scq, RecvCQ: rcq,
		MaxSendWR: int(cp.MaxSendWR), MaxRecvWR: int(cp.MaxRecvWR),
		MaxSendSGE: int(cp.MaxSendSGE), MaxRecvSGE: int(cp.MaxRecvSGE), MaxInline: int(cp.MaxInlineData),
		SigAll: init.SigAll, OnDeadline: &q.timer, SRQ: esrq, Owner: q,
	})
	if err != nil {
		return nil, provider.Errorf(provider.ErrNoMemory, "create QP: %v", err)
	}
	q.timer.Bind(q.eqp)
	return q, nil
}

func (q *qp) QPN() uint32                 { return q.eqp.QPN() }
func (q *qp) State() provider.QPState     { return provider.QPState(q.eqp.State()) }
func (q *qp) Counters() provider.Counters { return provider.Counters(q.eqp.Counters()) }

func (q *qp) Modify(attr *provider.QPAttr, mask provider.QPAttrMask) error {
	var (
		ea engine.Attr
		em uint32
	)
	if mask&provider.QPAttrAV != 0 {
		fail := func(format string, args ...any) error {
			cur := q.State()
			next := cur
			if mask&provider.QPAttrState != 0 {
				next = attr.State
			}
			return provider.Errorf(provider.ErrInvalidArgument, "modify %s QP %s→%s: AV: %s",
				q.typ, cur, next, fmt.Sprintf(format, args...))
		}
		if attr.AH.PortNum > 1 {
			return fail("port %d is not the QP's port 1", attr.AH.PortNum)
		}
		src, why := q.ctx.sourceGIDAddr(attr.AH.GRH.SGIDIndex)
		if why != "" {
			return fail("%s", why)
		}
		dst := attr.AH.GRH.DGID.IP()
		if dst.Is4() != src.Is4() {
			return fail("destination GID %s and source %s are of different IP families", attr.AH.GRH.DGID, provider.GIDFromIP(src))
		}
		ea.Remote, ea.FlowLabel = dst, attr.AH.GRH.FlowLabel
		em |= engine.AttrAV
	}
	if mask&provider.QPAttrPathMTU != 0 {
		ea.PathMTU = attr.PathMTU.Bytes()
		em |= engine.AttrPathMTU
	}
	set := func(bit provider.QPAttrMask, ebit uint32) bool {
		if mask&bit != 0 {
			em |= ebit
			return true
		}
		return false
	}
	if set(provider.QPAttrAccessFlags, engine.AttrAccessFlags) {
		ea.AccessFlags = uint32(attr.AccessFlags)
	}
	if set(provider.QPAttrQKey, engine.AttrQKey) {
		ea.QKey = attr.QKey
	}
	if set(provider.QPAttrTimeout, engine.AttrTimeout) {
		ea.Timeout = attr.Timeout
	}
	if set(provider.QPAttrRetryCnt, engine.AttrRetryCnt) {
		ea.RetryCnt = attr.RetryCnt
	}
	if set(provider.QPAttrRNRRetry, engine.AttrRNRRetry) {
		ea.RNRRetry = attr.RNRRetry
	}
	if set(provider.QPAttrRQPSN, engine.AttrRQPSN) {
		ea.RQPSN = attr.RQPSN
	}
	if set(provider.QPAttrSQPSN, engine.AttrSQPSN) {
		ea.SQPSN = attr.SQPSN
	}
	if set(provider.QPAttrMaxQPRDAtomic, engine.AttrMaxQPRDAtomic) {
		ea.MaxRDAtomic = attr.MaxRDAtomic
	}
	if set(provider.QPAttrMaxDestRDAtomic, engine.AttrMaxDestRDAtomic) {
		ea.MaxDestRDAtomic = attr.MaxDestRDAtomic
	}
	if set(provider.QPAttrMinRNRTimer, engine.AttrMinRNRTimer) {
		ea.MinRNRTimer = attr.MinRNRTimer
	}
	if set(provider.QPAttrDestQPN, engine.AttrDestQPN) {
		ea.DestQPN = attr.DestQPN
	}
	if mask&provider.QPAttrState != 0 {
		ea.State = engine.QPState(attr.State)
		em |= engine.AttrState
	}
	q.eqp.Modify(softdev.Now(), &ea, em)
	return nil
}

func (q *qp) Query() (provider.QPAttr, error) {
	live := q.eqp.Attr()
	return provider.QPAttr{State: provider.QPState(live.State), RQPSN: live.RQPSN, SQPSN: live.SQPSN}, nil
}

// postChunk is the most work requests PostSend hands the engine at once.
const postChunk = 32

// PostSend converts wrs to the engine's work requests in a stack buffer
// and posts them postChunk at a time: nothing here keeps a pointer to the
// caller's SGLs, so a PostSend with an SGL literal does not allocate. A
// single work request (a ping-pong's, most posts) takes a buffer of one,
// not the chunk's (about 6 KiB to clear on every call).
func (q *qp) PostSend(wrs []provider.SendWR) (int, error) {
	if len(wrs) == 1 {
		var buf [1]engine.SendWR
		var av engine.AV
		var bind engine.Bind
		useAV, useBind := toEngineSendWR(&wrs[0], &buf[0], &av, &bind)
		if useAV {
			buf[0].AV = &av
		}
		if useBind {
			buf[0].Bind = &bind
		}
		return q.post(buf[:])
	}
	var buf [postChunk]engine.SendWR
	var avs [postChunk]engine.AV // UD address vectors, copied too
	var binds [postChunk]engine.Bind
	done := 0
	for done < len(wrs) {
		chunk := wrs[done:min(done+postChunk, len(wrs))]
		for n := range chunk {
			useAV, useBind := toEngineSendWR(&chunk[n], &buf[n], &avs[n], &binds[n])
			if useAV {
				buf[n].AV = &avs[n]
			}
			if useBind {
				buf[n].Bind = &binds[n]
			}
		}
		n, err := q.post(buf[:len(chunk)])
		if err != nil {
			return done + n, err
		}
		done += len(chunk)
	}
	return done, nil
}

// toEngineSendWR converts wr into w; a UD work request's address vector
// goes to av and a bind's arguments to bind, and useAV and useBind say
// whether w must point to them (the caller sets the pointers, so that
// escape analysis keeps its buffers on the stack; the engine copies both
// at post time).
func toEngineSendWR(wr *provider.SendWR, w *engine.SendWR, av *engine.AV, bind *engine.Bind) (useAV, useBind bool) {
	imm := wr.ImmData
	if wr.Opcode == provider.WRSendWithInv || wr.Opcode == provider.WRLocalInv {
		imm = wr.InvalidateRKey
	}
	*w = engine.SendWR{ID: wr.ID, Op: engine.WROp(wr.Opcode), Flags: uint32(wr.Flags),
		SGL: engineSGL(wr.SGL), Imm: imm, RemoteAddr: wr.RemoteAddr, RKey: wr.RKey,
		CompareAdd: wr.CompareAdd, Swap: wr.Swap}
	if wr.AH != nil {
		*av = wr.AH.ProviderAH().(*ah).av
		w.RemoteQPN, w.RemoteQKey = wr.RemoteQPN, wr.RemoteQKey
		useAV = true
	}
	if wr.Opcode == provider.WRBindMW {
		*bind = engine.Bind{MW: wr.BindMW.ProviderMW().(*mw).e, RKey: wr.BindRKey, Addr: wr.BindInfo.Addr,
			Length: wr.BindInfo.Length, Access: uint32(wr.BindInfo.Access)}
		if wr.BindInfo.MR != nil {
			bind.MR = wr.BindInfo.MR.ProviderMR().(*mr).e
		}
		useBind = true
	}
	return useAV, useBind
}

// post hands converted work requests to the engine: held for the device's
// next flush while an application polls it (softdev.Device.DeferPosts),
// sent at once otherwise. It clears s (its SGLs point into the caller's).
func (q *qp) post(s []engine.SendWR) (int, error) {
	var n int
	var err error
	if now := softdev.Now(); q.ctx.run.DeferPosts(now) {
		var deferred bool
		n, deferred, err = q.eqp.PostSendDeferred(now, s)
		if deferred {
			q.ctx.run.PostsDeferred()
		}
	} else {
		n, err = q.eqp.PostSendList(now, s)
	}
	clear(s)
	if err != nil {
		return n, postErr(err)
	}
	return n, nil
}

func (q *qp) PostRecv(wrs []provider.RecvWR) (int, error) {
	for i := range wrs {
		if err := q.eqp.PostRecv(&engine.RecvWR{ID: wrs[i].ID, SGL: engineSGL(wrs[i].SGL)}); err != nil {
			return i, postErr(err)
		}
	}
	return len(wrs), nil
}

func (q *qp) Destroy() error {
	q.timer.Stop()
	q.ctx.host().DestroyQP(q.eqp)
	return nil
}

func postErr(err error) error {
	switch {
	case errors.Is(err, engine.ErrQueueFull):
		return provider.Errorf(provider.ErrNoMemory, "%v", err)
	default:
		return provider.Errorf(provider.ErrInvalidArgument, "%v", err)
	}
}

func engineSGL(s []provider.SGE) []engine.SGE {
	// provider.SGE and engine.SGE have the same fields in the same order.
	return unsafe.Slice((*engine.SGE)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}
