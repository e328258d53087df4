package rdmanet

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// stream is a deterministic pseudo-random byte stream.
type stream struct{ r *rand.ChaCha8 }

func newStream(seed byte) *stream { return &stream{rand.NewChaCha8([32]byte{seed})} }

func (s *stream) Read(b []byte) (int, error) { return s.r.Read(b) }

// sendStream writes n bytes of the stream seeded with seed to c in writes
// of varying sizes up to maxWrite, then closes c's write side; it returns
// the SHA-256 of what it wrote.
func sendStream(c *Conn, seed byte, n, maxWrite int) ([]byte, error) {
	src, h := newStream(seed), sha256.New()
	sizes := rand.New(rand.NewPCG(uint64(seed), 1))
	buf := make([]byte, maxWrite)
	for sent := 0; sent < n; {
		k := min(1+sizes.IntN(maxWrite), n-sent)
		src.Read(buf[:k])
		h.Write(buf[:k])
		if _, err := c.Write(buf[:k]); err != nil {
			return nil, err
		}
		sent += k
	}
	return h.Sum(nil), c.CloseWrite()
}

// recvStream reads c to io.EOF and returns the SHA-256 and byte count.
func recvStream(c *Conn, bufSize int) ([]byte, int64, error) {
	h := sha256.New()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{c}, make([]byte, bufSize))
	return h.Sum(nil), n, err
}

// TestLargeTransfer sends 64 MiB each way at once, in writes of up to
// 256 KiB (many larger than the 64 KiB ring of one end), and compares
// checksums.
func TestLargeTransfer(t *testing.T) {
	size := 64 << 20
	if testing.Short() {
		size = 8 << 20
	}
	c, s := pipe(t)
	// A smaller ring on the server: its writes wrap often.
	c2, s2 := pipe(t, WithRingSize(64<<10))
	for _, p := range [][2]*Conn{{c, s}, {c2, s2}} {
		a, b := p[0], p[1]
		rnr := rnrNAKs(a, b)
		var wg sync.WaitGroup
		var sumAB, sumBA, gotAB, gotBA []byte
		var nAB, nBA int64
		var errs [4]error
		wg.Add(4)
		go func() { defer wg.Done(); sumAB, errs[0] = sendStream(a, 1, size, 256<<10) }()
		go func() { defer wg.Done(); sumBA, errs[1] = sendStream(b, 2, size, 256<<10) }()
		go func() { defer wg.Done(); gotAB, nAB, errs[2] = recvStream(b, 32<<10) }()
		go func() { defer wg.Done(); gotBA, nBA, errs[3] = recvStream(a, 200<<10) }()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("ring %d: goroutine %d: %v", len(b.rbuf), i, err)
			}
		}
		if nAB != int64(size) || nBA != int64(size) || !bytes.Equal(sumAB, gotAB) || !bytes.Equal(sumBA, gotBA) {
			t.Fatalf("ring %d: received %d and %d bytes of %d; checksums match: %v %v", len(b.rbuf), nAB, nBA, size,
				bytes.Equal(sumAB, gotAB), bytes.Equal(sumBA, gotBA))
		}
		if n := rnrNAKs(a, b) - rnr; n != 0 {
			t.Fatalf("ring %d: %d RNR NAKs", len(b.rbuf), n)
		}
		a.mu.Lock()
		t.Logf("ring %d: %d writes went out as %d DATA and %d CTRL messages", len(b.rbuf), a.stats.writes, a.stats.dataMsgs, a.stats.ctrlMsgs)
		a.mu.Unlock()
	}
}

