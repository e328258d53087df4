package rdmacm_test

// BenchmarkConnect: how fast rdmacm sets up connections, against Go's TCP
// on loopback in the same run. It only runs with -bench; see
// BENCHMARKS.md at the repository root.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/rdmacm"
)

// connectN is the number of connections BenchmarkConnect makes per mode
// and op. Set it with -connect.n=N (after the package, or after -args).
var connectN = flag.Int("connect.n", 10000, "connections BenchmarkConnect makes with each of rdmacm and TCP")

// The target BenchmarkConnect guards: rdmacm's connections per second
// against TCP's.
const connectMinRatio = 0.5

const (
	connectInFlight = 16                  // dials (and accepts) under way at once
	connectBatch    = 4 * connectInFlight // connections set up (timed), then closed (not timed)
	connectSegments = 10                  // each op alternates rdmacm/TCP this many times
	connectTimeout  = 30 * time.Second    // bounds each batch's set-up, and its close
)

// connector is one kind of connection BenchmarkConnect makes: a listener
// and a way to dial it.
type connector struct {
	name   string
	dial   func(ctx context.Context) (io.Closer, error)
	accept func(ctx context.Context) (io.Closer, error)
	// arm is called before each batch with its deadline; abort, if
	// set, unblocks accept when the batch fails (for listeners that
	// take a deadline, not a context).
	arm, abort func(deadline time.Time)
	// workers run the batches' dials, accepts and closes.
	workers *workers
}

// workers are goroutines that live as long as the benchmark and run the
// batches' dials, accepts and closes, as a client's dialing goroutines
// and a server's accept loop do: goroutines started for every batch would
// each grow a stack anew (rdmacm's calls run deeper than Go's TCP ones), a
// cost of the harness, not of setting up connections.
type workers struct{ jobs chan func() }

// newWorkers starts n workers, stopped when the benchmark ends.
func newWorkers(b *testing.B, n int) *workers {
	w := &workers{jobs: make(chan func())}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range w.jobs {
				f()
			}
		}()
	}
	b.Cleanup(func() { close(w.jobs); wg.Wait() })
	return w
}

// run runs f on a free worker; wg.Done is called when f returns.
func (w *workers) run(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	w.jobs <- func() { defer wg.Done(); f() }
}

