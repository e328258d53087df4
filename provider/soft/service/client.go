//go:build linux

package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-go/rdma-go/link"
)

// ErrNoService is returned by Attach when no service answers on the
// socket: the caller runs the device in its own process instead.
var ErrNoService = errors.New("service: no host service")

// Probe reports whether a service answers on path: nil if one does, an
// error wrapping ErrNoService if nothing listens there (no socket, or a
// dead service's), another error otherwise.
func Probe(path string) error {
	c, err := net.DialTimeout("unixpacket", path, 2*time.Second)
	if err != nil {
		return dialError(path, err)
	}
	return c.Close()
}

func dialError(path string, err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w at %s", ErrNoService, path)
	}
	return fmt.Errorf("service: %w", err)
}

// AttachOptions configure a Client.
type AttachOptions struct {
	// Port is the UDP port of the address (0: 4791).
	Port uint16
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// OnDown is called when the service goes away (the port is down until
	// OnUp); OnUp when the client has attached again, with its slot,
	// which may differ from the one before.
	OnDown func()
	OnUp   func(slot uint8)
	// UDP tunes the socket (Conn and Port are set by Attach).
	UDP link.UDPOptions
}

// Client is a device's attachment to the host service: a link.Link (and
// link.Poller) that receives on the socket of the address's reuseport
// group that the service gave this process, to which the kernel steers the
// packets for the process's slot, and sends from a socket of its own on an
// ephemeral port (RoCEv2 leaves the source port free), which outlives the
// service: the source ports QPs chose stay valid when the service comes
// back. It also claims the CM's service IDs (ibcm.ServiceClaims).
type Client struct {
	path string
	addr netip.AddrPort
	opts AttachOptions
	log  *slog.Logger
	guid uint64
	send *link.UDP

	slot   atomic.Uint32
	closed atomic.Bool
	done   chan struct{}

	// mu guards the control connection, the link and up, which is
	// closed when a link is there (and replaced when it goes), and the
	// claims. fast is the link too, for the receive paths' reads.
	mu     sync.Mutex
	ctrl   *net.UnixConn
	link   *link.UDP
	fast   atomic.Pointer[link.UDP]
	up     chan struct{}
	claims map[uint64]struct{}
	// ctrlMu serializes control requests; replies come from the reader
	// goroutine, the connection's only reader.
	ctrlMu  sync.Mutex
	replies chan reply
}

var (
	_ link.Link   = (*Client)(nil)
	_ link.Poller = (*Client)(nil)
)

// Attach attaches a device on addr to the service listening on path. It
// returns an error wrapping ErrNoService when nothing listens there.
func Attach(ctx context.Context, path string, addr netip.Addr, opts AttachOptions) (*Client, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	port := opts.Port
	if port == 0 {
		port = link.RoCEPort
	}
	c := &Client{path: path, addr: netip.AddrPortFrom(addr.Unmap(), port), opts: opts, log: opts.Logger,
		done: make(chan struct{}), up: make(chan struct{}), claims: make(map[uint64]struct{})}
	ctrl, l, r, err := c.connect(ctx, 0)
	if err != nil {
		return nil, err
	}
	uo := opts.UDP
	uo.SendOnly, uo.Conn = true, nil
	if uo.Logger == nil {
		uo.Logger = opts.Logger
	}
	if c.send, err = link.ListenUDP(addr, uo); err != nil {
		ctrl.Close()
		l.Close()
		return nil, fmt.Errorf("service: send socket: %w", err)
	}
	c.guid = r.guid()
	c.install(ctrl, l, r.slot())
	return c, nil
}

