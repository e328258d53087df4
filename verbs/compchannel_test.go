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
		qp := flushedRecvQP(t, pd, cq)
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
