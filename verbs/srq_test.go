package verbs_test

// Shared receive queues over real UDP: many RC QPs on one SRQ fed by
// concurrent peers (every message delivered exactly once), the limit event,
// Modify/Query, RNR while the SRQ is empty, and the verbs-level refusals.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// pollN polls cq until it has n completions or ctx ends, sleeping in
// CQ.Wait between polls.
func pollN(ctx context.Context, cq *verbs.CQ, n int) ([]verbs.WC, error) {
	out := make([]verbs.WC, 0, n)
	var buf [32]verbs.WC
	for polls := 0; len(out) < n; polls++ {
		if polls > 10_000_000 {
			return out, errors.New("too many polls")
		}
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			return out, err
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if err := cq.Wait(ctx); err != nil {
				return out, fmt.Errorf("got %d of %d completions: %w", len(out), n, err)
			}
		}
	}
	return out, nil
}

// newSRQ creates an SRQ on e's PD; the caller destroys it (after its QPs).
func newSRQ(t testing.TB, e *tEnd, attr verbs.SRQAttr) *verbs.SRQ {
	t.Helper()
	srq, err := e.pd.CreateSRQ(attr)
	if err != nil {
		t.Fatalf("CreateSRQ(%+v): %v", attr, err)
	}
	return srq
}

