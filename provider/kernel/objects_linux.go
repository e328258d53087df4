//go:build linux

package kernel

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rdma-go/rdma-go/provider"
)

// scratch is C-layout memory outside the Go heap (from Alloc) that the
// hot paths build work requests and receive completions in, so that C
// never sees a Go pointer and nothing is allocated per call.
type scratch struct {
	mem []byte
}

func newScratch(n int) (scratch, error) {
	b, err := Alloc(n)
	if err != nil {
		return scratch{}, provider.Errorf(provider.ErrNoMemory, "%v", err)
	}
	return scratch{mem: b}, nil
}

func (s *scratch) addr(off int) uintptr { return uintptr(unsafe.Pointer(&s.mem[off])) }

func (s *scratch) free() {
	if s.mem != nil {
		Free(s.mem)
		s.mem = nil
	}
}

// pd is a protection domain (struct ibv_pd).
type pd struct {
	c  *Context
	pd uintptr
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (provider.PD, error) {
	p, errno := c.lib.callErrno(c.lib.allocPD, c.ctx)
	if p == 0 {
		return nil, provider.Errorf(errnoBase(errno), "ibv_alloc_pd: %v", errno)
	}
	return &pd{c: c, pd: p}, nil
}

func (p *pd) Dealloc() error { return rcErr(call(p.c.lib.deallocPD, p.pd), "ibv_dealloc_pd") }

// mr is a memory region (struct ibv_mr).
type mr struct {
	p   *pd
	mr  uintptr
	pin runtime.Pinner
}

// RegMR registers buf (ibv_reg_mr). Memory from Alloc is outside the Go
// heap and registers as it is. Go-heap memory is pinned with a
// runtime.Pinner until Dereg: the garbage collector neither frees nor
// reuses it while the device may DMA into it (Go's collector does not move
// heap objects, and the kernel pins the pages themselves).
func (p *pd) RegMR(buf []byte, access provider.AccessFlags) (provider.MR, error) {
	m := &mr{p: p}
	m.pin.Pin(&buf[0]) // a no-op for memory outside the Go heap
	r, errno := p.c.lib.callErrno(p.c.lib.regMR, p.pd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(access))
	if r == 0 {
		m.pin.Unpin()
		return nil, provider.Errorf(errnoBase(errno), "ibv_reg_mr(%d bytes): %v", len(buf), errno)
	}
	m.mr = r
	return m, nil
}

func (m *mr) Addr() uint64 { return uint64(*(*uintptr)(cptr(m.mr + mrAddr))) }
func (m *mr) LKey() uint32 { return *(*uint32)(cptr(m.mr + mrLKey)) }
func (m *mr) RKey() uint32 { return *(*uint32)(cptr(m.mr + mrRKey)) }

func (m *mr) Dereg() error {
	if err := rcErr(call(m.p.c.lib.deregMR, m.mr), "ibv_dereg_mr"); err != nil {
		return err
	}
	m.pin.Unpin()
	return nil
}

// mw is a memory window (struct ibv_mw), through ctx->ops as verbs.h's
// inline ibv_alloc_mw does.
type mw struct {
	p  *pd
	mw uintptr
}

func (p *pd) AllocMW(t provider.MWType) (provider.MW, error) {
	fn := *(*uintptr)(cptr(p.c.ctx + ctxOpsAllocMW))
	if fn == 0 {
		return nil, provider.Errorf(provider.ErrNotSupported, "device has no memory windows")
	}
	w, errno := p.c.lib.callErrno(fn, p.pd, uintptr(t))
	if w == 0 {
		return nil, provider.Errorf(errnoBase(errno), "ibv_alloc_mw: %v", errno)
	}
	return &mw{p: p, mw: w}, nil
}

func (w *mw) RKey() uint32 { return *(*uint32)(cptr(w.mw + mwRKey)) }

func (w *mw) Dealloc() error {
	return rcErr(call(*(*uintptr)(cptr(w.p.c.ctx + ctxOpsDeallocMW)), w.mw), "ibv_dealloc_mw")
}

// ah is an address handle (struct ibv_ah).
type ah struct {
	p  *pd
	ah uintptr
}

func toCAH(a *provider.AHAttr) cAHAttr {
	return cAHAttr{
		GRH: cGlobalRoute{DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, SGIDIndex: a.GRH.SGIDIndex,
			HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass},
		DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate,
		IsGlobal: b2u(a.IsGlobal), PortNum: a.PortNum,
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (p *pd) CreateAH(attr *provider.AHAttr) (provider.AH, error) {
	ca := new(cAHAttr)
	*ca = toCAH(attr)
	if ca.PortNum == 0 {
		ca.PortNum = 1
	}
	r, errno := p.c.lib.callErrno(p.c.lib.createAH, p.pd, uintptr(unsafe.Pointer(ca)))
	if r == 0 {
		return nil, provider.Errorf(errnoBase(errno), "ibv_create_ah: %v", errno)
	}
	return &ah{p: p, ah: r}, nil
}

func (a *ah) Destroy() error { return rcErr(call(a.p.c.lib.destroyAH, a.ah), "ibv_destroy_ah") }

// cqBatch is how many completions one ops.poll_cq call moves.
const cqBatch = 32

// cq is a completion queue (struct ibv_cq).
type cq struct {
	c        *Context
	cq       uintptr
	ch       *compChannel // the application's, or nil
	own      *compChannel // Wait's, when the application gave none
	overflow atomic.Bool

	mu        sync.Mutex
	args      [3]uintptr // poll_cq's arguments: an existing slice passed to SyscallN is not allocated again
	wcs       scratch    // [cqBatch]cWC
	pending   []provider.WC
	destroyed bool
	ring      rxeRing // rxe's completion ring, when the fast path applies
}

// CreateCQ creates a completion queue (ibv_create_cq).
func (c *Context) CreateCQ(cqe int, ch provider.CompChannel, owner any) (provider.CQ, error) {
	q := &cq{c: c}
	var chp uintptr
	if ch != nil {
		kc, ok := ch.(*compChannel)
		if !ok || kc.c != c {
			return nil, provider.Errorf(provider.ErrInvalidArgument, "completion channel belongs to another context")
		}
		q.ch, chp = kc, kc.ch
	} else {
		// A channel of its own lets Wait sleep until the device signals
		// instead of polling.
		oc, err := c.CreateCompChannel()
		if err != nil {
			return nil, err
		}
		q.own = oc.(*compChannel)
		chp = q.own.ch
	}
	var err error
	if q.wcs, err = newScratch(cqBatch * int(unsafe.Sizeof(cWC{}))); err != nil {
		q.destroyOwn()
		return nil, err
	}
	r, errno := c.lib.callErrno(c.lib.createCQ, c.ctx, uintptr(cqe), 0, chp, 0)
	if r == 0 {
		q.wcs.free()
		q.destroyOwn()
		return nil, provider.Errorf(errnoBase(errno), "ibv_create_cq(%d): %v", cqe, errno)
	}
	q.cq = r
	q.pending = make([]provider.WC, 0, 1)
	q.findRXERing()
	c.mu.Lock()
	c.owners[r] = owner
	c.cqs[r] = q
	c.mu.Unlock()
	return q, nil
}

func (q *cq) Cap() int { return int(*(*int32)(cptr(q.cq + cqCQE))) }

func (q *cq) Overflowed() bool { return q.overflow.Load() }

// Poll moves completions through ctx->ops.poll_cq, as verbs.h's inline
// ibv_poll_cq does, into off-heap C structs and converts them.
func (q *cq) Poll(wc []provider.WC) (int, error) {
	q.mu.Lock()
	if r := &q.ring; r.base != 0 && len(q.pending) == 0 {
		// The rxe ring, the path a busy-polling loop takes at every
		// turn: kept short (no defer, no call while the ring is empty,
		// nothing else to look at), since under emulation each call and
		// instruction here delays noticing a completion. A destroyed CQ
		// has no ring.
		n := 0
		if r.producer().Load() != r.consumer().Load() {
			n = q.pollRing(wc)
		}
		q.mu.Unlock()
		return n, nil
	}
	defer q.mu.Unlock()
	if q.destroyed {
		return 0, provider.Errorf(provider.ErrClosed, "CQ destroyed")
	}
	got := 0
	if len(q.pending) > 0 && len(wc) > 0 {
		got = copy(wc, q.pending)
		q.pending = q.pending[:copy(q.pending, q.pending[got:])]
	}
	if q.ring.base != 0 {
		return got + q.pollRing(wc[got:]), nil
	}
	cw := (*[cqBatch]cWC)(unsafe.Pointer(&q.wcs.mem[0]))
	for got < len(wc) {
		k := min(len(wc)-got, cqBatch)
		q.args = [3]uintptr{q.cq, uintptr(k), q.wcs.addr(0)}
		r := int32(callArgs(q.c.pollCQ, q.args[:]))
		if r < 0 {
			return got, provider.Errorf(provider.ErrNoDevice, "ibv_poll_cq: %d", r)
		}
		for i := range int(r) {
			fromCWC(&wc[got+i], &cw[i])
		}
		got += int(r)
		if int(r) < k {
			break
		}
	}
	return got, nil
}

func fromCWC(w *provider.WC, c *cWC) {
	imm := c.ImmData
	if c.WCFlags&uint32(provider.WCFlagWithImm) != 0 {
		imm = imm>>24 | imm>>8&0xff00 | imm<<8&0xff0000 | imm<<24 // __be32
	}
	*w = provider.WC{WRID: c.WRID, Status: provider.WCStatus(c.Status), Opcode: provider.WCOpcode(c.Opcode),
		VendorErr: c.VendorErr, ByteLen: c.ByteLen, ImmData: imm, QPNum: c.QPNum, SrcQP: c.SrcQP,
		Flags: provider.WCFlags(c.WCFlags), PKeyIndex: c.PKeyIndex, SLID: c.SLID, SL: c.SL,
		DLIDPathBits: c.DLIDPathBits}
}

// Wait returns when a completion is queued (keeping it for the next
// Poll). A CQ created without a channel has one of its own: Wait arms the
// CQ, polls once more (a completion that came before arming raises no
// event) and sleeps on the channel's fd in the Go poller. A CQ on the
// application's channel cannot take its events, so Wait polls, backing
// off from 1 µs to 1 ms; event-driven waits there go through the channel.
func (q *cq) Wait(ctx context.Context) error {
	sleep := time.Microsecond
	var t *time.Timer
	for armed := false; ; {
		if got, err := q.pollOne(); got || err != nil {
			return err
		}
		if q.own != nil {
			if !armed {
				if err := rcErr(call(q.c.reqNotifyCQ, q.cq, 0), "ibv_req_notify_cq"); err != nil {
					return err
				}
				armed = true
				continue
			}
			if _, err := q.own.GetEvent(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return provider.Errorf(provider.ErrClosed, "CQ destroyed")
			}
			q.AckEvents(1)
			armed = false
			continue
		}
		if t == nil {
			t = time.NewTimer(sleep)
			defer t.Stop()
		} else {
			t.Reset(sleep)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		sleep = min(2*sleep, time.Millisecond)
	}
}

// pollOne polls one completion into pending, unless one is there.
func (q *cq) pollOne() (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return false, provider.Errorf(provider.ErrClosed, "CQ destroyed")
	}
	if len(q.pending) > 0 {
		return true, nil
	}
	if q.ring.base != 0 {
		var w [1]provider.WC
		if q.pollRing(w[:]) == 0 {
			return false, nil
		}
		q.pending = append(q.pending, w[0])
		return true, nil
	}
	r := int32(call(q.c.pollCQ, q.cq, 1, q.wcs.addr(0)))
	if r < 0 {
		return false, provider.Errorf(provider.ErrNoDevice, "ibv_poll_cq: %d", r)
	}
	if r > 0 {
		var w provider.WC
		fromCWC(&w, (*cWC)(unsafe.Pointer(&q.wcs.mem[0])))
		q.pending = append(q.pending, w)
	}
	return r > 0, nil
}

// destroyOwn destroys the CQ's own channel, if any (a Wait sleeping on it
// returns; q.own stays set, as a Wait may still read it).
func (q *cq) destroyOwn() {
	if q.own != nil {
		q.own.Destroy()
	}
}

// ReqNotify arms the CQ through ctx->ops.req_notify_cq (verbs.h's inline
// ibv_req_notify_cq). As with any kernel device, only completions that
// arrive after arming raise an event: poll after arming.
func (q *cq) ReqNotify(solicitedOnly bool) error {
	if q.ch == nil {
		return provider.Errorf(provider.ErrInvalidArgument, "CQ has no completion channel")
	}
	return rcErr(call(q.c.reqNotifyCQ, q.cq, uintptr(b2u(solicitedOnly))), "ibv_req_notify_cq")
}

func (q *cq) AckEvents(n int) { call(q.c.lib.ackCQEvents, q.cq, uintptr(n)) }

// Resize resizes the CQ (ibv_resize_cq); rxe moves the ring, so the
// fast path finds it again.
func (q *cq) Resize(cqe int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err := rcErr(call(q.c.lib.resizeCQ, q.cq, uintptr(cqe)), "ibv_resize_cq")
	q.findRXERing()
	return err
}

func (q *cq) Destroy() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return provider.Errorf(provider.ErrClosed, "CQ already destroyed")
	}
	if err := rcErr(call(q.c.lib.destroyCQ, q.cq), "ibv_destroy_cq"); err != nil {
		return err
	}
	q.destroyed, q.ring = true, rxeRing{} // the ring is unmapped
	q.c.dropOwner(q.cq)
	q.wcs.free()
	q.destroyOwn()
	return nil
}

// compChannel is a completion channel (struct ibv_comp_channel): its fd,
// duplicated and non-blocking, waits in the Go runtime's poller.
type compChannel struct {
	c  *Context
	ch uintptr
	f  *os.File
	mu sync.Mutex // one GetEvent at a time owns the read deadline
}

// CreateCompChannel creates a completion channel (ibv_create_comp_channel).
func (c *Context) CreateCompChannel() (provider.CompChannel, error) {
	r, errno := c.lib.callErrno(c.lib.createCompChannel, c.ctx)
	if r == 0 {
		return nil, provider.Errorf(errnoBase(errno), "ibv_create_comp_channel: %v", errno)
	}
	f, err := pollableDup(int(*(*int32)(cptr(r + compChannelFD))), "comp_channel")
	if err != nil {
		call(c.lib.destroyCompChannel, r)
		return nil, provider.Errorf(provider.ErrNoMemory, "completion channel fd: %v", err)
	}
	return &compChannel{c: c, ch: r, f: f}, nil
}

// GetEvent waits in the poller for the channel's fd, then takes the event
// with ibv_get_cq_event (which, on the non-blocking fd, never blocks).
func (ch *compChannel) GetEvent(ctx context.Context) (any, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	rc, err := ch.f.SyscallConn()
	if err != nil {
		return nil, provider.Errorf(provider.ErrClosed, "completion channel destroyed")
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { ch.f.SetReadDeadline(time.Unix(1, 0)) })
		defer func() {
			if !stop() {
				ch.f.SetReadDeadline(time.Time{})
			}
		}()
	}
	cqp, cqctx := new(uintptr), new(uintptr)
	got := false
	err = rc.Read(func(uintptr) bool {
		got = int32(call(ch.c.lib.getCQEvent, ch.ch, uintptr(unsafe.Pointer(cqp)), uintptr(unsafe.Pointer(cqctx)))) == 0
		return got
	})
	if !got {
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, provider.Errorf(provider.ErrClosed, "completion channel destroyed")
	}
	ch.c.mu.Lock()
	owner := ch.c.owners[*cqp]
	ch.c.mu.Unlock()
	return owner, nil
}

