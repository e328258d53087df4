package perftest

import (
	"testing"
	"time"
)

// TestStampClockTSC: calibrated against the system clock, the TSC clock
// keeps to it within 2 % over 100 ms, and continues from where it was.
func TestStampClockTSC(t *testing.T) {
	if !haveTSC {
		t.Skip("no TSC on this architecture")
	}
	saved := stampClock
	t.Cleanup(func() { stampClock = saved })
	calibrateTSC(20 * time.Millisecond)
	if !stampClock.tsc {
		t.Fatal("TSC did not advance")
	}
	sys0, tsc0 := int64(time.Since(monoBase)), nowNS()
	if d := tsc0 - sys0; d < -int64(time.Millisecond) || d > int64(time.Millisecond) {
		t.Fatalf("TSC clock %d ns, system clock %d ns: %v apart", tsc0, sys0, time.Duration(d))
	}
	time.Sleep(100 * time.Millisecond)
	sys, tsc := int64(time.Since(monoBase))-sys0, nowNS()-tsc0
	if r := float64(tsc) / float64(sys); r < 0.98 || r > 1.02 {
		t.Fatalf("over %v of the system clock the TSC clock counted %v (ratio %.4f)", time.Duration(sys), time.Duration(tsc), r)
	}
}

// TestStampTime: stampTime is nowNS as a time.Time comparable with
// time.Now (monotonic readings both), with either clock behind nowNS.
func TestStampTime(t *testing.T) {
	saved := stampClock
	t.Cleanup(func() { stampClock = saved })
	for _, tsc := range []bool{false, true} {
		if tsc {
			if !haveTSC {
				continue
			}
			calibrateTSC(20 * time.Millisecond)
		} else {
			stampClock.tsc = false
		}
		before := time.Now()
		st := stampTime()
		after := time.Now()
		slack := time.Millisecond
		if st.Before(before.Add(-slack)) || st.After(after.Add(slack)) {
			t.Fatalf("tsc=%v: stampTime %v outside [%v, %v]", tsc, st, before, after)
		}
		if d := time.Until(st.Add(time.Second)); d < time.Second-slack || d > time.Second+slack {
			t.Fatalf("tsc=%v: a deadline 1 s after stampTime is %v away by time.Until", tsc, d)
		}
	}
}
