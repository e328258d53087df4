//go:build cgo && linux && rdmago_capi

package main

// #include "capi.h"
import "C"

import (
	"syscall"
	"unsafe"

	"github.com/rdma-go/rdma-go/verbs"
)

// The ibv_wr_* API (struct ibv_qp_ex): wr_start opens a batch, each
// wr_<opcode> call starts a work request with the ID and flags the program
// set in qpx->wr_id and qpx->wr_flags, the wr_set_* calls complete it, and
// wr_complete posts the batch. The first mistake is kept and reported by
// wr_complete, which then posts nothing, as rdma-core's providers do.

func (q *qpState) start(c *C.struct_ibv_qp_ex, op verbs.WROpcode) *verbs.SendWR {
	q.pending = append(q.pending, verbs.SendWR{ID: uint64(c.wr_id), Opcode: op, Flags: verbs.SendFlags(c.wr_flags)})
	q.inline = append(q.inline, nil)
	return &q.pending[len(q.pending)-1]
}

// last is the work request the wr_set_* calls complete.
func (q *qpState) last() *verbs.SendWR {
	if len(q.pending) == 0 {
		if q.werr == nil {
			q.werr = syscall.EINVAL
		}
		return &verbs.SendWR{}
	}
	return &q.pending[len(q.pending)-1]
}

// rgo_wr_unsupported records an ibv_wr_* call the soft device does not
// support (send_tso, set_xrc_srqn, atomic_write).
//
//export rgo_wr_unsupported
func rgo_wr_unsupported(c *C.struct_ibv_qp_ex) {
	q := qpxOf(c)
	if q.werr == nil {
		q.werr = syscall.EOPNOTSUPP
	}
}

//export rgo_wr_start
func rgo_wr_start(c *C.struct_ibv_qp_ex) {
	q := qpxOf(c)
	q.pending, q.sges, q.inline, q.werr = q.pending[:0], q.sges[:0], q.inline[:0], nil
}

//export rgo_wr_complete
func rgo_wr_complete(c *C.struct_ibv_qp_ex) C.int {
	q := qpxOf(c)
	err := q.werr
	for start := 0; err == nil && start < len(q.pending); start += postBatch {
		chunk := q.pending[start:min(start+postBatch, len(q.pending))]
		err = q.post(chunk, q.inline[start:start+len(chunk)])
	}
	rgo_wr_abort(c)
	if err != nil {
		return fail(err) // errno set too, as rdma-core's providers leave it
	}
	return 0
}

//export rgo_wr_abort
func rgo_wr_abort(c *C.struct_ibv_qp_ex) {
	q := qpxOf(c)
	clear(q.pending)
	clear(q.inline)
	q.pending, q.sges, q.inline, q.werr = q.pending[:0], q.sges[:0], q.inline[:0], nil
}

//export rgo_wr_rdma_write
func rgo_wr_rdma_write(c *C.struct_ibv_qp_ex, rkey C.uint32_t, addr C.uint64_t) {
	w := qpxOf(c).start(c, verbs.WRRDMAWrite)
	w.RKey, w.RemoteAddr = uint32(rkey), uint64(addr)
}

//export rgo_wr_rdma_write_imm
func rgo_wr_rdma_write_imm(c *C.struct_ibv_qp_ex, rkey C.uint32_t, addr C.uint64_t, imm C.__be32) {
	w := qpxOf(c).start(c, verbs.WRRDMAWriteWithImm)
	w.RKey, w.RemoteAddr, w.ImmData = uint32(rkey), uint64(addr), bswap32(uint32(imm))
}

//export rgo_wr_rdma_read
func rgo_wr_rdma_read(c *C.struct_ibv_qp_ex, rkey C.uint32_t, addr C.uint64_t) {
	w := qpxOf(c).start(c, verbs.WRRDMARead)
	w.RKey, w.RemoteAddr = uint32(rkey), uint64(addr)
}

//export rgo_wr_send
func rgo_wr_send(c *C.struct_ibv_qp_ex) { qpxOf(c).start(c, verbs.WRSend) }

//export rgo_wr_send_imm
func rgo_wr_send_imm(c *C.struct_ibv_qp_ex, imm C.__be32) {
	qpxOf(c).start(c, verbs.WRSendWithImm).ImmData = bswap32(uint32(imm))
}

//export rgo_wr_send_inv
func rgo_wr_send_inv(c *C.struct_ibv_qp_ex, rkey C.uint32_t) {
	qpxOf(c).start(c, verbs.WRSendWithInv).InvalidateRKey = uint32(rkey)
}

