package engine

// Ring 2 of the test plan (docs/DESIGN.md, "Testing, in rings"): a deterministic
// simulation of many RC QP pairs over one lossy, reordering, duplicating and
// corrupting memlink.Network, driven by a fake clock from a seed, with every
// outcome checked against a model.
//
// The loop runs on one goroutine and never reads the wall clock. Each step
// moves the virtual clock to the earliest of: the next datagram delivery
// (all datagrams due then are handed to their hosts, one Host.Receive per
// destination host), the earliest QP deadline (QP.OnTimer; deadlines are
// learnt through QPConfig.OnDeadline and checked against QP.Deadline), and the next
// workload tick (posting work requests, reposting receives, starving receive
// queues to provoke RNR NAKs). After every step the completion queues are
// drained and checked against the model (sim_model_test.go).
//
// A failure names its seed; replay it with
//
//	go test ./engine -run 'TestSim$' -sim.seed=N -v
//
// -sim.seeds=K runs seeds 1..K, -sim.wrs=N posts N send WRs per seed; -sim.long (or RDMA_GO_SIM_LONG=1) runs more
// seeds with more work requests each.

import (
	"encoding/binary"
	"flag"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/link/memlink"
	"github.com/rdma-go/rdma-go/wire"
)

var (
	simSeedFlag  = flag.Uint64("sim.seed", 0, "simulation: run only this seed (seeds start at 1)")
	simSeedsFlag = flag.Int("sim.seeds", 0, "simulation: run seeds 1..K (default depends on the mode)")
	simWRsFlag   = flag.Int("sim.wrs", 0, "simulation: send work requests per seed (default depends on the mode)")
	simLongFlag  = flag.Bool("sim.long", false, "simulation: long run, more seeds and work requests (or RDMA_GO_SIM_LONG=1)")
)

func simLong() bool { return *simLongFlag || os.Getenv("RDMA_GO_SIM_LONG") == "1" }

// simConfig sizes one simulation run.
type simConfig struct {
	seed  uint64
	ipv6  bool // hosts on fd00::/8 instead of 127.0.0.0/8
	hosts int
	pairs int
	wrs   int // send work requests over all QPs (each QP of a pair sends)
	// maxIter and maxVirtual bound the loop.
	maxIter    int
	maxVirtual time.Duration
	faults     memlink.Faults
	partitions bool  // cut host pairs now and then
	retryCnt   uint8 // every QP's retry_cnt (7: infinite)
	minTimeout uint8 // the local ACK timeout is drawn from minTimeout..12
	ops        []simOpWeight
	readBurst  int // HostConfig.ReadBurst (0: the default)
}

// simFaults are the faults during the workload; simCalm after it.
var (
	simFaults = memlink.Faults{Drop: 0.05, Reorder: 0.05, Duplicate: 0.01, Corrupt: 0.01,
		Delay: 5 * time.Microsecond, Jitter: 20 * time.Microsecond, ReorderDelay: 150 * time.Microsecond}
	simCalm = memlink.Faults{Delay: 5 * time.Microsecond}
)

func defaultSimConfig(seed uint64, wrs int) simConfig {
	return simConfig{
		seed:       seed,
		ipv6:       seed%2 == 0,
		hosts:      4,
		pairs:      12,
		wrs:        wrs,
		maxIter:    40 * wrs * 10,
		maxVirtual: time.Duration(wrs) * 2 * time.Millisecond,
		faults:     simFaults,
		partitions: true,
		retryCnt:   7,
		minTimeout: 5, // 131 µs: spurious retransmissions
		ops:        simOpWeights,
	}
}

