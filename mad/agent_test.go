package mad_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/clock"
)

// sent is a MAD a fakeTransport was asked to send.
type sent struct {
	to mad.Address
	m  mad.MAD
}

type fakeTransport struct {
	mu   sync.Mutex
	out  []sent
	fail error
}

func (f *fakeTransport) SendMAD(a mad.Address, m mad.MAD) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.out = append(f.out, sent{a, m.Clone()})
	return nil
}

func (f *fakeTransport) take() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.out
	f.out = nil
	return o
}

var (
	peer  = netip.MustParseAddr("127.0.0.2")
	local = netip.MustParseAddr("127.0.0.1")
	from  = mad.Address{Remote: peer, Local: local, QPN: 1, QKey: mad.GSIQKey}
	t0    = time.Unix(1000, 0)
)

func newAgent() (*mad.Agent, *fakeTransport, *clock.Fake) {
	tr := &fakeTransport{}
	c := clock.NewFake(t0)
	return mad.NewAgent(mad.Config{Transport: tr, Clock: c}), tr, c
}

// TestUnhandled: Linux's answers to MADs nobody registered for (§7).
func TestUnhandled(t *testing.T) {
	a, tr, _ := newAgent()
	cases := []struct {
		name   string
		m      mad.MAD
		answer bool
	}{
		{"PerfMgt Get", mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrPortCounters, 0x77), true},
		{"SA Set", mad.New(mad.ClassSubnAdm, 2, mad.MethodSet, 0x35, 0x78), true},
		{"CM ClassPortInfo Get", mad.New(mad.ClassCM, 2, mad.MethodGet, mad.AttrClassPortInfo, 0x79), true},
		{"vendor Get", mad.New(0x30, 1, mad.MethodGet, 0x10, 0x7A), true},
		{"CM REQ, no CM", mad.NewCM(mad.AttrREQ, 0x7B), false},
		{"CM Get of a message", mad.New(mad.ClassCM, 2, mad.MethodGet, mad.AttrREQ, 0x7C), false},
		{"SMP", mad.New(mad.ClassSubnLID, 1, mad.MethodGet, 0x15, 0x7D), false},
		{"DR SMP", mad.New(mad.ClassSubnDirected, 1, mad.MethodGet, 0x15, 0x7E), false},
		{"Trap", mad.New(mad.ClassPerfMgt, 1, mad.MethodTrap, 0x1, 0x7F), false},
		{"unmatched GetResp", mad.New(mad.ClassPerfMgt, 1, mad.MethodGetResp, 0x12, 0x80), false},
		{"TrapRepress", mad.New(mad.ClassPerfMgt, 1, mad.MethodTrapRepress, 0x12, 0x81), false},
	}
	for _, c := range cases {
		a.Deliver(t0, c.m, mad.Address{Remote: peer, QPN: 5, QKey: mad.GSIQKey, TrafficClass: 3})
		out := tr.take()
		if !c.answer {
			if len(out) != 0 {
				t.Errorf("%s: answered %v", c.name, out[0].m)
			}
			continue
		}
		if len(out) != 1 {
			t.Fatalf("%s: %d answers", c.name, len(out))
		}
		r := out[0]
		want := c.m.Clone()
		want.SetMethod(mad.MethodGetResp)
		want.SetStatus(mad.StatusMethodAttrUnsupported)
		if string(r.m) != string(want) || r.to.Remote != peer || r.to.QPN != 5 || r.to.QKey != mad.GSIQKey || r.to.TrafficClass != 3 {
			t.Errorf("%s: answer %v to %+v", c.name, r.m, r.to)
		}
	}
	// Malformed: short, base version 2.
	a.Deliver(t0, make([]byte, 100), from)
	bad := mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, 0x12, 1)
	bad[0] = 2
	a.Deliver(t0, bad, from)
	if len(tr.take()) != 0 || a.Stats().DropMalformed.Load() != 2 {
		t.Fatal("malformed MADs answered or not counted")
	}
}

