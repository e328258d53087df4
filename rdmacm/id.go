package rdmacm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider"
	"github.com/rdma-go/rdma-go/verbs"
)

// cmaState is an id's state; values follow Linux's enum rdma_cm_state.
type cmaState int

const (
	stIdle cmaState = iota
	stAddrQuery
	stAddrResolved
	stRouteQuery
	stRouteResolved
	stConnect
	stDisconnect
	stAddrBound
	stListen
	stDeviceRemoval
	stDestroying
)

var stateNames = [...]string{"IDLE", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY", "ROUTE_RESOLVED",
	"CONNECT", "DISCONNECT", "ADDR_BOUND", "LISTEN", "DEVICE_REMOVAL", "DESTROYING"}

func (s cmaState) String() string { return stateNames[s] }

// ID is a connection manager identifier (struct rdma_cm_id): one
// connection, one listener, or one UD endpoint.
type ID struct {
	// postMu orders posting the id's events against Migrate (taken
	// before mu).
	postMu sync.Mutex
	mu     sync.Mutex
	ch     *EventChannel
	sink   sink
	sync   bool
	user   any
	ps     PortSpace
	qpType verbs.QPType

	state  cmaState
	dev    *device
	src    netip.AddrPort
	dst    netip.AddrPort
	bound  bool // holds a port binding
	path   ibcm.Path
	routed bool

	qp             *verbs.QP
	pd             *verbs.PD
	sendCQ, recvCQ *verbs.CQ
	compCh         *verbs.CompChannel
	ownCQs         bool
	srq            *verbs.SRQ

	conn      *ibcm.Conn
	respRes   uint8 // negotiated: reads/atomics we answer
	initDepth uint8 // negotiated: reads/atomics we issue
	psn       uint32
	qkey      uint32

	// kid is the id of an outside CM (kernelcm.go) that runs this id's
	// connection, on a kernel device; listenKIDs listen for a wildcard.
	kid        provider.CMID
	listenKIDs []provider.CMID
	req        ConnParam // a passive kernel id's request

	backlog    int
	pending    int
	listenDevs []*device
	listenSIDs []uint64
	parent     *ID

	tos        uint8
	reuseAddr  bool
	afOnly     bool
	ackTimeout uint8 // 0: not set
	minRNR     uint8
	cmTimeout  uint8
	cmRetries  uint8
	epInit     *verbs.QPInitAttr

	destroyed bool
}

// CreateID creates an id (rdma_create_id) in port space ps on channel ch;
// a nil channel makes a synchronous id, whose calls block until their
// result. context is the user's value (Context returns it). RDMA_PS_TCP
// and RDMA_PS_IB ids are RC, RDMA_PS_UDP ids UD.
func CreateID(ch *EventChannel, context any, ps PortSpace) (*ID, error) {
	t := verbs.QPTypeRC
	if ps == PSUDP || ps == PSIPoIB {
		t = verbs.QPTypeUD
	}
	return CreateIDType(ch, context, ps, t)
}

// CreateIDType is CreateID with an explicit QP type (rdma_create_id2),
// for example UD in RDMA_PS_IB.
func CreateIDType(ch *EventChannel, context any, ps PortSpace, t verbs.QPType) (*ID, error) {
	switch ps {
	case PSTCP, PSUDP, PSIB:
	case PSIPoIB:
		return nil, fmt.Errorf("rdmacm: RDMA_PS_IPOIB is refused on RoCE devices: %w", syscall.EINVAL)
	default:
		return nil, fmt.Errorf("rdmacm: port space %#x: %w", uint16(ps), syscall.EINVAL)
	}
	switch t {
	case verbs.QPTypeRC, verbs.QPTypeUC, verbs.QPTypeUD:
	default:
		return nil, fmt.Errorf("rdmacm: QP type %v: %w", t, syscall.EINVAL)
	}
	if err := haveDevices(); err != nil {
		return nil, err
	}
	id := &ID{user: context, ps: ps, qpType: t, ch: ch, qkey: UDPQKey,
		cmTimeout: ibcm.DefaultCMResponseTimeout, cmRetries: ibcm.DefaultMaxCMRetries}
	if ch == nil {
		id.ch, id.sync = newChannel(), true
	}
	id.sink = id.ch
	return id, nil
}

// Context returns the user's value given to CreateID.
func (id *ID) Context() any { return id.user }

// SetContext replaces the user's value.
func (id *ID) SetContext(v any) {
	id.mu.Lock()
	id.user = v
	id.mu.Unlock()
}

// Channel returns the id's event channel (a private one for a synchronous
// id).
func (id *ID) Channel() *EventChannel { return id.ch }

// PortSpace returns the id's port space.
func (id *ID) PortSpace() PortSpace { return id.ps }

// QPType returns the id's QP type.
func (id *ID) QPType() verbs.QPType { return id.qpType }

// Verbs returns the device context the id is bound to (rdma_cm_id.verbs),
// nil before an address is bound or resolved. It stays open while an id
// uses the device.
func (id *ID) Verbs() *verbs.Context {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.dev == nil {
		return nil
	}
	return id.dev.ctx
}

// QP returns the QP CreateQP made, or nil.
func (id *ID) QP() *verbs.QP { id.mu.Lock(); defer id.mu.Unlock(); return id.qp }

// PD returns the PD of the id's QP.
func (id *ID) PD() *verbs.PD { id.mu.Lock(); defer id.mu.Unlock(); return id.pd }

// SendCQ returns the send CQ of the id's QP.
func (id *ID) SendCQ() *verbs.CQ { id.mu.Lock(); defer id.mu.Unlock(); return id.sendCQ }

// RecvCQ returns the receive CQ of the id's QP.
func (id *ID) RecvCQ() *verbs.CQ { id.mu.Lock(); defer id.mu.Unlock(); return id.recvCQ }

