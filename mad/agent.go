package mad

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the time source of the agent (and of the CM above it): the
// system clock in production, a fake one in tests. AfterFunc runs f once
// after d and returns a function that cancels it, reporting whether it was
// still pending.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// SystemClock returns the real clock.
func SystemClock() Clock { return systemClock{} }

// Address says where a MAD comes from or goes to. On RoCEv2 a GID is an IP
// address, so addresses are IPs (docs/spec/cm-mad.md §1.3–§1.4).
type Address struct {
	// Remote is the peer: the source IP of a received MAD, the
	// destination of a sent one.
	Remote netip.Addr
	// Local is the device address a received MAD was sent to (ignored on
	// send: a device sends from its own address).
	Local netip.Addr
	// QPN is the peer's QP: the DETH source QP of a received MAD, the
	// destination QP of a sent one (1 for every CM message).
	QPN uint32
	// QKey is the DETH Q_Key of a received MAD; on send, 0 means the GSI
	// Q_Key 0x80010000.
	QKey uint32
	// TrafficClass, FlowLabel and HopLimit are the IP header fields (0
	// means the defaults).
	TrafficClass uint8
	FlowLabel    uint32
	HopLimit     uint8
}

// Transport sends MADs from QP1 of one port.
type Transport interface {
	// SendMAD sends the 256-byte MAD m to a. It must not keep m after it
	// returns.
	SendMAD(a Address, m MAD) error
}

// Received is a MAD delivered to a handler.
type Received struct {
	// MAD is the agent's private copy; a handler may keep it.
	MAD MAD
	// From is where it came from.
	From Address
	// Time is when it was received.
	Time time.Time
}

// ReplyAddress returns the address a generic response to in goes to (the
// MAD layer's rule, §1.4): the sender's IP and DETH source QP, Q_Key
// 0x80010000, the traffic class and flow label of the received packet.
func (in *Received) ReplyAddress() Address {
	return Address{Remote: in.From.Remote, QPN: in.From.QPN, QKey: GSIQKey,
		TrafficClass: in.From.TrafficClass, FlowLabel: in.From.FlowLabel}
}

// Handler handles a request (or a Send) for a registration. It runs on the
// receive path: it must not block.
type Handler func(r *Registration, in *Received)