// TestSim runs the simulation over several seeds.
func TestSim(t *testing.T) {
	seeds, wrs := simDefaultSeeds, simDefaultWRs
	if simLong() {
		seeds, wrs = 40, 40000
	}
	if *simSeedsFlag > 0 {
		seeds = *simSeedsFlag
	}
	if *simWRsFlag > 0 {
		wrs = *simWRsFlag
	}
	var list []uint64
	if *simSeedFlag != 0 {
		list = []uint64{*simSeedFlag}
	} else {
		for i := 1; i <= seeds; i++ {
			list = append(list, uint64(i))
		}
	}
	for _, seed := range list {
		cfg := defaultSimConfig(seed, wrs)
		name := fmt.Sprintf("seed=%d", seed)
		if cfg.ipv6 {
			name += "/ipv6"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runSim(t, cfg)
			t.Logf("seed=%d: %s", seed, r)
		})
	}
}

// TestSimDeterminism runs one seed twice and compares the traces: every
// delivered datagram and every completion, with their virtual times.
func TestSimDeterminism(t *testing.T) {
	for _, seed := range simDeterminismSeeds {
		cfg := defaultSimConfig(seed, simDeterminismWRs)
		a := runSim(t, cfg)
		b := runSim(t, cfg)
		if a.trace != b.trace || a.events != b.events || a.end != b.end {
			t.Fatalf("seed=%d: runs differ: %s vs %s", seed, a, b)
		}
		c := runSim(t, defaultSimConfig(seed+2, simDeterminismWRs))
		if c.trace == a.trace {
			t.Fatalf("seed=%d and seed=%d gave the same trace %x", seed, seed+2, a.trace)
		}
	}
}

// TestSimNoLoss runs seeds whose network holds back 5% of the packets
// (reordering them) and duplicates 1%, but loses none and adds no jitter,
// with retry_cnt 3 and timeouts well above the worst delay. A go-back-N
// then needs the timeout only when its first packet (or a READ response) is
// the one held back, so retries never run out in practice. Each echo of a
// loss (a duplicated NAK, an ACK past a READ whose response is late) used
// to start another retry and use one up, which failed QPs in under a
// millisecond here.
func TestSimNoLoss(t *testing.T) {
	for _, seed := range []uint64{201, 202} {
		cfg := defaultSimConfig(seed, simDeterminismWRs)
		cfg.faults.Drop, cfg.faults.Corrupt, cfg.faults.Jitter = 0, 0, 0
		cfg.partitions = false
		cfg.retryCnt = 3
		cfg.minTimeout = 8 // 1 ms; the worst one-way delay is 155 µs
		r := runSim(t, cfg)
		t.Logf("seed=%d: %s", seed, r)
	}
}

// simResult summarises a run.
type simResult struct {
	trace        uint64 // hash of every delivered datagram and completion
	events       int    // datagrams delivered + completions
	end          time.Duration
	iters        int
	sendWRs      int
	opCount      [numWROps]int
	signaled     int
	partitions   int
	srqQPs       int
	recvs        int
	net          memlink.Stats
	icrc, dups   uint64
	retrans, rnr uint64
	seqNAK       uint64
}

func (r simResult) String() string {
	return fmt.Sprintf("%d send WRs (%d signaled; ops %v), %d receives (%d QPs on SRQs), %d partitions, %d events, %d steps, virtual %v, trace %016x; "+
		"net sent %d dropped %d dup %d reordered %d corrupted %d; hosts: ICRC drops %d, duplicates %d, retransmits %d, RNR NAKs %d, seq NAKs %d",
		r.sendWRs, r.signaled, r.opCount, r.recvs, r.srqQPs, r.partitions, r.events, r.iters, r.end, r.trace,
		r.net.Sent, r.net.Dropped, r.net.Duplicated, r.net.Reordered, r.net.Corrupted,
		r.icrc, r.dups, r.retrans, r.rnr, r.seqNAK)
}

// sim is one simulation run.
type sim struct {
	t     *testing.T
	cfg   simConfig
	rng   *rand.Rand
	start time.Time
	now   time.Time
	net   *memlink.Network
	hosts []*simHost
	qps   []*simQP
	rqs   []*simRQ // receive queues, SRQs first

	calm     bool      // faults are off: the drain phase
	cuts     []simCut  // partitions in force
	nextCut  time.Time // next partition
	nextWork time.Time // next workload tick
	trace    hash.Hash64
	events   int
	res      simResult

	// per-host delivery batches, reused
	batches [][]link.Datagram
}

