//go:build linux

package service

import (
	"bytes"
	"context"
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

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/provider/soft/rundir"
)

// DefaultQuarantine is how long a dead process's slot is not given to
// another: longer than an RC QP's whole retry sequence with the default
// timeouts (7 retries of 67 ms at timeout 14, or of 4.3 s at timeout 20).
const DefaultQuarantine = 2 * time.Minute

// portWait bounds how long attaching to an address waits for the sockets
// of a previous service's clients to close.
const portWait = 10 * time.Second

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

// Server is the host service: for each address its clients attach to, it
// keeps a SO_REUSEPORT group of UDP sockets on the RoCE port, one per
// process, and a BPF program that makes the kernel deliver each packet to
// the socket of the process it is for.
type Server struct {
	cfg Config
	ln  *net.UnixListener
	log *slog.Logger

	mu     sync.Mutex
	closed bool
	devs   map[netip.AddrPort]*device
	tables map[netip.AddrPort]*slotTable
	conns  map[*net.UnixConn]struct{}
	wg     sync.WaitGroup
}

// device is one address the service steers.
type device struct {
	addr    netip.AddrPort
	socks   []*groupSock // by index in the reuseport group; [0] is the service's
	slots   *slotTable
	clients []*client // in attach order
	claims  map[uint64]*client

	unrouted atomic.Uint64
}

// groupSock is one socket of an address's reuseport group. The service
// holds every one for as long as the address is in use, so that no socket
// leaves the group and the indices stay put; a dead process's socket is
// parked (routed nothing) until another process takes it. The service
// reads only its own socket (conn, index 0); the others it holds as bare
// descriptors, outside its poller, so that packets for its clients never
// wake it.
type groupSock struct {
	conn  *net.UDPConn // index 0 only
	fd    int          // the others
	index uint32
	owner *client // nil: the service's own, or parked
}

// client is one attached device of one process.
type client struct {
	dev  *device
	slot uint8
	pid  int
	ctrl *net.UnixConn
	sock *groupSock
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
		tables: make(map[netip.AddrPort]*slotTable), conns: make(map[*net.UnixConn]struct{})}
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
// death would, and removes its socket file. The slots attached now stay
// reserved in the state file for their processes, which attach again to
// the next service.
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
	for _, d := range s.devs {
		d.close()
	}
	s.devs = map[netip.AddrPort]*device{}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// handle serves one client's control connection: it attaches the client
// and answers its requests until the client goes.
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
	if err != nil || n != attachReqLen || buf[0] != kindAttach {
		return
	}
	c.SetReadDeadline(time.Time{})
	cl, rep := s.attach(c, attachReq(buf[:n]))
	var oob []byte
	if cl != nil {
		cl.sock.control(func(fd int) { oob = unix.UnixRights(fd) })
	}
	if _, _, err := c.WriteMsgUnix(rep, oob, nil); err != nil || cl == nil {
		if cl != nil {
			s.detach(cl)
		}
		return
	}
	defer s.detach(cl)
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
			r = newReply(statusOK, cl.slot, 0, "")
		default:
			r = newReply(statusError, cl.slot, 0, fmt.Sprintf("unknown request %d", buf[0]))
		}
		if _, err := c.Write(r); err != nil {
			return
		}
	}
}

