//go:build cgo && linux && rdmago_capi

package main

// #include <stdlib.h>
// #include <string.h>
// #include <unistd.h>
// #include <pthread.h>
// #include "capi.h"
import "C"

import (
	"context"
	"errors"
	"runtime/cgo"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rdma-go/rdma-go/verbs"
)

// devices holds one struct ibv_device per device name for the life of the
// process, as libibverbs does: programs keep the pointers after
// ibv_free_device_list.
var devices struct {
	sync.Mutex
	byName map[string]*C.struct_rgo_device
}

// fail sets errno to err's (EIO when err carries none) and returns it.
func fail(err error) C.int {
	e := verbs.ErrnoOf(err)
	C.rgo_set_errno(C.int(e))
	return C.int(e)
}

// failNeg sets errno from err and returns -1, as the verbs that report
// failure that way do.
func failNeg(err error) C.int {
	fail(err)
	return -1
}

// errno turns err into the positive errno value that verbs returning an
// error number report (0 for nil).
func errno(err error) C.int {
	if err == nil {
		return 0
	}
	return C.int(verbs.ErrnoOf(err))
}

// setString copies s into a fixed C char array of n bytes, NUL-terminated.
func setString(dst *C.char, n int, s string) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(dst)), n)
	clear(b)
	copy(b[:n-1], s)
}

// release ends a wrapper: deletes its handle h and frees its C memory p.
func release(h C.uintptr_t, p unsafe.Pointer) {
	cgo.Handle(h).Delete()
	C.free(p)
}

// handleOf returns the Go value behind a wrapper's cgo handle.
func handleOf[T any](h C.uintptr_t) T { return cgo.Handle(h).Value().(T) }

// cdevice returns the struct ibv_device of d, creating it on first use.
func cdevice(d *verbs.Device) *C.struct_rgo_device {
	devices.Lock()
	defer devices.Unlock()
	if devices.byName == nil {
		devices.byName = map[string]*C.struct_rgo_device{}
	}
	if cd := devices.byName[d.Name()]; cd != nil {
		return cd
	}
	cd := (*C.struct_rgo_device)(C.calloc(1, C.sizeof_struct_rgo_device))
	cd.dev.node_type = C.IBV_NODE_CA
	cd.dev.transport_type = C.IBV_TRANSPORT_IB
	setString(&cd.dev.name[0], len(cd.dev.name), d.Name())
	setString(&cd.dev.dev_name[0], len(cd.dev.dev_name), d.Name())
	// Soft devices have no sysfs directory: the paths name where one
	// would be, and ibv_read_sysfs_file finds nothing there.
	setString(&cd.dev.dev_path[0], len(cd.dev.dev_path), "/sys/class/infiniband_verbs/"+d.Name())
	setString(&cd.dev.ibdev_path[0], len(cd.dev.ibdev_path), "/sys/class/infiniband/"+d.Name())
	cd.h = C.uintptr_t(cgo.NewHandle(d))
	devices.byName[d.Name()] = cd
	return cd
}

