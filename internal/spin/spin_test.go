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