// attach gives a new client a slot on its address and the socket of the
// address's group that the slot's packets go to.
func (s *Server) attach(c *net.UnixConn, req attachReq) (*client, reply) {
	if req.version() != protoVersion {
		return nil, newReply(statusError, 0, 0, fmt.Sprintf("protocol version %d, the service speaks %d", req.version(), protoVersion))
	}
	ap := req.addr()
	if ap.Port() == 0 {
		ap = netip.AddrPortFrom(ap.Addr(), link.RoCEPort)
	}
	s.mu.Lock()
	d := s.devs[ap]
	s.mu.Unlock()
	if d == nil {
		// Not under mu: the wait may be long, and other addresses'
		// clients come and go meanwhile.
		if err := waitPortFree(ap); err != nil {
			return nil, newReply(statusError, 0, 0, err.Error())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, newReply(statusError, 0, 0, "the service is stopping")
	}
	if d = s.devs[ap]; d == nil {
		t := s.tables[ap]
		if t == nil {
			t = newSlotTable(s.cfg.Quarantine)
			s.tables[ap] = t
		}
		var err error
		if d, err = s.newDevice(ap, t); err != nil {
			return nil, newReply(statusError, 0, 0, err.Error())
		}
		s.devs[ap] = d
		s.log.Info("service: steering", "addr", ap)
	}
	slot := d.slots.take(s.cfg.Now(), req.pid(), req.slot())
	if slot == 0 {
		s.closeIfIdle(d)
		return nil, newReply(statusFull, 0, 0, fmt.Sprintf("all %d slots of %s are in use or in quarantine", MaxSlot, ap))
	}
	gs, err := d.freeSocket()
	if err != nil {
		d.slots.give(s.cfg.Now(), slot)
		s.closeIfIdle(d)
		return nil, newReply(statusError, 0, 0, err.Error())
	}
	cl := &client{dev: d, slot: slot, pid: req.pid(), ctrl: c, sock: gs}
	gs.owner = cl
	d.clients = append(d.clients, cl)
	if err := d.steer(); err != nil {
		s.log.Error("service: cannot steer", "addr", ap, "err", err)
	}
	s.saveLocked()
	s.log.Info("service: attached", "addr", ap, "slot", slot, "pid", cl.pid, "socket", gs.index)
	return cl, newReply(statusOK, slot, addressGUID(ap), "")
}

// waitPortFree waits, up to portWait, until nothing holds ap's port: the
// sockets a previous service handed out close as their processes notice it
// is gone, and a new group must not join the old one.
func waitPortFree(ap netip.AddrPort) error {
	deadline := time.Now().Add(portWait)
	for {
		probe, err := listenUDP(ap, false)
		if err == nil {
			return probe.Close()
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return fmt.Errorf("service: %s: %w (a process running the device itself, or one a previous service served that has not noticed it is gone)", ap, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newDevice starts steering ap (whose port waitPortFree found free): it
// opens the group's first socket, the service's own, which receives what
// no process owns.
func (s *Server) newDevice(ap netip.AddrPort, t *slotTable) (*device, error) {
	d := &device{addr: ap, slots: t, claims: make(map[uint64]*client)}
	if _, err := d.addSocket(); err != nil {
		return nil, err
	}
	if err := d.steer(); err != nil {
		d.close()
		return nil, err
	}
	s.wg.Add(1)
	go s.drainUnrouted(d, d.socks[0].conn)
	return d, nil
}

// listenUDP binds a UDP socket on ap, in its reuseport group if reuse.
func listenUDP(ap netip.AddrPort, reuse bool) (*net.UDPConn, error) {
	network := "udp6"
	if ap.Addr().Is4() {
		network = "udp4"
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			if reuse {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}
		}); err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// addSocket binds one more socket into d's group; its index is the
// number of sockets before it.
func (d *device) addSocket() (*groupSock, error) {
	if len(d.socks) > MaxSlot {
		return nil, fmt.Errorf("service: %s has %d sockets, the most", d.addr, len(d.socks))
	}
	c, err := listenUDP(d.addr, true)
	if err != nil {
		return nil, fmt.Errorf("service: %s: %w", d.addr, err)
	}
	gs := &groupSock{conn: c, fd: -1, index: uint32(len(d.socks))}
	if gs.index > 0 {
		// Keep a descriptor of the socket and let go of the conn, which
		// takes it out of the runtime's poller.
		var derr error
		if rc, err := c.SyscallConn(); err != nil {
			derr = err
		} else if cerr := rc.Control(func(fd uintptr) { gs.fd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
			derr = cerr
		}
		c.Close()
		if derr != nil {
			return nil, fmt.Errorf("service: %s: %w", d.addr, derr)
		}
		gs.conn = nil
	}
	d.socks = append(d.socks, gs)
	return gs, nil
}

// freeSocket returns a parked socket, emptied of what was queued for its
// last process, or a new one.
func (d *device) freeSocket() (*groupSock, error) {
	for _, gs := range d.socks[1:] {
		if gs.owner == nil {
			gs.drain()
			return gs, nil
		}
	}
	return d.addSocket()
}

// drain discards what is queued on a parked socket.
func (gs *groupSock) drain() {
	buf := make([]byte, link.MaxDatagram)
	gs.control(func(fd int) {
		for range 1 << 16 {
			if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != nil {
				return
			}
		}
	})
}

func (gs *groupSock) control(f func(fd int)) {
	if gs.conn == nil {
		f(gs.fd)
	} else if rc, err := gs.conn.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { f(int(fd)) })
	}
}

// steer compiles d's routing into the group's BPF program.
func (d *device) steer() error {
	st := &steering{bySlot: make(map[uint8]uint32), claims: make(map[uint64]uint32)}
	for _, c := range d.clients {
		st.bySlot[c.slot] = c.sock.index
	}
	if len(d.clients) > 0 {
		st.oldest = d.clients[0].sock.index
	}
	for id, c := range d.claims {
		st.claims[id] = c.sock.index
	}
	prog, err := st.program()
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	d.socks[0].control(func(fd int) {
		err = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fprog)
	})
	if err != nil {
		return fmt.Errorf("service: %s: SO_ATTACH_REUSEPORT_CBPF: %w", d.addr, err)
	}
	return nil
}

// drainUnrouted reads the service's own socket: packets for no process,
// counted and dropped.
func (s *Server) drainUnrouted(d *device, c *net.UDPConn) {
	defer s.wg.Done()
	buf := make([]byte, link.MaxDatagram)
	for {
		if _, err := c.Read(buf); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		d.unrouted.Add(1)
	}
}

func (d *device) close() {
	for _, gs := range d.socks {
		if gs.conn != nil {
			gs.conn.Close()
		} else {
			unix.Close(gs.fd)
		}
	}
}

// detach forgets a client: its slot goes into quarantine, its claims are
// released, its socket is parked, and the address's sockets close with its
// last client.
func (s *Server) detach(cl *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	cl.sock.owner = nil
	if s.closed {
		return // the slots stay attached in the state file
	}
	d.slots.give(s.cfg.Now(), cl.slot)
	if err := d.steer(); err != nil {
		s.log.Error("service: cannot steer", "addr", d.addr, "err", err)
	}
	s.log.Info("service: detached", "addr", d.addr, "slot", cl.slot, "pid", cl.pid)
	s.closeIfIdle(d)
	s.saveLocked()
}

// closeIfIdle closes d's sockets when no client is left.
func (s *Server) closeIfIdle(d *device) {
	if len(d.clients) == 0 && s.devs[d.addr] == d {
		delete(s.devs, d.addr)
		d.close()
		s.log.Info("service: stopped steering", "addr", d.addr)
	}
}

func (s *Server) claim(cl *client, id uint64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := cl.dev
	if o := d.claims[id]; o != nil && o != cl {
		return newReply(statusBusy, cl.slot, 0, fmt.Sprintf("service ID %#x is in use by process %d", id, o.pid))
	}
	d.claims[id] = cl
	if err := d.steer(); err != nil {
		delete(d.claims, id)
		return newReply(statusError, cl.slot, 0, err.Error())
	}
	s.log.Info("service: listen", "addr", d.addr, "service_id", fmt.Sprintf("%#x", id), "slot", cl.slot, "pid", cl.pid)
	return newReply(statusOK, cl.slot, 0, "")
}

func (s *Server) release(cl *client, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl.dev.claims[id] == cl {
		delete(cl.dev.claims, id)
		if err := cl.dev.steer(); err != nil {
			s.log.Error("service: cannot steer", "addr", cl.dev.addr, "err", err)
		}
	}
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

// AddressStats are one address's counters.
type AddressStats struct {
	Addr     netip.AddrPort
	Clients  int
	Sockets  int    // in the reuseport group, the service's own included
	Unrouted uint64 // packets for no process (a free slot, QP0, malformed)
}

// Stats returns the counters of each address the service steers.
func (s *Server) Stats() []AddressStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []AddressStats
	for _, d := range s.devs {
		out = append(out, AddressStats{Addr: d.addr, Clients: len(d.clients), Sockets: len(d.socks), Unrouted: d.unrouted.Load()})
	}
	return out
}