//export rgo_wr_local_inv
func rgo_wr_local_inv(c *C.struct_ibv_qp_ex, rkey C.uint32_t) {
	qpxOf(c).start(c, verbs.WRLocalInv).InvalidateRKey = uint32(rkey)
}

//export rgo_wr_atomic_cmp_swp
func rgo_wr_atomic_cmp_swp(c *C.struct_ibv_qp_ex, rkey C.uint32_t, addr, compare, swap C.uint64_t) {
	w := qpxOf(c).start(c, verbs.WRAtomicCmpAndSwp)
	w.RKey, w.RemoteAddr, w.CompareAdd, w.Swap = uint32(rkey), uint64(addr), uint64(compare), uint64(swap)
}

//export rgo_wr_atomic_fetch_add
func rgo_wr_atomic_fetch_add(c *C.struct_ibv_qp_ex, rkey C.uint32_t, addr, add C.uint64_t) {
	w := qpxOf(c).start(c, verbs.WRAtomicFetchAndAdd)
	w.RKey, w.RemoteAddr, w.CompareAdd = uint32(rkey), uint64(addr), uint64(add)
}

//export rgo_wr_bind_mw
func rgo_wr_bind_mw(c *C.struct_ibv_qp_ex, mw *C.struct_ibv_mw, rkey C.uint32_t, info *C.struct_ibv_mw_bind_info) {
	q := qpxOf(c)
	w := q.start(c, verbs.WRBindMW)
	if mw == nil || info == nil {
		q.werr = syscall.EINVAL
		return
	}
	w.BindMW, w.BindRKey, w.BindInfo = mwOf(mw).mw, uint32(rkey), toBindInfo(info)
}

//export rgo_wr_set_ud_addr
func rgo_wr_set_ud_addr(c *C.struct_ibv_qp_ex, ah *C.struct_ibv_ah, qpn, qkey C.uint32_t) {
	q := qpxOf(c)
	w := q.last()
	if ah == nil {
		q.werr = syscall.EINVAL
		return
	}
	w.AH, w.RemoteQPN, w.RemoteQKey = ahOf(ah).ah, uint32(qpn), uint32(qkey)
}

//export rgo_wr_set_sge
func rgo_wr_set_sge(c *C.struct_ibv_qp_ex, lkey C.uint32_t, addr C.uint64_t, length C.uint32_t) {
	q := qpxOf(c)
	w := q.last()
	q.sges = append(q.sges, verbs.SGE{Addr: uint64(addr), Length: uint32(length), LKey: uint32(lkey)})
	w.SGL = q.sges[len(q.sges)-1:]
}

//export rgo_wr_set_sge_list
func rgo_wr_set_sge_list(c *C.struct_ibv_qp_ex, n C.size_t, list *C.struct_ibv_sge) {
	q := qpxOf(c)
	w := q.last()
	start := len(q.sges)
	q.sges = append(q.sges, sgl(list, C.int(n))...)
	w.SGL = q.sges[start:]
}

// setInline copies the program's buffers (they may be reused as soon as
// the call returns) for wr_complete, which sends them inline.
func (q *qpState) setInline(bufs [][]byte) {
	w := q.last()
	if len(q.pending) == 0 {
		return
	}
	var cp [][]byte
	for _, b := range bufs {
		if len(b) > 0 {
			cp = append(cp, append([]byte(nil), b...))
		}
	}
	q.inline[len(q.pending)-1] = cp
	w.SGL = nil
	w.Flags |= verbs.SendInline
}

//export rgo_wr_set_inline_data
func rgo_wr_set_inline_data(c *C.struct_ibv_qp_ex, addr unsafe.Pointer, length C.size_t) {
	var b []byte
	if addr != nil {
		b = unsafe.Slice((*byte)(addr), int(length))
	}
	qpxOf(c).setInline([][]byte{b})
}

//export rgo_wr_set_inline_data_list
func rgo_wr_set_inline_data_list(c *C.struct_ibv_qp_ex, n C.size_t, list *C.struct_ibv_data_buf) {
	bufs := make([][]byte, 0, n)
	for _, d := range unsafe.Slice(list, int(n)) {
		if d.addr != nil {
			bufs = append(bufs, unsafe.Slice((*byte)(d.addr), int(d.length)))
		}
	}
	qpxOf(c).setInline(bufs)
}