// TestSmallWrites: 20,000 writes of 1–40 bytes arrive intact and in
// order, and are coalesced into fewer messages.
func TestSmallWrites(t *testing.T) {
	c, s := pipe(t, WithRingSize(16<<10))
	const writes = 20000
	want := make(chan []byte, 1)
	go func() {
		var all bytes.Buffer
		r := rand.New(rand.NewPCG(7, 7))
		src := newStream(9)
		for range writes {
			b := make([]byte, 1+r.IntN(40))
			src.Read(b)
			all.Write(b)
			if _, err := c.Write(b); err != nil {
				t.Error(err)
				break
			}
		}
		c.CloseWrite()
		want <- all.Bytes()
	}()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if w := <-want; !bytes.Equal(got, w) {
		t.Fatalf("received %d bytes, want %d; equal %v", len(got), len(w), bytes.Equal(got, w))
	}
	c.mu.Lock()
	st := c.stats
	c.mu.Unlock()
	t.Logf("%d writes, %d DATA messages, %d CTRL messages", st.writes, st.dataMsgs, st.ctrlMsgs)
	if st.writes != writes || st.dataMsgs >= writes {
		t.Fatalf("%d writes went out as %d DATA messages: no coalescing", st.writes, st.dataMsgs)
	}
}

// TestWriteLargerThanRing: one Write of 1 MiB through a 4 KiB ring.
func TestWriteLargerThanRing(t *testing.T) {
	c, s := pipe(t, WithRingSize(MinRingSize))
	want := make([]byte, 1<<20)
	newStream(3).Read(want)
	errc := make(chan error, 1)
	go func() {
		n, err := c.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		if err == nil {
			err = c.CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(s)
	must(t, err)
	must(t, <-errc)
	if !bytes.Equal(got, want) {
		t.Fatalf("received %d bytes, want %d", len(got), len(want))
	}
}

// isTimeout checks a deadline error as the net package returns it.
func isTimeout(t *testing.T, what string, err error) {
	t.Helper()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: %v (%T), want a net.Error with Timeout() wrapping os.ErrDeadlineExceeded", what, err, err)
	}
}

// TestDeadlines: a Read with nothing to read and a Write to a full ring
// time out at their deadline, Write reporting exactly the bytes that fit
// in the peer's ring; clearing the deadline lets both go on.
func TestDeadlines(t *testing.T) {
	const ring = 64 << 10
	c, s := pipe(t, WithRingSize(ring))
	t0 := time.Now()
	must(t, c.SetReadDeadline(t0.Add(50*time.Millisecond)))
	n, err := c.Read(make([]byte, 10))
	isTimeout(t, "Read", err)
	if d := time.Since(t0); n != 0 || d < 50*time.Millisecond || d > 5*time.Second {
		t.Fatalf("Read returned %d after %v", n, d)
	}
	// The server does not read: the client can stage one ring's worth.
	big := make([]byte, 3*ring)
	newStream(5).Read(big)
	must(t, c.SetWriteDeadline(time.Now().Add(200*time.Millisecond)))
	n, err = c.Write(big)
	isTimeout(t, "Write", err)
	if n != ring {
		t.Fatalf("Write to a full ring staged %d bytes, want %d (the ring)", n, ring)
	}
	// A past deadline fails at once, staging nothing.
	must(t, c.SetWriteDeadline(time.Unix(1, 0)))
	if n, err := c.Write(big[ring:]); n != 0 {
		t.Fatalf("Write past its deadline wrote %d", n)
	} else {
		isTimeout(t, "Write past deadline", err)
	}
	// Cleared: the rest goes through as the server reads.
	must(t, c.SetDeadline(time.Time{}))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(big[ring:])
		if err == nil {
			err = c.CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(s)
	must(t, err)
	must(t, <-errc)
	if !bytes.Equal(got, big) {
		t.Fatalf("received %d bytes, want %d", len(got), len(big))
	}
	// A deadline moved into the future while a Read waits extends it. On
	// a busy machine the goroutine that moves it may run only after the
	// first deadline passed, which tests nothing: that try is repeated
	// (a few times at most).
	for try := 1; ; try++ {
		t0 = time.Now()
		first := t0.Add(30 * time.Millisecond)
		must(t, c.SetReadDeadline(first))
		moved := make(chan time.Time, 1)
		go func() {
			time.Sleep(10 * time.Millisecond)
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			moved <- time.Now()
		}()
		_, err = c.Read(make([]byte, 1))
		d := time.Since(t0)
		isTimeout(t, "Read with extended deadline", err)
		var at time.Time
		select {
		case at = <-moved:
		case <-time.After(10 * time.Second):
			t.Fatal("the goroutine moving the deadline did not run in 10 s")
		}
		if !at.Before(first) {
			if try == 5 {
				t.Fatalf("in %d tries the deadline was never moved before it passed", try)
			}
			continue
		}
		if d < 250*time.Millisecond {
			t.Fatalf("Read timed out after %v, before its extended deadline", d)
		}
		break
	}
}

// TestHalfClose: after CloseWrite the peer reads everything then io.EOF,
// and can still answer; writing after CloseWrite fails with EPIPE.
func TestHalfClose(t *testing.T) {
	c, s := pipe(t)
	_, err := c.Write([]byte("request"))
	must(t, err)
	must(t, c.CloseWrite())
	must(t, c.CloseWrite()) // again: nothing more
	if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Write after CloseWrite: %v", err)
	}
	req, err := io.ReadAll(s)
	if err != nil || string(req) != "request" {
		t.Fatalf("server read %q, %v", req, err)
	}
	if n, err := s.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF: %d, %v", n, err)
	}
	_, err = s.Write([]byte("response"))
	must(t, err)
	must(t, s.Close())
	resp, err := io.ReadAll(c)
	if err != nil || string(resp) != "response" {
		t.Fatalf("client read %q, %v", resp, err)
	}
}

