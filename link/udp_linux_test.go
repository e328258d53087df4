//go:build linux

package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/rdma-go/rdma-go/wire"
)

// Tests use loopback addresses only: 127.0.0.0/8 and ::1.

const testTimeout = 5 * time.Second

// listenTest opens a UDP link on addr at a random high port, retrying when
// the port is taken, and closes it when the test ends. GSOAuto becomes
// GSOOff: GSO rewrites the ICRC trailer of IPv4 datagrams, which the tests
// of plain datagram behaviour do not expect (the GSO tests ask for it).
func listenTest(t testing.TB, addr string, opts UDPOptions) *UDP {
	t.Helper()
	a := netip.MustParseAddr(addr)
	if opts.GSO == GSOAuto {
		opts.GSO = GSOOff
	}
	var err error
	for range 50 {
		opts.Port = uint16(20000 + rand.IntN(12000))
		var u *UDP
		u, err = ListenUDP(a, opts)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			if a.Is6() && (errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT)) {
				t.Skipf("IPv6 unavailable: %v", err)
			}
			t.Fatalf("ListenUDP(%s): %v", addr, err)
		}
		t.Cleanup(func() { u.Close() })
		return u
	}
	t.Fatalf("ListenUDP(%s): no free port: %v", addr, err)
	return nil
}

// receiveN receives exactly n datagrams from u (copying them) or fails
// after testTimeout.
func receiveN(t testing.TB, u *UDP, n int) []Datagram {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	if err := u.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	defer u.SetReadDeadline(time.Time{})
	batch := make([]Datagram, u.MaxBatch())
	var got []Datagram
	for len(got) < n && time.Now().Before(deadline) {
		for i := range batch {
			batch[i].Buf = make([]byte, 0, 2048)
		}
		k, err := u.Receive(batch[:min(len(batch), n-len(got))])
		if err != nil {
			t.Fatalf("Receive after %d of %d datagrams: %v", len(got), n, err)
		}
		got = append(got, batch[:k]...)
	}
	if len(got) != n {
		t.Fatalf("received %d datagrams, want %d", len(got), n)
	}
	return got
}

func payload(from string, i, size int) []byte {
	b := make([]byte, size)
	copy(b, fmt.Sprintf("%s#%d|", from, i))
	for j := len(from) + 8; j < size; j++ {
		b[j] = byte(i + j)
	}
	return b
}

// exchange sends n datagrams from a to b in batches and checks what b gets.
func exchange(t *testing.T, a, b *UDP, n int) {
	t.Helper()
	var batch []Datagram
	want := map[string]bool{}
	for i := range n {
		p := payload(a.LocalAddr().String(), i, 16+(i*37)%1100)
		want[string(p)] = true
		batch = append(batch, Datagram{Buf: p, Dst: b.LocalAddr()})
	}
	for len(batch) > 0 {
		k := min(len(batch), 17) // not a multiple of MaxBatch
		if err := a.Send(batch[:k]); err != nil {
			t.Fatalf("Send: %v", err)
		}
		batch = batch[k:]
	}
	for _, d := range receiveN(t, b, n) {
		if d.Src != a.LocalAddr() {
			t.Errorf("Src = %v, want %v", d.Src, a.LocalAddr())
		}
		if d.Dst != b.LocalAddr() {
			t.Errorf("Dst = %v, want %v", d.Dst, b.LocalAddr())
		}
		if !want[string(d.Buf)] {
			t.Errorf("unexpected or duplicate datagram %q...", d.Buf[:min(len(d.Buf), 24)])
		}
		delete(want, string(d.Buf))
	}
}

func TestUDPExchangeIPv4(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	exchange(t, a, b, 150)
	exchange(t, b, a, 150)
	if s := a.Stats(); s.Sent != 150 || s.Received != 150 || s.SendDrops != 0 || s.ReceiveDrops != 0 {
		t.Errorf("a.Stats() = %+v", s)
	}
	if s := b.Stats(); s.Sent != 150 || s.Received != 150 {
		t.Errorf("b.Stats() = %+v", s)
	}
	if a.MaxBatch() != 64 {
		t.Errorf("MaxBatch = %d", a.MaxBatch())
	}
}

func TestUDPExchangeIPv6(t *testing.T) {
	a := listenTest(t, "::1", UDPOptions{})
	b := listenTest(t, "::1", UDPOptions{})
	// Both sides send UDP checksum 0 (UDP_NO_CHECK6_TX), so this also checks
	// that the receivers accept it (UDP_NO_CHECK6_RX).
	exchange(t, a, b, 100)
	exchange(t, b, a, 100)
}

func TestListenUDPMappedIsIPv4(t *testing.T) {
	a := listenTest(t, "::ffff:127.0.0.1", UDPOptions{})
	if got := a.LocalAddr().Addr(); got != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("LocalAddr = %v, want 127.0.0.1", got)
	}
	b := listenTest(t, "127.0.0.3", UDPOptions{})
	// A mapped destination works from an IPv4 link.
	mapped := netip.AddrPortFrom(netip.AddrFrom16(b.LocalAddr().Addr().As16()), b.LocalAddr().Port())
	if err := a.Send([]Datagram{{Buf: []byte("x"), Dst: mapped}}); err != nil {
		t.Fatal(err)
	}
	d := receiveN(t, b, 1)[0]
	if d.Src != a.LocalAddr() || string(d.Buf) != "x" {
		t.Fatalf("got %q from %v", d.Buf, d.Src)
	}
}

