//go:build linux

package kernel

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/rdma-go/rdma-go/provider"
)

// The kernel's devices are connected by the kernel's rdma_cm, reached
// through the system's librdmacm.so.1 (loaded at run time, as
// libibverbs.so.1 is). One librdmacm event channel serves every id of the
// process: its fd, non-blocking, waits in the Go runtime's poller, and one
// goroutine takes each event, copies what it says, acknowledges it at once
// (so rdma_destroy_id never waits for the application) and hands it to the
// id's events function.
//
// QPs stay the application's (made with verbs on the kernel provider, not
// rdma_create_qp): connections name them by number, and rdmacm moves them
// through the states with the attributes rdma_init_qp_attr gives, as
// librdmacm does for QPs it did not create.

const cmLibName = "librdmacm.so.1"

// cmlib holds the addresses of the librdmacm functions the CM calls.
type cmlib struct {
	createEventChannel, createID, destroyID, bindAddr, resolveAddr uintptr
	resolveRoute, connect, establish, listen, accept, reject       uintptr
	notify, disconnect, getCMEvent, ackCMEvent, initQPAttr         uintptr
	setOption                                                      uintptr
}

func loadCM() (*cmlib, error) {
	h, err := purego.Dlopen(cmLibName, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", cmLibName, err)
	}
	l := &cmlib{}
	for _, s := range []struct {
		p    *uintptr
		name string
	}{
		{&l.createEventChannel, "rdma_create_event_channel"}, {&l.createID, "rdma_create_id"},
		{&l.destroyID, "rdma_destroy_id"}, {&l.bindAddr, "rdma_bind_addr"},
		{&l.resolveAddr, "rdma_resolve_addr"}, {&l.resolveRoute, "rdma_resolve_route"},
		{&l.connect, "rdma_connect"}, {&l.establish, "rdma_establish"}, {&l.listen, "rdma_listen"},
		{&l.accept, "rdma_accept"}, {&l.reject, "rdma_reject"}, {&l.notify, "rdma_notify"},
		{&l.disconnect, "rdma_disconnect"}, {&l.getCMEvent, "rdma_get_cm_event"},
		{&l.ackCMEvent, "rdma_ack_cm_event"}, {&l.initQPAttr, "rdma_init_qp_attr"},
		{&l.setOption, "rdma_set_option"},
	} {
		a, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", cmLibName, s.name, err)
		}
		*s.p = a
	}
	return l, nil
}

// Layouts of rdma-core 44's <rdma/rdma_cma.h> and <infiniband/sa.h>
// (checked by TestCLayouts).
const (
	cmIDVerbs    = 0   // struct rdma_cm_id.verbs
	cmIDSrcAddr  = 32  // .route.addr.src_addr (a sockaddr_storage)
	cmIDDstAddr  = 160 // .route.addr.dst_addr
	cmIDPathRec  = 328 // .route.path_rec
	cmIDNumPaths = 336 // .route.num_paths
	cmIDPortNum  = 348 // .port_num

	cmEvID       = 0  // struct rdma_cm_event.id
	cmEvListenID = 8  // .listen_id
	cmEvEvent    = 16 // .event
	cmEvStatus   = 20 // .status
	cmEvParam    = 24 // .param (conn or ud)

	pathDGID      = 0  // struct ibv_sa_path_rec.dgid
	pathSGID      = 16 // .sgid
	pathFlowLabel = 40 // .flow_label (__be32)
	pathHopLimit  = 44
	pathTClass    = 45
	pathPKey      = 54 // __be16
	pathSL        = 56
	pathMTU       = 58
	pathPLT       = 62 // .packet_life_time

	ibvContextDevice = 0 // struct ibv_context.device
)

// cConnParam is struct rdma_conn_param.
type cConnParam struct {
	PrivateData    uintptr
	PrivateDataLen uint8
	RespRes        uint8
	InitDepth      uint8
	FlowControl    uint8
	RetryCount     uint8
	RNRRetryCount  uint8
	SRQ            uint8
	_              uint8
	QPNum          uint32
	_              uint32
}