type simHost struct {
	idx  int
	addr netip.Addr
	h    *Host
	s    *sim
	srq  *SRQ
	rq   *simRQ // srq's model
}

// Send implements Sender: datagrams go onto the network at the current
// virtual time.
func (h *simHost) Send(batch []link.Datagram) error {
	for _, d := range batch {
		h.s.net.Send(h.s.now, d)
	}
	return nil
}

func (h *simHost) SourcePort(want uint16) uint16 { return want }

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	replay := fmt.Sprintf("-run 'TestSim$' -sim.seed=%d -sim.wrs=%d", s.cfg.seed, s.cfg.wrs)
	if top, _, _ := strings.Cut(s.t.Name(), "/"); top != "TestSim" {
		replay = fmt.Sprintf("-run '^%s$'", top) // a fixed configuration
	}
	s.t.Fatalf("seed=%d (replay: go test ./engine %s -v) at %v: %s\n%s",
		s.cfg.seed, replay, s.now.Sub(s.start), fmt.Sprintf(format, args...), s.dump())
}

// dump describes every QP's engine and model state, for failures.
func (s *sim) dump() string {
	var b strings.Builder
	for _, q := range s.qps {
		qp := q.qp
		qp.mu.Lock()
		r, rs := &qp.req, &qp.rsp
		fmt.Fprintf(&b, "qp%d (host %d qpn 0x%x -> host %d, mtu %d): st=%d sq=%d next=%d started=%d head=%d psn=%d comp=%d high=%d rd=%d retransAt=%v rnrAt=%v retry=%d rnr=%d | rsp ePSN=%d kind=%d rq=%d | model posted=%d done=%d budget=%d %s: recvDone=%d expect=%d\n",
			q.idx, q.host.idx, qp.qpn, q.peer.host.idx, q.mtu, qp.st, qp.sq.len(), r.next, r.started, qp.sq.head, r.psn, r.compPSN, r.highPSN, r.rdInFlight,
			simRel(s.start, r.retransAt), simRel(s.start, r.rnrAt), r.retryLeft, r.rnrLeft,
			rs.ePSN, rs.kind, qp.rq.len(), q.posted, q.done, q.budget, q.rq.name, q.recvDone, len(q.expect))
		qp.mu.Unlock()
	}
	for _, rq := range s.rqs {
		fmt.Fprintf(&b, "%s: posted=%d outstanding=%d starving=%v\n", rq.name, rq.posted, len(rq.out), rq.starving)
	}
	for _, h := range s.hosts {
		fmt.Fprintf(&b, "host %d (%v):", h.idx, h.addr)
		v := reflect.ValueOf(h.h.Stats()).Elem()
		for i := range v.NumField() {
			if c, ok := v.Field(i).Addr().Interface().(*atomic.Uint64); ok && c.Load() != 0 {
				fmt.Fprintf(&b, " %s=%d", v.Type().Field(i).Name, c.Load())
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func simRel(start, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(start).String()
}

// runSim builds the hosts and QPs for cfg, runs the workload and the drain,
// and checks the model. It fails t (naming the seed) on any violation.
func runSim(t *testing.T, cfg simConfig) simResult {
	t.Helper()
	s := &sim{t: t, cfg: cfg, start: time.Unix(1_000_000, 0), trace: fnv.New64a()}
	s.now = s.start
	s.rng = rand.New(rand.NewPCG(cfg.seed, 0x5EED5EED))
	s.net = memlink.NewNetwork(int64(cfg.seed), cfg.faults)
	for i := range cfg.hosts {
		var a netip.Addr
		if cfg.ipv6 {
			a = netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(i + 1)})
		} else {
			a = netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})
		}
		h := &simHost{idx: i, addr: a, s: s}
		h.h = NewHost(HostConfig{Addr: a, Link: h, ICRC: wire.ICRCIPv4Strict, ReadBurst: cfg.readBurst})
		s.hosts = append(s.hosts, h)
	}
	s.batches = make([][]link.Datagram, len(s.hosts))
	s.setupSRQs()
	s.setup()
	s.loop()
	s.finalCheck()
	s.res.trace = s.trace.Sum64()
	s.res.events = s.events
	s.res.end = s.now.Sub(s.start)
	s.res.net = s.net.Stats()
	for _, h := range s.hosts {
		st := h.h.Stats()
		s.res.icrc += st.DropICRC.Load()
		s.res.dups += st.Duplicates.Load()
		s.res.retrans += st.Retransmits.Load()
		s.res.rnr += st.RNRNAKsReceived.Load()
		s.res.seqNAK += st.SeqNAKsReceived.Load()
	}
	// The faults must have been exercised, or the run proves little.
	// Short runs (the determinism test's) may miss some.
	if cfg.wrs < 10000 {
		return s.res
	}
	if s.res.net.Corrupted == 0 || s.res.icrc == 0 {
		s.fatalf("no corrupted packet was dropped for its ICRC (net corrupted %d, ICRC drops %d)", s.res.net.Corrupted, s.res.icrc)
	}
	if s.res.net.Duplicated == 0 || s.res.dups == 0 {
		s.fatalf("no duplicate request reached a responder (net duplicated %d, seen %d)", s.res.net.Duplicated, s.res.dups)
	}
	if s.res.retrans == 0 || s.res.rnr == 0 || s.res.seqNAK == 0 {
		s.fatalf("retransmits %d, RNR NAKs %d, sequence NAKs %d: want all > 0", s.res.retrans, s.res.rnr, s.res.seqNAK)
	}
	if s.res.net.Reordered == 0 || s.res.net.Dropped == 0 {
		s.fatalf("network reordered %d, dropped %d: want both > 0", s.res.net.Reordered, s.res.net.Dropped)
	}
	return s.res
}

