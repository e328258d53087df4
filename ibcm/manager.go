package ibcm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/mad"
)

// Config configures a Manager.
type Config struct {
	// GUID is the device's node GUID, sent as LocalCAGUID.
	GUID uint64
	// Clock defaults to the agent's clock.
	Clock mad.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Claims, when set, arbitrates service IDs among the processes that
	// share the device's address (a host service routes each REQ and
	// SIDR_REQ to the process listening on its service ID): Listen
	// claims the ID there first, and Listener.Close releases it.
	Claims ServiceClaims
}

// ServiceClaims is where a Manager claims the service IDs it listens on
// when other processes share its device.
type ServiceClaims interface {
	// Claim reserves serviceID for this manager, or says why not (an
	// error wrapping ErrBusy when another process listens on it).
	Claim(serviceID uint64) error
	// Release gives serviceID back.
	Release(serviceID uint64)
}

// Handler receives a connection's events, one at a time and in order, on
// the goroutine that caused them (the device's receive path or a timer);
// it must not block. A non-nil error destroys the connection as Destroy
// does, except that ErrDrop for REQ_RECEIVED or SIDR_REQ_RECEIVED discards
// the request without an answer.
type Handler func(c *Conn, ev *Event) error

// Stats counts the Manager's stateless work.
type Stats struct {
	RejNoListener    atomic.Uint64 // REJ "invalid service ID" sent
	RejStale         atomic.Uint64 // REJ "stale connection" sent
	RejInvalidGID    atomic.Uint64 // REJ "invalid GID" sent
	DREPUnknown      atomic.Uint64 // DREP sent for a DREQ matching nothing
	SIDRNoListener   atomic.Uint64 // SIDR_REP "unsupported" sent
	Unmatched        atomic.Uint64 // messages matching no connection, dropped
	DuplicateSIDRREQ atomic.Uint64 // SIDR_REQ already being answered, dropped
	Ignored          atomic.Uint64 // LAP, APR and unknown attributes
}

// Manager is the connection manager of one device: it owns the CM
// registration (class 0x07, version 2, method Send) of the device's MAD
// agent, its connections and listeners.
type Manager struct {
	cfg   Config
	reg   *mad.Registration
	guid  uint64
	clock mad.Clock
	log   *slog.Logger
	stats Stats

	mu         sync.Mutex
	closed     bool
	conns      map[uint32]*Conn
	remoteIDs  map[remoteKey]*Conn
	remoteQPNs map[remoteKey]*Conn
	sidrIn     map[sidrKey]*Conn
	listeners  map[uint64]*Listener
	idMask     uint32
	idNext     uint32
	// idPrefix, when not 0, is the top byte of every local communication
	// ID: a host service routes replies to the process whose prefix it
	// is (see SetCommIDPrefix).
	idPrefix uint8
}

type remoteKey struct {
	guid uint64
	id   uint32
}

type sidrKey struct {
	peer netip.Addr
	id   uint32
}

// New registers a connection manager on agent.
func New(agent *mad.Agent, cfg Config) (*Manager, error) {
	m := &Manager{cfg: cfg, guid: cfg.GUID, clock: cfg.Clock, log: cfg.Logger,
		conns: make(map[uint32]*Conn), remoteIDs: make(map[remoteKey]*Conn), remoteQPNs: make(map[remoteKey]*Conn),
		sidrIn: make(map[sidrKey]*Conn), listeners: make(map[uint64]*Listener)}
	if m.clock == nil {
		m.clock = agent.Clock()
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	m.idMask, m.idNext = binary.LittleEndian.Uint32(b[:4]), binary.LittleEndian.Uint32(b[4:])
	reg, err := agent.Register(mad.ClassCM, mad.CMClassVersion, []uint8{mad.MethodSend}, m.recv)
	if err != nil {
		return nil, fmt.Errorf("ibcm: %w", err)
	}
	m.reg = reg
	return m, nil
}

// GUID returns the CA GUID the manager sends.
func (m *Manager) GUID() uint64 { return m.guid }

// Clock returns the manager's clock.
func (m *Manager) Clock() mad.Clock { return m.clock }

// Stats returns the manager's counters.
func (m *Manager) Stats() *Stats { return &m.stats }

// Close unregisters the manager and stops every connection's timer; no
// more events are delivered.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for _, c := range m.conns {
		c.destroyed = true
		c.queue = nil
		m.stopTimer(c)
	}
	m.mu.Unlock()
	m.reg.Unregister()
}

