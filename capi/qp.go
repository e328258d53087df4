//go:build cgo && linux && rdmago_capi

package main

// #include <stdlib.h>
// #include <pthread.h>
// #include "capi.h"
// void rgo_wait_events(pthread_mutex_t *mu, pthread_cond_t *cond, uint32_t *completed, uint32_t n);
import "C"

import (
	"errors"
	"runtime/cgo"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rdma-go/rdma-go/verbs"
)

// qpState is the Go side of a struct ibv_qp.
type qpState struct {
	qp     *verbs.QP
	ctx    *ctxState
	c      *C.struct_rgo_qp
	events uint32 // async events delivered (ctx.mu)
	owner  *cmID  // the rdma_cm id whose QP this is, if any
	inl    *inlineArena

	// The ibv_wr_* API's work requests between wr_start and wr_complete
	// (the program serializes these calls per QP, as verbs.h requires).
	pending []verbs.SendWR
	sges    []verbs.SGE // the pending requests' SGLs
	inline  [][][]byte  // the pending requests' inline data (by index), copied
	werr    error       // the first bad wr_* call since wr_start
}

func qpOf(c *C.struct_ibv_qp) *qpState {
	return handleOf[*qpState]((*C.struct_rgo_qp)(unsafe.Pointer(c)).h)
}

func qpxOf(c *C.struct_ibv_qp_ex) *qpState {
	return handleOf[*qpState]((*C.struct_rgo_qp)(unsafe.Pointer(c)).h)
}

//export rgo_ibv_create_qp
func rgo_ibv_create_qp(c *C.struct_ibv_pd, init *C.struct_ibv_qp_init_attr) *C.struct_ibv_qp {
	return createQP(c, init, false)
}

// sendOps are the ibv_wr_* operations the soft device supports (not TSO or
// ATOMIC_WRITE).
const sendOps = C.IBV_QP_EX_WITH_RDMA_WRITE | C.IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | C.IBV_QP_EX_WITH_SEND |
	C.IBV_QP_EX_WITH_SEND_WITH_IMM | C.IBV_QP_EX_WITH_RDMA_READ | C.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
	C.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | C.IBV_QP_EX_WITH_LOCAL_INV | C.IBV_QP_EX_WITH_BIND_MW |
	C.IBV_QP_EX_WITH_SEND_WITH_INV

// rgo_create_qp_ex is verbs_context's create_qp_ex (ibv_create_qp_ex):
// the PD is required; send_ops_flags make the QP an ibv_qp_ex for the
// ibv_wr_* API. Other extensions are not supported.
//
//export rgo_create_qp_ex
func rgo_create_qp_ex(c *C.struct_ibv_context, x *C.struct_ibv_qp_init_attr_ex) *C.struct_ibv_qp {
	const known = C.IBV_QP_INIT_ATTR_PD | C.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | C.IBV_QP_INIT_ATTR_CREATE_FLAGS |
		C.IBV_QP_INIT_ATTR_MAX_TSO_HEADER
	if x.comp_mask&C.IBV_QP_INIT_ATTR_PD == 0 || x.pd == nil {
		fail(syscall.EINVAL)
		return nil
	}
	// Only the members comp_mask names are read; of those, no create
	// flag and no TSO are supported.
	if x.comp_mask&^known != 0 || x.comp_mask&C.IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && x.create_flags != 0 ||
		x.comp_mask&C.IBV_QP_INIT_ATTR_MAX_TSO_HEADER != 0 && x.max_tso_header != 0 ||
		x.comp_mask&C.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 && x.send_ops_flags&^sendOps != 0 {
		fail(syscall.EOPNOTSUPP)
		return nil
	}
	init := C.struct_ibv_qp_init_attr{qp_context: x.qp_context, send_cq: x.send_cq, recv_cq: x.recv_cq, srq: x.srq,
		cap: x.cap, qp_type: x.qp_type, sq_sig_all: x.sq_sig_all}
	q := createQP(x.pd, &init, x.comp_mask&C.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0)
	if q != nil {
		x.cap = init.cap
	}
	return q
}