//export rgo_ibv_get_device_list
func rgo_ibv_get_device_list(num *C.int) **C.struct_ibv_device {
	ds, err := verbs.Devices()
	if err != nil {
		fail(err)
		return nil
	}
	list := (**C.struct_ibv_device)(C.calloc(C.size_t(len(ds)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	s := unsafe.Slice(list, len(ds)+1)
	for i, d := range ds {
		s[i] = &cdevice(d).dev
	}
	if num != nil {
		*num = C.int(len(ds))
	}
	return list
}

//export rgo_ibv_free_device_list
func rgo_ibv_free_device_list(list **C.struct_ibv_device) { C.free(unsafe.Pointer(list)) }

//export rgo_ibv_get_device_name
func rgo_ibv_get_device_name(d *C.struct_ibv_device) *C.char { return &d.name[0] }

//export rgo_ibv_get_device_guid
func rgo_ibv_get_device_guid(d *C.struct_ibv_device) C.uint64_t {
	g := handleOf[*verbs.Device]((*C.struct_rgo_device)(unsafe.Pointer(d)).h).GUID()
	return C.uint64_t(bswap64(g)) // __be64
}

//export rgo_ibv_get_device_index
func rgo_ibv_get_device_index(d *C.struct_ibv_device) C.int {
	ds, err := verbs.Devices()
	if err == nil {
		name := C.GoString(&d.name[0])
		for i, x := range ds {
			if x.Name() == name {
				return C.int(i)
			}
		}
	}
	return -1
}

func bswap64(v uint64) uint64 {
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (56 - 8*i))
	}
	return *(*uint64)(unsafe.Pointer(&b))
}

func bswap32(v uint32) uint32 { return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24 }

// ctxState is the Go side of an open struct ibv_context.
type ctxState struct {
	ctx *verbs.Context
	c   *C.struct_rgo_context

	mu    sync.Mutex
	cqs   map[*verbs.CQ]*cqState
	qps   map[*verbs.QP]*qpState
	srqs  map[*verbs.SRQ]*srqState
	async []C.struct_ibv_async_event // delivered through async_fd

	stop context.CancelFunc
	done chan struct{}
}

func ctxOf(c *C.struct_ibv_context) *ctxState {
	rc := (*C.struct_rgo_context)(unsafe.Pointer(uintptr(unsafe.Pointer(c)) - C.offsetof_rgo_context_context))
	return handleOf[*ctxState](rc.h)
}

//export rgo_ibv_open_device
func rgo_ibv_open_device(d *C.struct_ibv_device) *C.struct_ibv_context {
	dev := handleOf[*verbs.Device]((*C.struct_rgo_device)(unsafe.Pointer(d)).h)
	vc, err := dev.Open()
	if err != nil {
		fail(err)
		return nil
	}
	s, err := newContext(d, vc)
	if err != nil {
		vc.Close()
		fail(err)
		return nil
	}
	return &s.c.vctx.context
}

// borrowed holds the struct ibv_context of each context that rdmacm opened
// for its ids (rdma_cm_id.verbs): made on first use, kept while the
// process lives, never closed by the program.
var borrowed struct {
	sync.Mutex
	m map[*verbs.Context]*ctxState
}

// borrowContext returns the struct ibv_context of vc, an open context the
// program did not open itself.
func borrowContext(vc *verbs.Context) (*ctxState, error) {
	borrowed.Lock()
	defer borrowed.Unlock()
	if s := borrowed.m[vc]; s != nil {
		return s, nil
	}
	s, err := newContext(&cdevice(vc.Device()).dev, vc)
	if err != nil {
		return nil, err
	}
	if borrowed.m == nil {
		borrowed.m = map[*verbs.Context]*ctxState{}
	}
	borrowed.m[vc] = s
	return s, nil
}

// newContext makes the struct ibv_context of vc, an open context of d,
// with its async event fd and the goroutine that fills it.
func newContext(d *C.struct_ibv_device, vc *verbs.Context) (*ctxState, error) {
	attr, err := vc.QueryDevice()
	if err != nil {
		return nil, err
	}
	fd := C.rgo_eventfd()
	if fd < 0 {
		return nil, syscall.EMFILE
	}
	rc := (*C.struct_rgo_context)(C.calloc(1, C.sizeof_struct_rgo_context))
	ic := &rc.vctx.context
	ic.device = d
	// No kernel command channel: cmd_fd is /dev/null, so that a program
	// that passes it on (dup, ibv_import_device) meets a valid fd.
	ic.cmd_fd = C.rgo_devnull()
	ic.async_fd = fd
	ic.num_comp_vectors = C.int(max(attr.NumCompVectors, 1))
	C.pthread_mutex_init(&ic.mutex, nil)
	C.rgo_init_context_ops(rc)
	s := &ctxState{ctx: vc, c: rc, cqs: map[*verbs.CQ]*cqState{}, qps: map[*verbs.QP]*qpState{},
		srqs: map[*verbs.SRQ]*srqState{}, done: make(chan struct{})}
	rc.h = C.uintptr_t(cgo.NewHandle(s))
	var bg context.Context
	bg, s.stop = context.WithCancel(context.Background())
	go s.asyncLoop(bg)
	return s, nil
}

//export rgo_ibv_close_device
func rgo_ibv_close_device(c *C.struct_ibv_context) C.int {
	s := ctxOf(c)
	err := s.ctx.Close()
	s.stop()
	<-s.done
	if err != nil && !errors.Is(err, verbs.ErrClosed) {
		return failNeg(err)
	}
	C.close(c.async_fd)
	C.close(c.cmd_fd)
	cgo.Handle(s.c.h).Delete()
	C.pthread_mutex_destroy(&c.mutex)
	C.free(unsafe.Pointer(s.c))
	return 0
}

// asyncLoop moves the context's asynchronous events to async_fd, each
// with the C object it is about, until the context closes.
func (s *ctxState) asyncLoop(ctx context.Context) {
	defer close(s.done)
	for {
		ev, err := s.ctx.GetAsyncEvent(ctx)
		if err != nil {
			return
		}
		s.ctx.AckAsyncEvent(ev)
		var ce C.struct_ibv_async_event
		ce.event_type = C.enum_ibv_event_type(ev.Type)
		el := unsafe.Pointer(&ce.element)
		s.mu.Lock()
		switch {
		case ev.QP != nil:
			q := s.qps[ev.QP]
			if q == nil {
				s.mu.Unlock()
				continue
			}
			*(**C.struct_ibv_qp)(el) = &q.c.qpx.qp_base
		case ev.CQ != nil:
			q := s.cqs[ev.CQ]
			if q == nil {
				s.mu.Unlock()
				continue
			}
			*(**C.struct_ibv_cq)(el) = q.ccq()
		case ev.SRQ != nil:
			q := s.srqs[ev.SRQ]
			if q == nil {
				s.mu.Unlock()
				continue
			}
			*(**C.struct_ibv_srq)(el) = &q.c.srq
		default:
			*(*C.int)(el) = C.int(ev.Port)
		}
		s.async = append(s.async, ce)
		s.mu.Unlock()
		C.rgo_eventfd_post(s.c.vctx.context.async_fd)
	}
}

// rgo_pop_async_event takes the oldest queued event, or answers -1 when
// the count read from async_fd was that of an event dropped with its
// object. A QP's, CQ's or SRQ's event counts as delivered, for the wait of
// its destroy verb for acknowledgements, once taken.
//
//export rgo_pop_async_event
func rgo_pop_async_event(c *C.struct_ibv_context, out *C.struct_ibv_async_event) C.int {
	s := ctxOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.async) == 0 {
		return -1
	}
	*out = s.async[0]
	s.async = s.async[1:]
	el := *(*unsafe.Pointer)(unsafe.Pointer(&out.element))
	switch out.event_type {
	case C.IBV_EVENT_CQ_ERR:
		cqOf((*C.struct_ibv_cq)(el)).asyncEvents++
	case C.IBV_EVENT_QP_FATAL, C.IBV_EVENT_QP_REQ_ERR, C.IBV_EVENT_QP_ACCESS_ERR, C.IBV_EVENT_COMM_EST,
		C.IBV_EVENT_SQ_DRAINED, C.IBV_EVENT_PATH_MIG, C.IBV_EVENT_PATH_MIG_ERR, C.IBV_EVENT_QP_LAST_WQE_REACHED:
		qpOf((*C.struct_ibv_qp)(el)).events++
	case C.IBV_EVENT_SRQ_ERR, C.IBV_EVENT_SRQ_LIMIT_REACHED:
		srqOf((*C.struct_ibv_srq)(el)).events++
	}
	return 0
}

