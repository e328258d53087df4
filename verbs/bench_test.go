package verbs_test

// Benchmarks of the verbs data path over real UDP on loopback, next to Go
// TCP loopback baselines measured in the same run. They only run with -bench;
// see BENCHMARKS.md at the repository root for the commands and figures.
//
// Each RDMA benchmark drives both QPs from the benchmark goroutine, busy
// polling the CQs (with a Gosched every few empty polls, so the two soft
// devices' receive goroutines get a CPU even on a 2-vCPU machine). allocs/op
// counts every allocation in the process during the timed loop, including
// those of the devices' receive goroutines.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// benchTimeout bounds every wait for a completion.
const benchTimeout = 10 * time.Second

var benchDevs atomic.Uint32

// spinPolls is how many empty polls poll makes before it waits on the
// completion channel; -1 busy polls only. Set it with -args -bench.spin=N.
var spinPolls = flag.Int("bench.spin", 100, "empty CQ polls before blocking on the completion channel (-1: busy poll only)")

// benchEnd is one side of a connected RC pair.
type benchEnd struct {
	ctx *verbs.Context
	pd  *verbs.PD
	ch  *verbs.CompChannel
	cq  *verbs.CQ
	qp  *verbs.QP
	mr  *verbs.MR
	gid verbs.GID
	psn uint32
	wc  [32]verbs.WC

	wait    context.Context // cancelled by the watchdog
	waiting atomic.Int64    // UnixNano when a GetEvent began; 0 when none
}

// watchdog cancels e.wait when a GetEvent has waited benchTimeout, so that
// every wait is bounded without a per-wait context and its allocations.
func (e *benchEnd) watchdog(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	e.wait = ctx
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				if w := e.waiting.Load(); w != 0 && now.UnixNano()-w > int64(benchTimeout) {
					cancel()
					return
				}
			}
		}
	}()
	b.Cleanup(func() { close(stop); cancel() })
}

// newBenchPair opens two loopback soft devices (each on its own free
// 127.0.0.x) and connects an RC QP on each to the other, MTU 4096.
func newBenchPair(b *testing.B, memSize, sqDepth int) (x, y *benchEnd) {
	b.Helper()
	var ends [2]*benchEnd
	for i := range ends {
		dev, err := verbs.AddLoopbackDevice(fmt.Sprintf("bench%d", benchDevs.Add(1)))
		if err != nil {
			b.Fatal(err)
		}
		e := &benchEnd{psn: rand.Uint32() & 0xFFFFFF}
		if e.ctx, err = dev.Open(); err != nil {
			b.Skipf("cannot open a loopback soft device: %v", err)
		}
		b.Cleanup(func() { e.ctx.Close() })
		benchMust(b, func() (err error) { e.pd, err = e.ctx.AllocPD(); return })
		benchMust(b, func() (err error) { e.ch, err = e.ctx.CreateCompChannel(); return })
		benchMust(b, func() (err error) { e.cq, err = e.ctx.CreateCQ(4*sqDepth, e.ch); return })
		e.watchdog(b)
		benchMust(b, func() (err error) {
			e.mr, err = e.pd.RegMR(make([]byte, memSize), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
			return
		})
		benchMust(b, func() (err error) {
			e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
				Cap: verbs.QPCap{MaxSendWR: uint32(sqDepth), MaxRecvWR: uint32(sqDepth), MaxSendSGE: 1, MaxRecvSGE: 1}})
			return
		})
		b.Cleanup(func() {
			e.qp.Destroy()
			e.mr.Dereg()
			e.cq.Destroy()
			e.ch.Destroy()
			e.pd.Dealloc()
		})
		benchMust(b, func() (err error) { e.gid, err = e.ctx.QueryGID(1, 1); return })
		ends[i] = e
	}
	connectBench(b, ends[0], ends[1])
	connectBench(b, ends[1], ends[0])
	return ends[0], ends[1]
}

func benchMust(b *testing.B, f func() error) {
	b.Helper()
	if err := f(); err != nil {
		b.Fatal(err)
	}
}

func connectBench(b *testing.B, e, peer *benchEnd) {
	b.Helper()
	benchMust(b, func() error {
		return e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1,
			AccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags)
	})
	benchMust(b, func() error {
		return e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTU4096, DestQPN: peer.qp.QPN(),
			RQPSN: peer.psn, MaxDestRDAtomic: 1, MinRNRTimer: 12,
			AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer.gid, SGIDIndex: 1, HopLimit: 1}}},
			verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
				verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer)
	})
	benchMust(b, func() error {
		return e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: e.psn, Timeout: 14, RetryCnt: 7,
			RNRRetry: 7, MaxRDAtomic: 1},
			verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|
				verbs.QPAttrMaxQPRDAtomic)
	})
}

