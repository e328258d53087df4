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
