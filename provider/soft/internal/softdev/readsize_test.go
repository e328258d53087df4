package softdev

import "testing"

// TestReadSizer runs the read sizer over reads that find a fixed number of
// datagrams each (at most as many as asked for) and checks what it asks
// for: a ping-pong's reads of one settle on one, trying two ever more
// rarely; a stream's reads that fill their batch reach full size within a
// few reads, also after a long ping-pong; a burst shrinks the size to what
// arrived.
func TestReadSizer(t *testing.T) {
	const max = 16
	// run feeds n reads that each find per datagrams and returns the sizes
	// asked for.
	run := func(r *readSizer, per, n int) []int {
		asked := make([]int, n)
		for i := range asked {
			asked[i] = r.want
			r.observe(min(per, r.want))
		}
		return asked
	}
	count := func(asked []int, above int) int {
		k := 0
		for _, a := range asked {
			if a > above {
				k++
			}
		}
		return k
	}
	for _, tc := range []struct {
		name         string
		before       int // reads of one first (a ping-pong)
		per, n       int
		last         int // the size asked for last
		maxAboveLast int // reads that asked for more than last, at most
	}{
		{name: "ping-pong", per: 1, n: 1000, last: 1, maxAboveLast: 1 + 20}, // the first read, then tries at 1, 2, 4 … 64 reads, then every 64
		{name: "stream", per: max, n: 10, last: max},
		{name: "stream after ping-pong", before: 1000, per: max, n: maxGrowAfter + 8, last: max},
		{name: "bursts of 3", per: 3, n: 500, last: 3, maxAboveLast: 1 + 20},
		{name: "empty reads", per: 0, n: 100, last: max},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReadSizer(max)
			run(&r, 1, tc.before)
			asked := run(&r, tc.per, tc.n)
			if got := r.want; got != tc.last {
				t.Errorf("asks for %d after %d reads (%v), want %d", got, tc.n, asked, tc.last)
			}
			if k := count(asked, tc.last); k > tc.maxAboveLast && tc.last < max {
				t.Errorf("%d of %d reads asked for more than %d, want at most %d", k, tc.n, tc.last, tc.maxAboveLast)
			}
		})
	}
}
