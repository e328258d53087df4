package link

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of UDPOptions.
const (
	// DefaultMaxSourcePorts is the default cap on extra source-port sockets
	// per UDP link: enough ports for ECMP to spread a device's QPs, few
	// enough that the sockets' kernel state stays in cache when many QPs
	// send in turn (with 256, WRITEs spread over 256 QP pairs ran 7 %
	// slower than over 8; with 32, as fast).
	DefaultMaxSourcePorts = 32
	// DefaultSocketBuffer is the default SO_RCVBUF/SO_SNDBUF size of the
	// main socket.
	DefaultSocketBuffer = 8 << 20
)

// UDPOptions tune a UDP link. The zero value gives the production settings.
type UDPOptions struct {
	// Port is the local UDP port to receive on. 0 means RoCEPort (4791).
	// Other values are for tests: real RoCEv2 peers send only to 4791.
	Port uint16
	// MaxSourcePorts caps the number of extra send-only sockets that
	// SourcePort may open. 0 means DefaultMaxSourcePorts; a negative value
	// disables them, so every datagram leaves from Port.
	MaxSourcePorts int
	// SocketBuffer is the SO_RCVBUF and SO_SNDBUF size asked for the main
	// socket. 0 means DefaultSocketBuffer; a negative value keeps the
	// kernel's default. The kernel may grant less (net.core.rmem_max) unless
	// the process may use SO_RCVBUFFORCE.
	SocketBuffer int
	// GSO says when Send may hand runs of datagrams to the kernel as one
	// UDP GSO send (see GSOMode). The zero value is GSOAuto.
	GSO GSOMode
	// GRO turns UDP_GRO on for the receiving socket (Linux), so that the
	// kernel may deliver a run of datagrams of one flow, such as a peer's
	// GSO send, as one coalesced datagram (Datagram.SegSize). Every buffer
	// passed to Receive must then hold MaxDatagram bytes, or a coalesced
	// datagram that does not fit is dropped. The environment variable
	// RDMA_GO_GRO=off turns it off.
	GRO bool
	// SendOnly makes a link that only sends: it binds an ephemeral port
	// (Port is ignored) and discards anything that arrives, and LocalAddr
	// reports that port. A soft device behind the host service sends
	// through one (RoCEv2 leaves the source port free), which outlives
	// the service's socket it receives on.
	SendOnly bool
	// Conn, when set, is an already bound socket to use as the link's
	// main socket instead of binding one (Port is then its port): a soft
	// device behind the host service gets its socket, one of a
	// SO_REUSEPORT group on the address, from the service. The link
	// sets its options and owns it from then on.
	Conn *net.UDPConn
	// Logger receives debug logs (socket options that could not be set,
	// source ports that could not be bound, send drops). nil means
	// slog.Default().
	Logger *slog.Logger
}

// MaxDatagram is the largest UDP payload, and the receive buffer size that
// UDPOptions.GRO needs.
const MaxDatagram = 65535

// GSOMode selects when a UDP link sends runs of datagrams with UDP generic
// segmentation offload (UDP_SEGMENT, Linux 4.18 and later): consecutive
// datagrams of a Send batch that leave from the same socket for the same
// destination and have the same length (the last may be shorter) go down as
// one super-datagram that the kernel, or the NIC, cuts back into the same
// datagrams. Loopback delivers it to a GRO receiver whole.
//
// The IPv4 ID is covered by the ICRC (spec §1.7), and segmentation gives the
// segments consecutive IDs: Linux's software segmentation (inet_gso_segment)
// numbers them from the super-datagram's ID, which is 0 on our unconnected
// DF sockets, so segment k carries ID k. Send therefore rewrites the ICRC of
// IPv4 segment k from ID 0 to ID k (wire.RetagICRC). This was checked on
// the wire (TestUDPGSOWireIPv4: lo in a network namespace with
// tx-udp-segmentation off, read with a raw socket; Linux 6.18) and
// against Linux rxe over the lab's tap. A NIC segmenting in hardware chooses
// the IDs itself, which is why GSOAuto uses GSO for IPv4 only on loopback.
// GSO also needs UDP checksums on (the kernel refuses GSO on a socket with
// SO_NO_CHECK), so a link that may use GSO sends non-zero checksums, which
// rxe and the kernel accept.
type GSOMode uint8