// poll polls e's CQ until it returns at least one completion, and returns
// them: it busy polls spinPolls times, then (if spinPolls >= 0) arms the CQ
// and waits on its completion channel. It fails the benchmark on an error
// completion or after benchTimeout.
func (e *benchEnd) poll(b *testing.B) []verbs.WC {
	var deadline time.Time
	for spins := 1; ; spins++ {
		n, err := e.cq.Poll(e.wc[:])
		if err != nil {
			b.Fatal(err)
		}
		if n > 0 {
			for i := range e.wc[:n] {
				if e.wc[i].Status != verbs.WCSuccess {
					b.Fatalf("work request %d: %s (vendor error %d)", e.wc[i].WRID, e.wc[i].Status, e.wc[i].VendorErr)
				}
			}
			return e.wc[:n]
		}
		if *spinPolls >= 0 && spins > *spinPolls {
			if spins == *spinPolls+1 {
				if err := e.cq.ReqNotify(false); err != nil {
					b.Fatal(err)
				}
				continue // poll once more: a completion may have landed before arming
			}
			e.waiting.Store(time.Now().UnixNano())
			_, err := e.ch.GetEvent(e.wait)
			e.waiting.Store(0)
			if err != nil {
				b.Fatalf("no completion within %v: %v", benchTimeout, err)
			}
			e.cq.AckEvents(1)
			spins = 0
			continue
		}
		if spins%4096 == 0 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(benchTimeout)
			} else if now.After(deadline) {
				b.Fatalf("no completion within %v", benchTimeout)
			}
		}
	}
}

// linkCounters returns the packets sent and retransmissions of both ends.
func benchCounters(x, y *benchEnd) (sent, retrans uint64) {
	for _, e := range [2]*benchEnd{x, y} {
		st := stats(e.ctx)
		sent += st.Sent.Load()
		retrans += st.Retransmits.Load()
	}
	return sent, retrans
}

// reportPackets reports the packets both devices sent per op (data and
// ACKs) and, when there were any, retransmissions per op: these mean
// loopback dropped packets and the figures include timeouts.
func benchReportPackets(b *testing.B, x, y *benchEnd, sent0, retrans0 uint64) {
	sent, retrans := benchCounters(x, y)
	b.ReportMetric(float64(sent-sent0)/float64(b.N), "pkts/op")
	if retrans > retrans0 {
		b.ReportMetric(float64(retrans-retrans0)/float64(b.N), "retrans/op")
	}
}

// BenchmarkRCWrite64KiB measures RDMA WRITE bandwidth: 64 KiB messages, all
// signaled, up to 16 outstanding.
func BenchmarkRCWrite64KiB(b *testing.B) {
	const (
		size   = 64 << 10
		window = 16
	)
	x, y := newBenchPair(b, window*size, 2*window)
	sgl := make([][]verbs.SGE, window)
	wrs := make([]verbs.SendWR, window)
	for i := range wrs {
		sgl[i] = []verbs.SGE{x.mr.SGE(i*size, size)}
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: sgl[i], RemoteAddr: y.mr.Addr() + uint64(i*size), RKey: y.mr.RKey()}
	}
	b.SetBytes(size)
	sent0, retrans0 := benchCounters(x, y)
	b.ReportAllocs()
	b.ResetTimer()
	out := 0
	for i := 0; i < b.N; i++ {
		for out >= window {
			out -= len(x.poll(b))
		}
		if err := x.qp.PostSend(wrs[i%window]); err != nil {
			b.Fatal(err)
		}
		out++
	}
	for out > 0 {
		out -= len(x.poll(b))
	}
	b.StopTimer()
	benchReportPackets(b, x, y, sent0, retrans0)
}

