//go:build cgo && linux && rdmago_capi

package main

// #include <stdlib.h>
// #include <string.h>
// #include <sys/socket.h>
// #include <unistd.h>
// #include <netdb.h>
// #include "capi.h"
import "C"

import (
	"context"
	"encoding/binary"
	"net/netip"
	"runtime/cgo"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// The librdmacm face: struct rdma_cm_id, rdma_event_channel and
// rdma_cm_event over package rdmacm. An id's verbs, pd, qp and CQ members
// point at the drop-in's own structs for the Go objects rdmacm uses, so
// that the program's ibv_* calls on them (and the inline rdma_verbs.h
// helpers) work.

// cmChan is the Go side of a struct rdma_event_channel: a goroutine turns
// the channel's events into struct rdma_cm_event and counts them on fd.
type cmChan struct {
	ch *rdmacm.EventChannel
	c  *C.struct_rgo_event_channel

	mu   sync.Mutex
	q    []*C.struct_rgo_cm_event
	stop context.CancelFunc
	done chan struct{}
}

// cmID is the Go side of a struct rdma_cm_id.
type cmID struct {
	id *rdmacm.ID
	c  *C.struct_rgo_cm_id

	// The structs of what rdmacm made for the id (its PD, QP, and the CQs
	// and channel rdma_create_qp created), freed with the QP or the id.
	pd       *pdState
	qp       *qpState
	cqs      []*cqState
	compChan *chanState
}

// ids maps rdmacm's ids to theirs, for events.
var ids struct {
	sync.Mutex
	m map[*rdmacm.ID]*cmID
}

func cmIDOf(c *C.struct_rdma_cm_id) *cmID {
	return handleOf[*cmID]((*C.struct_rgo_cm_id)(unsafe.Pointer(c)).h)
}

// wrapID makes the struct rdma_cm_id of id (on channel ch, nil for a
// synchronous id).
func wrapID(id *rdmacm.ID, ch *cmChan, context unsafe.Pointer) *cmID {
	ids.Lock()
	defer ids.Unlock()
	if ids.m == nil {
		ids.m = map[*rdmacm.ID]*cmID{}
	}
	if x := ids.m[id]; x != nil {
		return x
	}
	x := &cmID{id: id}
	x.c = (*C.struct_rgo_cm_id)(C.calloc(1, C.sizeof_struct_rgo_cm_id))
	if ch != nil {
		x.c.id.channel = &ch.c.ch
	}
	x.c.id.context = context
	x.c.id.ps = C.enum_rdma_port_space(id.PortSpace())
	x.c.id.qp_type = C.enum_ibv_qp_type(id.QPType())
	x.c.h = C.uintptr_t(cgo.NewHandle(x))
	ids.m[id] = x
	x.sync()
	return x
}

// sync copies the id's state into its struct: device, addresses, QP.
func (x *cmID) sync() {
	c := &x.c.id
	if vc := x.id.Verbs(); vc != nil && c.verbs == nil {
		if s, err := borrowContext(vc); err == nil {
			c.verbs = &s.c.vctx.context
			c.port_num = 1
		}
	}
	src, dst := x.id.SrcAddr(), x.id.DstAddr()
	var sa, da [28]byte
	var sp, dp unsafe.Pointer
	if src.IsValid() {
		putSockaddr(sa[:], src)
		sp = unsafe.Pointer(&sa[0])
	}
	if dst.IsValid() {
		putSockaddr(da[:], dst)
		dp = unsafe.Pointer(&da[0])
	}
	sgid, dgid := verbs.GIDFromIP(src.Addr()), verbs.GIDFromIP(dst.Addr())
	C.rgo_set_id_addrs(c, sp, dp, unsafe.Pointer(&sgid[0]), unsafe.Pointer(&dgid[0]))
	if x.qp != nil {
		x.qp.c.qpx.qp_base.state = C.enum_ibv_qp_state(x.qp.qp.State())
	}
}

// putSockaddr writes a as a struct sockaddr_in (IPv4) or sockaddr_in6.
func putSockaddr(b []byte, a netip.AddrPort) {
	clear(b)
	ip := a.Addr()
	if ip.Is4() || ip.Is4In6() {
		binary.NativeEndian.PutUint16(b, syscall.AF_INET)
		binary.BigEndian.PutUint16(b[2:], a.Port())
		v4 := ip.Unmap().As4()
		copy(b[4:], v4[:])
		return
	}
	binary.NativeEndian.PutUint16(b, syscall.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], a.Port())
	v6 := ip.As16()
	copy(b[8:], v6[:])
}

