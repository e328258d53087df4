package rdmacm

import (
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/provider"
	"github.com/rdma-go/rdma-go/verbs"
)

// The second backend of the seam (see device.go): ids on devices whose
// provider has a connection manager outside the device (provider.CMDevice:
// the kernel's rdma_cm through librdmacm). Such an id holds a provider
// CMID ("kid") from its bind or address resolution on, and each call goes
// to it; the CMID's events come back through kernelEvent, which does what
// librdmacm does for QPs it did not create (moves the id's QP on a
// CONNECT_RESPONSE and sends the RTU) and posts them as rdma_cm events.

// kernelCM returns the outside CM of device vd, or nil when vd's CM is
// in-band (or it has none).
func kernelCM(vd *verbs.Device) (provider.CM, error) {
	cd, ok := vd.Provider().(provider.CMDevice)
	if !ok {
		return nil, nil
	}
	cm, err := cd.ConnectionManager()
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %s: %w", vd.Name(), err)
	}
	return cm, nil
}

// kernelCMs returns the distinct outside CMs of all devices.
func kernelCMs() []provider.CM {
	vds, err := listDevices()
	if err != nil {
		return nil
	}
	var cms []provider.CM
	for _, vd := range vds {
		cm, err := kernelCM(vd)
		if cm == nil || err != nil {
			continue
		}
		dup := false
		for _, o := range cms {
			dup = dup || o == cm
		}
		if !dup {
			cms = append(cms, cm)
		}
	}
	return cms
}

// newKernelIDLocked gives the id a CMID of cm, with the options set so far.
func (id *ID) newKernelIDLocked(cm provider.CM) (provider.CMID, error) {
	k, err := cm.CreateID(uint16(id.ps), id.qpType, id.kernelEvent)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	for _, o := range []struct {
		opt provider.CMOption
		set bool
		v   int
	}{
		{provider.CMOptionReuseAddr, id.reuseAddr, 1},
		{provider.CMOptionAFOnly, id.afOnly, 1},
		{provider.CMOptionTOS, id.tos != 0, int(id.tos)},
		{provider.CMOptionAckTimeout, id.ackTimeout != 0, int(id.ackTimeout)},
	} {
		if !o.set {
			continue
		}
		if err := k.SetOption(o.opt, o.v); err != nil {
			k.Destroy()
			return nil, fmt.Errorf("rdmacm: %w", err)
		}
	}
	return k, nil
}

// setKernelOption passes an option set after the CMID was made on.
func (id *ID) setKernelOption(opt provider.CMOption, v int) {
	id.mu.Lock()
	k := id.kid
	id.mu.Unlock()
	if k != nil {
		_ = k.SetOption(opt, v)
	}
}

// kernelBindLocked binds the id to a, an address of kernel device vd.
func (id *ID) kernelBindLocked(vd *verbs.Device, cm provider.CM, a netip.AddrPort) error {
	k, err := id.newKernelIDLocked(cm)
	if err != nil {
		return err
	}
	if err := k.BindAddr(a); err != nil {
		k.Destroy()
		return fmt.Errorf("rdmacm: bind %s: %w", a, err)
	}
	d, err := acquire(vd)
	if err != nil {
		k.Destroy()
		return err
	}
	src, _ := k.Addrs()
	id.kid, id.dev, id.src, id.state = k, d, src, stAddrBound
	return nil
}

// kernelResolveLocked starts resolving dst on a kernel device's CM (from
// an idle id, or one bound to the wildcard in-band); ADDR_RESOLVED or
// ADDR_ERROR follows from the CM.
func (id *ID) kernelResolveLocked(cm provider.CM, src, dst netip.AddrPort, timeout time.Duration) error {
	k := id.kid
	if k == nil {
		var err error
		if k, err = id.newKernelIDLocked(cm); err != nil {
			return err
		}
		if id.bound { // a wildcard port binding moves to the kernel's CM
			unbindPort(id)
			id.bound = false
			src = id.src
		}
		id.kid = k
	}
	prev := id.state
	id.state = stAddrQuery
	if err := k.ResolveAddr(src, dst, timeout); err != nil {
		id.state = prev
		if prev == stIdle {
			id.kid = nil
			k.Destroy()
		}
		return fmt.Errorf("rdmacm: resolve %s: %w", dst, err)
	}
	return nil
}

// kernelListenLocked listens: an id bound to a kernel device's address on
// its CMID, a wildcard-bound id on every outside CM at its port. It
// returns how many CMs listen.
func (id *ID) kernelListenLocked(backlog int) (int, error) {
	if id.kid != nil {
		if err := id.kid.Listen(backlog); err != nil {
			return 0, fmt.Errorf("rdmacm: listen: %w", err)
		}
		return 1, nil
	}
	n := 0
	for _, cm := range kernelCMs() {
		k, err := id.newKernelIDLocked(cm)
		if err == nil {
			if err = k.BindAddr(id.src); err == nil {
				err = k.Listen(backlog)
			}
			if err != nil {
				k.Destroy()
			}
		}
		if err != nil {
			id.destroyListenKIDs()
			return 0, fmt.Errorf("rdmacm: listen on %s with the kernel's rdma_cm: %w", id.src, err)
		}
		id.listenKIDs = append(id.listenKIDs, k)
		n++
	}
	return n, nil
}