func (ch *compChannel) Destroy() error {
	ch.f.Close()
	ch.mu.Lock() // a GetEvent in progress has returned
	defer ch.mu.Unlock()
	return rcErr(call(ch.c.lib.destroyCompChannel, ch.ch), "ibv_destroy_comp_channel")
}

// srq is a shared receive queue (struct ibv_srq).
type srq struct {
	p     *pd
	srq   uintptr
	maxWR uint32
	rs    recvScratch
}

func (p *pd) CreateSRQ(attr provider.SRQAttr, owner any) (provider.SRQ, error) {
	ia := &cSRQInitAttr{Attr: cSRQAttr{MaxWR: attr.MaxWR, MaxSGE: max(attr.MaxSGE, 1), SRQLimit: attr.SRQLimit}}
	s := &srq{p: p}
	if err := s.rs.init(int(attr.MaxWR), int(max(attr.MaxSGE, 1))); err != nil {
		return nil, err
	}
	r, errno := p.c.lib.callErrno(p.c.lib.createSRQ, p.pd, uintptr(unsafe.Pointer(ia)))
	if r == 0 {
		s.rs.mem.free()
		return nil, provider.Errorf(errnoBase(errno), "ibv_create_srq: %v", errno)
	}
	s.srq, s.maxWR = r, ia.Attr.MaxWR
	p.c.setOwner(r, owner)
	return s, nil
}

