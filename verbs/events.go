package verbs

import (
	"context"
	"sync"

	"github.com/rdma-go/rdma-go/provider"
)

// AsyncEvent is an asynchronous event (struct ibv_async_event): which
// object it is about, and what happened.
type AsyncEvent struct {
	Type EventType
	QP   *QP  // QP events
	CQ   *CQ  // CQ_ERR
	SRQ  *SRQ // SRQ events
	Port uint8
}

// eventQueue is a context's queue of asynchronous events: unbounded, so the
// engine never blocks on a slow reader, and read with GetAsyncEvent.
type eventQueue struct {
	mu     sync.Mutex
	q      []AsyncEvent
	ready  chan struct{} // has a token while q is not empty
	acked  int
	closed bool
	dead   chan struct{} // closed with closed set, waking every waiter
}

func newEventQueue() *eventQueue {
	return &eventQueue{ready: make(chan struct{}, 1), dead: make(chan struct{})}
}

// close refuses further events and wakes every GetAsyncEvent.
func (e *eventQueue) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.dead)
	}
}

func (e *eventQueue) push(ev AsyncEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.q = append(e.q, ev)
	select {
	case e.ready <- struct{}{}:
	default:
	}
}

// GetAsyncEvent blocks until the context has an asynchronous event, ctx is
// done, or the context is closed (then it returns an error wrapping
// ErrClosed) (ibv_get_async_event). Acknowledge each with AckAsyncEvent.
func (c *Context) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	e := c.events
	for {
		e.mu.Lock()
		if len(e.q) > 0 {
			ev := e.q[0]
			e.q = e.q[1:]
			if len(e.q) > 0 {
				select {
				case e.ready <- struct{}{}:
				default:
				}
			}
			e.mu.Unlock()
			return ev, nil
		}
		closed := e.closed
		e.mu.Unlock()
		if closed {
			return AsyncEvent{}, verrorf(ErrClosed, "device context closed")
		}
		select {
		case <-e.ready:
		case <-e.dead:
		case <-ctx.Done():
			return AsyncEvent{}, ctx.Err()
		}
	}
}

// AckAsyncEvent acknowledges an event (ibv_ack_async_event).
func (c *Context) AckAsyncEvent(AsyncEvent) {
	c.events.mu.Lock()
	c.events.acked++
	c.events.mu.Unlock()
}

// asyncEvent queues an event the provider reports, naming verbs' object.
func (c *Context) asyncEvent(ev provider.AsyncEvent) {
	out := AsyncEvent{Type: ev.Type, Port: ev.Port}
	switch o := ev.Owner.(type) {
	case *QP:
		out.QP = o
	case *SRQ:
		out.SRQ = o
	case *CQ:
		out.CQ = o
	}
	c.events.push(out)
}
