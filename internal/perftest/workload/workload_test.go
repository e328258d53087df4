package workload

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// ends connects two ends shaped by cfg, each on its own soft device at a
// random loopback address, as two processes would be; the test closes
// them.
func ends(t *testing.T, cfg Config) (x, y *End) {
	t.Helper()
	var es [2]*End
	for i := range es {
		c, err := OpenSoft("wt")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if es[i], err = NewEnd(c, cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(es[i].Close)
	}
	if err := es[0].Connect(es[1].Info()); err != nil {
		t.Fatal(err)
	}
	if err := es[1].Connect(es[0].Info()); err != nil {
		t.Fatal(err)
	}
	return es[0], es[1]
}

// serve runs a passive loop until the returned function is called, which
// returns the loop's count and checks that it stopped because it was told.
func serve(t *testing.T, loop func(context.Context) (int, error)) func() int {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	type res struct {
		n   int
		err error
	}
	done := make(chan res, 1)
	go func() {
		n, err := loop(ctx)
		done <- res{n, err}
	}()
	stop := errors.New("stop")
	return func() int {
		cancel(stop)
		select {
		case r := <-done:
			if !errors.Is(r.err, stop) {
				t.Errorf("passive loop ended with %v, want the stop", r.err)
			}
			return r.n
		case <-time.After(2 * WaitTimeout):
			t.Fatal("passive loop did not stop")
			return 0
		}
	}
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func TestStreamsMoveTheData(t *testing.T) {
	const size, window = 4096, 4
	ctx := context.Background()
	x, y := ends(t, Config{MemSize: size * window, SQDepth: 4 * window, RDAtomic: window})
	fill(x.MR.Bytes(), 1)
	r, err := WriteStream(ctx, x, size, window, Budget{Iters: 10})
	if err != nil || r.Ops != 10 || r.Bytes != 10*size || r.MiBps() <= 0 {
		t.Fatalf("WriteStream: %+v, %v", r, err)
	}
	// Every completion is in: the WRITEs have landed in y's memory.
	if !bytes.Equal(x.MR.Bytes(), y.MR.Bytes()) {
		t.Error("WRITE: y's memory does not hold x's")
	}
	fill(y.MR.Bytes(), 100)
	if r, err = ReadStream(ctx, x, size, window, Budget{Iters: 8}); err != nil || r.Ops != 8 {
		t.Fatalf("ReadStream: %+v, %v", r, err)
	}
	if !bytes.Equal(x.MR.Bytes(), y.MR.Bytes()) {
		t.Error("READ: x's memory does not hold y's")
	}
	sink, err := NewSendSink(y, size, window, 4*window)
	if err != nil {
		t.Fatal(err)
	}
	stop := serve(t, sink.Run)
	if r, err = SendStream(ctx, x, size, window, Budget{Iters: 50}); err != nil || r.Ops != 50 {
		t.Fatalf("SendStream: %+v, %v", r, err)
	}
	// A SEND completes once acknowledged: each found its receive.
	got := stop()
	if n, err := sink.Drain(); err != nil || got+n != 50 {
		t.Errorf("sink received %d+%d messages (%v), want 50", got, n, err)
	}
}

func TestPingPongsAnswerEveryOp(t *testing.T) {
	ctx := context.Background()
	x, y := ends(t, Config{MemSize: 4096, SQDepth: 64})
	pong, err := NewSendPong(y, 8)
	if err != nil {
		t.Fatal(err)
	}
	stop := serve(t, func(ctx context.Context) (int, error) {
		err := pong.Run(ctx)
		return pong.Answered, err
	})
	for _, n := range []int{20, 300} { // a warm-up, then the measured run
		if r, err := SendPing(ctx, x, 8, Budget{Iters: n}); err != nil || r.Ops != n || r.HalfRTT() <= 0 {
			t.Fatalf("SendPing: %+v, %v", r, err)
		}
	}
	if got := stop(); got != 320 {
		t.Errorf("SendPong answered %d, want 320", got)
	}

	// 300 WRITEs each way: the one-byte count wraps, and still matches.
	x, y = ends(t, Config{MemSize: 4096, SQDepth: 64})
	stop = serve(t, func(ctx context.Context) (int, error) { return WritePong(ctx, y, 8) })
	for _, n := range []int{20, 300} {
		if r, err := WritePing(ctx, x, 8, Budget{Iters: n}); err != nil || r.Ops != n {
			t.Fatalf("WritePing: %+v, %v", r, err)
		}
	}
	if got := stop(); got != 320 {
		t.Errorf("WritePong answered %d, want 320", got)
	}
	// The devices wrote the inboxes: read them as the loops do.
	if a, b := loadByte(x.MR.Bytes(), 15), loadByte(y.MR.Bytes(), 15); a != 320%256 || b != 320%256 {
		t.Errorf("inboxes hold counts %d and %d, want %d", a, b, 320%256)
	}
}

func TestWriteRateOverQPs(t *testing.T) {
	x, y := ends(t, Config{MemSize: 4096, SQDepth: 2 * 32 * 4, QPs: 3})
	if len(x.QPs) != 3 || len(x.Info().QPNs) != 3 {
		t.Fatalf("%d QPs", len(x.QPs))
	}
	fill(x.MR.Bytes()[:8*32], 3)
	r, err := WriteRate(context.Background(), x, 8, 32, 4, Budget{Iters: 32 * 30})
	if err != nil || r.Ops != 32*30 || r.Mpps() <= 0 {
		t.Fatalf("WriteRate: %+v, %v", r, err)
	}
	if !bytes.Equal(x.MR.Bytes()[:8*32], y.MR.Bytes()[:8*32]) {
		t.Error("y's memory does not hold the messages")
	}
}

func TestInProcessPairs(t *testing.T) {
	ctx := context.Background()
	for name, f := range map[string]func(*Pair) (Result, error){
		"RCWrite":         func(p *Pair) (Result, error) { return RCWrite(ctx, p, 4096, 4, Budget{Iters: 40}) },
		"RCRead":          func(p *Pair) (Result, error) { return RCRead(ctx, p, 4096, 1, Budget{Iters: 40}) },
		"RCSend":          func(p *Pair) (Result, error) { return RCSend(ctx, p, 4096, 4, Budget{Iters: 40}) },
		"RCSendPingPong":  func(p *Pair) (Result, error) { return RCSendPingPong(ctx, p, 8, Budget{Iters: 40}) },
		"RCWriteLat":      func(p *Pair) (Result, error) { return RCWriteLat(ctx, p, 8, Budget{Iters: 40}) },
		"RCWritePostList": func(p *Pair) (Result, error) { return RCWritePostList(ctx, p, 8, 4, 2, Budget{Iters: 40}) },
	} {
		x, y := ends(t, Config{MemSize: 4 * 4096, SQDepth: 16})
		p := &Pair{X: x, Y: y}
		for range 2 { // as rdma-bench does: a warm-up, then the measured run, on one pair
			if r, err := f(p); err != nil || r.Ops != 40 || r.Elapsed <= 0 {
				t.Errorf("%s: %+v, %v", name, r, err)
			}
		}
	}
}

func TestTCP(t *testing.T) {
	ctx := context.Background()
	for _, conns := range []int{1, 3} {
		r, err := TCPWrites(ctx, 8, 32, conns, Budget{Iters: 32 * 100})
		if err != nil || r.Ops != 3200 || r.Bytes != 3200*8 {
			t.Errorf("TCPWrites over %d: %+v, %v", conns, r, err)
		}
	}
	if r, err := TCPStream(ctx, 64<<10, Budget{Iters: 20}); err != nil || r.Bytes != 20<<16 {
		t.Errorf("TCPStream: %+v, %v", r, err)
	}
	if r, err := TCPPingPong(ctx, 8, Budget{Iters: 100}); err != nil || r.Ops != 100 {
		t.Errorf("TCPPingPong: %+v, %v", r, err)
	}
	// A dead context stops the writer at once, and says why.
	c, s, err := TCPPair()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer s.Close() // never read: the writer blocks once the buffers are full
	why := errors.New("the peer is gone")
	ctx, cancel := context.WithCancelCause(ctx)
	time.AfterFunc(100*time.Millisecond, func() { cancel(why) })
	start := time.Now()
	_, err = WriteConns(ctx, []net.Conn{c}, 64<<10, 1, Budget{Duration: time.Minute})
	if !errors.Is(err, why) || time.Since(start) > WaitTimeout/2 {
		t.Errorf("WriteConns after cancel: %v after %v", err, time.Since(start))
	}
}

func TestEndConfig(t *testing.T) {
	c, err := OpenSoft("wt")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Device().Addr().IsLoopback() {
		t.Errorf("address %s", c.Device().Addr())
	}
	e, err := NewEnd(c, Config{MemSize: 64, SQDepth: 4, QPs: 2, RDAtomic: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	in := e.Info()
	if in.RDAtomic != da.MaxQPRDAtom || len(in.QPNs) != 2 || len(in.PSNs) != 2 || in.RKey != e.MR.RKey() || in.GID != e.GID {
		t.Errorf("info %+v (device's max READs %d)", in, da.MaxQPRDAtom)
	}
	// A peer of another shape is refused.
	if err := e.Connect(Info{QPNs: []uint32{1}, PSNs: []uint32{1}}); err == nil {
		t.Error("connected 2 QPs to 1")
	}
}
