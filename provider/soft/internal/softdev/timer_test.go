package softdev

import (
	"slices"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/engine"
)

// TestTimerWheel drives a wheel by hand: entries fire at their tick and not
// before, a later turn's entry waits for its turn, a re-armed timer's old
// entry and a stopped timer's are dropped, an idle QP's expiry calls
// nothing, and a wheel left behind by more than a turn catches up.
func TestTimerWheel(t *testing.T) {
	w := newTimerWheel()
	w.done = 100
	mk := func() (*QPTimer, *engine.QP) {
		qp := new(engine.QP) // never called: collect only hands it back
		return &QPTimer{w: w, qp: qp}, qp
	}
	a, qa := mk()
	b, qb := mk()
	c, qc := mk()
	step := func(now int64, want []*engine.QP, wantNext int64) {
		t.Helper()
		due, next := w.collect(now)
		if !slices.Equal(due, want) || next != wantNext {
			t.Fatalf("collect(%d) = %d due, next %d; want %d due, next %d", now, len(due), next, len(want), wantNext)
		}
	}
	w.add(a, 105)
	w.add(b, 103)
	w.add(c, 105+wheelSlots) // same slot as a, a turn later
	if w.sleep != 103 {
		t.Fatalf("the wheel sleeps until %d, want the earliest tick 103", w.sleep)
	}
	step(102, nil, 103)
	step(103, []*engine.QP{qb}, 105)
	w.add(a, 110) // re-armed: the entry at 105 goes stale
	step(105, nil, 110)
	a.idle.Store(true)
	step(110, nil, 105+wheelSlots)
	if w.n != 1 {
		t.Fatalf("%d entries left, want c's", w.n)
	}
	step(105+wheelSlots, []*engine.QP{qc}, 0)
	w.add(b, 2000)
	w.add(c, 2001)
	c.Stop()
	step(5000, []*engine.QP{qb}, 0) // more than a turn behind
	if w.n != 0 {
		t.Fatalf("%d entries left in an empty wheel", w.n)
	}
	_ = qa
}

// TestQPTimerArm: a deadline at least wheelNear away goes into the wheel, a
// nearer one to a Go timer; a later deadline than one armed changes
// nothing; the zero time makes the timer idle without disarming it.
func TestQPTimerArm(t *testing.T) {
	w := newTimerWheel()
	q := &QPTimer{w: w}
	defer q.Stop()
	now := Now()
	q.Deadline(now, now.Add(time.Second))
	if q.tick.Load() != tickOf(now.Add(time.Second)) || !q.at.IsZero() {
		t.Fatalf("a deadline 1 s away: tick %d, Go timer at %v", q.tick.Load(), q.at)
	}
	q.Deadline(now, now.Add(2*time.Second))
	if q.tick.Load() != tickOf(now.Add(time.Second)) {
		t.Fatal("a later deadline moved the armed one")
	}
	q.Deadline(now, now.Add(100*time.Millisecond))
	if q.tick.Load() != tickOf(now.Add(100*time.Millisecond)) || w.n != 2 {
		t.Fatalf("an earlier deadline: tick %d (want %d), %d entries (one stale)", q.tick.Load(), tickOf(now.Add(100*time.Millisecond)), w.n)
	}
	q.Deadline(now, now.Add(wheelNear/4))
	if q.at.IsZero() || q.t == nil {
		t.Fatal("a deadline nearer than wheelNear did not get a Go timer")
	}
	q.Deadline(now, time.Time{})
	if !q.idle.Load() || q.tick.Load() == 0 {
		t.Fatal("Deadline(zero): want idle, still in the wheel")
	}
}
