package rdmacm

import (
	"context"
	"fmt"
	"sync"
)

// sink receives an id's events: an EventChannel, or a hook of the Go API.
type sink interface {
	post(ev *Event)
}

// EventChannel is an event channel (struct rdma_event_channel): the queue
// the events of the ids created on it arrive in. It is unbounded, so the
// connection manager never waits for a slow reader.
type EventChannel struct {
	mu     sync.Mutex
	q      []*Event
	ready  chan struct{}
	done   chan struct{}
	closed bool
}

// CreateEventChannel creates an event channel (rdma_create_event_channel).
// It fails with ErrNoDevice when no RDMA device exists.
func CreateEventChannel() (*EventChannel, error) {
	if err := haveDevices(); err != nil {
		return nil, err
	}
	return newChannel(), nil
}

func newChannel() *EventChannel {
	return &EventChannel{ready: make(chan struct{}, 1), done: make(chan struct{})}
}

func (ch *EventChannel) post(ev *Event) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return
	}
	ch.q = append(ch.q, ev)
	select {
	case ch.ready <- struct{}{}:
	default:
	}
}

// postAll queues evs, in order.
func (ch *EventChannel) postAll(evs []*Event) {
	for _, ev := range evs {
		ch.post(ev)
	}
}

// take removes and returns, in order, the queued events of id: those
// about it, and the CONNECT_REQUESTs of a listening id.
func (ch *EventChannel) take(id *ID) []*Event {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var out []*Event
	kept := ch.q[:0]
	for _, ev := range ch.q {
		owner := ev.ID
		if ev.ListenID != nil {
			owner = ev.ListenID
		}
		if owner == id {
			out = append(out, ev)
		} else {
			kept = append(kept, ev)
		}
	}
	clear(ch.q[len(kept):])
	ch.q = kept
	return out
}

// GetCMEvent returns the next event (rdma_get_cm_event), blocking until one
// arrives, the channel is destroyed or ctx is done.
func (ch *EventChannel) GetCMEvent(ctx context.Context) (*Event, error) {
	for {
		if ev, ok, err := ch.TryGetCMEvent(); ok || err != nil {
			return ev, err
		}
		select {
		case <-ch.ready:
		case <-ch.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("rdmacm: waiting for an event: %w", ctx.Err())
		}
	}
}

// TryGetCMEvent returns the next event if one is queued (the channel's fd
// in non-blocking mode).
func (ch *EventChannel) TryGetCMEvent() (*Event, bool, error) {
	ch.mu.Lock()
	if len(ch.q) > 0 {
		ev := ch.q[0]
		ch.q[0] = nil
		ch.q = ch.q[1:]
		if len(ch.q) > 0 {
			select {
			case ch.ready <- struct{}{}:
			default:
			}
		}
		ch.mu.Unlock()
		if ev.Type == EventConnectRequest && ev.ListenID != nil {
			ev.ListenID.requestTaken()
		}
		return ev, true, nil
	}
	closed := ch.closed
	ch.mu.Unlock()
	if closed {
		return nil, false, ErrClosed
	}
	return nil, false, nil
}

// Ready returns a channel that has a value whenever events may be queued:
// the select-able counterpart of polling the channel's fd. After a receive
// from it, drain the queue with TryGetCMEvent.
func (ch *EventChannel) Ready() <-chan struct{} { return ch.ready }

// Destroy destroys the channel (rdma_destroy_event_channel); destroy its
// ids first. Waiters return ErrClosed.
func (ch *EventChannel) Destroy() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.closed {
		ch.closed = true
		ch.q = nil
		close(ch.done)
	}
	return nil
}

// hook is a sink that calls a function: the Go API's way of handling
// events without a goroutine per connection.
type hook func(ev *Event)

func (h hook) post(ev *Event) { h(ev) }