// sockaddr reads a struct sockaddr_in or sockaddr_in6 (the zero AddrPort
// for NULL; ok false for another family).
func sockaddr(p unsafe.Pointer) (a netip.AddrPort, ok bool) {
	if p == nil {
		return netip.AddrPort{}, true
	}
	b := unsafe.Slice((*byte)(p), 28)
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b) {
	case syscall.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), true
	case syscall.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), true
	}
	return netip.AddrPort{}, false
}

//export rgo_rdma_create_event_channel
func rgo_rdma_create_event_channel() *C.struct_rdma_event_channel {
	ch, err := rdmacm.CreateEventChannel()
	if err != nil {
		fail(err)
		return nil
	}
	fd := C.rgo_eventfd()
	if fd < 0 {
		ch.Destroy()
		fail(syscall.EMFILE)
		return nil
	}
	cc := &cmChan{ch: ch, done: make(chan struct{})}
	cc.c = (*C.struct_rgo_event_channel)(C.calloc(1, C.sizeof_struct_rgo_event_channel))
	cc.c.ch.fd = fd
	cc.c.h = C.uintptr_t(cgo.NewHandle(cc))
	var bg context.Context
	bg, cc.stop = context.WithCancel(context.Background())
	go cc.loop(bg)
	return &cc.c.ch
}

func cmChanOf(c *C.struct_rdma_event_channel) *cmChan {
	return handleOf[*cmChan]((*C.struct_rgo_event_channel)(unsafe.Pointer(c)).h)
}

func (cc *cmChan) loop(bg context.Context) {
	defer close(cc.done)
	for {
		ev, err := cc.ch.GetCMEvent(bg)
		if err != nil {
			return
		}
		ce := cc.event(ev)
		cc.mu.Lock()
		cc.q = append(cc.q, ce)
		cc.mu.Unlock()
		C.rgo_eventfd_post(cc.c.ch.fd)
	}
}

// event makes the struct rdma_cm_event of ev, with a copy of its private
// data; a CONNECT_REQUEST's new id gets its struct here, with the
// listener's context.
func (cc *cmChan) event(ev *rdmacm.Event) *C.struct_rgo_cm_event {
	ce := (*C.struct_rgo_cm_event)(C.calloc(1, C.sizeof_struct_rgo_cm_event))
	var listen *cmID
	if ev.ListenID != nil {
		listen = wrapID(ev.ListenID, cc, nil)
		ce.ev.listen_id = &listen.c.id
	}
	if ev.ID != nil {
		var ctx unsafe.Pointer
		if listen != nil {
			ctx = listen.c.id.context
		}
		x := wrapID(ev.ID, cc, ctx)
		x.sync()
		ce.ev.id = &x.c.id
	}
	ce.ev.event = C.enum_rdma_cm_event_type(ev.Type)
	ce.ev.status = C.int(ev.Status)
	if ev.ID != nil && ev.ID.QPType() == verbs.QPTypeUD {
		pd, n := cbytes(ev.UD.PrivateData)
		var ah C.struct_ibv_ah_attr
		fillAHAttr(&ah, &ev.UD.AHAttr)
		C.rgo_set_event_ud(&ce.ev, pd, n, &ah, C.uint32_t(ev.UD.QPNum), C.uint32_t(ev.UD.QKey))
	} else {
		p := toCConnParam(&ev.Conn)
		C.rgo_set_event_conn(&ce.ev, &p)
	}
	ce.h = C.uintptr_t(cgo.NewHandle(ev))
	return ce
}

// cbytes copies b into C memory (NULL for none).
func cbytes(b []byte) (unsafe.Pointer, C.uint8_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return C.CBytes(b), C.uint8_t(min(len(b), 255))
}

func toCConnParam(p *rdmacm.ConnParam) C.struct_rdma_conn_param {
	pd, n := cbytes(p.PrivateData)
	c := C.struct_rdma_conn_param{private_data: pd, private_data_len: n, responder_resources: C.uint8_t(p.ResponderResources),
		initiator_depth: C.uint8_t(p.InitiatorDepth), retry_count: C.uint8_t(p.RetryCount),
		rnr_retry_count: C.uint8_t(p.RNRRetryCount), qp_num: C.uint32_t(p.QPNum)}
	if p.FlowControl {
		c.flow_control = 1
	}
	if p.SRQ {
		c.srq = 1
	}
	return c
}

