package softdev

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/engine"
)

// QP deadlines (retransmission, RNR waits, READ response pacing) are kept
// in a timer wheel per device: a deadline at least wheelNear away is
// entered in the slot of its millisecond tick, and one goroutine
// (Device.runWheel) walks the slots as the ticks pass. Arming is an append
// under one lock, and a deadline that is no longer wanted — the ACK came
// first, as it almost always does — costs nothing more than a check when
// its slot comes round. A Go timer per QP instead costs a heap operation
// in the runtime's timer heap per arm, whose depth grows with the number
// of QPs, and a goroutine per expiry: with 100,000 QPs each carrying a
// WRITE, that is what a spread WRITE cost. Deadlines nearer than wheelNear
// (a READ response burst's next step, sub-millisecond timeouts) keep a Go
// timer, so they are not rounded up to a tick. rxe's timers are jiffies:
// a millisecond of rounding is well inside what a transport timeout means.
const (
	wheelTick  = time.Millisecond
	wheelSlots = 1024 // a power of two; later deadlines come round again
	wheelNear  = 2 * wheelTick
)

// timerWheel is a device's wheel. Every QPTimer of the device is guarded
// by mu.
type timerWheel struct {
	mu    sync.Mutex
	slots [wheelSlots][]wheelEntry
	n     int   // entries in the slots (live or stale)
	done  int64 // ticks up to this one have been processed
	// sleep is the tick runWheel sleeps until, 0 when it waits for a kick.
	sleep int64
	kick  chan struct{}
	due   []*engine.QP // runWheel's scratch list
}

// wheelEntry is a QPTimer in a slot; it is stale (skipped) unless gen is
// the timer's current generation.
type wheelEntry struct {
	t   *QPTimer
	gen uint32
}

// tickOf returns the wheel tick at or after t.
func tickOf(t time.Time) int64 {
	d := t.Sub(monoBase)
	return int64((d + wheelTick - 1) / wheelTick)
}

func newTimerWheel() *timerWheel {
	w := &timerWheel{kick: make(chan struct{}, 1)}
	w.done = tickOf(Now()) - 1
	return w
}

