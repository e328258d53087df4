package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// devSeq makes every test device's name unique in the process (a name can
// be registered once), so that -count=N works.
var devSeq atomic.Int64

// testOptions gives the example soft devices on loopback addresses that
// no other test process takes.
func testOptions() *exdev.Options {
	return &exdev.Options{Add: func(name string) (*verbs.Device, error) {
		return verbs.AddDevice(fmt.Sprintf("%s%d", name, devSeq.Add(1)), testdev.Addr())
	}}
}

// TestMRPool runs the example and checks what it reports: both ways sent
// every message, the per-message way registered and deregistered once per
// message, a ratio was printed, and the receiver verified every message.
// It asserts nothing about speed.
func TestMRPool(t *testing.T) {
	for _, cfg := range []config{{N: 300, Size: 4096, Window: 32}, {N: 50, Size: 8, Window: 1}, {N: 400, Size: 100, Window: 64}} {
		t.Run(fmt.Sprintf("n=%d,s=%d,w=%d", cfg.N, cfg.Size, cfg.Window), func(t *testing.T) {
			var out bytes.Buffer
			if err := run(&out, testOptions(), cfg); err != nil {
				t.Fatalf("run: %v\noutput:\n%s", err, out.String())
			}
			t.Logf("output:\n%s", out.String())
			for _, re := range []string{
				fmt.Sprintf(`(?m)^per-message MR: %d messages, .* µs/msg; RegMR .* µs/call, DeregMR .* µs/call \(%d calls each\)$`, cfg.N, cfg.N),
				fmt.Sprintf(`(?m)^pool: +%d messages, .* µs/msg; one RegMR of %d × %d B in .* µs, none per message$`, cfg.N, cfg.Window, cfg.Size),
				`(?m)^pool vs per-message MR: [0-9.]+x the message rate`,
				fmt.Sprintf(`(?m)^receiver: %d of %d messages arrived in order, every byte verified$`, 2*cfg.N, 2*cfg.N),
			} {
				if !regexp.MustCompile(re).MatchString(out.String()) {
					t.Errorf("output has no line matching %s", re)
				}
			}
		})
	}
}

// TestMRPoolBadFlags checks that values the example cannot use are refused
// with an error naming the flag.
func TestMRPoolBadFlags(t *testing.T) {
	for _, tc := range []struct {
		cfg  config
		want string
	}{
		{config{N: 0, Size: 4096, Window: 32}, "-n 0:"},
		{config{N: 10, Size: 7, Window: 32}, "-s 7:"},
		{config{N: 10, Size: 4096, Window: 65}, "-w 65:"},
	} {
		err := run(&bytes.Buffer{}, testOptions(), tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("run(%+v) = %v, want an error starting %q", tc.cfg, err, tc.want)
		}
	}
}

// newTestPool makes a pool on a soft device of the test's own.
func newTestPool(t *testing.T, count, size int) *Pool {
	t.Helper()
	c := testdev.Device(t, "mrpooltest")
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Dealloc() })
	p, err := NewPool(pd, count, size, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPoolConcurrent has goroutines take and return buffers at once (under
// -race this checks that the pool is safe for concurrent use) and checks
// that no buffer is ever held by two of them, that each buffer is its own
// slice of the MR, and that all come back.
func TestPoolConcurrent(t *testing.T) {
	const count, size, workers, rounds = 8, 64, 6, 500
	p := newTestPool(t, count, size)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held [count]atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for range rounds {
				b, err := p.Get(ctx)
				if err != nil {
					errs <- err
					return
				}
				if held[b.Index()].Add(1) != 1 {
					errs <- fmt.Errorf("buffer %d handed out twice at once", b.Index())
					return
				}
				// Write the buffer as the device would; a shared slice
				// would show as a race or as a wrong byte below.
				buf := b.Bytes()
				for i := range buf {
					buf[i] = byte(w)
				}
				if sge := b.SGE(size); sge.Addr != p.mr.Addr()+b.Index()*size || sge.Length != size || sge.LKey != p.mr.LKey() {
					errs <- fmt.Errorf("buffer %d: SGE %+v is not its slice of the MR", b.Index(), sge)
					return
				}
				if bytes.Count(buf, []byte{byte(w)}) != size {
					errs <- fmt.Errorf("buffer %d was written by another goroutine", b.Index())
					return
				}
				held[b.Index()].Add(-1)
				if err := p.Put(b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(p.free); n != count {
		t.Errorf("%d buffers free after all were returned, want %d", n, count)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestPoolMisuse checks the pool's errors: Get on an empty pool waits and
// gives up with its context, a buffer returned twice or to the wrong pool
// is refused, an unknown index is refused, and Close reports buffers not
// returned.
func TestPoolMisuse(t *testing.T) {
	p := newTestPool(t, 2, 16)
	q := newTestPool(t, 1, 16)
	defer q.Close()
	ctx := context.Background()
	a, err := p.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.Get(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get on an empty pool = %v, want a deadline error", err)
	}
	if err := p.Put(a); err != nil {
		t.Fatal(err)
	}
	if err := p.Put(a); err == nil {
		t.Error("a buffer returned twice was accepted")
	}
	if err := q.Put(b); err == nil {
		t.Error("a buffer returned to another pool was accepted")
	}
	if _, err := p.Buf(2); err == nil {
		t.Error("Buf(2) of a pool of 2 succeeded")
	}
	if got, err := p.Buf(b.Index()); err != nil || got != b {
		t.Errorf("Buf(%d) = %v, %v; want the buffer", b.Index(), got, err)
	}
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "1 of 2 buffers not returned") {
		t.Errorf("Close with a buffer out = %v, want it reported", err)
	}
}