const (
	// GSOAuto follows the environment variable RDMA_GO_GSO (on, off or
	// auto) when it is set; otherwise GSO is used for IPv6, which has no
	// IP ID, and for IPv4 on a loopback address.
	GSOAuto GSOMode = iota
	// GSOOff never uses GSO (checksum 0 on every datagram, as rxe sends).
	GSOOff
	// GSOOn uses GSO whenever the kernel supports it, IPv4 included.
	GSOOn
)

// gsoWanted resolves GSOAuto for a link on addr.
func gsoWanted(m GSOMode, addr netip.Addr) bool {
	if m == GSOAuto {
		switch strings.ToLower(os.Getenv("RDMA_GO_GSO")) {
		case "off", "0", "false", "no":
			m = GSOOff
		case "on", "1", "true", "yes":
			m = GSOOn
		}
	}
	switch m {
	case GSOOff:
		return false
	case GSOOn:
		return true
	}
	return !addr.Is4() || addr.IsLoopback()
}

// groWanted applies RDMA_GO_GRO to UDPOptions.GRO.
func groWanted(on bool) bool {
	switch strings.ToLower(os.Getenv("RDMA_GO_GRO")) {
	case "off", "0", "false", "no":
		return false
	}
	return on
}

// UDPStats counts what a UDP link has done since it was opened.
type UDPStats struct {
	// Sent counts datagrams the kernel accepted for transmission.
	Sent uint64
	// SendDrops counts datagrams dropped on send: socket buffer full
	// (EAGAIN, ENOBUFS), no route, too big for the path MTU, or a destination
	// of the wrong address family.
	SendDrops uint64
	// Received counts datagrams returned by Receive.
	Received uint64
	// ReceiveDrops counts received datagrams discarded because they did not
	// fit the buffer given to Receive.
	ReceiveDrops uint64
	// SourcePorts is the number of extra source-port sockets now open.
	SourcePorts int
	// GSOSends counts super-datagrams sent with GSO, and GSOSegments the
	// datagrams they carried (also counted in Sent).
	GSOSends, GSOSegments uint64
	// Coalesced counts received datagrams that held several (GRO), and
	// Received counts each of the datagrams they held.
	Coalesced uint64
}

// UDP is the real Link: a UDP socket bound to one local address and port
// (4791 in production) with batched I/O (recvmmsg/sendmmsg on Linux), plus
// lazily opened send-only sockets for per-QP source ports (see SourcePort).
//
// On IPv4 every socket sets IP_MTU_DISCOVER=IP_PMTUDISC_DO and is never
// connected, so Linux sends each datagram with DF set and IP ID 0, which is
// what the ICRC of a sent packet must be computed with (segments of a GSO
// send get IDs 0, 1, 2, ...; see GSOMode). UDP checksums are sent as 0
// (SO_NO_CHECK, UDP_NO_CHECK6_TX) like rdma_rxe, except on a link that may
// use GSO, and IPv6 datagrams with checksum 0 are accepted
// (UDP_NO_CHECK6_RX). With UDPOptions.GRO the kernel may coalesce received
// datagrams (Datagram.SegSize).
//
// On Linux the sockets are used through raw descriptors, outside Go's
// network poller (see sysState in udp_linux.go), and UDP is a Poller.
//
// UDP implements Link: Send is safe for concurrent use; Receive must be
// called from one goroutine at a time (concurrent calls are serialized).
type UDP struct {
	local  netip.AddrPort
	is4    bool
	scope  uint32 // IPv6 scope ID of a link-local local address
	log    *slog.Logger
	maxSrc int

	gso atomic.Bool // Send may use GSO (cleared if the kernel refuses it)
	gro bool        // UDP_GRO is on for the main socket
	// sendOnly: UDPOptions.SendOnly (the main socket discards what arrives)
	sendOnly bool

	main *udpSock
	// extra maps a source port to its send-only socket. It is copied on
	// write (at most maxSrc times) so Send can read it without locking.
	extra atomic.Pointer[portSocks]

	// mu serialises SourcePort's copy-on-write of extra with Close (which
	// sets closed under it) and guards alias, the port given for each
	// port that could not be bound.
	mu    sync.Mutex
	alias map[uint16]uint16

	closed atomic.Bool
	once   sync.Once

	recvMu sync.Mutex
	recv   recvState // OS-specific receive scratch space, guarded by recvMu
	// fdMu is read-held while a detached socket's descriptor is in use;
	// Close write-locks it to close them.
	fdMu sync.RWMutex
	sys  sysState  // OS-specific state of the main socket
	poll pollState // TryReceive's (Linux)

	sent, sendDrops, received, recvDrops atomic.Uint64
	gsoSends, gsoSegs, coalesced         atomic.Uint64
}

