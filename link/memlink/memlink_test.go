package memlink

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
	addrC = netip.MustParseAddr("10.0.0.3")
)

// dgram returns datagram number i from a to b: i three times as 4 bytes
// (so it survives the corruption of one byte), then filler.
func dgram(i int, a, b netip.Addr) link.Datagram {
	buf := make([]byte, 12+i%60)
	for k := range 3 {
		binary.BigEndian.PutUint32(buf[4*k:], uint32(i))
	}
	for j := 12; j < len(buf); j++ {
		buf[j] = byte(i * j)
	}
	return link.Datagram{
		Buf: buf,
		Src: netip.AddrPortFrom(a, 4791),
		Dst: netip.AddrPortFrom(b, 4791),
	}
}

type delivery struct {
	at time.Time
	d  link.Datagram
}

// drain pops everything, advancing the fake clock to each delivery time.
func drain(t *testing.T, n *Network, limit int) []delivery {
	t.Helper()
	var out []delivery
	for range limit {
		at, ok := n.NextDelivery()
		if !ok {
			return out
		}
		d, ok := n.Pop(at)
		if !ok {
			t.Fatalf("Pop(%v) found nothing though NextDelivery said so", at)
		}
		out = append(out, delivery{at, d})
	}
	if _, ok := n.NextDelivery(); ok {
		t.Fatalf("more than %d deliveries", limit)
	}
	return out
}

// run sends count datagrams 10µs apart, popping what is due as the clock
// advances, then drains.
func run(t *testing.T, n *Network, count int) []delivery {
	t.Helper()
	var out []delivery
	now := t0
	for i := range count {
		n.Send(now, dgram(i, addrA, addrB))
		now = now.Add(10 * time.Microsecond)
		for range 10 * count {
			d, ok := n.Pop(now)
			if !ok {
				break
			}
			out = append(out, delivery{now, d})
		}
	}
	return append(out, drain(t, n, 10*count)...)
}

func TestDeterminism(t *testing.T) {
	f := Faults{
		Drop: 0.1, Duplicate: 0.1, Reorder: 0.1, Corrupt: 0.1,
		Delay: 50 * time.Microsecond, Jitter: 30 * time.Microsecond,
	}
	a := run(t, NewNetwork(42, f), 2000)
	b := run(t, NewNetwork(42, f), 2000)
	if len(a) != len(b) {
		t.Fatalf("same seed: %d vs %d deliveries", len(a), len(b))
	}
	for i := range a {
		if !a[i].at.Equal(b[i].at) || a[i].d.Src != b[i].d.Src || a[i].d.Dst != b[i].d.Dst || !bytes.Equal(a[i].d.Buf, b[i].d.Buf) {
			t.Fatalf("same seed: delivery %d differs", i)
		}
	}
	c := run(t, NewNetwork(43, f), 2000)
	same := len(a) == len(c)
	for i := 0; same && i < len(a); i++ {
		same = a[i].at.Equal(c[i].at) && bytes.Equal(a[i].d.Buf, c[i].d.Buf)
	}
	if same {
		t.Error("different seeds gave identical runs")
	}
}