// loop is the event loop: workload under faults, then a calm drain, until
// nothing is left to happen.
func (s *sim) loop() {
	s.nextWork = s.now
	s.nextCut = s.now.Add(time.Duration(2+s.rng.IntN(10)) * time.Millisecond)
	limit := s.start.Add(s.cfg.maxVirtual)
	for iter := 0; ; iter++ {
		s.res.iters = iter
		if iter >= s.cfg.maxIter {
			s.fatalf("no end after %d steps", iter)
		}
		s.pollAll()
		if !s.calm && s.workloadPosted() {
			// Everything is posted: stop the faults and the RNR
			// starvation, and drain.
			s.calm = true
			s.net.SetFaults(simCalm)
			s.partitions()
			for _, rq := range s.rqs {
				rq.endStarve(s)
			}
		}
		working := !s.calm || s.anyStarving()
		if iter%64 == 0 {
			s.checkTimerHints()
		}
		next, ok := s.net.NextDelivery()
		for _, q := range s.qps {
			if d := q.timerHint; !d.IsZero() && (!ok || d.Before(next)) {
				next, ok = d, true
			}
		}
		if working && (!ok || s.nextWork.Before(next)) {
			next, ok = s.nextWork, true
		}
		if !ok {
			s.checkTimerHints()
			return // nothing in flight, no timer, no work
		}
		if next.After(limit) {
			s.fatalf("virtual time limit %v passed (next event at %v)", s.cfg.maxVirtual, next.Sub(s.start))
		}
		if next.After(s.now) {
			s.now = next
		}
		s.deliver()
		for _, q := range s.qps {
			if d := q.timerHint; !d.IsZero() && !d.After(s.now) {
				q.timerHint = time.Time{}
				q.qp.OnTimer(s.now) // reports the next deadline, if any
			}
		}
		if working && !s.nextWork.After(s.now) {
			s.tick()
			s.nextWork = s.now.Add(time.Duration(1+s.rng.IntN(20)) * time.Microsecond)
		}
	}
}