// udpSock is one bound UDP socket.
type udpSock struct {
	conn *net.UDPConn // nil once detach has taken the socket over (Linux)
	rc   syscall.RawConn
	fd   int // the detached socket's descriptor (Linux), or -1
	port uint16
}

var _ Link = (*UDP)(nil)

// ListenUDP opens a UDP link on addr:4791 (or addr:opts.Port). addr must be
// a specific unicast address of this host: the link binds it exactly, so
// every received datagram was sent to it. An IPv4-mapped IPv6 address is
// treated as IPv4; an IPv6 address gets an IPv6-only socket.
//
// If the port is taken the error wraps syscall.EADDRINUSE and says so.
func ListenUDP(addr netip.Addr, opts UDPOptions) (*UDP, error) {
	if !addr.IsValid() {
		return nil, errors.New("link: ListenUDP: invalid address")
	}
	addr = addr.Unmap()
	if addr.IsUnspecified() || addr.IsMulticast() {
		return nil, fmt.Errorf("link: ListenUDP: %s is not a unicast address of this host; bind the device to a specific address", addr)
	}
	port := opts.Port
	switch {
	case opts.Conn != nil:
		port = uint16(opts.Conn.LocalAddr().(*net.UDPAddr).Port)
	case opts.SendOnly:
		port = 0
	case port == 0:
		port = RoCEPort
	}
	u := &UDP{
		sendOnly: opts.SendOnly,
		local:    netip.AddrPortFrom(addr, port),
		is4:      addr.Is4(),
		log:      opts.Logger,
		maxSrc:   opts.MaxSourcePorts,
		alias:    make(map[uint16]uint16),
	}
	if u.log == nil {
		u.log = slog.Default()
	}
	switch {
	case u.maxSrc == 0:
		u.maxSrc = DefaultMaxSourcePorts
	case u.maxSrc < 0:
		u.maxSrc = 0
	}
	if !u.is4 && addr.Zone() != "" {
		ifi, err := net.InterfaceByName(addr.Zone())
		if err != nil {
			return nil, fmt.Errorf("link: ListenUDP %s: zone: %w", addr, err)
		}
		u.scope = uint32(ifi.Index)
	}
	buf := opts.SocketBuffer
	if buf == 0 {
		buf = DefaultSocketBuffer
	}
	u.gso.Store(gsoWanted(opts.GSO, addr))
	u.gro = groWanted(opts.GRO)
	var s *udpSock
	var err error
	if opts.Conn != nil {
		s, err = u.adopt(opts.Conn, port, buf)
	} else {
		s, err = u.open(port, buf, false)
	}
	if err != nil {
		return nil, err
	}
	if port == 0 {
		s.port = uint16(s.conn.LocalAddr().(*net.UDPAddr).Port)
		u.local = netip.AddrPortFrom(addr, s.port)
	}
	u.main = s
	if err := u.sysInit(); err != nil {
		s.conn.Close()
		return nil, fmt.Errorf("link: UDP %s: %w", u.local, err)
	}
	u.recv.init(maxBatch, u.gro)
	u.extra.Store(&portSocks{})
	return u, nil
}