// srqEnd is newEnd whose RC QP takes its receives from a new SRQ. The
// SRQ is destroyed after the QP, before the PD.
func srqEnd(t testing.TB, tag string, cfg *pairConfig, attr verbs.SRQAttr) (*tEnd, *verbs.SRQ) {
	t.Helper()
	e, err := openEnd(newLoopbackDevice(t, tag), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srq := newSRQ(t, e, attr)
	t.Cleanup(func() {
		if e.qp != nil {
			e.qp.Destroy()
			e.qp = nil
		}
		srq.Destroy()
		e.close()
	})
	retypeQP(t, e, verbs.QPTypeRC, srq, cfg)
	return e, srq
}

// srqPair connects a (plain RC) to b (RC on an SRQ).
func srqPair(t testing.TB, attr verbs.SRQAttr, opts ...func(*pairConfig)) (a, b *tEnd, srq *verbs.SRQ) {
	t.Helper()
	cfg := defaultPairConfig()
	for _, o := range opts {
		o(&cfg)
	}
	a = newEnd(t, "sa", &cfg)
	b, srq = srqEnd(t, "sb", &cfg, attr)
	if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := connectQP(b.qp, b.psn, a.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	return a, b, srq
}

func postSRQ(t testing.TB, srq *verbs.SRQ, e *tEnd, id uint64, off, n int) {
	t.Helper()
	if err := srq.PostRecv(verbs.RecvWR{ID: id, SGL: []verbs.SGE{e.mr.SGE(off, n)}}); err != nil {
		t.Fatalf("SRQ PostRecv: %v", err)
	}
}

// TestSRQManyQPs: 16 RC QPs on one device share one SRQ and one receive
// CQ; 16 peer QPs on 4 other devices send to them at the same time. The
// SRQ holds fewer receives than the messages, so the receiver reposts as it
// goes (and peers may meet RNR NAKs). Every message must arrive exactly
// once, on the QP connected to its sender.
func TestSRQManyQPs(t *testing.T) {
	t.Parallel()
	const (
		nQP     = 16
		perDev  = 4
		msgs    = 32 // per peer
		total   = nQP * msgs
		depth   = 64
		slot    = 64
		msgSize = 16
	)
	cfg := defaultPairConfig()
	cfg.RNRRetry, cfg.MinRNRTimer = 7, 1 // retry RNR forever, every 10 µs
	cfg.Cap.MaxSendWR = msgs
	bcfg := cfg
	bcfg.RecvCQE = total
	b := newEnd(t, "srqhub", &bcfg)
	srq := newSRQ(t, b, verbs.SRQAttr{MaxWR: depth, MaxSGE: 1})
	qps := make([]*verbs.QP, nQP)
	t.Cleanup(func() { // before b.close (cleanups run last first)
		for _, qp := range qps {
			if qp != nil {
				qp.Destroy()
			}
		}
		if err := srq.Destroy(); err != nil {
			t.Errorf("SRQ Destroy after its QPs: %v", err)
		}
	})
	for i := range qps {
		qp, err := b.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: b.scq, RecvCQ: b.rcq, Cap: cfg.Cap, SRQ: srq})
		if err != nil {
			t.Fatal(err)
		}
		qps[i] = qp
	}
	type peer struct {
		e   *tEnd
		qp  *verbs.QP
		scq *verbs.CQ
		off int // where its messages are in e's MR
	}
	peers := make([]peer, nQP)
	var devs []*tEnd
	for d := range nQP / perDev {
		e := newEnd(t, fmt.Sprintf("srqpeer%d", d), &cfg)
		devs = append(devs, e)
		for k := range perDev {
			i := d*perDev + k
			scq, err := e.ctx.CreateCQ(msgs, nil)
			if err != nil {
				t.Fatal(err)
			}
			qp, err := e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: scq, RecvCQ: e.rcq, Cap: cfg.Cap})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { qp.Destroy(); scq.Destroy() })
			peers[i] = peer{e: e, qp: qp, scq: scq, off: k * msgs * msgSize}
			psnA, psnB := uint32(1000*i+1), uint32(1000*i+500)
			if err := connectQP(qp, psnA, peerInfo{QPN: qps[i].QPN(), PSN: psnB, GID: b.gid}, &cfg); err != nil {
				t.Fatal(err)
			}
			if err := connectQP(qps[i], psnB, peerInfo{QPN: qp.QPN(), PSN: psnA, GID: e.gid}, &cfg); err != nil {
				t.Fatal(err)
			}
			for m := range msgs {
				p := e.buf[peers[i].off+m*msgSize:]
				binary.BigEndian.PutUint32(p, uint32(i))
				binary.BigEndian.PutUint32(p[4:], uint32(m))
				binary.BigEndian.PutUint64(p[8:], 0x5352515f5f4d5347^uint64(i<<16|m))
			}
		}
	}
	for s := range depth {
		postSRQ(t, srq, b, uint64(s), s*slot, slot)
	}

	ctx, cancel := context.WithTimeout(context.Background(), wcTimeout)
	defer cancel()
	var got [nQP][msgs]int
	recvDone := make(chan error, 1)
	go func() {
		n := 0
		var wc [16]verbs.WC
		for n < total {
			k, err := b.rcq.Poll(wc[:])
			if err != nil {
				recvDone <- err
				return
			}
			if k == 0 {
				if err := b.rcq.Wait(ctx); err != nil {
					recvDone <- fmt.Errorf("%d of %d messages received: %w", n, total, err)
					return
				}
				continue
			}
			for _, c := range wc[:k] {
				if c.Status != verbs.WCSuccess || c.Opcode != verbs.WCRecv || c.ByteLen != msgSize || c.WRID >= depth {
					recvDone <- fmt.Errorf("receive completion %+v", c)
					return
				}
				p := b.buf[int(c.WRID)*slot:]
				i, m := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
				if i >= nQP || m >= msgs || binary.BigEndian.Uint64(p[8:]) != 0x5352515f5f4d5347^uint64(i<<16|m) {
					recvDone <- fmt.Errorf("bad message % x", p[:msgSize])
					return
				}
				if c.QPNum != qps[i].QPN() {
					recvDone <- fmt.Errorf("message %d/%d arrived on QP 0x%x, want 0x%x", i, m, c.QPNum, qps[i].QPN())
					return
				}
				got[i][m]++
				n++
				// Give the receive back at once.
				if err := srq.PostRecv(verbs.RecvWR{ID: c.WRID, SGL: []verbs.SGE{b.mr.SGE(int(c.WRID)*slot, slot)}}); err != nil {
					recvDone <- err
					return
				}
			}
		}
		recvDone <- nil
	}()
	start := time.Now()
	var wg sync.WaitGroup
	sendErrs := make(chan error, nQP)
	for i := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := peers[i]
			wrs := make([]verbs.SendWR, msgs)
			for m := range wrs {
				wrs[m] = verbs.SendWR{ID: uint64(m), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{p.e.mr.SGE(p.off+m*msgSize, msgSize)}}
			}
			if err := p.qp.PostSend(wrs...); err != nil {
				sendErrs <- fmt.Errorf("peer %d: %w", i, err)
				return
			}
			wcs, err := pollN(ctx, p.scq, msgs)
			if err != nil {
				sendErrs <- fmt.Errorf("peer %d: %w", i, err)
				return
			}
			for m, wc := range wcs {
				if wc.Status != verbs.WCSuccess || wc.WRID != uint64(m) {
					sendErrs <- fmt.Errorf("peer %d: send completion %d: %+v", i, m, wc)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(sendErrs)
	for err := range sendErrs {
		t.Error(err)
	}
	if err := <-recvDone; err != nil {
		t.Fatal(err)
	}
	for i := range got {
		for m, n := range got[i] {
			if n != 1 {
				t.Errorf("message %d of peer %d delivered %d times", m, i, n)
			}
		}
	}
	if n := srq.Len(); n != depth {
		t.Errorf("SRQ holds %d receives at the end, want %d", n, depth)
	}
	expectNoWC(t, b.rcq, 10*time.Millisecond)
	var rnr uint64
	for _, e := range devs {
		rnr += stats(e.ctx).RNRNAKsReceived.Load()
	}
	t.Logf("%d messages from %d peers through one SRQ of %d in %v (%d RNR NAKs)", total, nQP, depth, time.Since(start), rnr)
}

// nextEvent returns the context's next async event, failing the test after
// wcTimeout.
func nextEvent(t testing.TB, c *verbs.Context) verbs.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wcTimeout)
	defer cancel()
	ev, err := c.GetAsyncEvent(ctx)
	if err != nil {
		t.Fatalf("GetAsyncEvent: %v", err)
	}
	c.AckAsyncEvent(ev)
	return ev
}