// dropAsync removes the queued events about the object at el, which is
// being destroyed (s.mu held).
func (s *ctxState) dropAsync(el unsafe.Pointer) {
	s.async = slices.DeleteFunc(s.async, func(e C.struct_ibv_async_event) bool {
		return *(*unsafe.Pointer)(unsafe.Pointer(&e.element)) == el
	})
}

//export rgo_ibv_query_device
func rgo_ibv_query_device(c *C.struct_ibv_context, out *C.struct_ibv_device_attr) C.int {
	a, err := ctxOf(c).ctx.QueryDevice()
	if err != nil {
		return errno(err)
	}
	fillDeviceAttr(out, &a)
	return 0
}

func fillDeviceAttr(o *C.struct_ibv_device_attr, a *verbs.DeviceAttr) {
	*o = C.struct_ibv_device_attr{}
	setString(&o.fw_ver[0], len(o.fw_ver), a.FWVer)
	o.node_guid = C.__be64(bswap64(a.NodeGUID))
	o.sys_image_guid = C.__be64(bswap64(a.SysImageGUID))
	o.max_mr_size = C.uint64_t(a.MaxMRSize)
	o.page_size_cap = C.uint64_t(a.PageSizeCap)
	o.vendor_id = C.uint32_t(a.VendorID)
	o.vendor_part_id = C.uint32_t(a.VendorPartID)
	o.hw_ver = C.uint32_t(a.HWVer)
	o.max_qp = C.int(a.MaxQP)
	o.max_qp_wr = C.int(a.MaxQPWR)
	o.device_cap_flags = C.uint(a.DeviceCapFlags)
	o.max_sge = C.int(a.MaxSGE)
	o.max_sge_rd = C.int(a.MaxSGERD)
	o.max_cq = C.int(a.MaxCQ)
	o.max_cqe = C.int(a.MaxCQE)
	o.max_mr = C.int(a.MaxMR)
	o.max_pd = C.int(a.MaxPD)
	o.max_qp_rd_atom = C.int(a.MaxQPRDAtom)
	o.max_ee_rd_atom = C.int(a.MaxEERDAtom)
	o.max_res_rd_atom = C.int(a.MaxResRDAtom)
	o.max_qp_init_rd_atom = C.int(a.MaxQPInitRDAtom)
	o.max_ee_init_rd_atom = C.int(a.MaxEEInitRDAtom)
	o.atomic_cap = C.enum_ibv_atomic_cap(a.AtomicCap)
	o.max_ee = C.int(a.MaxEE)
	o.max_rdd = C.int(a.MaxRDD)
	o.max_mw = C.int(a.MaxMW)
	o.max_raw_ipv6_qp = C.int(a.MaxRawIPv6QP)
	o.max_raw_ethy_qp = C.int(a.MaxRawEthyQP)
	o.max_mcast_grp = C.int(a.MaxMcastGrp)
	o.max_mcast_qp_attach = C.int(a.MaxMcastQPAttach)
	o.max_total_mcast_qp_attach = C.int(a.MaxTotalMcastQPAttach)
	o.max_ah = C.int(a.MaxAH)
	o.max_fmr = C.int(a.MaxFMR)
	o.max_map_per_fmr = C.int(a.MaxMapPerFMR)
	o.max_srq = C.int(a.MaxSRQ)
	o.max_srq_wr = C.int(a.MaxSRQWR)
	o.max_srq_sge = C.int(a.MaxSRQSGE)
	o.max_pkeys = C.uint16_t(a.MaxPKeys)
	o.local_ca_ack_delay = C.uint8_t(a.LocalCAAckDelay)
	o.phys_port_cnt = C.uint8_t(a.PhysPortCnt)
}

