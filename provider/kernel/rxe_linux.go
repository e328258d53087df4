//go:build linux

package kernel

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rdma-go/rdma-go/provider"
)

// The rxe fast path.
//
// Linux Soft-RoCE (rdma_rxe) keeps each send queue, receive queue and
// completion queue in a ring that the kernel maps into the process
// (struct rxe_queue_buf, <rdma/rdma_user_rxe.h>): posting a receive and
// polling a completion are stores and loads in that ring, and posting a
// send is stores plus one write(2) to the device's command fd as a
// doorbell. rdma-core's rxe provider does exactly that in C; reaching it
// through ctx->ops costs a cgo-style crossing per call (about 200 ns on
// this host's CPUs, microseconds under emulation), which is more than the
// work itself. So for rxe devices the provider does that work in Go, on
// the same rings: no crossing on the data path.
//
// The ring formats are the kernel's ABI. Where the rings are is not: the
// provider reads the mapping's address from rdma-core's private rxe
// structures (just after the public verbs_qp / verbs_cq) and accepts it
// only if /proc/self/maps shows a mapping of /dev/infiniband/uverbs* at
// that address, with the size and offset the same structure records, and
// the ring's own header is consistent. Anything else, or
// RDMA_GO_RXE_FASTPATH=off, leaves that object on the ctx->ops path.
// UD sends, memory-window binds and local invalidates, and SRQs always
// take the ctx->ops path.

// rxeVendorID is the vendor_id rdma_rxe reports (RXE_VENDOR_ID).
const rxeVendorID = 0xffffff

// Offsets in rdma-core's private structures (providers/rxe/rxe.h, from
// rdma-core 28 through today): struct rxe_cq begins with struct verbs_cq
// (a union of ibv_cq and ibv_cq_ex), then struct mminfo, then the queue
// pointer; struct rxe_qp begins with struct verbs_qp (a union of ibv_qp
// and ibv_qp_ex, a u32 and a pointer), then mminfo and struct rxe_wq for
// the receive queue, then the same for the send queue.
const (
	rxeCQMMInfo   = sizeofCQEx
	rxeCQQueue    = rxeCQMMInfo + 16
	rxeQPRQMMInfo = sizeofQPEx + 16 // + comp_mask, xrcd
	rxeQPRQQueue  = rxeQPRQMMInfo + 16
	rxeQPSQMMInfo = rxeQPRQQueue + 24 // struct rxe_wq: queue, lock, max_sge, max_inline
	rxeQPSQQueue  = rxeQPSQMMInfo + 16
)

// struct rxe_queue_buf's header: the producer and consumer indices sit on
// cache lines of their own, the elements follow.
const (
	rxeQLog2ElemSize = 0
	rxeQIndexMask    = 4
	rxeQProducer     = 128
	rxeQConsumer     = 256
	rxeQData         = 384
)

// rxeDMA is struct rxe_dma_info without its flexible array (SGEs or
// inline data follow it).
type rxeDMA struct {
	Length, Resid, CurSGE, NumSGE, SGEOffset, _ uint32
}

// rxeSendWQE is struct rxe_send_wqe without its flexible array. The
// union wr.wr is spelled as the RDMA and atomic members use it (UD
// sends take the ctx->ops path).
type rxeSendWQE struct {
	WRID       uint64
	_          uint32
	Opcode     uint32
	SendFlags  uint32
	Ex         uint32 // imm_data (big-endian) or invalidate_rkey
	RemoteAddr uint64 // wr.rdma.remote_addr, wr.atomic.remote_addr
	CompareAdd uint64 // wr.atomic.compare_add; its low half is wr.rdma.rkey
	Swap       uint64
	AtomicRKey uint32
	_          [144 - 52]byte
	Status     uint32
	State      uint32
	IOVA       uint64
	Mask       uint32
	FirstPSN   uint32
	LastPSN    uint32
	AckLength  uint32
	SSN        uint32
	HasRDAtom  uint32
	DMA        rxeDMA
}

// rxeRecvWQE is struct rxe_recv_wqe without its SGEs.
type rxeRecvWQE struct {
	WRID uint64
	_    [2]uint32
	DMA  rxeDMA
}

// cPostSend is the doorbell: struct ibv_post_send (the write(2) command
// IB_USER_VERBS_CMD_POST_SEND) with no work requests, which tells rxe to
// look at the send queue; and the response it writes.
type cPostSend struct {
	Command  uint32
	InWords  uint16
	OutWords uint16
	Response uint64
	QPHandle uint32
	WRCount  uint32
	SGECount uint32
	WQESize  uint32
	Resp     uint32 // struct ib_uverbs_post_send_resp, pointed to by Response
	_        uint32
}

const ibUserVerbsCmdPostSend = 28 // IB_USER_VERBS_CMD_POST_SEND

