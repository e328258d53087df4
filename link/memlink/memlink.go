// Package memlink is a deterministic in-memory network for simulation tests.
//
// A Network carries link.Datagrams between addresses on a fake clock: Send
// schedules a copy of each datagram for delivery after a delay, applying
// drop, duplicate, reorder and corrupt faults drawn from a random source
// seeded at construction; Pop hands them back in delivery order. It starts
// no goroutines and never reads the wall clock, so the same seed and the
// same sequence of calls give the same deliveries, bit for bit.
//
// For tests that prefer goroutines and real time, Endpoint adapts a Network
// to the link.Link interface.
package memlink

import (
	"container/heap"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/rdma-go/rdma-go/link"
)

// Faults describes what the network does to each datagram. Probabilities
// are per datagram, between 0 and 1 (values outside are clamped).
type Faults struct {
	// Drop is the probability that a datagram is lost.
	Drop float64
	// Duplicate is the probability that a datagram is delivered twice. The
	// second copy gets its own delay (and its own chance of corruption and
	// reordering).
	Duplicate float64
	// Reorder is the probability that a datagram is held back by an extra
	// ReorderDelay, so datagrams sent after it can overtake it.
	Reorder float64
	// Corrupt is the probability that 1 to 3 bits of one random byte of the
	// datagram are flipped.
	Corrupt float64
	// Delay is the base one-way delay.
	Delay time.Duration
	// Jitter adds a uniformly random extra delay in [0, Jitter).
	Jitter time.Duration
	// ReorderDelay is the extra delay of a reordered datagram. 0 means
	// 4×(Delay+Jitter), or 1ms if that is 0.
	ReorderDelay time.Duration
}

// Stats counts what a Network has done.
type Stats struct {
	// Sent counts datagrams given to Send.
	Sent uint64
	// Dropped counts datagrams lost to the Drop fault or to a partition
	// (at send time or while in flight).
	Dropped uint64
	// Duplicated counts extra copies scheduled by the Duplicate fault.
	Duplicated uint64
	// Reordered counts copies held back by the Reorder fault.
	Reordered uint64
	// Corrupted counts copies with flipped bits.
	Corrupted uint64
	// Delivered counts datagrams returned by Pop (including those an
	// Endpoint then delivers).
	Delivered uint64
	// Undeliverable counts datagrams an Endpoint network could not hand to
	// a receiver: no endpoint at the destination address, its queue full,
	// or its buffer too small.
	Undeliverable uint64
	// InFlight is the number of datagrams scheduled and not yet popped.
	InFlight int
}

// Network is a simulated network. Its methods are safe for concurrent use,
// but determinism needs a deterministic order of calls.
type Network struct {
	mu     sync.Mutex
	rng    *rand.Rand
	faults Faults
	q      queue
	seq    uint64
	cut    map[[2]netip.Addr]bool
	stats  Stats
	slab   []byte

	// Endpoint mode (endpoint.go).
	eps     map[netip.Addr]*Endpoint
	timer   *time.Timer
	timerAt time.Time // when the armed timer fires; zero if not armed
}

// NewNetwork returns an empty network whose faults are drawn from a PCG
// random source seeded with seed.
func NewNetwork(seed int64, f Faults) *Network {
	return &Network{
		rng:    rand.New(rand.NewPCG(uint64(seed), 0x9E3779B97F4A7C15)),
		faults: clampFaults(f),
		cut:    make(map[[2]netip.Addr]bool),
	}
}

func clampFaults(f Faults) Faults {
	c := func(p float64) float64 { return min(max(p, 0), 1) }
	f.Drop, f.Duplicate, f.Reorder, f.Corrupt = c(f.Drop), c(f.Duplicate), c(f.Reorder), c(f.Corrupt)
	f.Delay, f.Jitter, f.ReorderDelay = max(f.Delay, 0), max(f.Jitter, 0), max(f.ReorderDelay, 0)
	if f.ReorderDelay == 0 {
		f.ReorderDelay = 4 * (f.Delay + f.Jitter)
		if f.ReorderDelay == 0 {
			f.ReorderDelay = time.Millisecond
		}
	}
	return f
}

// SetFaults replaces the faults applied to datagrams sent from now on, for
// example to stop faults for a final drain phase. Datagrams in flight keep
// their schedule.
func (n *Network) SetFaults(f Faults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults = clampFaults(f)
}