// cUDParam is struct rdma_ud_param.
type cUDParam struct {
	PrivateData    uintptr
	PrivateDataLen uint8
	_              [7]byte // ah_attr is 8-aligned (union ibv_gid)
	AHAttr         cAHAttr
	QPNum          uint32
	QKey           uint32
}

// Connection manager events (enum rdma_cm_event_type) the CM acts on.
const (
	cmEventConnectRequest = 4
)

// CM is the kernel's rdma_cm, through librdmacm.
type CM struct {
	lib *lib
	cl  *cmlib
	ch  uintptr // struct rdma_event_channel *
	f   *os.File

	mu  sync.Mutex
	ids map[uintptr]*cmID // struct rdma_cm_id * → id
}

var theCM struct {
	once sync.Once
	cm   *CM
	err  error
}

// ConnectionManager returns the kernel's rdma_cm (one for every kernel
// device), opening librdmacm.so.1 and its event channel on first use.
func (d *Device) ConnectionManager() (provider.CM, error) {
	theCM.once.Do(func() { theCM.cm, theCM.err = openCM(d.lib) })
	if theCM.err != nil {
		return nil, theCM.err
	}
	return theCM.cm, nil
}

func openCM(l *lib) (*CM, error) {
	cl, err := loadCM()
	if err != nil {
		return nil, provider.Errorf(provider.ErrNoDevice, "the kernel's rdma_cm: %v (install rdma-core's librdmacm1)", err)
	}
	ch, errno := l.callErrno(cl.createEventChannel)
	if ch == 0 {
		return nil, provider.Errorf(errnoBase(errno), "rdma_create_event_channel: %v", errno)
	}
	f, err := pollableDup(int(*(*int32)(cptr(ch))), "rdma_cm")
	if err != nil {
		return nil, provider.Errorf(provider.ErrNoDevice, "rdma_cm event channel fd: %v", err)
	}
	m := &CM{lib: l, cl: cl, ch: ch, f: f, ids: make(map[uintptr]*cmID)}
	go m.run()
	return m, nil
}

