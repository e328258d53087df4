//go:build cgo && linux && rdmago_capi

package main

// #include <stdlib.h>
// #include <pthread.h>
// #include "capi.h"
// void rgo_wait_events(pthread_mutex_t *mu, pthread_cond_t *cond, uint32_t *completed, uint32_t n);
import "C"

import (
	"runtime/cgo"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rdma-go/rdma-go/verbs"
)

var handles atomic.Uint32

// nextHandle numbers objects for their handle fields, which programs may
// print but never pass back.
func nextHandle() uint32 { return handles.Add(1) }

type pdState struct {
	pd  *verbs.PD
	ctx *ctxState
	c   *C.struct_rgo_pd
}

func pdOf(p *C.struct_ibv_pd) *pdState {
	return handleOf[*pdState]((*C.struct_rgo_pd)(unsafe.Pointer(p)).h)
}

//export rgo_ibv_alloc_pd
func rgo_ibv_alloc_pd(c *C.struct_ibv_context) *C.struct_ibv_pd {
	s := ctxOf(c)
	pd, err := s.ctx.AllocPD()
	if err != nil {
		fail(err)
		return nil
	}
	return &wrapPD(s, pd).c.pd
}

// wrapPD makes the struct ibv_pd of pd, a PD of s.
func wrapPD(s *ctxState, pd *verbs.PD) *pdState {
	p := &pdState{pd: pd, ctx: s}
	p.c = (*C.struct_rgo_pd)(C.calloc(1, C.sizeof_struct_rgo_pd))
	p.c.pd.context = &s.c.vctx.context
	p.c.pd.handle = C.uint32_t(nextHandle())
	p.c.h = C.uintptr_t(cgo.NewHandle(p))
	return p
}

//export rgo_ibv_dealloc_pd
func rgo_ibv_dealloc_pd(c *C.struct_ibv_pd) C.int {
	p := pdOf(c)
	if err := p.pd.Dealloc(); err != nil {
		return errno(err)
	}
	p.free()
	return 0
}

func (p *pdState) free() {
	release(p.c.h, unsafe.Pointer(p.c))
}

type mrState struct {
	mr *verbs.MR
	c  *C.struct_rgo_mr
}

// accessOptional are the IBV_ACCESS_OPTIONAL_RANGE bits: hints a device
// may ignore, as the soft device does.
const accessOptional = 0x3ff00000

//export rgo_ibv_reg_mr
func rgo_ibv_reg_mr(c *C.struct_ibv_pd, addr unsafe.Pointer, length C.size_t, access C.int) *C.struct_ibv_mr {
	p := pdOf(c)
	if addr == nil || length == 0 {
		fail(syscall.EINVAL)
		return nil
	}
	mr, err := p.pd.RegMR(unsafe.Slice((*byte)(addr), int(length)), verbs.AccessFlags(access&^accessOptional))
	if err != nil {
		fail(err)
		return nil
	}
	m := &mrState{mr: mr}
	m.c = (*C.struct_rgo_mr)(C.calloc(1, C.sizeof_struct_rgo_mr))
	m.c.mr.context = c.context
	m.c.mr.pd = c
	m.c.mr.addr = addr
	m.c.mr.length = length
	m.c.mr.handle = C.uint32_t(nextHandle())
	m.c.mr.lkey = C.uint32_t(mr.LKey())
	m.c.mr.rkey = C.uint32_t(mr.RKey())
	m.c.h = C.uintptr_t(cgo.NewHandle(m))
	return &m.c.mr
}

// rgo_ibv_reg_mr_iova2 registers with an I/O virtual address; the soft
// device's addresses are virtual addresses, so iova must be addr.
//
//export rgo_ibv_reg_mr_iova2
func rgo_ibv_reg_mr_iova2(c *C.struct_ibv_pd, addr unsafe.Pointer, length C.size_t, iova C.uint64_t, access C.uint) *C.struct_ibv_mr {
	if uint64(iova) != uint64(uintptr(addr)) {
		fail(syscall.EOPNOTSUPP)
		return nil
	}
	return rgo_ibv_reg_mr(c, addr, length, C.int(access))
}

