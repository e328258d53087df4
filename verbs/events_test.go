package verbs_test

// Asynchronous events over real UDP (QP_ACCESS_ERR, COMM_EST,
// QP_LAST_WQE_REACHED, CQ_ERR with QP_FATAL), GetAsyncEvent's cancellation
// and close; CQ resizing with completions queued; and QP.Query after
// Modify and after a fatal error.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

func TestEventQPAccessErr(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x1})
	checkWC(t, a.sendWCs(t, 1)[0], 1, verbs.WCRemAccessErr, 0)
	ev := nextEvent(t, b.ctx)
	if ev.Type != verbs.EventQPAccessErr || ev.QP != b.qp || ev.Port != 1 {
		t.Fatalf("responder event %s (QP %p, port %d), want QP_ACCESS_ERR for QP %p on port 1", ev.Type, ev.QP, ev.Port, b.qp)
	}
	stateIs(t, b.qp, verbs.QPStateErr)
	noEvent(t, b.ctx, 20*time.Millisecond)
	// The requester learns of it from its completion, not from an event.
	noEvent(t, a.ctx, 0)
}

func TestEventQPReqErr(t *testing.T) {
	t.Parallel()
	// READ to a QP that does not allow remote reads: an invalid request.
	cfg := defaultPairConfig()
	a := newEnd(t, "rqa", &cfg)
	bcfg := cfg
	bcfg.QPAccess = verbs.AccessRemoteWrite
	b := newEnd(t, "rqb", &bcfg)
	if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := connectQP(b.qp, b.psn, a.info(), &bcfg); err != nil {
		t.Fatal(err)
	}
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	checkWC(t, a.sendWCs(t, 1)[0], 1, verbs.WCRemInvReqErr, 0)
	if ev := nextEvent(t, b.ctx); ev.Type != verbs.EventQPReqErr || ev.QP != b.qp {
		t.Fatalf("responder event %s (QP %p), want QP_REQ_ERR for %p", ev.Type, ev.QP, b.qp)
	}
}

func TestEventCommEst(t *testing.T) {
	t.Parallel()
	cfg := defaultPairConfig()
	a := newEnd(t, "cea", &cfg)
	b := newEnd(t, "ceb", &cfg)
	if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	// b only to RTR: it receives and answers, but does not send.
	if err := qpToInit(b.qp, &cfg); err != nil {
		t.Fatal(err)
	}
	b.postRecv(t, 1, 0, 64)
	b.postRecv(t, 2, 64, 64)
	err := b.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: cfg.MTU, DestQPN: a.qp.QPN(), RQPSN: a.psn,
		MaxDestRDAtomic: cfg.MaxRD, MinRNRTimer: cfg.MinRNRTimer,
		AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: a.gid, SGIDIndex: 1}}},
		verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
			verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer)
	if err != nil {
		t.Fatal(err)
	}
	noEvent(t, b.ctx, 10*time.Millisecond)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 16)}})
	a.sendWC(t, 1, verbs.WCSend) // an RTR QP acknowledges
	checkWC(t, b.recvWCs(t, 1)[0], 1, verbs.WCSuccess, verbs.WCRecv)
	ev := nextEvent(t, b.ctx)
	if ev.Type != verbs.EventCommEst || ev.QP != b.qp {
		t.Fatalf("event %s (QP %p), want COMM_EST for %p", ev.Type, ev.QP, b.qp)
	}
	// Once only, and not in RTS.
	a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 16)}})
	a.sendWC(t, 2, verbs.WCSend)
	checkWC(t, b.recvWCs(t, 1)[0], 2, verbs.WCSuccess, verbs.WCRecv)
	noEvent(t, b.ctx, 20*time.Millisecond)
	noEvent(t, a.ctx, 0) // a was in RTS when b's ACKs came
	if err := b.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: b.psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
		verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|verbs.QPAttrMaxQPRDAtomic); err != nil {
		t.Fatal(err)
	}
	a.postRecv(t, 3, 0, 64)
	b.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{b.mr.SGE(0, 16)}})
	b.sendWC(t, 3, verbs.WCSend)
	checkWC(t, a.recvWCs(t, 1)[0], 3, verbs.WCSuccess, verbs.WCRecv)
	noEvent(t, b.ctx, 10*time.Millisecond)
}