// Partition cuts (cut true) or restores (cut false) the path between a and b
// in both directions. While cut, datagrams sent between them are dropped,
// and so are those already in flight when they come due.
func (n *Network) Partition(a, b netip.Addr, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := pairKey(a, b)
	if cut {
		n.cut[k] = true
	} else {
		delete(n.cut, k)
	}
}

func pairKey(a, b netip.Addr) [2]netip.Addr {
	a, b = a.Unmap(), b.Unmap()
	if b.Less(a) {
		a, b = b, a
	}
	return [2]netip.Addr{a, b}
}

func (n *Network) isCut(d *link.Datagram) bool {
	return len(n.cut) > 0 && n.cut[pairKey(d.Src.Addr(), d.Dst.Addr())]
}

// Send puts a copy of d on the network at time now. d.Buf is not retained.
func (n *Network) Send(now time.Time, d link.Datagram) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sendLocked(now, d)
}

func (n *Network) sendLocked(now time.Time, d link.Datagram) {
	n.stats.Sent++
	f := &n.faults
	if n.isCut(&d) || n.chance(f.Drop) {
		n.stats.Dropped++
		return
	}
	n.emit(now, d)
	if n.chance(f.Duplicate) {
		n.stats.Duplicated++
		n.emit(now, d)
	}
}

// chance reports true with probability p. It draws from the random source
// only when 0 < p < 1.
func (n *Network) chance(p float64) bool {
	switch {
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	return n.rng.Float64() < p
}

// emit schedules one copy of d, corrupting and delaying it as the faults say.
func (n *Network) emit(now time.Time, d link.Datagram) {
	f := &n.faults
	if d.Payload != nil {
		d.Buf, d.Payload = d.AppendBytes(nil), nil
	} else {
		d.Buf = n.clone(d.Buf)
	}
	if len(d.Buf) > 0 && n.chance(f.Corrupt) {
		n.stats.Corrupted++
		i := n.rng.IntN(len(d.Buf))
		k := 1 + n.rng.IntN(3) // flip k distinct bits: a partial shuffle
		bits := [8]uint8{0, 1, 2, 3, 4, 5, 6, 7}
		for j := range k {
			r := j + n.rng.IntN(8-j)
			bits[j], bits[r] = bits[r], bits[j]
			d.Buf[i] ^= 1 << bits[j]
		}
	}
	delay := f.Delay
	if f.Jitter > 0 {
		delay += time.Duration(n.rng.Int64N(int64(f.Jitter)))
	}
	if n.chance(f.Reorder) {
		n.stats.Reordered++
		delay += f.ReorderDelay
	}
	n.seq++
	heap.Push(&n.q, item{at: now.Add(delay), seq: n.seq, d: d})
}

// clone copies b into a slab, so that small datagrams share allocations.
func (n *Network) clone(b []byte) []byte {
	const slabSize = 64 << 10
	if len(b) > slabSize/4 {
		return append([]byte(nil), b...)
	}
	if len(b) > len(n.slab) {
		n.slab = make([]byte, slabSize)
	}
	c := n.slab[:len(b):len(b)]
	n.slab = n.slab[len(b):]
	copy(c, b)
	return c
}

// NextDelivery returns the time the earliest datagram in flight is due, and
// false if none is in flight.
func (n *Network) NextDelivery() (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.q) == 0 {
		return time.Time{}, false
	}
	return n.q[0].at, true
}

// Pop removes and returns the earliest datagram due at or before now;
// datagrams due at the same time come out in the order they were sent. The
// caller owns the returned Buf. It returns false if nothing is due.
func (n *Network) Pop(now time.Time) (link.Datagram, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.popLocked(now)
}

func (n *Network) popLocked(now time.Time) (link.Datagram, bool) {
	for len(n.q) > 0 && !n.q[0].at.After(now) {
		it := heap.Pop(&n.q).(item)
		if n.isCut(&it.d) {
			n.stats.Dropped++
			continue
		}
		n.stats.Delivered++
		return it.d, true
	}
	return link.Datagram{}, false
}

// Stats returns the network's counters.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.stats
	s.InFlight = len(n.q)
	return s
}

// item is one scheduled delivery.
type item struct {
	at  time.Time
	seq uint64
	d   link.Datagram
}

// queue is a min-heap of items ordered by (at, seq).
type queue []item

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if c := q[i].at.Compare(q[j].at); c != 0 {
		return c < 0
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(item)) }
func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = item{}
	*q = old[:len(old)-1]
	return it
}