//export rgo_ibv_reg_mr_iova
func rgo_ibv_reg_mr_iova(c *C.struct_ibv_pd, addr unsafe.Pointer, length C.size_t, iova C.uint64_t, access C.int) *C.struct_ibv_mr {
	return rgo_ibv_reg_mr_iova2(c, addr, length, iova, C.uint(access))
}

//export rgo_ibv_dereg_mr
func rgo_ibv_dereg_mr(c *C.struct_ibv_mr) C.int {
	m := handleOf[*mrState]((*C.struct_rgo_mr)(unsafe.Pointer(c)).h)
	if err := m.mr.Dereg(); err != nil {
		return errno(err)
	}
	release(m.c.h, unsafe.Pointer(m.c))
	return 0
}

type mwState struct {
	mw *verbs.MW
	c  *C.struct_rgo_mw
}

func mwOf(c *C.struct_ibv_mw) *mwState {
	return handleOf[*mwState]((*C.struct_rgo_mw)(unsafe.Pointer(c)).h)
}

//export rgo_alloc_mw
func rgo_alloc_mw(c *C.struct_ibv_pd, typ C.enum_ibv_mw_type) *C.struct_ibv_mw {
	mw, err := pdOf(c).pd.AllocMW(verbs.MWType(typ))
	if err != nil {
		fail(err)
		return nil
	}
	m := &mwState{mw: mw}
	m.c = (*C.struct_rgo_mw)(C.calloc(1, C.sizeof_struct_rgo_mw))
	m.c.mw.context = c.context
	m.c.mw.pd = c
	m.c.mw.rkey = C.uint32_t(mw.RKey())
	m.c.mw.handle = C.uint32_t(nextHandle())
	m.c.mw._type = typ
	m.c.h = C.uintptr_t(cgo.NewHandle(m))
	return &m.c.mw
}

//export rgo_dealloc_mw
func rgo_dealloc_mw(c *C.struct_ibv_mw) C.int {
	m := mwOf(c)
	if err := m.mw.Dealloc(); err != nil {
		return errno(err)
	}
	release(m.c.h, unsafe.Pointer(m.c))
	return 0
}

type ahState struct {
	ah *verbs.AH
	c  *C.struct_rgo_ah
}

func ahOf(c *C.struct_ibv_ah) *ahState {
	return handleOf[*ahState]((*C.struct_rgo_ah)(unsafe.Pointer(c)).h)
}

func toAHAttr(a *C.struct_ibv_ah_attr) verbs.AHAttr {
	return verbs.AHAttr{
		GRH: verbs.GlobalRoute{DGID: *(*verbs.GID)(unsafe.Pointer(&a.grh.dgid)), FlowLabel: uint32(a.grh.flow_label),
			SGIDIndex: uint8(a.grh.sgid_index), HopLimit: uint8(a.grh.hop_limit), TrafficClass: uint8(a.grh.traffic_class)},
		DLID: uint16(a.dlid), SL: uint8(a.sl), SrcPathBits: uint8(a.src_path_bits), StaticRate: uint8(a.static_rate),
		IsGlobal: a.is_global != 0, PortNum: uint8(a.port_num),
	}
}

func fillAHAttr(o *C.struct_ibv_ah_attr, a *verbs.AHAttr) {
	*o = C.struct_ibv_ah_attr{dlid: C.uint16_t(a.DLID), sl: C.uint8_t(a.SL), src_path_bits: C.uint8_t(a.SrcPathBits),
		static_rate: C.uint8_t(a.StaticRate), port_num: C.uint8_t(a.PortNum)}
	if a.IsGlobal {
		o.is_global = 1
	}
	*(*verbs.GID)(unsafe.Pointer(&o.grh.dgid)) = a.GRH.DGID
	o.grh.flow_label = C.uint32_t(a.GRH.FlowLabel)
	o.grh.sgid_index = C.uint8_t(a.GRH.SGIDIndex)
	o.grh.hop_limit = C.uint8_t(a.GRH.HopLimit)
	o.grh.traffic_class = C.uint8_t(a.GRH.TrafficClass)
}