func TestListenUDPDefaultPort(t *testing.T) {
	a, err := ListenUDP(netip.AddrFrom4([4]byte{127, 0, byte(100 + rand.IntN(100)), byte(1 + rand.IntN(250))}), UDPOptions{})
	if errors.Is(err, syscall.EADDRINUSE) {
		t.Skipf("4791 taken: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.LocalAddr().Port() != RoCEPort {
		t.Fatalf("port = %d, want %d", a.LocalAddr().Port(), RoCEPort)
	}
}

func TestListenUDPBadAddress(t *testing.T) {
	for _, s := range []string{"0.0.0.0", "::", "224.0.0.1"} {
		if u, err := ListenUDP(netip.MustParseAddr(s), UDPOptions{}); err == nil {
			u.Close()
			t.Errorf("ListenUDP(%s) succeeded", s)
		}
	}
	if _, err := ListenUDP(netip.Addr{}, UDPOptions{}); err == nil {
		t.Error("ListenUDP(invalid) succeeded")
	}
}

func TestUDPAddrInUse(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	u, err := ListenUDP(a.LocalAddr().Addr(), UDPOptions{Port: a.LocalAddr().Port()})
	if err == nil {
		u.Close()
		t.Fatal("second ListenUDP on the same address succeeded")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error does not wrap EADDRINUSE: %v", err)
	}
	t.Log(err)
	msg := err.Error()
	for _, s := range []string{a.LocalAddr().String(), "already in use", "rdma_rxe", "another address"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not mention %q", msg, s)
		}
	}
}

func TestUDPCloseUnblocksReceive(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Receive([]Datagram{{Buf: make([]byte, 0, 2048)}})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let Receive block
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Receive after Close: %v, want ErrClosed", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Close did not unblock Receive")
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := a.Receive([]Datagram{{Buf: make([]byte, 0, 16)}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Receive after Close: %v", err)
	}
	if err := a.Send([]Datagram{{Buf: []byte("x"), Dst: a.LocalAddr()}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if p := a.SourcePort(40000); p != a.LocalAddr().Port() {
		t.Errorf("SourcePort after Close = %d", p)
	}
}

func TestUDPSourcePort(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{MaxSourcePorts: 2})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	own := a.LocalAddr().Port()
	if p := a.SourcePort(0); p != own {
		t.Errorf("SourcePort(0) = %d, want %d", p, own)
	}
	if p := a.SourcePort(own); p != own {
		t.Errorf("SourcePort(own) = %d, want %d", p, own)
	}

	// A port someone else holds falls back to the own port, and stays so.
	taken, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	takenPort := uint16(taken.LocalAddr().(*net.UDPAddr).Port)
	if p := a.SourcePort(takenPort); p != own {
		t.Errorf("SourcePort(taken %d) = %d, want %d", takenPort, p, own)
	}
	taken.Close()
	if p := a.SourcePort(takenPort); p != own {
		t.Errorf("SourcePort(taken %d) second time = %d, want cached %d", takenPort, p, own)
	}

	// Free ports (rxe's range 0xC000..0xFFFF) are bound.
	var ports []uint16
	for i := 0; len(ports) < 2 && i < 100; i++ {
		want := uint16(0xC000 + rand.IntN(0x3FFF))
		if p := a.SourcePort(want); p == want {
			ports = append(ports, want)
		}
	}
	if len(ports) < 2 {
		t.Fatalf("could bind only %d free source ports", len(ports))
	}
	if p := a.SourcePort(ports[0]); p != ports[0] {
		t.Errorf("SourcePort(%d) again = %d", ports[0], p)
	}
	if n := a.Stats().SourcePorts; n != 2 {
		t.Errorf("Stats().SourcePorts = %d, want 2", n)
	}
	// The cap is reached: other ports share the open ones, stably.
	for _, w := range []uint16{ports[1] ^ 1, ports[1] ^ 2, ports[1] ^ 3} {
		p := a.SourcePort(w)
		if p != ports[0] && p != ports[1] {
			t.Errorf("SourcePort(%d) beyond the cap = %d, want one of %v", w, p, ports)
		}
		if q := a.SourcePort(w); q != p {
			t.Errorf("SourcePort(%d) beyond the cap = %d, then %d", w, p, q)
		}
	}
	if n := a.Stats().SourcePorts; n != 2 {
		t.Errorf("Stats().SourcePorts = %d after the cap, want 2", n)
	}
	// A port taken once some are open shares one of them too.
	taken2, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer taken2.Close()
	c2 := listenTest(t, "127.0.0.1", UDPOptions{})
	var open2 uint16
	for i := 0; open2 == 0 && i < 100; i++ {
		if w := uint16(0xC000 + rand.IntN(0x3FFF)); c2.SourcePort(w) == w {
			open2 = w
		}
	}
	if open2 == 0 {
		t.Fatal("could bind no free source port")
	}
	if p := c2.SourcePort(uint16(taken2.LocalAddr().(*net.UDPAddr).Port)); p != open2 {
		t.Errorf("SourcePort(taken) with %d open = %d", open2, p)
	}

	// Send through all of them in one batch; b sees the chosen ports, in order.
	srcs := []uint16{ports[0], 0, ports[1], ports[1], takenPort, own, ports[0], 55555}
	want := []uint16{ports[0], own, ports[1], ports[1], own, own, ports[0], own}
	if ports[0] == 55555 || ports[1] == 55555 {
		want[7] = 55555
	}
	var batch []Datagram
	for i, s := range srcs {
		batch = append(batch, Datagram{
			Buf: []byte{byte(i)},
			Src: netip.AddrPortFrom(netip.MustParseAddr("127.9.9.9"), s), // Src.Addr is ignored
			Dst: b.LocalAddr(),
		})
	}
	if err := a.Send(batch); err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, b, len(batch))
	seen := map[byte]uint16{}
	for _, d := range got {
		if d.Src.Addr() != a.LocalAddr().Addr() {
			t.Errorf("Src addr = %v", d.Src.Addr())
		}
		seen[d.Buf[0]] = d.Src.Port()
	}
	for i, w := range want {
		if seen[byte(i)] != w {
			t.Errorf("datagram %d: source port %d, want %d", i, seen[byte(i)], w)
		}
	}
	// Disabled source ports.
	c := listenTest(t, "127.0.0.1", UDPOptions{MaxSourcePorts: -1})
	if p := c.SourcePort(ports[0] + 1); p != c.LocalAddr().Port() {
		t.Errorf("SourcePort with MaxSourcePorts<0 = %d", p)
	}
}