// noEvent checks that no async event arrives within d.
func noEvent(t testing.TB, c *verbs.Context, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if ev, err := c.GetAsyncEvent(ctx); err == nil {
		t.Fatalf("unexpected async event %s (QP %v, SRQ %v, CQ %v)", ev.Type, ev.QP, ev.SRQ, ev.CQ)
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetAsyncEvent: %v, want a timeout", err)
	}
}

func TestSRQLimitEvent(t *testing.T) {
	t.Parallel()
	a, b, srq := srqPair(t, verbs.SRQAttr{MaxWR: 16, MaxSGE: 2})
	if q, err := srq.Query(); err != nil || q != (verbs.SRQAttr{MaxWR: 16, MaxSGE: 2}) {
		t.Fatalf("Query: %+v, %v", q, err)
	}
	if err := srq.Modify(verbs.SRQAttr{SRQLimit: 4}, verbs.SRQLimit); err != nil {
		t.Fatalf("arm limit: %v", err)
	}
	if q, _ := srq.Query(); q.SRQLimit != 4 {
		t.Fatalf("Query limit %d, want 4", q.SRQLimit)
	}
	for i := range 6 {
		postSRQ(t, srq, b, uint64(i), i*128, 128)
	}
	send := func(id uint64) {
		t.Helper()
		a.post(t, verbs.SendWR{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 16)}})
		a.sendWC(t, id, verbs.WCSend)
		if wc := b.recvWCs(t, 1)[0]; wc.Status != verbs.WCSuccess || wc.QPNum != b.qp.QPN() {
			t.Fatalf("receive: %+v", wc)
		}
	}
	send(1)
	send(2) // 4 left: not below the limit
	noEvent(t, b.ctx, 30*time.Millisecond)
	send(3) // 3 left
	ev := nextEvent(t, b.ctx)
	if ev.Type != verbs.EventSRQLimitReached || ev.SRQ != srq || ev.QP != nil || ev.CQ != nil {
		t.Fatalf("event %s (SRQ %p, QP %v, CQ %v), want SRQ_LIMIT_REACHED for SRQ %p", ev.Type, ev.SRQ, ev.QP, ev.CQ, srq)
	}
	// The limit disarms after firing.
	if q, _ := srq.Query(); q.SRQLimit != 0 {
		t.Fatalf("limit %d after the event, want 0 (disarmed)", q.SRQLimit)
	}
	send(4)
	noEvent(t, b.ctx, 30*time.Millisecond)
	noEvent(t, a.ctx, 0)
	if n := srq.Len(); n != 2 {
		t.Fatalf("SRQ Len %d, want 2", n)
	}

	// Re-armed with a limit above what is posted: fires at the next take.
	if err := srq.Modify(verbs.SRQAttr{SRQLimit: 8}, verbs.SRQLimit); err != nil {
		t.Fatal(err)
	}
	send(5)
	if ev := nextEvent(t, b.ctx); ev.Type != verbs.EventSRQLimitReached || ev.SRQ != srq {
		t.Fatalf("event %s after re-arming, want SRQ_LIMIT_REACHED", ev.Type)
	}
}