// Conns returns the number of connections the manager still tracks
// (including those in TimeWait after their user destroyed them).
func (m *Manager) Conns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.conns)
}

// Listener receives the REQs and SIDR_REQs for one service ID.
type Listener struct {
	m         *Manager
	serviceID uint64
	h         Handler
}

// ServiceID returns the service ID listened on.
func (l *Listener) ServiceID() uint64 { return l.serviceID }

// Listen starts delivering REQ_RECEIVED and SIDR_REQ_RECEIVED events for
// serviceID to h, each on a new connection.
func (m *Manager) Listen(serviceID uint64, h Handler) (*Listener, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if _, ok := m.listeners[serviceID]; ok {
		return nil, fmt.Errorf("%w: %#x", ErrBusy, serviceID)
	}
	l := &Listener{m: m, serviceID: serviceID, h: h}
	m.listeners[serviceID] = l
	if m.cfg.Claims != nil {
		// Under mu, so that a Close racing this Listen cannot release
		// the ID before it is claimed; Claim does not call back.
		if err := m.cfg.Claims.Claim(serviceID); err != nil {
			delete(m.listeners, serviceID)
			return nil, fmt.Errorf("ibcm: listen on service ID %#x: %w", serviceID, err)
		}
	}
	m.log.Debug("ibcm: listening", "service_id", fmt.Sprintf("%#x", serviceID))
	return l, nil
}

// SetCommIDPrefix makes every local communication ID allocated from now
// on carry prefix in its top byte (0: none, the default). A host service
// that shares one device address among processes gives each its prefix
// and routes CM replies by it.
func (m *Manager) SetCommIDPrefix(prefix uint8) {
	m.mu.Lock()
	m.idPrefix = prefix
	m.mu.Unlock()
}

// Close stops listening; connections already created live on.
func (l *Listener) Close() {
	m := l.m
	m.mu.Lock()
	if m.listeners[l.serviceID] == l {
		delete(m.listeners, l.serviceID)
		m.log.Debug("ibcm: stopped listening", "service_id", fmt.Sprintf("%#x", l.serviceID))
		if m.cfg.Claims != nil {
			m.cfg.Claims.Release(l.serviceID)
		}
	}
	m.mu.Unlock()
}

// Conn is one connection (or SIDR exchange) and its state machine.
type Conn struct {
	m         *Manager
	mach      machine
	h         Handler
	listener  *Listener
	destroyed bool

	timerAt   time.Time
	timerStop func() bool

	queue      []Event
	delivering bool

	inRemoteID, inRemoteQPN, inSIDR bool
}

// newConn allocates a connection with a fresh local communication ID.
func (m *Manager) newConn(h Handler) *Conn {
	c := &Conn{m: m, h: h}
	c.mach.guid = m.guid
	for {
		m.idNext++
		id := m.idNext ^ m.idMask
		if m.idPrefix != 0 {
			id = uint32(m.idPrefix)<<24 | id&0xFFFFFF
		}
		if _, used := m.conns[id]; id != 0 && !used {
			c.mach.localID = id
			m.conns[id] = c
			return c
		}
	}
}

// Connect sends a REQ and returns the new connection; h receives its
// events (REP_RECEIVED, REJ_RECEIVED, REQ_ERROR, MRA_RECEIVED …).
func (m *Manager) Connect(p *ConnectParams, h Handler) (*Conn, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	c := m.newConn(h)
	var o output
	if err := c.mach.connect(m.clock.Now(), p, m.reg.TID(c.mach.localID), &o); err != nil {
		delete(m.conns, c.mach.localID)
		m.mu.Unlock()
		return nil, err
	}
	m.commit(c, &o)
	m.mu.Unlock()
	return c, nil
}

// SIDRRequest sends a SIDR_REQ and returns the exchange; h receives
// SIDR_REP_RECEIVED or SIDR_REQ_ERROR.
func (m *Manager) SIDRRequest(p *SIDRParams, h Handler) (*Conn, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	c := m.newConn(h)
	var o output
	if err := c.mach.sidrRequest(m.clock.Now(), p, m.reg.TID(c.mach.localID), &o); err != nil {
		delete(m.conns, c.mach.localID)
		m.mu.Unlock()
		return nil, err
	}
	m.commit(c, &o)
	m.mu.Unlock()
	return c, nil
}

