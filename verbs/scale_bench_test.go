package verbs_test

// BenchmarkQPScale: what many connected RC QPs cost. It only runs with
// -bench; see BENCHMARKS.md at the repository root.

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// scaleQPs is the number of RC QP pairs BenchmarkQPScale connects. Set it
// with -scale.qps=N (after the package, or after -args).
var scaleQPs = flag.Int("scale.qps", 100000, "RC QP pairs BenchmarkQPScale connects")

// scaleOutstanding bounds BenchmarkQPScale's WRITEs in flight per QP; 8
// times as many are allowed in all, so that the 8 pairs of the baseline
// fill the window as the spread WRITEs do. At 1 every WRITE of both modes
// gets an ACK of its own, so the ratio is what the number of QPs costs;
// above 1 the baseline's responder acknowledges several WRITEs of a QP at
// once, which WRITEs spread one per QP cannot have (see pkts/write).
var scaleOutstanding = flag.Int("scale.outstanding", 1, "BenchmarkQPScale's WRITEs in flight per QP (1–16); 8× as many in all")

// The targets BenchmarkQPScale guards: heap per connected QP, and the
// WRITE rate spread over all pairs against the rate over the first 8.
const (
	scaleMaxBytesPerQP = 8 << 10
	scaleMinRatio      = 0.9
	scaleGuardQPs      = 10000 // pairs from which B/qp is checked
)

const (
	scaleMsg      = 4 << 10 // bytes per WRITE
	scaleSlots    = 64      // 4 KiB slots of each side's MR (the WRITEs reuse them)
	scaleSQ       = 16      // send queue depth of each QP
	scaleRQ       = 16      // receive queue depth (no receives are posted)
	scaleBase     = 8       // QP pairs of the baseline
	scaleMinRound = 16384   // WRITEs per round and mode, at least
	scaleSegments = 16      // each round alternates all/8 this many times
)

// scaleSide is one device of BenchmarkQPScale: a benchEnd (for its context,
// PD, shared CQ and MR, and its poll), the side's QPs and their PSNs.
type scaleSide struct {
	benchEnd
	qps      []*verbs.QP
	psns     []uint32
	gidIndex int // of the GID holding the device's address
}