// rxeFastPathEnabled is false when RDMA_GO_RXE_FASTPATH=off.
var rxeFastPathEnabled = os.Getenv("RDMA_GO_RXE_FASTPATH") != "off"

// rxeRing is one mapped rxe queue.
type rxeRing struct {
	base  uintptr
	mask  uint32
	shift uint32
}

func (r *rxeRing) producer() *atomic.Uint32 { return (*atomic.Uint32)(cptr(r.base + rxeQProducer)) }
func (r *rxeRing) consumer() *atomic.Uint32 { return (*atomic.Uint32)(cptr(r.base + rxeQConsumer)) }
func (r *rxeRing) slot(i uint32) uintptr {
	return r.base + rxeQData + uintptr(i&r.mask)<<r.shift
}

// free is how many elements a producer may still add.
func (r *rxeRing) free() uint32 {
	return (r.consumer().Load() - r.producer().Load() - 1) & r.mask
}

// uverbsMap is one mapping of a uverbs device file.
type uverbsMap struct{ start, end, offset uint64 }

// uverbsMaps lists the process's mappings of /dev/infiniband/uverbs*.
func uverbsMaps() ([]uverbsMap, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	var ms []uverbsMap
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/dev/infiniband/uverbs") {
			continue
		}
		se := strings.SplitN(f[0], "-", 2)
		if len(se) != 2 {
			continue
		}
		s, err1 := strconv.ParseUint(se[0], 16, 64)
		e, err2 := strconv.ParseUint(se[1], 16, 64)
		o, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 == nil && err2 == nil && err3 == nil {
			ms = append(ms, uverbsMap{s, e, o})
		}
	}
	return ms, nil
}

// rxeRingAt validates the ring whose struct mminfo is at obj+mmOff and
// whose pointer is at obj+qOff in one of rdma-core's rxe objects, against
// the process's mappings, and that its elements are at least minElem
// bytes.
func rxeRingAt(maps []uverbsMap, obj, mmOff, qOff uintptr, minElem uint32) (rxeRing, bool) {
	off := *(*uint64)(cptr(obj + mmOff))
	size := uint64(*(*uint32)(cptr(obj + mmOff + 8)))
	base := *(*uintptr)(cptr(obj + qOff))
	if base == 0 || size <= rxeQData {
		return rxeRing{}, false
	}
	const page = 4096
	ok := false
	for _, m := range maps {
		if m.start == uint64(base) && m.offset == off && m.end-m.start == (size+page-1)&^(page-1) {
			ok = true
			break
		}
	}
	if !ok {
		return rxeRing{}, false
	}
	r := rxeRing{base: base,
		shift: *(*uint32)(cptr(base + rxeQLog2ElemSize)),
		mask:  *(*uint32)(cptr(base + rxeQIndexMask))}
	if r.shift >= 20 || 1<<r.shift < minElem || r.mask&(r.mask+1) != 0 ||
		rxeQData+(uint64(r.mask)+1)<<r.shift > size ||
		r.producer().Load() > r.mask || r.consumer().Load() > r.mask {
		return rxeRing{}, false
	}
	return r, true
}

// isRXE reports whether the context's device is rdma_rxe and the fast
// path is wanted.
func (c *Context) isRXE() bool {
	if !rxeFastPathEnabled {
		return false
	}
	a := new(cDeviceAttr)
	if call(c.lib.queryDevice, c.ctx, uintptr(unsafe.Pointer(a))) != 0 {
		return false
	}
	return a.VendorID == rxeVendorID && a.VendorPartID == 0
}

// findRXERing finds the CQ's ring, if the fast path applies.
func (q *cq) findRXERing() {
	q.ring = rxeRing{}
	if !q.c.rxe {
		return
	}
	maps, err := uverbsMaps()
	if err != nil {
		return
	}
	if r, ok := rxeRingAt(maps, q.cq, rxeCQMMInfo, rxeCQQueue, uint32(unsafe.Sizeof(cWC{}))); ok {
		q.ring = r
	}
}

// pollRing moves up to len(wc) completions out of the CQ's ring, as
// rdma-core's rxe_poll_cq does (q.mu held).
func (q *cq) pollRing(wc []provider.WC) int {
	r := &q.ring
	prod := r.producer().Load()
	cons := r.consumer().Load()
	got := 0
	for got < len(wc) && cons != prod {
		fromCWC(&wc[got], (*cWC)(cptr(r.slot(cons))))
		cons = (cons + 1) & r.mask
		got++
	}
	if got > 0 {
		r.consumer().Store(cons)
	}
	return got
}

