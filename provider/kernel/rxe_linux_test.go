//go:build linux

package kernel

import (
	"os"
	"testing"

	"github.com/rdma-go/rdma-go/provider"
)

// TestConformanceRXERings: on an rdma_rxe device (RDMA_GO_TEST_DEVICE=rxe0,
// as the lab runs it), CQs and QPs find their rings, so posting and polling
// take the fast path; SRQ-attached QPs have no receive ring, UD QPs no send
// ring; a resized CQ finds its new ring.
func TestConformanceRXERings(t *testing.T) {
	name := os.Getenv("RDMA_GO_TEST_DEVICE")
	if name == "" {
		t.Skip("RDMA_GO_TEST_DEVICE names no kernel device")
	}
	haveLib(t)
	ds, err := Provider{}.Devices()
	if err != nil {
		t.Fatal(err)
	}
	var dev provider.Device
	for _, d := range ds {
		if d.Name() == name {
			dev = d
		}
	}
	if dev == nil {
		t.Skipf("%s is not a kernel device", name)
	}
	pc, err := dev.Open(func(provider.AsyncEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	c := pc.(*Context)
	t.Cleanup(func() { c.Close() })
	if !c.rxe {
		t.Skipf("%s is not an rxe device", name)
	}
	ppd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ppd.Dealloc() })
	pcq, err := c.CreateCQ(64, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pcq.Destroy() })
	q := pcq.(*cq)
	if q.ring.base == 0 {
		t.Fatal("CQ: no ring found")
	}
	old := q.ring.base
	if err := q.Resize(1000); err != nil {
		t.Fatal(err)
	}
	if q.ring.base == 0 || q.ring.base == old || int(q.ring.mask) < 1000 {
		t.Fatalf("resized CQ: ring %#x (was %#x), mask %d", q.ring.base, old, q.ring.mask)
	}
	srq, err := ppd.CreateSRQ(provider.SRQAttr{MaxWR: 16, MaxSGE: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srq.Destroy() })
	cp := provider.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	for _, tc := range []struct {
		name   string
		typ    provider.QPType
		srq    provider.SRQ
		sq, rq bool
	}{
		{"RC", provider.QPTypeRC, nil, true, true},
		{"UC", provider.QPTypeUC, nil, true, true},
		{"UD", provider.QPTypeUD, nil, false, true},
		{"RC with SRQ", provider.QPTypeRC, srq, true, false},
	} {
		p, err := ppd.CreateQP(&provider.QPInitAttr{Type: tc.typ, SendCQ: pcq, RecvCQ: pcq, SRQ: tc.srq, Cap: cp}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		x := p.(*qp).rxe
		p.Destroy()
		if (x.sq.base != 0) != tc.sq || (x.rq.base != 0) != tc.rq {
			t.Errorf("%s QP: send ring %#x, receive ring %#x; want send %v, receive %v", tc.name, x.sq.base, x.rq.base, tc.sq, tc.rq)
		}
	}
}