func (s *srq) PostRecv(wrs []provider.RecvWR) (int, error) {
	return s.rs.post(s.p.c.postSRQRecv, s.srq, wrs)
}

func (s *srq) Modify(attr provider.SRQAttr, mask provider.SRQAttrMask) error {
	a := &cSRQAttr{MaxWR: attr.MaxWR, MaxSGE: attr.MaxSGE, SRQLimit: attr.SRQLimit}
	return rcErr(call(s.p.c.lib.modifySRQ, s.srq, uintptr(unsafe.Pointer(a)), uintptr(mask)), "ibv_modify_srq")
}

func (s *srq) Query() (provider.SRQAttr, error) {
	a := new(cSRQAttr)
	err := rcErr(call(s.p.c.lib.querySRQ, s.srq, uintptr(unsafe.Pointer(a))), "ibv_query_srq")
	return provider.SRQAttr{MaxWR: a.MaxWR, MaxSGE: a.MaxSGE, SRQLimit: a.SRQLimit}, err
}

// Len is unknown for a kernel SRQ (the device consumes receives without
// telling the process); it reports 0.
func (s *srq) Len() int { return 0 }

func (s *srq) Destroy() error {
	if err := rcErr(call(s.p.c.lib.destroySRQ, s.srq), "ibv_destroy_srq"); err != nil {
		return err
	}
	s.p.c.dropOwner(s.srq)
	s.rs.mem.free()
	return nil
}