// add enters t for tick, under w.mu, and wakes runWheel if it sleeps past
// it.
func (w *timerWheel) add(t *QPTimer, tick int64) {
	t.gen++
	t.tick.Store(tick)
	s := &w.slots[tick&(wheelSlots-1)]
	*s = append(*s, wheelEntry{t, t.gen})
	w.n++
	if w.sleep == 0 || tick < w.sleep {
		w.sleep = tick
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// collect takes out the entries due at ticks up to now and returns the
// QPs of the live ones that still have a deadline, under w.mu. It returns
// the tick to sleep until next, or 0 when the wheel is empty.
func (w *timerWheel) collect(now int64) (due []*engine.QP, next int64) {
	due = w.due[:0]
	from := w.done + 1
	if now-from >= wheelSlots {
		from = now - wheelSlots + 1 // one full turn covers every slot
	}
	for tick := from; tick <= now; tick++ {
		s := &w.slots[tick&(wheelSlots-1)]
		keep := (*s)[:0]
		for _, e := range *s {
			t := e.t
			switch {
			case e.gen != t.gen:
				w.n-- // re-armed elsewhere, or stopped
			case t.tick.Load() > now:
				keep = append(keep, e) // a later turn
			default:
				w.n--
				t.tick.Store(0) // before idle is read: see Deadline
				if !t.idle.Load() && !t.closed && t.qp != nil {
					due = append(due, t.qp)
				}
			}
		}
		clear((*s)[len(keep):])
		*s = keep
	}
	w.done = now
	w.due = due
	if w.n == 0 {
		return due, 0
	}
	// Sleep until the next slot that holds anything (its entries may be
	// for a later turn: then runWheel looks again).
	for tick := now + 1; tick <= now+wheelSlots; tick++ {
		if len(w.slots[tick&(wheelSlots-1)]) > 0 {
			return due, tick
		}
	}
	return due, now + wheelSlots
}

// runWheel is the device's wheel goroutine: it fires the QP deadlines that
// came due, and sleeps until the next, or until a nearer one is armed.
func (d *Device) runWheel() {
	defer d.wg.Done()
	w := d.wheel
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	for {
		w.mu.Lock()
		due, next := w.collect(tickOf(Now()) - 1)
		w.sleep = next
		w.mu.Unlock()
		if len(due) > 0 {
			now := Now()
			for i, qp := range due {
				qp.OnTimer(now)
				due[i] = nil
			}
		}
		if next == 0 {
			select {
			case <-w.kick:
			case <-d.done:
				return
			}
			continue
		}
		sleep.Reset(time.Until(monoBase.Add(time.Duration(next) * wheelTick)))
		select {
		case <-sleep.C:
		case <-w.kick:
			sleep.Stop()
		case <-d.done:
			return
		}
	}
}

// QPTimer drives one QP's engine deadlines: through the device's wheel,
// or a Go timer for deadlines nearer than wheelNear.
type QPTimer struct {
	w  *timerWheel // w.mu guards every field but idle, and tick's stores
	qp *engine.QP
	// The wheel entry: tick is the tick it fires at (0: not in the
	// wheel), gen tells the live entry from stale ones.
	tick atomic.Int64
	gen  uint32
	// The Go timer: at is when it fires (zero when it is not running).
	t      *time.Timer
	at     time.Time
	idle   atomic.Bool // the QP has no deadline left: an expiry does nothing
	closed bool
}

// InitQPTimer makes the zero t the timer hook of a QP that is about to be
// created on d: pass t as QPConfig.OnDeadline, then Bind the QP.
func (d *Device) InitQPTimer(t *QPTimer) { t.w = d.wheel }

// Bind attaches the created QP.
func (t *QPTimer) Bind(qp *engine.QP) {
	t.w.mu.Lock()
	t.qp = qp
	t.w.mu.Unlock()
}

// Deadline (engine.DeadlineHook) makes the QP's OnTimer run at (or soon
// after) at; now is the engine's time of the call (this device's Now). The zero time says the QP has no deadline left: what is armed
// stays armed (disarming it, and arming again at the next send, costs a
// ping-pong more than the expiry does) but its expiry no longer calls into
// the QP. A deadline later than one already armed waits for that one:
// OnTimer arms the next. The engine calls Deadline with the QP locked, so
// it must not call into the QP.
//
// Deadline takes no lock in the common cases: the zero time, and a
// deadline no earlier than the wheel entry armed (a QP's every send pushes
// its deadline later). idle is stored before tick is loaded, and the wheel
// clears tick before it loads idle, so an entry that fires meanwhile sees
// the QP busy.
func (t *QPTimer) Deadline(now, at time.Time) {
	if at.IsZero() {
		t.idle.Store(true)
		return
	}
	t.idle.Store(false)
	tick := tickOf(at)
	if cur := t.tick.Load(); cur != 0 && cur <= tick {
		return // the wheel entry armed fires first
	}
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.closed {
		return
	}
	if cur := t.tick.Load(); (cur != 0 && cur <= tick) || (!t.at.IsZero() && !at.Before(t.at)) {
		return // something armed fires first
	}
	if at.Sub(now) >= wheelNear {
		w.add(t, tick)
		return
	}
	t.at = at
	if t.t == nil {
		t.t = time.AfterFunc(at.Sub(now), t.fire)
	} else {
		t.t.Reset(at.Sub(now))
	}
}

// fire is the Go timer's expiry.
func (t *QPTimer) fire() {
	t.w.mu.Lock()
	qp := t.qp
	t.at = time.Time{}
	skip := t.closed || t.idle.Load()
	t.w.mu.Unlock()
	if qp == nil || skip {
		return
	}
	qp.OnTimer(Now())
}

// Stop cancels the timer for good; its wheel entry, if any, is dropped
// when its slot comes round.
func (t *QPTimer) Stop() {
	t.w.mu.Lock()
	t.closed = true
	t.gen++
	if t.t != nil {
		t.t.Stop()
	}
	t.w.mu.Unlock()
}