// SrcAddr returns the local address and port (rdma_get_local_addr).
func (id *ID) SrcAddr() netip.AddrPort { id.mu.Lock(); defer id.mu.Unlock(); return id.src }

// DstAddr returns the peer's address and port (rdma_get_peer_addr).
func (id *ID) DstAddr() netip.AddrPort { id.mu.Lock(); defer id.mu.Unlock(); return id.dst }

// SrcPort returns the local port (rdma_get_src_port, in host order).
func (id *ID) SrcPort() uint16 { return id.SrcAddr().Port() }

// DstPort returns the peer's port (rdma_get_dst_port).
func (id *ID) DstPort() uint16 { return id.DstAddr().Port() }

// Route is what rdma_cm resolved for a connection: the path that goes into
// the REQ.
type Route struct {
	Path ibcm.Path
}

// Route returns the resolved route (rdma_cm_id.route).
func (id *ID) Route() Route { id.mu.Lock(); defer id.mu.Unlock(); return Route{Path: id.path} }

// post hands an event of the id (for a CONNECT_REQUEST: of the listening
// id) to its channel (or hook). Call it without the id's lock. On a
// channel it posts under postMu, so that Migrate moves either the event
// or none of it.
func (id *ID) post(ev *Event) {
	id.postMu.Lock()
	id.mu.Lock()
	s := id.sink
	id.mu.Unlock()
	if ch, ok := s.(*EventChannel); ok {
		ch.post(ev)
		id.postMu.Unlock()
		return
	}
	id.postMu.Unlock()
	s.post(ev) // a hook: user code, never under a lock
}

// Migrate moves the id's events to ch (rdma_migrate_id), those already
// queued on its channel and not yet taken too, as the kernel's ucma does;
// a nil ch makes it synchronous.
func (id *ID) Migrate(ch *EventChannel) error {
	id.postMu.Lock()
	defer id.postMu.Unlock()
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.destroyed {
		return ErrClosed
	}
	if ch == nil {
		ch = newChannel()
		id.sync = true
	} else {
		id.sync = false
	}
	if old, ok := id.sink.(*EventChannel); ok && old != ch {
		ch.postAll(old.take(id))
	}
	id.ch, id.sink = ch, ch
	return nil
}

// setHook routes the id's events to f instead of a channel (Go API).
func (id *ID) setHook(f func(*Event)) {
	id.mu.Lock()
	id.sink, id.sync = hook(f), false
	id.mu.Unlock()
}

// Options (rdma_set_option).

// SetTOS sets the IP type of service (RDMA_OPTION_ID_TOS) used for the
// route resolved after it.
func (id *ID) SetTOS(tos uint8) {
	id.mu.Lock()
	id.tos = tos
	id.mu.Unlock()
	id.setKernelOption(provider.CMOptionTOS, int(tos))
}

// SetReuseAddr allows binding a port another id holds
// (RDMA_OPTION_ID_REUSEADDR).
func (id *ID) SetReuseAddr(on bool) {
	id.mu.Lock()
	id.reuseAddr = on
	id.mu.Unlock()
	id.setKernelOption(provider.CMOptionReuseAddr, int(b2i(on)))
}

// SetAFOnly makes an IPv6 wildcard listener refuse IPv4 (RDMA_OPTION_ID_AFONLY).
func (id *ID) SetAFOnly(on bool) {
	id.mu.Lock()
	id.afOnly = on
	id.mu.Unlock()
	id.setKernelOption(provider.CMOptionAFOnly, int(b2i(on)))
}

// SetAckTimeout sets the QP's local ACK timeout (RDMA_OPTION_ID_ACK_TIMEOUT):
// the route's packet life time becomes timeout−1.
func (id *ID) SetAckTimeout(timeout uint8) {
	id.mu.Lock()
	id.ackTimeout = timeout
	id.mu.Unlock()
	id.setKernelOption(provider.CMOptionAckTimeout, int(timeout))
}

func b2i(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// SetMinRNRTimer sets the RNR NAK timer of the id's RC QP (rdma_set_min_rnr_timer).
func (id *ID) SetMinRNRTimer(t uint8) { id.mu.Lock(); id.minRNR = t; id.mu.Unlock() }

// SetCMTimeouts sets the CM response timeout (4.096 µs × 2^t; rdma_cm's
// 20 is about 4 s) and the number of CM retransmissions (15) of the
// id's next Connect — a Go extension: Linux has them fixed.
func (id *ID) SetCMTimeouts(responseTimeout, maxRetries uint8) {
	id.mu.Lock()
	id.cmTimeout, id.cmRetries = min(responseTimeout, 31), min(maxRetries, 15)
	id.mu.Unlock()
}

// ports holds the rdma_cm port bindings of the process.
var ports struct {
	mu sync.Mutex
	m  map[portKey][]*ID
}

type portKey struct {
	ps   PortSpace
	port uint16
}

// bindPort binds id to a (port 0: an ephemeral port), checking for
// conflicts with the other ids of the port space.
func bindPort(id *ID, a netip.AddrPort) (netip.AddrPort, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.m == nil {
		ports.m = make(map[portKey][]*ID)
	}
	free := func(port uint16) bool {
		for _, o := range ports.m[portKey{id.ps, port}] {
			oa := o.src.Addr()
			if oa == a.Addr() || oa.IsUnspecified() || a.Addr().IsUnspecified() {
				if !(id.reuseAddr && o.reuseAddr && o.state != stListen) {
					return false
				}
			}
		}
		return true
	}
	port := a.Port()
	if port == 0 {
		for i := 0; ; i++ {
			if i == 100000 {
				return netip.AddrPort{}, ErrAddrInUse
			}
			var b [2]byte
			_, _ = rand.Read(b[:])
			p := 32768 + binary.LittleEndian.Uint16(b[:])%(61000-32768)
			if free(p) {
				port = p
				break
			}
		}
	} else if !free(port) {
		return netip.AddrPort{}, fmt.Errorf("%w: %s port %d", ErrAddrInUse, id.ps, port)
	}
	a = netip.AddrPortFrom(a.Addr(), port)
	id.src = a
	k := portKey{id.ps, port}
	ports.m[k] = append(ports.m[k], id)
	return a, nil
}

func unbindPort(id *ID) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	k := portKey{id.ps, id.src.Port()}
	l := ports.m[k]
	for i, o := range l {
		if o == id {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(ports.m, k)
	} else {
		ports.m[k] = l
	}
}

// BindAddr binds the id to a local address and port (rdma_bind_addr). An
// unspecified address binds every device (for listening); port 0 picks an
// ephemeral port.
func (id *ID) BindAddr(a netip.AddrPort) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.bindLocked(a)
}

