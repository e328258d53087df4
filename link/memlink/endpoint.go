package memlink

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/link"
)

// EndpointQueue is the number of delivered datagrams an Endpoint holds for
// Receive; more are dropped and counted as Undeliverable.
const EndpointQueue = 4096

// Endpoint is a link.Link on a Network that runs in real time: Send stamps
// datagrams with time.Now, and a timer delivers each when it comes due to
// the Endpoint at its destination address. Do not call Network.Pop on a
// network with endpoints; the timer pops for them. Runs with endpoints are
// not deterministic.
type Endpoint struct {
	n      *Network
	addr   netip.Addr
	ch     chan link.Datagram
	done   chan struct{}
	once   sync.Once
	closed atomic.Bool
}

var _ link.Link = (*Endpoint)(nil)

// Endpoint attaches a real-time link.Link at addr to the network. It fails
// if addr already has an open endpoint.
func (n *Network) Endpoint(addr netip.Addr) (*Endpoint, error) {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return nil, fmt.Errorf("memlink: Endpoint: invalid address")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.eps == nil {
		n.eps = make(map[netip.Addr]*Endpoint)
	}
	if _, ok := n.eps[addr]; ok {
		return nil, fmt.Errorf("memlink: Endpoint: %s is already attached", addr)
	}
	e := &Endpoint{
		n:    n,
		addr: addr,
		ch:   make(chan link.Datagram, EndpointQueue),
		done: make(chan struct{}),
	}
	n.eps[addr] = e
	return e, nil
}

// armLocked sets the delivery timer for the earliest datagram in flight.
func (n *Network) armLocked() {
	if len(n.q) == 0 || len(n.eps) == 0 {
		return
	}
	next := n.q[0].at
	if !n.timerAt.IsZero() && !next.Before(n.timerAt) {
		return
	}
	n.timerAt = next
	d := time.Until(next)
	if n.timer == nil {
		n.timer = time.AfterFunc(d, n.dispatch)
	} else {
		n.timer.Reset(d)
	}
}

// dispatch runs on the timer: it delivers every datagram now due.
func (n *Network) dispatch() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.timerAt = time.Time{}
	now := time.Now()
	for {
		d, ok := n.popLocked(now)
		if !ok {
			break
		}
		e := n.eps[d.Dst.Addr().Unmap()]
		if e == nil {
			n.stats.Undeliverable++
			continue
		}
		select {
		case e.ch <- d:
		default:
			n.stats.Undeliverable++
		}
	}
	n.armLocked()
}

// Send puts the datagrams on the network now, from the endpoint's address
// and Src.Port() (0 means link.RoCEPort). Faults apply as for Network.Send.
func (e *Endpoint) Send(batch []link.Datagram) error {
	if e.closed.Load() {
		return link.ErrClosed
	}
	now := time.Now()
	n := e.n
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range batch {
		d.Src = netip.AddrPortFrom(e.addr, e.SourcePort(d.Src.Port()))
		n.sendLocked(now, d)
	}
	n.armLocked()
	return nil
}

// Receive blocks until at least one datagram has been delivered to the
// endpoint or it is closed, then returns up to len(batch) of them, copied
// into the batch's buffers. A datagram larger than its buffer's capacity is
// dropped and counted as Undeliverable.
func (e *Endpoint) Receive(batch []link.Datagram) (int, error) {
	if len(batch) == 0 {
		return 0, nil
	}
	k := 0
	for k == 0 {
		if e.closed.Load() {
			return 0, link.ErrClosed
		}
		select {
		case d := <-e.ch:
			if e.put(&batch[k], d) {
				k++
			}
		case <-e.done:
			return 0, link.ErrClosed
		}
	}
	for k < len(batch) {
		select {
		case d := <-e.ch:
			if e.put(&batch[k], d) {
				k++
			}
		default:
			return k, nil
		}
	}
	return k, nil
}

func (e *Endpoint) put(dst *link.Datagram, d link.Datagram) bool {
	if len(d.Buf) > cap(dst.Buf) {
		e.n.mu.Lock()
		e.n.stats.Undeliverable++
		e.n.mu.Unlock()
		return false
	}
	dst.Buf = append(dst.Buf[:0], d.Buf...)
	dst.Src, dst.Dst, dst.SegSize = d.Src, d.Dst, 0
	return true
}

// LocalAddr returns the endpoint's address with port link.RoCEPort.
func (e *Endpoint) LocalAddr() netip.AddrPort {
	return netip.AddrPortFrom(e.addr, link.RoCEPort)
}

// SourcePort returns want, or link.RoCEPort if want is 0: a simulated link
// can send from any port.
func (e *Endpoint) SourcePort(want uint16) uint16 {
	if want == 0 {
		return link.RoCEPort
	}
	return want
}

// MaxBatch returns 64.
func (e *Endpoint) MaxBatch() int { return 64 }

// Close detaches the endpoint and unblocks Receive. It is idempotent.
// Datagrams that come due for a closed endpoint are Undeliverable. When the
// last endpoint closes, the delivery timer stops.
func (e *Endpoint) Close() error {
	e.once.Do(func() {
		e.closed.Store(true)
		n := e.n
		n.mu.Lock()
		if n.eps[e.addr] == e {
			delete(n.eps, e.addr)
		}
		if len(n.eps) == 0 && n.timer != nil {
			n.timer.Stop()
			n.timerAt = time.Time{}
		}
		n.mu.Unlock()
		close(e.done)
	})
	return nil
}