//export rgo_query_device_ex
func rgo_query_device_ex(c *C.struct_ibv_context, in *C.struct_ibv_query_device_ex_input, out *C.struct_ibv_device_attr_ex, size C.size_t) C.int {
	if in != nil && in.comp_mask != 0 {
		return C.EINVAL
	}
	if uintptr(size) < unsafe.Sizeof(C.struct_ibv_device_attr{}) {
		return C.EINVAL
	}
	a, err := ctxOf(c).ctx.QueryDevice()
	if err != nil {
		return errno(err)
	}
	var x C.struct_ibv_device_attr_ex
	fillDeviceAttr(&x.orig_attr, &a)
	x.device_cap_flags_ex = C.uint64_t(a.DeviceCapFlags)
	x.phys_port_cnt_ex = C.uint32_t(a.PhysPortCnt)
	n := min(uintptr(size), unsafe.Sizeof(x))
	C.memset(unsafe.Pointer(out), 0, size)
	C.memcpy(unsafe.Pointer(out), unsafe.Pointer(&x), C.size_t(n))
	return 0
}

// rgo_query_port is verbs_context's query_port, which the inline
// ibv_query_port of verbs.h calls.
//
//export rgo_query_port
func rgo_query_port(c *C.struct_ibv_context, port C.uint8_t, out *C.struct_ibv_port_attr, size C.size_t) C.int {
	a, err := ctxOf(c).ctx.QueryPort(uint8(port))
	if err != nil {
		return errno(err)
	}
	x := C.struct_ibv_port_attr{
		state: C.enum_ibv_port_state(a.State), max_mtu: C.enum_ibv_mtu(a.MaxMTU), active_mtu: C.enum_ibv_mtu(a.ActiveMTU),
		gid_tbl_len: C.int(a.GIDTblLen), port_cap_flags: C.uint32_t(a.PortCapFlags), max_msg_sz: C.uint32_t(a.MaxMsgSz),
		bad_pkey_cntr: C.uint32_t(a.BadPKeyCntr), qkey_viol_cntr: C.uint32_t(a.QKeyViolCntr), pkey_tbl_len: C.uint16_t(a.PKeyTblLen),
		lid: C.uint16_t(a.LID), sm_lid: C.uint16_t(a.SMLID), lmc: C.uint8_t(a.LMC), max_vl_num: C.uint8_t(a.MaxVLNum),
		sm_sl: C.uint8_t(a.SMSL), subnet_timeout: C.uint8_t(a.SubnetTimeout), init_type_reply: C.uint8_t(a.InitTypeReply),
		active_width: C.uint8_t(a.ActiveWidth), active_speed: C.uint8_t(a.ActiveSpeed), phys_state: C.uint8_t(a.PhysState),
		link_layer: C.uint8_t(a.LinkLayer), flags: C.uint8_t(a.Flags), port_cap_flags2: C.uint16_t(a.PortCapFlags2),
	}
	C.memcpy(unsafe.Pointer(out), unsafe.Pointer(&x), C.size_t(min(uintptr(size), unsafe.Sizeof(x))))
	return 0
}