func TestSRQModifyQuery(t *testing.T) {
	t.Parallel()
	cfg := defaultPairConfig()
	e := newEnd(t, "srqm", &cfg)
	srq := newSRQ(t, e, verbs.SRQAttr{MaxWR: 4, MaxSGE: 1})
	defer srq.Destroy()
	for i := range 4 {
		postSRQ(t, srq, e, uint64(i), i*64, 64)
	}
	err := srq.PostRecv(verbs.RecvWR{ID: 4, SGL: []verbs.SGE{e.mr.SGE(0, 64)}})
	if !errors.Is(err, verbs.ErrNoMemory) {
		t.Fatalf("PostRecv on a full SRQ: %v, want ErrNoMemory", err)
	}
	if err := srq.PostRecv(verbs.RecvWR{ID: 5, SGL: []verbs.SGE{e.mr.SGE(0, 8), e.mr.SGE(8, 8)}}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("PostRecv with 2 SGEs on an SRQ of max_sge 1: %v, want ErrInvalidArgument", err)
	}
	// Grow while full: the posted receives stay.
	if err := srq.Modify(verbs.SRQAttr{MaxWR: 32}, verbs.SRQMaxWR); err != nil {
		t.Fatalf("grow: %v", err)
	}
	if q, err := srq.Query(); err != nil || q.MaxWR < 32 || q.MaxSGE != 1 {
		t.Fatalf("Query after growing: %+v, %v", q, err)
	}
	if n := srq.Len(); n != 4 {
		t.Fatalf("Len %d after growing, want 4", n)
	}
	postSRQ(t, srq, e, 6, 512, 64)
	for _, tc := range []struct {
		name string
		attr verbs.SRQAttr
		mask verbs.SRQAttrMask
	}{
		{"shrink", verbs.SRQAttr{MaxWR: 8}, verbs.SRQMaxWR},
		{"zero max_wr", verbs.SRQAttr{MaxWR: 0}, verbs.SRQMaxWR},
		{"limit above max_wr", verbs.SRQAttr{SRQLimit: 1000}, verbs.SRQLimit},
		{"unknown mask bit", verbs.SRQAttr{}, 1 << 5},
	} {
		if err := srq.Modify(tc.attr, tc.mask); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("Modify %s: %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if err := srq.Modify(verbs.SRQAttr{MaxWR: 64, SRQLimit: 10}, verbs.SRQMaxWR|verbs.SRQLimit); err != nil {
		t.Fatalf("grow and arm: %v", err)
	}
	if q, _ := srq.Query(); q.MaxWR < 64 || q.SRQLimit != 10 {
		t.Fatalf("Query: %+v", q)
	}
	for _, attr := range []verbs.SRQAttr{{MaxWR: 0}, {MaxWR: 1 << 20}, {MaxWR: 4, SRQLimit: 5}, {MaxWR: 4, MaxSGE: 1000}} {
		if s, err := e.pd.CreateSRQ(attr); !errors.Is(err, verbs.ErrInvalidArgument) {
			if s != nil {
				s.Destroy()
			}
			t.Errorf("CreateSRQ(%+v): %v, want ErrInvalidArgument", attr, err)
		}
	}
}

func TestSRQRefusals(t *testing.T) {
	t.Parallel()
	_, b, srq := srqPair(t, verbs.SRQAttr{MaxWR: 8})
	err := b.qp.PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{b.mr.SGE(0, 64)}})
	var pe *verbs.PostError
	if !errors.As(err, &pe) || !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("PostRecv on an SRQ-attached QP: %v, want a PostError wrapping ErrInvalidArgument", err)
	}
	if err := srq.Destroy(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("Destroy of an SRQ with a QP attached: %v, want ErrBusy", err)
	}
	if err := b.pd.Dealloc(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("Dealloc of the SRQ's PD: %v, want ErrBusy", err)
	}
	// An SRQ of another context cannot be attached.
	cfg := defaultPairConfig()
	other := newEnd(t, "srqo", &cfg)
	if qp, err := other.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: other.scq, RecvCQ: other.rcq, SRQ: srq}); !errors.Is(err, verbs.ErrInvalidArgument) {
		if qp != nil {
			qp.Destroy()
		}
		t.Fatalf("CreateQP with another context's SRQ: %v, want ErrInvalidArgument", err)
	}
	// A second QP on the same SRQ keeps it busy until both are gone.
	qp2, err := b.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: b.scq, RecvCQ: b.rcq, SRQ: srq})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	b.qp = nil
	if err := srq.Destroy(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("Destroy with one QP still attached: %v, want ErrBusy", err)
	}
	if err := qp2.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := srq.Destroy(); err != nil {
		t.Fatalf("Destroy after the QPs: %v", err)
	}
	if err := srq.Destroy(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("second Destroy: %v, want ErrClosed", err)
	}
	if err := srq.PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{b.mr.SGE(0, 64)}}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("PostRecv on a destroyed SRQ: %v, want ErrClosed", err)
	}
	if _, err := srq.Query(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Query of a destroyed SRQ: %v, want ErrClosed", err)
	}
	if _, err := b.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: b.scq, RecvCQ: b.rcq, SRQ: srq}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("CreateQP on a destroyed SRQ: %v, want ErrClosed", err)
	}
}

