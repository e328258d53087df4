//go:build cgo && linux && rdmago_capi

package main

// #include <stdlib.h>
// #include <unistd.h>
// #include <pthread.h>
// #include "capi.h"
// void rgo_cq_wait_acked(struct ibv_cq *cq, uint32_t comp, uint32_t async);
import "C"

import (
	"context"
	"runtime/cgo"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rdma-go/rdma-go/verbs"
)

// chanState is the Go side of a struct ibv_comp_channel: a goroutine moves
// the channel's events to its fd, one count per event, and
// ibv_get_cq_event takes them in order.
type chanState struct {
	ch  *verbs.CompChannel
	ctx *ctxState
	c   *C.struct_rgo_comp_channel

	mu   sync.Mutex
	q    []*cqState
	stop context.CancelFunc
	done chan struct{}
}

// cqState is the Go side of a struct ibv_cq.
type cqState struct {
	cq  *verbs.CQ
	ctx *ctxState
	ch  *chanState
	c   *C.struct_rgo_cq

	// Events delivered, which ibv_destroy_cq waits to see acknowledged
	// (ctx.mu).
	compEvents, asyncEvents uint32
}

// ccq is the struct ibv_cq programs see (the start of the ibv_cq_ex).
func (q *cqState) ccq() *C.struct_ibv_cq { return (*C.struct_ibv_cq)(unsafe.Pointer(q.c)) }

func cqOf(c *C.struct_ibv_cq) *cqState {
	return handleOf[*cqState]((*C.struct_rgo_cq)(unsafe.Pointer(c)).h)
}

func chanOf(c *C.struct_ibv_comp_channel) *chanState {
	return handleOf[*chanState]((*C.struct_rgo_comp_channel)(unsafe.Pointer(c)).h)
}

//export rgo_ibv_create_comp_channel
func rgo_ibv_create_comp_channel(c *C.struct_ibv_context) *C.struct_ibv_comp_channel {
	s := ctxOf(c)
	ch, err := s.ctx.CreateCompChannel()
	if err != nil {
		fail(err)
		return nil
	}
	cs, err := wrapChannel(s, ch)
	if err != nil {
		ch.Destroy()
		fail(err)
		return nil
	}
	return &cs.c.ch
}

// wrapChannel makes the struct ibv_comp_channel of ch, a channel of s,
// with its fd and the goroutine that fills it.
func wrapChannel(s *ctxState, ch *verbs.CompChannel) (*chanState, error) {
	fd := C.rgo_eventfd()
	if fd < 0 {
		return nil, syscall.EMFILE
	}
	cs := &chanState{ch: ch, ctx: s, done: make(chan struct{})}
	cs.c = (*C.struct_rgo_comp_channel)(C.calloc(1, C.sizeof_struct_rgo_comp_channel))
	cs.c.ch.context = &s.c.vctx.context
	cs.c.ch.fd = fd
	cs.c.h = C.uintptr_t(cgo.NewHandle(cs))
	var bg context.Context
	bg, cs.stop = context.WithCancel(context.Background())
	go cs.loop(bg)
	return cs, nil
}

func (cs *chanState) loop(bg context.Context) {
	defer close(cs.done)
	for {
		vcq, err := cs.ch.GetEvent(bg)
		if err != nil {
			return
		}
		cs.ctx.mu.Lock()
		q := cs.ctx.cqs[vcq]
		cs.ctx.mu.Unlock()
		if q == nil {
			continue
		}
		cs.mu.Lock()
		cs.q = append(cs.q, q)
		cs.mu.Unlock()
		C.rgo_eventfd_post(cs.c.ch.fd)
	}
}

// rgo_pop_cq_event takes the oldest queued event: its CQ, or NULL when
// the count read from the fd was that of an event its CQ's destruction
// dropped. An event counts as delivered (for ibv_destroy_cq's wait for
// acknowledgements) once taken, as the kernel counts events read.
//
//export rgo_pop_cq_event
func rgo_pop_cq_event(c *C.struct_ibv_comp_channel) *C.struct_ibv_cq {
	cs := chanOf(c)
	cs.ctx.mu.Lock()
	defer cs.ctx.mu.Unlock()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.q) == 0 {
		return nil
	}
	q := cs.q[0]
	cs.q = cs.q[1:]
	q.compEvents++
	return q.ccq()
}