// checkTimerHints checks what the loop relies on to find timers without
// polling every QP: each QP's deadline (QP.Deadline) has been reported
// through QPConfig.OnDeadline at or before the time it is due.
func (s *sim) checkTimerHints() {
	for _, q := range s.qps {
		if d, ok := q.qp.Deadline(); ok && (q.timerHint.IsZero() || q.timerHint.After(d)) {
			s.fatalf("qp%d: deadline %v was not reported through OnDeadline (hint %v)", q.idx, d.Sub(s.start), simRel(s.start, q.timerHint))
		}
	}
}

// deliver pops every datagram due now and hands them to their hosts, one
// Receive call per destination host, in host order.
func (s *sim) deliver() {
	got := false
	for {
		d, ok := s.net.Pop(s.now)
		if !ok {
			break
		}
		h := s.hostOf(d.Dst.Addr())
		if h == nil {
			s.fatalf("datagram to unknown address %v", d.Dst)
		}
		s.traceDatagram(&d)
		s.batches[h.idx] = append(s.batches[h.idx], d)
		got = true
	}
	if !got {
		return
	}
	for i, b := range s.batches {
		if len(b) == 0 {
			continue
		}
		s.hosts[i].h.Receive(s.now, b)
		clear(b)
		s.batches[i] = b[:0]
	}
}

func (s *sim) hostOf(a netip.Addr) *simHost {
	for _, h := range s.hosts {
		if h.addr == a.Unmap() {
			return h
		}
	}
	return nil
}

// traceDatagram adds a delivered datagram to the trace. Memory addresses
// and keys differ from run to run (they are real Go addresses and random
// key variants), so RETH, AtomicETH, IETH and the ICRC are left out; a packet
// whose ICRC fails (it was corrupted) contributes only its length and BTH.
func (s *sim) traceDatagram(d *link.Datagram) {
	s.events++
	var hdr [24]byte
	binary.LittleEndian.PutUint64(hdr[0:], uint64(s.now.Sub(s.start)))
	copy(hdr[8:], d.Src.Addr().AsSlice()[len(d.Src.Addr().AsSlice())-1:])
	copy(hdr[9:], d.Dst.Addr().AsSlice()[len(d.Dst.Addr().AsSlice())-1:])
	binary.LittleEndian.PutUint16(hdr[10:], d.Src.Port())
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(d.Buf)))
	s.trace.Write(hdr[:16])
	b := d.Buf
	s.trace.Write(b[:min(len(b), wire.BTHLen)])
	var p wire.Packet
	if p.Parse(b) != nil || !wire.VerifyICRC(d.Src.Addr(), d.Dst.Addr(), d.Src.Port(), d.Dst.Port(), b, wire.ICRCIPv4Strict) {
		return
	}
	s.trace.Write(p.AETH())
	s.trace.Write(p.AtomicAckETH())
	s.trace.Write(p.ImmDt())
	s.trace.Write(p.Payload)
}

// traceCompletion adds a completion to the trace.
func (s *sim) traceCompletion(q *simQP, recv bool, c *Completion) {
	s.events++
	var b [40]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(s.now.Sub(s.start)))
	b[8] = byte(q.idx)
	if recv {
		b[9] = 1
	}
	binary.LittleEndian.PutUint64(b[10:], c.WRID)
	b[18], b[19] = byte(c.Status), byte(c.Opcode)
	binary.LittleEndian.PutUint32(b[20:], c.Flags)
	binary.LittleEndian.PutUint32(b[24:], c.ByteLen)
	if c.Flags&WCFlagWithInv == 0 {
		binary.LittleEndian.PutUint32(b[28:], c.Imm)
	}
	binary.LittleEndian.PutUint32(b[32:], c.QPN)
	binary.LittleEndian.PutUint32(b[36:], c.SrcQP)
	s.trace.Write(b[:])
}