func createQP(c *C.struct_ibv_pd, init *C.struct_ibv_qp_init_attr, ex bool) *C.struct_ibv_qp {
	p := pdOf(c)
	switch init.qp_type {
	case C.IBV_QPT_RC, C.IBV_QPT_UC, C.IBV_QPT_UD:
	default: // raw packet, XRC, driver QPs
		fail(syscall.EOPNOTSUPP)
		return nil
	}
	if init.send_cq == nil || init.recv_cq == nil {
		fail(syscall.EINVAL)
		return nil
	}
	qp, err := p.pd.CreateQP(toQPInitAttr(init))
	if err != nil {
		fail(err)
		return nil
	}
	return wrapQP(c, qp, init, ex)
}

// toQPInitAttr reads a struct ibv_qp_init_attr (CQs may be NULL for
// rdma_create_qp, which then creates them).
func toQPInitAttr(init *C.struct_ibv_qp_init_attr) verbs.QPInitAttr {
	a := verbs.QPInitAttr{Type: verbs.QPType(init.qp_type),
		Cap: verbs.QPCap{MaxSendWR: uint32(init.cap.max_send_wr), MaxRecvWR: uint32(init.cap.max_recv_wr),
			MaxSendSGE: uint32(init.cap.max_send_sge), MaxRecvSGE: uint32(init.cap.max_recv_sge),
			MaxInlineData: uint32(init.cap.max_inline_data)},
		SigAll: init.sq_sig_all != 0}
	if init.send_cq != nil {
		a.SendCQ = cqOf(init.send_cq).cq
	}
	if init.recv_cq != nil {
		a.RecvCQ = cqOf(init.recv_cq).cq
	}
	if init.srq != nil {
		a.SRQ = srqOf(init.srq).srq
	}
	return a
}

// wrapQP makes the struct ibv_qp of qp, created in the PD c with init,
// and writes qp's capabilities back into init->cap.
func wrapQP(c *C.struct_ibv_pd, qp *verbs.QP, init *C.struct_ibv_qp_init_attr, ex bool) *C.struct_ibv_qp {
	p := pdOf(c)
	cp := qp.Cap()
	init.cap = C.struct_ibv_qp_cap{max_send_wr: C.uint32_t(cp.MaxSendWR), max_recv_wr: C.uint32_t(cp.MaxRecvWR),
		max_send_sge: C.uint32_t(cp.MaxSendSGE), max_recv_sge: C.uint32_t(cp.MaxRecvSGE), max_inline_data: C.uint32_t(cp.MaxInlineData)}
	q := &qpState{qp: qp, ctx: p.ctx, inl: newInlineArena(p.pd, int(cp.MaxInlineData))}
	q.c = (*C.struct_rgo_qp)(C.calloc(1, C.sizeof_struct_rgo_qp))
	b := &q.c.qpx.qp_base
	b.context = c.context
	b.qp_context = init.qp_context
	b.pd = c
	b.send_cq = init.send_cq
	b.recv_cq = init.recv_cq
	b.srq = init.srq
	b.handle = C.uint32_t(nextHandle())
	b.qp_num = C.uint32_t(qp.QPN())
	b.state = C.enum_ibv_qp_state(qp.State())
	b.qp_type = init.qp_type
	C.pthread_mutex_init(&b.mutex, nil)
	C.pthread_cond_init(&b.cond, nil)
	if ex {
		q.c.ex = 1
		C.rgo_init_qp_ex_ops(q.c)
	}
	q.c.h = C.uintptr_t(cgo.NewHandle(q))
	p.ctx.mu.Lock()
	p.ctx.qps[qp] = q
	p.ctx.mu.Unlock()
	return b
}

//export rgo_ibv_qp_to_qp_ex
func rgo_ibv_qp_to_qp_ex(c *C.struct_ibv_qp) *C.struct_ibv_qp_ex {
	q := (*C.struct_rgo_qp)(unsafe.Pointer(c))
	if q.ex == 0 {
		return nil
	}
	return &q.qpx
}

//export rgo_ibv_modify_qp
func rgo_ibv_modify_qp(c *C.struct_ibv_qp, attr *C.struct_ibv_qp_attr, mask C.int) C.int {
	q := qpOf(c)
	a := toQPAttr(attr)
	if err := q.qp.Modify(&a, verbs.QPAttrMask(mask)); err != nil {
		return errno(err)
	}
	if mask&C.IBV_QP_STATE != 0 {
		c.state = attr.qp_state
	}
	return 0
}