// connect attaches to the service, asking for slot want, and returns the
// control connection, the link over the socket the service gave, and the
// service's reply.
func (c *Client) connect(ctx context.Context, want uint8) (*net.UnixConn, *link.UDP, reply, error) {
	var d net.Dialer
	cc, err := d.DialContext(ctx, "unixpacket", c.path)
	if err != nil {
		return nil, nil, nil, dialError(c.path, err)
	}
	ctrl := cc.(*net.UnixConn)
	fail := func(err error) (*net.UnixConn, *link.UDP, reply, error) {
		ctrl.Close()
		return nil, nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		ctrl.SetDeadline(dl)
	}
	if _, err := ctrl.Write(newAttachReq(c.addr, want, os.Getpid())); err != nil {
		return fail(fmt.Errorf("service: %w", err))
	}
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := ctrl.ReadMsgUnix(buf, oob)
	if err != nil {
		return fail(fmt.Errorf("service: %w", err))
	}
	fd := -1
	if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(cms) == 1 {
		if fds, err := unix.ParseUnixRights(&cms[0]); err == nil && len(fds) == 1 {
			fd = fds[0]
		}
	}
	r := reply(buf[:n])
	switch {
	case n < replyLen || r[0] != kindReply:
		err = errors.New("service: malformed reply")
	case r.status() != statusOK:
		err = fmt.Errorf("service: attach %s: %s", c.addr, r.text())
	case fd < 0:
		err = errors.New("service: the reply carries no socket")
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return fail(err)
	}
	f := os.NewFile(uintptr(fd), "rdma-go-service-socket")
	pc, err := net.FilePacketConn(f)
	f.Close()
	if err != nil {
		return fail(fmt.Errorf("service: %w", err))
	}
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return fail(errors.New("service: the socket given is not UDP"))
	}
	uo := c.opts.UDP
	uo.Conn, uo.GRO, uo.SendOnly = uc, true, false
	if uo.Logger == nil {
		uo.Logger = c.log
	}
	l, err := link.ListenUDP(c.addr.Addr(), uo)
	if err != nil {
		uc.Close()
		return fail(err)
	}
	ctrl.SetDeadline(time.Time{})
	return ctrl, l, r, nil
}

// install makes a new attachment current and starts reading its control
// connection.
func (c *Client) install(ctrl *net.UnixConn, l *link.UDP, slot uint8) {
	c.slot.Store(uint32(slot))
	replies := make(chan reply, 1)
	c.mu.Lock()
	c.ctrl, c.link, c.replies = ctrl, l, replies
	c.fast.Store(l)
	close(c.up)
	c.mu.Unlock()
	go c.readControl(ctrl, replies)
}

// readControl reads the control connection: the replies to requests, and
// its end, which means the service is gone.
func (c *Client) readControl(ctrl *net.UnixConn, replies chan reply) {
	for {
		buf := make([]byte, 512)
		n, err := ctrl.Read(buf)
		if err != nil || n == 0 {
			close(replies)
			c.lost(ctrl, err)
			return
		}
		if n >= replyLen && buf[0] == kindReply {
			select {
			case replies <- reply(buf[:n]):
			default: // nobody asked: drop it
			}
		}
	}
}

// lost handles the end of the control connection ctrl: unless the client
// was closed, it closes the socket (so that a new service finds the port
// free), reports the port down, waits for a service and attaches again.
func (c *Client) lost(ctrl *net.UnixConn, err error) {
	c.mu.Lock()
	if c.ctrl != ctrl {
		c.mu.Unlock()
		return
	}
	l := c.link
	c.ctrl, c.link, c.up = nil, nil, make(chan struct{})
	c.fast.Store(nil)
	c.mu.Unlock()
	ctrl.Close()
	if l != nil {
		l.Close()
	}
	if c.closed.Load() {
		return
	}
	c.log.Warn("service: lost the host service; the port is down until it is back", "addr", c.addr, "err", err)
	if c.opts.OnDown != nil {
		c.opts.OnDown()
	}
	wait := 10 * time.Millisecond
	for {
		select {
		case <-c.done:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), portWait+5*time.Second)
		nctrl, nl, r, err := c.connect(ctx, c.Slot())
		cancel()
		if err != nil {
			c.log.Debug("service: attach again", "addr", c.addr, "err", err)
			continue
		}
		if c.closed.Load() {
			nctrl.Close()
			nl.Close()
			return
		}
		c.install(nctrl, nl, r.slot())
		c.mu.Lock()
		ids := make([]uint64, 0, len(c.claims))
		for id := range c.claims {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		for _, id := range ids {
			if err := c.request(newIDMsg(kindClaim, id)); err != nil {
				c.log.Warn("service: a listen was lost with the service", "addr", c.addr, "service_id", fmt.Sprintf("%#x", id), "err", err)
			}
		}
		c.log.Info("service: attached again", "addr", c.addr, "slot", c.Slot())
		if c.opts.OnUp != nil {
			c.opts.OnUp(c.Slot())
		}
		return
	}
}

// Slot returns the client's slot (see QPNRange).
func (c *Client) Slot() uint8 { return uint8(c.slot.Load()) }

// GUID returns the node GUID of the service's device on the address, the
// same for every process attached to it.
func (c *Client) GUID() uint64 { return c.guid }

