package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Comm is the TCP side channel of a test: every exchange is symmetric and
// of a fixed size; the client writes then reads, the server reads then
// writes. Every read and write has a deadline, so a silent or broken peer
// ends the test with an error instead of a hang.
type Comm struct {
	conn   net.Conn
	client bool
	// Timeout bounds each exchange during set-up.
	Timeout time.Duration
	// RunTimeout bounds an exchange that waits for the peer's run to end.
	RunTimeout time.Duration
	stop       func() bool
	// watching is closed when the goroutine started by Watch returns;
	// nil when none runs.
	watching chan struct{}
}

// Default deadlines of the side channel.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultRunTimeout = 30 * time.Minute
)

// Dial connects to the server (ethernet_client_connect). source, when set,
// is the local address to bind (--source_ip).
func Dial(ctx context.Context, host string, port int, source string) (*Comm, error) {
	d := net.Dialer{Timeout: DefaultTimeout}
	if source != "" {
		ip := net.ParseIP(source)
		if ip == nil {
			return nil, fmt.Errorf("Failed to bind socket")
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	conn, err := d.DialContext(ctx, "tcp4", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("Couldn't connect to %s:%d", host, port)
	}
	return newComm(ctx, conn, true), nil
}

// Listen opens the server's port (SO_REUSEADDR, as Go's listener sets).
func Listen(ctx context.Context, port int, source string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp4", net.JoinHostPort(source, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("Couldn't listen to port %d", port)
	}
	return ln, nil
}

// Accept accepts one connection on ln and closes ln, as perftest's server
// does.
func Accept(ctx context.Context, ln net.Listener) (*Comm, error) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	conn, err := ln.Accept()
	stop()
	ln.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("accept() failed: %w", err)
	}
	return newComm(ctx, conn, false), nil
}

// NewComm wraps an established connection; client selects the order of
// every exchange.
func NewComm(ctx context.Context, conn net.Conn, client bool) *Comm {
	return newComm(ctx, conn, client)
}

func newComm(ctx context.Context, conn net.Conn, client bool) *Comm {
	c := &Comm{conn: conn, client: client, Timeout: DefaultTimeout, RunTimeout: DefaultRunTimeout}
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	return c
}

// Close closes the connection.
func (c *Comm) Close() error {
	c.stop()
	err := c.conn.Close()
	c.unwatch()
	return err
}

// Watch calls gone, from another goroutine, if the peer closes or resets
// the connection before the next Exchange (or Close): it waits until the
// socket is readable and peeks, so whatever the peer sends next is left for
// Exchange. A watch already running is kept.
func (c *Comm) Watch(gone func()) {
	if c.watching != nil {
		return
	}
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	c.conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	c.watching = done
	go func() {
		defer close(done)
		closed := false
		err := rc.Read(func(fd uintptr) bool {
			var b [1]byte
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case err == unix.EAGAIN || err == unix.EINTR:
				return false // nothing yet: wait for readability
			case err != nil:
				closed = true // reset by the peer
			case n == 0:
				closed = true // orderly close
			}
			return true
		})
		if err == nil && closed {
			gone()
		}
	}()
}

// unwatch ends a watch started by Watch and waits for it.
func (c *Comm) unwatch() {
	if c.watching == nil {
		return
	}
	c.conn.SetReadDeadline(time.Unix(1, 0)) // wakes the watch's wait
	<-c.watching
	c.watching = nil
}

// Exchange sends mine and returns the peer's message of the same size,
// within timeout (Timeout if zero).
func (c *Comm) Exchange(mine []byte, timeout time.Duration) ([]byte, error) {
	c.unwatch()
	if timeout == 0 {
		timeout = c.Timeout
	}
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	peer := make([]byte, len(mine))
	if c.client {
		if err := c.write(mine); err != nil {
			return nil, err
		}
		if err := c.read(peer); err != nil {
			return nil, err
		}
	} else {
		if err := c.read(peer); err != nil {
			return nil, err
		}
		if err := c.write(mine); err != nil {
			return nil, err
		}
	}
	return peer, nil
}

func (c *Comm) write(b []byte) error {
	if _, err := c.conn.Write(b); err != nil {
		return fmt.Errorf("write to peer: %w", err)
	}
	return nil
}

func (c *Comm) read(b []byte) error {
	if _, err := io.ReadFull(c.conn, b); err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return fmt.Errorf("no answer from the peer: %w", err)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("the peer closed the connection")
		}
		return fmt.Errorf("read from peer: %w", err)
	}
	return nil
}

// HandShake exchanges key records (ctx_hand_shake): ours for the peer's.
func (c *Comm) HandShake(my *Dest, timeout time.Duration) (Dest, error) {
	peer, err := c.Exchange(my.Marshal(), timeout)
	if err != nil {
		return Dest{}, fmt.Errorf("Couldn't exchange key records: %w", err)
	}
	d, err := ParseDest(peer, my.GIDIndex)
	if err != nil {
		return Dest{}, fmt.Errorf("Couldn't parse line: %w", err)
	}
	return d, nil
}

// Reports exchanges bandwidth reports (xchg_bw_reports) for peers of
// version 5.33 and later.
func (c *Comm) Reports(my BWReport, timeout time.Duration) (BWReport, error) {
	mine := my.ReportFields()
	var peer [5][8]byte
	for i := range mine {
		b, err := c.Exchange(mine[i][:], timeout)
		if err != nil {
			return BWReport{}, fmt.Errorf("Failed to exchange data between server and clients: %w", err)
		}
		copy(peer[i][:], b)
	}
	return ParseReportFields(peer), nil
}

// CloseConnection is ctx_close_connection: one more key record exchange,
// then "done" and its NUL, and the socket closes. Errors after the
// handshake are ignored, since the peer may already be gone.
func (c *Comm) CloseConnection(my *Dest, timeout time.Duration) error {
	if _, err := c.HandShake(my, timeout); err != nil {
		return err
	}
	c.conn.SetDeadline(time.Now().Add(time.Second))
	c.conn.Write([]byte("done\x00"))
	return c.Close()
}
