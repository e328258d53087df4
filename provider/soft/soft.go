// Package soft is the soft RoCEv2 provider: devices that run in the
// process, over the transport engine (package engine) and a UDP link
// (package link), speaking the real RoCEv2 wire protocol on port 4791.
// It is verbs' embedded default provider, the counterpart of rdma-core's
// rxe provider and the kernel's rdma_rxe together.
//
// Devices come from the environment and a config file (see Devices); every
// machine has "rgo0", bound to a free loopback address when first opened.
// Each running device has a GSI QP (QP1) with a MAD agent, the PerfMgt
// responder and the IB connection manager; a Context's CM method reaches
// the latter, which is how rdmacm finds it.
package soft

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/provider"
	"github.com/rdma-go/rdma-go/provider/soft/internal/softdev"
)

// Device limits of the soft device, close to Linux rxe's.
const (
	maxQP         = 1 << 16
	maxQPWR       = 1 << 14
	maxSGE        = 32
	maxCQE        = 1 << 20
	maxMR         = 1 << 20
	maxPD         = 1 << 20
	maxRDAtom     = 128
	maxInline     = 256
	maxMsgSize    = 1 << 31
	maxSRQ        = 1 << 16
	maxSRQWR      = 1 << 14
	maxSRQSGE     = maxSGE
	gidTableLen   = 2
	portCapFlags  = 1 << 16 // CM_SUP, as rxe
	vendorID      = 0xFFFFFF
	deviceCaps    = provider.DeviceCapFlags(1 | 0x2 | 0x4 | 0x40 | 0x400 | 0x800 | 0x1000 | 1<<13 | 1<<17 | 1<<24) // RESIZE_MAX_WR|BAD_PKEY_CNTR|BAD_QKEY_CNTR|UD_AV_PORT_ENFORCE|PORT_ACTIVE_EVENT|SYS_IMAGE_GUID|RC_RNR_NAK_GEN|SRQ_RESIZE|MEM_WINDOW|MEM_WINDOW_TYPE_2B
	localAckDelay = 15
)

// Provider is the soft provider.
type Provider struct{}

// Name returns "soft".
func (Provider) Name() string { return "soft" }

// Devices lists the soft devices (see the package function Devices).
func (Provider) Devices() ([]provider.Device, error) {
	ds, err := Devices()
	if err != nil {
		return nil, err
	}
	out := make([]provider.Device, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out, nil
}

// Context is an open soft device.
type Context struct {
	dev    *Device
	run    *softdev.Device
	guid   uint64 // the running device's node GUID
	mtu    int
	events func(provider.AsyncEvent)

	mu     sync.Mutex
	closed bool
}

// Open opens the device. The device binds its UDP port on the first Open
// in the process and shares it among contexts.
func (d *Device) Open(events func(provider.AsyncEvent)) (provider.Context, error) {
	run, err := d.acquire()
	if err != nil {
		return nil, err
	}
	c := &Context{dev: d, run: run, guid: run.GUID(), mtu: run.ActiveMTU(), events: events}
	d.mu.Lock()
	if d.ctxs == nil {
		d.ctxs = make(map[*Context]struct{})
	}
	d.ctxs[c] = struct{}{}
	d.mu.Unlock()
	return c, nil
}

// Close closes the context; the device stops when its last context closes.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.dev.mu.Lock()
	delete(c.dev.ctxs, c)
	c.dev.mu.Unlock()
	return c.dev.release()
}

// event delivers an asynchronous event unless the context is closed.
func (c *Context) event(ev provider.AsyncEvent) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if !closed && c.events != nil {
		c.events(ev)
	}
}

func (c *Context) host() *engine.Host { return c.run.Host() }

// Addr returns the IP address the device sends from.
func (c *Context) Addr() netip.Addr { return c.run.Addr() }

// Stats returns the device's live counters (QueryPortCounters returns a
// snapshot of them).
func (c *Context) Stats() *engine.Stats { return c.host().Stats() }