// TestSRQEmptyRNR: a SEND to a QP whose SRQ is empty gets RNR NAKs; once a
// receive is posted to the SRQ, the retry succeeds.
func TestSRQEmptyRNR(t *testing.T) {
	t.Parallel()
	a, b, srq := srqPair(t, verbs.SRQAttr{MaxWR: 8}, func(c *pairConfig) { c.RNRRetry, c.MinRNRTimer = 7, 14 })
	fill(a.buf[:3000], 6)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 3000)}})
	waitCounter(t, "RNR NAKs received", func() uint64 { return min(stats(a.ctx).RNRNAKsReceived.Load(), 2) }, 2)
	expectNoWC(t, a.scq, 0)
	if st := a.qp.State(); st != verbs.QPStateRTS {
		t.Fatalf("requester state %s during RNR, want RTS", st)
	}
	postSRQ(t, srq, b, 77, 0, 4096)
	a.sendWC(t, 1, verbs.WCSend)
	wc := b.recvWCs(t, 1)[0]
	checkWC(t, wc, 77, verbs.WCSuccess, verbs.WCRecv)
	if wc.ByteLen != 3000 || wc.QPNum != b.qp.QPN() {
		t.Fatalf("receive completion %+v", wc)
	}
	checkBytes(t, "SEND after RNR", b.buf[:3000], a.buf[:3000])
}