// TestCloseRead: after CloseRead, Read returns io.EOF and the peer can
// keep writing (what it sends is dropped).
func TestCloseRead(t *testing.T) {
	c, s := pipe(t, WithRingSize(MinRingSize))
	must(t, s.CloseRead())
	if _, err := s.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read after CloseRead: %v", err)
	}
	must(t, c.SetWriteDeadline(time.Now().Add(10*time.Second)))
	if _, err := c.Write(make([]byte, 100*MinRingSize)); err != nil {
		t.Fatalf("writing to a peer that closed its read side: %v", err)
	}
}

// TestCloseUnblocks: Close makes a pending Read and a pending Write
// (to a full ring) return net.ErrClosed at once.
func TestCloseUnblocks(t *testing.T) {
	c, _ := pipe(t, WithRingSize(MinRingSize))
	errc := make(chan error, 2)
	go func() {
		_, err := c.Read(make([]byte, 10))
		errc <- err
	}()
	go func() {
		_, err := c.Write(make([]byte, 10*MinRingSize))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	must(t, c.Close())
	for range 2 {
		select {
		case err := <-errc:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("pending call returned %v, want net.ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not unblock a pending call")
		}
	}
	if d := time.Since(t0); d > 7*time.Second {
		t.Fatalf("unblocked after %v", d)
	}
	if _, err := c.Read(nil); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetDeadline after Close: %v", err)
	}
}

// TestPeerClose: after the peer closes, Read returns io.EOF and Write
// fails within a bounded time.
func TestPeerClose(t *testing.T) {
	c, s := pipe(t)
	must(t, s.Close())
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for i := 0; err == nil && time.Now().Before(deadline) && i < 100000; i++ {
		_, err = c.Write(make([]byte, 1024))
		if err == nil {
			time.Sleep(time.Millisecond)
		}
	}
	if err == nil || errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write to a closed peer: %v", err)
	}
	t.Logf("Write to a closed peer: %v", err)
}

// TestListenerClose: Close unblocks Accept with net.ErrClosed.
func TestListenerClose(t *testing.T) {
	l := listen(t)
	errc := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if c != nil {
			c.Close()
		}
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	must(t, l.Close())
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock Accept")
	}
	if err := l.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestAddrs: addresses and networks.