// Link returns the device's link.
func (c *Context) Link() link.Link { return c.run.Link() }

// CM returns the device's IB connection manager on QP1, or nil if the
// device has none. rdmacm reaches it through verbs.Context.Provider.
func (c *Context) CM() *ibcm.Manager {
	if g := c.run.GSI(); g != nil {
		return g.CM()
	}
	return nil
}

// QueryDevice returns the device attributes. The values describe what the
// soft device implements.
func (c *Context) QueryDevice() (provider.DeviceAttr, error) {
	return provider.DeviceAttr{
		// rdma-core's rxe provider always formats the kernel's (zero)
		// fw_ver as "%d.%d.%d", so ibv_devinfo on rxe shows 0.0.0.
		FWVer:    "0.0.0",
		NodeGUID: c.guid, SysImageGUID: c.guid,
		MaxMRSize: ^uint64(0), PageSizeCap: 0xFFFFF000, VendorID: vendorID,
		MaxQP: maxQP, MaxQPWR: maxQPWR, DeviceCapFlags: deviceCaps,
		MaxSGE: maxSGE, MaxSGERD: maxSGE, MaxCQ: maxQP, MaxCQE: maxCQE,
		MaxMR: maxMR, MaxPD: maxPD, MaxQPRDAtom: maxRDAtom, MaxResRDAtom: maxRDAtom * maxQP,
		MaxQPInitRDAtom: maxRDAtom, AtomicCap: provider.AtomicHCA, MaxPKeys: 1,
		MaxMW: maxMR, MaxAH: maxQP, MaxSRQ: maxSRQ, MaxSRQWR: maxSRQWR, MaxSRQSGE: maxSRQSGE,
		LocalCAAckDelay: localAckDelay, PhysPortCnt: 1, MaxInlineData: maxInline,
		NumCompVectors: 1,
	}, nil
}

// QueryPort returns the attributes of port 1, the only one.
func (c *Context) QueryPort(port uint8) (provider.PortAttr, error) {
	if port != 1 {
		return provider.PortAttr{}, provider.Errorf(provider.ErrInvalidArgument, "port %d does not exist (the device has port 1)", port)
	}
	active, _ := provider.MTUFromBytes(c.mtu)
	return provider.PortAttr{
		State: c.dev.portState(), MaxMTU: provider.MTU4096, ActiveMTU: active, GIDTblLen: gidTableLen,
		PortCapFlags: portCapFlags, MaxMsgSz: maxMsgSize, PKeyTblLen: 1, MaxVLNum: 1,
		ActiveWidth: 1, ActiveSpeed: 8, PhysState: 5, LinkLayer: provider.LinkLayerEthernet,
		QKeyViolCntr: uint32(c.host().Stats().DropQKey.Load()),
	}, nil
}

// QueryGID returns entry index of port's GID table. As on rxe, entry 0 is
// the link-local GID derived from the node GUID and entry 1 is the
// device's IP address (IPv4-mapped for IPv4). Only entry 1 can be a
// source GID: it is the address the device sends from.
func (c *Context) QueryGID(port uint8, index int) (provider.GID, error) {
	if port != 1 || index < 0 || index >= gidTableLen {
		return provider.GID{}, provider.Errorf(provider.ErrInvalidArgument, "GID index %d of port %d does not exist (port 1 has %d)", index, port, gidTableLen)
	}
	if index == 0 {
		var g provider.GID
		g[0], g[1] = 0xfe, 0x80
		for i := range 8 {
			g[8+i] = byte(c.guid >> (56 - 8*i))
		}
		return g, nil
	}
	return provider.GIDFromIP(c.run.Addr()), nil
}

// QueryPKey returns entry index of the P_Key table: 0xFFFF, the only one.
func (c *Context) QueryPKey(port uint8, index int) (uint16, error) {
	if port != 1 || index != 0 {
		return 0, provider.Errorf(provider.ErrInvalidArgument, "P_Key index %d of port %d does not exist", index, port)
	}
	return 0xFFFF, nil
}