// run takes the channel's events for the life of the process.
func (m *CM) run() {
	rc, err := m.f.SyscallConn()
	if err != nil {
		return
	}
	evp := new(uintptr)
	for fails := 0; fails < 100; {
		var errno syscall.Errno
		got := false
		err := rc.Read(func(uintptr) bool {
			var r uintptr
			r, errno = m.lib.callErrno(m.cl.getCMEvent, m.ch, uintptr(unsafe.Pointer(evp)))
			got = int32(r) == 0
			return got || errno != syscall.EAGAIN
		})
		if err != nil {
			return
		}
		if !got {
			fails++
			slog.Debug("rdma-go: rdma_get_cm_event", "err", errno)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		fails = 0
		m.dispatch(*evp)
	}
	slog.Error("rdma-go: the kernel's rdma_cm event channel keeps failing; its events stop")
}

// dispatch copies an event, acknowledges it and delivers it.
func (m *CM) dispatch(ev uintptr) {
	idp := *(*uintptr)(cptr(ev + cmEvID))
	out := provider.CMEvent{
		Type:   int(*(*int32)(cptr(ev + cmEvEvent))),
		Status: int(*(*int32)(cptr(ev + cmEvStatus))),
	}
	m.mu.Lock()
	to := m.ids[idp]
	if out.Type == cmEventConnectRequest {
		lis := m.ids[*(*uintptr)(cptr(ev + cmEvListenID))]
		to = lis
		if lis != nil {
			n := &cmID{m: m, id: idp, qpType: lis.qpType, events: lis.events}
			m.ids[idp] = n
			out.NewID = n
		}
	}
	m.mu.Unlock()
	if to != nil && to.qpType == provider.QPTypeUD {
		p := (*cUDParam)(cptr(ev + cmEvParam))
		out.UD = provider.UDParam{PrivateData: cbytes(p.PrivateData, int(p.PrivateDataLen)),
			AHAttr: fromCAH(&p.AHAttr), QPNum: p.QPNum, QKey: p.QKey}
	} else {
		p := (*cConnParam)(cptr(ev + cmEvParam))
		out.Conn = provider.ConnParam{PrivateData: cbytes(p.PrivateData, int(p.PrivateDataLen)),
			ResponderResources: p.RespRes, InitiatorDepth: p.InitDepth, FlowControl: p.FlowControl != 0,
			RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount, SRQ: p.SRQ != 0, QPNum: p.QPNum}
	}
	call(m.cl.ackCMEvent, ev)
	switch {
	case to == nil && out.Type == cmEventConnectRequest:
		// No listener of ours (it was destroyed): refuse.
		call(m.cl.reject, idp, 0, 0)
		call(m.cl.destroyID, idp)
	case to != nil:
		if f := to.eventsFunc(); f != nil {
			f(out)
		}
	}
}

// cbytes copies n bytes of C memory.
func cbytes(p uintptr, n int) []byte {
	if p == 0 || n == 0 {
		return nil
	}
	return append([]byte(nil), unsafe.Slice((*byte)(cptr(p)), n)...)
}

// fromCAH converts a struct ibv_ah_attr.
func fromCAH(c *cAHAttr) provider.AHAttr {
	return provider.AHAttr{
		GRH: provider.GlobalRoute{DGID: c.GRH.DGID, FlowLabel: c.GRH.FlowLabel, SGIDIndex: c.GRH.SGIDIndex,
			HopLimit: c.GRH.HopLimit, TrafficClass: c.GRH.TrafficClass},
		DLID: c.DLID, SL: c.SL, SrcPathBits: c.SrcPathBits, StaticRate: c.StaticRate,
		IsGlobal: c.IsGlobal != 0, PortNum: c.PortNum,
	}
}

// CreateID creates an rdma_cm_id. librdmacm's rdma_create_id makes RC ids
// in RDMA_PS_TCP and RDMA_PS_IB and UD ids in RDMA_PS_UDP; other
// combinations are refused.
func (m *CM) CreateID(ps uint16, t provider.QPType, events func(provider.CMEvent)) (provider.CMID, error) {
	want := provider.QPTypeRC
	if ps == 0x0111 || ps == 0x0002 {
		want = provider.QPTypeUD
	}
	if t != want {
		return nil, fmt.Errorf("kernel rdma_cm: a %v id in port space %#x: %w", t, ps, syscall.EINVAL)
	}
	idp := new(uintptr)
	if r, errno := m.lib.callErrno(m.cl.createID, m.ch, uintptr(unsafe.Pointer(idp)), 0, uintptr(ps)); int32(r) != 0 {
		return nil, fmt.Errorf("rdma_create_id: %w", errno)
	}
	id := &cmID{m: m, id: *idp, qpType: t, events: events}
	m.mu.Lock()
	m.ids[id.id] = id
	m.mu.Unlock()
	return id, nil
}

// cmID is an rdma_cm_id of the kernel's CM.
type cmID struct {
	m      *CM
	id     uintptr // struct rdma_cm_id *
	qpType provider.QPType

	mu     sync.Mutex
	events func(provider.CMEvent)
}

func (c *cmID) eventsFunc() func(provider.CMEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events
}

func (c *cmID) SetEvents(events func(provider.CMEvent)) {
	c.mu.Lock()
	c.events = events
	c.mu.Unlock()
}

// do calls a librdmacm function that returns 0 or -1 and errno.
//
//go:uintptrescapes
func (c *cmID) do(what string, fn uintptr, args ...uintptr) error {
	r, errno := c.m.lib.callErrno(fn, append([]uintptr{c.id}, args...)...)
	if int32(r) == 0 {
		return nil
	}
	if errno == 0 {
		errno = syscall.EINVAL
	}
	return fmt.Errorf("%s: %w", what, errno)
}

func (c *cmID) SetOption(opt provider.CMOption, value int) error {
	// TOS and ACK timeout are uint8_t, REUSEADDR and AFONLY int.
	v := new(int32)
	size := uintptr(4)
	if opt == provider.CMOptionTOS || opt == provider.CMOptionAckTimeout {
		*(*uint8)(unsafe.Pointer(v)) = uint8(value)
		size = 1
	} else {
		*v = int32(value)
	}
	err := c.do("rdma_set_option", c.m.cl.setOption, 0, uintptr(opt), uintptr(unsafe.Pointer(v)), size)
	runtime.KeepAlive(v)
	return err
}

// sockaddr is a struct sockaddr_storage holding a as sockaddr_in or
// sockaddr_in6.
func sockaddr(a netip.AddrPort) *[128]byte {
	sa := new([128]byte)
	ip := a.Addr()
	if ip.Is4() || ip.Is4In6() {
		binary.NativeEndian.PutUint16(sa[0:], syscall.AF_INET)
		binary.BigEndian.PutUint16(sa[2:], a.Port())
		b := ip.Unmap().As4()
		copy(sa[4:8], b[:])
		return sa
	}
	binary.NativeEndian.PutUint16(sa[0:], syscall.AF_INET6)
	binary.BigEndian.PutUint16(sa[2:], a.Port())
	b := ip.As16()
	copy(sa[8:24], b[:])
	return sa
}

// addrOf reads a sockaddr (AF_INET or AF_INET6).
func addrOf(p uintptr) netip.AddrPort {
	b := unsafe.Slice((*byte)(cptr(p)), 28)
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b[0:]) {
	case syscall.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case syscall.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port)
	}
	return netip.AddrPort{}
}