// rxeQP is the fast-path state of an rxe QP.
type rxeQP struct {
	sq, rq     rxeRing // base 0: the ctx->ops path
	maxSendSGE int
	maxRecvSGE int
	maxInline  int
	ssn        uint32
	cmdFD      int
	dbBytes    []byte // the doorbell command, a cPostSend in q.smem
}

// findRXERings finds the QP's rings, if the fast path applies. UD QPs
// keep the ctx->ops path for sends (a send names an address handle whose
// number only rdma-core's private rxe_ah knows) but post receives in Go.
func (q *qp) findRXERings(init *provider.QPInitAttr, cp cQPCap) {
	if !q.p.c.rxe {
		return
	}
	maps, err := uverbsMaps()
	if err != nil {
		return
	}
	x := &q.rxe
	x.maxSendSGE, x.maxRecvSGE, x.maxInline = int(cp.MaxSendSGE), int(cp.MaxRecvSGE), int(cp.MaxInlineData)
	if init.SRQ == nil {
		if r, ok := rxeRingAt(maps, q.qp, rxeQPRQMMInfo, rxeQPRQQueue,
			uint32(unsafe.Sizeof(rxeRecvWQE{}))+uint32(x.maxRecvSGE)*uint32(unsafe.Sizeof(cSGE{}))); ok {
			x.rq = r
		}
	}
	if init.Type == provider.QPTypeUD {
		return
	}
	if r, ok := rxeRingAt(maps, q.qp, rxeQPSQMMInfo, rxeQPSQQueue,
		uint32(unsafe.Sizeof(rxeSendWQE{}))+uint32(max(x.maxSendSGE*int(unsafe.Sizeof(cSGE{})), x.maxInline))); ok {
		x.sq = r
		x.cmdFD = int(*(*int32)(cptr(q.p.c.ctx + ctxCmdFD)))
		x.dbBytes = q.smem.mem[q.sdbOff : q.sdbOff+int(unsafe.Offsetof(cPostSend{}.Resp))]
		*(*cPostSend)(unsafe.Pointer(&q.smem.mem[q.sdbOff])) = cPostSend{Command: ibUserVerbsCmdPostSend,
			InWords: uint16(len(x.dbBytes) / 4), OutWords: 1,
			Response: uint64(q.smem.addr(q.sdbOff + int(unsafe.Offsetof(cPostSend{}.Resp)))),
			QPHandle: *(*uint32)(cptr(q.qp + qpHandle)),
			WQESize:  uint32(unsafe.Sizeof(cSendWR{}))}
	}
}

// rxeSendable reports whether every work request can go through the
// send ring.
func rxeSendable(wrs []provider.SendWR) bool {
	for i := range wrs {
		switch wrs[i].Opcode {
		case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRSend, provider.WRSendWithImm,
			provider.WRSendWithInv, provider.WRRDMARead, provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		default:
			return false
		}
		if wrs[i].AH != nil {
			return false
		}
	}
	return true
}

// fillSend writes send work requests into the send ring, one element
// each, up to the first that rdma-core's checks refuse or that finds the
// ring full, and publishes them to the kernel; the caller then rings the
// doorbell (ring) if it wrote any. It returns how many it wrote and why it
// stopped early. (It and fillRecv call their checks and writers directly:
// passed as func values they were indirect calls, which under emulation
// cost ib_send_lat 6 % of its latency on rxe0.)
func (x *rxeQP) fillSend(wrs []provider.SendWR) (int, error) {
	f := x.sq.fill()
	done := 0
	var err error
	for ; done < len(wrs); done++ {
		w := &wrs[done]
		if len(w.SGL) > x.maxSendSGE || w.Opcode == provider.WRAtomicCmpAndSwp || w.Opcode == provider.WRAtomicFetchAndAdd ||
			w.Flags&provider.SendInline != 0 && provider.SGLLen(w.SGL) > uint64(x.maxInline) {
			if err = x.checkSend(w); err != nil {
				break
			}
		}
		slot, ok := f.next()
		if !ok {
			err = provider.Errorf(provider.ErrNoMemory, "ibv_post_send: send queue full")
			break
		}
		x.writeSend(slot, w)
	}
	f.publish()
	return done, err
}

// fillRecv is fillSend for receive work requests and the receive ring
// (which has no doorbell: the kernel reads it when a message arrives).
func (x *rxeQP) fillRecv(wrs []provider.RecvWR) (int, error) {
	f := x.rq.fill()
	done := 0
	var err error
	for ; done < len(wrs); done++ {
		w := &wrs[done]
		if len(w.SGL) > x.maxRecvSGE {
			err = provider.Errorf(provider.ErrInvalidArgument, "ibv_post_recv: %d SGEs, the QP takes %d", len(w.SGL), x.maxRecvSGE)
			break
		}
		slot, ok := f.next()
		if !ok {
			err = provider.Errorf(provider.ErrNoMemory, "ibv_post_recv: receive queue full")
			break
		}
		writeRecv(slot, w)
	}
	f.publish()
	return done, err
}