// do runs a user call on c's machine under the manager lock and delivers
// the events it caused.
func (c *Conn) do(f func(now time.Time, o *output) error) error {
	m := c.m
	m.mu.Lock()
	if c.destroyed {
		m.mu.Unlock()
		return ErrState
	}
	var o output
	err := f(m.clock.Now(), &o)
	if err == nil {
		m.commit(c, &o)
	}
	m.mu.Unlock()
	if err == nil && len(o.events) > 0 {
		m.deliver(c)
	}
	return err
}

// Accept sends the REP to a received REQ.
func (c *Conn) Accept(p *AcceptParams) error {
	return c.do(func(now time.Time, o *output) error { return c.mach.accept(now, p, o) })
}

// Reject sends a REJ with the given reason (28 for a consumer's refusal),
// additional reject information and private data (at most 148 bytes).
func (c *Conn) Reject(reason uint16, ari, pdata []byte) error {
	return c.do(func(now time.Time, o *output) error { return c.mach.reject(now, reason, ari, pdata, o) })
}

// SendRTU completes the active side after REP_RECEIVED.
func (c *Conn) SendRTU(pdata []byte) error {
	return c.do(func(now time.Time, o *output) error { return c.mach.sendRTU(pdata, o) })
}

// Establish marks a passive connection established before its RTU arrives
// (the QP saw traffic; Linux's ib_cm_notify): USER_ESTABLISHED follows.
func (c *Conn) Establish() error {
	return c.do(func(now time.Time, o *output) error { return c.mach.establish(o) })
}

// Disconnect sends a DREQ on an established connection.
func (c *Conn) Disconnect(pdata []byte) error {
	return c.do(func(now time.Time, o *output) error {
		return c.mach.disconnect(now, c.m.reg.TID(c.mach.localID), pdata, o)
	})
}

// SendDREP answers a received DREQ and enters TimeWait.
func (c *Conn) SendDREP(pdata []byte) error {
	return c.do(func(now time.Time, o *output) error { return c.mach.sendDREP(now, pdata, o) })
}

// SIDRReply answers a received SIDR_REQ.
func (c *Conn) SIDRReply(r *SIDRReply) error {
	return c.do(func(now time.Time, o *output) error { return c.mach.sidrReply(r, o) })
}

// Destroy ends the connection as Linux's ib_destroy_cm_id does: a REJ
// (timeout, or consumer defined) if it was being set up, a DREQ or DREP if
// it was connected, then TimeWait, which runs on without the user. No
// further events are delivered.
func (c *Conn) Destroy() {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.destroyed {
		return
	}
	m.destroyLocked(c)
}

func (m *Manager) destroyLocked(c *Conn) {
	var o output
	c.mach.destroy(m.clock.Now(), m.reg.TID(c.mach.localID), &o)
	m.forget(c)
	o.events = nil
	m.commit(c, &o)
}

// forget marks c destroyed and drops what only its user needed: its
// handler (and through it the user's connection, QP and queues), queued
// events, and the REQ, REP and RTU (TimeWait answers a DREQ with the DREP
// alone). A destroyed connection lives on through TimeWait, about two
// seconds on a default path: at thousands of connections a second, what it
// holds is what the process holds.
func (m *Manager) forget(c *Conn) {
	c.destroyed = true
	c.h = nil
	c.queue = nil
	c.mach.req, c.mach.rep, c.mach.rtu = nil, nil, nil
}

// SetHandler replaces the handler for the connection's later events.
func (c *Conn) SetHandler(h Handler) {
	c.m.mu.Lock()
	c.h = h
	c.m.mu.Unlock()
}

func (c *Conn) locked(f func()) {
	c.m.mu.Lock()
	f()
	c.m.mu.Unlock()
}

// State returns the connection's state.
func (c *Conn) State() (s State) { c.locked(func() { s = c.mach.state }); return }

// LocalID returns the local communication ID.
func (c *Conn) LocalID() uint32 { return c.mach.localID }

// RemoteID returns the peer's communication ID (0 until known).
func (c *Conn) RemoteID() (id uint32) { c.locked(func() { id = c.mach.remoteID }); return }

// RemoteQPN returns the peer's QPN (0 until known).
func (c *Conn) RemoteQPN() (q uint32) { c.locked(func() { q = c.mach.remoteQPN }); return }

// RemoteGUID returns the peer's CA GUID (0 until known).
func (c *Conn) RemoteGUID() (g uint64) { c.locked(func() { g = c.mach.remoteGUID }); return }

// REQ returns the REQ (or SIDR_REQ) sent or received; do not modify it.
func (c *Conn) REQ() (m mad.MAD) { c.locked(func() { m = c.mach.req }); return }

