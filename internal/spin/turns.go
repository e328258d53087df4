package spin

import (
	"os"
	"runtime"
	"time"

	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/verbs"
)

// The pace of Turns: it yields every minYield to maxYield of a loop's
// run, well under the 10 ms after which the runtime preempts a goroutine
// that has not rescheduled.
const (
	minYield = 2 * time.Millisecond
	maxYield = 2 * minYield
	// maxTurnsPerYield bounds the number of turns between two yields,
	// and so how long a loop whose turns suddenly grow longer goes
	// without: 256 turns of a microsecond, yielding every 256 µs, cost
	// the loop about 0.1 %.
	maxTurnsPerYield = 256
)

// Turns paces a data loop that keeps its P for long stretches: one that
// polls a kernel device's CQ and rings its doorbells without ever
// blocking, as perftest's loops do. Left alone, such a goroutine is
// preempted by the runtime every 10 ms with a signal, and delivering a
// signal costs the device's work in the same thread (rdma_rxe does the
// transport's work inside the doorbell's system call): measured in the
// interop lab's emulated guest, 64 KiB ib_write_bw on rxe0 lost about 6 %
// of its bandwidth to them (GODEBUG=asyncpreemptoff=1 won it back). Turns
// yields the P itself every few milliseconds, which the runtime counts as
// rescheduling, so no signal is sent. On a soft device, whose loops
// already yield to the device's goroutines, Turn does nothing.
//
// Turns reads the clock only when it yields, every so many turns: it
// doubles or halves that number to keep the time between yields within
// [minYield, maxYield] (in an emulated guest a clock read is a system
// call, and a doorbell on rxe0 takes over a millisecond there, so even
// one read per turn would show).
type Turns struct {
	on       bool
	n, every int
	last     time.Time // of the last yield
	// now is the loop's clock; yield is runtime.Gosched, replaced in
	// tests.
	now   func() time.Time
	yield func()
}

// TurnsFor returns the Turns for loops on ctx's device. They yield only
// with one P (see OneP): with more, each yield wakes an idle P's thread,
// which may take the loop to another CPU, and that costs more than the
// signals (measured in the lab guest, medians of 8 to 14 rounds against
// perftest's bandwidth: two Ps 0.90x without Turns and 0.87x with them,
// one P 0.92x without and 0.97x with). now is the loop's clock (time.Now,
// or a cheaper one).
func TurnsFor(ctx *verbs.Context, now func() time.Time) *Turns {
	return newTurns(!inProcess(ctx) && runtime.GOMAXPROCS(0) == 1, now, runtime.Gosched)
}

// OneP runs a tool's process on one P when its device is outside the
// process, unless GOMAXPROCS is set in the environment: perftest's loops
// run on one thread, and so do the tools' on a kernel device, but with
// more Ps the runtime moves a goroutine that is preempted, or yields, to
// another thread and often another CPU, and on rxe that CPU has to warm to
// the transport's work (rdma_rxe does it in the doorbell's system call, on
// the poster's CPU). A soft device works in goroutines of the tool's own
// process and keeps every P. Only a program's main may call this: it
// changes the whole process.
func OneP(ctx *verbs.Context) {
	if !inProcess(ctx) && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

func inProcess(ctx *verbs.Context) bool {
	_, ok := ctx.Provider().(*soft.Context)
	return ok
}

func newTurns(on bool, now func() time.Time, yield func()) *Turns {
	t := &Turns{on: on, every: 1, now: now, yield: yield}
	if on {
		t.last = now()
	}
	return t
}

// Turn is called once per turn of a data loop. A nil Turns does nothing.
// It inlines into the loop; the work of a yield is in yieldNow.
func (t *Turns) Turn() {
	if t != nil && t.on {
		if t.n++; t.n >= t.every {
			t.yieldNow()
		}
	}
}

// yieldNow yields the P and retunes the number of turns between yields.
func (t *Turns) yieldNow() {
	t.n = 0
	now := t.now()
	switch d := now.Sub(t.last); {
	case d < minYield && t.every < maxTurnsPerYield:
		t.every *= 2
	case d > 2*maxYield:
		// Turns grew much longer: aim straight at minYield.
		t.every = max(1, int(int64(t.every)*int64(minYield)/int64(d)))
	case d > maxYield:
		t.every = max(1, t.every/2)
	}
	t.yield()
	t.last = now
}