func newAH(c *C.struct_ibv_pd, ah *verbs.AH) *C.struct_ibv_ah {
	a := &ahState{ah: ah}
	a.c = (*C.struct_rgo_ah)(C.calloc(1, C.sizeof_struct_rgo_ah))
	a.c.ah.context = c.context
	a.c.ah.pd = c
	a.c.ah.handle = C.uint32_t(nextHandle())
	a.c.h = C.uintptr_t(cgo.NewHandle(a))
	return &a.c.ah
}

//export rgo_ibv_create_ah
func rgo_ibv_create_ah(c *C.struct_ibv_pd, attr *C.struct_ibv_ah_attr) *C.struct_ibv_ah {
	ah, err := pdOf(c).pd.CreateAH(toAHAttr(attr))
	if err != nil {
		fail(err)
		return nil
	}
	return newAH(c, ah)
}

// grhBytes is the GRH space at the start of a UD receive buffer.
func grhBytes(grh *C.struct_ibv_grh) []byte {
	if grh == nil {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(grh)), verbs.GRHLen)
}

//export rgo_ibv_create_ah_from_wc
func rgo_ibv_create_ah_from_wc(c *C.struct_ibv_pd, wc *C.struct_ibv_wc, grh *C.struct_ibv_grh, port C.uint8_t) *C.struct_ibv_ah {
	w := toWC(wc)
	ah, err := pdOf(c).pd.CreateAHFromWC(&w, grhBytes(grh), uint8(port))
	if err != nil {
		fail(err)
		return nil
	}
	return newAH(c, ah)
}

//export rgo_ibv_init_ah_from_wc
func rgo_ibv_init_ah_from_wc(c *C.struct_ibv_context, port C.uint8_t, wc *C.struct_ibv_wc, grh *C.struct_ibv_grh, out *C.struct_ibv_ah_attr) C.int {
	w := toWC(wc)
	a, err := ctxOf(c).ctx.InitAHFromWC(uint8(port), &w, grhBytes(grh))
	if err != nil {
		return failNeg(err)
	}
	fillAHAttr(out, &a)
	return 0
}

// toWC reads a struct ibv_wc back, for the verbs that take one.
func toWC(o *C.struct_ibv_wc) verbs.WC {
	w := verbs.WC{WRID: uint64(o.wr_id), Status: verbs.WCStatus(o.status), Opcode: verbs.WCOpcode(o.opcode),
		VendorErr: uint32(o.vendor_err), ByteLen: uint32(o.byte_len), QPNum: uint32(o.qp_num), SrcQP: uint32(o.src_qp),
		Flags: verbs.WCFlags(o.wc_flags), PKeyIndex: uint16(o.pkey_index), SLID: uint16(o.slid), SL: uint8(o.sl),
		DLIDPathBits: uint8(o.dlid_path_bits)}
	w.ImmData = *(*uint32)(unsafe.Add(unsafe.Pointer(o), C.offsetof_wc_imm))
	if w.Flags&verbs.WCFlagWithImm != 0 {
		w.ImmData = bswap32(w.ImmData)
	}
	return w
}

//export rgo_ibv_destroy_ah
func rgo_ibv_destroy_ah(c *C.struct_ibv_ah) C.int {
	a := ahOf(c)
	if err := a.ah.Destroy(); err != nil {
		return errno(err)
	}
	release(a.c.h, unsafe.Pointer(a.c))
	return 0
}

type srqState struct {
	srq    *verbs.SRQ
	ctx    *ctxState
	c      *C.struct_rgo_srq
	events uint32 // async events delivered (ctx.mu)
}