func TestEventLastWQEReached(t *testing.T) {
	t.Parallel()
	_, b, srq := srqPair(t, verbs.SRQAttr{MaxWR: 8})
	for i := range 3 {
		postSRQ(t, srq, b, uint64(i), i*64, 64)
	}
	toErr(t, b.qp)
	ev := nextEvent(t, b.ctx)
	if ev.Type != verbs.EventQPLastWQEReached || ev.QP != b.qp {
		t.Fatalf("event %s (QP %p), want QP_LAST_WQE_REACHED for %p", ev.Type, ev.QP, b.qp)
	}
	// The SRQ's receives belong to the SRQ, not the QP: none is flushed.
	if n := srq.Len(); n != 3 {
		t.Fatalf("SRQ Len %d after its QP went to ERR, want 3", n)
	}
	expectNoWC(t, b.rcq, 10*time.Millisecond)
	noEvent(t, b.ctx, 10*time.Millisecond)
}

func TestEventCQOverflow(t *testing.T) {
	t.Parallel()
	t.Run("receive CQ", func(t *testing.T) {
		t.Parallel()
		a, b := newRCPair(t, func(c *pairConfig) { c.RecvCQE = 1; fastRetry(c) })
		for i := range 3 {
			b.postRecv(t, uint64(i), i*64, 64)
		}
		for i := range 3 {
			a.post(t, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
		}
		ev := nextEvent(t, b.ctx)
		if ev.Type != verbs.EventCQErr || ev.CQ != b.rcq || ev.QP != nil {
			t.Fatalf("first event %s (CQ %p, QP %p), want CQ_ERR for CQ %p", ev.Type, ev.CQ, ev.QP, b.rcq)
		}
		ev = nextEvent(t, b.ctx)
		if ev.Type != verbs.EventQPFatal || ev.QP != b.qp {
			t.Fatalf("second event %s (QP %p), want QP_FATAL for QP %p", ev.Type, ev.QP, b.qp)
		}
		stateIs(t, b.qp, verbs.QPStateErr)
		if !b.rcq.Overflowed() {
			t.Fatal("CQ does not report the overflow")
		}
		a.sendWCs(t, 3) // whatever became of them
		noEvent(t, b.ctx, 10*time.Millisecond)
	})
	t.Run("send CQ", func(t *testing.T) {
		t.Parallel()
		cfg := defaultPairConfig()
		a := newEnd(t, "ova", &cfg)
		b := newEnd(t, "ovb", &cfg)
		// Replace a's send CQ by one of a single entry.
		if err := a.qp.Destroy(); err != nil {
			t.Fatal(err)
		}
		small, err := a.ctx.CreateCQ(1, nil)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := a.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: small, RecvCQ: a.rcq, Cap: cfg.Cap})
		if err != nil {
			t.Fatal(err)
		}
		a.qp = qp
		t.Cleanup(func() { qp.Destroy(); small.Destroy() })
		if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
			t.Fatal(err)
		}
		if err := connectQP(b.qp, b.psn, a.info(), &cfg); err != nil {
			t.Fatal(err)
		}
		fill(a.buf[:64], 1)
		a.post(t,
			verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
			verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
				RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey()})
		ev := nextEvent(t, a.ctx)
		if ev.Type != verbs.EventCQErr || ev.CQ != small {
			t.Fatalf("first event %s (CQ %p), want CQ_ERR for %p", ev.Type, ev.CQ, small)
		}
		if ev := nextEvent(t, a.ctx); ev.Type != verbs.EventQPFatal || ev.QP != a.qp {
			t.Fatalf("second event %s (QP %p), want QP_FATAL for %p", ev.Type, ev.QP, a.qp)
		}
		stateIs(t, a.qp, verbs.QPStateErr)
		var wc [2]verbs.WC
		if n, _ := small.Poll(wc[:]); n != 1 || wc[0].WRID != 1 || wc[0].Status != verbs.WCSuccess {
			t.Fatalf("Poll after the overflow: %+v", wc[:n])
		}
	})
}