// rgo_ibv_query_port is the exported ibv_query_port, which only programs
// built against headers older than verbs_context's query_port call: its
// struct is the prefix of today's up to link_layer.
//
//export rgo_ibv_query_port
func rgo_ibv_query_port(c *C.struct_ibv_context, port C.uint8_t, out *C.struct_ibv_port_attr) C.int {
	return rgo_query_port(c, port, out, C.offsetof_port_attr_flags)
}

//export rgo_ibv_query_gid
func rgo_ibv_query_gid(c *C.struct_ibv_context, port C.uint8_t, index C.int, gid *C.union_ibv_gid) C.int {
	g, err := ctxOf(c).ctx.QueryGID(uint8(port), int(index))
	if err != nil {
		return failNeg(err)
	}
	*(*[16]byte)(unsafe.Pointer(gid)) = g
	return 0
}

//export rgo_ibv_query_gid_type
func rgo_ibv_query_gid_type(c *C.struct_ibv_context, port C.uint8_t, index C.uint, typ *C.int) C.int {
	if _, err := ctxOf(c).ctx.QueryGID(uint8(port), int(index)); err != nil {
		return failNeg(err)
	}
	*typ = C.RGO_GID_TYPE_SYSFS_ROCE_V2 // every soft device GID is RoCE v2
	return 0
}