// REP returns the REP (or SIDR_REP) sent or received; do not modify it.
func (c *Conn) REP() (m mad.MAD) { c.locked(func() { m = c.mach.rep }); return }

// PathAckTimeout returns the path's ACK timeout (the passive side's QP
// timeout, §3.7; it also times TimeWait).
func (c *Conn) PathAckTimeout() (t uint8) { c.locked(func() { t = c.mach.avTimeout }); return }

// Listener returns the listener a passive connection came through.
func (c *Conn) Listener() *Listener { return c.listener }

// Manager returns the connection's manager.
func (c *Conn) Manager() *Manager { return c.m }

// commit sends what a machine produced, queues its events, and brings the
// lookup tables and the timer in line with its new state. Called with the
// lock held.
func (m *Manager) commit(c *Conn, o *output) {
	for _, s := range o.sends {
		m.sendLocked(s.to, s.m)
	}
	if !c.destroyed {
		c.queue = append(c.queue, o.events...)
	}
	m.sync(c)
}

// sync updates the tables and the timer for c's state.
func (m *Manager) sync(c *Conn) {
	st := c.mach.state
	live := st != StateIdle && st != StateTimeWait && st != StateSIDRREQSent && st != StateSIDRREQRcvd
	rid := remoteKey{c.mach.remoteGUID, c.mach.remoteID}
	want := live && c.mach.remoteID != 0
	if want && !c.inRemoteID {
		if _, taken := m.remoteIDs[rid]; !taken {
			m.remoteIDs[rid], c.inRemoteID = c, true
		}
	} else if !want && c.inRemoteID {
		if m.remoteIDs[rid] == c {
			delete(m.remoteIDs, rid)
		}
		c.inRemoteID = false
	}
	rq := remoteKey{c.mach.remoteGUID, c.mach.remoteQPN}
	want = live && c.mach.remoteQPN != 0
	if want && !c.inRemoteQPN {
		if _, taken := m.remoteQPNs[rq]; !taken {
			m.remoteQPNs[rq], c.inRemoteQPN = c, true
		}
	} else if !want && c.inRemoteQPN {
		if m.remoteQPNs[rq] == c {
			delete(m.remoteQPNs, rq)
		}
		c.inRemoteQPN = false
	}
	if c.inSIDR && st != StateSIDRREQRcvd {
		delete(m.sidrIn, sidrKey{c.mach.av.Remote, c.mach.remoteID})
		c.inSIDR = false
	}
	if st == StateIdle && c.destroyed {
		if m.conns[c.mach.localID] == c {
			delete(m.conns, c.mach.localID)
		}
	}
	if !c.mach.deadline.Equal(c.timerAt) {
		m.stopTimer(c)
		if at := c.mach.deadline; !at.IsZero() && !m.closed {
			c.timerAt = at
			c.timerStop = m.clock.AfterFunc(at.Sub(m.clock.Now()), func() { m.fire(c, at) })
		}
	}
}

func (m *Manager) stopTimer(c *Conn) {
	if c.timerStop != nil {
		c.timerStop()
		c.timerStop = nil
	}
	c.timerAt = time.Time{}
}

// fire runs c's timer set for at.
func (m *Manager) fire(c *Conn, at time.Time) {
	m.mu.Lock()
	if m.closed || !c.timerAt.Equal(at) {
		m.mu.Unlock()
		return
	}
	c.timerAt, c.timerStop = time.Time{}, nil
	now := m.clock.Now()
	if now.Before(at) {
		now = at
	}
	var o output
	c.mach.timer(now, &o)
	m.commit(c, &o)
	m.mu.Unlock()
	if len(o.events) > 0 {
		m.deliver(c)
	}
}

// deliver runs c's queued events through its handler, unless another
// goroutine is already doing so.
func (m *Manager) deliver(c *Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.delivering {
		return
	}
	c.delivering = true
	for len(c.queue) > 0 && !c.destroyed {
		ev := c.queue[0]
		c.queue = c.queue[1:]
		h := c.h
		m.mu.Unlock()
		var err error
		if h != nil {
			err = h(c, &ev)
		}
		m.mu.Lock()
		if err == nil || c.destroyed {
			continue
		}
		if errors.Is(err, ErrDrop) && (ev.Type == EventREQReceived || ev.Type == EventSIDRREQReceived) {
			c.mach.stopTimer()
			c.mach.state = StateIdle
			m.forget(c)
			m.sync(c)
			continue
		}
		m.destroyLocked(c)
	}
	c.delivering = false
}

