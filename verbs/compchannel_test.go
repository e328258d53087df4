package verbs_test

import (
	"context"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// TestCompChannelManyCQs arms more CQs on one completion channel than any
// fixed event buffer would hold, fires them all, and gets every event
// (an event lost would leave a GetEvent waiter blocked for good).
func TestCompChannelManyCQs(t *testing.T) {
	c := openContext(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Destroy()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	const n = 1500
	cqs := make(map[*verbs.CQ]bool, n)
	var qps []*verbs.QP
	for range n {
		cq, err := c.CreateCQ(1, ch)
		if err != nil {
			t.Fatal(err)
		}
		if err := cq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		// A QP in ERR flushes a posted receive into the CQ: one
		// completion, one event.
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
		cqs[cq] = false
		qps = append(qps, qp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		cq, err := ch.GetEvent(ctx)
		if err != nil {
			t.Fatalf("event %d of %d: %v", i, n, err)
		}
		if seen, ok := cqs[cq]; !ok || seen {
			t.Fatalf("event %d: CQ %p unknown or seen twice", i, cq)
		}
		cqs[cq] = true
		cq.AckEvents(1)
	}
	for _, qp := range qps {
		qp.Destroy()
	}
	for cq := range cqs {
		var wc [1]verbs.WC
		cq.Poll(wc[:])
		if err := cq.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReqNotifyOnlyLaterCompletions checks the arming rule every device
// follows (Linux rxe and NICs, and so the soft device): a completion queued
// before ReqNotify raises no event; the next one added after it does.
func TestReqNotifyOnlyLaterCompletions(t *testing.T) {
	c := openContext(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Destroy()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	cq, err := c.CreateCQ(4, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	// flush makes a UD QP on cq whose one posted receive is flushed into
	// cq (a QP in ERR flushes its receives).
	flush := func() *verbs.QP {
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
	first := flush()
	defer first.Destroy()
	// The flush is queued (Wait returns once it is) before the CQ is armed.
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := cq.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	got, err := ch.GetEvent(ctx)
	cancel()
	if err == nil {
		got.AckEvents(1)
		t.Fatal("arming a CQ that already held a completion raised an event: only later completions may")
	}
	second := flush()
	defer second.Destroy()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err = ch.GetEvent(ctx)
	if err != nil {
		t.Fatalf("no event for a completion added after arming: %v", err)
	}
	got.AckEvents(1)
	if got != cq {
		t.Fatalf("event for CQ %p, want %p", got, cq)
	}
	var wc [4]verbs.WC
	if n, err := cq.Poll(wc[:]); err != nil || n != 2 {
		t.Fatalf("Poll: %d completions, %v; want the 2 flushes", n, err)
	}
}
