//go:build linux

package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/provider/soft/service"
	"github.com/rdma-go/rdma-go/wire"
)

var (
	lo    = netip.MustParseAddr("127.0.0.1")
	quiet = slog.New(slog.DiscardHandler)
)

// freePort returns a UDP port of 127.0.0.1 that nothing uses now, so that
// the test's service does not meet other tests' devices on 4791.
func freePort(t *testing.T) uint16 { return uint16(clitest.FreePort(t, "udp4")) }

// startServer runs a service on a socket in a temporary directory until
// the test ends.
func startServer(t *testing.T, path string) *service.Server {
	t.Helper()
	srv, err := service.Listen(service.Config{Path: path, Quarantine: time.Minute, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

// startUnmanaged runs a service the test stops itself (Close).
func startUnmanaged(path string) (*service.Server, error) {
	srv, err := service.Listen(service.Config{Path: path, Logger: quiet})
	if err == nil {
		go srv.Serve()
	}
	return srv, err
}

func attach(t *testing.T, path string, port uint16) *service.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := service.Attach(ctx, path, lo, service.AttachOptions{Port: port, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// receiveOne reads one datagram from c within the test's patience.
func receiveOne(t *testing.T, c *service.Client) link.Datagram {
	t.Helper()
	type result struct {
		d   link.Datagram
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b := []link.Datagram{{Buf: make([]byte, link.MaxDatagram)}}
		n, err := c.Receive(b)
		if n == 0 && err == nil {
			err = errors.New("Receive returned nothing")
		}
		ch <- result{b[0], err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.d
	case <-time.After(10 * time.Second):
		t.Fatal("no datagram within 10 s")
	}
	return link.Datagram{}
}

func rcPacket(qpn uint32, tag byte) []byte {
	p := make([]byte, wire.BTHLen+8+wire.ICRCLen)
	wire.BTH(p).Encode(wire.RCSendOnly, false, 0, qpn, false, 0)
	p[wire.BTHLen] = tag
	return p
}

func TestNoService(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.sock")
	_, err := service.Attach(context.Background(), path, lo, service.AttachOptions{})
	if !errors.Is(err, service.ErrNoService) {
		t.Fatalf("Attach with no service: %v, want ErrNoService", err)
	}
}

// TestForwardBySlot: two clients on one address each receive exactly the
// packets for their own QPNs, from the sender's address and port.
func TestForwardBySlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	srv := startServer(t, path)
	port := freePort(t)
	a, b := attach(t, path, port), attach(t, path, port)
	if a.Slot() == b.Slot() || a.Slot() == 0 || b.Slot() == 0 {
		t.Fatalf("slots %d and %d", a.Slot(), b.Slot())
	}
	if a.GUID() != b.GUID() || a.GUID() == 0 {
		t.Fatalf("GUIDs %#x and %#x: want one, non-zero, for the address", a.GUID(), b.GUID())
	}
	if a.LocalAddr() != netip.AddrPortFrom(lo, port) {
		t.Fatalf("LocalAddr %v", a.LocalAddr())
	}
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)}
	firstB, _ := service.QPNRange(b.Slot())
	firstA, _ := service.QPNRange(a.Slot())
	peer.WriteToUDP(rcPacket(0xFE0002, 0), to) // a free slot: dropped
	peer.WriteToUDP(rcPacket(firstB, 'b'), to)
	peer.WriteToUDP(rcPacket(firstA, 'a'), to)
	gb, ga := receiveOne(t, b), receiveOne(t, a)
	if gb.Buf[wire.BTHLen] != 'b' || ga.Buf[wire.BTHLen] != 'a' {
		t.Fatalf("b got %q, a got %q", gb.Buf[wire.BTHLen], ga.Buf[wire.BTHLen])
	}
	want := peer.LocalAddr().(*net.UDPAddr).AddrPort()
	if gb.Src != want || gb.Dst != netip.AddrPortFrom(lo, port) || len(gb.Buf) != wire.BTHLen+8+wire.ICRCLen {
		t.Fatalf("datagram %v → %v, %d bytes; want from %v", gb.Src, gb.Dst, len(gb.Buf), want)
	}
	// The service counts the packet for no process when it reads it from
	// its own socket, which may lag the others' receives by a moment.
	eventually(t, func() bool {
		st := srv.Stats()
		return len(st) == 1 && st[0].Clients == 2 && st[0].Sockets == 3 && st[0].Unrouted == 1
	}, func() string { return fmt.Sprintf("stats %+v", srv.Stats()) })
}

// eventually polls cond every 5 ms for up to 10 s, then fails with what
// why says.
func eventually(t *testing.T, cond func() bool, why func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(why())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClaims: a service ID belongs to one process at a time.
func TestClaims(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	startServer(t, path)
	port := freePort(t)
	a, b := attach(t, path, port), attach(t, path, port)
	const id = 0x0106000000004E21
	if err := a.Claim(id); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(id); !errors.Is(err, service.ErrBusy) {
		t.Fatalf("second claim: %v, want ErrBusy", err)
	}
	a.Release(id)
	if err := b.Claim(id); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	if err := a.Claim(id); !errors.Is(err, service.ErrBusy) {
		t.Fatalf("claim of b's ID: %v, want ErrBusy", err)
	}
	b.Close()
	// b's claims go with it.
	var err error
	eventually(t, func() bool { err = a.Claim(id); return err == nil },
		func() string { return fmt.Sprintf("claim after the owner closed: %v", err) })
}

// TestQuarantine: the slot of a client that went is not given to the next.
func TestQuarantine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	startServer(t, path)
	port := freePort(t)
	a := attach(t, path, port)
	keep := attach(t, path, port) // keeps the address open
	old := a.Slot()
	a.Close()
	time.Sleep(50 * time.Millisecond)
	c := attach(t, path, port)
	if c.Slot() == old || c.Slot() == keep.Slot() {
		t.Fatalf("new client got slot %d; the closed one had %d, the open one %d", c.Slot(), old, keep.Slot())
	}
}

// TestServiceRestart: a client whose service dies sees its port go down,
// attaches to the next service by itself, gets its slot back and claims
// its service IDs again.
func TestServiceRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	srv, err := startUnmanaged(path)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	down, up := make(chan struct{}, 1), make(chan uint8, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := service.Attach(ctx, path, lo, service.AttachOptions{Port: port, Logger: quiet,
		OnDown: func() { down <- struct{}{} }, OnUp: func(s uint8) { up <- s }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const id = 0x0106000000001234
	if err := c.Claim(id); err != nil {
		t.Fatal(err)
	}
	slot := c.Slot()
	recv := make(chan link.Datagram, 4)
	go func() {
		for range 4 {
			b := []link.Datagram{{Buf: make([]byte, link.MaxDatagram)}}
			if n, err := c.Receive(b); err != nil || n == 0 {
				return
			}
			recv <- b[0]
		}
	}()
	srv.Close()
	select {
	case <-down:
	case <-time.After(10 * time.Second):
		t.Fatal("no OnDown after the service closed")
	}
	startServer(t, path)
	select {
	case s := <-up:
		if s != slot {
			t.Fatalf("slot %d after the restart, want %d back", s, slot)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no OnUp after the service came back")
	}
	// The claim came back with it: another client cannot take the ID.
	other := attach(t, path, port)
	if err := other.Claim(id); !errors.Is(err, service.ErrBusy) {
		t.Fatalf("claim of the reattached client's ID: %v, want ErrBusy", err)
	}
	// Packets reach it again.
	peer, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	first, _ := service.QPNRange(slot)
	peer.Write(rcPacket(first, 'x'))
	select {
	case d := <-recv:
		if d.Buf[wire.BTHLen] != 'x' {
			t.Fatalf("got %q", d.Buf[wire.BTHLen])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received after the restart")
	}
}