// postBatch is how many work requests one ops.post_* call takes.
const postBatch = 16

// recvScratch builds chains of struct ibv_recv_wr off the Go heap.
type recvScratch struct {
	mu     sync.Mutex
	args   [3]uintptr
	mem    scratch // bad pointer, [batch]cRecvWR, [batch*sge]cSGE
	batch  int
	sge    int
	wrOff  int
	sgeOff int
}

func (r *recvScratch) init(maxWR, maxSGE int) error {
	r.batch, r.sge = min(max(maxWR, 1), postBatch), maxSGE
	r.wrOff = 8
	r.sgeOff = r.wrOff + r.batch*int(unsafe.Sizeof(cRecvWR{}))
	var err error
	r.mem, err = newScratch(r.sgeOff + r.batch*r.sge*int(unsafe.Sizeof(cSGE{})))
	return err
}

func (r *recvScratch) post(fn, obj uintptr, wrs []provider.RecvWR) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cws := unsafe.Slice((*cRecvWR)(unsafe.Pointer(&r.mem.mem[r.wrOff])), r.batch)
	sges := unsafe.Slice((*cSGE)(unsafe.Pointer(&r.mem.mem[r.sgeOff])), r.batch*r.sge)
	wrBase, sgeBase := r.mem.addr(r.wrOff), r.mem.addr(r.sgeOff)
	done := 0
	for done < len(wrs) {
		k := min(len(wrs)-done, r.batch)
		for i := range k {
			w, cw := &wrs[done+i], &cws[i]
			base := i * r.sge
			for j, s := range w.SGL {
				sges[base+j] = cSGE(s)
			}
			*cw = cRecvWR{WRID: w.ID, SGList: sgeBase + uintptr(base)*unsafe.Sizeof(cSGE{}), NumSGE: int32(len(w.SGL))}
			if i+1 < k {
				cw.Next = wrBase + uintptr(i+1)*unsafe.Sizeof(cRecvWR{})
			}
		}
		r.args = [3]uintptr{obj, wrBase, r.mem.addr(0)}
		if rc := callArgs(fn, r.args[:]); rc != 0 {
			bad := *(*uintptr)(unsafe.Pointer(&r.mem.mem[0]))
			return done + int((bad-wrBase)/unsafe.Sizeof(cRecvWR{})), rcErr(rc, "ibv_post_recv")
		}
		done += k
	}
	return done, nil
}

