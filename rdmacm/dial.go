package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// Options configure Dial and Listen. The zero value works.
type Options struct {
	// Source is the local address to connect from (Dial); zero means the
	// device the route to the peer leaves from.
	Source netip.Addr
	// PortSpace defaults to RDMA_PS_TCP.
	PortSpace PortSpace
	// Cap sizes each connection's QP; zero fields default to 64 work
	// requests, 1 SGE and 64 bytes of inline data.
	Cap verbs.QPCap
	// CQSize is the number of entries of each CQ (default: the queue's
	// work requests).
	CQSize int
	// PD is the protection domain of the connections' QPs; nil gives
	// each connection its own, freed by Close. A PD must belong to the
	// device the connection ends up on: on a soft device a PD of any
	// context the program opened on it (so that one PD, and its MRs,
	// serve every connection of a Listener); on a kernel device a PD of
	// rdmacm's own context of the device (an id's Verbs).
	PD *verbs.PD
	// SRQ, if set, supplies the receives of the QPs.
	SRQ *verbs.SRQ
	// PrivateData goes with the REQ (Dial, ≤ 56 bytes) or the REP
	// (Listen's Accept, ≤ 196 bytes).
	PrivateData []byte
	// ResponderResources and InitiatorDepth bound RDMA READs and
	// atomics in flight; zero means 16 (Dial) or as many as the peer
	// asks (Accept).
	ResponderResources uint8
	InitiatorDepth     uint8
	// RetryCount and RNRRetryCount default to 7 (7 RNR: retry forever).
	RetryCount    uint8
	RNRRetryCount uint8
	// MinRNRTimer is the RNR NAK timer the connection's QP asks a
	// sender to wait after finding no receive posted
	// (rdma_set_min_rnr_timer; the IB encoding: 12 is 0.64 ms, 0 the
	// default, means 655 ms, as on Linux).
	MinRNRTimer uint8
	// CMResponseTimeout (4.096 µs × 2^N) and MaxCMRetries default to
	// Linux's 20 and 15: a REQ to a silent peer is given up after ~74 s.
	CMResponseTimeout uint8
	MaxCMRetries      uint8
	// Backlog bounds requests waiting for Accept (default 128).
	Backlog int
	// CloseTimeout bounds how long Close waits for the peer's DREP
	// (default 3 s).
	CloseTimeout time.Duration
}

func (o *Options) defaults() Options {
	var d Options
	if o != nil {
		d = *o
	}
	if d.PortSpace == 0 {
		d.PortSpace = PSTCP
	}
	if d.Cap.MaxSendWR == 0 {
		d.Cap.MaxSendWR = 64
	}
	if d.Cap.MaxRecvWR == 0 {
		d.Cap.MaxRecvWR = 64
	}
	d.Cap.MaxSendSGE = max(d.Cap.MaxSendSGE, 1)
	d.Cap.MaxRecvSGE = max(d.Cap.MaxRecvSGE, 1)
	if d.Cap.MaxInlineData == 0 {
		d.Cap.MaxInlineData = 64
	}
	if d.RetryCount == 0 {
		d.RetryCount = 7
	}
	if d.RNRRetryCount == 0 {
		d.RNRRetryCount = 7
	}
	if d.CMResponseTimeout == 0 {
		d.CMResponseTimeout = 20
	}
	if d.MaxCMRetries == 0 {
		d.MaxCMRetries = 15
	}
	if d.Backlog <= 0 {
		d.Backlog = 128
	}
	if d.CloseTimeout <= 0 {
		d.CloseTimeout = 3 * time.Second
	}
	return d
}

// Conn is a connected RC queue pair with its CQs, ready for work
// requests. Close disconnects and frees it all.
type Conn struct {
	id    *ID
	qp    *verbs.QP
	pd    *verbs.PD
	ownPD bool
	peer  []byte
	opts  Options

	events chan *Event // set-up results; buffered, never blocks the CM
	done   chan struct{}
	once   sync.Once

	mu        sync.Mutex
	closing   bool
	discEvent *Event
}

