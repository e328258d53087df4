package verbs

import (
	"context"
	"sync"

	"github.com/rdma-go/rdma-go/engine"
)

// CQ is a completion queue (ibv_cq): a ring that Poll drains without
// blocking. For blocking waits, create it with a CompChannel, arm it with
// ReqNotify and wait with CompChannel.GetEvent.
type CQ struct {
	ctx *Context
	ch  *CompChannel

	mu        sync.Mutex
	ring      []engine.Completion
	head, n   int
	armed     bool
	solOnly   bool
	overflow  bool
	events    uint32 // events delivered
	acked     uint32
	destroyed bool
	users     int // QPs using this CQ
	// nonEmpty has a token when a completion arrived since the last Wait.
	nonEmpty chan struct{}
	// dead is closed by Destroy, waking every Wait.
	dead chan struct{}
}

// CreateCQ creates a completion queue with room for at least cqe
// completions (ibv_create_cq). ch may be nil.
func (c *Context) CreateCQ(cqe int, ch *CompChannel) (*CQ, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if cqe < 1 || cqe > maxCQE {
		return nil, verrorf(ErrInvalidArgument, "CQ size %d out of range 1..%d", cqe, maxCQE)
	}
	if ch != nil && ch.ctx != c {
		return nil, verrorf(ErrInvalidArgument, "completion channel belongs to another context")
	}
	return &CQ{ctx: c, ch: ch, ring: make([]engine.Completion, cqe),
		nonEmpty: make(chan struct{}, 1), dead: make(chan struct{})}, nil
}

// Cap returns the number of completions the CQ holds.
func (cq *CQ) Cap() int {
	cq.mu.Lock() // Resize replaces the ring
	defer cq.mu.Unlock()
	return len(cq.ring)
}

// Push implements engine.CompletionQueue. It reports false when the CQ is
// full; the completion is then lost and the CQ marked overflowed.
func (cq *CQ) Push(c *engine.Completion) bool {
	cq.mu.Lock()
	if cq.n == len(cq.ring) || cq.destroyed {
		cq.overflow = true
		cq.mu.Unlock()
		return false
	}
	cq.ring[(cq.head+cq.n)%len(cq.ring)] = *c
	cq.n++
	if cq.n == 1 {
		select {
		case cq.nonEmpty <- struct{}{}:
		default:
		}
	}
	notify := cq.armed && (!cq.solOnly || c.Solicited || c.Status != engine.StatusSuccess)
	if notify {
		cq.armed = false
		cq.events++
	}
	cq.mu.Unlock()
	if notify && cq.ch != nil {
		cq.ch.post(cq)
	}
	return true
}

// Poll moves up to len(wc) completions into wc and returns how many
// (ibv_poll_cq). It never blocks and does not allocate. When the CQ is
// empty it first lets the device receive and process what its socket holds,
// on the calling goroutine, as a NIC driver's poll routine would: a busy
// poller then sees a completion without waiting for the device's receive
// goroutine to be woken.
func (cq *CQ) Poll(wc []WC) (int, error) {
	n, err := cq.poll(wc)
	if n == 0 && err == nil && len(wc) > 0 && cq.ctx.run.Poll() {
		n, err = cq.poll(wc)
	}
	return n, err
}

func (cq *CQ) poll(wc []WC) (int, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.destroyed {
		return 0, verrorf(ErrClosed, "CQ destroyed")
	}
	k := 0
	for k < len(wc) && cq.n > 0 {
		fromCompletion(&wc[k], &cq.ring[cq.head])
		cq.head = (cq.head + 1) % len(cq.ring)
		cq.n--
		k++
	}
	return k, nil
}

// Resize changes the CQ's capacity to at least cqe (ibv_resize_cq),
// keeping the completions queued; it fails if they would not fit.
func (cq *CQ) Resize(cqe int) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.destroyed {
		return verrorf(ErrClosed, "CQ destroyed")
	}
	if cqe < 1 || cqe > maxCQE || cqe < cq.n {
		return verrorf(ErrInvalidArgument, "CQ size %d: must be %d..%d (completions queued: %d)", cqe, max(cq.n, 1), maxCQE, cq.n)
	}
	ring := make([]engine.Completion, cqe)
	for i := 0; i < cq.n; i++ {
		ring[i] = cq.ring[(cq.head+i)%len(cq.ring)]
	}
	cq.ring, cq.head = ring, 0
	return nil
}