func TestUDPSendDrops(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	batch := []Datagram{
		{Buf: []byte("v6"), Dst: netip.MustParseAddrPort("[::1]:4791")},          // wrong family
		{Buf: []byte("port0"), Dst: netip.AddrPortFrom(b.LocalAddr().Addr(), 0)}, // port 0
		{Buf: make([]byte, 65520), Dst: b.LocalAddr()},                           // > lo MTU with DF: EMSGSIZE
		{Buf: []byte("ok"), Dst: b.LocalAddr()},
		{}, // no destination
	}
	if err := a.Send(batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	s := a.Stats()
	if s.Sent != 1 || s.SendDrops != 4 {
		t.Errorf("Stats = %+v, want Sent 1, SendDrops 4", s)
	}
	if d := receiveN(t, b, 1)[0]; string(d.Buf) != "ok" {
		t.Errorf("got %q", d.Buf)
	}
	v6 := listenTest(t, "::1", UDPOptions{})
	if err := v6.Send([]Datagram{{Buf: []byte("v4"), Dst: b.LocalAddr()}}); err != nil {
		t.Fatal(err)
	}
	if s := v6.Stats(); s.SendDrops != 1 {
		t.Errorf("IPv6 link sending to IPv4: Stats = %+v", s)
	}
}

func TestUDPReceiveTruncated(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	if err := a.Send([]Datagram{
		{Buf: bytes.Repeat([]byte("L"), 100), Dst: b.LocalAddr()},
		{Buf: []byte("short"), Dst: b.LocalAddr()},
	}); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(testTimeout))
	batch := []Datagram{{Buf: make([]byte, 0, 10)}, {Buf: make([]byte, 0, 10)}}
	var got []string
	for i := 0; i < 5 && len(got) == 0; i++ {
		n, err := b.Receive(batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range batch[:n] {
			got = append(got, string(d.Buf))
		}
	}
	if len(got) != 1 || got[0] != "short" {
		t.Fatalf("got %q, want [short]", got)
	}
	if s := b.Stats(); s.ReceiveDrops != 1 || s.Received != 1 {
		t.Errorf("Stats = %+v", s)
	}
	if cap(batch[0].Buf) != 10 || cap(batch[1].Buf) != 10 {
		t.Errorf("buffers lost: caps %d %d", cap(batch[0].Buf), cap(batch[1].Buf))
	}
}

func TestUDPConcurrentSend(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	var ports []uint16
	for i := 0; len(ports) < 3 && i < 50; i++ {
		w := uint16(0xC000 + rand.IntN(0x3FFF))
		if a.SourcePort(w) == w {
			ports = append(ports, w)
		}
	}
	ports = append(ports, 0)
	const senders, per = 4, 64
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i += 8 {
				var batch []Datagram
				for j := i; j < i+8; j++ {
					batch = append(batch, Datagram{
						Buf: []byte{byte(g), byte(j)},
						Src: netip.AddrPortFrom(netip.Addr{}, ports[(g+j)%len(ports)]),
						Dst: b.LocalAddr(),
					})
				}
				if err := a.Send(batch); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	got := receiveN(t, b, senders*per)
	wg.Wait()
	seen := map[[2]byte]bool{}
	for _, d := range got {
		k := [2]byte{d.Buf[0], d.Buf[1]}
		if seen[k] {
			t.Errorf("duplicate %v", k)
		}
		seen[k] = true
	}
	if s := a.Stats(); s.Sent != senders*per || s.SendDrops != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

// TestUDPSendRecvAllocs checks that a steady-state send and receive of a
// full batch does not allocate.
func TestUDPSendRecvAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool is randomized under the race detector")
	}
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	w := uint16(0xC000 + rand.IntN(0x3FFF))
	a.SourcePort(w)
	out, in := makeBatches(a, b, 64, 1084)
	for i := range out {
		if i%2 == 0 {
			out[i].Src = netip.AddrPortFrom(netip.Addr{}, w)
		}
	}
	b.SetReadDeadline(time.Now().Add(testTimeout))
	allocs := testing.AllocsPerRun(50, func() { sendRecv(t, a, b, out, in) })
	if allocs != 0 {
		t.Errorf("%.1f allocations per batch of %d, want 0", allocs, len(out))
	}
}

func makeBatches(a, b *UDP, n, size int) (out, in []Datagram) {
	out = make([]Datagram, n)
	in = make([]Datagram, n)
	for i := range out {
		out[i] = Datagram{Buf: make([]byte, size), Dst: b.LocalAddr()}
		in[i] = Datagram{Buf: make([]byte, 0, 2048)}
	}
	return out, in
}

// sendRecv sends out from a to b and receives all of it into in.
func sendRecv(t testing.TB, a, b *UDP, out, in []Datagram) {
	if err := a.Send(out); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < len(out); {
		n, err := b.Receive(in[:len(out)-got])
		if err != nil {
			t.Fatalf("Receive after %d of %d: %v", got, len(out), err)
		}
		got += n
	}
}

func BenchmarkUDPSendRecv(b *testing.B) {
	for _, size := range []int{64, 1084} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			x := listenTest(b, "127.0.0.1", UDPOptions{})
			y := listenTest(b, "127.0.0.2", UDPOptions{})
			out, in := makeBatches(x, y, x.MaxBatch(), size)
			y.SetReadDeadline(time.Now().Add(time.Minute))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			// One op is one datagram sent and received.
			for done := 0; done < b.N; done += len(out) {
				sendRecv(b, x, y, out[:min(len(out), b.N-done)], in)
			}
		})
	}
}