// ID returns the connection's rdma_cm id.
func (c *Conn) ID() *ID { return c.id }

// QP returns the connected queue pair (in RTS).
func (c *Conn) QP() *verbs.QP { return c.qp }

// PD returns the QP's protection domain.
func (c *Conn) PD() *verbs.PD { return c.pd }

// Context returns the device context of the connection.
func (c *Conn) Context() *verbs.Context { return c.pd.Context() }

// SendCQ returns the send completion queue.
func (c *Conn) SendCQ() *verbs.CQ { return c.id.SendCQ() }

// RecvCQ returns the receive completion queue.
func (c *Conn) RecvCQ() *verbs.CQ { return c.id.RecvCQ() }

// PeerPrivateData returns what the peer sent: the REP's 196 bytes for
// Dial, the REQ's 56 user bytes for Accept.
func (c *Conn) PeerPrivateData() []byte { return c.peer }

// LocalAddr returns the local address and port.
func (c *Conn) LocalAddr() netip.AddrPort { return c.id.SrcAddr() }

// RemoteAddr returns the peer's address and port.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.id.DstAddr() }

// Done is closed when the connection is over: the peer disconnected, or
// Close was called.
func (c *Conn) Done() <-chan struct{} { return c.done }

// onEvent receives the id's events (on the CM's goroutine; never blocks).
func (c *Conn) onEvent(ev *Event) {
	switch ev.Type {
	case EventDisconnected:
		c.mu.Lock()
		c.discEvent = ev
		closing := c.closing
		c.mu.Unlock()
		if !closing {
			// The peer hung up: answer its DREQ so it is not left
			// retrying.
			_ = c.id.Disconnect()
		}
		c.once.Do(func() { close(c.done) })
		select {
		case c.events <- ev: // a set-up still waiting fails
		default:
		}
	case EventTimewaitExit:
	default:
		select {
		case c.events <- ev:
		default:
		}
	}
}

func newConn(id *ID, o Options) *Conn {
	c := &Conn{id: id, opts: o, events: make(chan *Event, 8), done: make(chan struct{})}
	id.setHook(c.onEvent)
	return c
}

// setupQP creates the connection's QP (and PD, unless given).
func (c *Conn) setupQP() error {
	ctx := c.id.Verbs()
	pd := c.opts.PD
	if pd == nil {
		var err error
		if pd, err = ctx.AllocPD(); err != nil {
			return fmt.Errorf("rdmacm: %w", err)
		}
		c.ownPD = true
	}
	c.pd = pd
	init := &verbs.QPInitAttr{Cap: c.opts.Cap, SRQ: c.opts.SRQ}
	if n := c.opts.CQSize; n > 0 {
		var err error
		if init.SendCQ, err = ctx.CreateCQ(n, nil); err != nil {
			return fmt.Errorf("rdmacm: %w", err)
		}
		if init.RecvCQ, err = ctx.CreateCQ(n, nil); err != nil {
			init.SendCQ.Destroy()
			return fmt.Errorf("rdmacm: %w", err)
		}
	}
	if err := c.id.CreateQP(pd, init); err != nil {
		if c.opts.CQSize > 0 {
			init.SendCQ.Destroy()
			init.RecvCQ.Destroy()
		}
		return err
	}
	c.qp = c.id.QP()
	return nil
}

// free releases the QP, CQs, PD and id.
func (c *Conn) free() error {
	sq, rq := c.id.SendCQ(), c.id.RecvCQ()
	c.id.DestroyQP()
	if c.opts.CQSize > 0 && sq != nil {
		sq.Destroy()
		rq.Destroy()
	}
	var err error
	if c.ownPD && c.pd != nil {
		// The connection's own PD, before the id: the id may hold the
		// last reference to the device context the PD is in. MRs the
		// program registered in it and left keep it alive, and Close
		// says so.
		if err = c.pd.Dealloc(); err != nil {
			err = fmt.Errorf("rdmacm: close: the connection's PD (Conn.PD) stays allocated: %w", err)
		}
	}
	c.id.Destroy()
	c.once.Do(func() { close(c.done) })
	return err
}

