package engine

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestSendQueueGrows fills send queues of several depths with the head
// moved around the ring first, so that growing moves wrapped WQEs, and
// checks that each WQE keeps its place, contents and extension, and that
// the ring never grows past its depth.
func TestSendQueueGrows(t *testing.T) {
	for _, c := range []struct {
		sge   int
		first bool
	}{{2, false}, {1, false}, {1, true}, {2, true}} {
		t.Run(fmt.Sprintf("sge=%d,first=%v", c.sge, c.first), func(t *testing.T) { testSendQueueGrows(t, c.sge, c.first) })
	}
}

func testSendQueueGrows(t *testing.T, sge int, inQP bool) {
	for _, depth := range []int{1, 3, 4, 5, 16, 64, 100} {
		for _, skew := range []int{0, 1, 3} {
			q := newSendQueue(depth, sge, 8)
			var own sendWQE
			if inQP {
				q.first = &own
			}
			// Move head and tail by skew before filling.
			for i := 0; i < skew && i < depth; i++ {
				q.push()
				q.pop()
			}
			first := q.tail
			for i := 0; i < depth; i++ {
				if q.full() {
					t.Fatalf("depth %d: full after %d pushes", depth, i)
				}
				w := q.push()
				w.wr.ID = uint64(i)
				w.setUD(&AV{Remote: netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})}, uint32(i), 0)
				w.setBind(&Bind{RKey: uint32(i)})
				w.inline = append(w.inline, byte(i))
				w.segs = append(w.segs, w.inline)
				if inQP && i == 0 && skew == 0 && w != &own {
					t.Fatalf("depth %d: the first WQE is not in the QP's own slot", depth)
				}
			}
			if !q.full() || len(q.slots) > depth {
				t.Fatalf("depth %d: full %v with %d slots", depth, q.full(), len(q.slots))
			}
			for i := 0; i < depth; i++ {
				w := q.at(first + uint64(i))
				if w.wr.ID != uint64(i) || w.ext.av.Remote.As4()[3] != byte(i) || w.ext.remoteQPN != uint32(i) ||
					w.ext.bind.RKey != uint32(i) || len(w.segs) != 1 || w.segs[0][0] != byte(i) {
					t.Fatalf("depth %d skew %d: WQE %d moved wrong: %+v", depth, skew, i, w.wr)
				}
				if sge == 1 && &w.segs[:1][0] != &w.seg1[0] {
					t.Fatalf("depth %d skew %d: WQE %d's scatter list left the slot", depth, skew, i)
				}
			}
			// Drain and refill: the slots are reused, not grown, and
			// keep their extensions (made once per slot).
			n := len(q.slots)
			for !q.empty() {
				q.pop()
			}
			for i := 0; i < depth; i++ {
				if w := q.push(); len(w.segs) != 0 || len(w.inline) != 0 || w.wr != (postedWR{}) || w.ext == nil {
					t.Fatalf("depth %d: a reused slot kept old state or lost its extension", depth)
				}
			}
			if len(q.slots) != n {
				t.Fatalf("depth %d: ring grew from %d to %d slots when refilled", depth, n, len(q.slots))
			}
		}
	}
}

// TestRecvQueueGrows is TestSendQueueGrows for receive queues.
func TestRecvQueueGrows(t *testing.T) {
	for _, depth := range []int{1, 4, 5, 64, 100} {
		q := newRecvQueue(depth, 2)
		q.push()
		q.pop()
		first := q.tail
		for i := 0; i < depth; i++ {
			if q.full() {
				t.Fatalf("depth %d: full after %d pushes", depth, i)
			}
			r := q.push()
			r.id, r.length = uint64(i), i
			r.segs = append(r.segs, []byte{byte(i)})
		}
		if !q.full() || len(q.slots) > depth {
			t.Fatalf("depth %d: full %v with %d slots", depth, q.full(), len(q.slots))
		}
		for i := 0; i < depth; i++ {
			r := q.pop()
			if r.id != uint64(i) || r.length != i || len(r.segs) != 1 || r.segs[0][0] != byte(i) {
				t.Fatalf("depth %d: receive %d came back as %+v", depth, i, r)
			}
			if q.tail-q.head != uint64(depth-1-i) || first+uint64(i)+1 != q.head {
				t.Fatalf("depth %d: counters %d..%d", depth, q.head, q.tail)
			}
		}
	}
}