// toConnParam reads a program's struct rdma_conn_param (nil for NULL).
func toConnParam(c *C.struct_rdma_conn_param) *rdmacm.ConnParam {
	if c == nil {
		return nil
	}
	p := &rdmacm.ConnParam{ResponderResources: uint8(c.responder_resources), InitiatorDepth: uint8(c.initiator_depth),
		FlowControl: c.flow_control != 0, RetryCount: uint8(c.retry_count), RNRRetryCount: uint8(c.rnr_retry_count),
		SRQ: c.srq != 0, QPNum: uint32(c.qp_num)}
	if c.private_data != nil && c.private_data_len > 0 {
		p.PrivateData = C.GoBytes(c.private_data, C.int(c.private_data_len))
	}
	return p
}

//export rgo_rdma_get_cm_event
func rgo_rdma_get_cm_event(c *C.struct_rdma_event_channel, out **C.struct_rdma_cm_event) C.int {
	cc := cmChanOf(c)
	for {
		if C.rgo_eventfd_wait(c.fd) != 0 {
			return -1
		}
		cc.mu.Lock()
		if len(cc.q) == 0 {
			cc.mu.Unlock()
			continue
		}
		ce := cc.q[0]
		cc.q = cc.q[1:]
		cc.mu.Unlock()
		if ce.ev.id != nil {
			cmIDOf(ce.ev.id).sync()
			ce.ev.id.event = &ce.ev
		}
		*out = &ce.ev
		return 0
	}
}

//export rgo_rdma_ack_cm_event
func rgo_rdma_ack_cm_event(e *C.struct_rdma_cm_event) C.int {
	ce := (*C.struct_rgo_cm_event)(unsafe.Pointer(e))
	ev := cgo.Handle(ce.h).Value().(*rdmacm.Event)
	err := ev.Ack()
	if e.id != nil && e.id.event == e {
		e.id.event = nil
	}
	cgo.Handle(ce.h).Delete()
	C.free(unsafe.Pointer(C.rgo_event_private_data(e)))
	C.free(unsafe.Pointer(ce))
	if err != nil {
		return failNeg(err)
	}
	return 0
}

//export rgo_rdma_destroy_event_channel
func rgo_rdma_destroy_event_channel(c *C.struct_rdma_event_channel) {
	cc := cmChanOf(c)
	cc.ch.Destroy()
	cc.stop()
	<-cc.done
	C.close(c.fd)
	release(cc.c.h, unsafe.Pointer(cc.c))
}

//export rgo_rdma_event_str
func rgo_rdma_event_str(t C.enum_rdma_cm_event_type) *C.char {
	return cstring(rdmacm.EventType(t).String())
}

//export rgo_rdma_create_id
func rgo_rdma_create_id(c *C.struct_rdma_event_channel, out **C.struct_rdma_cm_id, context unsafe.Pointer, ps C.enum_rdma_port_space) C.int {
	var cc *cmChan
	var ch *rdmacm.EventChannel
	if c != nil {
		cc = cmChanOf(c)
		ch = cc.ch
	}
	id, err := rdmacm.CreateID(ch, nil, rdmacm.PortSpace(ps))
	if err != nil {
		return failNeg(err)
	}
	*out = &wrapID(id, cc, context).c.id
	return 0
}

// done returns 0, or -1 with errno set from err, syncing the id after a
// call that may have changed it.
func (x *cmID) done(err error) C.int {
	x.sync()
	if err != nil {
		return failNeg(err)
	}
	return 0
}

//export rgo_rdma_bind_addr
func rgo_rdma_bind_addr(c *C.struct_rdma_cm_id, addr unsafe.Pointer) C.int {
	a, ok := sockaddr(addr)
	if !ok || addr == nil {
		return failNeg(syscall.EAFNOSUPPORT)
	}
	x := cmIDOf(c)
	return x.done(x.id.BindAddr(a))
}

func msDuration(ms C.int) time.Duration { return time.Duration(ms) * time.Millisecond }