func (id *ID) bindLocked(a netip.AddrPort) error {
	if id.destroyed {
		return ErrClosed
	}
	if id.state != stIdle {
		return fmt.Errorf("rdmacm: bind in state %s: %w", id.state, ErrInvalid)
	}
	addr := a.Addr().Unmap()
	if !addr.IsValid() {
		addr = netip.IPv4Unspecified()
	}
	var d *device
	if !addr.IsUnspecified() {
		vd, err := deviceFor(addr)
		if err != nil {
			return err
		}
		switch {
		case vd == nil && addr.IsLoopback():
			if d, err = acquireLoopback(addr); err != nil {
				return err
			}
		case vd == nil:
			return fmt.Errorf("%w: %s", ErrAddrNotAvail, addr)
		default:
			if cm, err := kernelCM(vd); cm != nil || err != nil {
				if err != nil {
					return err
				}
				return id.kernelBindLocked(vd, cm, netip.AddrPortFrom(addr, a.Port()))
			}
			if d, err = acquire(vd); err != nil {
				return err
			}
		}
	}
	if _, err := bindPort(id, netip.AddrPortFrom(addr, a.Port())); err != nil {
		if d != nil {
			d.release()
		}
		return err
	}
	id.dev, id.bound, id.state = d, true, stAddrBound
	return nil
}

// ResolveAddr resolves dst (and src, if given) to a device and a local
// address (rdma_resolve_addr): on RoCE, the device owning the source
// address of the route to dst. ADDR_RESOLVED or ADDR_ERROR follows; a
// synchronous id returns the result. timeout is accepted for librdmacm
// parity (resolution is immediate).
func (id *ID) ResolveAddr(ctx context.Context, src, dst netip.AddrPort, timeout time.Duration) error {
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return ErrClosed
	}
	if id.state != stIdle && id.state != stAddrBound {
		id.mu.Unlock()
		return fmt.Errorf("rdmacm: resolve address in state %s: %w", id.state, ErrInvalid)
	}
	ev := &Event{ID: id, Type: EventAddrResolved}
	later, err := id.resolveLocked(src, dst, timeout)
	if err != nil {
		ev.Type, ev.Status = EventAddrError, -errnoOf(err, syscall.EHOSTUNREACH)
		if id.state == stAddrQuery {
			id.state = stIdle
		}
	}
	id.mu.Unlock()
	if !later || err != nil {
		id.post(ev)
	}
	if id.isSync() {
		return id.complete(ctx)
	}
	return nil
}

// resolveLocked resolves at once on an in-band device; on a kernel
// device it starts the CM's resolution and reports later (true), the
// CM's event following.
func (id *ID) resolveLocked(src, dst netip.AddrPort, timeout time.Duration) (later bool, err error) {
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if !dst.Addr().IsValid() || dst.Addr().IsUnspecified() {
		return false, fmt.Errorf("rdmacm: resolve %s: %w", dst, syscall.EINVAL)
	}
	if id.state == stIdle {
		s := src
		if !s.Addr().IsValid() || s.Addr().IsUnspecified() {
			vd, err := deviceToward(dst.Addr())
			if err != nil {
				return false, err
			}
			if cm, err := kernelCM(vd); cm != nil || err != nil {
				if err != nil {
					return false, err
				}
				return true, id.kernelResolveLocked(cm, src, dst, timeout)
			}
			d, err := acquire(vd)
			if err != nil {
				return false, err
			}
			s = netip.AddrPortFrom(d.addr, src.Port())
			err = id.bindLocked(s)
			d.release()
			if err != nil {
				return false, err
			}
		} else if err := id.bindLocked(src); err != nil {
			return false, err
		}
	}
	if id.kid != nil {
		return true, id.kernelResolveLocked(nil, netip.AddrPort{}, dst, timeout)
	}
	if id.dev == nil {
		// Bound to a wildcard: take the device toward dst.
		vd, err := deviceToward(dst.Addr())
		if err != nil {
			return false, err
		}
		if cm, err := kernelCM(vd); cm != nil || err != nil {
			if err != nil {
				return false, err
			}
			return true, id.kernelResolveLocked(cm, id.src, dst, timeout)
		}
		if id.dev, err = acquire(vd); err != nil {
			return false, err
		}
		id.src = netip.AddrPortFrom(id.dev.addr, id.src.Port())
	}
	if id.dev.addr.Is4() != dst.Addr().Is4() {
		return false, fmt.Errorf("rdmacm: %s and %s are of different families: %w", id.dev.addr, dst.Addr(), syscall.EAFNOSUPPORT)
	}
	id.dst = dst
	if dst.Addr().IsLoopback() {
		id.state = stAddrResolved
		return false, nil
	}
	// The next hop must answer at the link layer first, as on Linux; the
	// event follows.
	if timeout <= 0 {
		timeout = defaultResolveTimeout
	}
	id.state = stAddrQuery
	go id.awaitNeighbour(dst.Addr(), timeout)
	return true, nil
}

// defaultResolveTimeout bounds address resolution when the caller gives
// no timeout: rping's 2 s.
const defaultResolveTimeout = 2 * time.Second

