//go:build linux

package service

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-go/rdma-go/provider/soft/rundir"
	"github.com/rdma-go/rdma-go/link"
)

// DefaultQuarantine is how long a dead process's slot is not given to
// another: longer than an RC QP's whole retry sequence with the default
// timeouts (7 retries of 67 ms at timeout 14, or of 4.3 s at timeout 20).
const DefaultQuarantine = 2 * time.Minute

// dataBuffer is the send buffer the service asks for on each client's data
// connection: what a client may fall behind before packets are dropped.
const dataBuffer = 8 << 20

// Config configures a Server.
type Config struct {
	// Path is the socket to listen on (default SocketPath()).
	Path string
	// StateFile keeps slot quarantines across restarts (default Path
	// with ".slots" appended).
	StateFile string
	// Quarantine defaults to DefaultQuarantine.
	Quarantine time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Server is the host service: it owns the RoCEv2 port of the addresses its
// clients attach to and forwards each received packet to its process.
type Server struct {
	cfg Config
	ln  *net.UnixListener
	log *slog.Logger

	mu       sync.Mutex
	closed   bool
	devs     map[netip.AddrPort]*device
	tables   map[netip.AddrPort]*slotTable
	sessions map[uint64]*client // attached, waiting for their data connection
	conns    map[*net.UnixConn]struct{}
	wg       sync.WaitGroup
}

// device is one address the service receives on.
type device struct {
	addr    netip.AddrPort
	link    *link.UDP
	slots   *slotTable
	clients []*client // in attach order
	claims  map[uint64]*client
	table   atomic.Pointer[routeTable]

	forwarded, dropped, unrouted atomic.Uint64
}

// routeTable is the device's routing, rebuilt on every change and read
// without locks by its receive goroutine.
type routeTable struct {
	bySlot [MaxSlot + 1]*client
	claims map[uint64]*client
	oldest *client
}

// client is one attached device of one process.
type client struct {
	dev     *device
	slot    uint8
	pid     int
	session uint64
	ctrl    *net.UnixConn
	data    atomic.Pointer[dataConn]
	gone    atomic.Bool
}

type dataConn struct {
	c  *net.UnixConn
	rc syscall.RawConn
}

// Listen opens the service's socket. It refuses when a service already
// answers there, and replaces a dead one's socket file.
func Listen(cfg Config) (*Server, error) {
	if cfg.Path == "" {
		cfg.Path = SocketPath()
		if cfg.Path == "" {
			return nil, fmt.Errorf("service: %s=off", SocketEnv)
		}
	}
	if cfg.StateFile == "" {
		cfg.StateFile = cfg.Path + ".slots"
	}
	if cfg.Quarantine <= 0 {
		cfg.Quarantine = DefaultQuarantine
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if filepath.Dir(cfg.Path) == rundir.Dir() {
		if err := rundir.Make(rundir.Dir()); err != nil {
			return nil, fmt.Errorf("service: %w", err)
		}
	}
	if c, err := net.Dial("unixpacket", cfg.Path); err == nil {
		c.Close()
		return nil, fmt.Errorf("service: a service already answers on %s", cfg.Path)
	}
	os.Remove(cfg.Path) // a dead service's
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: cfg.Path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, log: cfg.Logger, devs: make(map[netip.AddrPort]*device),
		tables: make(map[netip.AddrPort]*slotTable), sessions: make(map[uint64]*client), conns: make(map[*net.UnixConn]struct{})}
	if b, err := os.ReadFile(cfg.StateFile); err == nil {
		s.tables = loadState(bytes.NewReader(b), cfg.Now(), cfg.Quarantine)
	}
	return s, nil
}

// Addr returns the socket's path.
func (s *Server) Addr() string { return s.cfg.Path }

// Serve accepts clients until Close; it returns nil after Close.
func (s *Server) Serve() error {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("service: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(c)
	}
}

// Close stops the service: it closes every connection and socket, as its
// death would, and removes its socket file.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// handle serves one connection: a client's control connection or its data
// connection.
func (s *Server) handle(c *net.UnixConn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	buf := make([]byte, 256)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(buf)
	if err != nil || n == 0 {
		return
	}
	c.SetReadDeadline(time.Time{})
	switch {
	case buf[0] == kindAttach && n == attachReqLen:
		s.control(c, attachReq(buf[:n]))
	case buf[0] == kindData && n == idMsgLen:
		s.bindData(c, idMsg(buf[:n]).value())
	}
}

// control attaches a client and answers its requests until it goes.
func (s *Server) control(c *net.UnixConn, req attachReq) {
	cl, rep := s.attach(c, req)
	if _, err := c.Write(rep); err != nil || cl == nil {
		if cl != nil {
			s.detach(cl)
		}
		return
	}
	defer s.detach(cl)
	buf := make([]byte, 256)
	for {
		n, err := c.Read(buf)
		if err != nil || n == 0 {
			return // the process closed it, or died
		}
		var r reply
		switch {
		case buf[0] == kindClaim && n == idMsgLen:
			r = s.claim(cl, idMsg(buf[:n]).value())
		case buf[0] == kindRelease && n == idMsgLen:
			s.release(cl, idMsg(buf[:n]).value())
			r = newReply(statusOK, cl.slot, 0, 0, "")
		default:
			r = newReply(statusError, cl.slot, 0, 0, fmt.Sprintf("unknown request %d", buf[0]))
		}
		if _, err := c.Write(r); err != nil {
			return
		}
	}
}

// attach gives a new client a slot on its address, opening the address's
// UDP port for the first.
func (s *Server) attach(c *net.UnixConn, req attachReq) (*client, reply) {
	if req.version() != protoVersion {
		return nil, newReply(statusError, 0, 0, 0, fmt.Sprintf("protocol version %d, the service speaks %d", req.version(), protoVersion))
	}
	ap := req.addr()
	if ap.Port() == 0 {
		ap = netip.AddrPortFrom(ap.Addr(), link.RoCEPort)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devs[ap]
	if d == nil {
		l, err := link.ListenUDP(ap.Addr(), link.UDPOptions{Port: ap.Port(), GRO: true, Logger: s.log})
		if err != nil {
			return nil, newReply(statusError, 0, 0, 0, err.Error())
		}
		t := s.tables[ap]
		if t == nil {
			t = newSlotTable(s.cfg.Quarantine)
			s.tables[ap] = t
		}
		d = &device{addr: ap, link: l, slots: t, claims: make(map[uint64]*client)}
		d.publish()
		s.devs[ap] = d
		s.wg.Add(1)
		go s.receive(d)
		s.log.Info("service: receiving", "addr", ap)
	}
	slot := d.slots.take(s.cfg.Now(), req.pid(), req.slot())
	if slot == 0 {
		s.closeIfIdle(d)
		return nil, newReply(statusFull, 0, 0, 0, fmt.Sprintf("all %d slots of %s are in use or in quarantine", MaxSlot, ap))
	}
	var b [8]byte
	rand.Read(b[:])
	cl := &client{dev: d, slot: slot, pid: req.pid(), session: binary.LittleEndian.Uint64(b[:]), ctrl: c}
	d.clients = append(d.clients, cl)
	d.publish()
	s.sessions[cl.session] = cl
	s.saveLocked()
	s.log.Info("service: attached", "addr", ap, "slot", slot, "pid", cl.pid)
	return cl, newReply(statusOK, slot, cl.session, addressGUID(ap), "")
}

// bindData makes c the data connection of the client with session.
func (s *Server) bindData(c *net.UnixConn, session uint64) {
	s.mu.Lock()
	cl := s.sessions[session]
	delete(s.sessions, session)
	s.mu.Unlock()
	if cl == nil {
		c.Write(newReply(statusError, 0, session, 0, "unknown session"))
		return
	}
	setSendBuffer(c, dataBuffer)
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	cl.data.Store(&dataConn{c: c, rc: rc})
	// Tell the client its data connection is live: packets flow from now.
	if _, err := c.Write(newReply(statusOK, cl.slot, session, 0, "")); err != nil {
		cl.gone.Store(true)
		return
	}
	// Wait for the client to close it (it never writes); the control
	// connection's end detaches the client.
	var b [1]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			cl.gone.Store(true)
			return
		}
	}
}