// qp is a queue pair (struct ibv_qp).
type qp struct {
	p   *pd
	qp  uintptr
	qpn uint32

	rs recvScratch

	sargs   [3]uintptr
	smem    scratch // bad pointer, [batch]cSendWR, [batch*sge]cSGE, cPostSend
	sbatch  int
	ssge    int
	swrOff  int
	ssgeOff int
	sdbOff  int

	rxe rxeQP // rxe's rings, when the fast path applies
}

// CreateQP creates a queue pair (ibv_create_qp).
func (p *pd) CreateQP(init *provider.QPInitAttr, owner any) (provider.QP, error) {
	ia := &cQPInitAttr{QPType: uint32(init.Type), SQSigAll: int32(b2u(init.SigAll)),
		Cap: cQPCap(init.Cap)}
	if sc, ok := init.SendCQ.(*cq); ok {
		ia.SendCQ = sc.cq
	}
	if rc, ok := init.RecvCQ.(*cq); ok {
		ia.RecvCQ = rc.cq
	}
	if ia.SendCQ == 0 || ia.RecvCQ == 0 {
		return nil, provider.Errorf(provider.ErrInvalidArgument, "CQ of another provider")
	}
	if init.SRQ != nil {
		s, ok := init.SRQ.(*srq)
		if !ok {
			return nil, provider.Errorf(provider.ErrInvalidArgument, "SRQ of another provider")
		}
		ia.SRQ = s.srq
		ia.Cap.MaxRecvWR, ia.Cap.MaxRecvSGE = 0, 0
	}
	q := &qp{p: p}
	if err := q.initScratch(init.Cap); err != nil {
		return nil, err
	}
	r, errno := p.c.lib.callErrno(p.c.lib.createQP, p.pd, uintptr(unsafe.Pointer(ia)))
	if r == 0 {
		q.rs.mem.free()
		q.smem.free()
		return nil, provider.Errorf(errnoBase(errno), "ibv_create_qp: %v", errno)
	}
	q.qp, q.qpn = r, *(*uint32)(cptr(r + qpQPNum))
	q.findRXERings(init, ia.Cap)
	p.c.setOwner(r, owner)
	return q, nil
}