// rawSocket opens a raw socket that sees UDP packets, or skips the test.
func rawSocket(t *testing.T, family int) int {
	t.Helper()
	fd, err := unix.Socket(family, unix.SOCK_RAW, unix.IPPROTO_UDP)
	if err != nil {
		t.Skipf("raw socket needs CAP_NET_RAW: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

// rawFilter makes the raw socket fd of family keep only UDP datagrams to
// port: other tests' traffic (go test runs packages in parallel) could
// fill its buffer and drop the one a test waits for.
func rawFilter(t *testing.T, fd, family int, port uint16) {
	t.Helper()
	var prog []bpf.Instruction
	if family == unix.AF_INET { // the datagram starts at its IP header
		prog = append(prog, bpf.LoadMemShift{Off: 0}, bpf.LoadIndirect{Off: 2, Size: 2})
	} else { // an IPv6 raw socket starts at the UDP header
		prog = append(prog, bpf.LoadAbsolute{Off: 2, Size: 2})
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(port), SkipFalse: 1},
		bpf.RetConstant{Val: 0xFFFF},
		bpf.RetConstant{Val: 0})
	raw, err := bpf.Assemble(prog)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}); err != nil {
		t.Fatal(err)
	}
}

// rawWait reads from a raw socket until match accepts a packet or the
// deadline passes.
func rawWait(t *testing.T, fd int, match func(pkt []byte) bool) {
	t.Helper()
	buf := make([]byte, 70000)
	deadline := time.Now().Add(testTimeout)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			t.Fatal(err)
		}
		if match(buf[:n]) {
			return
		}
	}
	t.Fatal("packet not seen on the raw socket")
}

// TestUDPWireIPv4 checks what Linux puts on the wire for a sent IPv4
// datagram: DF set, IP ID 0 (needed to compute the ICRC), UDP checksum 0.
func TestUDPWireIPv4(t *testing.T) {
	raw := rawSocket(t, unix.AF_INET)
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	rawFilter(t, raw, unix.AF_INET, b.LocalAddr().Port())
	srcs := []uint16{a.LocalAddr().Port()}
	for i := 0; i < 50 && len(srcs) == 1; i++ {
		if p := uint16(0xC000 + rand.IntN(0x3FFF)); a.SourcePort(p) == p {
			srcs = append(srcs, p)
		}
	}
	for _, src := range srcs {
		for i := range 3 {
			tag := fmt.Sprintf("wire-%d-%d", src, i)
			if err := a.Send([]Datagram{{Buf: []byte(tag), Src: netip.AddrPortFrom(netip.Addr{}, src), Dst: b.LocalAddr()}}); err != nil {
				t.Fatal(err)
			}
			rawWait(t, raw, func(p []byte) bool {
				ihl := int(p[0]&0xF) * 4
				if len(p) < ihl+8 || !bytes.Equal(p[ihl+8:], []byte(tag)) {
					return false
				}
				id := binary.BigEndian.Uint16(p[4:])
				flags := binary.BigEndian.Uint16(p[6:])
				sport := binary.BigEndian.Uint16(p[ihl:])
				csum := binary.BigEndian.Uint16(p[ihl+6:])
				t.Logf("%s: ihl=%d id=%#04x flags=%#04x sport=%d udp csum=%#04x", tag, ihl, id, flags, sport, csum)
				if ihl != 20 || id != 0 || flags != 0x4000 || sport != src || csum != 0 {
					t.Errorf("%s: ihl=%d id=%#x flags=%#x sport=%d csum=%#x; want 20, 0, 0x4000, %d, 0", tag, ihl, id, flags, sport, csum, src)
				}
				return true
			})
		}
	}
	receiveN(t, b, 3*len(srcs))
}

// TestUDPWireIPv6 checks that sent IPv6 datagrams carry UDP checksum 0 and
// that a link accepts a zero-checksum datagram from elsewhere (rxe and NICs
// send them), while a plain socket would drop it.
func TestUDPWireIPv6(t *testing.T) {
	raw := rawSocket(t, unix.AF_INET6)
	a := listenTest(t, "::1", UDPOptions{})
	b := listenTest(t, "::1", UDPOptions{})
	rawFilter(t, raw, unix.AF_INET6, b.LocalAddr().Port())

	t.Run("SendZeroChecksum", func(t *testing.T) {
		if err := a.Send([]Datagram{{Buf: []byte("wire6"), Dst: b.LocalAddr()}}); err != nil {
			t.Fatal(err)
		}
		rawWait(t, raw, func(p []byte) bool { // an IPv6 raw socket gets the UDP header on
			if len(p) < 8 || !bytes.Equal(p[8:], []byte("wire6")) {
				return false
			}
			if csum := binary.BigEndian.Uint16(p[6:]); csum != 0 {
				t.Errorf("UDP checksum = %#04x, want 0", csum)
			}
			return true
		})
		receiveN(t, b, 1)
	})

	sendZero := func(t *testing.T, dst uint16, msg string) {
		pkt := make([]byte, 8+len(msg))
		binary.BigEndian.PutUint16(pkt[0:], 0xC132)
		binary.BigEndian.PutUint16(pkt[2:], dst)
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)))
		// pkt[6:8], the checksum, stays 0.
		copy(pkt[8:], msg)
		sa := &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}
		if err := unix.Sendto(raw, pkt, 0, sa); err != nil {
			t.Fatalf("raw sendto: %v", err)
		}
	}

	t.Run("ReceiveZeroChecksum", func(t *testing.T) {
		sendZero(t, b.LocalAddr().Port(), "zero-csum")
		d := receiveN(t, b, 1)[0]
		if string(d.Buf) != "zero-csum" || d.Src != netip.MustParseAddrPort("[::1]:49458") {
			t.Errorf("got %q from %v", d.Buf, d.Src)
		}
	})

	t.Run("PlainSocketDropsZeroChecksum", func(t *testing.T) {
		plain, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		sendZero(t, uint16(plain.LocalAddr().(*net.UDPAddr).Port), "dropped")
		plain.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, _, err := plain.ReadFromUDP(make([]byte, 100)); err == nil {
			t.Errorf("plain socket received a zero-checksum datagram (%d bytes); UDP_NO_CHECK6_RX would not be needed", n)
		}
	})
}