func TestGetAsyncEventCancelAndClose(t *testing.T) {
	t.Parallel()
	ctx := openContext(t)
	// An expired context.
	c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	start := time.Now()
	_, err := ctx.GetAsyncEvent(c)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetAsyncEvent with a deadline: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("GetAsyncEvent returned after %v", d)
	}
	// Cancelled while blocked.
	c, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := ctx.GetAsyncEvent(c); done <- err }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled GetAsyncEvent: %v, want Canceled", err)
		}
	case <-time.After(wcTimeout):
		t.Fatal("GetAsyncEvent ignores cancellation")
	}
	// Blocked when the context closes: ErrClosed, and ErrClosed after.
	go func() { _, err := ctx.GetAsyncEvent(context.Background()); done <- err }()
	time.Sleep(10 * time.Millisecond)
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("GetAsyncEvent woken by Close: %v, want ErrClosed", err)
		}
	case <-time.After(wcTimeout):
		t.Fatal("Close does not wake GetAsyncEvent")
	}
	for range 2 {
		if _, err := ctx.GetAsyncEvent(context.Background()); !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("GetAsyncEvent after Close: %v, want ErrClosed", err)
		}
	}
}

// ---------------------------------------------------------------------------
// CQ resize

func TestCQResize(t *testing.T) {
	t.Parallel()
	cfg := defaultPairConfig()
	cfg.CQE = 4
	a, b := newRCPair(t, func(c *pairConfig) { *c = cfg })

	// A QP in ERR completes every work request at once, with
	// WR_FLUSH_ERR: the number of completions queued is then exact.
	cq, err := a.ctx.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := errQPOn(t, a, &cfg, cq)
	flush := func(ids ...uint64) {
		t.Helper()
		for _, id := range ids {
			if err := x.PostSend(verbs.SendWR{ID: id, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 8)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll := func(n int, first uint64) {
		t.Helper()
		wc := make([]verbs.WC, n)
		k, err := cq.Poll(wc)
		if err != nil || k != n {
			t.Fatalf("Poll: %d completions (%v), want %d: %+v", k, err, n, wc[:k])
		}
		for i, c := range wc[:k] {
			checkWC(t, c, first+uint64(i), verbs.WCWRFlushErr, 0)
		}
	}
	// Three completions, two polled: the ring's head moves to 2. Three
	// more wrap around the ring of 4, which is then full: 3, 4, 5, 6.
	flush(1, 2, 3)
	poll(2, 1)
	flush(4, 5, 6)
	if err := cq.Resize(3); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("shrink below the 4 queued completions: %v, want ErrInvalidArgument", err)
	}
	if err := cq.Resize(0); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("Resize(0): %v, want ErrInvalidArgument", err)
	}
	if err := cq.Resize(1 << 30); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("Resize above the device limit: %v, want ErrInvalidArgument", err)
	}
	if err := cq.Resize(10); err != nil {
		t.Fatalf("grow with 4 completions queued: %v", err)
	}
	if c := cq.Cap(); c < 10 {
		t.Fatalf("Cap %d after growing to 10", c)
	}
	flush(7, 8, 9, 10, 11, 12) // more than the old size holds
	if cq.Overflowed() {
		t.Fatal("CQ overflowed after growing")
	}
	poll(10, 3)
	expectNoWC(t, cq, 0)
	// Shrinking to exactly what is queued works.
	flush(13, 14)
	if err := cq.Resize(2); err != nil {
		t.Fatalf("shrink to the 2 queued completions: %v", err)
	}
	poll(2, 13)
	expectNoWC(t, cq, 0)

	// The device's completions land in a resized CQ in order.
	if err := a.scq.Resize(64); err != nil {
		t.Fatal(err)
	}
	for id := range uint64(20) {
		a.post(t, verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	}
	for i, wc := range a.sendWCs(t, 20) {
		checkWC(t, wc, uint64(i), verbs.WCSuccess, verbs.WCRDMAWrite)
	}
	if a.scq.Overflowed() {
		t.Fatal("CQ overflowed")
	}
	if err := cq.Destroy(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("Destroy of a CQ in use: %v, want ErrBusy", err)
	}
}

// ---------------------------------------------------------------------------
// QP.Query

func TestQPQuery(t *testing.T) {
	t.Parallel()
	cfg := defaultPairConfig()
	cfg.MTU, cfg.Timeout, cfg.RetryCnt, cfg.RNRRetry, cfg.MinRNRTimer, cfg.MaxRD = verbs.MTU1024, 17, 5, 6, 9, 3
	cfg.QPAccess = verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	a, b := newRCPair(t, func(c *pairConfig) { *c = cfg })
	q, init, err := a.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	want := verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: b.gid, SGIDIndex: 1, HopLimit: 1}}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"state", q.State, verbs.QPStateRTS},
		{"cur_state", q.CurState, verbs.QPStateRTS},
		{"path MTU", q.PathMTU, verbs.MTU1024},
		{"dest QPN", q.DestQPN, b.qp.QPN()},
		{"RQ PSN", q.RQPSN, b.psn},
		{"SQ PSN", q.SQPSN, a.psn},
		{"timeout", q.Timeout, uint8(17)},
		{"retry count", q.RetryCnt, uint8(5)},
		{"RNR retry", q.RNRRetry, uint8(6)},
		{"min RNR timer", q.MinRNRTimer, uint8(9)},
		{"max rd atomic (3 rounded up)", q.MaxRDAtomic, uint8(4)},
		{"max dest rd atomic (3 rounded up)", q.MaxDestRDAtomic, uint8(4)},
		{"access flags", q.AccessFlags, cfg.QPAccess},
		{"port", q.PortNum, uint8(1)},
		{"AV", q.AH, want},
		{"cap", q.Cap, a.qp.Cap()},
		{"init type", init.Type, verbs.QPTypeRC},
		{"init send CQ", init.SendCQ, a.scq},
		{"init recv CQ", init.RecvCQ, a.rcq},
	} {
		if c.got != c.want {
			t.Errorf("Query %s: %v, want %v", c.name, c.got, c.want)
		}
	}
	// Changes in RTS show too.
	if err := a.qp.Modify(&verbs.QPAttr{MinRNRTimer: 20, AccessFlags: verbs.AccessRemoteRead},
		verbs.QPAttrMinRNRTimer|verbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if q, _, _ := a.qp.Query(); q.MinRNRTimer != 20 || q.AccessFlags != verbs.AccessRemoteRead || q.State != verbs.QPStateRTS {
		t.Fatalf("Query after RTS→RTS: %+v", q)
	}
	// A fatal error: the device moves the QP to ERR, and Query says so.
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x2})
	checkWC(t, a.sendWCs(t, 1)[0], 1, verbs.WCRemAccessErr, 0)
	for _, e := range []*tEnd{a, b} {
		stateIs(t, e.qp, verbs.QPStateErr)
		q, _, err := e.qp.Query()
		if err != nil || q.State != verbs.QPStateErr || q.CurState != verbs.QPStateErr {
			t.Fatalf("Query after the fatal error: state %s cur %s, %v; want ERR", q.State, q.CurState, err)
		}
		if q.DestQPN == 0 || q.PathMTU != verbs.MTU1024 {
			t.Fatalf("Query after the error lost the attributes: %+v", q)
		}
	}
	if err := a.qp.Modify(&verbs.QPAttr{State: verbs.QPStateReset}, verbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if q, _, _ := a.qp.Query(); q.State != verbs.QPStateReset {
		t.Fatalf("Query after RESET: state %s", q.State)
	}
	if err := a.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.qp.Query(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Query of a destroyed QP: %v, want ErrClosed", err)
	}
	a.qp = nil
}

