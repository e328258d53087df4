// Package workload holds the data-path loops that rdma-bench measures: RDMA
// over soft devices (or a named device) and the same workloads over Go's
// TCP on loopback, so that the two can be compared in one run.
//
// Every workload exists in two forms. The in-process form (RCWrite,
// RCSendPingPong, TCPStream, ...) drives both ends of a Pair, or both ends
// of a TCP connection, from one process. The split form drives one end
// only: the active half (WriteStream, SendPing, WriteConns, ...) is the
// side that measures; the passive half (SendSink, SendPong, WritePong,
// SinkTCP, EchoTCP) runs in the peer process. The one-sided workloads
// (WRITE, READ, message rate) have no passive half: the peer's device
// answers on its own. Where the two forms can share their measured loop
// they do, so that a figure measured in one process and one measured
// between two processes differ by where the peer runs and nothing else.
package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/internal/spin"
	"github.com/rdma-go/rdma-go/verbs"
)

// Budget bounds a workload: Iters operations, or (Iters 0) Duration.
type Budget struct {
	Iters    int
	Duration time.Duration
}

// done reports whether ops operations since start spend the budget (the
// clock is read once every 64 operations).
func (b Budget) done(ops int, start time.Time) bool {
	if b.Iters > 0 {
		return ops >= b.Iters
	}
	return ops%64 == 0 && time.Since(start) >= b.Duration
}

// String describes the budget.
func (b Budget) String() string {
	if b.Iters > 0 {
		return fmt.Sprintf("%d operations per workload", b.Iters)
	}
	return fmt.Sprintf("%v per workload", b.Duration)
}

// Result is what a workload measured.
type Result struct {
	Ops     int           // operations: messages, or round trips
	Bytes   int64         // payload bytes moved
	Elapsed time.Duration // wall time of the measured loop
	// RTTs are a ping-pong's round trips, one per op (nil for streams).
	RTTs []time.Duration
}

// HalfRTTQuantile is the q-quantile (0 < q ≤ 1, nearest rank) of a
// ping-pong's one-way latencies, half its round trips; 0 without them.
func (r Result) HalfRTTQuantile(q float64) time.Duration {
	if len(r.RTTs) == 0 {
		return 0
	}
	s := slices.Clone(r.RTTs)
	slices.Sort(s)
	i := min(max(int(math.Ceil(q*float64(len(s))))-1, 0), len(s)-1)
	return s[i] / 2
}

// rttLog records a ping-pong's round trips: lap ends one and starts the
// next (one clock read per round trip).
type rttLog struct {
	d    []time.Duration
	last time.Time
}

// newRTTLog starts the first round trip at start, with room for b's ops.
func newRTTLog(b Budget, start time.Time) *rttLog {
	n := b.Iters
	if n <= 0 {
		n = 1 << 16
	}
	return &rttLog{d: make([]time.Duration, 0, n), last: start}
}

func (l *rttLog) lap() {
	now := time.Now()
	l.d = append(l.d, now.Sub(l.last))
	l.last = now
}

// MiBps is the payload bandwidth in MiB/s.
func (r Result) MiBps() float64 { return float64(r.Bytes) / r.Elapsed.Seconds() / (1 << 20) }

// Mpps is the operation rate in millions per second.
func (r Result) Mpps() float64 { return float64(r.Ops) / r.Elapsed.Seconds() / 1e6 }

// HalfRTT is half a round trip (the one-way latency of a ping-pong).
func (r Result) HalfRTT() time.Duration { return r.Elapsed / time.Duration(2*max(r.Ops, 1)) }

// WaitTimeout bounds every wait for a completion, a write landing in
// memory, or a TCP read.
const WaitTimeout = 10 * time.Second

var devSeq atomic.Uint32

// Config shapes one end of an RC connection.
type Config struct {
	MemSize  int // bytes of the registered region
	SQDepth  int // send queue depth of each QP; the receive queue is as deep
	QPs      int // RC QPs, all on one CQ (0 means 1)
	RDAtomic int // RDMA READs each QP may have outstanding, as initiator and as target (0 means 1)
}