//export rgo_rdma_resolve_addr
func rgo_rdma_resolve_addr(c *C.struct_rdma_cm_id, src, dst unsafe.Pointer, timeoutMS C.int) C.int {
	s, ok1 := sockaddr(src)
	d, ok2 := sockaddr(dst)
	if !ok1 || !ok2 || dst == nil {
		return failNeg(syscall.EAFNOSUPPORT)
	}
	x := cmIDOf(c)
	return x.done(x.id.ResolveAddr(context.Background(), s, d, msDuration(timeoutMS)))
}

//export rgo_rdma_resolve_route
func rgo_rdma_resolve_route(c *C.struct_rdma_cm_id, timeoutMS C.int) C.int {
	x := cmIDOf(c)
	return x.done(x.id.ResolveRoute(context.Background(), msDuration(timeoutMS)))
}

//export rgo_rdma_listen
func rgo_rdma_listen(c *C.struct_rdma_cm_id, backlog C.int) C.int {
	x := cmIDOf(c)
	return x.done(x.id.Listen(int(backlog)))
}

//export rgo_rdma_connect
func rgo_rdma_connect(c *C.struct_rdma_cm_id, p *C.struct_rdma_conn_param) C.int {
	x := cmIDOf(c)
	return x.done(x.id.Connect(context.Background(), toConnParam(p)))
}

//export rgo_rdma_accept
func rgo_rdma_accept(c *C.struct_rdma_cm_id, p *C.struct_rdma_conn_param) C.int {
	x := cmIDOf(c)
	return x.done(x.id.Accept(context.Background(), toConnParam(p)))
}

//export rgo_rdma_reject
func rgo_rdma_reject(c *C.struct_rdma_cm_id, pdata unsafe.Pointer, n C.uint8_t) C.int {
	var b []byte
	if pdata != nil && n > 0 {
		b = C.GoBytes(pdata, C.int(n))
	}
	x := cmIDOf(c)
	return x.done(x.id.Reject(b))
}

//export rgo_rdma_disconnect
func rgo_rdma_disconnect(c *C.struct_rdma_cm_id) C.int {
	x := cmIDOf(c)
	return x.done(x.id.Disconnect())
}

//export rgo_rdma_establish
func rgo_rdma_establish(c *C.struct_rdma_cm_id) C.int {
	x := cmIDOf(c)
	return x.done(x.id.Establish())
}

//export rgo_rdma_notify
func rgo_rdma_notify(c *C.struct_rdma_cm_id, ev C.enum_ibv_event_type) C.int {
	x := cmIDOf(c)
	return x.done(x.id.Notify(verbs.EventType(ev)))
}

//export rgo_rdma_migrate_id
func rgo_rdma_migrate_id(c *C.struct_rdma_cm_id, ch *C.struct_rdma_event_channel) C.int {
	x := cmIDOf(c)
	var to *rdmacm.EventChannel
	if ch != nil {
		to = cmChanOf(ch).ch
	}
	if err := x.id.Migrate(to); err != nil {
		return failNeg(err)
	}
	c.channel = ch
	return 0
}

//export rgo_rdma_init_qp_attr
func rgo_rdma_init_qp_attr(c *C.struct_rdma_cm_id, attr *C.struct_ibv_qp_attr, mask *C.int) C.int {
	a, m, err := cmIDOf(c).id.InitQPAttr(verbs.QPState(attr.qp_state))
	if err != nil {
		return failNeg(err)
	}
	fillQPAttr(attr, &a)
	*mask = C.int(m)
	return 0
}

//export rgo_rdma_get_src_port
func rgo_rdma_get_src_port(c *C.struct_rdma_cm_id) C.uint16_t {
	p := cmIDOf(c).id.SrcPort()
	return C.uint16_t(p>>8 | p<<8)
}

//export rgo_rdma_get_dst_port
func rgo_rdma_get_dst_port(c *C.struct_rdma_cm_id) C.uint16_t {
	p := cmIDOf(c).id.DstPort()
	return C.uint16_t(p>>8 | p<<8)
}

