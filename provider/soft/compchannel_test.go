package soft

import (
	"math/rand/v2"
	"testing"
)

// TestCompChannelQueue: events come out in the order they were posted,
// none lost, however posts and takes interleave (the queue compacts its
// array instead of growing it), and an emptied queue keeps its array.
func TestCompChannelQueue(t *testing.T) {
	ch := &compChannel{ready: make(chan struct{}, 1)}
	cqs := make([]*cq, 64)
	for i := range cqs {
		cqs[i] = &cq{}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var want []*cq
	for step := range 10000 {
		if rng.IntN(3) > 0 && len(want) < len(cqs) {
			q := cqs[step%len(cqs)]
			ch.post(q)
			want = append(want, q)
			continue
		}
		q, ok := ch.next()
		if len(want) == 0 {
			if ok {
				t.Fatalf("step %d: an event from an empty queue", step)
			}
			continue
		}
		if !ok || q != want[0] {
			t.Fatalf("step %d: took %p (%v), want %p", step, q, ok, want[0])
		}
		want = want[1:]
	}
	for len(want) > 0 {
		if q, ok := ch.next(); !ok || q != want[0] {
			t.Fatalf("draining: took %p (%v), want %p", q, ok, want[0])
		}
		want = want[1:]
	}
	if c := cap(ch.events); c == 0 || c > 2*len(cqs) {
		t.Errorf("emptied queue's array holds %d, want kept and at most %d", c, 2*len(cqs))
	}
	ch.post(cqs[0])
	if allocs := testing.AllocsPerRun(100, func() { ch.post(cqs[1]); ch.next() }); allocs != 0 {
		t.Errorf("%.1f allocations per event", allocs)
	}
}
