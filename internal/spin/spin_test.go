package spin

import "testing"

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

// TestBlock: a loop on a soft device blocks after blockAfter empty polls
// in a row, one on a kernel device never does.
func TestBlock(t *testing.T) {
	soft, kernel := Spinner{yield: true}, Spinner{}
	for i := 1; i <= 2*blockAfter; i++ {
		soft.Empty()
		kernel.Empty()
		if got, want := soft.Block(), i >= blockAfter; got != want {
			t.Fatalf("soft device, %d empty polls: Block() = %v", i, got)
		}
		if kernel.Block() {
			t.Fatalf("kernel device, %d empty polls: Block() = true", i)
		}
	}
	soft.Reset()
	if soft.Block() {
		t.Fatal("Block() after Reset")
	}
}