// Info is what an end tells its peer so that the peer can connect its QPs
// to it and address its memory. In one process it is handed over by
// assignment; between two processes rdma-bench sends it as JSON.
type Info struct {
	GID      verbs.GID `json:"gid"`
	QPNs     []uint32  `json:"qpns"`
	PSNs     []uint32  `json:"psns"`
	MTU      verbs.MTU `json:"mtu"`
	RDAtomic int       `json:"rd_atomic"`
	Addr     uint64    `json:"addr"`
	RKey     uint32    `json:"rkey"`
}

// End is one side of an RC connection: one PD, CQ and MR, and one or more
// QPs (QP is the first).
type End struct {
	Ctx  *verbs.Context
	PD   *verbs.PD
	CQ   *verbs.CQ
	QP   *verbs.QP
	QPs  []*verbs.QP
	MR   *verbs.MR
	GID  verbs.GID
	PSN  uint32
	PSNs []uint32
	// Peer is what the other end said of itself, set by Connect.
	Peer Info

	gid      int
	mtu      verbs.MTU
	rdAtomic int
	ownCtx   bool
	seq, got uint32 // counts this end wrote and saw in a WRITE ping-pong
	wc       [32]verbs.WC
}

// NewEnd creates an end on c, which it does not own: its QPs stay in RESET
// until Connect.
func NewEnd(c *verbs.Context, cfg Config) (e *End, err error) {
	e = &End{Ctx: c}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	nqp := max(cfg.QPs, 1)
	da, err := c.QueryDevice()
	if err != nil {
		return e, fmt.Errorf("query device: %w", err)
	}
	// Outstanding READs are bounded by the device on both sides of a QP.
	e.rdAtomic = max(1, min(max(cfg.RDAtomic, 1), da.MaxQPRDAtom, da.MaxQPInitRDAtom))
	if e.PD, err = c.AllocPD(); err != nil {
		return e, fmt.Errorf("alloc PD: %w", err)
	}
	if e.CQ, err = c.CreateCQ(4*cfg.SQDepth*nqp, nil); err != nil {
		return e, fmt.Errorf("create CQ: %w", err)
	}
	// The peer writes into this memory and reads from it: remote write and
	// read access, and local write for receives and READ responses.
	if e.MR, err = e.PD.RegMR(make([]byte, cfg.MemSize), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		return e, fmt.Errorf("register %d bytes: %w", cfg.MemSize, err)
	}
	for range nqp {
		qp, err := e.PD.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: e.CQ, RecvCQ: e.CQ,
			Cap: verbs.QPCap{MaxSendWR: uint32(cfg.SQDepth), MaxRecvWR: uint32(cfg.SQDepth), MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return e, fmt.Errorf("create QP: %w", err)
		}
		e.QPs = append(e.QPs, qp)
		e.PSNs = append(e.PSNs, rand.Uint32()&0xFFFFFF)
	}
	e.QP, e.PSN = e.QPs[0], e.PSNs[0]
	pa, err := c.QueryPort(1)
	if err != nil {
		return e, fmt.Errorf("query port: %w", err)
	}
	e.mtu = pa.ActiveMTU
	if e.gid, err = GIDIndex(c); err != nil {
		return e, err
	}
	if e.GID, err = c.QueryGID(1, e.gid); err != nil {
		return e, fmt.Errorf("query GID %d: %w", e.gid, err)
	}
	return e, nil
}

// OpenEnd opens dev and creates an end on it that owns the context.
func OpenEnd(dev *verbs.Device, cfg Config) (*End, error) {
	c, err := dev.Open()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dev.Name(), err)
	}
	e, err := NewEnd(c, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	e.ownCtx = true
	return e, nil
}

// Info returns what the peer needs to connect to e.
func (e *End) Info() Info {
	qpns := make([]uint32, len(e.QPs))
	for i, qp := range e.QPs {
		qpns[i] = qp.QPN()
	}
	return Info{GID: e.GID, QPNs: qpns, PSNs: append([]uint32(nil), e.PSNs...), MTU: e.mtu,
		RDAtomic: e.rdAtomic, Addr: e.MR.Addr(), RKey: e.MR.RKey()}
}

