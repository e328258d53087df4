package verbs

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rdma-go/rdma-go/provider"
)

// Context is an open device (ibv_context). Close it when done.
type Context struct {
	dev    *Device
	p      provider.Context
	attr   DeviceAttr   // the device's attributes, which do not change
	lim    ModifyLimits // what QP.Modify checks against
	events *eventQueue

	mu     sync.Mutex
	closed bool
	qps    map[*QP]struct{}       // live QPs, for QPs
	res    [resKinds]atomic.Int64 // live PDs, CQs, MRs and SRQs, for Snapshot
}

// track adds a new QP to the context's list (QPs), or removes a
// destroyed one.
func (c *Context) track(qp *QP, live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !live {
		delete(c.qps, qp)
		return
	}
	if c.qps == nil {
		c.qps = make(map[*QP]struct{})
	}
	c.qps[qp] = struct{}{}
}

// QPs returns the context's QPs that are not destroyed, by QPN: what
// "rdma resource show qp" lists for a process, and what a metrics
// collector walks for per-QP counters.
func (c *Context) QPs() []*QP {
	c.mu.Lock()
	out := make([]*QP, 0, len(c.qps))
	for qp := range c.qps {
		out = append(out, qp)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b *QP) int { return cmp.Compare(a.QPN(), b.QPN()) })
	return out
}

// Open opens the device (ibv_open_device). The soft device binds its UDP
// port on the first Open in the process and shares it among contexts.
func (d *Device) Open() (*Context, error) {
	c := &Context{dev: d, events: newEventQueue()}
	p, err := d.p.Open(c.asyncEvent)
	if err != nil {
		return nil, err
	}
	c.p = p
	if c.attr, err = p.QueryDevice(); err == nil {
		var pa PortAttr
		if pa, err = p.QueryPort(1); err == nil {
			c.lim = ModifyLimits{PortCount: c.attr.PhysPortCnt, PKeyTableLen: pa.PKeyTblLen,
				MaxQPRDAtom: uint8(min(c.attr.MaxQPRDAtom, 255)), MaxQPInitRDAtom: uint8(min(c.attr.MaxQPInitRDAtom, 255)),
				GIDTableLen: pa.GIDTblLen, MaxMTU: pa.MaxMTU}
		}
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	opened(c)
	return c, nil
}

// Device returns the device this context was opened on.
func (c *Context) Device() *Device { return c.dev }

// Provider returns the provider's context behind c, for packages layered
// on verbs that use a provider's optional capabilities (rdmacm finds the
// soft device's in-band connection manager this way). Its methods bypass
// verbs' checks and lifetimes: use it for what verbs does not offer.
func (c *Context) Provider() provider.Context { return c.p }

// Close closes the context (ibv_close_device). The device stops when its
// last context closes.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	closed(c)
	c.events.close()
	return c.p.Close()
}

// QueryDevice returns the device attributes (ibv_query_device).
func (c *Context) QueryDevice() (DeviceAttr, error) {
	if err := c.check(); err != nil {
		return DeviceAttr{}, err
	}
	return c.p.QueryDevice()
}

// QueryPort returns the attributes of port (ibv_query_port); the soft device
// has one port, number 1.
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	if err := c.check(); err != nil {
		return PortAttr{}, err
	}
	return c.p.QueryPort(port)
}

// QueryGID returns entry index of port's GID table (ibv_query_gid). On the
// soft device, as on rxe, entry 0 is the link-local GID derived from the
// node GUID and entry 1 is the device's IP address (IPv4-mapped for IPv4).
// Only entry 1 can be a source GID: it is the address the device sends
// from.
func (c *Context) QueryGID(port uint8, index int) (GID, error) {
	if err := c.check(); err != nil {
		return GID{}, err
	}
	return c.p.QueryGID(port, index)
}

// QueryPKey returns entry index of the P_Key table (ibv_query_pkey); the
// soft device has one entry, 0xFFFF.
func (c *Context) QueryPKey(port uint8, index int) (uint16, error) {
	return c.p.QueryPKey(port, index)
}

func (c *Context) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verrorf(ErrClosed, "device context closed")
	}
	return nil
}

// String describes the context.
func (c *Context) String() string { return fmt.Sprintf("%s (%s)", c.dev.Name(), c.dev.Addr()) }
