//go:build linux

package service

import (
	"context"
	"errors"
	"fmt"
	"io"
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
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("%w at %s", ErrNoService, path)
		}
		return fmt.Errorf("service: %w", err)
	}
	return c.Close()
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
	// UDP tunes the socket the client sends from (Port and SendOnly are
	// set by Attach).
	UDP link.UDPOptions
}

// Client is a device's attachment to the host service: a link.Link that
// sends from a UDP socket of its own and receives, through the service,
// what arrives on the address for the client's slot. It also claims the
// CM's service IDs (ibcm.ServiceClaims).
type Client struct {
	path string
	addr netip.AddrPort
	opts AttachOptions
	log  *slog.Logger
	send *link.UDP
	guid uint64

	slot   atomic.Uint32
	closed atomic.Bool
	done   chan struct{}

	// mu guards the connections and the claims; ctrlMu serializes
	// control requests.
	mu     sync.Mutex
	ctrl   *net.UnixConn
	data   *net.UnixConn
	drc    syscall.RawConn
	claims map[uint64]struct{}
	ctrlMu sync.Mutex

	// rx is the scratch of Receive and ReceiveLocked (one caller at a
	// time), prx TryReceive's (under pollMu).
	rx, prx rxScratch
	pollMu  sync.Mutex
	dropped atomic.Uint64
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
		done: make(chan struct{}), claims: make(map[uint64]struct{})}
	guid, err := c.connect(ctx, 0)
	if err != nil {
		return nil, err
	}
	c.guid = guid
	uo := opts.UDP
	uo.SendOnly = true
	if uo.Logger == nil {
		uo.Logger = opts.Logger
	}
	s, err := link.ListenUDP(addr, uo)
	if err != nil {
		c.closeConns()
		return nil, fmt.Errorf("service: send socket: %w", err)
	}
	c.send = s
	return c, nil
}

// connect attaches to the service (asking for slot want) and opens the
// data connection. It returns the device's GUID.
func (c *Client) connect(ctx context.Context, want uint8) (uint64, error) {
	var d net.Dialer
	cc, err := d.DialContext(ctx, "unixpacket", c.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return 0, fmt.Errorf("%w at %s", ErrNoService, c.path)
		}
		return 0, fmt.Errorf("service: %w", err)
	}
	ctrl := cc.(*net.UnixConn)
	if dl, ok := ctx.Deadline(); ok {
		ctrl.SetDeadline(dl)
	}
	r, err := roundTrip(ctrl, newAttachReq(c.addr, want, os.Getpid()))
	if err == nil && r.status() != statusOK {
		err = fmt.Errorf("service: attach %s: %s", c.addr, r.text())
	}
	if err != nil {
		ctrl.Close()
		return 0, err
	}
	dc, err := d.DialContext(ctx, "unixpacket", c.path)
	if err != nil {
		ctrl.Close()
		return 0, fmt.Errorf("service: %w", err)
	}
	data := dc.(*net.UnixConn)
	if dl, ok := ctx.Deadline(); ok {
		data.SetDeadline(dl)
	}
	// The service answers once the connection carries the slot's
	// packets: none is lost between Attach and the first Receive.
	if dr, err := roundTrip(data, newIDMsg(kindData, r.session())); err != nil || dr.status() != statusOK {
		ctrl.Close()
		data.Close()
		if err == nil {
			err = fmt.Errorf("service: data connection: %s", dr.text())
		}
		return 0, err
	}
	data.SetDeadline(time.Time{})
	drc, err := data.SyscallConn()
	if err != nil {
		ctrl.Close()
		data.Close()
		return 0, fmt.Errorf("service: %w", err)
	}
	ctrl.SetDeadline(time.Time{})
	c.mu.Lock()
	c.ctrl, c.data, c.drc = ctrl, data, drc
	c.mu.Unlock()
	c.slot.Store(uint32(r.slot()))
	return r.guid(), nil
}

// roundTrip sends a control request and reads its reply.
func roundTrip(ctrl *net.UnixConn, req []byte) (reply, error) {
	if _, err := ctrl.Write(req); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	buf := make([]byte, 512)
	n, err := ctrl.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if n < replyLen || buf[0] != kindReply {
		return nil, errors.New("service: malformed reply")
	}
	return reply(buf[:n]), nil
}

// Slot returns the client's slot (see QPNRange).
func (c *Client) Slot() uint8 { return uint8(c.slot.Load()) }

// GUID returns the node GUID of the service's device on the address, the
// same for every process attached to it.
func (c *Client) GUID() uint64 { return c.guid }

// Dropped counts packets the client could not take (too long for the
// buffer Receive had).
func (c *Client) Dropped() uint64 { return c.dropped.Load() }

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

// request sends one control request and checks its reply.
func (c *Client) request(m []byte) error {
	c.ctrlMu.Lock()
	defer c.ctrlMu.Unlock()
	c.mu.Lock()
	ctrl := c.ctrl
	c.mu.Unlock()
	if ctrl == nil {
		return errors.New("service: not attached (the host service is gone)")
	}
	ctrl.SetDeadline(time.Now().Add(5 * time.Second))
	defer ctrl.SetDeadline(time.Time{})
	r, err := roundTrip(ctrl, m)
	if err != nil {
		return err
	}
	switch r.status() {
	case statusOK:
		return nil
	case statusBusy:
		return fmt.Errorf("%w: %s", ErrBusy, r.text())
	}
	return fmt.Errorf("service: %s", r.text())
}

// Send sends from the client's own UDP socket.
func (c *Client) Send(batch []link.Datagram) error { return c.send.Send(batch) }