// TestUDPSourcePortSocketDiscards checks that datagrams sent to a
// source-port socket are discarded by its filter instead of filling its
// receive queue (nobody reads it).
func TestUDPSourcePortSocketDiscards(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	var w uint16
	for i := 0; i < 50 && w == 0; i++ {
		if p := uint16(0xC000 + rand.IntN(0x3FFF)); a.SourcePort(p) == p {
			w = p
		}
	}
	if w == 0 {
		t.Skip("no free source port")
	}
	stray := make([]Datagram, 10)
	for i := range stray {
		stray[i] = Datagram{Buf: []byte("stray"), Dst: netip.AddrPortFrom(a.LocalAddr().Addr(), w)}
	}
	if err := b.Send(stray); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Sent != 10 {
		t.Fatalf("Stats = %+v", s)
	}
	// /proc/net/udp: "sl local_address rem_address st tx_queue:rx_queue tr
	// tm->when retrnsmt uid timeout inode ref pointer drops".
	want := fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32([]byte{127, 0, 0, 1}), w)
	var queues, drops string
	for range 50 { // delivery on lo may lag the send a little
		tbl, err := os.ReadFile("/proc/net/udp")
		if err != nil {
			t.Skip(err)
		}
		for _, line := range strings.Split(string(tbl), "\n")[1:] {
			if f := strings.Fields(line); len(f) >= 13 && f[1] == want {
				queues, drops = f[4], f[12]
			}
		}
		if drops == "10" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("source-port socket %s: tx:rx queues %s, drops %s", want, queues, drops)
	if queues != "00000000:00000000" || drops != "10" {
		t.Errorf("queues %q, drops %q; want empty queues and 10 drops", queues, drops)
	}
}

// roceBatch builds RoCEv2 WRITE MIDDLE packets with ICRCs for ID 0, from a
// to b: sizes[i] payload bytes each, the payload bytes all i.
func roceBatch(a, b *UDP, sizes []int) []Datagram {
	var ds []Datagram
	for i, n := range sizes {
		p := make([]byte, wire.PacketLen(wire.RCWriteMiddle, n))
		wire.BTH(p).Encode(wire.RCWriteMiddle, false, wire.Pad(n), 0x12, false, wire.PSN(i))
		for j := wire.BTHLen; j < wire.BTHLen+n; j++ {
			p[j] = byte(i)
		}
		wire.PutICRC(a.LocalAddr().Addr(), b.LocalAddr().Addr(), a.LocalAddr().Port(), b.LocalAddr().Port(), p)
		ds = append(ds, Datagram{Buf: p, Dst: b.LocalAddr()})
	}
	return ds
}

// TestPackIovecs: pack gives a message one iovec per datagram part, except
// that parts following each other in memory share one, and never across
// two messages.
func TestPackIovecs(t *testing.T) {
	u := &UDP{is4: true}
	dst := netip.MustParseAddrPort("127.0.0.1:4791")
	arena := make([]byte, 400)
	run := func(bufs ...[]byte) []Datagram {
		var ds []Datagram
		for _, b := range bufs {
			ds = append(ds, Datagram{Buf: b, Dst: dst})
		}
		return ds
	}
	apart := func(n int) []byte { return make([]byte, n) }
	for _, c := range []struct {
		name  string
		msgs  [][]Datagram
		iovs  []int // per message
		lens0 int   // the first iovec's length
	}{
		{"back to back", [][]Datagram{run(arena[0:40:40], arena[40:80:80], arena[80:120:120])}, []int{1}, 120},
		{"apart", [][]Datagram{run(apart(40), apart(40), apart(40))}, []int{3}, 40},
		{"a gap", [][]Datagram{run(arena[0:40:40], arena[41:81:81])}, []int{2}, 40},
		{"two messages", [][]Datagram{run(arena[0:40:40], arena[40:80:80]), run(arena[80:120:120], arena[120:160:160])}, []int{1, 1}, 80},
		{"parts", [][]Datagram{{{Buf: arena[0:12:12], Payload: apart(8), PayloadAt: 12, Dst: dst}}}, []int{2}, 12},
	} {
		s := new(sendState)
		for m, ds := range c.msgs {
			u.pack(s, m, ds, 0, len(ds))
			s.m = m + 1
		}
		for m := range c.msgs {
			if got := int(s.hs[m].Hdr.Iovlen); got != c.iovs[m] {
				t.Errorf("%s: message %d has %d iovecs, want %d", c.name, m, got, c.iovs[m])
			}
		}
		if got := int(s.iov[0].Len); got != c.lens0 {
			t.Errorf("%s: first iovec %d bytes, want %d", c.name, got, c.lens0)
		}
	}
}