func toQPAttr(a *C.struct_ibv_qp_attr) verbs.QPAttr {
	return verbs.QPAttr{
		State: verbs.QPState(a.qp_state), CurState: verbs.QPState(a.cur_qp_state), PathMTU: verbs.MTU(a.path_mtu),
		QKey: uint32(a.qkey), RQPSN: uint32(a.rq_psn), SQPSN: uint32(a.sq_psn), DestQPN: uint32(a.dest_qp_num),
		AccessFlags: verbs.AccessFlags(a.qp_access_flags),
		Cap: verbs.QPCap{MaxSendWR: uint32(a.cap.max_send_wr), MaxRecvWR: uint32(a.cap.max_recv_wr),
			MaxSendSGE: uint32(a.cap.max_send_sge), MaxRecvSGE: uint32(a.cap.max_recv_sge), MaxInlineData: uint32(a.cap.max_inline_data)},
		AH: toAHAttr(&a.ah_attr), PKeyIndex: uint16(a.pkey_index), MaxRDAtomic: uint8(a.max_rd_atomic),
		MaxDestRDAtomic: uint8(a.max_dest_rd_atomic), MinRNRTimer: uint8(a.min_rnr_timer), PortNum: uint8(a.port_num),
		Timeout: uint8(a.timeout), RetryCnt: uint8(a.retry_cnt), RNRRetry: uint8(a.rnr_retry),
		EnSQDAsyncNotify: a.en_sqd_async_notify != 0, SQDraining: a.sq_draining != 0, PathMigState: uint8(a.path_mig_state),
		AltAH: toAHAttr(&a.alt_ah_attr), AltPKeyIndex: uint16(a.alt_pkey_index), AltPortNum: uint8(a.alt_port_num),
		AltTimeout: uint8(a.alt_timeout), RateLimit: uint32(a.rate_limit),
	}
}

func fillQPAttr(o *C.struct_ibv_qp_attr, a *verbs.QPAttr) {
	*o = C.struct_ibv_qp_attr{
		qp_state: C.enum_ibv_qp_state(a.State), cur_qp_state: C.enum_ibv_qp_state(a.CurState), path_mtu: C.enum_ibv_mtu(a.PathMTU),
		path_mig_state: C.enum_ibv_mig_state(a.PathMigState), qkey: C.uint32_t(a.QKey), rq_psn: C.uint32_t(a.RQPSN),
		sq_psn: C.uint32_t(a.SQPSN), dest_qp_num: C.uint32_t(a.DestQPN), qp_access_flags: C.uint(a.AccessFlags),
		cap: C.struct_ibv_qp_cap{max_send_wr: C.uint32_t(a.Cap.MaxSendWR), max_recv_wr: C.uint32_t(a.Cap.MaxRecvWR),
			max_send_sge: C.uint32_t(a.Cap.MaxSendSGE), max_recv_sge: C.uint32_t(a.Cap.MaxRecvSGE), max_inline_data: C.uint32_t(a.Cap.MaxInlineData)},
		pkey_index: C.uint16_t(a.PKeyIndex), alt_pkey_index: C.uint16_t(a.AltPKeyIndex),
		max_rd_atomic: C.uint8_t(a.MaxRDAtomic), max_dest_rd_atomic: C.uint8_t(a.MaxDestRDAtomic), min_rnr_timer: C.uint8_t(a.MinRNRTimer),
		port_num: C.uint8_t(a.PortNum), timeout: C.uint8_t(a.Timeout), retry_cnt: C.uint8_t(a.RetryCnt), rnr_retry: C.uint8_t(a.RNRRetry),
		alt_port_num: C.uint8_t(a.AltPortNum), alt_timeout: C.uint8_t(a.AltTimeout), rate_limit: C.uint32_t(a.RateLimit),
	}
	if a.EnSQDAsyncNotify {
		o.en_sqd_async_notify = 1
	}
	if a.SQDraining {
		o.sq_draining = 1
	}
	fillAHAttr(&o.ah_attr, &a.AH)
	fillAHAttr(&o.alt_ah_attr, &a.AltAH)
}