func srqOf(c *C.struct_ibv_srq) *srqState {
	return handleOf[*srqState]((*C.struct_rgo_srq)(unsafe.Pointer(c)).h)
}

//export rgo_ibv_create_srq
func rgo_ibv_create_srq(c *C.struct_ibv_pd, init *C.struct_ibv_srq_init_attr) *C.struct_ibv_srq {
	p := pdOf(c)
	srq, err := p.pd.CreateSRQ(verbs.SRQAttr{MaxWR: uint32(init.attr.max_wr), MaxSGE: uint32(init.attr.max_sge), SRQLimit: uint32(init.attr.srq_limit)})
	if err != nil {
		fail(err)
		return nil
	}
	if a, err := srq.Query(); err == nil {
		init.attr.max_wr = C.uint32_t(a.MaxWR)
		init.attr.max_sge = C.uint32_t(a.MaxSGE)
	}
	s := &srqState{srq: srq, ctx: p.ctx}
	s.c = (*C.struct_rgo_srq)(C.calloc(1, C.sizeof_struct_rgo_srq))
	s.c.srq.context = c.context
	s.c.srq.srq_context = init.srq_context
	s.c.srq.pd = c
	s.c.srq.handle = C.uint32_t(nextHandle())
	C.pthread_mutex_init(&s.c.srq.mutex, nil)
	C.pthread_cond_init(&s.c.srq.cond, nil)
	s.c.h = C.uintptr_t(cgo.NewHandle(s))
	p.ctx.mu.Lock()
	p.ctx.srqs[srq] = s
	p.ctx.mu.Unlock()
	return &s.c.srq
}

//export rgo_ibv_modify_srq
func rgo_ibv_modify_srq(c *C.struct_ibv_srq, attr *C.struct_ibv_srq_attr, mask C.int) C.int {
	a := verbs.SRQAttr{MaxWR: uint32(attr.max_wr), MaxSGE: uint32(attr.max_sge), SRQLimit: uint32(attr.srq_limit)}
	return errno(srqOf(c).srq.Modify(a, verbs.SRQAttrMask(mask)))
}

//export rgo_ibv_query_srq
func rgo_ibv_query_srq(c *C.struct_ibv_srq, out *C.struct_ibv_srq_attr) C.int {
	a, err := srqOf(c).srq.Query()
	if err != nil {
		return errno(err)
	}
	*out = C.struct_ibv_srq_attr{max_wr: C.uint32_t(a.MaxWR), max_sge: C.uint32_t(a.MaxSGE), srq_limit: C.uint32_t(a.SRQLimit)}
	return 0
}

//export rgo_ibv_destroy_srq
func rgo_ibv_destroy_srq(c *C.struct_ibv_srq) C.int {
	s := srqOf(c)
	if err := s.srq.Destroy(); err != nil {
		return errno(err)
	}
	s.ctx.mu.Lock()
	delete(s.ctx.srqs, s.srq)
	s.ctx.dropAsync(unsafe.Pointer(c))
	n := s.events
	s.ctx.mu.Unlock()
	C.rgo_wait_events(&c.mutex, &c.cond, &c.events_completed, C.uint32_t(n))
	C.pthread_cond_destroy(&c.cond)
	C.pthread_mutex_destroy(&c.mutex)
	release(s.c.h, unsafe.Pointer(s.c))
	return 0
}

//export rgo_post_srq_recv
func rgo_post_srq_recv(c *C.struct_ibv_srq, wr *C.struct_ibv_recv_wr, bad **C.struct_ibv_recv_wr) C.int {
	s := srqOf(c)
	var wrs [postBatch]verbs.RecvWR
	var cw [postBatch]*C.struct_ibv_recv_wr
	for wr != nil {
		var n int
		n, wr = recvBatch(wr, &wrs, &cw)
		if err := s.srq.PostRecv(wrs[:n]...); err != nil {
			*bad = cw[postErrorIndex(err, n)]
			return errno(err)
		}
	}
	return 0
}