func TestGSORun(t *testing.T) {
	d1, d2 := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.2:1")
	mk := func(dst netip.AddrPort, sizes ...int) []Datagram {
		var ds []Datagram
		for _, n := range sizes {
			ds = append(ds, Datagram{Buf: make([]byte, n), Dst: dst})
		}
		return ds
	}
	for _, c := range []struct {
		ds   []Datagram
		i    int
		want int
	}{
		{mk(d1, 100, 100, 100), 0, 3},
		{mk(d1, 100, 100, 50, 100), 0, 3}, // a shorter one ends the run
		{mk(d1, 100, 200), 0, 1},          // a longer one does not join
		{mk(d1, 0, 0), 0, 1},
		{append(mk(d1, 100, 100), mk(d2, 100)...), 0, 2},
		{mk(d1, 100, 100, 100), 1, 3},
		{mk(d1, make([]int, 100)...), 0, 1},
		{mk(d1, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112, 4112), 0, 15},
	} {
		if got := gsoRun(c.ds, c.i); got != c.want {
			t.Errorf("gsoRun(%d datagrams, %d) = %d, want %d", len(c.ds), c.i, got, c.want)
		}
	}
	// A datagram's length counts its Payload.
	parts := mk(d1, 20, 100, 100)
	parts[0].Payload, parts[0].PayloadAt = make([]byte, 80), 12
	if got := gsoRun(parts, 0); got != 3 {
		t.Errorf("gsoRun of a 20+80-byte datagram and two of 100 = %d, want 3", got)
	}
	var many []int
	for range 100 {
		many = append(many, 40)
	}
	if got := gsoRun(mk(d1, many...), 0); got != maxGSOSegs {
		t.Errorf("gsoRun of 100 small datagrams = %d, want %d", got, maxGSOSegs)
	}
}

// TestUDPGSO sends runs of equal-size RoCEv2 packets with GSO and checks
// that a GRO receiver gets them coalesced (SegSize) and a plain receiver
// one by one, intact, with IPv4 ICRCs retagged for IDs 0, 1, 2, ... within
// each run; also with the packets' payloads in parts of their own
// (Datagram.Payload), as a device sends them from its memory.
func TestUDPGSO(t *testing.T) {
	for _, fam := range []struct{ a, b string }{{"127.0.0.1", "127.0.0.2"}, {"::1", "::1"}} {
		for _, c := range []struct{ gro, parts, contig bool }{
			{true, false, false}, {false, false, false}, {true, true, false}, {false, true, false}, {true, false, true}, {false, false, true},
		} {
			gro := c.gro
			t.Run(fmt.Sprintf("%s/gro=%v/parts=%v/contiguous=%v", fam.a, gro, c.parts, c.contig), func(t *testing.T) {
				a := listenTest(t, fam.a, UDPOptions{GSO: GSOOn})
				b := listenTest(t, fam.b, UDPOptions{GSO: GSOOff, GRO: gro})
				if !a.gso.Load() {
					t.Skip("no UDP GSO in this kernel")
				}
				sizes := []int{1024, 1024, 1024, 100, 1024, 1024, 8, 8, 8, 8}
				runs := [][2]int{{0, 4}, {4, 7}, {7, 10}} // [first, end) of each GSO run: a shorter datagram ends one
				out := roceBatch(a, b, sizes)
				if c.contig {
					// All datagrams back to back in one array, as the
					// engine lays out short packets: a GSO run's become
					// one iovec, and no two runs may share one.
					var all []byte
					for i := range out {
						all = append(all, out[i].Buf...)
					}
					for i, off := 0, 0; i < len(out); i++ {
						n := len(out[i].Buf)
						out[i].Buf = all[off : off+n : off+n]
						off += n
					}
				}
				if c.parts {
					for i := range out {
						// Head BTH, payload elsewhere, then pad and ICRC.
						d, n := &out[i], sizes[i]
						d.Payload = append([]byte(nil), d.Buf[wire.BTHLen:wire.BTHLen+n]...)
						d.Buf = append(d.Buf[:wire.BTHLen:wire.BTHLen], d.Buf[wire.BTHLen+n:]...)
						d.PayloadAt = wire.BTHLen
					}
				}
				if err := a.Send(out); err != nil {
					t.Fatal(err)
				}
				st := a.Stats()
				if st.GSOSends != 3 || st.GSOSegments != 10 || st.Sent != 10 {
					t.Fatalf("stats %+v: want 3 GSO sends of 10 datagrams", st)
				}
				b.SetReadDeadline(time.Now().Add(testTimeout))
				var got [][]byte
				batch := make([]Datagram, 8)
				for len(got) < len(sizes) {
					for i := range batch {
						batch[i].Buf = make([]byte, MaxDatagram)
					}
					n, err := b.Receive(batch)
					if err != nil {
						t.Fatalf("after %d datagrams: %v", len(got), err)
					}
					for _, d := range batch[:n] {
						if d.SegSize > 0 && !gro {
							t.Fatalf("SegSize %d without GRO", d.SegSize)
						}
						for buf := d.Buf; len(buf) > 0; {
							k := len(buf)
							if d.SegSize > 0 {
								k = min(k, d.SegSize)
							}
							got = append(got, buf[:k])
							buf = buf[k:]
						}
					}
				}
				if gro && b.Stats().Coalesced == 0 {
					t.Error("a GRO receiver saw no coalesced datagram")
				}
				if len(got) != len(sizes) {
					t.Fatalf("received %d datagrams, want %d", len(got), len(sizes))
				}
				for _, r := range runs {
					for i := r[0]; i < r[1]; i++ {
						p := got[i]
						if len(p) != wire.PacketLen(wire.RCWriteMiddle, sizes[i]) || wire.BTH(p).PSN() != wire.PSN(i) || p[wire.BTHLen] != byte(i) {
							t.Fatalf("datagram %d: wrong or reordered (%d bytes)", i, len(p))
						}
						src, dst := a.LocalAddr(), b.LocalAddr()
						if !wire.VerifyICRC(src.Addr(), dst.Addr(), src.Port(), dst.Port(), p, wire.ICRCIPv4AnyID) {
							t.Fatalf("datagram %d: bad ICRC", i)
						}
						id, ok := wire.RecoverIPv4ID(src.Addr(), dst.Addr(), src.Port(), dst.Port(), p)
						if want := uint16(i - r[0]); src.Addr().Is4() && (!ok || id != want) {
							t.Fatalf("datagram %d: ICRC for IPv4 ID %d (%v), want %d", i, id, ok, want)
						}
					}
				}
			})
		}
	}
}

