package verbs_test

// Shared helpers of the loopback tests: soft devices on free 127.0.0.x
// addresses (never any other address), one side of an RC connection
// (context, PD, completion channel, CQs, MR, QP), the connection itself,
// and a bounded wait for completions.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// wcTimeout bounds every wait for completions (generous: -race on a loaded
// 2-CPU machine is slow, and nothing in a passing test comes near it).
const wcTimeout = 20 * time.Second

// allAccess is every access flag an MR can grant.
const allAccess = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic

// remoteAccess is every remote operation a QP can allow.
const remoteAccess = verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic

var testDevs atomic.Uint32

// newLoopbackDevice registers a soft device with a unique name that binds a
// free 127.0.0.x address when opened.
func newLoopbackDevice(t testing.TB, tag string) *verbs.Device {
	t.Helper()
	dev, err := verbs.AddLoopbackDevice(fmt.Sprintf("vt%d-%s", testDevs.Add(1), tag))
	if err != nil {
		t.Fatalf("AddLoopbackDevice: %v", err)
	}
	return dev
}

// pairConfig holds what newEnd and connectEnd use. Start from
// defaultPairConfig and change fields with options.
type pairConfig struct {
	MTU         verbs.MTU
	BufSize     int
	CQE         int // size of each CQ
	RecvCQE     int // size of the receive CQ when not zero
	Cap         verbs.QPCap
	SigAll      bool
	MRAccess    verbs.AccessFlags
	QPAccess    verbs.AccessFlags
	Timeout     uint8
	RetryCnt    uint8
	RNRRetry    uint8
	MinRNRTimer uint8
	MaxRD       uint8 // max_rd_atomic and max_dest_rd_atomic
	GIDIndex    int   // the GID the QPs address each other by
}

func defaultPairConfig() pairConfig {
	return pairConfig{
		MTU: verbs.MTU4096, BufSize: 64 << 10, CQE: 256,
		Cap:      verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64},
		MRAccess: allAccess, QPAccess: remoteAccess,
		Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12, MaxRD: 16, GIDIndex: 1,
	}
}

// tEnd is one side of an RC connection.
type tEnd struct {
	name     string
	dev      *verbs.Device
	ctx      *verbs.Context
	pd       *verbs.PD
	ch       *verbs.CompChannel
	scq, rcq *verbs.CQ
	mr       *verbs.MR
	buf      []byte
	qp       *verbs.QP
	gid      verbs.GID
	psn      uint32
}

// peerInfo is what two sides exchange to connect (and, in the two-process
// test, send each other as JSON).
type peerInfo struct {
	QPN  uint32    `json:"qpn"`
	PSN  uint32    `json:"psn"`
	GID  verbs.GID `json:"gid"`
	Addr uint64    `json:"addr"`
	RKey uint32    `json:"rkey"`
	Len  int       `json:"len"`
}

func (e *tEnd) info() peerInfo {
	return peerInfo{QPN: e.qp.QPN(), PSN: e.psn, GID: e.gid, Addr: e.mr.Addr(), RKey: e.mr.RKey(), Len: e.mr.Len()}
}

// openEnd opens dev and creates a PD, a completion channel, a send and a
// receive CQ on it, an MR over a fresh buffer and an RC QP in RESET. On
// error everything created so far is released.
func openEnd(dev *verbs.Device, cfg *pairConfig) (e *tEnd, err error) {
	e = &tEnd{name: dev.Name(), dev: dev, psn: rand.Uint32() & 0xFFFFFF}
	if e.ctx, err = dev.Open(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return e, err
	}
	if e.ch, err = e.ctx.CreateCompChannel(); err != nil {
		return e, err
	}
	if e.scq, err = e.ctx.CreateCQ(cfg.CQE, e.ch); err != nil {
		return e, err
	}
	rcqe := cfg.CQE
	if cfg.RecvCQE != 0 {
		rcqe = cfg.RecvCQE
	}
	if e.rcq, err = e.ctx.CreateCQ(rcqe, e.ch); err != nil {
		return e, err
	}
	e.buf = make([]byte, cfg.BufSize)
	if e.mr, err = e.pd.RegMR(e.buf, cfg.MRAccess); err != nil {
		return e, err
	}
	if e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: e.scq, RecvCQ: e.rcq,
		Cap: cfg.Cap, SigAll: cfg.SigAll}); err != nil {
		return e, err
	}
	if e.gid, err = e.ctx.QueryGID(1, cfg.GIDIndex); err != nil {
		return e, err
	}
	return e, nil
}