// open binds a socket on the link's address and the given port with the
// RoCE socket options. sendOnly sockets get a small receive buffer and a
// filter that discards anything sent to them.
func (u *UDP) open(port uint16, buf int, sendOnly bool) (*udpSock, error) {
	ap := netip.AddrPortFrom(u.local.Addr(), port)
	network := "udp6"
	if u.is4 {
		network = "udp4"
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			o := sockOpts{is4: u.is4, buf: buf, sendOnly: sendOnly || u.sendOnly, gso: u.gso.Load(), gro: u.gro && !sendOnly}
			var gso bool
			gso, err = setSocketOptions(fd, o, u.log)
			if o.gso && !gso {
				// No GSO in this kernel: the link sends each datagram
				// on its own (and this socket has checksums off).
				u.gso.Store(false)
			}
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	pc, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, bindError(ap, err)
	}
	conn := pc.(*net.UDPConn)
	if portableBuffers && buf > 0 {
		if err := conn.SetReadBuffer(buf); err != nil {
			u.log.Debug("link: cannot set socket option", "option", "SO_RCVBUF", "err", err)
		}
		if err := conn.SetWriteBuffer(buf); err != nil {
			u.log.Debug("link: cannot set socket option", "option", "SO_SNDBUF", "err", err)
		}
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("link: UDP %s: %w", ap, err)
	}
	k := &udpSock{conn: conn, rc: rc, fd: -1, port: port}
	if sendOnly { // the main socket is detached by sysInit
		if err := detach(k); err != nil {
			conn.Close()
			return nil, fmt.Errorf("link: UDP %s: %w", ap, err)
		}
	}
	return k, nil
}

// adopt makes conn, bound to the link's address and port, the main socket,
// with the options open sets.
func (u *UDP) adopt(conn *net.UDPConn, port uint16, buf int) (*udpSock, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("link: UDP %s: %w", u.local, err)
	}
	var serr error
	if cerr := rc.Control(func(fd uintptr) {
		o := sockOpts{is4: u.is4, buf: buf, gso: u.gso.Load(), gro: u.gro}
		var gso bool
		gso, serr = setSocketOptions(fd, o, u.log)
		if o.gso && !gso {
			u.gso.Store(false)
		}
	}); cerr != nil {
		return nil, fmt.Errorf("link: UDP %s: %w", u.local, cerr)
	}
	if serr != nil {
		return nil, fmt.Errorf("link: UDP %s: %w", u.local, serr)
	}
	if portableBuffers && buf > 0 {
		conn.SetReadBuffer(buf)
		conn.SetWriteBuffer(buf)
	}
	return &udpSock{conn: conn, rc: rc, fd: -1, port: port}, nil
}

// sockOpts are the options setSocketOptions applies.
type sockOpts struct {
	is4      bool
	buf      int  // SO_RCVBUF/SO_SNDBUF; <= 0 keeps the default
	sendOnly bool // a source-port socket: nothing is received on it
	gso      bool // the link may send with UDP GSO: keep UDP checksums on
	gro      bool // turn UDP_GRO on
}

// bindError explains a failed bind.
func bindError(ap netip.AddrPort, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("link: UDP %s is already in use (another rdma-go device or the kernel's rdma_rxe owns it); bind the device to another address, e.g. another 127.0.0.x: %w", ap, err)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("link: UDP %s: the address is not assigned to any interface of this host; use one of its own addresses: %w", ap, err)
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		return fmt.Errorf("link: UDP %s: permission denied: %w", ap, err)
	}
	return fmt.Errorf("link: UDP %s: %w", ap, err)
}

// LocalAddr returns the address and port the link receives on.
func (u *UDP) LocalAddr() netip.AddrPort { return u.local }

// MaxBatch returns the number of datagrams one system call moves.
func (u *UDP) MaxBatch() int { return maxBatch }