// TestUDPPoller checks TryReceive (never waits) and ReceiveLocked (reads
// under the caller's lock and returns with it held when it got datagrams).
func TestUDPPoller(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	batch := make([]Datagram, 4)
	reset := func() []Datagram {
		for i := range batch {
			batch[i].Buf = make([]byte, 2048)
		}
		return batch
	}
	if n, err := b.TryReceive(reset()); n != 0 || err != nil {
		t.Fatalf("TryReceive on an empty socket = %d, %v", n, err)
	}
	if err := a.Send([]Datagram{{Buf: []byte("one"), Dst: b.LocalAddr()}, {Buf: []byte("two"), Dst: b.LocalAddr()}}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.TryReceive(reset()); n != 2 || err != nil || string(batch[0].Buf) != "one" || string(batch[1].Buf) != "two" {
		t.Fatalf("TryReceive = %d, %v", n, err)
	}
	var mu sync.Mutex
	done := make(chan int)
	go func() {
		n, err := b.ReceiveLocked(&mu, reset())
		if err != nil {
			t.Error(err)
		}
		if mu.TryLock() {
			t.Error("ReceiveLocked returned without the lock held")
		} else {
			mu.Unlock()
		}
		done <- n
	}()
	// Taking mu is the check: the receiver waits without holding it.
	mu.Lock()
	//lint:ignore SA2001 the lock itself is what is checked
	mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	if err := a.Send([]Datagram{{Buf: []byte("three"), Dst: b.LocalAddr()}}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-done:
		if n != 1 || string(batch[0].Buf) != "three" {
			t.Fatalf("ReceiveLocked = %d, %q", n, batch[0].Buf)
		}
	case <-time.After(testTimeout):
		t.Fatal("ReceiveLocked did not return")
	}
	b.Close()
	if _, err := b.ReceiveLocked(&mu, reset()); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReceiveLocked after Close: %v", err)
	}
	if _, err := b.TryReceive(reset()); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryReceive after Close: %v", err)
	}
}

// TestUDPQuiet checks that a quiet link does not wake a waiting Receive,
// and that turning quiet off wakes it for what was queued meanwhile.
func TestUDPQuiet(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{})
	b := listenTest(t, "127.0.0.2", UDPOptions{})
	var mu sync.Mutex
	batch := []Datagram{{Buf: make([]byte, 2048)}}
	b.SetQuiet(true)
	done := make(chan int, 1)
	go func() {
		n, err := b.ReceiveLocked(&mu, batch)
		if err != nil {
			t.Error(err)
		}
		if n > 0 {
			mu.Unlock()
		}
		done <- n
	}()
	time.Sleep(20 * time.Millisecond)
	if err := a.Send([]Datagram{{Buf: []byte("quiet"), Dst: b.LocalAddr()}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("a quiet link woke Receive")
	case <-time.After(50 * time.Millisecond):
	}
	b.SetQuiet(false)
	select {
	case n := <-done:
		if n != 1 || string(batch[0].Buf) != "quiet" {
			t.Fatalf("Receive = %d, %q", n, batch[0].Buf)
		}
	case <-time.After(testTimeout):
		t.Fatal("Receive not woken after SetQuiet(false)")
	}
	// Out of the wait set and back again (the socket leaves the epoll
	// instance and rejoins it): Receive still wakes.
	b.SetQuiet(true)
	b.SetQuiet(false)
	if err := a.Send([]Datagram{{Buf: []byte("again"), Dst: b.LocalAddr()}}); err != nil {
		t.Fatal(err)
	}
	if got := receiveN(t, b, 1); string(got[0].Buf) != "again" {
		t.Fatalf("Receive = %q", got[0].Buf)
	}
}

// TestUDPGSOWireIPv4 checks which IPv4 IDs the kernel gives the segments of
// a GSO send, and that the retagged ICRCs match them. Loopback normally
// passes a GSO datagram whole (it never gets IDs), so the test re-runs
// itself in a new network namespace where lo segments in software
// (ethtool -K lo tx-udp-segmentation off) and reads the segments from a
// raw socket. It needs root, unshare, ip and ethtool, and skips without.
func TestUDPGSOWireIPv4(t *testing.T) {
	if os.Getenv("RDMA_GO_GSO_WIRE_CHILD") == "1" {
		gsoWireChild(t)
		return
	}
	for _, tool := range []string{"unshare", "ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	script := `ip link set lo up && ethtool -K lo tx-udp-segmentation off >/dev/null && exec "$0" -test.run '^TestUDPGSOWireIPv4$' -test.v`
	cmd := exec.Command("unshare", "-n", "sh", "-c", script, os.Args[0])
	cmd.Env = append(os.Environ(), "RDMA_GO_GSO_WIRE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "Operation not permitted") || strings.Contains(string(out), "Cannot change") {
			t.Skipf("cannot set up the namespace: %s", out)
		}
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "segment") {
			t.Log(strings.TrimSpace(l))
		}
	}
	if !strings.Contains(string(out), "--- PASS: TestUDPGSOWireIPv4") {
		t.Fatalf("child did not pass:\n%s", out)
	}
}