// wait waits for the set-up step's outcome, which must be want.
func (c *Conn) wait(ctx context.Context, want EventType) (*Event, error) {
	select {
	case ev := <-c.events:
		if err := eventErr(ev); err != nil {
			return ev, err
		}
		if ev.Type != want {
			return ev, &EventError{Event: ev.Type, Status: ev.Status}
		}
		return ev, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close disconnects (DREQ, or the DREP to the peer's DREQ), waits up to
// Options.CloseTimeout for the disconnect to complete, and frees the QP,
// its CQs, the PD it made, and the id. An MR still registered in that PD
// keeps it: Close then frees the rest and returns an error wrapping
// verbs.ErrBusy (deregister first, then Close).
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closing = true
	disc := c.discEvent
	c.mu.Unlock()
	if disc == nil {
		if err := c.id.Disconnect(); err == nil {
			t := time.NewTimer(c.opts.CloseTimeout)
			select {
			case <-c.done:
			case <-t.C:
			}
			t.Stop()
		}
	}
	return c.free()
}

// resolveHostPort parses "host:port" (numeric or a name).
func resolveHostPort(ctx context.Context, addr string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("rdmacm: %w", err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		pn, lerr := net.DefaultResolver.LookupPort(ctx, "tcp", port)
		if lerr != nil {
			return netip.AddrPort{}, fmt.Errorf("rdmacm: port %q: %w", port, lerr)
		}
		p = uint64(pn)
	}
	if host == "" {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if lerr != nil || len(ips) == 0 {
			return netip.AddrPort{}, fmt.Errorf("rdmacm: host %q: %w", host, errors.Join(lerr, syscall.EHOSTUNREACH))
		}
		a = ips[0]
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}

// Dial connects to addr ("host:port", port in opts.PortSpace) and returns
// the connection with its QP in RTS. The REQ is re-sent as Linux does
// (opts.CMResponseTimeout, opts.MaxCMRetries) until ctx ends; a refusal
// returns a *RejectedError.
func Dial(ctx context.Context, addr string, opts *Options) (*Conn, error) {
	o := opts.defaults()
	dst, err := resolveHostPort(ctx, addr)
	if err != nil {
		return nil, err
	}
	id, err := CreateID(newChannel(), nil, o.PortSpace)
	if err != nil {
		return nil, err
	}
	if id.qpType != verbs.QPTypeRC {
		id.Destroy()
		return nil, fmt.Errorf("rdmacm: Dial makes RC connections; port space %v is UD: %w", o.PortSpace, syscall.EINVAL)
	}
	id.SetCMTimeouts(o.CMResponseTimeout, o.MaxCMRetries)
	id.SetMinRNRTimer(o.MinRNRTimer)
	c := newConn(id, o)
	fail := func(err error) (*Conn, error) {
		c.free()
		return nil, fmt.Errorf("rdmacm: dial %s: %w", addr, err)
	}
	if err := id.ResolveAddr(ctx, netip.AddrPortFrom(o.Source, 0), dst, 0); err != nil {
		return fail(err)
	}
	if _, err := c.wait(ctx, EventAddrResolved); err != nil {
		return fail(err)
	}
	if err := id.ResolveRoute(ctx, 0); err != nil {
		return fail(err)
	}
	if _, err := c.wait(ctx, EventRouteResolved); err != nil {
		return fail(err)
	}
	if err := c.setupQP(); err != nil {
		return fail(err)
	}
	rr, id0 := o.ResponderResources, o.InitiatorDepth
	if rr == 0 {
		rr = 16
	}
	if id0 == 0 {
		id0 = 16
	}
	if err := id.Connect(ctx, &ConnParam{PrivateData: o.PrivateData, ResponderResources: rr, InitiatorDepth: id0,
		RetryCount: o.RetryCount, RNRRetryCount: o.RNRRetryCount, SRQ: o.SRQ != nil}); err != nil {
		return fail(err)
	}
	ev, err := c.wait(ctx, EventEstablished)
	if err != nil {
		return fail(err)
	}
	c.peer = ev.Conn.PrivateData
	return c, nil
}

// Listener accepts RC connections on one address and port.
type Listener struct {
	id   *ID
	opts Options
	reqs chan *Event
	done chan struct{}
	once sync.Once
}

// Listen listens on addr ("host:port"; an empty host or 0.0.0.0 listens on
// every device, port 0 picks one) in opts.PortSpace.
func Listen(addr string, opts *Options) (*Listener, error) {
	o := opts.defaults()
	a, err := resolveHostPort(context.Background(), addr)
	if err != nil {
		return nil, err
	}
	id, err := CreateID(newChannel(), nil, o.PortSpace)
	if err != nil {
		return nil, err
	}
	id.SetMinRNRTimer(o.MinRNRTimer) // accepted ids inherit it
	l := &Listener{id: id, opts: o, reqs: make(chan *Event, o.Backlog), done: make(chan struct{})}
	id.setHook(func(ev *Event) {
		if ev.Type == EventConnectRequest {
			select {
			case l.reqs <- ev:
			default: // cannot happen: the backlog bounds the requests queued
				ev.ID.Reject(nil)
				ev.ID.Destroy()
			}
		}
	})
	if err := id.BindAddr(a); err != nil {
		id.Destroy()
		return nil, fmt.Errorf("rdmacm: listen %s: %w", addr, err)
	}
	if err := id.Listen(o.Backlog); err != nil {
		id.Destroy()
		return nil, fmt.Errorf("rdmacm: listen %s: %w", addr, err)
	}
	return l, nil
}

// Addr returns the address and port listened on.
func (l *Listener) Addr() netip.AddrPort { return l.id.SrcAddr() }

// ID returns the listening rdma_cm id.
func (l *Listener) ID() *ID { return l.id }

// Accept waits for a connection request, accepts it and returns the
// connection once established. A request whose handshake fails (the peer
// gave up, its RTU never came, its QP could not be made) is skipped; when
// ctx ends, the error says why the last one failed.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	var last error
	for {
		var ev *Event
		select {
		case ev = <-l.reqs:
		case <-l.done:
			return nil, ErrClosed
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("rdmacm: accept: %w (the last request failed: %v)", ctx.Err(), last)
			}
			return nil, fmt.Errorf("rdmacm: accept: %w", ctx.Err())
		}
		l.id.requestTaken()
		c, err := l.accept(ctx, ev)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("rdmacm: accept: %w", ctx.Err())
		}
		last = err
	}
}

func (l *Listener) accept(ctx context.Context, ev *Event) (*Conn, error) {
	c := newConn(ev.ID, l.opts)
	c.peer = ev.Conn.PrivateData
	if err := c.setupQP(); err != nil {
		ev.ID.Reject(nil)
		c.free()
		return nil, err
	}
	o := l.opts
	rr, id0 := o.ResponderResources, o.InitiatorDepth
	if rr == 0 {
		rr = MaxRespRes
	}
	if id0 == 0 {
		id0 = MaxRespRes
	}
	if err := ev.ID.Accept(ctx, &ConnParam{PrivateData: o.PrivateData, ResponderResources: rr, InitiatorDepth: id0,
		RNRRetryCount: o.RNRRetryCount, SRQ: o.SRQ != nil}); err != nil {
		c.free()
		return nil, err
	}
	if _, err := c.wait(ctx, EventEstablished); err != nil {
		c.free()
		return nil, err
	}
	return c, nil
}

// Close stops listening; requests not yet accepted are rejected.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	err := l.id.Destroy()
	for {
		select {
		case ev := <-l.reqs:
			ev.ID.Reject(nil)
			ev.ID.Destroy()
		default:
			return err
		}
	}
}