func TestFaults(t *testing.T) {
	const count = 10000
	tests := []struct {
		name  string
		f     Faults
		check func(t *testing.T, s Stats, out []delivery)
	}{
		{"none", Faults{Delay: time.Millisecond}, func(t *testing.T, s Stats, out []delivery) {
			if s.Dropped+s.Duplicated+s.Reordered+s.Corrupted != 0 || len(out) != count {
				t.Errorf("stats %+v, %d deliveries", s, len(out))
			}
			for i, d := range out {
				if seqOf(d.d) != i {
					t.Fatalf("delivery %d is datagram %d", i, seqOf(d.d))
				}
			}
		}},
		{"drop", Faults{Drop: 0.05}, func(t *testing.T, s Stats, out []delivery) {
			inRange(t, "dropped", s.Dropped, 400, 600)
			if uint64(len(out)) != count-s.Dropped {
				t.Errorf("%d deliveries, want %d", len(out), count-s.Dropped)
			}
		}},
		{"duplicate", Faults{Duplicate: 0.1, Delay: 20 * time.Microsecond, Jitter: 40 * time.Microsecond}, func(t *testing.T, s Stats, out []delivery) {
			inRange(t, "duplicated", s.Duplicated, 850, 1150)
			if uint64(len(out)) != count+s.Duplicated {
				t.Errorf("%d deliveries, want %d", len(out), count+s.Duplicated)
			}
			seen := map[int]int{}
			for _, d := range out {
				seen[seqOf(d.d)]++
			}
			twice := 0
			for i := range count {
				switch seen[i] {
				case 1:
				case 2:
					twice++
				default:
					t.Fatalf("datagram %d delivered %d times", i, seen[i])
				}
			}
			if uint64(twice) != s.Duplicated {
				t.Errorf("%d datagrams delivered twice, stats say %d", twice, s.Duplicated)
			}
		}},
		{"reorder", Faults{Reorder: 0.05, Delay: 100 * time.Microsecond}, func(t *testing.T, s Stats, out []delivery) {
			inRange(t, "reordered", s.Reordered, 400, 600)
			// A reordered datagram is overtaken by the ones sent after it
			// during its extra 400µs (40 of them at 10µs apart).
			late := 0
			maxSoFar := -1
			for _, d := range out {
				if i := seqOf(d.d); i < maxSoFar {
					late++
				} else {
					maxSoFar = i
				}
			}
			if late < int(s.Reordered)*9/10 || uint64(late) > s.Reordered {
				t.Errorf("%d late deliveries for %d reordered", late, s.Reordered)
			}
			if len(out) != count {
				t.Errorf("%d deliveries", len(out))
			}
		}},
		{"corrupt", Faults{Corrupt: 0.1}, func(t *testing.T, s Stats, out []delivery) {
			inRange(t, "corrupted", s.Corrupted, 850, 1150)
			bad := 0
			for _, d := range out {
				orig := dgram(seqOfVote(d.d), addrA, addrB).Buf
				nbytes, nbits := 0, 0
				for j := range orig {
					if x := orig[j] ^ d.d.Buf[j]; x != 0 {
						nbytes++
						nbits += bits.OnesCount8(x)
					}
				}
				if nbytes == 0 {
					continue
				}
				bad++
				if nbytes != 1 || nbits < 1 || nbits > 3 {
					t.Errorf("corruption changed %d bytes, %d bits", nbytes, nbits)
				}
			}
			if uint64(bad) != s.Corrupted {
				t.Errorf("%d corrupted datagrams seen, stats say %d", bad, s.Corrupted)
			}
		}},
		{"delay+jitter", Faults{Delay: 300 * time.Microsecond, Jitter: 200 * time.Microsecond}, func(t *testing.T, s Stats, out []delivery) {
			var lo, hi time.Duration = time.Hour, 0
			for _, d := range out {
				sent := t0.Add(time.Duration(seqOf(d.d)) * 10 * time.Microsecond)
				lat := d.at.Sub(sent)
				lo, hi = min(lo, lat), max(hi, lat)
			}
			// Pop is polled every 10µs, so a delivery may be seen up to 10µs late.
			if lo < 300*time.Microsecond || hi >= 510*time.Microsecond || hi-lo < 150*time.Microsecond {
				t.Errorf("latency range [%v, %v], want within [300µs, 510µs) and spread", lo, hi)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := NewNetwork(7, tc.f)
			out := run(t, n, count)
			s := n.Stats()
			if s.Sent != count || s.Delivered != uint64(len(out)) || s.InFlight != 0 {
				t.Errorf("stats %+v, %d deliveries", s, len(out))
			}
			tc.check(t, s, out)
		})
	}
}

func seqOf(d link.Datagram) int { return int(binary.BigEndian.Uint32(d.Buf)) }

// seqOfVote recovers the number of a datagram with at most one corrupted
// byte: at least two of the three copies agree.
func seqOfVote(d link.Datagram) int {
	x, y, z := binary.BigEndian.Uint32(d.Buf), binary.BigEndian.Uint32(d.Buf[4:]), binary.BigEndian.Uint32(d.Buf[8:])
	if x == y || x == z {
		return int(x)
	}
	return int(y)
}

func inRange(t *testing.T, what string, v, lo, hi uint64) {
	t.Helper()
	if v < lo || v > hi {
		t.Errorf("%s = %d, want %d..%d", what, v, lo, hi)
	}
}

func TestOrderAndTies(t *testing.T) {
	n := NewNetwork(1, Faults{Delay: time.Millisecond})
	if _, ok := n.NextDelivery(); ok {
		t.Fatal("NextDelivery on an empty network")
	}
	// Same send time: delivered in send order.
	for i := range 100 {
		n.Send(t0, dgram(i, addrA, addrB))
	}
	// A datagram sent later with no delay comes due first.
	n.SetFaults(Faults{})
	n.Send(t0.Add(10*time.Microsecond), dgram(1000, addrB, addrA))
	at, ok := n.NextDelivery()
	if !ok || !at.Equal(t0.Add(10*time.Microsecond)) {
		t.Fatalf("NextDelivery = %v, %v", at, ok)
	}
	if _, ok := n.Pop(t0); ok {
		t.Fatal("Pop before anything is due")
	}
	d, ok := n.Pop(t0.Add(time.Millisecond - 1))
	if !ok || seqOf(d) != 1000 || d.Src.Addr() != addrB {
		t.Fatalf("Pop = %v, %v", d, ok)
	}
	if _, ok := n.Pop(t0.Add(time.Millisecond - 1)); ok {
		t.Fatal("Pop of a datagram not yet due")
	}
	for i := range 100 {
		d, ok := n.Pop(t0.Add(time.Hour))
		if !ok || seqOf(d) != i {
			t.Fatalf("tie %d: got %v, %v", i, d, ok)
		}
	}
	if _, ok := n.Pop(t0.Add(time.Hour)); ok {
		t.Fatal("Pop of an empty network")
	}
}

func TestSendCopiesBuffer(t *testing.T) {
	n := NewNetwork(1, Faults{})
	d := dgram(5, addrA, addrB)
	orig := append([]byte(nil), d.Buf...)
	n.Send(t0, d)
	n.Send(t0, d)
	for i := range d.Buf {
		d.Buf[i] = 0xEE
	}
	a, _ := n.Pop(t0)
	b, _ := n.Pop(t0)
	if !bytes.Equal(a.Buf, orig) || !bytes.Equal(b.Buf, orig) {
		t.Fatal("network retained the sender's buffer")
	}
	a.Buf = append(a.Buf, 1, 2, 3) // must not overwrite b
	if !bytes.Equal(b.Buf, orig) {
		t.Fatal("popped buffers overlap")
	}
}

func TestPartition(t *testing.T) {
	n := NewNetwork(1, Faults{Delay: time.Millisecond})
	n.Send(t0, dgram(0, addrA, addrB)) // in flight when the cut comes
	n.Partition(addrB, addrA, true)
	n.Send(t0, dgram(1, addrA, addrB))
	n.Send(t0, dgram(2, addrB, addrA))
	n.Send(t0, dgram(3, addrA, addrC)) // unaffected
	if s := n.Stats(); s.Dropped != 2 || s.InFlight != 2 {
		t.Fatalf("stats %+v", s)
	}
	out := drain(t, n, 10)
	if len(out) != 1 || seqOf(out[0].d) != 3 {
		t.Fatalf("delivered %d datagrams", len(out))
	}
	if s := n.Stats(); s.Dropped != 3 {
		t.Fatalf("in-flight datagram not dropped: %+v", s)
	}
	n.Partition(addrA, addrB, false)
	n.Send(t0, dgram(4, addrA, addrB))
	if out := drain(t, n, 10); len(out) != 1 || seqOf(out[0].d) != 4 {
		t.Fatalf("after healing: %d deliveries", len(out))
	}
	// IPv4-mapped addresses are the same hosts.
	n.Partition(netip.AddrFrom16(addrA.As16()), addrB, true)
	n.Send(t0, dgram(5, addrA, addrB))
	if out := drain(t, n, 10); len(out) != 0 {
		t.Fatal("mapped partition did not cut")
	}
}

func TestSetFaultsDrain(t *testing.T) {
	n := NewNetwork(3, Faults{Drop: 1})
	for i := range 10 {
		n.Send(t0, dgram(i, addrA, addrB))
	}
	n.SetFaults(Faults{Drop: -3, Corrupt: 7}) // clamped to 0 and 1
	n.Send(t0, dgram(10, addrA, addrB))
	n.SetFaults(Faults{})
	n.Send(t0, dgram(11, addrA, addrB))
	s := n.Stats()
	if s.Dropped != 10 || s.Corrupted != 1 {
		t.Fatalf("stats %+v", s)
	}
	out := drain(t, n, 10)
	if len(out) != 2 || !bytes.Equal(out[1].d.Buf, dgram(11, addrA, addrB).Buf) {
		t.Fatalf("deliveries %v", out)
	}
}

func TestEmptyDatagram(t *testing.T) {
	n := NewNetwork(3, Faults{Corrupt: 1})
	n.Send(t0, link.Datagram{Dst: netip.AddrPortFrom(addrB, 4791)})
	if d, ok := n.Pop(t0); !ok || len(d.Buf) != 0 {
		t.Fatalf("Pop = %v, %v", d, ok)
	}
}

func BenchmarkNetworkSendPop(b *testing.B) {
	n := NewNetwork(1, Faults{Delay: time.Microsecond, Jitter: time.Microsecond})
	d := dgram(1, addrA, addrB)
	d.Buf = make([]byte, 1084)
	now := t0
	b.ReportAllocs()
	for range b.N {
		n.Send(now, d)
		now = now.Add(time.Microsecond)
		n.Pop(now)
	}
}