func (id *ID) destroyListenKIDs() {
	for _, k := range id.listenKIDs {
		k.Destroy()
	}
	id.listenKIDs = nil
}

// known holds the devices rdmacm has listed, by name.
var known struct {
	mu sync.Mutex
	m  map[string]*verbs.Device
}

// listDevices lists the devices (verbs.Devices) and remembers them.
func listDevices() ([]*verbs.Device, error) {
	ds, err := verbs.Devices()
	if err != nil {
		return nil, err
	}
	known.mu.Lock()
	if known.m == nil {
		known.m = make(map[string]*verbs.Device)
	}
	for _, d := range ds {
		known.m[d.Name()] = d
	}
	known.mu.Unlock()
	return ds, nil
}

// deviceNamed returns the device called name: one listed before, without
// listing again (the kernel's listing, redone while librdmacm handles a
// connection request, has been seen to come back empty), or from a new
// list.
func deviceNamed(name string) (*verbs.Device, error) {
	known.mu.Lock()
	d := known.m[name]
	known.mu.Unlock()
	if d != nil {
		return d, nil
	}
	ds, err := listDevices()
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	for _, d := range ds {
		if d.Name() == name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNoDevice, name)
}

// kernelPath converts a CM's path.
func kernelPath(p provider.CMPath) ibcm.Path {
	return ibcm.Path{Local: p.SGID.IP(), Remote: p.DGID.IP(), FlowLabel: p.FlowLabel,
		TrafficClass: p.TrafficClass, HopLimit: p.HopLimit, SL: p.SL, MTU: uint8(p.MTU),
		PacketLifeTime: p.PacketLifeTime, PKey: p.PKey}
}

// kernelAttrsLocked is qpAttrsLocked for a kernel id: rdma_init_qp_attr,
// with the Go API's minimum RNR timer.
func (id *ID) kernelAttrsLocked(state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	if id.qpType == verbs.QPTypeUD && state != verbs.QPStateInit {
		// The kernel answers a UD id with the INIT attributes whatever
		// the state; librdmacm moves a UD QP on with the state alone
		// (and SQ PSN 0 for RTS).
		switch state {
		case verbs.QPStateRTR:
			return verbs.QPAttr{State: state}, verbs.QPAttrState, nil
		case verbs.QPStateRTS:
			return verbs.QPAttr{State: state}, verbs.QPAttrState | verbs.QPAttrSQPSN, nil
		}
	}
	a, mask, err := id.kid.InitQPAttr(state)
	if err != nil {
		return a, 0, fmt.Errorf("rdmacm: QP attributes for %v: %w", state, err)
	}
	if id.minRNR != 0 && mask&verbs.QPAttrMinRNRTimer != 0 {
		a.MinRNRTimer = id.minRNR
	}
	return a, mask, nil
}

// kernelRDLimits resolves MaxRespRes in a connection's depths against
// the device (and, accepting, the request's asks).
func (id *ID) kernelRDLimits(p *ConnParam, req *ConnParam) {
	var maxResp, maxInit uint8 = maxRDAtomic, maxRDAtomic
	if da, err := id.dev.ctx.QueryDevice(); err == nil {
		maxResp, maxInit = uint8(min(da.MaxQPRDAtom, 255)), uint8(min(da.MaxQPInitRDAtom, 255))
	}
	if req != nil {
		maxResp, maxInit = min(maxResp, req.InitiatorDepth), min(maxInit, req.ResponderResources)
	}
	if p.ResponderResources == MaxRespRes {
		p.ResponderResources = maxResp
	}
	if p.InitiatorDepth == MaxRespRes {
		p.InitiatorDepth = maxInit
	}
}

// kernelConnectLocked sends the REQ (SIDR_REQ) through the CM.
func (id *ID) kernelConnectLocked(param *ConnParam) error {
	p := *param
	if id.qp != nil {
		p.QPNum = id.qp.QPN()
	}
	p.SRQ = p.SRQ || id.srq != nil
	p.RetryCount, p.RNRRetryCount = min(p.RetryCount, 7), min(p.RNRRetryCount, 7)
	id.kernelRDLimits(&p, nil)
	if err := id.kid.Connect(&p); err != nil {
		return fmt.Errorf("rdmacm: connect: %w", err)
	}
	return nil
}

// kernelAcceptLocked readies the passive side's QP and sends the REP (or
// SIDR_REP) through the CM.
func (id *ID) kernelAcceptLocked(param *ConnParam) error {
	p := *param
	if id.qp != nil {
		p.QPNum = id.qp.QPN()
		if id.qpType != verbs.QPTypeUD {
			if err := id.toRTSLocked(); err != nil {
				return err
			}
		}
	}
	p.SRQ = p.SRQ || id.srq != nil
	p.RNRRetryCount = min(p.RNRRetryCount, 7)
	id.kernelRDLimits(&p, &id.req)
	if err := id.kid.Accept(&p); err != nil {
		return fmt.Errorf("rdmacm: accept: %w", err)
	}
	return nil
}