// recv is the CM registration's handler: it matches each message to its
// connection (§3.2) or answers it statelessly.
func (m *Manager) recv(_ *mad.Registration, in *mad.Received) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	var o output
	var c *Conn
	now := in.Time
	msg := in.MAD
	if m.log.Enabled(context.Background(), slog.LevelDebug) { // its arguments cost allocations per MAD
		m.log.Debug("ibcm: received", "msg", mad.CMAttrName(msg.AttrID()), "from", in.From.Remote, "tid", msg.TID())
	}
	switch msg.AttrID() {
	case mad.AttrREQ:
		c = m.onREQ(now, in, &o)
	case mad.AttrREP:
		r := mad.REP(msg)
		if c = m.conns[r.RemoteCommID()]; c != nil {
			if c.mach.state == StateREQSent || c.mach.state == StateMRAREQRcvd {
				if _, dup := m.remoteIDs[remoteKey{r.LocalCAGUID(), r.LocalCommID()}]; dup {
					c = nil
					break
				}
				if old := m.remoteQPNs[remoteKey{r.LocalCAGUID(), r.LocalQPN()}]; old != nil && old != c {
					m.stats.RejStale.Add(1)
					m.statelessREJ(msg, in.From, mad.RejStaleConn, mad.MsgREP, r.LocalCommID(), r.RemoteCommID())
					c = nil
					break
				}
			}
			c.mach.onREP(now, msg, in.From, &o)
		}
	case mad.AttrRTU:
		r := mad.RTU(msg)
		if c = m.match(r.RemoteCommID(), r.LocalCommID()); c != nil {
			c.mach.onRTU(msg, in.From, &o)
		}
	case mad.AttrREJ:
		r := mad.REJ(msg)
		switch {
		case r.Reason() == mad.RejTimeout:
			c = m.remoteIDs[remoteKey{binary.BigEndian.Uint64(r.ARI()), r.LocalCommID()}]
		case r.MessageRejected() == mad.MsgREQ:
			c = m.match(r.RemoteCommID(), 0)
		default:
			c = m.match(r.RemoteCommID(), r.LocalCommID())
		}
		if c != nil {
			c.mach.onREJ(now, msg, in.From, &o)
		}
	case mad.AttrMRA:
		a := mad.MRA(msg)
		if a.MessageMRAed() == mad.MsgREQ {
			c = m.conns[a.RemoteCommID()]
		} else {
			c = m.match(a.RemoteCommID(), a.LocalCommID())
		}
		if c != nil {
			c.mach.onMRA(now, msg, in.From, &o)
		}
	case mad.AttrDREQ:
		d := mad.DREQ(msg)
		if c = m.match(d.RemoteCommID(), d.LocalCommID()); c != nil {
			c.mach.onDREQ(now, msg, in.From, &o)
			break
		}
		m.stats.DREPUnknown.Add(1)
		drep := mad.NewCM(mad.AttrDREP, msg.TID())
		mad.DREP(drep).SetLocalCommID(d.RemoteCommID())
		mad.DREP(drep).SetRemoteCommID(d.LocalCommID())
		m.sendLocked(replyTo(in.From), drep)
	case mad.AttrDREP:
		d := mad.DREP(msg)
		if c = m.match(d.RemoteCommID(), d.LocalCommID()); c != nil {
			c.mach.onDREP(now, msg, in.From, &o)
		}
	case mad.AttrSIDRREQ:
		c = m.onSIDRREQ(in, &o)
	case mad.AttrSIDRREP:
		if c = m.conns[mad.SIDRREP(msg).RequestID()]; c != nil {
			c.mach.onSIDRREP(msg, in.From, &o)
		}
	default:
		m.stats.Ignored.Add(1)
	}
	if c == nil {
		m.mu.Unlock()
		return
	}
	m.commit(c, &o)
	m.mu.Unlock()
	if len(o.events) > 0 {
		m.deliver(c)
	}
}

// match finds the connection with local ID local whose remote ID is
// remote.
func (m *Manager) match(local, remote uint32) *Conn {
	c := m.conns[local]
	if c == nil || c.mach.remoteID != remote {
		if c == nil {
			m.stats.Unmatched.Add(1)
		}
		return nil
	}
	return c
}