// ringFill is a producer's cursor in a ring while it writes elements.
type ringFill struct {
	r          *rxeRing
	prod, free uint32
	n          int
}

// fill starts writing elements into r.
func (r *rxeRing) fill() ringFill {
	return ringFill{r: r, prod: r.producer().Load(), free: r.free()}
}

// next returns the slot of the next element, or false if the ring is full.
func (f *ringFill) next() (uintptr, bool) {
	if f.free == 0 {
		return 0, false
	}
	slot := f.r.slot(f.prod)
	f.prod = (f.prod + 1) & f.r.mask
	f.free--
	f.n++
	return slot, true
}

// publish hands the elements written to the kernel (moves the producer
// index), if there are any.
func (f *ringFill) publish() {
	if f.n > 0 {
		f.r.producer().Store(f.prod)
	}
}

// ring rings the send queue's doorbell. rxe does the requester's work for
// a user QP in the doorbell's system call, on the CPU: it never sleeps, so
// the call is made raw (without handing the P over to the scheduler, which
// costs more than the rest of a small send under emulation).
func (x *rxeQP) ring() syscall.Errno {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(x.cmdFD),
		uintptr(unsafe.Pointer(&x.dbBytes[0])), uintptr(len(x.dbBytes)))
	if errno == 0 && int(n) != len(x.dbBytes) {
		errno = syscall.EIO
	}
	return errno
}

// checkSend checks what rdma-core's rxe provider checks before posting
// (fillSend calls it only for what its quick test does not pass).
func (x *rxeQP) checkSend(w *provider.SendWR) error {
	if len(w.SGL) > x.maxSendSGE {
		return provider.Errorf(provider.ErrInvalidArgument, "ibv_post_send: %d SGEs, the QP takes %d", len(w.SGL), x.maxSendSGE)
	}
	n := provider.SGLLen(w.SGL)
	switch w.Opcode {
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		if n < 8 || w.RemoteAddr&7 != 0 {
			return provider.Errorf(provider.ErrInvalidArgument, "ibv_post_send: atomic needs 8 bytes at an 8-byte aligned address")
		}
	}
	if w.Flags&provider.SendInline != 0 && n > uint64(x.maxInline) {
		return provider.Errorf(provider.ErrInvalidArgument, "ibv_post_send: %d bytes inline, the QP takes %d", n, x.maxInline)
	}
	return nil
}

// writeSend fills the send WQE at slot from w.
func (x *rxeQP) writeSend(slot uintptr, w *provider.SendWR) {
	e := (*rxeSendWQE)(cptr(slot))
	*e = rxeSendWQE{WRID: w.ID, Opcode: uint32(w.Opcode), SendFlags: uint32(w.Flags), SSN: x.ssn}
	x.ssn++
	switch w.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
		e.Ex = bswap32(w.ImmData)
	case provider.WRSendWithInv:
		e.Ex = w.InvalidateRKey
	}
	switch w.Opcode {
	case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
		e.RemoteAddr, e.CompareAdd = w.RemoteAddr, uint64(w.RKey)
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		e.RemoteAddr, e.CompareAdd, e.Swap, e.AtomicRKey = w.RemoteAddr, w.CompareAdd, w.Swap, w.RKey
	}
	e.IOVA = w.RemoteAddr
	var n uint32
	data := slot + unsafe.Sizeof(rxeSendWQE{})
	if w.Flags&provider.SendInline != 0 {
		for _, s := range w.SGL {
			if s.Length > 0 {
				copy(unsafe.Slice((*byte)(cptr(data+uintptr(n))), s.Length), unsafe.Slice((*byte)(cptr(uintptr(s.Addr))), s.Length))
			}
			n += s.Length
		}
	} else {
		sges := unsafe.Slice((*cSGE)(cptr(data)), len(w.SGL))
		for j, s := range w.SGL {
			sges[j] = cSGE(s)
			n += s.Length
		}
	}
	e.DMA = rxeDMA{Length: n, Resid: n, NumSGE: uint32(len(w.SGL))}
}

// writeRecv fills the receive WQE at slot from w.
func writeRecv(slot uintptr, w *provider.RecvWR) {
	sges := unsafe.Slice((*cSGE)(cptr(slot+unsafe.Sizeof(rxeRecvWQE{}))), len(w.SGL))
	var n uint32
	for j, s := range w.SGL {
		sges[j] = cSGE(s)
		n += s.Length
	}
	*(*rxeRecvWQE)(cptr(slot)) = rxeRecvWQE{WRID: w.ID, DMA: rxeDMA{Length: n, Resid: n, NumSGE: uint32(len(w.SGL))}}
}
