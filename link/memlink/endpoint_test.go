package memlink

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
)

const testTimeout = 5 * time.Second

// receiveN reads n datagrams from e, failing after testTimeout.
func receiveN(t *testing.T, e *Endpoint, n int) []link.Datagram {
	t.Helper()
	type result struct {
		ds  []link.Datagram
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var got []link.Datagram
		batch := make([]link.Datagram, e.MaxBatch())
		for len(got) < n {
			for i := range batch {
				batch[i].Buf = make([]byte, 0, 128)
			}
			k, err := e.Receive(batch[:min(len(batch), n-len(got))])
			if err != nil {
				ch <- result{got, err}
				return
			}
			got = append(got, batch[:k]...)
		}
		ch <- result{got, nil}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Receive after %d of %d: %v", len(r.ds), n, r.err)
		}
		return r.ds
	case <-time.After(testTimeout):
		e.Close() // unblocks the goroutine
		<-ch
		t.Fatalf("timed out waiting for %d datagrams", n)
		return nil
	}
}

func TestEndpointExchange(t *testing.T) {
	n := NewNetwork(1, Faults{Delay: time.Millisecond, Jitter: time.Millisecond})
	a, err := n.Endpoint(addrA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := n.Endpoint(addrB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := n.Endpoint(addrA); err == nil {
		t.Error("second endpoint on the same address")
	}

	var batch []link.Datagram
	for i := range 200 {
		d := dgram(i, addrC, addrB) // Src.Addr is replaced by a's address
		d.Src = netip.AddrPortFrom(addrC, uint16(0xC000+i%2))
		if i%3 == 0 {
			d.Src = netip.AddrPortFrom(addrC, 0)
		}
		batch = append(batch, d)
	}
	start := time.Now()
	if err := a.Send(batch); err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, b, 200)
	if el := time.Since(start); el < time.Millisecond {
		t.Errorf("delivered after %v, before the 1ms delay", el)
	}
	seen := map[int]bool{}
	for _, d := range got {
		i := seqOf(d)
		seen[i] = true
		want := uint16(0xC000 + i%2)
		if i%3 == 0 {
			want = link.RoCEPort
		}
		if d.Src.Addr() != addrA || d.Src.Port() != want || d.Dst.Addr() != addrB {
			t.Errorf("datagram %d: %v -> %v", i, d.Src, d.Dst)
		}
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct datagrams", len(seen))
	}

	// And back.
	if err := b.Send([]link.Datagram{dgram(7, addrB, addrA)}); err != nil {
		t.Fatal(err)
	}
	if d := receiveN(t, a, 1)[0]; seqOf(d) != 7 {
		t.Errorf("got %d", seqOf(d))
	}
	if a.LocalAddr().Addr() != addrA || a.LocalAddr().Port() != link.RoCEPort || a.SourcePort(0) != link.RoCEPort {
		t.Errorf("LocalAddr %v", a.LocalAddr())
	}
}

func TestEndpointCloseUnblocks(t *testing.T) {
	n := NewNetwork(1, Faults{Delay: time.Hour})
	a, err := n.Endpoint(addrA)
	if err != nil {
		t.Fatal(err)
	}
	// A datagram that never comes due leaves the timer armed until Close.
	if err := a.Send([]link.Datagram{dgram(1, addrA, addrA)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.Receive([]link.Datagram{{Buf: make([]byte, 0, 64)}})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	a.Close()
	select {
	case err := <-done:
		if !errors.Is(err, link.ErrClosed) {
			t.Fatalf("Receive: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Close did not unblock Receive")
	}
	if err := a.Close(); err != nil {
		t.Error(err)
	}
	if err := a.Send(nil); !errors.Is(err, link.ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	// The address is free again.
	b, err := n.Endpoint(addrA)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

func TestEndpointUndeliverable(t *testing.T) {
	n := NewNetwork(1, Faults{})
	a, err := n.Endpoint(addrA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	big := dgram(1, addrA, addrA)
	big.Buf = make([]byte, 200)
	if err := a.Send([]link.Datagram{
		dgram(0, addrA, addrC), // nobody at addrC
		big,                    // too big for the receive buffer
		dgram(2, addrA, addrA),
	}); err != nil {
		t.Fatal(err)
	}
	if d := receiveN(t, a, 1)[0]; seqOf(d) != 2 {
		t.Errorf("got %d", seqOf(d))
	}
	if s := n.Stats(); s.Undeliverable != 2 || s.Delivered != 3 {
		t.Errorf("stats %+v", s)
	}
}

func TestEndpointFaults(t *testing.T) {
	n := NewNetwork(9, Faults{Drop: 0.5, Jitter: time.Millisecond})
	a, err := n.Endpoint(addrA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := n.Endpoint(addrB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var batch []link.Datagram
	for i := range 400 {
		batch = append(batch, dgram(i, addrA, addrB))
	}
	if err := a.Send(batch); err != nil {
		t.Fatal(err)
	}
	s := n.Stats()
	inRange(t, "dropped", s.Dropped, 150, 250)
	receiveN(t, b, 400-int(s.Dropped))
}