//export rgo_rdma_set_option
func rgo_rdma_set_option(c *C.struct_rdma_cm_id, level, name C.int, val unsafe.Pointer, n C.size_t) C.int {
	id := cmIDOf(c).id
	if level != C.RDMA_OPTION_ID || val == nil {
		return failNeg(syscall.ENOSYS)
	}
	switch name {
	case C.RDMA_OPTION_ID_TOS, C.RDMA_OPTION_ID_ACK_TIMEOUT:
		if n < 1 {
			return failNeg(syscall.EINVAL)
		}
		v := *(*uint8)(val)
		if name == C.RDMA_OPTION_ID_TOS {
			id.SetTOS(v)
		} else {
			id.SetAckTimeout(v)
		}
	case C.RDMA_OPTION_ID_REUSEADDR, C.RDMA_OPTION_ID_AFONLY:
		if uintptr(n) != unsafe.Sizeof(C.int(0)) {
			return failNeg(syscall.EINVAL)
		}
		on := *(*C.int)(val) != 0
		if name == C.RDMA_OPTION_ID_REUSEADDR {
			id.SetReuseAddr(on)
		} else {
			id.SetAFOnly(on)
		}
	default:
		return failNeg(syscall.ENOSYS)
	}
	return 0
}

// adopt gives the QP, PD and CQs that rdmacm made for the id their
// structs, and points the id's members at them.
func (x *cmID) adopt(init *C.struct_ibv_qp_init_attr, cpd *C.struct_ibv_pd) error {
	c := &x.c.id
	qp := x.id.QP()
	if qp == nil {
		return nil
	}
	s, err := borrowContext(x.id.Verbs())
	if err != nil {
		return err
	}
	if c.verbs == nil {
		c.verbs = &s.c.vctx.context
	}
	if cpd == nil {
		if x.pd == nil {
			x.pd = wrapPD(s, x.id.PD())
		}
		cpd = &x.pd.c.pd
	}
	c.pd = cpd
	if ch := x.id.CompChannel(); ch != nil && x.compChan == nil {
		if x.compChan, err = wrapChannel(s, ch); err != nil {
			return err
		}
	}
	cq := func(have *C.struct_ibv_cq, v *verbs.CQ) *C.struct_ibv_cq {
		if have != nil {
			return have
		}
		q := wrapCQ(s, v, x.compChan, nil)
		x.cqs = append(x.cqs, q)
		return q.ccq()
	}
	init.send_cq = cq(init.send_cq, x.id.SendCQ())
	if x.id.RecvCQ() == x.id.SendCQ() && init.recv_cq == nil {
		init.recv_cq = init.send_cq
	} else {
		init.recv_cq = cq(init.recv_cq, x.id.RecvCQ())
	}
	c.send_cq, c.recv_cq = init.send_cq, init.recv_cq
	if x.compChan != nil {
		c.send_cq_channel, c.recv_cq_channel = &x.compChan.c.ch, &x.compChan.c.ch
	}
	c.srq = init.srq
	init.qp_type = C.enum_ibv_qp_type(qp.Type())
	c.qp = wrapQP(cpd, qp, init, false)
	x.qp = qpOf(c.qp)
	x.qp.owner = x
	return nil
}

//export rgo_rdma_create_qp
func rgo_rdma_create_qp(c *C.struct_rdma_cm_id, cpd *C.struct_ibv_pd, init *C.struct_ibv_qp_init_attr) C.int {
	x := cmIDOf(c)
	var pd *verbs.PD // nil: the id's default PD
	if cpd != nil {
		pd = pdOf(cpd).pd
	}
	a := toQPInitAttr(init)
	if err := x.id.CreateQP(pd, &a); err != nil {
		return failNeg(err)
	}
	if err := x.adopt(init, cpd); err != nil {
		x.id.DestroyQP()
		return failNeg(err)
	}
	return 0
}

//export rgo_rdma_create_qp_ex
func rgo_rdma_create_qp_ex(c *C.struct_rdma_cm_id, x *C.struct_ibv_qp_init_attr_ex) C.int {
	if x.comp_mask&^C.IBV_QP_INIT_ATTR_PD != 0 || x.create_flags != 0 {
		return failNeg(syscall.EOPNOTSUPP)
	}
	init := C.struct_ibv_qp_init_attr{qp_context: x.qp_context, send_cq: x.send_cq, recv_cq: x.recv_cq, srq: x.srq,
		cap: x.cap, qp_type: x.qp_type, sq_sig_all: x.sq_sig_all}
	var pd *C.struct_ibv_pd
	if x.comp_mask&C.IBV_QP_INIT_ATTR_PD != 0 {
		pd = x.pd
	}
	r := rgo_rdma_create_qp(c, pd, &init)
	x.cap = init.cap
	return r
}