// Claim reserves a service ID for this process (ibcm.ServiceClaims).
func (c *Client) Claim(id uint64) error {
	c.mu.Lock()
	c.claims[id] = struct{}{}
	c.mu.Unlock()
	err := c.request(newIDMsg(kindClaim, id))
	if err != nil {
		c.mu.Lock()
		delete(c.claims, id)
		c.mu.Unlock()
	}
	return err
}

// Release gives a service ID back (ibcm.ServiceClaims).
func (c *Client) Release(id uint64) {
	c.mu.Lock()
	delete(c.claims, id)
	c.mu.Unlock()
	if err := c.request(newIDMsg(kindRelease, id)); err != nil {
		c.log.Debug("service: release", "service_id", id, "err", err)
	}
}

// request sends one control request and waits for its reply.
func (c *Client) request(m []byte) error {
	c.ctrlMu.Lock()
	defer c.ctrlMu.Unlock()
	c.mu.Lock()
	ctrl, replies := c.ctrl, c.replies
	c.mu.Unlock()
	if ctrl == nil {
		return errors.New("service: not attached (the host service is gone)")
	}
	if _, err := ctrl.Write(m); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	var r reply
	select {
	case r = <-replies:
	case <-time.After(5 * time.Second):
		return errors.New("service: no reply within 5 s")
	}
	switch {
	case r == nil:
		return errors.New("service: the host service went away")
	case r.status() == statusOK:
		return nil
	case r.status() == statusBusy:
		return fmt.Errorf("%w: %s", ErrBusy, r.text())
	}
	return fmt.Errorf("service: %s", r.text())
}

// current returns the link and, when there is none (the service is gone),
// a channel closed when there is one again.
func (c *Client) current() (*link.UDP, chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.link, c.up
}

// Send sends from the process's own socket.
func (c *Client) Send(batch []link.Datagram) error { return c.send.Send(batch) }

// LocalAddr returns the address and its RoCE port.
func (c *Client) LocalAddr() netip.AddrPort { return c.addr }

// SourcePort returns the source port datagrams sent with want carry.
func (c *Client) SourcePort(want uint16) uint16 { return c.send.SourcePort(want) }

// MaxBatch returns the send socket's best batch.
func (c *Client) MaxBatch() int { return c.send.MaxBatch() }

// Receive returns what the kernel steered to the process's socket. While
// the service is gone it waits for the next one; it returns
// link.ErrClosed only after Close.
func (c *Client) Receive(batch []link.Datagram) (int, error) {
	return c.receive(nil, batch)
}

// ReceiveLocked is Receive through the socket's ReceiveLocked
// (link.Poller).
func (c *Client) ReceiveLocked(mu sync.Locker, batch []link.Datagram) (int, error) {
	return c.receive(mu, batch)
}

// receive is Receive (mu nil) or ReceiveLocked over the current socket.
func (c *Client) receive(mu sync.Locker, batch []link.Datagram) (int, error) {
	for {
		if c.closed.Load() {
			return 0, link.ErrClosed
		}
		l := c.fast.Load()
		if l == nil {
			var up chan struct{}
			if l, up = c.current(); l != nil {
				continue
			}
			select {
			case <-up:
			case <-c.done:
				return 0, link.ErrClosed
			}
			continue
		}
		var n int
		var err error
		if mu == nil {
			n, err = l.Receive(batch)
		} else {
			n, err = l.ReceiveLocked(mu, batch)
		}
		if n > 0 || err == nil {
			return n, err
		}
		// The socket was closed: the service went away, or Close.
	}
}

// TryReceive reads what is queued without waiting (link.Poller).
func (c *Client) TryReceive(batch []link.Datagram) (int, error) {
	if c.closed.Load() {
		return 0, link.ErrClosed
	}
	l := c.fast.Load()
	if l == nil {
		return 0, nil
	}
	n, _ := l.TryReceive(batch)
	return n, nil
}

// SetQuiet passes the device's polling state to the socket (link.Poller).
func (c *Client) SetQuiet(on bool) {
	if l := c.fast.Load(); l != nil {
		l.SetQuiet(on)
	}
}

// Close detaches from the service and closes the sockets; Receive returns
// link.ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.done)
	c.mu.Lock()
	ctrl, l := c.ctrl, c.link
	c.ctrl, c.link = nil, nil
	c.fast.Store(nil)
	c.mu.Unlock()
	if ctrl != nil {
		ctrl.Close()
	}
	if l != nil {
		l.Close()
	}
	return c.send.Close()
}
