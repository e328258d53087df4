package udpfloor

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/link"
)

func listen(t *testing.T) *link.UDP {
	t.Helper()
	l, err := Listen(netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestRun sends streams of several sizes, whole packets and not, and
// checks that every WRITE is counted once, sent and received in full.
func TestRun(t *testing.T) {
	for _, size := range []int{1, 64, 4096, 8192, 20000, 300 << 10} {
		x, y := listen(t), listen(t)
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan int64, 1)
		go func() {
			n, err := Serve(ctx, y)
			if err != nil {
				t.Error(err)
			}
			got <- n
		}()
		const iters = 300
		r, err := Run(ctx, x, y.LocalAddr(), Stream{Size: size, Mem: max(size, 4096)}, workload.Budget{Iters: iters})
		cancel()
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		n := <-got
		if r.Ops != iters || r.Bytes != int64(iters*size) || n != r.Bytes || r.Elapsed <= 0 {
			t.Errorf("size %d: %d WRITEs, %d bytes sent, %d received in %v; want %d WRITEs of %d bytes",
				size, r.Ops, r.Bytes, n, r.Elapsed, iters, size)
		}
	}
}

// TestRunDuration runs for a time budget and ends with every WRITE
// credited.
func TestRunDuration(t *testing.T) {
	x, y := listen(t), listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Serve(ctx, y)
	r, err := Run(ctx, x, y.LocalAddr(), Stream{Size: 16 << 10, Mem: 16 << 10}, workload.Budget{Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops == 0 || r.Elapsed < 50*time.Millisecond || r.Elapsed > 10*time.Second {
		t.Errorf("%d WRITEs in %v", r.Ops, r.Elapsed)
	}
}

// TestLost: with nobody serving, the sender stops with ErrLost once its
// window is full, rather than waiting for ever.
func TestLost(t *testing.T) {
	defer func(d time.Duration) { stallTimeout = d }(stallTimeout)
	stallTimeout = 100 * time.Millisecond
	x, y := listen(t), listen(t)
	_, err := Run(context.Background(), x, y.LocalAddr(), Stream{Size: 64 << 10, Mem: 64 << 10}, workload.Budget{Iters: 100})
	if !errors.Is(err, ErrLost) {
		t.Fatalf("Run toward a silent peer: %v, want ErrLost", err)
	}
}

// TestBadStream refuses sizes the stream cannot have.
func TestBadStream(t *testing.T) {
	x := listen(t)
	for _, s := range []Stream{{Size: 0, Mem: 4096}, {Size: 8192, Mem: 4096}} {
		if _, err := Run(context.Background(), x, x.LocalAddr(), s, workload.Budget{Iters: 1}); err == nil {
			t.Errorf("Run(%+v) = nil error", s)
		}
	}
}