// awaitNeighbour finishes a soft device's address resolution: ADDR_RESOLVED
// once the next hop toward dst answers, ADDR_ERROR (ETIMEDOUT) when it does
// not within timeout. An id destroyed or moved on meanwhile gets nothing.
func (id *ID) awaitNeighbour(dst netip.Addr, timeout time.Duration) {
	err := resolveNeighbour(dst, timeout)
	id.mu.Lock()
	if id.destroyed || id.state != stAddrQuery {
		id.mu.Unlock()
		return
	}
	ev := &Event{ID: id, Type: EventAddrResolved}
	if err != nil {
		ev.Type, ev.Status = EventAddrError, -errnoOf(err, syscall.ETIMEDOUT)
		id.state = stAddrBound
	} else {
		id.state = stAddrResolved
	}
	id.mu.Unlock()
	id.post(ev)
}

// ResolveRoute builds the path to the resolved address (rdma_resolve_route):
// on RoCE, locally, from the two IP addresses (docs/spec/cm-mad.md §4.4).
// ROUTE_RESOLVED follows.
func (id *ID) ResolveRoute(ctx context.Context, timeout time.Duration) error {
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return ErrClosed
	}
	if id.state != stAddrResolved {
		id.mu.Unlock()
		return fmt.Errorf("rdmacm: resolve route in state %s: %w", id.state, ErrInvalid)
	}
	if k := id.kid; k != nil {
		id.state = stRouteQuery
		if err := k.ResolveRoute(timeout); err != nil {
			id.state = stAddrResolved
			id.mu.Unlock()
			return fmt.Errorf("rdmacm: resolve route: %w", err)
		}
		id.mu.Unlock()
		if id.isSync() {
			return id.complete(ctx)
		}
		return nil
	}
	plt := uint8(ibcm.DefaultPacketLifeTime)
	if id.ackTimeout > 0 {
		plt = id.ackTimeout - 1
	}
	id.path = ibcm.Path{
		Local: id.dev.addr, Remote: id.dst.Addr(), TrafficClass: id.tos, HopLimit: 64,
		FlowLabel: (uint32(id.src.Port())*31 + uint32(id.dst.Port())) & 0xFFFFF,
		MTU:       uint8(id.dev.mtu), PacketLifeTime: plt, PKey: 0xFFFF,
	}
	id.routed, id.state = true, stRouteResolved
	id.mu.Unlock()
	id.post(&Event{ID: id, Type: EventRouteResolved})
	if id.isSync() {
		return id.complete(ctx)
	}
	return nil
}

func (id *ID) isSync() bool { id.mu.Lock(); defer id.mu.Unlock(); return id.sync }

// complete waits for a synchronous id's next event and turns a failure
// into an error (librdmacm's ucma_complete).
func (id *ID) complete(ctx context.Context) error {
	ev, err := id.ch.GetCMEvent(ctx)
	if err != nil {
		return err
	}
	return eventErr(ev)
}

func eventErr(ev *Event) error {
	switch {
	case ev.Type == EventRejected:
		pd := ev.Conn.PrivateData
		if ev.ID != nil && ev.ID.qpType == verbs.QPTypeUD {
			pd = ev.UD.PrivateData
		}
		return &RejectedError{Reason: ev.Status, PrivateData: pd}
	case ev.Status != 0 || ev.Type == EventAddrError || ev.Type == EventRouteError ||
		ev.Type == EventConnectError || ev.Type == EventUnreachable:
		return &EventError{Event: ev.Type, Status: ev.Status}
	}
	return nil
}

func errnoOf(err error, def syscall.Errno) int {
	var e syscall.Errno
	for x := err; x != nil; {
		if v, ok := x.(syscall.Errno); ok {
			e = v
			break
		}
		u, ok := x.(interface{ Unwrap() error })
		if !ok {
			break
		}
		x = u.Unwrap()
	}
	if e == 0 {
		e = def
	}
	return int(e)
}

func randPSN() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:]) & 0xFFFFFF
}

// defaultParam is what librdmacm sends for a nil rdma_conn_param: as many
// RDMA READs and atomics as the device allows, retry and RNR retry 7.
func defaultParam() *ConnParam {
	return &ConnParam{ResponderResources: MaxRespRes, InitiatorDepth: MaxRespRes, RetryCount: 7, RNRRetryCount: 7}
}

// Connect starts connecting (rdma_connect): a REQ for an RC id, a SIDR_REQ
// for a UD id, after ResolveRoute. param.PrivateData is at most 56 bytes
// (180 for UD); a nil param asks for as many RDMA READs and atomics as
// the device allows and retry counts 7, as librdmacm. ESTABLISHED,
// REJECTED, UNREACHABLE or CONNECT_ERROR follows; a synchronous id waits
// for it.
func (id *ID) Connect(ctx context.Context, param *ConnParam) error {
	if param == nil {
		param = defaultParam()
	}
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return ErrClosed
	}
	if id.state != stRouteResolved {
		id.mu.Unlock()
		return fmt.Errorf("rdmacm: connect in state %s: %w", id.state, ErrInvalid)
	}
	var err error
	if id.kid != nil {
		err = id.kernelConnectLocked(param)
	} else if id.qpType == verbs.QPTypeUD {
		err = id.connectUDLocked(param)
	} else {
		err = id.connectRCLocked(param)
	}
	if err == nil {
		id.state = stConnect
	}
	id.mu.Unlock()
	if err != nil {
		return err
	}
	if id.isSync() {
		return id.complete(ctx)
	}
	return nil
}

func (id *ID) header(pdata []byte, max int) ([]byte, error) {
	if len(pdata) > max {
		return nil, fmt.Errorf("rdmacm: %d bytes of private data, at most %d: %w", len(pdata), max, syscall.EINVAL)
	}
	b := make([]byte, mad.CMAHeaderLen+len(pdata))
	mad.CMAHeader(b).Encode(id.src.Port(), id.src.Addr(), id.dst.Addr())
	copy(b[mad.CMAHeaderLen:], pdata)
	return b, nil
}