// Config configures an Agent.
type Config struct {
	// Transport sends MADs; required.
	Transport Transport
	// Clock defaults to SystemClock().
	Clock Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Errors of the agent.
var (
	ErrTimeout    = errors.New("mad: request timed out")
	ErrClosed     = errors.New("mad: agent closed")
	ErrRegistered = errors.New("mad: class, version and method already registered")
)

// AgentStats counts what the agent did.
type AgentStats struct {
	Received          atomic.Uint64 // MADs delivered to the agent
	Sent              atomic.Uint64 // MADs handed to the transport
	SendErrors        atomic.Uint64 // MADs the transport refused
	DropMalformed     atomic.Uint64 // short, or base version not 1
	DropSMP           atomic.Uint64 // subnet management class on QP1
	DropCMMethod      atomic.Uint64 // CM MAD that is not a Send (nor a ClassPortInfo)
	DropUnmatched     atomic.Uint64 // response matching no outstanding request
	DropUnhandled     atomic.Uint64 // request with no registration, not Get/Set
	AnsweredUnhandled atomic.Uint64 // Get/Set with no registration, answered 0x000C
	Retries           atomic.Uint64 // request retransmissions
	Timeouts          atomic.Uint64 // requests that ran out of retries
}

// Agent dispatches the MADs of one port's QP1 (Linux's MAD layer, §7).
type Agent struct {
	cfg   Config
	log   *slog.Logger
	stats AgentStats

	mu     sync.Mutex
	regs   map[regKey]*Registration
	byHi   map[uint32]*Registration
	nextHi uint32
	// hiPrefix, when not 0, is the top byte of every new registration's
	// HiTID (see SetTIDPrefix).
	hiPrefix uint8
	closed   bool
}

type regKey struct{ class, version, method uint8 }

// NewAgent returns an agent that sends through cfg.Transport. Feed it the
// MADs QP1 receives with Deliver.
func NewAgent(cfg Config) *Agent {
	if cfg.Clock == nil {
		cfg.Clock = SystemClock()
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, regs: make(map[regKey]*Registration), byHi: make(map[uint32]*Registration)}
	if a.log == nil {
		a.log = slog.Default()
	}
	return a
}

// Clock returns the agent's clock.
func (a *Agent) Clock() Clock { return a.cfg.Clock }

// Stats returns the agent's counters.
func (a *Agent) Stats() *AgentStats { return &a.stats }

// Registration is one client of the agent: a management class and version,
// the request methods it handles, and the high 32 bits of the transaction
// IDs of its own requests, which route their responses back to it.
type Registration struct {
	a       *Agent
	class   uint8
	version uint8
	methods []uint8
	h       Handler
	hi      uint32
	lo      atomic.Uint32

	mu      sync.Mutex
	pending map[uint64]*request
	gone    bool
}

// Register registers h for requests of class and version whose method is
// one of methods (none: the registration only sends requests and receives
// their responses). Linux routes Sends and requests by (class, version,
// method); a second registration for the same triple fails.
func (a *Agent) Register(class, version uint8, methods []uint8, h Handler) (*Registration, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	for _, m := range methods {
		if _, ok := a.regs[regKey{class, version, m}]; ok {
			return nil, fmt.Errorf("%w: class %#x version %d method %#x", ErrRegistered, class, version, m)
		}
	}
	hi := a.newHiLocked()
	r := &Registration{a: a, class: class, version: version, methods: append([]uint8(nil), methods...), h: h,
		hi: hi, pending: make(map[uint64]*request)}
	for _, m := range methods {
		a.regs[regKey{class, version, m}] = r
	}
	a.byHi[r.hi] = r
	return r, nil
}

// newHiLocked returns an unused HiTID for a new registration.
func (a *Agent) newHiLocked() uint32 {
	for {
		a.nextHi++
		hi := a.nextHi
		if a.hiPrefix != 0 {
			hi = uint32(a.hiPrefix)<<24 | hi&0xFFFFFF
		}
		if _, used := a.byHi[hi]; !used && hi != 0 {
			return hi
		}
	}
}

// SetTIDPrefix makes the transaction IDs of registrations made from now on
// carry prefix in their top byte (0: none, the default). A host service
// that shares one device address among processes gives each its prefix
// and routes MAD responses by it.
func (a *Agent) SetTIDPrefix(prefix uint8) {
	a.mu.Lock()
	a.hiPrefix = prefix
	a.mu.Unlock()
}

// Unregister removes r; its outstanding requests fail with ErrClosed.
func (r *Registration) Unregister() {
	a := r.a
	a.mu.Lock()
	for _, m := range r.methods {
		if a.regs[regKey{r.class, r.version, m}] == r {
			delete(a.regs, regKey{r.class, r.version, m})
		}
	}
	delete(a.byHi, r.hi)
	a.mu.Unlock()
	r.mu.Lock()
	r.gone = true
	ps := r.pending
	r.pending = make(map[uint64]*request)
	r.mu.Unlock()
	for _, p := range ps {
		p.finish(nil, ErrClosed)
	}
}

// Close unregisters everything; outstanding requests fail with ErrClosed.
func (a *Agent) Close() {
	a.mu.Lock()
	a.closed = true
	var rs []*Registration
	for _, r := range a.byHi {
		rs = append(rs, r)
	}
	a.mu.Unlock()
	for _, r := range rs {
		r.Unregister()
	}
}

// Agent returns the agent r belongs to.
func (r *Registration) Agent() *Agent { return r.a }

// HiTID returns the high 32 bits of r's transaction IDs.
func (r *Registration) HiTID() uint32 { return r.hi }

// NewTID returns a fresh transaction ID: HiTID in the high 32 bits, a
// counter in the low ones.
func (r *Registration) NewTID() uint64 { return uint64(r.hi)<<32 | uint64(r.lo.Add(1)) }

// TID returns the transaction ID with HiTID high and lo low, as Linux's CM
// forms it from a local communication ID.
func (r *Registration) TID(lo uint32) uint64 { return uint64(r.hi)<<32 | uint64(lo) }

// Send sends m (256 bytes) to a.
func (r *Registration) Send(to Address, m MAD) error { return r.a.send(to, m) }

// Respond sends resp to the sender of in (ReplyAddress).
func (r *Registration) Respond(in *Received, resp MAD) error {
	return r.a.send(in.ReplyAddress(), resp)
}

func (a *Agent) send(to Address, m MAD) error {
	if len(m) < Size {
		return fmt.Errorf("mad: send: %w (%d bytes)", ErrShort, len(m))
	}
	if to.QKey == 0 {
		to.QKey = GSIQKey
	}
	if err := a.cfg.Transport.SendMAD(to, m[:Size]); err != nil {
		a.stats.SendErrors.Add(1)
		return fmt.Errorf("mad: send %s to %s QP %d: %w", m, to.Remote, to.QPN, err)
	}
	a.stats.Sent.Add(1)
	return nil
}

// RequestOptions control Request's retransmission.
type RequestOptions struct {
	// Timeout is the wait for each answer (default 1 s, libibmad's).
	Timeout time.Duration
	// Retries is the number of re-sends after the first (default 3).
	Retries int
}

type request struct {
	r     *Registration
	tid   uint64
	to    Address
	m     MAD
	opt   RequestOptions
	left  int
	stop  func() bool
	done  chan struct{}
	once  sync.Once
	resp  *Received
	err   error
	class uint8
}

func (p *request) finish(resp *Received, err error) {
	p.once.Do(func() {
		p.resp, p.err = resp, err
		close(p.done)
	})
}

// Request sends m to a and waits for the response with the same transaction
// ID from the same address, re-sending it every opt.Timeout up to
// opt.Retries times. If m's TID does not carry r's HiTID a fresh TID is
// written into m. It returns ErrTimeout when the retries run out, or the
// context's error.
func (r *Registration) Request(ctx context.Context, to Address, m MAD, opt RequestOptions) (*Received, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = time.Second
	}
	if opt.Retries < 0 {
		opt.Retries = 0
	} else if opt.Retries == 0 {
		opt.Retries = 3
	}
	if len(m) < Size {
		return nil, fmt.Errorf("mad: request: %w", ErrShort)
	}
	m = m[:Size].Clone()
	if uint32(m.TID()>>32) != r.hi {
		m.SetTID(r.NewTID())
	}
	p := &request{r: r, tid: m.TID(), to: to, m: m, opt: opt, left: opt.Retries, done: make(chan struct{}), class: m.MgmtClass()}
	r.mu.Lock()
	if r.gone {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	r.pending[p.tid] = p
	r.mu.Unlock()
	if err := r.a.send(to, m); err != nil {
		r.forget(p)
		return nil, err
	}
	r.arm(p)
	select {
	case <-p.done:
		return p.resp, p.err
	case <-ctx.Done():
		r.forget(p)
		p.finish(nil, ctx.Err())
		<-p.done
		return p.resp, p.err
	}
}

func (r *Registration) arm(p *request) {
	stop := r.a.cfg.Clock.AfterFunc(p.opt.Timeout, func() { r.expire(p) })
	r.mu.Lock()
	p.stop = stop
	r.mu.Unlock()
}

func (r *Registration) forget(p *request) {
	r.mu.Lock()
	if r.pending[p.tid] == p {
		delete(r.pending, p.tid)
	}
	stop := p.stop
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (r *Registration) expire(p *request) {
	r.mu.Lock()
	if r.pending[p.tid] != p {
		r.mu.Unlock()
		return
	}
	if p.left == 0 {
		delete(r.pending, p.tid)
		r.mu.Unlock()
		r.a.stats.Timeouts.Add(1)
		p.finish(nil, fmt.Errorf("%w: %s to %s after %d tries", ErrTimeout, p.m, p.to.Remote, p.opt.Retries+1))
		return
	}
	p.left--
	r.mu.Unlock()
	r.a.stats.Retries.Add(1)
	if err := r.a.send(p.to, p.m); err != nil {
		r.a.log.Debug("mad: re-send failed", "err", err)
	}
	r.arm(p)
}

// Deliver hands the agent a MAD received on QP1, with where it came from
// and when. The agent copies what it keeps. It applies Linux's rules
// (docs/spec/cm-mad.md §7): base version 1 only; subnet management classes
// dropped; CM MADs other than Sends and ClassPortInfo dropped; responses
// routed to the registration whose HiTID is in the TID's high 32 bits and
// matched to an outstanding request; requests to the registration for
// (class, version, method); unhandled Get and Set answered with status
// 0x000C; everything else dropped.
func (a *Agent) Deliver(now time.Time, b []byte, from Address) {
	a.stats.Received.Add(1)
	m, err := Parse(b)
	if err != nil {
		a.stats.DropMalformed.Add(1)
		return
	}
	class, method := m.MgmtClass(), m.Method()
	switch {
	case class == ClassSubnLID || class == ClassSubnDirected:
		a.stats.DropSMP.Add(1)
		return
	case class == ClassCM && m.AttrID() != AttrClassPortInfo && method != MethodSend:
		a.stats.DropCMMethod.Add(1)
		return
	}
	in := &Received{MAD: m.Clone(), From: from, Time: now}
	if m.IsResponse() {
		a.mu.Lock()
		r := a.byHi[uint32(m.TID()>>32)]
		a.mu.Unlock()
		if r == nil || !r.complete(in) {
			a.stats.DropUnmatched.Add(1)
		}
		return
	}
	var r *Registration
	if m.ClassVersion() < maxMatchingVersion {
		a.mu.Lock()
		r = a.regs[regKey{class, m.ClassVersion(), method}]
		a.mu.Unlock()
	}
	if r != nil && r.h != nil {
		r.h(r, in)
		return
	}
	if method != MethodGet && method != MethodSet {
		a.stats.DropUnhandled.Add(1)
		return
	}
	a.stats.AnsweredUnhandled.Add(1)
	resp := in.MAD
	resp.SetMethod(MethodGetResp)
	resp.SetStatus(StatusMethodAttrUnsupported)
	if err := a.send(in.ReplyAddress(), resp); err != nil {
		a.log.Debug("mad: answering an unhandled request failed", "err", err)
	}
}

// complete finishes the outstanding request in answers, if any.
func (r *Registration) complete(in *Received) bool {
	tid := in.MAD.TID()
	r.mu.Lock()
	p := r.pending[tid]
	if p == nil || p.class != in.MAD.MgmtClass() || (p.to.Remote.IsValid() && p.to.Remote.Unmap() != in.From.Remote.Unmap()) {
		r.mu.Unlock()
		return false
	}
	delete(r.pending, tid)
	stop := p.stop
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	p.finish(in, nil)
	return true
}
