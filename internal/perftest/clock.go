package perftest

import "time"

// The tools stamp every message they post and complete (perftest's
// get_cycles). Where reading the system clock is a system call — a VM
// whose clocksource is hpet, acpi_pm or xen rather than the TSC; the lab
// guest's reads take about 5 µs — a stamp costs more than the message and
// shows up in the latency it measures. There the tools count the CPU's
// time-stamp counter, as perftest does, scaled to nanoseconds by a
// calibration against the system clock when the program starts.

// monoBase is the origin of nowNS.
var monoBase = time.Now()

// stampClock is how nowNS reads time: the TSC with its scale, or not.
var stampClock struct {
	tsc  bool
	base int64   // TSC value at monoBase
	nsPT float64 // nanoseconds per tick
}

// slowClock is the cost of a clock read above which the TSC is used.
const slowClock = 500 * time.Nanosecond

func init() {
	if !haveTSC {
		return
	}
	const probes = 32
	t0 := time.Now()
	for range probes {
		_ = time.Now()
	}
	if time.Since(t0)/probes >= slowClock {
		// 20 ms against a clock read of a few µs: the scale is right
		// to about 0.05 %.
		calibrateTSC(20 * time.Millisecond)
	}
}

// calibrateTSC measures the TSC's rate against the system clock over d
// and switches nowNS to it.
func calibrateTSC(d time.Duration) {
	c0, w0 := tscAt()
	time.Sleep(d)
	c1, w1 := tscAt()
	if c1 <= c0 {
		return
	}
	nsPT := float64(w1.Sub(w0)) / float64(c1-c0)
	stampClock.base = c0 - int64(float64(w0.Sub(monoBase))/nsPT)
	stampClock.nsPT = nsPT
	stampClock.tsc = true
}

// nowNS is a monotonic clock in nanoseconds: perftest's get_cycles with a
// 1 GHz "cycle".
func nowNS() int64 {
	if stampClock.tsc {
		return int64(float64(rdtsc()-stampClock.base) * stampClock.nsPT)
	}
	return int64(time.Since(monoBase))
}

// tscAt reads the TSC and the system clock at one moment: of a few tries,
// the one whose clock read the two TSC reads bracket most tightly (a try
// that the scheduler interrupted is left out).
func tscAt() (int64, time.Time) {
	var best, at int64
	var w time.Time
	for range 5 {
		a := rdtsc()
		now := time.Now()
		b := rdtsc()
		if best == 0 || b-a < best {
			best, at, w = b-a, a+(b-a)/2, now
		}
	}
	return at, w
}

// stampTime is nowNS as a time.Time (with a monotonic reading), for the
// data loops' look-ups at their deadlines, their peer and their pace: in
// a guest whose clock reads are system calls a time.Now costs two (the
// wall and the monotonic clock), ~10 µs, which a look-up every ~1000
// empty polls made part of one round trip in ten (ib_send_lat on rxe0).
func stampTime() time.Time { return monoBase.Add(time.Duration(nowNS())) }