// initScratch allocates the off-heap memory PostSend and PostRecv build
// work requests in.
func (q *qp) initScratch(c provider.QPCap) error {
	if err := q.rs.init(int(c.MaxRecvWR), int(max(c.MaxRecvSGE, 1))); err != nil {
		return err
	}
	q.sbatch, q.ssge = min(max(int(c.MaxSendWR), 1), postBatch), max(int(c.MaxSendSGE), 1)
	q.swrOff = 8
	q.ssgeOff = q.swrOff + q.sbatch*int(unsafe.Sizeof(cSendWR{}))
	q.sdbOff = q.ssgeOff + q.sbatch*q.ssge*int(unsafe.Sizeof(cSGE{}))
	var err error
	if q.smem, err = newScratch(q.sdbOff + int(unsafe.Sizeof(cPostSend{}))); err != nil {
		q.rs.mem.free()
		return err
	}
	return nil
}

func (q *qp) QPN() uint32 { return q.qpn }

// State queries the live state (ibv_query_qp with IBV_QP_STATE).
func (q *qp) State() provider.QPState {
	a, err := q.query(provider.QPAttrState)
	if err != nil {
		return provider.QPState(*(*uint32)(cptr(q.qp + qpState)))
	}
	return provider.QPState(a.QPState)
}