// BenchmarkRCSend8B measures latency: one op is a ping-pong of 8-byte SENDs
// (x to y, then y to x), each side busy polling its CQ for the receive.
// Sends are unsignaled; the ACKs retire them.
func BenchmarkRCSend8B(b *testing.B) {
	x, y := newBenchPair(b, 4096, 64)
	type side struct {
		e    *benchEnd
		send verbs.SendWR
		recv verbs.RecvWR
	}
	mk := func(e *benchEnd) *side {
		s := &side{e: e,
			send: verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{e.mr.SGE(0, 8)}},
			recv: verbs.RecvWR{ID: 1, SGL: []verbs.SGE{e.mr.SGE(64, 64)}}}
		if err := e.qp.PostRecv(s.recv); err != nil {
			b.Fatal(err)
		}
		return s
	}
	sx, sy := mk(x), mk(y)
	hop := func(from, to *side) {
		if err := from.e.qp.PostSend(from.send); err != nil {
			b.Fatal(err)
		}
		for _, wc := range to.e.poll(b) {
			if wc.Opcode != verbs.WCRecv || wc.ByteLen != 8 {
				b.Fatalf("unexpected completion %+v", wc)
			}
		}
		if err := to.e.qp.PostRecv(to.recv); err != nil {
			b.Fatal(err)
		}
	}
	hop(sx, sy) // warm up
	hop(sy, sx)
	sent0, retrans0 := benchCounters(x, y)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hop(sx, sy)
		hop(sy, sx)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/one-way")
	benchReportPackets(b, x, y, sent0, retrans0)
}

// BenchmarkRCWrite8BPostList measures message rate: 8-byte RDMA WRITEs
// posted 32 to a PostSend call, the last of each list signaled, up to 8
// lists outstanding. One op is one message.
func BenchmarkRCWrite8BPostList(b *testing.B) {
	const (
		list  = 32
		lists = 8
	)
	x, y := newBenchPair(b, 4096, 2*list*lists)
	wrs := make([]verbs.SendWR, list)
	for i := range wrs {
		wrs[i] = verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{x.mr.SGE(8*i, 8)},
			RemoteAddr: y.mr.Addr() + uint64(8*i), RKey: y.mr.RKey()}
	}
	wrs[list-1].Flags = verbs.SendSignaled
	sent0, retrans0 := benchCounters(x, y)
	b.ReportAllocs()
	b.ResetTimer()
	out := 0
	for sent := 0; sent < b.N; sent += list {
		for out >= lists {
			out -= len(x.poll(b))
		}
		if err := x.qp.PostSend(wrs...); err != nil {
			b.Fatal(err)
		}
		out++
	}
	for out > 0 {
		out -= len(x.poll(b))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	benchReportPackets(b, x, y, sent0, retrans0)
}

// tcpPair returns a connected TCP loopback pair on 127.0.0.1.
func benchTCPPair(b *testing.B) (client, server net.Conn) {
	b.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Skipf("no TCP loopback: %v", err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	client, err = net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		client.Close()
		b.Fatal(r.err)
	}
	b.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

// BenchmarkTCPStream64KiB is the baseline of BenchmarkRCWrite64KiB: 64 KiB
// writes on a Go TCP loopback connection, drained by a reader goroutine.
func BenchmarkTCPStream64KiB(b *testing.B) { benchTCPStream(b, 64<<10) }

// BenchmarkTCPStream16KiB, 32KiB and 1MiB are the baselines of
// BenchmarkUDPFloor16KiB, 32KiB and 1MiB.
func BenchmarkTCPStream16KiB(b *testing.B) { benchTCPStream(b, 16<<10) }
func BenchmarkTCPStream32KiB(b *testing.B) { benchTCPStream(b, 32<<10) }
func BenchmarkTCPStream1MiB(b *testing.B)  { benchTCPStream(b, 1<<20) }

// benchTCPStream writes size bytes per op on a Go TCP loopback connection,
// drained by a reader goroutine (into a buffer of max(size, 256 KiB)).
func benchTCPStream(b *testing.B, size int) {
	c, s := benchTCPPair(b)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, max(size, 256<<10))
		for {
			if _, err := s.Read(buf); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- err
				return
			}
		}
	}()
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	select {
	case err := <-done:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(benchTimeout):
		b.Fatal("reader did not finish")
	}
	b.StopTimer()
}

// BenchmarkTCPPingPong8B is the baseline of BenchmarkRCSend8B: an 8-byte
// echo on a Go TCP loopback connection (TCP_NODELAY, blocking reads).
func BenchmarkTCPPingPong8B(b *testing.B) {
	c, s := benchTCPPair(b)
	go func() {
		var buf [8]byte
		for {
			if _, err := io.ReadFull(s, buf[:]); err != nil {
				return
			}
			if _, err := s.Write(buf[:]); err != nil {
				return
			}
		}
	}()
	var buf [8]byte
	c.SetDeadline(time.Now().Add(time.Minute)) // bounded even if the echo goroutine dies
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/one-way")
}