// TestRegistration: Sends and requests reach the registration for their
// class, version and method; duplicates are refused; unregistering makes the
// agent answer for it again.
func TestRegistration(t *testing.T) {
	a, tr, _ := newAgent()
	var got []*mad.Received
	r, err := a.Register(mad.ClassCM, 2, []uint8{mad.MethodSend}, func(r *mad.Registration, in *mad.Received) { got = append(got, in) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register(mad.ClassCM, 2, []uint8{mad.MethodSend}, nil); !errors.Is(err, mad.ErrRegistered) {
		t.Fatalf("duplicate registration: %v", err)
	}
	req := mad.NewCM(mad.AttrREQ, 9)
	a.Deliver(t0, req, from)
	v1 := mad.New(mad.ClassCM, 1, mad.MethodSend, mad.AttrREQ, 9)
	a.Deliver(t0, v1, from) // other class version: nobody, and not a Get
	if len(got) != 1 || got[0].From != from || !got[0].Time.Equal(t0) || string(got[0].MAD) != string(req) {
		t.Fatalf("handler got %d MADs", len(got))
	}
	req[40] = 0xEE // the handler's copy is private
	if got[0].MAD[40] == 0xEE {
		t.Fatal("handler MAD aliases the receive buffer")
	}
	if tid1, tid2 := r.NewTID(), r.NewTID(); r.TID(0x8A3C1D27)>>32 != uint64(r.HiTID()) || uint32(r.TID(0x8A3C1D27)) != 0x8A3C1D27 || tid1 == tid2 {
		t.Fatal("TIDs")
	}
	if err := r.Send(mad.Address{Remote: peer, QPN: 1}, mad.NewCM(mad.AttrRTU, 1)); err != nil {
		t.Fatal(err)
	}
	if o := tr.take(); len(o) != 1 || o[0].to.QKey != mad.GSIQKey {
		t.Fatalf("send: %+v", o)
	}
	r.Unregister()
	a.Deliver(t0, mad.NewCM(mad.AttrREQ, 10), from)
	if len(got) != 1 {
		t.Fatal("delivered after Unregister")
	}
	tr.fail = errors.New("link down")
	if err := r.Send(mad.Address{Remote: peer, QPN: 1}, mad.NewCM(mad.AttrRTU, 1)); err == nil || a.Stats().SendErrors.Load() != 1 {
		t.Fatal("send error not reported")
	}
}

// TestRequest: a request is re-sent each Timeout, Retries times, then fails
// with ErrTimeout; a matching response (same TID, class and peer) completes
// it, others are dropped; the context cancels it.
func TestRequest(t *testing.T) {
	a, tr, c := newAgent()
	r, err := a.Register(mad.ClassPerfMgt, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	to := mad.Address{Remote: peer, QPN: 1}
	type result struct {
		in  *mad.Received
		err error
	}
	run := func(ctx context.Context, retries int) chan result {
		ch := make(chan result, 1)
		go func() {
			in, err := r.Request(ctx, to, mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrPortCounters, 0), mad.RequestOptions{Timeout: time.Second, Retries: retries})
			ch <- result{in, err}
		}()
		return ch
	}
	waitSent := func(n int) []sent {
		t.Helper()
		var out []sent
		for i := 0; i < 2000 && len(out) < n; i++ {
			out = append(out, tr.take()...)
			if len(out) < n {
				time.Sleep(time.Millisecond)
			}
		}
		if len(out) != n {
			t.Fatalf("sent %d MADs, want %d", len(out), n)
		}
		return out
	}
	waitTimer := func() {
		t.Helper()
		for i := 0; i < 2000 && c.Pending() == 0; i++ {
			time.Sleep(time.Millisecond)
		}
	}

	// Timeout after 1 + 2 sends.
	ch := run(context.Background(), 2)
	first := waitSent(1)[0]
	tid := first.m.TID()
	if uint32(tid>>32) != r.HiTID() {
		t.Fatalf("TID %#x lacks HiTID %d", tid, r.HiTID())
	}
	for i := range 2 {
		waitTimer()
		c.Advance(time.Second)
		if s := waitSent(1)[0]; s.m.TID() != tid {
			t.Fatalf("retry %d has TID %#x", i, s.m.TID())
		}
	}
	waitTimer()
	c.Advance(time.Second)
	if res := <-ch; !errors.Is(res.err, mad.ErrTimeout) {
		t.Fatalf("want timeout, got %v", res.err)
	}

	// A response: wrong TID, wrong peer and wrong class are dropped.
	ch = run(context.Background(), 1)
	req := waitSent(1)[0].m
	resp := req.Clone()
	resp.SetMethod(mad.MethodGetResp)
	wrongTID := resp.Clone()
	wrongTID.SetTID(req.TID() + 1)
	a.Deliver(c.Now(), wrongTID, from)
	a.Deliver(c.Now(), resp, mad.Address{Remote: netip.MustParseAddr("127.0.0.9"), QPN: 1})
	wrongClass := resp.Clone()
	wrongClass.SetMgmtClass(mad.ClassBM)
	a.Deliver(c.Now(), wrongClass, from)
	if n := a.Stats().DropUnmatched.Load(); n != 3 {
		t.Fatalf("DropUnmatched = %d", n)
	}
	a.Deliver(c.Now(), resp, from)
	res := <-ch
	if res.err != nil || res.in.MAD.TID() != req.TID() || res.in.From.Remote != peer {
		t.Fatalf("request: %+v", res)
	}
	a.Deliver(c.Now(), resp, from) // a duplicate response matches nothing now
	if n := a.Stats().DropUnmatched.Load(); n != 4 {
		t.Fatalf("DropUnmatched = %d after a duplicate", n)
	}

	// Context cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	ch = run(ctx, 3)
	waitSent(1)
	cancel()
	if res := <-ch; !errors.Is(res.err, context.Canceled) {
		t.Fatalf("cancelled request: %v", res.err)
	}
	// Unregister fails what is outstanding.
	ch = run(context.Background(), 3)
	waitSent(1)
	waitTimer()
	r.Unregister()
	if res := <-ch; !errors.Is(res.err, mad.ErrClosed) {
		t.Fatalf("request after Unregister: %v", res.err)
	}
}