func (q *qp) query(mask provider.QPAttrMask) (*cQPAttr, error) {
	a, ia := new(cQPAttr), new(cQPInitAttr)
	err := rcErr(call(q.p.c.lib.queryQP, q.qp, uintptr(unsafe.Pointer(a)), uintptr(mask), uintptr(unsafe.Pointer(ia))), "ibv_query_qp")
	return a, err
}

// Query returns every attribute ibv_query_qp reports (the address
// vectors included).
func (q *qp) Query() (provider.QPAttr, error) {
	a, err := q.query(provider.QPAttrAll &^ provider.QPAttrRateLimit)
	if err != nil {
		return provider.QPAttr{}, err
	}
	return fromCQPAttr(a), nil
}

// Modify converts the attributes and calls ibv_modify_qp.
func (q *qp) Modify(attr *provider.QPAttr, mask provider.QPAttrMask) error {
	a := &cQPAttr{
		QPState: uint32(attr.State), CurQPState: uint32(attr.CurState), PathMTU: uint32(attr.PathMTU),
		PathMigState: uint32(attr.PathMigState), QKey: attr.QKey, RQPSN: attr.RQPSN, SQPSN: attr.SQPSN,
		DestQPNum: attr.DestQPN, QPAccessFlags: uint32(attr.AccessFlags), Cap: cQPCap(attr.Cap),
		AHAttr: toCAH(&attr.AH), AltAHAttr: toCAH(&attr.AltAH), PKeyIndex: attr.PKeyIndex,
		AltPKeyIndex: attr.AltPKeyIndex, EnSQDAsyncNotify: b2u(attr.EnSQDAsyncNotify),
		MaxRDAtomic: attr.MaxRDAtomic, MaxDestRDAtomic: attr.MaxDestRDAtomic, MinRNRTimer: attr.MinRNRTimer,
		PortNum: attr.PortNum, Timeout: attr.Timeout, RetryCnt: attr.RetryCnt, RNRRetry: attr.RNRRetry,
		AltPortNum: attr.AltPortNum, AltTimeout: attr.AltTimeout, RateLimit: attr.RateLimit,
	}
	if mask&provider.QPAttrAV != 0 && a.AHAttr.PortNum == 0 {
		a.AHAttr.PortNum = attr.PortNum
		if a.AHAttr.PortNum == 0 {
			a.AHAttr.PortNum = 1
		}
	}
	return rcErr(call(q.p.c.lib.modifyQP, q.qp, uintptr(unsafe.Pointer(a)), uintptr(mask)), "ibv_modify_qp")
}

func bswap32(v uint32) uint32 { return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24 }