// kernelEvent turns a CM event into the id's rdma_cm event.
func (id *ID) kernelEvent(ce provider.CMEvent) {
	t := EventType(ce.Type)
	if t == EventConnectRequest {
		id.kernelRequest(ce)
		return
	}
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return
	}
	out := &Event{ID: id, Type: t, Status: ce.Status, Conn: ce.Conn, UD: ce.UD}
	k := id.kid
	switch t {
	case EventAddrResolved:
		err := id.kernelAddrResolvedLocked()
		if err != nil {
			out.Type, out.Status = EventAddrError, -errnoOf(err, syscall.ENODEV)
		}
	case EventAddrError:
		id.state = stAddrBound
		if !id.src.Addr().IsValid() {
			id.state = stIdle
		}
	case EventRouteResolved:
		id.path, id.routed, id.state = kernelPath(k.Route()), true, stRouteResolved
	case EventRouteError:
		id.state = stAddrResolved
	case EventConnectResponse:
		if id.qp == nil {
			break
		}
		err := id.toRTSLocked()
		if err == nil {
			err = k.Establish()
		}
		if err != nil {
			id.qpErrorLocked()
			_ = k.Reject(nil)
			out = &Event{ID: id, Type: EventConnectError, Status: -errnoOf(err, syscall.EINVAL)}
			break
		}
		out.Type = EventEstablished
	case EventEstablished:
		if id.qpType == verbs.QPTypeUD {
			id.qkey = ce.UD.QKey
		}
	case EventRejected:
		id.qpErrorLocked()
		if id.qpType == verbs.QPTypeUD {
			out.Conn.PrivateData = ce.UD.PrivateData
		}
	case EventDisconnected:
		id.state = stDisconnect
	}
	id.mu.Unlock()
	id.post(out)
}

// kernelAddrResolvedLocked takes the device and addresses the CM resolved.
func (id *ID) kernelAddrResolvedLocked() error {
	src, dst := id.kid.Addrs()
	id.src, id.dst = netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if id.dev == nil {
		vd, err := deviceNamed(id.kid.DeviceName())
		if err != nil {
			return err
		}
		if id.dev, err = acquire(vd); err != nil {
			return err
		}
	}
	id.state = stAddrResolved
	return nil
}

// kernelRequest makes the id of a CONNECT_REQUEST that reached the
// listening id, and posts the request.
func (lid *ID) kernelRequest(ce provider.CMEvent) {
	k := ce.NewID
	refuse := func(why string, err error) {
		slog.Debug("rdmacm: connection request refused", "why", why, "err", err)
		_ = k.Reject(nil)
		k.Destroy()
	}
	vd, err := deviceNamed(k.DeviceName())
	if err != nil {
		refuse("no device", err)
		return
	}
	d, err := acquire(vd)
	if err != nil {
		refuse("device does not open", err)
		return
	}
	lid.mu.Lock()
	if lid.destroyed || lid.state != stListen || lid.pending >= lid.backlog {
		lid.mu.Unlock()
		d.release()
		refuse("listener gone or backlog full", nil)
		return
	}
	lid.pending++
	src, dst := k.Addrs()
	nid := &ID{user: lid.user, ps: lid.ps, qpType: lid.qpType, ch: lid.ch, sink: lid.sink, sync: lid.sync,
		qkey: UDPQKey, state: stConnect, dev: d, parent: lid, kid: k, tos: lid.tos, minRNR: lid.minRNR,
		cmTimeout: lid.cmTimeout, cmRetries: lid.cmRetries, pd: lid.pd, routed: true, req: ce.Conn,
		src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), dst: netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port()),
		path: kernelPath(k.Route())}
	if lid.sync {
		nid.ch = newChannel()
		nid.sink = nid.ch
	}
	out := &Event{ID: nid, ListenID: lid, Type: EventConnectRequest, Conn: ce.Conn, UD: ce.UD}
	k.SetEvents(nid.kernelEvent)
	lid.mu.Unlock()
	lid.post(out)
}

// kernelInitQPLocked takes a new QP of a kernel id to INIT (a UD QP on
// to RTS) with the attributes the CM gives.
func (id *ID) kernelInitQPLocked(qp *verbs.QP) error {
	states := []verbs.QPState{verbs.QPStateInit}
	if id.qpType == verbs.QPTypeUD {
		states = append(states, verbs.QPStateRTR, verbs.QPStateRTS)
	}
	for _, st := range states {
		a, mask, err := id.kernelAttrsLocked(st)
		if err != nil {
			return err
		}
		if err := qp.Modify(&a, mask); err != nil {
			return fmt.Errorf("QP to %v: %w", st, err)
		}
	}
	return nil
}
