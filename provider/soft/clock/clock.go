// Package clock supplies the fake clock that tests of the management
// layers advance by hand, so that their runs are deterministic. It
// satisfies mad.Clock (and any interface with the same two methods).
package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Fake is a manual clock. Timers fire only inside Advance/AdvanceTo/Step,
// synchronously, in deadline order (ties in the order they were set), with
// no lock of the clock held, so callbacks may set more timers.
type Fake struct {
	mu  sync.Mutex
	now time.Time
	q   timerHeap
	seq uint64
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d.
func (c *Fake) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{at: c.now.Add(max(d, 0)), seq: c.seq, f: f, idx: -1}
	heap.Push(&c.q, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.idx < 0 {
			return false
		}
		heap.Remove(&c.q, t.idx)
		return true
	}
}

// Next returns the earliest pending deadline.
func (c *Fake) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.q) == 0 {
		return time.Time{}, false
	}
	return c.q[0].at, true
}

// Pending returns the number of pending timers.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q)
}

// AdvanceTo moves the clock to t (never backwards), firing every timer due
// by then in order; the clock reads each timer's deadline while it runs.
func (c *Fake) AdvanceTo(t time.Time) {
	for {
		c.mu.Lock()
		if len(c.q) == 0 || c.q[0].at.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		ft := heap.Pop(&c.q).(*fakeTimer)
		if ft.at.After(c.now) {
			c.now = ft.at
		}
		c.mu.Unlock()
		ft.f()
	}
}

// Advance moves the clock forward by d (see AdvanceTo).
func (c *Fake) Advance(d time.Duration) { c.AdvanceTo(c.Now().Add(d)) }

type fakeTimer struct {
	at  time.Time
	seq uint64
	f   func()
	idx int
}

type timerHeap []*fakeTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.idx = -1
	*h = old[:n-1]
	return t
}