func TestAddrs(t *testing.T) {
	l := listen(t)
	defer l.Close()
	c, s, err := connect(t, l)
	must(t, err)
	defer c.Close()
	defer s.Close()
	la := l.Addr().(*Addr)
	if la.Network() != "rdma" || la.AddrPort.Addr() != devAddrs[0] || la.AddrPort.Port() == 0 {
		t.Fatalf("listener address %v", la)
	}
	if c.RemoteAddr().String() != la.String() || s.RemoteAddr().String() != c.LocalAddr().String() ||
		c.LocalAddr().(*Addr).AddrPort.Addr() != devAddrs[1] || s.LocalAddr().(*Addr).AddrPort.Addr() != devAddrs[0] {
		t.Fatalf("addresses: client %v→%v, server %v→%v", c.LocalAddr(), c.RemoteAddr(), s.LocalAddr(), s.RemoteAddr())
	}
	// "tcp" is a synonym; "rdma6" needs an IPv6 host; "udp" is refused.
	if _, err := Dial(tctx(t), "udp", la.String()); err == nil || !strings.Contains(err.Error(), "unknown network") {
		t.Fatalf("Dial udp: %v", err)
	}
	if _, err := Dial(tctx(t), "rdma6", la.String()); err == nil {
		t.Fatal("Dial rdma6 to an IPv4 address succeeded")
	}
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	// The acceptor closes at once: the dial still succeeds, then EOF.
	tc, err := Dial(tctx(t), "tcp4", la.String(), WithSource(devAddrs[1]))
	must(t, err)
	if _, err := tc.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read from a connection the acceptor closed: %v", err)
	}
	must(t, tc.Close())
}

// TestDialRefused: nobody listens on the port.
func TestDialRefused(t *testing.T) {
	_, err := Dial(tctx(t), "rdma", netip.AddrPortFrom(devAddrs[0], 9).String(), WithSource(devAddrs[1]))
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("Dial: %v", err)
	}
}

// TestNoLeaks: connections with traffic, closed every which way, leave no
// goroutine behind.
func TestNoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l := listen(t)
	defer l.Close()
	for i := range 6 {
		c, s, err := connect(t, l)
		must(t, err)
		go io.Copy(io.Discard, s)
		_, err = c.Write(make([]byte, 100<<10))
		must(t, err)
		switch i % 3 {
		case 0:
			c.Close()
			s.Close()
		case 1:
			s.Close()
			c.Close()
		case 2:
			c.CloseWrite()
			s.Close()
			c.Close()
		}
	}
}

// TestPeerKilled: a child process dials, writes, and is killed; the
// parent's pending Read fails within a few seconds (keepalive timeout).
func TestPeerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	l := listen(t, WithKeepAlive(100*time.Millisecond, time.Second), WithDisconnectTimeout(100*time.Millisecond))
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+l.Addr().String())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		acc <- c
	}()
	var c net.Conn
	select {
	case c = <-acc:
	case <-time.After(20 * time.Second):
		t.Fatalf("the child did not connect; its output:\n%s", out.String())
	}
	if c == nil {
		t.FailNow()
	}
	defer c.Close()
	buf := make([]byte, 5)
	must(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v; child output:\n%s", buf, err, out.String())
	}
	must(t, cmd.Process.Kill())
	cmd.Wait()
	killed = true
	t0 := time.Now()
	_, err := c.Read(buf)
	d := time.Since(t0)
	t.Logf("Read after the peer was killed: %v after %v", err, d)
	if err == nil || err == io.EOF || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after the peer was killed: %v", err)
	}
	if d > 5*time.Second {
		t.Fatalf("Read took %v to notice", d)
	}
	// Writes fail too.
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("Write to a killed peer succeeded")
	}
}

// rnrNAKs counts the RNR NAKs the devices of c and s have sent: the
// credits keep a receive posted for every message, so there are none once
// connections are set up.
func rnrNAKs(c, s *Conn) uint64 {
	cc, _ := c.rc.Context().QueryPortCounters(1)
	sc, _ := s.rc.Context().QueryPortCounters(1)
	return cc.RNRNAKsSent + sc.RNRNAKsSent
}