// SourcePort returns the UDP source port that datagrams sent with Src port
// want will carry. The first time a port is asked for, the link tries to bind
// a send-only socket on its address and that port. If the port is taken, or
// the cap of UDPOptions.MaxSourcePorts is reached, the datagrams leave from
// one of the first source-port sockets opened instead (chosen by want, so
// QPs stay spread over a few ports), and from the link's own port only
// when none is open (or the link is closed). Results are stable: the port
// given for a want is given again, except after Close.
//
// The link's own socket is the one Receive waits on, and on Linux every
// datagram it sends wakes that wait's epoll entry when the kernel frees
// it; sending from the send-only sockets spares that, and keeps the
// source ports varied, as ECMP wants.
func (u *UDP) SourcePort(want uint16) uint16 {
	own := u.local.Port()
	if want == 0 || want == own {
		return own
	}
	if u.extra.Load().get(want) != nil {
		return want
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	cur := u.extra.Load()
	if cur.get(want) != nil {
		return want
	}
	if u.closed.Load() {
		return own
	}
	if p, ok := u.alias[want]; ok {
		return p
	}
	if len(cur.all) >= u.maxSrc {
		// The cap is reached, so the open ports no longer change.
		return u.sharedPort(want)
	}
	s, err := u.open(want, -1, true)
	if err != nil {
		p := u.sharedPort(want)
		u.alias[want] = p
		u.log.Debug("link: source port unavailable, sending from another",
			"local", u.local, "port", want, "from", p, "err", err)
		return p
	}
	u.extra.Store(cur.with(want, s))
	u.log.Debug("link: opened source-port socket", "local", u.local, "port", want)
	return want
}

// sharedSourcePorts is how many of the first source-port sockets carry
// the datagrams of ports that got none: few enough that their kernel state
// stays in cache when many QPs send in turn (see DefaultMaxSourcePorts).
const sharedSourcePorts = DefaultMaxSourcePorts

// sharedPort returns the open source port that want shares, or the link's
// own when none is open. u.mu is held.
func (u *UDP) sharedPort(want uint16) uint16 {
	all := u.extra.Load().all
	if len(all) == 0 {
		return u.local.Port()
	}
	return all[int(want)%min(len(all), sharedSourcePorts)].port
}

// Send transmits the datagrams in order. Each leaves from the socket bound
// to its Src.Port() when SourcePort opened one, and from the link's own
// socket otherwise. Datagrams the kernel refuses are dropped and counted in
// Stats; the error is ErrClosed after Close, or an unexpected socket error.
func (u *UDP) Send(batch []Datagram) error {
	if u.closed.Load() {
		return ErrClosed
	}
	extra := u.extra.Load()
	for i := 0; i < len(batch); {
		port := batch[i].Src.Port()
		s := u.sockFor(port, extra)
		j := i + 1
		// A run of one QP's packets shares a port: no map look-up each.
		for j < len(batch) && (batch[j].Src.Port() == port || u.sockFor(batch[j].Src.Port(), extra) == s) {
			j++
		}
		if err := u.sendOn(s, batch[i:j]); err != nil {
			if u.closed.Load() || errors.Is(err, net.ErrClosed) {
				return ErrClosed
			}
			return err
		}
		i = j
	}
	return nil
}

func (u *UDP) sockFor(port uint16, extra *portSocks) *udpSock {
	if port == 0 || port == u.main.port {
		return u.main
	}
	if s := extra.get(port); s != nil {
		return s
	}
	return u.main
}

// portSocks is the table of a link's source-port sockets: a two-level
// array indexed by the port's high and low bytes (a map look-up per send
// cost more than building the packet's header), and the sockets in the
// order they were opened. It is never changed once published: with
// returns a copy.
type portSocks struct {
	hi  [256]*[256]*udpSock
	all []*udpSock
}

// get returns the socket bound to port, or nil.
func (p *portSocks) get(port uint16) *udpSock {
	if t := p.hi[port>>8]; t != nil {
		return t[port&0xFF]
	}
	return nil
}

// with returns a copy of p that also maps port to s.
func (p *portSocks) with(port uint16, s *udpSock) *portSocks {
	next := &portSocks{hi: p.hi, all: append(p.all[:len(p.all):len(p.all)], s)}
	t := new([256]*udpSock)
	if old := p.hi[port>>8]; old != nil {
		*t = *old
	}
	t[port&0xFF] = s
	next.hi[port>>8] = t
	return next
}

// Receive fills up to len(batch) datagrams, blocking until at least one
// arrives, the read deadline passes, or the link is closed. Dst of each is
// the link's local address. A datagram longer than cap(batch[i].Buf) is
// discarded and counted in Stats.ReceiveDrops.
func (u *UDP) Receive(batch []Datagram) (int, error) {
	if u.closed.Load() {
		return 0, ErrClosed
	}
	if len(batch) == 0 {
		return 0, nil
	}
	u.recvMu.Lock()
	defer u.recvMu.Unlock()
	n, err := u.receive(batch)
	if err != nil {
		if u.closed.Load() || errors.Is(err, net.ErrClosed) {
			return 0, ErrClosed
		}
		return 0, fmt.Errorf("link: UDP %s: receive: %w", u.local, err)
	}
	return n, nil
}

// SetReadDeadline sets a deadline for Receive, as net.Conn does: a Receive
// blocked past t returns an error that wraps os.ErrDeadlineExceeded. The
// zero time means no deadline. It is meant for tests and shutdown paths.
func (u *UDP) SetReadDeadline(t time.Time) error {
	if err := u.setReadDeadline(t); err != nil {
		if u.closed.Load() || errors.Is(err, net.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("link: UDP %s: %w", u.local, err)
	}
	return nil
}

// Stats returns the link's counters.
func (u *UDP) Stats() UDPStats {
	return UDPStats{
		Sent:         u.sent.Load(),
		SendDrops:    u.sendDrops.Load(),
		Received:     u.received.Load(),
		ReceiveDrops: u.recvDrops.Load(),
		SourcePorts:  len(u.extra.Load().all),
		GSOSends:     u.gsoSends.Load(),
		GSOSegments:  u.gsoSegs.Load(),
		Coalesced:    u.coalesced.Load(),
	}
}

// Close closes all of the link's sockets and unblocks Receive. It is
// idempotent; later Send and Receive calls return ErrClosed.
func (u *UDP) Close() error {
	var err error
	u.once.Do(func() {
		u.mu.Lock()
		u.closed.Store(true)
		extra := u.extra.Load().all
		u.mu.Unlock()
		errs := []error{u.unblock()} // outside fdMu: it waits for a Receive to return
		u.fdMu.Lock()                // no send or receive is using a descriptor
		errs = append(errs, u.closeMain())
		for _, s := range extra {
			errs = append(errs, closeSock(s))
		}
		u.fdMu.Unlock()
		if e := errors.Join(errs...); e != nil {
			err = fmt.Errorf("link: UDP %s: close: %w", u.local, e)
		}
	})
	return err
}

// dropErrno reports whether a send error means the datagram was refused by
// the network (dropped, like a NIC would) rather than the socket being
// broken, and whether the condition is socket-wide (so the rest of the
// batch would be refused too).
func dropErrno(e syscall.Errno) (drop, wide bool) {
	switch e {
	case syscall.EAGAIN, syscall.ENOBUFS, syscall.ENOMEM:
		return true, true
	case syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
		syscall.EHOSTDOWN, syscall.ENETDOWN, syscall.EMSGSIZE, syscall.EPERM,
		syscall.EACCES, syscall.EADDRNOTAVAIL, syscall.EINVAL, syscall.EAFNOSUPPORT:
		return true, false
	}
	return false, false
}

// countDrop records n dropped datagrams and logs why at debug level.
func (u *UDP) countDrop(n int, why error) {
	u.sendDrops.Add(uint64(n))
	if u.log.Enabled(context.Background(), slog.LevelDebug) {
		u.log.Debug("link: send dropped", "local", u.local, "n", n, "err", why)
	}
}

// errBadDst is the reason logged for a datagram whose destination the link
// cannot reach (wrong address family, port 0).
var errBadDst = errors.New("destination not reachable from this link's address family")

// dstOK reports whether d can be sent from a link of the given family.
func dstOK(dst netip.AddrPort, is4 bool) bool {
	a := dst.Addr()
	if !a.IsValid() || dst.Port() == 0 {
		return false
	}
	if is4 {
		return a.Unmap().Is4()
	}
	return a.Is6() && !a.Is4In6()
}