// detach forgets a client: its slot goes into quarantine, its claims are
// released, and its address's port closes with its last client.
func (s *Server) detach(cl *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl.gone.Store(true)
	d := cl.dev
	i := 0
	for _, o := range d.clients {
		if o != cl {
			d.clients[i] = o
			i++
		}
	}
	if i == len(d.clients) {
		return // already detached
	}
	d.clients = d.clients[:i]
	for id, o := range d.claims {
		if o == cl {
			delete(d.claims, id)
		}
	}
	delete(s.sessions, cl.session)
	if !s.closed {
		// A service that stops leaves the slots attached in its state
		// file, reserved for their processes to attach again.
		d.slots.give(s.cfg.Now(), cl.slot)
	}
	d.publish()
	if dc := cl.data.Load(); dc != nil {
		dc.c.Close()
	}
	s.log.Info("service: detached", "addr", d.addr, "slot", cl.slot, "pid", cl.pid)
	s.closeIfIdle(d)
	if !s.closed {
		s.saveLocked()
	}
}

// closeIfIdle closes d's port when no client is left.
func (s *Server) closeIfIdle(d *device) {
	if len(d.clients) == 0 && s.devs[d.addr] == d {
		delete(s.devs, d.addr)
		d.link.Close()
		s.log.Info("service: stopped receiving", "addr", d.addr)
	}
}

func (s *Server) claim(cl *client, id uint64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := cl.dev
	if o := d.claims[id]; o != nil && o != cl {
		return newReply(statusBusy, cl.slot, 0, 0, fmt.Sprintf("service ID %#x is in use by process %d", id, o.pid))
	}
	d.claims[id] = cl
	d.publish()
	s.log.Info("service: listen", "addr", d.addr, "service_id", fmt.Sprintf("%#x", id), "slot", cl.slot, "pid", cl.pid)
	return newReply(statusOK, cl.slot, 0, 0, "")
}