func gsoWireChild(t *testing.T) {
	raw := rawSocket(t, unix.AF_INET)
	a := listenTest(t, "127.0.0.1", UDPOptions{GSO: GSOOn})
	b := listenTest(t, "127.0.0.2", UDPOptions{GSO: GSOOff})
	rawFilter(t, raw, unix.AF_INET, b.LocalAddr().Port())
	if !a.gso.Load() {
		t.Skip("no UDP GSO in this kernel")
	}
	sizes := []int{1024, 1024, 1024, 1024, 100}
	for round := range 2 { // each send starts again at ID 0
		out := roceBatch(a, b, sizes)
		if err := a.Send(out); err != nil {
			t.Fatal(err)
		}
		if st := a.Stats(); st.GSOSends != uint64(round+1) {
			t.Fatalf("stats %+v: want %d GSO sends", st, round+1)
		}
		for i := range sizes {
			rawWait(t, raw, func(p []byte) bool {
				ihl := int(p[0]&0xF) * 4
				if len(p) < ihl+8+wire.BTHLen || binary.BigEndian.Uint16(p[ihl+2:]) != b.LocalAddr().Port() {
					return false
				}
				pkt := p[ihl+8:]
				if wire.BTH(pkt).PSN() != wire.PSN(i) {
					return false
				}
				if len(p) > ihl+8+len(pkt) || len(pkt) != wire.PacketLen(wire.RCWriteMiddle, sizes[i]) {
					t.Fatalf("segment %d: %d bytes, want %d (lo did not segment?)", i, len(pkt), wire.PacketLen(wire.RCWriteMiddle, sizes[i]))
				}
				id := binary.BigEndian.Uint16(p[4:])
				flags := binary.BigEndian.Uint16(p[6:])
				body := pkt[:len(pkt)-wire.ICRCLen]
				want := wire.ICRCWithIPv4ID(a.LocalAddr().Addr(), b.LocalAddr().Addr(), id, a.LocalAddr().Port(), b.LocalAddr().Port(), body)
				got := binary.LittleEndian.Uint32(pkt[len(body):])
				t.Logf("round %d segment %d: ip id %d flags %#04x icrc ok=%v", round, i, id, flags, got == want)
				if id != uint16(i) || flags != 0x4000 || got != want {
					t.Fatalf("segment %d: id %d flags %#x icrc %#08x (want id %d, DF, icrc %#08x)", i, id, flags, got, i, want)
				}
				return true
			})
		}
	}
}

// BenchmarkTryReceiveEmpty is what one look at an empty socket costs a
// receiver that spins (softdev's receive goroutine after a batch).
func BenchmarkTryReceiveEmpty(b *testing.B) {
	x := listenTest(b, "127.0.0.1", UDPOptions{})
	in := make([]Datagram, x.MaxBatch())
	for i := range in {
		in[i].Buf = make([]byte, 0, 1500)
	}
	b.ReportAllocs()
	for b.Loop() {
		if n, err := x.TryReceive(in); n != 0 || err != nil {
			b.Fatal(n, err)
		}
	}
}

// TestReceiveShorterBatch: a read with a shorter batch between two with a
// longer one, over the same buffers, leaves nothing stale in the slots it
// did not cover: a GRO datagram that lands in one of them later still
// reports its segment size (a stale control-buffer length hid it once, and
// a 64 KiB super-datagram went up as one packet).
func TestReceiveShorterBatch(t *testing.T) {
	a := listenTest(t, "127.0.0.1", UDPOptions{GSO: GSOOn})
	b := listenTest(t, "127.0.0.2", UDPOptions{GSO: GSOOff, GRO: true})
	if !a.gso.Load() {
		t.Skip("no UDP GSO in this kernel")
	}
	batch := make([]Datagram, 8)
	for i := range batch {
		batch[i].Buf = make([]byte, 0, MaxDatagram)
	}
	// read receives exactly want datagrams (coalesced ones count once)
	// into batch[:n] with TryReceive. (Loopback queues a send's datagrams
	// before it returns, so one read normally takes them all, as the test
	// means; if the kernel was slower, later reads start further into
	// batch, and the test checks less, but never fails for it.)
	read := func(n, want int) []Datagram {
		t.Helper()
		deadline := time.Now().Add(testTimeout)
		for got := 0; ; {
			k, err := b.TryReceive(batch[got:n])
			if err != nil {
				t.Fatal(err)
			}
			if got += k; got >= want {
				if got > want {
					t.Fatalf("received %d datagrams, want %d", got, want)
				}
				return batch[:got]
			}
			if time.Now().After(deadline) {
				t.Fatalf("received %d of %d datagrams", got, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	send := func(sizes ...int) {
		t.Helper()
		if err := a.Send(roceBatch(a, b, sizes)); err != nil {
			t.Fatal(err)
		}
	}
	send(100, 200, 300, 400, 500, 600) // six single datagrams: slots 0–5 filled, no GRO
	time.Sleep(20 * time.Millisecond)  // all queued before the read
	read(8, 6)
	send(100)
	read(2, 1)           // a shorter batch: slots 2–5 are left as the first read left them
	send(100, 200, 300)  // three singles...
	send(64, 64, 64, 64) // ... then a run the receiver gets coalesced
	time.Sleep(20 * time.Millisecond)
	got := read(8, 4)
	if d := got[3]; d.SegSize != wire.PacketLen(wire.RCWriteMiddle, 64) || len(d.Buf) != 4*d.SegSize {
		t.Fatalf("the coalesced run: %d bytes, segment size %d; want 4 segments of %d", len(d.Buf), d.SegSize, wire.PacketLen(wire.RCWriteMiddle, 64))
	}
}
