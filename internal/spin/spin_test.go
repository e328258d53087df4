package spin

import (
	"testing"
	"time"
)

// TestEmptyCadence: a loop looks up every checkEvery empty polls, and
// counting starts again after Reset.
func TestEmptyCadence(t *testing.T) {
	for _, s := range []Spinner{{yield: true}, {yield: false}} {
		for round := range 3 {
			for i := 1; i <= 3*checkEvery; i++ {
				if got, want := s.Empty(), i%checkEvery == 0; got != want {
					t.Fatalf("yield=%v round %d: Empty() #%d = %v, want %v", s.yield, round, i, got, want)
				}
			}
			s.Empty()
			s.Reset()
		}
	}
}

// TestBlock: a loop on a soft device blocks once its look-ups have found
// nothing for blockAfter; one on a kernel device never does.
func TestBlock(t *testing.T) {
	soft, kernel := Spinner{yield: true}, Spinner{}
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, false}, {blockAfter / 2, false}, {blockAfter - 1, false}, {blockAfter, true}, {2 * blockAfter, true}} {
		if got := soft.Block(t0.Add(c.at)); got != c.want {
			t.Fatalf("soft device, %v after the first look-up: Block() = %v", c.at, got)
		}
		if kernel.Block(t0.Add(c.at)) {
			t.Fatalf("kernel device: Block() = true")
		}
	}
	soft.Reset()
	if soft.Block(t0.Add(time.Hour)) {
		t.Fatal("Block() after Reset")
	}
}

// TestIdle: a memory-polling loop's Idle paces it as Empty does until
// Block says to block; from then on every call sleeps and says to look
// up, until Reset.
func TestIdle(t *testing.T) {
	s := Spinner{yield: true}
	for i := 1; i <= checkEvery; i++ {
		if got, want := s.Idle(), i%checkEvery == 0; got != want {
			t.Fatalf("Idle() #%d = %v, want %v", i, got, want)
		}
	}
	t0 := time.Unix(1000, 0)
	s.Block(t0)
	if s.Block(t0.Add(blockAfter)) != true {
		t.Fatal("Block() after blockAfter = false")
	}
	for i := range 3 {
		start := time.Now()
		if !s.Idle() || time.Since(start) < dozeFor {
			t.Fatalf("dozing: Idle() #%d did not sleep and say to look up", i)
		}
	}
	s.Reset()
	if s.Idle() {
		t.Fatal("Idle() after Reset says to look up at once")
	}
}

// TestTurns: on a kernel device Turn yields every minYield to maxYield of
// the loop's run, reading the clock once per yield, whether its turns are
// short or long (then at every turn); after the turns grow suddenly
// longer it is back within maxYield at the next yield; on a soft device it
// never yields nor reads the clock.
func TestTurns(t *testing.T) {
	type phase struct {
		turn  time.Duration // the length of one turn
		turns int
	}
	for _, c := range []struct {
		name   string
		phases []phase
	}{
		{"1µs turns", []phase{{time.Microsecond, 200000}}},
		{"30µs turns", []phase{{30 * time.Microsecond, 20000}}},
		{"1.4ms turns", []phase{{1400 * time.Microsecond, 500}}},
		{"15ms turns", []phase{{15 * time.Millisecond, 50}}},
		{"30µs then 1.4ms turns", []phase{{30 * time.Microsecond, 20000}, {1400 * time.Microsecond, 500}}},
		{"1.4ms then 1µs turns", []phase{{1400 * time.Microsecond, 500}, {time.Microsecond, 200000}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := time.Unix(1000, 0)
			reads, yields := 0, 0
			lastYield := clock
			tu := newTurns(true, func() time.Time { reads++; return clock }, func() {
				yields++
				lastYield = clock
			})
			reads = 0 // newTurns's own read starts the first period
			var prev time.Duration
			for _, p := range c.phases {
				yields0, start := yields, clock
				var worst time.Duration
				for i := range p.turns {
					clock = clock.Add(p.turn)
					tu.Turn()
					gap := clock.Sub(lastYield)
					if i == 0 && prev > 0 {
						// The first yield after the change may come
						// maxTurnsPerYield turns late.
						continue
					}
					if yields > yields0+1 || prev == 0 {
						worst = max(worst, gap)
					}
				}
				run := clock.Sub(start)
				if limit := max(maxYield, p.turn); worst > limit {
					t.Errorf("%v turns: %v without a yield, want <= %v", p.turn, worst, limit)
				}
				n := yields - yields0
				if want := int(run/maxYield) - 2; p.turn < maxYield && n < want {
					t.Errorf("%v turns: %d yields in %v, want >= %d", p.turn, n, run, want)
				}
				if want := max(int(run/minYield)+10, p.turns/maxTurnsPerYield+10); p.turn < minYield && n > want {
					t.Errorf("%v turns: %d yields in %v, want <= %d", p.turn, n, run, want)
				}
				prev = p.turn
			}
			if reads != yields {
				t.Errorf("%d clock reads for %d yields", reads, yields)
			}
		})
	}
	soft := newTurns(false, func() time.Time { t.Fatal("soft device read the clock"); return time.Time{} },
		func() { t.Fatal("soft device yielded") })
	for range 10000 {
		soft.Turn()
	}
}