// QueryPortCounters returns a snapshot of port 1's counters.
func (c *Context) QueryPortCounters(port uint8) (provider.Counters, error) {
	if port != 1 {
		return provider.Counters{}, provider.Errorf(provider.ErrInvalidArgument, "port %d does not exist (the device has port 1)", port)
	}
	return provider.Counters(c.host().Counters()), nil
}

// sourceGIDAddr returns the IP address for a source GID index, or why the
// index cannot be a source.
func (c *Context) sourceGIDAddr(index uint8) (netip.Addr, string) {
	if index != 1 {
		g, _ := c.QueryGID(1, int(index))
		return netip.Addr{}, fmt.Sprintf(
			"source GID index %d (%s) is not an address this soft device sends from; use GID index 1 (%s)",
			index, g, provider.GIDFromIP(c.run.Addr()))
	}
	return c.run.Addr(), ""
}

// addressVector checks an AV for this device and turns it into the engine's.
func (c *Context) addressVector(a *provider.AHAttr) (engine.AV, error) {
	if !a.IsGlobal {
		return engine.AV{}, provider.Errorf(provider.ErrInvalidArgument, "address vector without GRH: RoCE needs is_global and a destination GID")
	}
	if a.PortNum > 1 {
		return engine.AV{}, provider.Errorf(provider.ErrInvalidArgument, "address vector port %d does not exist", a.PortNum)
	}
	if a.GRH.DGID.IsZero() {
		return engine.AV{}, provider.Errorf(provider.ErrInvalidArgument, "address vector with a zero destination GID")
	}
	src, why := c.sourceGIDAddr(a.GRH.SGIDIndex)
	if why != "" {
		return engine.AV{}, provider.Errorf(provider.ErrInvalidArgument, "%s", why)
	}
	dst := a.GRH.DGID.IP()
	if dst.Is4() != src.Is4() {
		return engine.AV{}, provider.Errorf(provider.ErrInvalidArgument, "destination GID %s and source %s are of different IP families", a.GRH.DGID, provider.GIDFromIP(src))
	}
	return engine.AV{Remote: dst, FlowLabel: a.GRH.FlowLabel, HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass}, nil
}

// routeEvent delivers an engine event to the context that owns its object.
func routeEvent(ev engine.Event) {
	out := provider.AsyncEvent{Type: provider.EventType(ev.Type), Port: 1}
	var c *Context
	switch {
	case ev.QP != nil:
		if qp, ok := ev.QP.Owner().(*qp); ok {
			out.Owner, c = qp.owner, qp.ctx
		}
	case ev.SRQ != nil:
		if s, ok := ev.SRQ.Owner.(*srq); ok {
			out.Owner, c = s.owner, s.ctx
		}
	case ev.CQ != nil:
		if cq, ok := ev.CQ.(*cq); ok {
			out.Owner, c = cq.owner, cq.ctx
		}
	}
	if c != nil {
		c.event(out)
	}
}

// Runtime is a running soft device, as tests of the layers above verbs
// reach it: to read its CM or link, or to stop it as a dead machine would.
type Runtime struct{ d *softdev.Device }

// Lookup returns the running soft device bound to addr, or nil. It is for
// tests and diagnostics; code reaches a device through verbs.
func Lookup(addr netip.Addr) *Runtime {
	if d := softdev.Lookup(addr); d != nil {
		return &Runtime{d}
	}
	return nil
}

// CM returns the device's connection manager, or nil.
func (r *Runtime) CM() *ibcm.Manager {
	if g := r.d.GSI(); g != nil {
		return g.CM()
	}
	return nil
}

// Link returns the device's link.
func (r *Runtime) Link() link.Link { return r.d.Link() }

// Close stops the device at once, as if its machine died.
func (r *Runtime) Close() error { return r.d.Close() }