func (id *ID) connectRCLocked(param *ConnParam) error {
	pd, err := id.header(param.PrivateData, MaxREQPrivateData)
	if err != nil {
		return err
	}
	qpn := param.QPNum
	if id.qp != nil {
		qpn = id.qp.QPN()
	}
	id.psn = randPSN()
	id.respRes, id.initDepth = param.ResponderResources, param.InitiatorDepth
	if id.respRes == MaxRespRes {
		id.respRes = maxRDAtomic
	}
	if id.initDepth == MaxRespRes {
		id.initDepth = maxRDAtomic
	}
	transport := uint8(mad.TransportRC)
	if id.qpType == verbs.QPTypeUC {
		transport = mad.TransportUC
	}
	p := &ibcm.ConnectParams{
		Path: id.path, ServiceID: id.ps.ServiceID(id.dst.Port()), QPN: qpn, Transport: transport,
		StartingPSN: id.psn, ResponderResources: id.respRes, InitiatorDepth: id.initDepth,
		RemoteCMResponseTimeout: id.cmTimeout, LocalCMResponseTimeout: id.cmTimeout,
		RetryCount: min(param.RetryCount, 7), RNRRetryCount: min(param.RNRRetryCount, 7),
		MaxCMRetries: id.cmRetries, FlowControl: param.FlowControl, SRQ: param.SRQ || id.srq != nil,
		LocalACKDelay: localAckDelay, PrivateData: pd,
	}
	c, err := id.dev.cm.Connect(p, id.cmEvent)
	if err != nil {
		return fmt.Errorf("rdmacm: connect: %w", err)
	}
	id.conn = c
	return nil
}

func (id *ID) connectUDLocked(param *ConnParam) error {
	pd, err := id.header(param.PrivateData, MaxSIDRREQPrivateData)
	if err != nil {
		return err
	}
	p := &ibcm.SIDRParams{To: id.dst.Addr(), ServiceID: id.ps.ServiceID(id.dst.Port()), Timeout: id.cmTimeout,
		MaxCMRetries: id.cmRetries, TrafficClass: id.tos, FlowLabel: id.path.FlowLabel, HopLimit: 64, PrivateData: pd}
	c, err := id.dev.cm.SIDRRequest(p, id.cmEvent)
	if err != nil {
		return fmt.Errorf("rdmacm: connect: %w", err)
	}
	id.conn = c
	return nil
}

// Listen starts listening (rdma_listen) for connections to the bound
// address and port (an unbound id binds the wildcard address and an
// ephemeral port). backlog bounds the CONNECT_REQUESTs not yet taken with
// GetCMEvent or GetRequest; further REQs are dropped unanswered, so their
// senders retry. backlog ≤ 0 means 1024.
func (id *ID) Listen(backlog int) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.destroyed {
		return ErrClosed
	}
	if id.state == stIdle {
		if err := id.bindLocked(netip.AddrPortFrom(netip.IPv4Unspecified(), 0)); err != nil {
			return err
		}
	}
	if id.state != stAddrBound {
		return fmt.Errorf("rdmacm: listen in state %s: %w", id.state, ErrInvalid)
	}
	if backlog <= 0 || backlog > DefaultBacklog {
		backlog = DefaultBacklog
	}
	id.backlog = backlog
	if id.kid != nil {
		if _, err := id.kernelListenLocked(backlog); err != nil {
			return err
		}
		id.state = stListen
		return nil
	}
	var devs []*device
	if id.dev != nil {
		id.dev.refs++ // listenDevs holds its own reference
		devs = []*device{id.dev}
	} else {
		vds, err := listDevices()
		if err != nil {
			return fmt.Errorf("rdmacm: %w", err)
		}
		for _, vd := range vds {
			a := vd.Addr()
			if a.IsValid() && a.Unmap().Is4() != id.src.Addr().Is4() && (id.afOnly || id.src.Addr().Is4()) {
				continue
			}
			if cm, _ := kernelCM(vd); cm != nil {
				continue // listened on below, through its CM
			}
			d, err := acquire(vd)
			if err != nil {
				continue // a device that cannot open is not listened on
			}
			devs = append(devs, d)
		}
		n, err := id.kernelListenLocked(backlog)
		if err != nil {
			for _, d := range devs {
				d.release()
			}
			return err
		}
		if len(devs) == 0 && n == 0 {
			return ErrNoDevice
		}
	}
	sid := id.ps.ServiceID(id.src.Port())
	devices.mu.Lock()
	var added []*device
	var err error
	for _, d := range devs {
		s := d.services[sid]
		if s == nil {
			l, lerr := d.cm.Listen(sid, func(c *ibcm.Conn, ev *ibcm.Event) error { return d.onRequest(c, ev) })
			if lerr != nil {
				err = lerr
				break
			}
			s = &service{l: l}
			d.services[sid] = s
		}
		for _, o := range s.ids {
			if o.src.Addr() == id.src.Addr() {
				err = ErrAddrInUse
			}
		}
		if err != nil {
			break
		}
		s.ids = append(s.ids, id)
		added = append(added, d)
	}
	devices.mu.Unlock()
	if err != nil {
		id.unlisten(added, sid)
		for _, d := range devs {
			d.release()
		}
		id.destroyListenKIDs()
		return fmt.Errorf("rdmacm: listen: %w", err)
	}
	id.listenDevs, id.listenSIDs = devs, []uint64{sid}
	id.state = stListen
	return nil
}

// unlisten removes id from the services of devs.
func (id *ID) unlisten(devs []*device, sid uint64) {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	for _, d := range devs {
		s := d.services[sid]
		if s == nil {
			continue
		}
		for i, o := range s.ids {
			if o == id {
				s.ids = append(s.ids[:i], s.ids[i+1:]...)
				break
			}
		}
		if len(s.ids) == 0 {
			s.l.Close()
			delete(d.services, sid)
		}
	}
}

