package softdev

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/provider/soft/service"
)

// quietLink is a link whose blocking receive records whether the socket
// was left quiet (out of the wait set) when the device started to wait:
// a real socket would then never wake the device again.
type quietLink struct {
	mu      sync.Mutex
	quiet   bool
	waits   []bool // quiet at each ReceiveLocked
	entered chan struct{}
	release chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func newQuietLink() *quietLink {
	return &quietLink{entered: make(chan struct{}, 16), release: make(chan struct{}), closed: make(chan struct{})}
}

func (l *quietLink) Send([]link.Datagram) error { return nil }
func (l *quietLink) Receive([]link.Datagram) (int, error) {
	<-l.closed
	return 0, link.ErrClosed
}
func (l *quietLink) LocalAddr() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 4791)
}
func (l *quietLink) SourcePort(want uint16) uint16 { return want }
func (l *quietLink) MaxBatch() int                 { return 4 }
func (l *quietLink) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}
func (l *quietLink) TryReceive([]link.Datagram) (int, error) { return 0, nil }
func (l *quietLink) SetQuiet(on bool) {
	l.mu.Lock()
	l.quiet = on
	l.mu.Unlock()
}

// ReceiveLocked records the quiet state, then waits for the test (a read
// that finds nothing) or for Close.
func (l *quietLink) ReceiveLocked(sync.Locker, []link.Datagram) (int, error) {
	l.mu.Lock()
	l.waits = append(l.waits, l.quiet)
	l.mu.Unlock()
	l.entered <- struct{}{}
	select {
	case <-l.release:
		return 0, nil
	case <-l.closed:
		return 0, link.ErrClosed
	}
}

// TestReceiveLoopNeverWaitsQuiet replays the clock readings that made the
// device deaf: a poller's hold that still runs when the receive goroutine
// wakes from it, and has ended when the goroutine next looks. The goroutine
// must put the socket back in its wait set before it waits on it.
func TestReceiveLoopNeverWaitsQuiet(t *testing.T) {
	t0 := time.Now()
	var clockMu sync.Mutex
	var script []time.Time
	holdClock = func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		if len(script) == 0 {
			return time.Now()
		}
		now := script[0]
		if len(script) > 1 {
			script = script[1:]
		}
		return now
	}
	defer func() { holdClock = Now }()

	l := newQuietLink()
	d := Start(l, Options{})
	defer d.Close()
	wait := func(what string) {
		t.Helper()
		select {
		case <-l.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("the receive goroutine did not %s within 10 s", what)
		}
	}
	wait("wait on the link at start")

	// A Poll at t0: the hold runs until t0+1ms. The goroutine sees 0.5 ms
	// left, holds, then sees 0.1 ms left, and finally none.
	d.lastPoll.Store(t0.UnixNano())
	clockMu.Lock()
	script = []time.Time{
		t0.Add(500 * time.Microsecond),
		t0.Add(900 * time.Microsecond),
		t0.Add(1100 * time.Microsecond),
	}
	clockMu.Unlock()
	l.release <- struct{}{}
	wait("wait on the link again after the poller's hold")

	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.waits {
		if q {
			t.Errorf("wait %d on the link began with the socket quiet: no datagram would wake it", i)
		}
	}
}