func (s *Server) release(cl *client, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl.dev.claims[id] == cl {
		delete(cl.dev.claims, id)
		cl.dev.publish()
	}
}

// publish rebuilds d's routing table; the Server's mu is held.
func (d *device) publish() {
	t := &routeTable{claims: make(map[uint64]*client, len(d.claims))}
	for _, c := range d.clients {
		t.bySlot[c.slot] = c
	}
	if len(d.clients) > 0 {
		t.oldest = d.clients[0]
	}
	for id, c := range d.claims {
		t.claims[id] = c
	}
	d.table.Store(t)
}

// saveLocked writes the slot tables to the state file.
func (s *Server) saveLocked() {
	var b bytes.Buffer
	for ap, t := range s.tables {
		t.save(&b, ap)
	}
	tmp := s.cfg.StateFile + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		s.log.Warn("service: cannot save slot state", "file", s.cfg.StateFile, "err", err)
		return
	}
	if err := os.Rename(tmp, s.cfg.StateFile); err != nil {
		s.log.Warn("service: cannot save slot state", "file", s.cfg.StateFile, "err", err)
	}
}

// receive reads d's port and forwards every datagram to its process.
func (s *Server) receive(d *device) {
	defer s.wg.Done()
	batch := make([]link.Datagram, d.link.MaxBatch())
	bufs := make([][]byte, len(batch))
	for i := range bufs {
		bufs[i] = make([]byte, link.MaxDatagram)
	}
	var f forwarder
	for {
		for i := range batch {
			batch[i].Buf = bufs[i]
		}
		n, err := d.link.Receive(batch)
		for _, dg := range batch[:n] {
			f.forward(d, dg)
		}
		if err != nil {
			if !errors.Is(err, link.ErrClosed) {
				s.log.Error("service: receive failed", "addr", d.addr, "err", err)
			}
			return
		}
	}
}

// forwarder holds the receive goroutine's scratch header.
type forwarder struct {
	hdr [packetHdrLen]byte
	msg vecMsg
}

// forward sends one received datagram, or each run of a GRO-coalesced
// one that goes to one process, to its process.
func (f *forwarder) forward(d *device, dg link.Datagram) {
	t := d.table.Load()
	seg := dg.SegSize
	if seg <= 0 || seg >= len(dg.Buf) {
		f.send(d, t, dg.Src, d.lookup(t, route(dg.Buf)), dg.Buf, 0)
		return
	}
	// A run of segments: forward each stretch of consecutive segments
	// bound for one process as one message.
	start, to := 0, d.lookup(t, route(dg.Buf[:seg]))
	for off := seg; off < len(dg.Buf); off += seg {
		next := d.lookup(t, route(dg.Buf[off:min(off+seg, len(dg.Buf))]))
		if next != to {
			f.send(d, t, dg.Src, to, dg.Buf[start:off], seg)
			start, to = off, next
		}
	}
	f.send(d, t, dg.Src, to, dg.Buf[start:], seg)
}

// lookup finds the client a destination names, or nil.
func (d *device) lookup(t *routeTable, to dest) *client {
	switch to.kind {
	case destSlot:
		return t.bySlot[to.slot]
	case destListener:
		if c := t.claims[to.serviceID]; c != nil {
			return c
		}
		return t.oldest // its CM rejects: nobody listens
	case destAny:
		return t.oldest
	}
	return nil
}

// send writes one message to cl's data connection without waiting: a
// client that cannot take it now loses it, as a full receive queue would.
func (f *forwarder) send(d *device, t *routeTable, src netip.AddrPort, cl *client, p []byte, seg int) {
	if cl == nil {
		d.unrouted.Add(1)
		return
	}
	dc := cl.data.Load()
	if dc == nil || cl.gone.Load() {
		d.dropped.Add(1)
		return
	}
	if seg >= len(p) {
		seg = 0
	}
	putPacketHdr(f.hdr[:], src, seg)
	var err error
	werr := dc.rc.Write(func(fd uintptr) bool {
		_, err = f.msg.send(fd, f.hdr[:], p, unix.MSG_DONTWAIT)
		return true
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		d.dropped.Add(1)
		if !errors.Is(err, unix.EAGAIN) {
			cl.gone.Store(true)
		}
		return
	}
	d.forwarded.Add(1)
}

// setSendBuffer asks for n bytes of send buffer on c, forcing it past
// net.core.wmem_max where the process may.
func setSendBuffer(c *net.UnixConn, n int) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n)
		}
	})
}

// AddressStats are one address's counters.
type AddressStats struct {
	Addr      netip.AddrPort
	Clients   int
	Forwarded uint64 // messages handed to a process
	Dropped   uint64 // for a process that was gone or too slow
	Unrouted  uint64 // for no process (a free slot, QP0, malformed)
}

// Stats returns the counters of each address the service receives on.
func (s *Server) Stats() []AddressStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []AddressStats
	for _, d := range s.devs {
		out = append(out, AddressStats{Addr: d.addr, Clients: len(d.clients),
			Forwarded: d.forwarded.Load(), Dropped: d.dropped.Load(), Unrouted: d.unrouted.Load()})
	}
	return out
}