// TestSmallWritesBothWays: both ends write 10,000 small pieces at once
// through the smallest ring while reading, so that credit updates and
// DATA cross all the time; no receive is ever missing (no RNR NAK).
func TestSmallWritesBothWays(t *testing.T) {
	c, s := pipe(t, WithRingSize(MinRingSize))
	rnr := rnrNAKs(c, s)
	const writes = 10000
	var wg sync.WaitGroup
	var sums, gots [2][]byte
	var errs [4]error
	for i, p := range [][2]*Conn{{c, s}, {s, c}} {
		w, r := p[0], p[1]
		wg.Add(2)
		go func() {
			defer wg.Done()
			h, src := sha256.New(), newStream(byte(20+i))
			sizes := rand.New(rand.NewPCG(uint64(i), 3))
			for range writes {
				b := make([]byte, 1+sizes.IntN(60))
				src.Read(b)
				h.Write(b)
				if _, errs[i] = w.Write(b); errs[i] != nil {
					return
				}
			}
			sums[i] = h.Sum(nil)
			errs[i] = w.CloseWrite()
		}()
		go func() {
			defer wg.Done()
			gots[i], _, errs[2+i] = recvStream(r, 100)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
	}
	for i := range sums {
		if !bytes.Equal(sums[i], gots[i]) {
			t.Fatalf("direction %d: checksum mismatch", i)
		}
	}
	if n := rnrNAKs(c, s) - rnr; n != 0 {
		t.Fatalf("%d RNR NAKs", n)
	}
}

// TestCreditsWithReverseBlocked: the server's writes to the client are
// blocked (the client does not read, its ring is full), yet the server
// reading returns ring space to the client, whose 1 MiB goes through; then
// the client reads what the server wrote.
func TestCreditsWithReverseBlocked(t *testing.T) {
	c, s := pipe(t, WithRingSize(MinRingSize))
	back := make([]byte, 64<<10)
	newStream(31).Read(back)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Write(back)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond) // the server's writer fills the client's ring
	want := make([]byte, 1<<20)
	newStream(32).Read(want)
	got := make(chan []byte, 1)
	go func() {
		b, err := io.ReadAll(s)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	must(t, c.SetWriteDeadline(time.Now().Add(20*time.Second)))
	_, err := c.Write(want)
	must(t, err)
	must(t, c.CloseWrite())
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("server received %d bytes, want %d", len(b), len(want))
	}
	b := make([]byte, len(back))
	must(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	_, err = io.ReadFull(c, b)
	must(t, err)
	must(t, <-errc)
	if !bytes.Equal(b, back) {
		t.Fatal("client received wrong bytes")
	}
}

// TestArmThenPoll holds each poller, for its first arms, in the window
// between its last empty poll and arming its CQs, long enough for the
// peer's messages to land there (the HELLO answer first). On Linux rxe
// and NICs, and on the soft device, such a completion raises no event, so
// a poller that arms and waits without polling once more would miss it
// for good: keepalives are off, and Dial and the reads would wait for
// their bounds.
func TestArmThenPoll(t *testing.T) {
	var arms atomic.Int32
	hold := func() {
		if arms.Add(1) <= 64 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	beforeArm.Store(&hold)
	t.Cleanup(func() { beforeArm.Store(nil) })
	c, s := pipe(t, WithKeepAlive(0, 0))
	msg, got := []byte("ping"), make([]byte, 4)
	for i := range 16 {
		for _, e := range [][2]*Conn{{c, s}, {s, c}} {
			e[1].SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := e[0].Write(msg); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if _, err := io.ReadFull(e[1], got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("round %d: read %q, %v", i, got, err)
			}
		}
	}
	if n := arms.Load(); n < 2 {
		t.Fatalf("the pollers armed %d times: the window was not exercised", n)
	}
}