// TestQPNumbersStartAtRandom: two runs of a device on the same address (a
// program and the same program restarted) number their first QPs
// differently, in the whole space and in a host service's slot. Were both
// to start at the range's first number, a peer still holding the first
// run's connection would reject the second run's REQ as stale.
func TestQPNumbersStartAtRandom(t *testing.T) {
	firstQPN := func(slot uint8) uint32 {
		t.Helper()
		d := Start(newQuietLink(), Options{Slot: slot})
		defer d.Close()
		qp, err := d.Host().CreateQP(engine.QPConfig{Type: engine.QPTypeRC, MaxSendWR: 1, MaxRecvWR: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Host().DestroyQP(qp)
		first, last := uint32(0x11), uint32(0xFFFFFF) // the engine's default
		if slot != 0 {
			first, last = service.QPNRange(slot)
		}
		if n := qp.QPN(); n < first || n > last {
			t.Fatalf("slot %d: QPN %#x outside %#x–%#x", slot, n, first, last)
		}
		return qp.QPN()
	}
	for _, slot := range []uint8{0, 3} {
		// Two equal starts in a row happen by chance once in 2^16 runs
		// in a slot's range; three are needed to fail.
		a, b, c := firstQPN(slot), firstQPN(slot), firstQPN(slot)
		if a == b && b == c {
			t.Errorf("slot %d: three runs of the device all numbered their first QP %#x", slot, a)
		}
	}
}

// sendLink is a quietLink that reports each Send's datagram count.
type sendLink struct {
	*quietLink
	sent chan int
}

func (l *sendLink) Send(b []link.Datagram) error {
	l.sent <- len(b)
	return nil
}

// TestDeferredPostsGoOut: a PostSend is held back only while an
// application polls the device, and what is held goes out at the next
// CQ poll (FlushPosts), when the poller blocks, or — with nobody polling —
// from the flusher, soon.
func TestDeferredPostsGoOut(t *testing.T) {
	l := &sendLink{quietLink: newQuietLink(), sent: make(chan int, 64)}
	d := Start(l, Options{})
	defer d.Close()
	h := d.Host()
	qp, err := h.CreateQP(engine.QPConfig{Type: engine.QPTypeRC, MaxSendWR: 16, MaxRecvWR: 1, MaxSendSGE: 1, MaxInline: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer h.DestroyQP(qp)
	now := Now()
	peer := netip.MustParseAddr("127.0.0.2")
	for _, m := range []struct {
		a    engine.Attr
		mask uint32
	}{
		{engine.Attr{State: engine.StateInit}, engine.AttrState},
		{engine.Attr{State: engine.StateRTR, Remote: peer, PathMTU: 1024, DestQPN: 0x99}, engine.AttrState | engine.AttrAV | engine.AttrPathMTU | engine.AttrDestQPN},
		{engine.Attr{State: engine.StateRTS, Timeout: 31, RetryCnt: 7, RNRRetry: 7}, engine.AttrState | engine.AttrTimeout | engine.AttrRetryCnt | engine.AttrRNRRetry},
	} {
		qp.Modify(now, &m.a, m.mask)
	}
	if st := qp.State(); st != engine.StateRTS {
		t.Fatalf("QP in state %v, want RTS", st)
	}
	// One SEND that nobody acknowledges (and, at Timeout 31, nobody
	// retransmits within hours): the posts below are behind it (a post to
	// an idle QP is never held back).
	if _, err := qp.PostSendList(now, []engine.SendWR{{Op: engine.WRSend}}); err != nil {
		t.Fatal(err)
	}
	<-l.sent
	// post polls, then posts as the provider does when DeferPosts says so.
	// (The time DeferPosts is asked about is the poll's own, so that a
	// preempted test does not find the poll stale.)
	post := func() {
		t.Helper()
		d.Poll()
		lp := d.lastPoll.Load()
		if lp == 0 || !d.DeferPosts(time.Unix(0, lp)) {
			t.Fatal("DeferPosts = false right after a Poll")
		}
		if d.DeferPosts(time.Unix(0, lp+int64(deferWindow))) {
			t.Fatalf("DeferPosts = true %v after the last Poll", deferWindow)
		}
		now := Now()
		wr := engine.SendWR{Op: engine.WRSend} // zero-length: one packet
		if _, _, err := qp.PostSendDeferred(now, []engine.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-l.sent:
			t.Fatalf("a deferred post went out at once (%d datagrams)", n)
		default:
		}
		d.PostsDeferred()
	}
	sentWithin := func(what string, limit time.Duration) {
		t.Helper()
		select {
		case <-l.sent:
		case <-time.After(limit):
			t.Fatalf("%s: the deferred post did not go out within %v", what, limit)
		}
	}

	if d.DeferPosts(Now()) {
		t.Fatal("DeferPosts = true with nobody polling")
	}
	post()
	d.FlushPosts()
	sentWithin("FlushPosts", time.Second)

	post()
	d.Blocking()
	sentWithin("Blocking", time.Second)
	if d.DeferPosts(Now()) {
		t.Fatal("DeferPosts = true after Blocking")
	}

	post()
	// Nobody polls again: the flusher sends it (it ticks every ackDelay).
	sentWithin("the flusher", 5*time.Second)
}

// spinLink delivers one datagram from its first blocking receive and
// counts the non-waiting reads that follow; later blocking receives report
// that they began and wait for Close.
type spinLink struct {
	*quietLink
	mu    sync.Mutex
	waits int
	tries int
}

func (l *spinLink) ReceiveLocked(mu sync.Locker, b []link.Datagram) (int, error) {
	l.mu.Lock()
	l.waits++
	first := l.waits == 1
	l.mu.Unlock()
	if first {
		mu.Lock()
		b[0].Buf = b[0].Buf[:20] // too short for a packet: counted, dropped
		b[0].Src = netip.MustParseAddrPort("127.0.0.2:4791")
		return 1, nil
	}
	l.entered <- struct{}{}
	<-l.closed
	return 0, link.ErrClosed
}

func (l *spinLink) TryReceive([]link.Datagram) (int, error) {
	l.mu.Lock()
	l.tries++
	l.mu.Unlock()
	return 0, nil
}

// TestSpinReceiveEnds: after a batch the receive goroutine reads the link
// without waiting for a while, and then waits on it again: it never spins
// for good on a link that has gone quiet.
func TestSpinReceiveEnds(t *testing.T) {
	l := &spinLink{quietLink: newQuietLink()}
	d := Start(l, Options{})
	defer d.Close()
	select {
	case <-l.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the receive goroutine did not wait on the link again within 10 s of its last datagram")
	}
	l.mu.Lock()
	tries := l.tries
	l.mu.Unlock()
	if tries == 0 && !pollOff {
		t.Error("no read without waiting after a batch")
	}
}

// TestPolledCountsAsPoll: a CQ poll that found completions (Polled, which
// reads no clock) makes the next DeferPosts hold posts and date the poll
// with its own time; the flag is used once, and a poller that blocks
// clears it.
func TestPolledCountsAsPoll(t *testing.T) {
	l := &sendLink{quietLink: newQuietLink(), sent: make(chan int, 64)}
	d := Start(l, Options{})
	defer d.Close()
	if pollOff {
		t.Skip("RDMA_GO_POLL=off")
	}
	now := time.Unix(1000, 0)
	if d.DeferPosts(now) {
		t.Fatal("DeferPosts = true with no poll at all")
	}
	d.Polled()
	if !d.DeferPosts(now) {
		t.Fatal("DeferPosts = false after Polled")
	}
	if lp := d.lastPoll.Load(); lp != now.UnixNano() {
		t.Fatalf("the poll is dated %d, want the post's time %d", lp, now.UnixNano())
	}
	if !d.DeferPosts(now.Add(deferWindow / 2)) {
		t.Fatal("DeferPosts = false within the window of the dated poll")
	}
	if d.DeferPosts(now.Add(deferWindow)) {
		t.Fatal("DeferPosts = true a window after the dated poll: Polled counted twice")
	}
	d.Polled()
	d.Blocking()
	if d.DeferPosts(now.Add(2 * deferWindow)) {
		t.Fatal("DeferPosts = true after the poller blocked")
	}
}
