package verbs

import (
	"context"
	"sync"

	"github.com/rdma-go/rdma-go/provider"
)

// CQ is a completion queue (ibv_cq): a ring that Poll drains without
// blocking. For blocking waits, create it with a CompChannel, arm it with
// ReqNotify and wait with CompChannel.GetEvent.
type CQ struct {
	ctx *Context
	ch  *CompChannel
	p   provider.CQ

	mu        sync.Mutex
	destroyed bool
	users     int // QPs using this CQ
}

// CreateCQ creates a completion queue with room for at least cqe
// completions (ibv_create_cq). ch may be nil.
func (c *Context) CreateCQ(cqe int, ch *CompChannel) (*CQ, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if cqe < 1 || cqe > c.attr.MaxCQE {
		return nil, verrorf(ErrInvalidArgument, "CQ size %d out of range 1..%d", cqe, c.attr.MaxCQE)
	}
	var pch provider.CompChannel
	if ch != nil {
		if ch.ctx != c {
			return nil, verrorf(ErrInvalidArgument, "completion channel belongs to another context")
		}
		pch = ch.p
	}
	cq := &CQ{ctx: c, ch: ch}
	p, err := c.p.CreateCQ(cqe, pch, cq)
	if err != nil {
		return nil, err
	}
	cq.p = p
	c.res[resCQ].Add(1)
	return cq, nil
}

// Cap returns the number of completions the CQ holds.
func (cq *CQ) Cap() int { return cq.p.Cap() }

// Poll moves up to len(wc) completions into wc and returns how many
// (ibv_poll_cq). It never blocks and does not allocate. When the CQ is
// empty the soft device first lets the device receive and process what its
// socket holds, on the calling goroutine, as a NIC driver's poll routine
// would: a busy poller then sees a completion without waiting for the
// device's receive goroutine to be woken.
func (cq *CQ) Poll(wc []WC) (int, error) { return cq.p.Poll(noescape(wc)) }

// Resize changes the CQ's capacity to at least cqe (ibv_resize_cq),
// keeping the completions queued; it fails if they would not fit.
func (cq *CQ) Resize(cqe int) error { return cq.p.Resize(cqe) }

// Wait blocks until the CQ holds a completion, ctx is done, or the CQ is
// destroyed (then it returns an error wrapping ErrClosed). It is the
// Go-native alternative to arming a completion channel: no ReqNotify and no
// events to acknowledge. A busy-polling loop should call it when Poll finds
// nothing for a while, so that its goroutine yields the processor to the
// device's receive path.
func (cq *CQ) Wait(ctx context.Context) error { return cq.p.Wait(ctx) }

// Overflowed reports whether a completion was lost because the CQ was full.
func (cq *CQ) Overflowed() bool { return cq.p.Overflowed() }

// ReqNotify arms the CQ (ibv_req_notify_cq): the next completion added to
// it (with solicitedOnly, the next solicited or error completion) sends one
// event to the CQ's completion channel. Completions already queued raise no
// event, on every device (the soft device behaves as Linux rxe and NICs
// do): arm, then Poll once more before waiting in GetEvent, or a
// completion that arrived between the last Poll and ReqNotify waits for
// ever.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if cq.ch == nil {
		return verrorf(ErrInvalidArgument, "CQ has no completion channel")
	}
	return cq.p.ReqNotify(solicitedOnly)
}

// AckEvents acknowledges n events received from GetEvent for this CQ
// (ibv_ack_cq_events).
func (cq *CQ) AckEvents(n int) { cq.p.AckEvents(n) }

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
	if err := cq.p.Destroy(); err != nil {
		return err
	}
	cq.destroyed = true
	cq.ctx.res[resCQ].Add(-1)
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
	ctx *Context
	p   provider.CompChannel
}

// CreateCompChannel creates a completion channel (ibv_create_comp_channel).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	p, err := c.p.CreateCompChannel()
	if err != nil {
		return nil, err
	}
	return &CompChannel{ctx: c, p: p}, nil
}

// GetEvent blocks until a CQ attached to the channel has an event, ctx is
// done, or the channel is destroyed (then it returns an error wrapping
// ErrClosed) (ibv_get_cq_event). Acknowledge each event with CQ.AckEvents.
func (ch *CompChannel) GetEvent(ctx context.Context) (*CQ, error) {
	owner, err := ch.p.GetEvent(ctx)
	if err != nil {
		return nil, err
	}
	return owner.(*CQ), nil
}

// Destroy destroys the channel (ibv_destroy_comp_channel) and wakes waiters.
func (ch *CompChannel) Destroy() error { return ch.p.Destroy() }