//export rgo_ibv_query_qp
func rgo_ibv_query_qp(c *C.struct_ibv_qp, attr *C.struct_ibv_qp_attr, mask C.int, init *C.struct_ibv_qp_init_attr) C.int {
	q := qpOf(c)
	a, ia, err := q.qp.Query()
	if err != nil {
		return errno(err)
	}
	fillQPAttr(attr, &a)
	*init = C.struct_ibv_qp_init_attr{qp_context: c.qp_context, send_cq: c.send_cq, recv_cq: c.recv_cq, srq: c.srq,
		cap: attr.cap, qp_type: c.qp_type}
	if ia.SigAll {
		init.sq_sig_all = 1
	}
	c.state = attr.qp_state
	return 0
}

//export rgo_ibv_query_qp_data_in_order
func rgo_ibv_query_qp_data_in_order(c *C.struct_ibv_qp, op C.enum_ibv_wr_opcode, flags C.uint32_t) C.int {
	return 0 // the soft device writes a message's data in packet order only
}

//export rgo_ibv_destroy_qp
func rgo_ibv_destroy_qp(c *C.struct_ibv_qp) C.int {
	q := qpOf(c)
	if err := q.qp.Destroy(); err != nil {
		return errno(err)
	}
	q.free()
	return 0
}

// free releases the struct ibv_qp of a destroyed QP, once the program
// acknowledged its events.
func (q *qpState) free() {
	if q.owner != nil { // ibv_destroy_qp of an id's QP: the id has none now
		q.owner.qp, q.owner.c.id.qp = nil, nil
	}
	c := &q.c.qpx.qp_base
	q.ctx.mu.Lock()
	delete(q.ctx.qps, q.qp)
	q.ctx.dropAsync(unsafe.Pointer(c))
	n := q.events
	q.ctx.mu.Unlock()
	C.rgo_wait_events(&c.mutex, &c.cond, &c.events_completed, C.uint32_t(n))
	C.pthread_cond_destroy(&c.cond)
	C.pthread_mutex_destroy(&c.mutex)
	q.inl.free()
	release(q.c.h, unsafe.Pointer(q.c))
}

// inlineArena stages a QP's inline data. A program's inline SGEs name
// memory by address alone (no L_Key, often a stack buffer), as verbs
// allows; the soft device reads all memory through its keys. So each post
// copies its inline data into a slot of this C memory, registered in the
// QP's PD, and posts that (the device copies inline data at post time, so
// the slots are free again when the post returns).
type inlineArena struct {
	mu   sync.Mutex
	max  int         // max_inline_data
	buf  []byte      // postBatch slots of max bytes, C memory
	sges []verbs.SGE // postBatch SGEs naming the slots, C memory
	mr   *verbs.MR
}

func newInlineArena(pd *verbs.PD, max int) *inlineArena {
	if max <= 0 {
		return nil
	}
	p := C.calloc(C.size_t(postBatch), C.size_t(max))
	buf := unsafe.Slice((*byte)(p), postBatch*max)
	mr, err := pd.RegMR(buf, verbs.AccessLocalWrite)
	if err != nil {
		C.free(p)
		return nil // inline posts fail then, as without an arena
	}
	sges := unsafe.Slice((*verbs.SGE)(C.calloc(C.size_t(postBatch), C.size_t(unsafe.Sizeof(verbs.SGE{})))), postBatch)
	return &inlineArena{max: max, buf: buf, sges: sges, mr: mr}
}

func (a *inlineArena) free() {
	if a != nil {
		a.mr.Dereg()
		C.free(unsafe.Pointer(&a.buf[0]))
		C.free(unsafe.Pointer(&a.sges[0]))
	}
}

// stage copies one work request's inline data into slot i and points w at
// it (a.mu held): bufs, or without them the program's memory that w's SGL
// names. Data larger than the QP's limit is left for verbs to refuse.
func (a *inlineArena) stage(w *verbs.SendWR, i int, bufs [][]byte) {
	slot := a.buf[i*a.max : (i+1)*a.max]
	n := 0
	if bufs == nil {
		for _, s := range w.SGL {
			if n+int(s.Length) > a.max {
				return
			}
			n += copy(slot[n:], cmem(s.Addr, s.Length))
		}
	}
	for _, b := range bufs {
		if n+len(b) > a.max {
			return
		}
		n += copy(slot[n:], b)
	}
	a.sges[i] = verbs.SGE{Addr: uint64(uintptr(unsafe.Pointer(&slot[0]))), Length: uint32(n), LKey: a.mr.LKey()}
	w.SGL = a.sges[i : i+1]
}