// rgo_ibv_query_gid_ex is _ibv_query_gid_ex, behind verbs.h's
// ibv_query_gid_ex: ENODATA for an empty entry, as libibverbs.
//
//export rgo_ibv_query_gid_ex
func rgo_ibv_query_gid_ex(c *C.struct_ibv_context, port C.uint32_t, index C.uint32_t, e *C.struct_ibv_gid_entry, flags C.uint32_t, size C.size_t) C.int {
	if flags != 0 || uintptr(size) < unsafe.Sizeof(*e) {
		return C.EINVAL
	}
	g, err := ctxOf(c).ctx.QueryGID(uint8(port), int(index))
	if err != nil {
		return errno(err)
	}
	if g.IsZero() {
		return C.ENODATA
	}
	fillGIDEntry(e, g, uint32(port), uint32(index))
	return 0
}

func fillGIDEntry(e *C.struct_ibv_gid_entry, g verbs.GID, port, index uint32) {
	*e = C.struct_ibv_gid_entry{gid_index: C.uint32_t(index), port_num: C.uint32_t(port), gid_type: C.IBV_GID_TYPE_ROCE_V2}
	*(*[16]byte)(unsafe.Pointer(&e.gid)) = g
}

// rgo_ibv_query_gid_table is _ibv_query_gid_table: the valid entries of
// every port, their count or a negative errno.
//
//export rgo_ibv_query_gid_table
func rgo_ibv_query_gid_table(c *C.struct_ibv_context, entries *C.struct_ibv_gid_entry, max C.size_t, flags C.uint32_t, size C.size_t) C.ssize_t {
	if flags != 0 || uintptr(size) < unsafe.Sizeof(*entries) {
		return -C.EINVAL
	}
	s := ctxOf(c)
	a, err := s.ctx.QueryDevice()
	if err != nil {
		return -C.ssize_t(errno(err))
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(entries)), uintptr(max)*uintptr(size))
	n := 0
	for port := uint8(1); port <= a.PhysPortCnt; port++ {
		pa, err := s.ctx.QueryPort(port)
		if err != nil {
			return -C.ssize_t(errno(err))
		}
		for i := range pa.GIDTblLen {
			g, err := s.ctx.QueryGID(port, i)
			if err != nil || g.IsZero() {
				continue
			}
			if n == int(max) {
				return -C.EINVAL
			}
			fillGIDEntry((*C.struct_ibv_gid_entry)(unsafe.Pointer(&out[uintptr(n)*uintptr(size)])), g, uint32(port), uint32(i))
			n++
		}
	}
	return C.ssize_t(n)
}

//export rgo_ibv_query_pkey
func rgo_ibv_query_pkey(c *C.struct_ibv_context, port C.uint8_t, index C.int, pkey *C.__be16) C.int {
	p, err := ctxOf(c).ctx.QueryPKey(uint8(port), int(index))
	if err != nil {
		return failNeg(err)
	}
	*pkey = C.__be16(p>>8 | p<<8)
	return 0
}

//export rgo_ibv_get_pkey_index
func rgo_ibv_get_pkey_index(c *C.struct_ibv_context, port C.uint8_t, pkey C.__be16) C.int {
	s := ctxOf(c)
	pa, err := s.ctx.QueryPort(uint8(port))
	if err != nil {
		return -errno(err)
	}
	want := uint16(pkey>>8 | pkey<<8)
	for i := range int(pa.PKeyTblLen) {
		if p, err := s.ctx.QueryPKey(uint8(port), i); err == nil && p == want {
			return C.int(i)
		}
	}
	return -C.ENOENT
}