// Connect moves each QP through INIT, RTR and RTS towards the peer's QP of
// the same index, at the smaller of the two ports' MTUs.
func (e *End) Connect(peer Info) error {
	if len(peer.QPNs) != len(e.QPs) || len(peer.PSNs) != len(e.QPs) {
		return fmt.Errorf("peer has %d QPs, this end %d", len(peer.QPNs), len(e.QPs))
	}
	mtu := min(e.mtu, peer.MTU)
	rd := uint8(min(e.rdAtomic, max(peer.RDAtomic, 1)))
	for i, qp := range e.QPs {
		if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1,
			AccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
			return fmt.Errorf("QP %d to INIT: %w", qp.QPN(), err)
		}
		if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: mtu, DestQPN: peer.QPNs[i],
			RQPSN: peer.PSNs[i], MaxDestRDAtomic: rd, MinRNRTimer: 12,
			AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer.GID, SGIDIndex: uint8(e.gid), HopLimit: 64}}},
			verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
				verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer); err != nil {
			return fmt.Errorf("QP %d to RTR: %w", qp.QPN(), err)
		}
		if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: e.PSNs[i], Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: rd},
			verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|verbs.QPAttrMaxQPRDAtomic); err != nil {
			return fmt.Errorf("QP %d to RTS: %w", qp.QPN(), err)
		}
	}
	e.Peer = peer
	return nil
}

// Close releases the end's verbs objects, and its context if it owns it.
func (e *End) Close() {
	if e == nil {
		return
	}
	for _, qp := range e.QPs {
		qp.Destroy()
	}
	if e.MR != nil {
		e.MR.Dereg()
	}
	if e.CQ != nil {
		e.CQ.Destroy()
	}
	if e.PD != nil {
		e.PD.Dealloc()
	}
	if e.ownCtx && e.Ctx != nil {
		e.Ctx.Close()
	}
}

// Pair is two ends connected to each other in one process: over two
// loopback soft devices (each on its own 127.0.0.x), or both on one named
// device (a kernel device such as rxe0: two contexts, over its own
// address), at the port's active MTU.
type Pair struct {
	X, Y *End
	sink *SendSink // Y's receives for RCSend, posted once
}