// close releases everything, in reverse order, ignoring errors (a test may
// have destroyed some objects already).
func (e *tEnd) close() {
	if e.qp != nil {
		e.qp.Destroy()
	}
	if e.mr != nil {
		e.mr.Dereg()
	}
	for _, cq := range []*verbs.CQ{e.scq, e.rcq} {
		if cq != nil {
			cq.Destroy()
		}
	}
	if e.ch != nil {
		e.ch.Destroy()
	}
	if e.pd != nil {
		e.pd.Dealloc()
	}
	e.ctx.Close()
}

// newEnd is openEnd on a new loopback device, released at the end of the
// test.
func newEnd(t testing.TB, tag string, cfg *pairConfig) *tEnd {
	t.Helper()
	e, err := openEnd(newLoopbackDevice(t, tag), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", tag, err)
	}
	t.Cleanup(e.close)
	return e
}

// connectQP moves qp from RESET to RTS aimed at the peer, with
// rc_pingpong's attributes modified by cfg.
func connectQP(qp *verbs.QP, psn uint32, peer peerInfo, cfg *pairConfig) error {
	if err := qpToInit(qp, cfg); err != nil {
		return err
	}
	return qpToRTS(qp, psn, peer, cfg)
}

// qpToInit moves qp from RESET to INIT, where receives may be posted.
func qpToInit(qp *verbs.QP, cfg *pairConfig) error {
	err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1, AccessFlags: cfg.QPAccess},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags)
	if err != nil {
		return fmt.Errorf("RESET→INIT: %w", err)
	}
	return nil
}

// qpToRTS moves qp from INIT through RTR to RTS aimed at the peer.
func qpToRTS(qp *verbs.QP, psn uint32, peer peerInfo, cfg *pairConfig) error {
	err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: cfg.MTU, DestQPN: peer.QPN,
		RQPSN: peer.PSN, MaxDestRDAtomic: cfg.MaxRD, MinRNRTimer: cfg.MinRNRTimer,
		AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer.GID, SGIDIndex: uint8(cfg.GIDIndex), HopLimit: 1}}},
		verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
			verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer)
	if err != nil {
		return fmt.Errorf("INIT→RTR: %w", err)
	}
	err = qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: psn, Timeout: cfg.Timeout,
		RetryCnt: cfg.RetryCnt, RNRRetry: cfg.RNRRetry, MaxRDAtomic: cfg.MaxRD},
		verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|
			verbs.QPAttrMaxQPRDAtomic)
	if err != nil {
		return fmt.Errorf("RTR→RTS: %w", err)
	}
	return nil
}

// newRCPair opens two soft devices on two free loopback addresses, creates
// the resources of one side on each and connects their RC QPs with the
// default attributes changed by opts.
func newRCPair(t testing.TB, opts ...func(*pairConfig)) (a, b *tEnd) {
	t.Helper()
	cfg := defaultPairConfig()
	for _, o := range opts {
		o(&cfg)
	}
	a = newEnd(t, "a", &cfg)
	b = newEnd(t, "b", &cfg)
	if a.ctx.Device().Addr() == b.ctx.Device().Addr() {
		t.Fatalf("both devices on %s", a.ctx.Device().Addr())
	}
	if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
		t.Fatalf("connect a: %v", err)
	}
	if err := connectQP(b.qp, b.psn, a.info(), &cfg); err != nil {
		t.Fatalf("connect b: %v", err)
	}
	return a, b
}

// collectWCs waits, at most d, until n completions have been polled from
// cq, sleeping on its completion channel between polls (arm, poll again,
// then wait, so no completion is missed). It never polls more than n.
func collectWCs(cq *verbs.CQ, ch *verbs.CompChannel, n int, d time.Duration) ([]verbs.WC, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return collectWCsCtx(ctx, cq, ch, n)
}

// collectWCsCtx is collectWCs bounded by ctx.
func collectWCsCtx(ctx context.Context, cq *verbs.CQ, ch *verbs.CompChannel, n int) ([]verbs.WC, error) {
	out := make([]verbs.WC, 0, n)
	var buf [32]verbs.WC
	poll := func() (int, error) {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		out = append(out, buf[:k]...)
		return k, err
	}
	for wakeups := 0; len(out) < n; wakeups++ {
		if wakeups > 1_000_000 {
			return out, errors.New("too many wakeups")
		}
		if k, err := poll(); err != nil || k > 0 {
			if err != nil {
				return out, err
			}
			continue
		}
		if err := cq.ReqNotify(false); err != nil {
			return out, err
		}
		if k, err := poll(); err != nil || k > 0 {
			if err != nil {
				return out, err
			}
			continue
		}
		ev, err := ch.GetEvent(ctx)
		if err != nil {
			return out, fmt.Errorf("got %d of %d completions: %w", len(out), n, err)
		}
		ev.AckEvents(1)
	}
	return out, nil
}