func (c *cmID) BindAddr(a netip.AddrPort) error {
	sa := sockaddr(a)
	err := c.do("rdma_bind_addr", c.m.cl.bindAddr, uintptr(unsafe.Pointer(sa)))
	runtime.KeepAlive(sa)
	return err
}

func ms(d time.Duration) uintptr {
	if d <= 0 {
		return 2000
	}
	return uintptr(max(d.Milliseconds(), 1))
}

func (c *cmID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	var s *[128]byte
	if src.Addr().IsValid() {
		s = sockaddr(src)
	}
	d := sockaddr(dst)
	err := c.do("rdma_resolve_addr", c.m.cl.resolveAddr, uintptr(unsafe.Pointer(s)), uintptr(unsafe.Pointer(d)), ms(timeout))
	runtime.KeepAlive(s)
	runtime.KeepAlive(d)
	return err
}

func (c *cmID) ResolveRoute(timeout time.Duration) error {
	return c.do("rdma_resolve_route", c.m.cl.resolveRoute, ms(timeout))
}

func (c *cmID) Listen(backlog int) error {
	return c.do("rdma_listen", c.m.cl.listen, uintptr(backlog))
}

// connParam lays p out as a struct rdma_conn_param followed by its
// private data, in one Go allocation that lives through the call.
func connParam(p *provider.ConnParam) []byte {
	const size = unsafe.Sizeof(cConnParam{})
	buf := make([]byte, size+uintptr(len(p.PrivateData)))
	c := (*cConnParam)(unsafe.Pointer(&buf[0]))
	if len(p.PrivateData) > 0 {
		copy(buf[size:], p.PrivateData)
		c.PrivateData = uintptr(unsafe.Pointer(&buf[size]))
		c.PrivateDataLen = uint8(min(len(p.PrivateData), 255))
	}
	c.RespRes, c.InitDepth, c.FlowControl = p.ResponderResources, p.InitiatorDepth, b2u(p.FlowControl)
	c.RetryCount, c.RNRRetryCount, c.SRQ, c.QPNum = p.RetryCount, p.RNRRetryCount, b2u(p.SRQ), p.QPNum
	return buf
}

func (c *cmID) Connect(p *provider.ConnParam) error {
	buf := connParam(p)
	err := c.do("rdma_connect", c.m.cl.connect, uintptr(unsafe.Pointer(&buf[0])))
	runtime.KeepAlive(buf)
	return err
}

func (c *cmID) Accept(p *provider.ConnParam) error {
	buf := connParam(p)
	err := c.do("rdma_accept", c.m.cl.accept, uintptr(unsafe.Pointer(&buf[0])))
	runtime.KeepAlive(buf)
	return err
}

func (c *cmID) Reject(pdata []byte) error {
	var p uintptr
	if len(pdata) > 0 {
		p = uintptr(unsafe.Pointer(&pdata[0]))
	}
	err := c.do("rdma_reject", c.m.cl.reject, p, uintptr(min(len(pdata), 255)))
	runtime.KeepAlive(pdata)
	return err
}