// inlined reports whether w carries inline data (READ and atomics ignore
// the flag).
func inlined(w *verbs.SendWR) bool {
	switch w.Opcode {
	case verbs.WRRDMARead, verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		return false
	}
	return w.Flags&verbs.SendInline != 0
}

// cmem is n bytes of the program's memory at addr.
func cmem(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))), n)
}

// post posts wrs (at most postBatch), staging inline data first: from
// inline[i] for wrs[i] (the copies wr_set_inline_data made), or from the
// program's memory that the SGL names.
func (q *qpState) post(wrs []verbs.SendWR, inline [][][]byte) error {
	if a := q.inl; a != nil {
		staged := false
		for i := range wrs {
			if !inlined(&wrs[i]) {
				continue
			}
			if !staged {
				a.mu.Lock()
				defer a.mu.Unlock()
				staged = true
			}
			var bufs [][]byte // nil: what the SGL names (ibv_post_send, wr_set_sge)
			if inline != nil {
				bufs = inline[i]
			}
			a.stage(&wrs[i], i, bufs)
		}
	}
	return q.qp.PostSend(wrs...)
}

// postBatch is how many work requests one PostSend or PostRecv call takes
// (on the stack).
const postBatch = 16

// struct ibv_sge and verbs.SGE have one layout (this does not compile
// otherwise), so sgl aliases a program's SGE arrays.
var (
	_ [0]struct{} = [unsafe.Sizeof(C.struct_ibv_sge{}) - unsafe.Sizeof(verbs.SGE{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(C.struct_ibv_sge{}.length) - unsafe.Offsetof(verbs.SGE{}.Length)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(C.struct_ibv_sge{}.lkey) - unsafe.Offsetof(verbs.SGE{}.LKey)]struct{}{}
)

// sgl aliases a C SGE array.
func sgl(p *C.struct_ibv_sge, n C.int) []verbs.SGE {
	if p == nil || n <= 0 {
		return nil
	}
	return unsafe.Slice((*verbs.SGE)(unsafe.Pointer(p)), int(n))
}

func u32at(p unsafe.Pointer, off uintptr) uint32 { return *(*uint32)(unsafe.Add(p, off)) }
func u64at(p unsafe.Pointer, off uintptr) uint64 { return *(*uint64)(unsafe.Add(p, off)) }

// toSendWR reads one struct ibv_send_wr of a QP (ud: of a UD QP, whose
// requests carry an address).
func toSendWR(w *C.struct_ibv_send_wr, ud bool, out *verbs.SendWR) {
	p := unsafe.Pointer(w)
	*out = verbs.SendWR{ID: uint64(w.wr_id), Opcode: verbs.WROpcode(w.opcode), Flags: verbs.SendFlags(w.send_flags),
		SGL: sgl(w.sg_list, w.num_sge)}
	switch out.Opcode {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRRDMARead:
		out.RemoteAddr = u64at(p, C.offsetof_send_wr_rdma_addr)
		out.RKey = u32at(p, C.offsetof_send_wr_rdma_rkey)
	case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		out.RemoteAddr = u64at(p, C.offsetof_send_wr_atomic_addr)
		out.RKey = u32at(p, C.offsetof_send_wr_atomic_rkey)
		out.CompareAdd = u64at(p, C.offsetof_send_wr_atomic_compare_add)
		out.Swap = u64at(p, C.offsetof_send_wr_atomic_swap)
	case verbs.WRBindMW:
		mw := *(**C.struct_ibv_mw)(unsafe.Add(p, C.offsetof_send_wr_bind_mw))
		if mw != nil {
			out.BindMW = mwOf(mw).mw
		}
		out.BindRKey = u32at(p, C.offsetof_send_wr_bind_rkey)
		out.BindInfo = toBindInfo((*C.struct_ibv_mw_bind_info)(unsafe.Add(p, C.offsetof_send_wr_bind_info)))
	}
	imm := u32at(p, C.offsetof_send_wr_imm)
	switch out.Opcode {
	case verbs.WRSendWithImm, verbs.WRRDMAWriteWithImm:
		out.ImmData = bswap32(imm) // __be32
	case verbs.WRSendWithInv, verbs.WRLocalInv:
		out.InvalidateRKey = imm
	}
	if !ud {
		return
	}
	if ah := *(**C.struct_ibv_ah)(unsafe.Add(p, C.offsetof_send_wr_ud_ah)); ah != nil {
		out.AH = ahOf(ah).ah
		out.RemoteQPN = u32at(p, C.offsetof_send_wr_ud_qpn)
		out.RemoteQKey = u32at(p, C.offsetof_send_wr_ud_qkey)
	}
}

func toBindInfo(b *C.struct_ibv_mw_bind_info) verbs.MWBindInfo {
	i := verbs.MWBindInfo{Addr: uint64(b.addr), Length: uint64(b.length), Access: verbs.AccessFlags(b.mw_access_flags)}
	if b.mr != nil {
		i.MR = handleOf[*mrState]((*C.struct_rgo_mr)(unsafe.Pointer(b.mr)).h).mr
	}
	return i
}

//export rgo_post_send
func rgo_post_send(c *C.struct_ibv_qp, wr *C.struct_ibv_send_wr, bad **C.struct_ibv_send_wr) C.int {
	q := qpOf(c)
	ud := c.qp_type == C.IBV_QPT_UD
	var wrs [postBatch]verbs.SendWR
	var cw [postBatch]*C.struct_ibv_send_wr
	for wr != nil {
		n := 0
		for ; wr != nil && n < postBatch; wr = wr.next {
			toSendWR(wr, ud, &wrs[n])
			cw[n] = wr
			n++
		}
		if err := q.post(wrs[:n], nil); err != nil {
			*bad = cw[postErrorIndex(err, n)]
			return errno(err)
		}
	}
	return 0
}

// postErrorIndex is the failing work request of a post of n.
func postErrorIndex(err error, n int) int {
	var pe *verbs.PostError
	if errors.As(err, &pe) && pe.Index >= 0 && pe.Index < n {
		return pe.Index
	}
	return 0
}

//export rgo_post_recv
func rgo_post_recv(c *C.struct_ibv_qp, wr *C.struct_ibv_recv_wr, bad **C.struct_ibv_recv_wr) C.int {
	q := qpOf(c)
	var wrs [postBatch]verbs.RecvWR
	var cw [postBatch]*C.struct_ibv_recv_wr
	for wr != nil {
		var n int
		n, wr = recvBatch(wr, &wrs, &cw)
		// A direct call (not through a func value), so wrs stays on the stack.
		if err := q.qp.PostRecv(wrs[:n]...); err != nil {
			*bad = cw[postErrorIndex(err, n)]
			return errno(err)
		}
	}
	return 0
}

// recvBatch reads up to postBatch receive work requests of the chain at
// wr into wrs (cw: their C structs) and returns how many and the rest.
func recvBatch(wr *C.struct_ibv_recv_wr, wrs *[postBatch]verbs.RecvWR, cw *[postBatch]*C.struct_ibv_recv_wr) (int, *C.struct_ibv_recv_wr) {
	n := 0
	for ; wr != nil && n < postBatch; wr = wr.next {
		wrs[n] = verbs.RecvWR{ID: uint64(wr.wr_id), SGL: sgl(wr.sg_list, wr.num_sge)}
		cw[n] = wr
		n++
	}
	return n, wr
}

//export rgo_bind_mw
func rgo_bind_mw(c *C.struct_ibv_qp, mw *C.struct_ibv_mw, b *C.struct_ibv_mw_bind) C.int {
	m := mwOf(mw)
	rkey, err := qpOf(c).qp.BindMW(m.mw, verbs.MWBind{WRID: uint64(b.wr_id), Flags: verbs.SendFlags(b.send_flags),
		Info: toBindInfo(&b.bind_info)})
	if err != nil {
		return errno(err)
	}
	mw.rkey = C.uint32_t(rkey)
	return 0
}