// freeQP releases the structs of the id's QP and of the CQs and channel
// rdmacm made with it (rdmacm destroyed them).
func (x *cmID) freeQP() {
	if x.qp != nil {
		x.qp.free()
		x.qp = nil
	}
	for _, q := range x.cqs {
		q.free()
	}
	x.cqs = nil
	if x.compChan != nil {
		x.compChan.free()
		x.compChan = nil
	}
	c := &x.c.id
	c.qp, c.send_cq, c.recv_cq, c.send_cq_channel, c.recv_cq_channel = nil, nil, nil, nil, nil
}

//export rgo_rdma_destroy_qp
func rgo_rdma_destroy_qp(c *C.struct_rdma_cm_id) {
	x := cmIDOf(c)
	if err := x.id.DestroyQP(); err == nil {
		x.freeQP()
	}
}

// free releases the id's struct (rdmacm destroyed the id). Its QP, if the
// program did not destroy it first, stays for ibv_destroy_qp, as with
// librdmacm, and so do the CQs rdma_create_qp made for it.
func (x *cmID) free() {
	if x.qp != nil {
		x.qp.owner = nil
	}
	if x.pd != nil && x.qp == nil {
		x.pd.free()
		x.pd = nil
	}
	ids.Lock()
	delete(ids.m, x.id)
	ids.Unlock()
	release(x.c.h, unsafe.Pointer(x.c))
}

//export rgo_rdma_destroy_id
func rgo_rdma_destroy_id(c *C.struct_rdma_cm_id) C.int {
	x := cmIDOf(c)
	if err := x.id.Destroy(); err != nil {
		return failNeg(err)
	}
	x.free()
	return 0
}

//export rgo_rdma_get_request
func rgo_rdma_get_request(c *C.struct_rdma_cm_id, out **C.struct_rdma_cm_id) C.int {
	x := cmIDOf(c)
	id, err := x.id.GetRequest(context.Background())
	if err != nil {
		return failNeg(err)
	}
	n := wrapID(id, nil, x.c.id.context)
	if id.QP() != nil {
		var init C.struct_ibv_qp_init_attr
		if err := n.adopt(&init, nil); err != nil {
			return failNeg(err)
		}
	}
	*out = &n.c.id
	return 0
}

//export rgo_rdma_create_ep
func rgo_rdma_create_ep(out **C.struct_rdma_cm_id, res *C.struct_rdma_addrinfo, cpd *C.struct_ibv_pd, init *C.struct_ibv_qp_init_attr) C.int {
	ai, ok := toAddrInfo(res)
	if !ok {
		return failNeg(syscall.EAFNOSUPPORT)
	}
	var pd *verbs.PD
	if cpd != nil {
		pd = pdOf(cpd).pd
	}
	var a *verbs.QPInitAttr
	if init != nil {
		init.qp_type = C.enum_ibv_qp_type(res.ai_qp_type) // as librdmacm
		v := toQPInitAttr(init)
		a = &v
	}
	id, err := rdmacm.CreateEP(context.Background(), ai, pd, a)
	if err != nil {
		return failNeg(err)
	}
	x := wrapID(id, nil, nil)
	if init != nil {
		if err := x.adopt(init, cpd); err != nil {
			id.DestroyEP()
			x.free()
			return failNeg(err)
		}
	}
	*out = &x.c.id
	return 0
}

//export rgo_rdma_destroy_ep
func rgo_rdma_destroy_ep(c *C.struct_rdma_cm_id) {
	x := cmIDOf(c)
	x.id.DestroyEP()
	x.free()
}

func toAddrInfo(r *C.struct_rdma_addrinfo) (*rdmacm.AddrInfo, bool) {
	src, ok1 := sockaddr(unsafe.Pointer(r.ai_src_addr))
	dst, ok2 := sockaddr(unsafe.Pointer(r.ai_dst_addr))
	ai := &rdmacm.AddrInfo{Flags: int(r.ai_flags), Family: int(r.ai_family), QPType: verbs.QPType(r.ai_qp_type),
		PortSpace: rdmacm.PortSpace(r.ai_port_space), SrcAddr: src, DstAddr: dst}
	if r.ai_src_canonname != nil {
		ai.SrcCanonName = C.GoString(r.ai_src_canonname)
	}
	if r.ai_dst_canonname != nil {
		ai.DstCanonName = C.GoString(r.ai_dst_canonname)
	}
	return ai, ok1 && ok2
}