func (c *cmID) Establish() error { return c.do("rdma_establish", c.m.cl.establish) }

func (c *cmID) Notify(ev provider.EventType) error {
	return c.do("rdma_notify", c.m.cl.notify, uintptr(ev))
}

func (c *cmID) Disconnect() error { return c.do("rdma_disconnect", c.m.cl.disconnect) }

func (c *cmID) InitQPAttr(state provider.QPState) (provider.QPAttr, provider.QPAttrMask, error) {
	a, mask := &cQPAttr{QPState: uint32(state)}, new(int32)
	if err := c.do("rdma_init_qp_attr", c.m.cl.initQPAttr, uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(mask))); err != nil {
		return provider.QPAttr{}, 0, err
	}
	return fromCQPAttr(a), provider.QPAttrMask(*mask), nil
}

// fromCQPAttr converts a struct ibv_qp_attr.
func fromCQPAttr(a *cQPAttr) provider.QPAttr {
	return provider.QPAttr{
		State: provider.QPState(a.QPState), CurState: provider.QPState(a.CurQPState),
		PathMTU: provider.MTU(a.PathMTU), PathMigState: uint8(a.PathMigState),
		QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPN: a.DestQPNum,
		AccessFlags: provider.AccessFlags(a.QPAccessFlags), Cap: provider.QPCap(a.Cap),
		AH: fromCAH(&a.AHAttr), AltAH: fromCAH(&a.AltAHAttr), PKeyIndex: a.PKeyIndex,
		AltPKeyIndex: a.AltPKeyIndex, EnSQDAsyncNotify: a.EnSQDAsyncNotify != 0, SQDraining: a.SQDraining != 0,
		MaxRDAtomic: a.MaxRDAtomic, MaxDestRDAtomic: a.MaxDestRDAtomic, MinRNRTimer: a.MinRNRTimer,
		PortNum: a.PortNum, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry,
		AltPortNum: a.AltPortNum, AltTimeout: a.AltTimeout, RateLimit: a.RateLimit,
	}
}

func (c *cmID) DeviceName() string {
	ctx := *(*uintptr)(cptr(c.id + cmIDVerbs))
	if ctx == 0 {
		return ""
	}
	return gostring(call(c.m.lib.getDeviceName, *(*uintptr)(cptr(ctx + ibvContextDevice))))
}

func (c *cmID) PortNum() uint8 { return *(*uint8)(cptr(c.id + cmIDPortNum)) }

func (c *cmID) Addrs() (src, dst netip.AddrPort) {
	return addrOf(c.id + cmIDSrcAddr), addrOf(c.id + cmIDDstAddr)
}

func (c *cmID) Route() provider.CMPath {
	pr := *(*uintptr)(cptr(c.id + cmIDPathRec))
	if pr == 0 || *(*int32)(cptr(c.id + cmIDNumPaths)) < 1 {
		return provider.CMPath{}
	}
	b := unsafe.Slice((*byte)(cptr(pr)), 64)
	return provider.CMPath{
		DGID: provider.GID(b[pathDGID : pathDGID+16]), SGID: provider.GID(b[pathSGID : pathSGID+16]),
		FlowLabel: binary.BigEndian.Uint32(b[pathFlowLabel:]), HopLimit: b[pathHopLimit],
		TrafficClass: b[pathTClass], PKey: binary.BigEndian.Uint16(b[pathPKey:]), SL: b[pathSL],
		MTU: provider.MTU(b[pathMTU]), PacketLifeTime: b[pathPLT],
	}
}

// Destroy destroys the id. Its events were all acknowledged when they
// were taken, so rdma_destroy_id does not wait.
func (c *cmID) Destroy() error {
	c.m.mu.Lock()
	if c.m.ids[c.id] != c {
		c.m.mu.Unlock()
		return fmt.Errorf("rdma_destroy_id: %w", syscall.EBADF)
	}
	delete(c.m.ids, c.id)
	c.m.mu.Unlock()
	c.SetEvents(nil)
	if int32(call(c.m.cl.destroyID, c.id)) != 0 {
		return fmt.Errorf("rdma_destroy_id: %w", syscall.EINVAL)
	}
	return nil
}