// PostSend converts wrs into a chain of struct ibv_send_wr in off-heap
// scratch memory and calls ctx->ops.post_send, as verbs.h's inline
// ibv_post_send does, postBatch work requests at a time; on rxe it writes
// them into the send ring and rings the doorbell, as rdma-core's
// rxe_post_send does. verbs serialises the calls (the provider contract),
// so it takes no lock.
func (q *qp) PostSend(wrs []provider.SendWR) (int, error) {
	if x := &q.rxe; x.sq.base != 0 && rxeSendable(wrs) {
		n, err := x.fillSend(wrs)
		if n > 0 {
			if errno := x.ring(); errno != 0 {
				return n, provider.Errorf(errnoBase(errno), "ibv_post_send: doorbell: %v", errno)
			}
		}
		return n, err
	}
	cws := unsafe.Slice((*cSendWR)(unsafe.Pointer(&q.smem.mem[q.swrOff])), q.sbatch)
	sges := unsafe.Slice((*cSGE)(unsafe.Pointer(&q.smem.mem[q.ssgeOff])), q.sbatch*q.ssge)
	wrBase, sgeBase := q.smem.addr(q.swrOff), q.smem.addr(q.ssgeOff)
	done := 0
	for done < len(wrs) {
		k := min(len(wrs)-done, q.sbatch)
		for i := range k {
			w, cw := &wrs[done+i], &cws[i]
			base := i * q.ssge
			for j, s := range w.SGL {
				sges[base+j] = cSGE(s)
			}
			*cw = cSendWR{WRID: w.ID, SGList: sgeBase + uintptr(base)*unsafe.Sizeof(cSGE{}),
				NumSGE: int32(len(w.SGL)), Opcode: uint32(w.Opcode), SendFlags: uint32(w.Flags)}
			if i+1 < k {
				cw.Next = wrBase + uintptr(i+1)*unsafe.Sizeof(cSendWR{})
			}
			switch w.Opcode {
			case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
				cw.ImmData = bswap32(w.ImmData)
			case provider.WRSendWithInv:
				cw.ImmData = w.InvalidateRKey
			case provider.WRLocalInv:
				cw.ImmData = w.InvalidateRKey
			}
			switch w.Opcode {
			case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
				cw.RemoteAddr, cw.RKey = w.RemoteAddr, w.RKey
			case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
				cw.RemoteAddr, cw.RKey, cw.Word52 = w.RemoteAddr, uint32(w.CompareAdd), uint32(w.CompareAdd>>32)
				cw.Swap, cw.AtomicRKey = w.Swap, w.RKey
			case provider.WRBindMW:
				if w.BindMW != nil {
					if m, ok := w.BindMW.ProviderMW().(*mw); ok {
						cw.MW = m.mw
					}
				}
				cw.BindRKey = w.BindRKey
				if w.BindInfo.MR != nil {
					if m, ok := w.BindInfo.MR.ProviderMR().(*mr); ok {
						cw.BindMR = m.mr
					}
				}
				cw.BindAddr, cw.BindLength, cw.BindAccess = w.BindInfo.Addr, w.BindInfo.Length, uint32(w.BindInfo.Access)
			}
			if w.AH != nil {
				if a, ok := w.AH.ProviderAH().(*ah); ok {
					cw.RemoteAddr = uint64(a.ah)
				}
				cw.RKey, cw.Word52 = w.RemoteQPN, w.RemoteQKey
			}
		}
		q.sargs = [3]uintptr{q.qp, wrBase, q.smem.addr(0)}
		if rc := callArgs(q.p.c.postSend, q.sargs[:]); rc != 0 {
			bad := *(*uintptr)(unsafe.Pointer(&q.smem.mem[0]))
			return done + int((bad-wrBase)/unsafe.Sizeof(cSendWR{})), rcErr(rc, "ibv_post_send")
		}
		done += k
	}
	return done, nil
}

// PostRecv is PostSend's counterpart through ctx->ops.post_recv.
func (q *qp) PostRecv(wrs []provider.RecvWR) (int, error) {
	if q.rxe.rq.base != 0 {
		// Into the receive ring, as rdma-core's rxe_post_recv does.
		if provider.QPState(*(*uint32)(cptr(q.qp + qpState))) == provider.QPStateReset {
			return 0, provider.Errorf(provider.ErrInvalidArgument, "ibv_post_recv: QP in RESET")
		}
		q.rs.mu.Lock()
		n, err := q.rxe.fillRecv(wrs)
		q.rs.mu.Unlock()
		return n, err
	}
	return q.rs.post(q.p.c.postRecv, q.qp, wrs)
}

// Counters are not kept per QP by kernel devices; they are zero.
func (q *qp) Counters() provider.Counters { return provider.Counters{} }

func (q *qp) Destroy() error {
	if err := rcErr(call(q.p.c.lib.destroyQP, q.qp), "ibv_destroy_qp"); err != nil {
		return err
	}
	q.p.c.dropOwner(q.qp)
	q.smem.free() // no PostSend runs or follows (verbs serialises them)
	q.rs.mu.Lock()
	q.rs.mem.free()
	q.rs.mu.Unlock()
	return nil
}