// waitWCs is collectWCs that fails the test on error or timeout.
func waitWCs(t testing.TB, cq *verbs.CQ, ch *verbs.CompChannel, n int) []verbs.WC {
	t.Helper()
	wcs, err := collectWCs(cq, ch, n, wcTimeout)
	if err != nil {
		t.Fatalf("waiting for %d completion(s): %v (got %+v)", n, err, wcs)
	}
	return wcs
}

// sendWCs and recvWCs wait for n completions on e's send or receive CQ.
func (e *tEnd) sendWCs(t testing.TB, n int) []verbs.WC { t.Helper(); return waitWCs(t, e.scq, e.ch, n) }
func (e *tEnd) recvWCs(t testing.TB, n int) []verbs.WC { t.Helper(); return waitWCs(t, e.rcq, e.ch, n) }

// sendWC waits for one send completion and checks its status, opcode and
// work request ID.
func (e *tEnd) sendWC(t testing.TB, id uint64, op verbs.WCOpcode) verbs.WC {
	t.Helper()
	wc := e.sendWCs(t, 1)[0]
	checkWC(t, wc, id, verbs.WCSuccess, op)
	return wc
}

func checkWC(t testing.TB, wc verbs.WC, id uint64, st verbs.WCStatus, op verbs.WCOpcode) {
	t.Helper()
	if wc.WRID != id || wc.Status != st {
		t.Fatalf("completion: wr_id %d status %q (%d), want wr_id %d status %q (%d); wc %+v",
			wc.WRID, wc.Status, wc.Status, id, st, st, wc)
	}
	if st == verbs.WCSuccess && wc.Opcode != op {
		t.Fatalf("completion %d: opcode %s, want %s", id, wc.Opcode, op)
	}
}

// expectNoWC checks that cq stays empty for d.
func expectNoWC(t testing.TB, cq *verbs.CQ, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	var wc [4]verbs.WC
	if n, err := cq.Poll(wc[:]); err != nil || n != 0 {
		t.Fatalf("unexpected completion(s): %+v (err %v)", wc[:n], err)
	}
}

// fill writes a pattern that depends on seed and on the position.
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7+i>>8) ^ seed
	}
}

// pattern returns a fresh n-byte pattern.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func checkBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("%s: %d bytes differ from byte %d on (got %d bytes, want %d)", what, countDiff(got, want), i, len(got), len(want))
	}
}

func countDiff(a, b []byte) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// postRecv posts one receive for buf[off:off+n] of e's MR.
func (e *tEnd) postRecv(t testing.TB, id uint64, off, n int) {
	t.Helper()
	if err := e.qp.PostRecv(verbs.RecvWR{ID: id, SGL: []verbs.SGE{e.mr.SGE(off, n)}}); err != nil {
		t.Fatalf("PostRecv: %v", err)
	}
}

// post posts send work requests and fails the test on error.
func (e *tEnd) post(t testing.TB, wrs ...verbs.SendWR) {
	t.Helper()
	if err := e.qp.PostSend(wrs...); err != nil {
		t.Fatalf("PostSend: %v", err)
	}
}

// stateIs waits briefly for qp to reach st (the device moves a QP to ERR
// from its receive goroutine or a timer).
func stateIs(t testing.TB, qp *verbs.QP, st verbs.QPState) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for qp.State() != st {
		if time.Now().After(deadline) {
			t.Fatalf("QP 0x%x state %s, want %s", qp.QPN(), qp.State(), st)
		}
		time.Sleep(time.Millisecond)
	}
}

// flushedRecvQP makes a UD QP on cq whose one posted receive is flushed
// into cq: a QP moved to ERR flushes its receives (one completion).
func flushedRecvQP(t *testing.T, pd *verbs.PD, cq *verbs.CQ) *verbs.QP {
	t.Helper()
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1, QKey: 1},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostRecv(verbs.RecvWR{ID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	return qp
}

// errQPOn makes an RC QP of a's, sending to cq, and moves it to ERR: every
// send posted then completes at once with WR_FLUSH_ERR. It and cq are
// destroyed when the test ends.
func errQPOn(t *testing.T, a *tEnd, cfg *pairConfig, cq *verbs.CQ) *verbs.QP {
	t.Helper()
	x, err := a.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: a.rcq, Cap: cfg.Cap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Destroy(); cq.Destroy() })
	if err := qpToInit(x, cfg); err != nil {
		t.Fatal(err)
	}
	toErr(t, x)
	return x
}