// requestTaken is called when a CONNECT_REQUEST of this listener leaves
// its channel: the backlog has room again.
func (id *ID) requestTaken() {
	id.mu.Lock()
	if id.pending > 0 {
		id.pending--
	}
	id.mu.Unlock()
}

// GetRequest returns the next connection request of a synchronous
// listening id (rdma_get_request), creating its QP if the listener came
// from CreateEP with QP attributes.
func (id *ID) GetRequest(ctx context.Context) (*ID, error) {
	id.mu.Lock()
	sync, st, init, pd := id.sync, id.state, id.epInit, id.pd
	id.mu.Unlock()
	if !sync || st != stListen {
		return nil, fmt.Errorf("rdmacm: get request on a non-listening or asynchronous id: %w", ErrInvalid)
	}
	for {
		ev, err := id.ch.GetCMEvent(ctx)
		if err != nil {
			return nil, err
		}
		if ev.Type != EventConnectRequest {
			continue
		}
		nid := ev.ID
		if init != nil {
			a := *init
			if err := nid.CreateQP(pd, &a); err != nil {
				nid.Reject(nil)
				nid.Destroy()
				return nil, err
			}
		}
		return nid, nil
	}
}

// onRequest handles a REQ or SIDR_REQ for a service the device listens on:
// the rdma_cm checks of docs/spec/cm-mad.md §4.5, the listener's backlog, then a
// new id and its CONNECT_REQUEST.
func (d *device) onRequest(c *ibcm.Conn, ev *ibcm.Event) error {
	sidr := ev.Type == ibcm.EventSIDRREQReceived
	var pdata []byte
	var sid uint64
	if sidr {
		s := mad.SIDRREQ(ev.MAD)
		pdata, sid = s.PrivateData(), s.ServiceID()
	} else {
		r := mad.REQ(ev.MAD)
		pdata, sid = r.PrivateData(), r.ServiceID()
	}
	h := mad.CMAHeader(pdata)
	if h.Validate() != nil {
		return fmt.Errorf("rdmacm: invalid rdma_cm header")
	}
	dst := h.DstAddr()
	if dst.Unmap() != d.addr {
		return fmt.Errorf("rdmacm: request for %s reached %s", dst, d.addr)
	}
	devices.mu.Lock()
	var lid *ID
	if s := d.services[sid]; s != nil {
		for _, o := range s.ids {
			a := o.src.Addr()
			if a == dst.Unmap() || (a.IsUnspecified() && (a.Is4() == dst.Is4() || !o.afOnly)) {
				if lid == nil || !a.IsUnspecified() {
					lid = o
				}
			}
		}
	}
	if lid != nil {
		d.refs++ // the new id's reference
	}
	devices.mu.Unlock()
	if lid == nil {
		return fmt.Errorf("rdmacm: no listener for %s", dst)
	}
	lid.mu.Lock()
	if lid.destroyed || lid.state != stListen || lid.pending >= lid.backlog {
		lid.mu.Unlock()
		d.release()
		return ibcm.ErrDrop
	}
	lid.pending++
	nid := &ID{user: lid.user, ps: lid.ps, qpType: lid.qpType, ch: lid.ch, sink: lid.sink, sync: lid.sync,
		qkey: UDPQKey, state: stConnect, dev: d, parent: lid, conn: c, tos: lid.tos, minRNR: lid.minRNR, psn: randPSN(),
		cmTimeout: lid.cmTimeout, cmRetries: lid.cmRetries, pd: lid.pd,
		src: netip.AddrPortFrom(dst.Unmap(), uint16(sid)), dst: netip.AddrPortFrom(h.SrcAddr().Unmap(), h.Port())}
	if lid.sync {
		nid.ch = newChannel()
		nid.sink = nid.ch
	}
	out := &Event{ID: nid, ListenID: lid, Type: EventConnectRequest}
	lid.mu.Unlock()
	if sidr {
		out.UD = UDParam{PrivateData: clone(pdata[mad.CMAHeaderLen:])}
	} else {
		r := mad.REQ(ev.MAD)
		p := r.Primary()
		nid.path = ibcm.Path{Local: d.addr, Remote: mad.GIDAddr(p.LocalGID()), FlowLabel: p.FlowLabel(),
			TrafficClass: p.TrafficClass(), HopLimit: p.HopLimit(), SL: p.SL(), MTU: r.PathMTU(),
			PacketLifeTime: max(p.LocalACKTimeout(), 1) - 1, PKey: r.PartitionKey()}
		out.Conn = ConnParam{PrivateData: clone(pdata[mad.CMAHeaderLen:]), ResponderResources: r.InitiatorDepth(),
			InitiatorDepth: r.ResponderResources(), FlowControl: r.EndToEndFlowControl(), RetryCount: r.RetryCount(),
			RNRRetryCount: r.RNRRetryCount(), SRQ: r.SRQ(), QPNum: r.LocalQPN()}
	}
	nid.routed = true
	c.SetHandler(nid.cmEvent)
	lid.post(out)
	return nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// cmEvent turns the IB CM's events into rdma_cm's (docs/spec/cm-mad.md §4.6).
func (id *ID) cmEvent(c *ibcm.Conn, ev *ibcm.Event) error {
	id.mu.Lock()
	if id.destroyed || id.conn != c {
		id.mu.Unlock()
		return nil
	}
	var out *Event
	switch ev.Type {
	case ibcm.EventREPReceived:
		if id.state != stConnect {
			break
		}
		rep := mad.REP(ev.MAD)
		cp := ConnParam{PrivateData: clone(rep.PrivateData()), ResponderResources: rep.InitiatorDepth(),
			InitiatorDepth: rep.ResponderResources(), FlowControl: rep.EndToEndFlowControl(),
			RNRRetryCount: rep.RNRRetryCount(), SRQ: rep.SRQ(), QPNum: rep.LocalQPN()}
		if id.qp == nil {
			out = &Event{ID: id, Type: EventConnectResponse, Conn: cp}
			break
		}
		if err := id.activeRTSLocked(); err != nil {
			_ = c.Reject(mad.RejConsumerDefined, nil, nil)
			id.qpErrorLocked()
			out = &Event{ID: id, Type: EventConnectError, Status: -errnoOf(err, syscall.EINVAL)}
			break
		}
		if err := c.SendRTU(nil); err != nil {
			out = &Event{ID: id, Type: EventConnectError, Status: -int(syscall.EINVAL)}
			break
		}
		out = &Event{ID: id, Type: EventEstablished, Conn: cp}
	case ibcm.EventRTUReceived, ibcm.EventUserEstablished:
		if id.state == stConnect {
			out = &Event{ID: id, Type: EventEstablished}
		}
	case ibcm.EventREJReceived:
		if id.state != stConnect {
			break
		}
		id.qpErrorLocked()
		rej := mad.REJ(ev.MAD)
		out = &Event{ID: id, Type: EventRejected, Status: int(rej.Reason()), Conn: ConnParam{PrivateData: clone(rej.PrivateData())}}
	case ibcm.EventREQError, ibcm.EventREPError:
		if id.state == stConnect {
			out = &Event{ID: id, Type: EventUnreachable, Status: etimedout}
		}
	case ibcm.EventDREQReceived, ibcm.EventDREPReceived, ibcm.EventDREQError:
		if id.state != stConnect {
			break
		}
		id.state = stDisconnect
		out = &Event{ID: id, Type: EventDisconnected}
		if ev.Type == ibcm.EventDREQError {
			out.Status = etimedout
		}
	case ibcm.EventTimeWaitExit:
		if id.state == stDisconnect {
			out = &Event{ID: id, Type: EventTimewaitExit}
		}
	case ibcm.EventSIDRREPReceived:
		if id.state != stConnect {
			break
		}
		rep := mad.SIDRREP(ev.MAD)
		ud := UDParam{PrivateData: clone(rep.PrivateData()), QPNum: rep.QPN(), QKey: rep.QKey(), AHAttr: id.ahAttrLocked()}
		if rep.Status() != mad.SIDRAccept {
			out = &Event{ID: id, Type: EventUnreachable, Status: int(rep.Status()), UD: ud}
			break
		}
		id.qkey = rep.QKey()
		out = &Event{ID: id, Type: EventEstablished, UD: ud}
	case ibcm.EventSIDRREQError:
		if id.state == stConnect {
			out = &Event{ID: id, Type: EventUnreachable, Status: etimedout}
		}
	}
	id.mu.Unlock()
	if out != nil {
		id.post(out)
	}
	return nil
}

// ahAttrLocked returns the address vector of the id's route.
func (id *ID) ahAttrLocked() verbs.AHAttr {
	dst, hop := id.path.Remote, id.path.HopLimit
	if !dst.IsValid() {
		dst = id.dst.Addr()
	}
	if hop == 0 {
		hop = 64
	}
	return verbs.AHAttr{IsGlobal: true, PortNum: 1, SL: id.path.SL, GRH: verbs.GlobalRoute{
		DGID: verbs.GIDFromIP(dst), SGIDIndex: 1, HopLimit: hop, TrafficClass: id.path.TrafficClass,
		FlowLabel: id.path.FlowLabel}}
}

// Accept accepts a connection request (rdma_accept): moves the id's QP to
// RTR and RTS and sends the REP (param.PrivateData ≤ 196 bytes), or for a
// UD id the SIDR_REP (≤ 136 bytes). ESTABLISHED follows when the RTU
// arrives; a synchronous RC id waits for it. On an active id whose REP
// came as CONNECT_RESPONSE it sends the RTU instead (as rdma_establish).
func (id *ID) Accept(ctx context.Context, param *ConnParam) error {
	if param == nil {
		param = defaultParam()
	}
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return ErrClosed
	}
	if id.state != stConnect || (id.conn == nil && id.kid == nil) {
		id.mu.Unlock()
		return fmt.Errorf("rdmacm: accept in state %s: %w", id.state, ErrInvalid)
	}
	if id.parent == nil {
		id.mu.Unlock()
		return id.Establish()
	}
	if id.kid != nil {
		err := id.kernelAcceptLocked(param)
		id.mu.Unlock()
		if err == nil && id.isSync() && id.qpType != verbs.QPTypeUD {
			return id.complete(ctx)
		}
		return err
	}
	c := id.conn
	var err error
	if id.qpType == verbs.QPTypeUD {
		if len(param.PrivateData) > MaxSIDRREPPrivateData {
			err = fmt.Errorf("rdmacm: %d bytes of private data, at most %d: %w", len(param.PrivateData), MaxSIDRREPPrivateData, syscall.EINVAL)
		} else {
			qpn := param.QPNum
			if id.qp != nil {
				qpn = id.qp.QPN()
			}
			err = c.SIDRReply(&ibcm.SIDRReply{Status: mad.SIDRAccept, QPN: qpn, QKey: id.qkey, PrivateData: param.PrivateData})
		}
		id.mu.Unlock()
		return err
	}
	if len(param.PrivateData) > MaxREPPrivateData {
		id.mu.Unlock()
		return fmt.Errorf("rdmacm: %d bytes of private data, at most %d: %w", len(param.PrivateData), MaxREPPrivateData, syscall.EINVAL)
	}
	req := mad.REQ(c.REQ())
	id.respRes, id.initDepth = param.ResponderResources, param.InitiatorDepth
	if id.respRes == MaxRespRes {
		id.respRes = min(req.InitiatorDepth(), maxRDAtomic)
	}
	if id.initDepth == MaxRespRes {
		id.initDepth = min(req.ResponderResources(), maxRDAtomic)
	}
	// id.psn was drawn with the request, so that InitQPAttr could give
	// an application's own QP its RTR and RTS attributes before Accept.
	qpn := param.QPNum
	if id.qp != nil {
		qpn = id.qp.QPN()
		if err = id.passiveRTSLocked(req); err != nil {
			id.mu.Unlock()
			return err
		}
	}
	err = c.Accept(&ibcm.AcceptParams{QPN: qpn, StartingPSN: id.psn, ResponderResources: id.respRes,
		InitiatorDepth: id.initDepth, TargetACKDelay: localAckDelay, FlowControl: param.FlowControl,
		RNRRetryCount: min(param.RNRRetryCount, 7), SRQ: param.SRQ || id.srq != nil, PrivateData: param.PrivateData})
	id.mu.Unlock()
	if err != nil {
		return fmt.Errorf("rdmacm: accept: %w", err)
	}
	if id.isSync() {
		return id.complete(ctx)
	}
	return nil
}