// drop removes q's queued events (q is being destroyed).
func (cs *chanState) drop(q *cqState) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.q = slices.DeleteFunc(cs.q, func(x *cqState) bool { return x == q })
}

//export rgo_ibv_destroy_comp_channel
func rgo_ibv_destroy_comp_channel(c *C.struct_ibv_comp_channel) C.int {
	cs := chanOf(c)
	if err := cs.ch.Destroy(); err != nil {
		return failNeg(err)
	}
	cs.free()
	return 0
}

// free stops the channel's goroutine and releases its C side.
func (cs *chanState) free() {
	cs.stop()
	<-cs.done
	C.close(cs.c.ch.fd)
	release(cs.c.h, unsafe.Pointer(cs.c))
}

//export rgo_ibv_create_cq
func rgo_ibv_create_cq(c *C.struct_ibv_context, cqe C.int, cqContext unsafe.Pointer, channel *C.struct_ibv_comp_channel, vector C.int) *C.struct_ibv_cq {
	s := ctxOf(c)
	if vector < 0 || vector >= c.num_comp_vectors {
		fail(syscall.EINVAL)
		return nil
	}
	var cs *chanState
	var vch *verbs.CompChannel
	if channel != nil {
		cs = chanOf(channel)
		vch = cs.ch
	}
	vcq, err := s.ctx.CreateCQ(int(cqe), vch)
	if err != nil {
		fail(err)
		return nil
	}
	return wrapCQ(s, vcq, cs, cqContext).ccq()
}

// wcExFlags are the completion fields an extended CQ can report: the
// standard ones, no timestamps, VLANs, flow tags or tag matching.
const wcExFlags = C.IBV_WC_EX_WITH_BYTE_LEN | C.IBV_WC_EX_WITH_IMM | C.IBV_WC_EX_WITH_QP_NUM |
	C.IBV_WC_EX_WITH_SRC_QP | C.IBV_WC_EX_WITH_SLID | C.IBV_WC_EX_WITH_SL | C.IBV_WC_EX_WITH_DLID_PATH_BITS

// rgo_create_cq_ex is verbs_context's create_cq_ex (ibv_create_cq_ex).
//
//export rgo_create_cq_ex
func rgo_create_cq_ex(c *C.struct_ibv_context, a *C.struct_ibv_cq_init_attr_ex) *C.struct_ibv_cq_ex {
	const flags = C.IBV_CREATE_CQ_ATTR_SINGLE_THREADED | C.IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN
	if a.wc_flags&^wcExFlags != 0 || a.comp_mask&^C.IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 ||
		a.comp_mask&C.IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 && a.flags&^flags != 0 {
		fail(syscall.EOPNOTSUPP)
		return nil
	}
	if a.cqe > 1<<30 {
		fail(syscall.EINVAL)
		return nil
	}
	cq := rgo_ibv_create_cq(c, C.int(a.cqe), a.cq_context, a.channel, C.int(a.comp_vector))
	if cq == nil {
		return nil
	}
	q := cqOf(cq)
	q.c.cqx.comp_mask = 0
	C.rgo_init_cq_ex_ops(q.c)
	return &q.c.cqx
}

// rgo_cq_start_poll begins a poll of an extended CQ: ENOENT when it is
// empty, else 0 with the completion current.
//
//export rgo_cq_start_poll
func rgo_cq_start_poll(c *C.struct_ibv_cq_ex, attr *C.struct_ibv_poll_cq_attr) C.int {
	if attr != nil && attr.comp_mask != 0 {
		return C.EINVAL
	}
	return rgo_cq_next_poll(c)
}

//export rgo_cq_next_poll
func rgo_cq_next_poll(c *C.struct_ibv_cq_ex) C.int {
	q := cqOf((*C.struct_ibv_cq)(unsafe.Pointer(c)))
	var wc [1]verbs.WC
	n, err := q.cq.Poll(wc[:])
	if err != nil {
		return errno(err)
	}
	if n == 0 {
		return C.ENOENT
	}
	fillWC(&q.c.cur, &wc[0])
	c.status = q.c.cur.status
	c.wr_id = q.c.cur.wr_id
	return 0
}