// newScaleSide opens a soft device on a free testdev loopback address with
// one PD, one completion channel, one CQ and one MR, all shared by the QPs
// created later; everything is released when the benchmark ends.
func newScaleSide(b *testing.B, n int) *scaleSide {
	b.Helper()
	s := &scaleSide{qps: make([]*verbs.QP, 0, n), psns: make([]uint32, n)}
	e := &s.benchEnd
	e.ctx = testdev.Device(b, "qs")
	benchMust(b, func() (err error) { e.pd, err = e.ctx.AllocPD(); return })
	b.Cleanup(func() { e.pd.Dealloc() })
	benchMust(b, func() (err error) { e.ch, err = e.ctx.CreateCompChannel(); return })
	b.Cleanup(func() { e.ch.Destroy() })
	// The CQ holds every completion that can be outstanding, with room
	// to spare: the WRITEs are all signaled, at most 8 × scaleSQ in flight.
	benchMust(b, func() (err error) { e.cq, err = e.ctx.CreateCQ(16*scaleSQ, e.ch); return })
	b.Cleanup(func() { e.cq.Destroy() })
	benchMust(b, func() (err error) {
		e.mr, err = e.pd.RegMR(make([]byte, scaleSlots*scaleMsg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		return
	})
	b.Cleanup(func() { e.mr.Dereg() })
	benchMust(b, func() (err error) { s.gidIndex, err = testdev.GIDIndex(e.ctx); return })
	benchMust(b, func() (err error) { e.gid, err = e.ctx.QueryGID(1, s.gidIndex); return })
	e.watchdog(b)
	// Destroy every QP when the benchmark ends (before the CQ, MR, PD
	// and context: cleanups run last registered first).
	b.Cleanup(func() {
		for _, qp := range s.qps {
			if err := qp.Destroy(); err != nil {
				b.Errorf("destroy QP 0x%x: %v", qp.QPN(), err)
			}
		}
	})
	return s
}

// create adds a QP in RESET on the side's PD and CQ.
func (s *scaleSide) create() error {
	qp, err := s.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbs.QPCap{MaxSendWR: scaleSQ, MaxRecvWR: scaleRQ, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return fmt.Errorf("create QP %d: %w", len(s.qps), err)
	}
	s.psns[len(s.qps)] = rand.Uint32() & 0xFFFFFF
	s.qps = append(s.qps, qp)
	return nil
}

// info is what the peer's QP i needs to connect to s's QP i.
func (s *scaleSide) info(i int) peerInfo {
	return peerInfo{QPN: s.qps[i].QPN(), PSN: s.psns[i], GID: s.gid}
}

// heapAlloc returns the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// scaleMode is what BenchmarkQPScale measured of one mode (spread, or over
// 8 pairs).
type scaleMode struct {
	t    time.Duration
	pkts uint64 // packets both devices sent (WRITEs and ACKs)
	// With -tags rdmago_stages: the engine's stage times (see
	// engine.StageTimes) and the time the posts took.
	stages engine.StageTimes
	post   engine.StageTime
}

// timed runs f, and adds how long it took, the packets x and y sent
// meanwhile and the engine's stage times to m.
func timed(f func(), x, y *scaleSide, m *scaleMode) {
	sent0, _ := benchCounters(&x.benchEnd, &y.benchEnd)
	st0 := engine.ReadStageTimes()
	t := time.Now()
	f()
	m.t += time.Since(t)
	sent, _ := benchCounters(&x.benchEnd, &y.benchEnd)
	m.pkts += sent - sent0
	m.stages = m.stages.Add(engine.ReadStageTimes().Sub(st0))
}

// logStages logs, with -tags rdmago_stages, what each stage took per
// WRITE in each mode and how much more it took spread.
func logStages(b *testing.B, all, base *scaleMode, writes uint64) {
	if !engine.StageTimesEnabled {
		return
	}
	type row struct {
		name      string
		all, base engine.StageTime
	}
	for _, r := range []row{
		{"post (whole call)", all.post, base.post},
		{"  its packets made", all.stages.PostBuild, base.stages.PostBuild},
		{"  its packets sent", all.stages.PostSend, base.stages.PostSend},
		{"request received", all.stages.RxRequest, base.stages.RxRequest},
		{"response received", all.stages.RxResponse, base.stages.RxResponse},
		{"received batch's send", all.stages.RxFlush, base.stages.RxFlush},
	} {
		a, o := r.all.Per(writes), r.base.Per(writes)
		b.Logf("stage %-22s %6d ns/write spread, %6d over 8: %+5d ns (%.2f and %.2f per write)",
			r.name, a.Nanoseconds(), o.Nanoseconds(), (a - o).Nanoseconds(),
			float64(r.all.Count)/float64(writes), float64(r.base.Count)/float64(writes))
	}
}

// BenchmarkQPScale connects -scale.qps RC QP pairs between two soft devices
// by hand (RESET→INIT→RTR→RTS; one PD, CQ and MR per side, shared by all
// the QPs; send and receive queues 16 deep) and reports:
//
//   - B/qp: the heap the connected QPs take, per QP (2 per pair), after a
//     GC before and after creating and connecting them; guarded ≤ 8 KiB
//     from 10,000 pairs on (below, the devices' tables, grown in steps,
//     weigh more per QP);
//   - B/qp-after: the same once every QP has carried traffic;
//   - writes/s-all and writes/s-8: 4 KiB RDMA WRITEs spread round-robin
//     over all the pairs, and over the first 8 pairs, the same number of
//     each (one per pair per round, at least 16,384), interleaved in 16
//     segments per round so that load on the machine hits both alike; at
//     most -scale.outstanding (1) in flight per QP and 8 times that in
//     all, all signaled, x's shared CQ polled;
//   - ratio_vs_8: the median over the segments of the rate over all pairs
//     against the rate over 8 measured right before or after it (a burst
//     of load from elsewhere skews a segment or two, not the median);
//     guarded ≥ 0.9;
//   - pkts/write-all and pkts/write-8: packets both devices sent (WRITEs
//     and ACKs) per WRITE, in each mode;
//   - retrans/write, when loopback dropped packets.
//
// One op is one round of each mode. Run it once (-benchtime 1x): the set-up
// of 100,000 pairs takes far longer than the rounds. Everything, the QPs
// first, is destroyed when it ends.
func BenchmarkQPScale(b *testing.B) {
	n := *scaleQPs
	if n < 1 {
		b.Fatalf("-scale.qps=%d: need at least one QP pair", n)
	}
	base := min(scaleBase, n)
	perQP, window := *scaleOutstanding, scaleBase**scaleOutstanding
	if perQP < 1 || perQP > scaleSQ {
		b.Fatalf("-scale.outstanding=%d: must be 1–%d", perQP, scaleSQ)
	}
	x, y := newScaleSide(b, n), newScaleSide(b, n)
	if x.ctx.Device().Addr() == y.ctx.Device().Addr() {
		b.Fatalf("both devices on %s", x.ctx.Device().Addr())
	}
	if x.gidIndex != y.gidIndex {
		b.Fatalf("address GIDs at indexes %d and %d", x.gidIndex, y.gidIndex)
	}
	cfg := defaultPairConfig()
	cfg.MaxRD = 1 // WRITEs only: no RDMA READ or atomic resources
	cfg.GIDIndex = x.gidIndex

	// Heap per connected QP. The slices holding the QPs were sized
	// beforehand, so the difference is the QPs' own (device and engine)
	// state plus 8 bytes of pointer each.
	start := time.Now()
	heap0 := heapAlloc()
	for i := range n {
		if err := x.create(); err != nil {
			b.Fatal(err)
		}
		if err := y.create(); err != nil {
			b.Fatal(err)
		}
		if err := connectQP(x.qps[i], x.psns[i], y.info(i), &cfg); err != nil {
			b.Fatalf("connect pair %d (x): %v", i, err)
		}
		if err := connectQP(y.qps[i], y.psns[i], x.info(i), &cfg); err != nil {
			b.Fatalf("connect pair %d (y): %v", i, err)
		}
	}
	heapPerQP := float64(int64(heapAlloc())-int64(heap0)) / float64(2*n)
	b.Logf("%d QP pairs created and connected in %v: %.0f B of heap per QP", n, time.Since(start).Round(time.Millisecond), heapPerQP)

	// The WRITEs: one per slot, sent from x's slot to the same slot of
	// y's MR, the work request ID naming the pair.
	wrs := make([]verbs.SendWR, scaleSlots)
	sgl := make([]verbs.SGE, scaleSlots)
	for i := range wrs {
		sgl[i] = x.mr.SGE(i*scaleMsg, scaleMsg)
		wrs[i] = verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: sgl[i : i+1],
			RemoteAddr: y.mr.Addr() + uint64(i*scaleMsg), RKey: y.mr.RKey()}
	}
	round := max(n, scaleMinRound)
	out := make([]int32, n) // outstanding WRITEs per pair
	total := 0              // outstanding WRITEs in all
	var posted uint64
	reap := func() {
		for _, wc := range x.poll(b) {
			out[wc.WRID]--
			total--
		}
	}
	// run posts count WRITEs round-robin over the first pairs pairs,
	// continuing from *next, and waits for all to complete. With
	// -tags rdmago_stages it adds the posts' time to m, if not nil.
	run := func(count, pairs int, next *int, m *scaleMode) {
		for range count {
			p := *next
			*next = (p + 1) % pairs
			for total >= window || int(out[p]) >= perQP {
				reap()
			}
			wr := &wrs[posted%scaleSlots]
			wr.ID = uint64(p)
			var t0 time.Time
			if engine.StageTimesEnabled {
				t0 = time.Now()
			}
			if err := x.qps[p].PostSend(*wr); err != nil {
				b.Fatalf("WRITE on pair %d: %v", p, err)
			}
			if engine.StageTimesEnabled && m != nil {
				m.post.Total += time.Since(t0)
				m.post.Count++
			}
			posted++
			out[p]++
			total++
		}
		for total > 0 {
			reap()
		}
	}
	var nextAll, nextBase int
	// Warm up: every pair carries one round's share (a QP's first packet
	// may set up state, e.g. its UDP source port), then the baseline.
	run(round, n, &nextAll, nil)
	run(round, base, &nextBase, nil)
	heapPerQPAfter := float64(int64(heapAlloc())-int64(heap0)) / float64(2*n)
	_, retrans0 := benchCounters(&x.benchEnd, &y.benchEnd)

	// ratios holds, per segment, the rate over all pairs against the
	// rate over the baseline's measured right before or after it.
	var (
		all, eight scaleMode
		ratios     []float64
	)
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for range b.N {
		for s := range scaleSegments {
			// Split the round evenly; the last segment takes the rest.
			seg := round / scaleSegments
			if s == scaleSegments-1 {
				seg = round - seg*(scaleSegments-1)
			}
			// Alternate which mode goes first, so that neither
			// always runs just after the other.
			ta, tb := all.t, eight.t
			if s%2 == 0 {
				timed(func() { run(seg, n, &nextAll, &all) }, x, y, &all)
				timed(func() { run(seg, base, &nextBase, &eight) }, x, y, &eight)
			} else {
				timed(func() { run(seg, base, &nextBase, &eight) }, x, y, &eight)
				timed(func() { run(seg, n, &nextAll, &all) }, x, y, &all)
			}
			ratios = append(ratios, (eight.t-tb).Seconds()/(all.t-ta).Seconds())
		}
	}
	b.StopTimer()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)

	writes := float64(b.N) * float64(round)
	rateAll, rateBase := writes/all.t.Seconds(), writes/eight.t.Seconds()
	ratio := workload.Median(ratios)
	b.ReportMetric(heapPerQP, "B/qp")
	b.ReportMetric(heapPerQPAfter, "B/qp-after")
	b.ReportMetric(rateAll, "writes/s-all")
	b.ReportMetric(rateBase, "writes/s-8")
	b.ReportMetric(ratio, "ratio_vs_8")
	b.ReportMetric(float64(all.pkts)/writes, "pkts/write-all")
	b.ReportMetric(float64(eight.pkts)/writes, "pkts/write-8")
	// Both modes' allocations (and so their garbage collections) per WRITE.
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/(2*writes), "allocs/write")
	b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "GCs")
	_, retrans := benchCounters(&x.benchEnd, &y.benchEnd)
	if retrans > retrans0 {
		// Loopback dropped packets: the rates include retransmission
		// timeouts.
		b.ReportMetric(float64(retrans-retrans0)/(2*writes), "retrans/write")
	}
	b.Logf("%d pairs: %.0f B/qp connected, %.0f B/qp after traffic; %.0f writes/s over all, %.0f over %d; ratio %.2f (segments %.2f–%.2f); packets per write %.2f and %.2f; %d retransmissions; %.3f allocations per write, %d GCs",
		n, heapPerQP, heapPerQPAfter, rateAll, rateBase, base, ratio, slices.Min(ratios), slices.Max(ratios),
		float64(all.pkts)/writes, float64(eight.pkts)/writes, retrans-retrans0,
		float64(ms1.Mallocs-ms0.Mallocs)/(2*writes), ms1.NumGC-ms0.NumGC)
	logStages(b, &all, &eight, uint64(writes))
	// The guards. Below scaleGuardQPs pairs the devices' tables (grown
	// in steps) and first allocations weigh more per QP, so the heap per
	// QP is reported, not checked.
	if n >= scaleGuardQPs && heapPerQP > scaleMaxBytesPerQP {
		b.Errorf("%.0f B of heap per connected QP, target ≤ %d", heapPerQP, scaleMaxBytesPerQP)
	}
	if ratio < scaleMinRatio {
		b.Errorf("WRITEs over %d pairs run at %.2f× the rate over %d pairs, target ≥ %.1f×", n, ratio, base, scaleMinRatio)
	}
}
