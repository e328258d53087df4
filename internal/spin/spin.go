// Package spin paces the perftest tools' loops that poll a CQ without pause, as
// rdma-core's and perftest's tools do: on a soft device, which runs in the
// tool's own process, the loop yields the P now and then so that the
// device's goroutines (timers, and its receive path when polling the CQ
// does not drive it) run beside it; now and then the loop looks up from
// the CQ, at its deadline, its context and its peer; and on a soft device
// a loop that has found nothing for a while blocks on the CQ instead: a
// slow peer (a VM, another host) would otherwise take a whole CPU from
// whatever else runs, the peer itself included.
package spin

import (
	"runtime"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

const (
	// yieldEvery is how often, in empty polls, a loop on a soft device
	// yields: often enough for the device's goroutines, rarely enough to
	// keep the loop's reaction time that of a spin.
	yieldEvery = 16
	// checkEvery is how often, in empty polls, Empty tells the loop to
	// look up.
	checkEvery = 1024
	// blockAfter is how long a loop on a soft device polls without
	// finding anything before it blocks: many round trips to a peer on
	// the same host (a few µs each), a small part of one to a slow peer.
	blockAfter = 200 * time.Microsecond
	// dozeFor is how long Idle sleeps once a memory-polling loop would
	// block.
	dozeFor = 20 * time.Microsecond
)

// Spinner counts one loop's empty polls.
type Spinner struct {
	yield  bool
	n      uint32
	since  time.Time // of the first look-up without a completion
	dozing bool      // Block said to block (Idle sleeps)
}

// For returns a Spinner for loops that poll CQs of ctx's device.
func For(ctx *verbs.Context) Spinner {
	return Spinner{yield: inProcess(ctx)}
}

// Empty records an empty poll, yielding the P if it is time, and reports
// whether the loop should look up from the CQ now.
func (s *Spinner) Empty() bool {
	s.n++
	if s.yield && s.n%yieldEvery == 0 {
		gosched()
	}
	return s.n%checkEvery == 0
}

// gosched is runtime.Gosched, kept out of line so that Empty, called at
// every empty poll, is inlined into the loop.
//
//go:noinline
func gosched() { runtime.Gosched() }

// Block reports, when Empty has said to look up, whether the loop should
// now block on the CQ rather than go on polling: on a soft device, once
// its polls have found nothing for blockAfter (now is the time of the
// look-up). Reset after the wait.
func (s *Spinner) Block(now time.Time) bool {
	if !s.yield {
		return false
	}
	if s.since.IsZero() {
		s.since = now
		return false
	}
	s.dozing = now.Sub(s.since) >= blockAfter
	return s.dozing
}

// Idle is Empty for a loop that waits for memory to change (an RDMA
// WRITE landing), which no completion marks and so no CQ can wait for:
// once Block has said that the loop would block, Idle sleeps dozeFor
// instead and tells the loop to look up after every sleep.
func (s *Spinner) Idle() bool {
	if s.dozing {
		time.Sleep(dozeFor)
		return true
	}
	return s.Empty()
}

// Reset starts counting again, after a poll that found something.
func (s *Spinner) Reset() { s.n, s.since, s.dozing = 0, time.Time{}, false }