// wrapCQ makes the struct ibv_cq of vcq, a CQ of s on channel cs (nil for
// none).
func wrapCQ(s *ctxState, vcq *verbs.CQ, cs *chanState, cqContext unsafe.Pointer) *cqState {
	q := &cqState{cq: vcq, ctx: s, ch: cs}
	q.c = (*C.struct_rgo_cq)(C.calloc(1, C.sizeof_struct_rgo_cq))
	q.ccq().context = &s.c.vctx.context
	if cs != nil {
		q.ccq().channel = &cs.c.ch
	}
	q.ccq().cq_context = cqContext
	q.ccq().cqe = C.int(vcq.Cap())
	q.ccq().handle = C.uint32_t(nextHandle())
	C.pthread_mutex_init(&q.ccq().mutex, nil)
	C.pthread_cond_init(&q.ccq().cond, nil)
	q.c.h = C.uintptr_t(cgo.NewHandle(q))
	s.mu.Lock()
	s.cqs[vcq] = q
	s.mu.Unlock()
	return q
}

//export rgo_ibv_resize_cq
func rgo_ibv_resize_cq(c *C.struct_ibv_cq, cqe C.int) C.int {
	q := cqOf(c)
	if err := q.cq.Resize(int(cqe)); err != nil {
		return errno(err)
	}
	c.cqe = C.int(q.cq.Cap())
	return 0
}

//export rgo_ibv_destroy_cq
func rgo_ibv_destroy_cq(c *C.struct_ibv_cq) C.int {
	q := cqOf(c)
	if err := q.cq.Destroy(); err != nil {
		return errno(err)
	}
	q.free()
	return 0
}

// free releases the struct ibv_cq of a destroyed CQ, once the program
// acknowledged its events.
func (q *cqState) free() {
	c := q.ccq()
	q.ctx.mu.Lock()
	delete(q.ctx.cqs, q.cq)
	if q.ch != nil {
		q.ch.drop(q)
	}
	q.ctx.dropAsync(unsafe.Pointer(q.ccq()))
	comp, async := q.compEvents, q.asyncEvents
	q.ctx.mu.Unlock()
	C.rgo_cq_wait_acked(c, C.uint32_t(comp), C.uint32_t(async))
	C.pthread_cond_destroy(&c.cond)
	C.pthread_mutex_destroy(&c.mutex)
	release(q.c.h, unsafe.Pointer(q.c))
}

//export rgo_req_notify_cq
func rgo_req_notify_cq(c *C.struct_ibv_cq, solicitedOnly C.int) C.int {
	return errno(cqOf(c).cq.ReqNotify(solicitedOnly != 0))
}

// pollBatch is how many completions one Poll call moves (on the stack).
const pollBatch = 16

//export rgo_poll_cq
func rgo_poll_cq(c *C.struct_ibv_cq, n C.int, out *C.struct_ibv_wc) C.int {
	q := cqOf(c)
	dst := unsafe.Slice(out, max(int(n), 0))
	var wcs [pollBatch]verbs.WC
	got := 0
	for got < len(dst) {
		k, err := q.cq.Poll(wcs[:min(len(dst)-got, pollBatch)])
		if err != nil {
			if got > 0 {
				break
			}
			return -errno(err)
		}
		for i := range k {
			fillWC(&dst[got+i], &wcs[i])
		}
		got += k
		if k < pollBatch {
			break
		}
	}
	return C.int(got)
}

func fillWC(o *C.struct_ibv_wc, w *verbs.WC) {
	o.wr_id = C.uint64_t(w.WRID)
	o.status = C.enum_ibv_wc_status(w.Status)
	o.opcode = C.enum_ibv_wc_opcode(w.Opcode)
	o.vendor_err = C.uint32_t(w.VendorErr)
	o.byte_len = C.uint32_t(w.ByteLen)
	imm := w.ImmData
	if w.Flags&verbs.WCFlagWithImm != 0 {
		imm = bswap32(imm) // __be32 imm_data; invalidated_rkey is host order
	}
	*(*uint32)(unsafe.Add(unsafe.Pointer(o), C.offsetof_wc_imm)) = imm
	o.qp_num = C.uint32_t(w.QPNum)
	o.src_qp = C.uint32_t(w.SrcQP)
	o.wc_flags = C.uint(w.Flags)
	o.pkey_index = C.uint16_t(w.PKeyIndex)
	o.slid = C.uint16_t(w.SLID)
	o.sl = C.uint8_t(w.SL)
	o.dlid_path_bits = C.uint8_t(w.DLIDPathBits)
}