// csockaddr copies a into C memory as a struct sockaddr (NULL and 0 for
// none).
func csockaddr(a netip.AddrPort) (*C.struct_sockaddr, C.socklen_t) {
	if !a.IsValid() {
		return nil, 0
	}
	var b [28]byte
	putSockaddr(b[:], a)
	n := 16
	if binary.NativeEndian.Uint16(b[:]) == syscall.AF_INET6 {
		n = 28
	}
	return (*C.struct_sockaddr)(C.CBytes(b[:n])), C.socklen_t(n)
}

//export rgo_rdma_getaddrinfo
func rgo_rdma_getaddrinfo(node, service *C.char, hints *C.struct_rdma_addrinfo, out **C.struct_rdma_addrinfo) C.int {
	var n, s string
	if node != nil {
		n = C.GoString(node)
	}
	if service != nil {
		s = C.GoString(service)
	}
	var h *rdmacm.AddrInfo
	if hints != nil {
		h, _ = toAddrInfo(hints)
	}
	list, err := rdmacm.GetAddrInfo(context.Background(), n, s, h)
	if err != nil {
		return failNeg(err)
	}
	var head *C.struct_rdma_addrinfo
	next := &head
	for _, ai := range list {
		r := (*C.struct_rdma_addrinfo)(C.calloc(1, C.sizeof_struct_rdma_addrinfo))
		r.ai_flags, r.ai_family = C.int(ai.Flags), C.int(ai.Family)
		r.ai_qp_type, r.ai_port_space = C.int(ai.QPType), C.int(ai.PortSpace)
		r.ai_src_addr, r.ai_src_len = csockaddr(ai.SrcAddr)
		r.ai_dst_addr, r.ai_dst_len = csockaddr(ai.DstAddr)
		if ai.SrcCanonName != "" {
			r.ai_src_canonname = C.CString(ai.SrcCanonName)
		}
		if ai.DstCanonName != "" {
			r.ai_dst_canonname = C.CString(ai.DstCanonName)
		}
		*next = r
		next = &r.ai_next
	}
	*out = head
	return 0
}

//export rgo_rdma_freeaddrinfo
func rgo_rdma_freeaddrinfo(r *C.struct_rdma_addrinfo) {
	for r != nil {
		next := r.ai_next
		C.free(unsafe.Pointer(r.ai_src_addr))
		C.free(unsafe.Pointer(r.ai_dst_addr))
		C.free(unsafe.Pointer(r.ai_src_canonname))
		C.free(unsafe.Pointer(r.ai_dst_canonname))
		C.free(unsafe.Pointer(r))
		r = next
	}
}

// rgo_rdma_get_devices lists a context of every device, opened on first
// use and kept open (librdmacm keeps its device contexts too).
//
//export rgo_rdma_get_devices
func rgo_rdma_get_devices(num *C.int) **C.struct_ibv_context {
	ds, err := verbs.Devices()
	if err != nil {
		fail(err)
		return nil
	}
	list := (**C.struct_ibv_context)(C.calloc(C.size_t(len(ds)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	s := unsafe.Slice(list, len(ds)+1)
	n := 0
	for _, d := range ds {
		c, err := deviceContext(d)
		if err != nil {
			continue
		}
		s[n] = c
		n++
	}
	if num != nil {
		*num = C.int(n)
	}
	return list
}

var deviceContexts struct {
	sync.Mutex
	m map[*verbs.Device]*C.struct_ibv_context
}

func deviceContext(d *verbs.Device) (*C.struct_ibv_context, error) {
	deviceContexts.Lock()
	defer deviceContexts.Unlock()
	if c := deviceContexts.m[d]; c != nil {
		return c, nil
	}
	vc, err := d.Open()
	if err != nil {
		return nil, err
	}
	s, err := newContext(&cdevice(d).dev, vc)
	if err != nil {
		vc.Close()
		return nil, err
	}
	if deviceContexts.m == nil {
		deviceContexts.m = map[*verbs.Device]*C.struct_ibv_context{}
	}
	deviceContexts.m[d] = &s.c.vctx.context
	return deviceContexts.m[d], nil
}

//export rgo_rdma_free_devices
func rgo_rdma_free_devices(list **C.struct_ibv_context) { C.free(unsafe.Pointer(list)) }