func (m *Manager) sendLocked(to mad.Address, msg mad.MAD) {
	if m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.log.Debug("ibcm: send", "msg", mad.CMAttrName(msg.AttrID()), "to", to.Remote, "tid", msg.TID())
	}
	if err := m.reg.Send(to, msg); err != nil {
		m.log.Debug("ibcm: send failed", "msg", mad.CMAttrName(msg.AttrID()), "to", to.Remote, "err", err)
	}
}

// statelessREJ rejects a message that has no connection, addressed from the
// packet (Linux's cm_issue_rej): LocalCommID and RemoteCommID as given.
func (m *Manager) statelessREJ(req mad.MAD, from mad.Address, reason uint16, msgType uint8, remoteID, localID uint32) {
	rej := mad.NewCM(mad.AttrREJ, req.TID())
	r := mad.REJ(rej)
	r.SetLocalCommID(localID)
	r.SetRemoteCommID(remoteID)
	r.SetMessageRejected(msgType)
	r.SetReason(reason)
	m.sendLocked(replyTo(from), rej)
}

// onREQ: duplicates, stale connections, the GID check and the listener
// lookup of Linux's cm_req_handler, then a new passive connection.
func (m *Manager) onREQ(now time.Time, in *mad.Received, o *output) *Conn {
	msg := in.MAD
	r := mad.REQ(msg)
	// Linux's REJ to a REQ copies REQ CM bytes 4–7 into LocalCommID.
	notOurs := binary.BigEndian.Uint32(msg[28:32])
	if c := m.remoteIDs[remoteKey{r.LocalCAGUID(), r.LocalCommID()}]; c != nil {
		c.mach.dupREQ(in.From, o)
		return c
	}
	if old := m.remoteQPNs[remoteKey{r.LocalCAGUID(), r.LocalQPN()}]; old != nil {
		m.stats.RejStale.Add(1)
		m.statelessREJ(msg, in.From, mad.RejStaleConn, mad.MsgREQ, r.LocalCommID(), notOurs)
		if old.mach.state == StateEstablished {
			var oo output
			_ = old.mach.disconnect(now, m.reg.TID(old.mach.localID), nil, &oo)
			m.commit(old, &oo)
		}
		return nil
	}
	p := r.Primary()
	lg, rg := mad.GIDAddr(p.LocalGID()), mad.GIDAddr(p.RemoteGID())
	if !lg.IsValid() || lg.IsUnspecified() || lg.Is4() != rg.Is4() || (in.From.Local.IsValid() && lg.Is4() != in.From.Local.Unmap().Is4()) {
		m.stats.RejInvalidGID.Add(1)
		m.statelessREJ(msg, in.From, mad.RejInvalidGID, mad.MsgREQ, r.LocalCommID(), notOurs)
		return nil
	}
	l := m.listeners[r.ServiceID()]
	if l == nil {
		m.stats.RejNoListener.Add(1)
		m.log.Debug("ibcm: REQ for a service ID nobody listens on: rejected", "service_id", fmt.Sprintf("%#x", r.ServiceID()), "from", in.From.Remote)
		m.statelessREJ(msg, in.From, mad.RejInvalidServiceID, mad.MsgREQ, r.LocalCommID(), notOurs)
		return nil
	}
	c := m.newConn(l.h)
	c.listener = l
	c.mach.initPassive(msg, in.From, o)
	o.events[len(o.events)-1].Listener = l
	return c
}

// onSIDRREQ answers or creates the passive side of a SIDR exchange.
func (m *Manager) onSIDRREQ(in *mad.Received, o *output) *Conn {
	msg := in.MAD
	s := mad.SIDRREQ(msg)
	key := sidrKey{in.From.Remote, s.RequestID()}
	if _, dup := m.sidrIn[key]; dup {
		m.stats.DuplicateSIDRREQ.Add(1)
		return nil
	}
	l := m.listeners[s.ServiceID()]
	if l == nil {
		m.stats.SIDRNoListener.Add(1)
		rep := mad.NewCM(mad.AttrSIDRREP, msg.TID())
		r := mad.SIDRREP(rep)
		r.SetRequestID(s.RequestID())
		r.SetStatus(mad.SIDRUnsupported)
		r.SetServiceID(s.ServiceID())
		m.sendLocked(replyTo(in.From), rep)
		return nil
	}
	c := m.newConn(l.h)
	c.listener = l
	c.mach.initSIDR(msg, in.From, o)
	o.events[len(o.events)-1].Listener = l
	m.sidrIn[key], c.inSIDR = c, true
	return c
}