// Establish completes an active connection whose REP was reported as
// CONNECT_RESPONSE (rdma_establish): it sends the RTU. As with librdmacm
// and the kernel (rdma_accept on the active side), no ESTABLISHED event
// follows: the caller already knows.
func (id *ID) Establish() error {
	id.mu.Lock()
	if id.destroyed || (id.conn == nil && id.kid == nil) || id.parent != nil || id.state != stConnect {
		id.mu.Unlock()
		return fmt.Errorf("rdmacm: establish: %w", ErrInvalid)
	}
	if k := id.kid; k != nil {
		var err error
		if id.qp != nil {
			err = id.toRTSLocked()
		}
		id.mu.Unlock()
		if err == nil {
			err = k.Establish()
		}
		if err != nil {
			return fmt.Errorf("rdmacm: establish: %w", err)
		}
		return nil
	}
	c := id.conn
	err := c.SendRTU(nil)
	id.mu.Unlock()
	if err != nil {
		return fmt.Errorf("rdmacm: establish: %w", err)
	}
	return nil
}

// Notify tells the CM that the passive QP saw its first packet
// (rdma_notify with IBV_EVENT_COMM_EST): the connection is established
// without waiting for the RTU.
func (id *ID) Notify(ev verbs.EventType) error {
	if ev != verbs.EventCommEst {
		return nil
	}
	id.mu.Lock()
	c, k := id.conn, id.kid
	id.mu.Unlock()
	if k != nil {
		return k.Notify(ev)
	}
	if c == nil {
		return ErrInvalid
	}
	if err := c.Establish(); err != nil {
		return fmt.Errorf("rdmacm: notify: %w", err)
	}
	return nil
}