// LocalAddr returns the address and the port the service receives on.
func (c *Client) LocalAddr() netip.AddrPort { return c.addr }

// SourcePort returns the source port datagrams sent with want carry.
func (c *Client) SourcePort(want uint16) uint16 { return c.send.SourcePort(want) }

// MaxBatch returns the send socket's best batch.
func (c *Client) MaxBatch() int { return c.send.MaxBatch() }

// Receive returns what the service forwarded. When the service goes away
// it calls OnDown, attaches again as soon as a service answers (retrying
// with backoff), calls OnUp and goes on; it returns only after Close.
func (c *Client) Receive(batch []link.Datagram) (int, error) {
	for {
		if err := c.waitReadable(); err != nil {
			return 0, err
		}
		var got int
		var err error
		c.control(func(fd uintptr) { got, err = c.rx.recvSome(c, fd, batch) })
		if got > 0 {
			return got, nil
		}
		if err != nil && c.lost(err) {
			return 0, link.ErrClosed
		}
	}
}

// TryReceive is Receive that returns 0 at once when nothing is queued, or
// when another TryReceive is under way (link.Poller). It leaves a lost
// service to Receive.
func (c *Client) TryReceive(batch []link.Datagram) (int, error) {
	if c.closed.Load() {
		return 0, link.ErrClosed
	}
	if len(batch) == 0 || !c.pollMu.TryLock() {
		return 0, nil
	}
	defer c.pollMu.Unlock()
	var got int
	c.control(func(fd uintptr) { got, _ = c.prx.recvSome(c, fd, batch) })
	return got, nil
}

// ReceiveLocked is Receive that locks mu before each read and unlocks it
// after a read that found nothing: it returns with mu held when n > 0
// (link.Poller).
func (c *Client) ReceiveLocked(mu sync.Locker, batch []link.Datagram) (int, error) {
	for {
		if err := c.waitReadable(); err != nil {
			return 0, err
		}
		mu.Lock()
		var got int
		var err error
		c.control(func(fd uintptr) { got, err = c.rx.recvSome(c, fd, batch) })
		if got > 0 {
			return got, nil
		}
		mu.Unlock()
		if err != nil && c.lost(err) {
			return 0, link.ErrClosed
		}
	}
}

// SetQuiet does nothing: a waiting Receive wakes when a message is queued
// even while goroutines poll (link.Poller), at worst for nothing.
func (c *Client) SetQuiet(bool) {}

// control runs f on the data connection's descriptor.
func (c *Client) control(f func(fd uintptr)) {
	c.mu.Lock()
	drc := c.drc
	c.mu.Unlock()
	drc.Control(f)
}

// waitReadable waits until a message is queued on the data connection.
// When the service is gone it attaches again first (lost); it returns
// link.ErrClosed after Close.
func (c *Client) waitReadable() error {
	var one [1]byte
	for {
		c.mu.Lock()
		drc := c.drc
		c.mu.Unlock()
		var perr error
		err := drc.Read(func(fd uintptr) bool {
			n, _, e := unix.Recvfrom(int(fd), one[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case errors.Is(e, unix.EAGAIN):
				return false
			case e != nil:
				perr = e
			case n == 0:
				perr = io.EOF // the service closed the connection
			}
			return true
		})
		if err == nil {
			err = perr
		}
		if err == nil {
			return nil
		}
		if c.lost(err) {
			return link.ErrClosed
		}
	}
}

// lost handles a failed data connection: unless the client is closed it
// waits for a service and attaches again. It reports whether the client
// is closed.
func (c *Client) lost(err error) bool {
	if c.closed.Load() {
		return true
	}
	c.log.Warn("service: lost the host service; the port is down until it is back", "addr", c.addr, "err", err)
	return !c.reattach()
}

// rxScratch is one reader's header buffer and message.
type rxScratch struct {
	hdr [packetHdrLen]byte
	msg vecMsg
}

// recvSome reads the messages queued on fd, without waiting, into batch.
func (r *rxScratch) recvSome(c *Client, fd uintptr, batch []link.Datagram) (int, error) {
	got := 0
	for got < len(batch) {
		d := &batch[got]
		n, flags, err := r.msg.recv(fd, r.hdr[:], d.Buf[:cap(d.Buf)], unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return got, nil
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return got, err
		case n == 0:
			return got, io.EOF // the service closed the connection
		case flags&unix.MSG_TRUNC != 0 || n < packetHdrLen || r.hdr[0] != kindPacket:
			c.dropped.Add(1)
			continue
		}
		h := packetHdr(r.hdr[:])
		d.Buf = d.Buf[:n-packetHdrLen]
		d.Src, d.Dst, d.SegSize = h.src(), c.addr, h.segSize()
		got++
	}
	return got, nil
}

// reattach waits for a service and attaches to it again; false means the
// client was closed first.
func (c *Client) reattach() bool {
	c.closeConns()
	if c.opts.OnDown != nil {
		c.opts.OnDown()
	}
	wait := 10 * time.Millisecond
	for {
		select {
		case <-c.done:
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.connect(ctx, c.Slot())
		cancel()
		if err != nil {
			c.log.Debug("service: attach again", "addr", c.addr, "err", err)
			continue
		}
		if c.closed.Load() {
			c.closeConns()
			return false
		}
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
		return true
	}
}

func (c *Client) closeConns() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctrl != nil {
		c.ctrl.Close()
	}
	if c.data != nil {
		c.data.Close()
	}
}

// Close detaches from the service and closes the send socket; Receive
// returns link.ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.done)
	c.closeConns()
	return c.send.Close()
}