// TestCQFillsToDepth fills a CQ to exactly its depth with its head moved
// first (a CQ's ring grows as completions pile up, so the fill moves
// wrapped completions), polls them back in order, and overflows only at
// the completion past the depth.
func TestCQFillsToDepth(t *testing.T) {
	t.Parallel()
	cfg := defaultPairConfig()
	a, _ := newRCPair(t, func(c *pairConfig) { *c = cfg })
	const depth = 40
	cq, err := a.ctx.CreateCQ(depth, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cq.Cap() < depth {
		t.Fatalf("Cap %d, want at least %d", cq.Cap(), depth)
	}
	x := errQPOn(t, a, &cfg, cq)
	next := uint64(1)
	flush := func(n int) {
		t.Helper()
		for range n {
			if err := x.PostSend(verbs.SendWR{ID: next, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 8)}}); err != nil {
				t.Fatal(err)
			}
			next++
		}
	}
	wc := make([]verbs.WC, depth+1)
	flush(5)
	if k, err := cq.Poll(wc[:3]); err != nil || k != 3 {
		t.Fatalf("Poll: %d, %v", k, err)
	}
	flush(depth - 2) // 2 left + depth-2 = depth queued
	if cq.Overflowed() {
		t.Fatal("overflowed at its depth")
	}
	k, err := cq.Poll(wc)
	if err != nil || k != depth {
		t.Fatalf("Poll: %d completions (%v), want %d", k, err, depth)
	}
	for i, c := range wc[:k] {
		checkWC(t, c, uint64(4+i), verbs.WCWRFlushErr, 0)
	}
	flush(depth + 1)
	if !cq.Overflowed() {
		t.Fatal("no overflow one past the depth")
	}
}