// Reject refuses a connection request (rdma_reject): a REJ with reason 28
// "consumer defined" and up to 148 bytes of private data, or for a UD id
// a SIDR_REP "rejected" with up to 136.
func (id *ID) Reject(pdata []byte) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.destroyed || (id.conn == nil && id.kid == nil) || id.state != stConnect {
		return fmt.Errorf("rdmacm: reject: %w", ErrInvalid)
	}
	if id.kid != nil {
		if err := id.kid.Reject(pdata); err != nil {
			return fmt.Errorf("rdmacm: reject: %w", err)
		}
		return nil
	}
	var err error
	if id.qpType == verbs.QPTypeUD {
		if len(pdata) > MaxSIDRREPPrivateData {
			return fmt.Errorf("rdmacm: %d bytes of private data: %w", len(pdata), syscall.EINVAL)
		}
		err = id.conn.SIDRReply(&ibcm.SIDRReply{Status: mad.SIDRReject, PrivateData: pdata})
	} else {
		if len(pdata) > MaxREJPrivateData {
			return fmt.Errorf("rdmacm: %d bytes of private data: %w", len(pdata), syscall.EINVAL)
		}
		err = id.conn.Reject(mad.RejConsumerDefined, nil, pdata)
	}
	if err != nil {
		return fmt.Errorf("rdmacm: reject: %w", err)
	}
	return nil
}

// Disconnect tears the connection down (rdma_disconnect): the QP goes to
// ERR, then a DREQ (or the DREP answering the peer's DREQ). DISCONNECTED
// follows when the DREP arrives.
func (id *ID) Disconnect() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.destroyed || (id.conn == nil && id.kid == nil) || id.qpType == verbs.QPTypeUD {
		return fmt.Errorf("rdmacm: disconnect: %w", ErrInvalid)
	}
	id.qpErrorLocked()
	if id.kid != nil {
		if err := id.kid.Disconnect(); err != nil {
			return fmt.Errorf("rdmacm: disconnect: %w", err)
		}
		return nil
	}
	switch id.conn.State() {
	case ibcm.StateEstablished:
		return id.conn.Disconnect(nil)
	case ibcm.StateDREQRcvd:
		return id.conn.SendDREP(nil)
	}
	return nil
}

// Destroy destroys the id (rdma_destroy_id): a connecting or connected id
// sends what Linux sends (REJ, DREQ or DREP, then TimeWait runs on in the
// CM), a listener stops listening. Destroy the QP first (DestroyQP); the
// id's device context closes with the last id using it.
func (id *ID) Destroy() error {
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return ErrClosed
	}
	id.destroyed = true
	id.state = stDestroying
	c, devs, sids, dev, bound := id.conn, id.listenDevs, id.listenSIDs, id.dev, id.bound
	k, lks := id.kid, id.listenKIDs
	id.conn, id.listenDevs, id.dev, id.kid, id.listenKIDs = nil, nil, nil, nil, nil
	var syncCh *EventChannel
	if id.sync {
		syncCh = id.ch
	}
	id.mu.Unlock()
	if c != nil {
		c.Destroy()
	}
	if k != nil {
		k.Destroy()
	}
	for _, lk := range lks {
		lk.Destroy()
	}
	for _, sid := range sids {
		id.unlisten(devs, sid)
	}
	for _, d := range devs {
		d.release()
	}
	if bound {
		unbindPort(id)
	}
	if dev != nil {
		dev.release()
	}
	if syncCh != nil {
		syncCh.Destroy()
	}
	return nil
}