// Wait blocks until the CQ holds a completion, ctx is done, or the CQ is
// destroyed (then it returns an error wrapping ErrClosed). It is the
// Go-native alternative to arming a completion channel: no ReqNotify and no
// events to acknowledge. A busy-polling loop should call it when Poll finds
// nothing for a while, so that its goroutine yields the processor to the
// device's receive path.
func (cq *CQ) Wait(ctx context.Context) error {
	for {
		cq.mu.Lock()
		n, destroyed := cq.n, cq.destroyed
		cq.mu.Unlock()
		if destroyed {
			return verrorf(ErrClosed, "CQ destroyed")
		}
		if n > 0 {
			return nil
		}
		cq.ctx.run.Blocking() // send the ACKs Poll left pending, wake the receive goroutine
		select {
		case <-cq.nonEmpty:
		case <-cq.dead:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Overflowed reports whether a completion was lost because the CQ was full.
func (cq *CQ) Overflowed() bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.overflow
}

// ReqNotify arms the CQ (ibv_req_notify_cq): the next completion (with
// solicitedOnly, the next solicited or error completion) sends one event to
// the CQ's completion channel. If completions are already queued, the event
// is sent at once so a waiter never misses them.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if cq.ch == nil {
		return verrorf(ErrInvalidArgument, "CQ has no completion channel")
	}
	cq.mu.Lock()
	if cq.destroyed {
		cq.mu.Unlock()
		return verrorf(ErrClosed, "CQ destroyed")
	}
	fire := cq.n > 0 && !solicitedOnly
	if fire {
		cq.events++
	} else {
		cq.armed, cq.solOnly = true, solicitedOnly
	}
	cq.mu.Unlock()
	if fire {
		cq.ch.post(cq)
	}
	return nil
}

// AckEvents acknowledges n events received from GetEvent for this CQ
// (ibv_ack_cq_events).
func (cq *CQ) AckEvents(n int) {
	cq.mu.Lock()
	cq.acked += uint32(n)
	cq.mu.Unlock()
}

// Destroy destroys the CQ (ibv_destroy_cq); it fails with ErrBusy while a QP
// uses it.
func (cq *CQ) Destroy() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.destroyed {
		return verrorf(ErrClosed, "CQ already destroyed")
	}
	if cq.users > 0 {
		return verrorf(ErrBusy, "CQ still used by %d QP(s)", cq.users)
	}
	cq.destroyed = true
	close(cq.dead)
	return nil
}

func (cq *CQ) use(d int) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.destroyed {
		return verrorf(ErrClosed, "CQ destroyed")
	}
	cq.users += d
	return nil
}

// CompChannel is a completion event channel (ibv_comp_channel).
type CompChannel struct {
	ctx    *Context
	events chan *CQ
	done   chan struct{}
	once   sync.Once
}

// CreateCompChannel creates a completion channel (ibv_create_comp_channel).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return &CompChannel{ctx: c, events: make(chan *CQ, 1024), done: make(chan struct{})}, nil
}

func (ch *CompChannel) post(cq *CQ) {
	select {
	case ch.events <- cq:
	case <-ch.done:
	default:
		// The channel is full of unread events: each CQ fires at most
		// once per ReqNotify, so this only happens with more than 1024
		// armed CQs. The waiter will still find completions by polling.
	}
}

// GetEvent blocks until a CQ attached to the channel has an event, ctx is
// done, or the channel is destroyed (then it returns an error wrapping
// ErrClosed) (ibv_get_cq_event). Acknowledge each event with CQ.AckEvents.
func (ch *CompChannel) GetEvent(ctx context.Context) (*CQ, error) {
	select {
	case cq := <-ch.events:
		return cq, nil
	default:
	}
	ch.ctx.run.Blocking() // send the ACKs CQ.Poll left pending, wake the receive goroutine
	select {
	case cq := <-ch.events:
		return cq, nil
	case <-ch.done:
		return nil, verrorf(ErrClosed, "completion channel destroyed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Destroy destroys the channel (ibv_destroy_comp_channel) and wakes waiters.
func (ch *CompChannel) Destroy() error {
	ch.once.Do(func() { close(ch.done) })
	return nil
}