// rdmacmConnector listens on one soft device and dials from another, both
// on free testdev loopback addresses, with Dial and Listen's default
// options (RC QPs with 64-deep queues, each connection its own PD and
// CQs).
func rdmacmConnector(b *testing.B) *connector {
	srv, cli := newDevice(b), newDevice(b)
	l, err := rdmacm.Listen(netip.AddrPortFrom(srv, 0).String(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	addr := l.Addr().String()
	opts := &rdmacm.Options{Source: cli}
	return &connector{
		name: "rdmacm",
		dial: func(ctx context.Context) (io.Closer, error) {
			c, err := rdmacm.Dial(ctx, addr, opts)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		accept: func(ctx context.Context) (io.Closer, error) {
			c, err := l.Accept(ctx)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		arm: func(time.Time) {}, abort: func(time.Time) {},
		workers: newWorkers(b, 2*connectInFlight),
	}
}

// tcpConnector listens on 127.0.0.1 and dials it.
func tcpConnector(b *testing.B) *connector {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Skipf("no TCP loopback: %v", err)
	}
	b.Cleanup(func() { ln.Close() })
	tl := ln.(*net.TCPListener)
	addr := ln.Addr().String()
	var d net.Dialer
	return &connector{
		name: "tcp",
		dial: func(ctx context.Context) (io.Closer, error) { return d.DialContext(ctx, "tcp4", addr) },
		// net.Listener.Accept takes no context: the batch's deadline
		// is the listener's, set by arm and moved to the past by abort.
		accept:  func(context.Context) (io.Closer, error) { return tl.Accept() },
		arm:     func(deadline time.Time) { tl.SetDeadline(deadline) },
		abort:   func(time.Time) { tl.SetDeadline(time.Unix(1, 0)) },
		workers: newWorkers(b, 2*connectInFlight),
	}
}

// batch sets up n connections of cn, connectInFlight dials and as many
// accepts at a time, and returns how long that took, then closes them all
// (connectInFlight at a time, not timed) and returns how long the closing
// took. On an error everything made is closed, and the first error is
// returned.
func (cn *connector) batch(n int) (setup, closing time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	cn.arm(deadline)
	var (
		conns    = make([]io.Closer, 2*n) // dialed first, then accepted
		dialed   atomic.Int32
		accepted atomic.Int32
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		fail     = func(e error) { errOnce.Do(func() { firstErr = e; cancel(); cn.abort(deadline) }) }
		worker   = func(next *atomic.Int32, slot int, f func(context.Context) (io.Closer, error), what string) {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				c, err := f(ctx)
				if err != nil {
					fail(fmt.Errorf("%s %s %d of %d: %w", cn.name, what, i+1, n, err))
					return
				}
				conns[slot+i] = c
			}
		}
	)
	start := time.Now()
	for range connectInFlight {
		cn.workers.run(&wg, func() { worker(&dialed, 0, cn.dial, "dial") })
		cn.workers.run(&wg, func() { worker(&accepted, n, cn.accept, "accept") })
	}
	wg.Wait()
	setup = time.Since(start)

	// Close, dialed ends first (their peers then see the disconnect and
	// close at once), connectInFlight at a time.
	start = time.Now()
	var next atomic.Int32
	errs := make([]error, connectInFlight)
	for w := range connectInFlight {
		cn.workers.run(&wg, func() {
			for i := int(next.Add(1)) - 1; i < len(conns); i = int(next.Add(1)) - 1 {
				if conns[i] != nil {
					if err := conns[i].Close(); err != nil && errs[w] == nil {
						errs[w] = fmt.Errorf("%s close: %w", cn.name, err)
					}
				}
			}
		})
	}
	wg.Wait()
	closing = time.Since(start)
	return setup, closing, errors.Join(firstErr, errors.Join(errs...))
}

// BenchmarkConnect makes -connect.n connections (default 10,000) with
// rdmacm (Dial and Listener.Accept between two soft devices) and as many
// with TCP (net.Dialer and Listener.Accept on 127.0.0.1), 16 dials and 16
// accepts under way at a time in both. A connection counts when both ends
// have it: Dial returned (rdmacm: ESTABLISHED, the QP in RTS) and Accept
// returned (rdmacm: the RTU arrived). Connections are made in batches of
// 64; only the set-up is timed, then the batch is closed. The modes
// alternate in 10 segments per op. It reports:
//
//   - conns/s-rdmacm and conns/s-tcp: connections set up per second;
//   - ratio: the median over the segments of rdmacm's rate against TCP's
//     measured right before or after it (a burst of load from elsewhere on
//     the machine skews a segment or two, not the median); guarded ≥ 0.5;
//   - close-us/conn-rdmacm and close-us/conn-tcp: the (untimed) closing,
//     per connection, both ends, 16 at a time.
//
// Run it once per figure (-benchtime 1x); -count gives several.
func BenchmarkConnect(b *testing.B) {
	m := *connectN
	if m < 1 {
		b.Fatalf("-connect.n=%d: need at least one connection", m)
	}
	rc, tcp := rdmacmConnector(b), tcpConnector(b)
	segs := min(connectSegments, m)
	// run makes k connections of cn in batches, and adds the set-up and
	// closing times to *setup and *closing.
	run := func(cn *connector, k int, setup, closing *time.Duration) time.Duration {
		var d time.Duration
		for done := 0; done < k; {
			n := min(connectBatch, k-done)
			s, c, err := cn.batch(n)
			if err != nil {
				b.Fatal(err)
			}
			d += s
			*closing += c
			done += n
		}
		*setup += d
		return d
	}
	// Warm up: first connections set up state (neighbour and route
	// entries, the CMs' and links' tables).
	var warm time.Duration
	run(rc, connectBatch, &warm, &warm)
	run(tcp, connectBatch, &warm, &warm)

	var (
		tRC, tTCP, cRC, cTCP time.Duration
		ratios               []float64
	)
	b.ResetTimer()
	for range b.N {
		for s := range segs {
			k := m/segs + min(1, max(0, m%segs-s)) // the segments add up to m
			var dRC, dTCP time.Duration
			// Alternate which mode goes first.
			if s%2 == 0 {
				dRC = run(rc, k, &tRC, &cRC)
				dTCP = run(tcp, k, &tTCP, &cTCP)
			} else {
				dTCP = run(tcp, k, &tTCP, &cTCP)
				dRC = run(rc, k, &tRC, &cRC)
			}
			ratios = append(ratios, dTCP.Seconds()/dRC.Seconds())
		}
	}
	b.StopTimer()

	conns := float64(b.N) * float64(m)
	rateRC, rateTCP := conns/tRC.Seconds(), conns/tTCP.Seconds()
	ratio := workload.Median(ratios)
	b.ReportMetric(rateRC, "conns/s-rdmacm")
	b.ReportMetric(rateTCP, "conns/s-tcp")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(float64(cRC.Microseconds())/conns, "close-us/conn-rdmacm")
	b.ReportMetric(float64(cTCP.Microseconds())/conns, "close-us/conn-tcp")
	b.Logf("%d connections each: rdmacm %.0f/s (set-up %v, close %v), TCP %.0f/s (set-up %v, close %v); ratio %.2f (segments %.2f–%.2f)",
		m, rateRC, tRC.Round(time.Millisecond), cRC.Round(time.Millisecond), rateTCP, tTCP.Round(time.Millisecond),
		cTCP.Round(time.Millisecond), ratio, slices.Min(ratios), slices.Max(ratios))
	if ratio < connectMinRatio {
		b.Errorf("rdmacm sets up connections at %.2f× TCP's rate, target ≥ %.1f×", ratio, connectMinRatio)
	}
}
