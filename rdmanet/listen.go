package rdmanet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// cmOptions are the rdmacm options of a connection.
func (cfg *config) cmOptions() *rdmacm.Options {
	return &rdmacm.Options{
		Source: cfg.source,
		Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: recvSlots, MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: 64},
		CloseTimeout: cfg.cmCloseWait,
	}
}

// literalAddr returns address as an *Addr if it is numeric, else nil.
func literalAddr(address string) net.Addr {
	if ap, err := netip.ParseAddrPort(address); err == nil {
		return &Addr{AddrPort: ap}
	}
	return nil
}

// Dial connects to address over network ("rdma", or "tcp" as a synonym;
// see the package documentation) and returns a *Conn once both ends have
// exchanged their rings. ctx bounds the connection set-up only.
func Dial(ctx context.Context, network, address string, opts ...Option) (net.Conn, error) {
	fail := func(err error) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: Network, Addr: literalAddr(address), Err: err}
	}
	if err := checkNetwork(network, address); err != nil {
		return fail(err)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return fail(err)
	}
	rc, err := rdmacm.Dial(ctx, address, cfg.cmOptions())
	if err != nil {
		return fail(err)
	}
	c, err := newConn(rc, cfg, true)
	if err != nil {
		rc.Close()
		return fail(err)
	}
	if err := c.waitHello(ctx); err != nil {
		c.abort()
		return fail(err)
	}
	return c, nil
}

// Listener accepts rdmanet connections. It implements net.Listener.
type Listener struct {
	rl     *rdmacm.Listener
	cfg    *config
	addr   *Addr
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	once   sync.Once
}

// Listen listens on address ("host:port"; an empty host or 0.0.0.0
// listens on every device, port 0 picks a free port) over network ("rdma",
// or "tcp" as a synonym). Options apply to the accepted connections.
func Listen(network, address string, opts ...Option) (net.Listener, error) {
	fail := func(err error) (net.Listener, error) {
		return nil, &net.OpError{Op: "listen", Net: Network, Addr: literalAddr(address), Err: err}
	}
	if err := checkNetwork(network, address); err != nil {
		return fail(err)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return fail(err)
	}
	rl, err := rdmacm.Listen(address, cfg.cmOptions())
	if err != nil {
		return fail(err)
	}
	// Accepted ids inherit it: a dialer's HELLO that arrives before
	// Accept has posted the receives is retried after 0.16 ms.
	rl.ID().SetMinRNRTimer(rnrTimer)
	l := &Listener{rl: rl, cfg: cfg, addr: &Addr{AddrPort: rl.Addr()}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// Accept waits for and returns the next connection (a *Conn). Its first
// Write waits until the dialer's HELLO has arrived, which it sends as soon
// as the connection is established.
func (l *Listener) Accept() (net.Conn, error) {
	rc, err := l.rl.Accept(l.ctx)
	if err != nil {
		if l.ctx.Err() != nil || errors.Is(err, rdmacm.ErrClosed) {
			err = net.ErrClosed
		}
		return nil, &net.OpError{Op: "accept", Net: Network, Addr: l.addr, Err: err}
	}
	c, err := newConn(rc, l.cfg, false)
	if err != nil {
		rc.Close()
		return nil, &net.OpError{Op: "accept", Net: Network, Addr: l.addr, Err: err}
	}
	return c, nil
}

// Close stops listening and unblocks Accept, which returns net.ErrClosed.
// Connections already accepted stay open.
func (l *Listener) Close() error {
	err := net.ErrClosed
	l.once.Do(func() {
		l.cancel()
		err = l.rl.Close()
	})
	if err != nil {
		return &net.OpError{Op: "close", Net: Network, Addr: l.addr, Err: err}
	}
	return nil
}

// Addr returns the address listened on (an *Addr), with the port chosen.
func (l *Listener) Addr() net.Addr { return l.addr }

// The interfaces the types implement.
var (
	_ net.Conn     = (*Conn)(nil)
	_ net.Listener = (*Listener)(nil)
	_ net.Addr     = (*Addr)(nil)
	_ interface {
		CloseWrite() error
		CloseRead() error
	} = (*Conn)(nil)
)