// NewPair connects two ends shaped by cfg: on two new loopback devices,
// or, with device set, both on that device.
func NewPair(cfg Config, device string) (p *Pair, err error) {
	p = &Pair{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	var named *verbs.Device
	if device != "" {
		if named, err = FindDevice(device); err != nil {
			return p, err
		}
	}
	for _, e := range []**End{&p.X, &p.Y} {
		dev := named
		if dev == nil {
			if dev, err = verbs.AddLoopbackDevice(fmt.Sprintf("wl%d", devSeq.Add(1))); err != nil {
				return p, err
			}
		}
		if *e, err = OpenEnd(dev, cfg); err != nil {
			return p, err
		}
	}
	if err := p.X.Connect(p.Y.Info()); err != nil {
		return p, err
	}
	return p, p.Y.Connect(p.X.Info())
}

// Close releases both ends.
func (p *Pair) Close() {
	p.X.Close()
	p.Y.Close()
}

// FindDevice returns the device called name.
func FindDevice(name string) (*verbs.Device, error) {
	ds, err := verbs.Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Name() == name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no device %q among %d", name, len(ds))
}

// GIDIndex returns the index of port 1's GID that holds the device's IP
// address (the RoCEv2 GID a QP addresses it by).
func GIDIndex(c *verbs.Context) (int, error) {
	want := verbs.GIDFromIP(c.Device().Addr())
	pa, err := c.QueryPort(1)
	if err != nil {
		return 0, err
	}
	for i := range int(pa.GIDTblLen) {
		if g, err := c.QueryGID(1, i); err == nil && g == want {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no GID of %s holds its address %s", c.Device().Name(), c.Device().Addr())
}

// RandomLoopback returns a random address of 127.1.0.1–127.254.255.254,
// outside 127.0.0.0/24 where automatically addressed devices live: a
// candidate, which OpenSoft binds and replaces when it is taken.
func RandomLoopback() netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
}

// OpenSoft registers a soft device named prefix plus a number on a random
// loopback address (RandomLoopback) and opens it, drawing another address
// when one is taken. The context holds the address until it is closed.
func OpenSoft(prefix string) (*verbs.Context, error) {
	var err error
	for range 20 {
		var d *verbs.Device
		if d, err = verbs.AddDevice(fmt.Sprintf("%s%d", prefix, devSeq.Add(1)), RandomLoopback()); err != nil {
			return nil, err
		}
		var c *verbs.Context
		if c, err = d.Open(); err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("20 random loopback addresses were all taken: %w", err)
}

// Poll returns at least one successful completion for a streaming loop:
// it polls, yielding, 64 times, then blocks on the CQ (in one process the
// stream's other end needs the CPU); it fails on an error completion,
// when ctx is done (with ctx's cause) or after WaitTimeout.
func (e *End) Poll(ctx context.Context) ([]verbs.WC, error) { return e.poll(ctx, false) }

// PollSpin is Poll for a latency loop: it polls without pause, as the
// perftest tools do (package spin: on a soft device it yields the P now
// and then, and blocks on the CQ once nothing has come for a while). A
// wake-up per message would cost more than the message.
func (e *End) PollSpin(ctx context.Context) ([]verbs.WC, error) { return e.poll(ctx, true) }

func (e *End) poll(ctx context.Context, spinning bool) ([]verbs.WC, error) {
	sp := spin.For(e.Ctx)
	var since time.Time
	for spins := 0; ; spins++ {
		n, err := e.CQ.Poll(e.wc[:])
		if err != nil {
			return nil, err
		}
		if n > 0 {
			for i := range e.wc[:n] {
				if e.wc[i].Status != verbs.WCSuccess {
					return nil, fmt.Errorf("work request %d: %s", e.wc[i].WRID, e.wc[i].Status)
				}
			}
			return e.wc[:n], nil
		}
		if !spinning {
			if spins < 64 {
				runtime.Gosched()
				continue
			}
		} else {
			if !sp.Empty() {
				continue
			}
			now := time.Now()
			if since.IsZero() {
				since = now
			} else if now.Sub(since) > WaitTimeout {
				return nil, fmt.Errorf("no completion within %v", WaitTimeout)
			}
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			if !sp.Block(now) {
				continue
			}
			sp.Reset()
		}
		wctx, cancel := context.WithTimeout(ctx, WaitTimeout)
		err = e.CQ.Wait(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("no completion within %v: %w", WaitTimeout, err)
		}
		spins, since = 0, time.Time{}
	}
}

// waitByte polls buf[off] until it holds want, the peer's RDMA WRITE
// having landed there, as ib_write_lat does, calling poll between reads
// and pacing the loop with sp (Spinner.Idle: it sleeps between reads
// where a CQ loop would block). It gives up when ctx is done or after
// WaitTimeout.
func waitByte(ctx context.Context, sp spin.Spinner, buf []byte, off int, want byte, poll func() error) error {
	var start time.Time
	for {
		if loadByte(buf, off) == want {
			return nil
		}
		if err := poll(); err != nil {
			return err
		}
		if !sp.Idle() {
			continue
		}
		now := time.Now()
		if start.IsZero() {
			start = now
		} else if now.Sub(start) > WaitTimeout {
			return fmt.Errorf("no RDMA WRITE landed within %v", WaitTimeout)
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		sp.Block(now)
	}
}

// loadByte reads b[i], which a device writes from another goroutine (an
// RDMA WRITE landing in registered memory). Nothing but the byte's value
// orders the two, as on real hardware, so the race detector must not
// instrument the read (go:norace); not being inlined, the function reads
// memory afresh on every call.
//
//go:norace
//go:noinline
func loadByte(b []byte, i int) byte { return b[i] }

// Median returns the median of v (the mean of the middle two for an even
// count; 0 for none), leaving v as it is. Benchmarks report the median of
// per-round ratios: a burst of load from other processes skews the rounds
// it hits, not the figure.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
