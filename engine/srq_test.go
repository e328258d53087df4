package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/link/memlink"
	"github.com/rdma-go/rdma-go/wire"
)

// Tests of shared receive queues: many QPs consuming one SRQ, RNR when it is
// empty, the SRQ limit event, a QP leaving it for ERR (LAST_WQE_REACHED,
// the SRQ's receives kept), resizing, and RC over an SRQ under loss.

// newSRQPair is an RC (or UC) pair whose B QP takes its receives from a new
// SRQ of the given depth on B's host.
func newSRQPair(t *testing.T, typ QPType, depth int, hc func(*HostConfig)) (*pair, *SRQ) {
	t.Helper()
	var srq *SRQ
	p := newPairOf(t, typ, addrA, addrB, hc, func(p *pair, isB bool, c *QPConfig) {
		if isB {
			var err error
			if srq, err = p.hb.CreateSRQ(1, depth, 2); err != nil {
				t.Fatal(err)
			}
			c.SRQ = srq
		}
	})
	return p, srq
}

// extra adds a connected QP pair to p: a new QP on A (sending to p.acq) and
// one on B attached to srq (receiving to p.brq). Only p.a's and p.b's timers
// run in p.run, so use it where nothing is lost.
func (p *pair) extra(typ QPType, srq *SRQ) (a2, b2 *QP) {
	p.t.Helper()
	cfg := QPConfig{Type: typ, PD: 1, MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 2, SendCQ: p.acq, RecvCQ: p.arq}
	a2, err := p.ha.CreateQP(cfg)
	must(p.t, err)
	cfg.SendCQ, cfg.RecvCQ, cfg.SRQ = p.bcq, p.brq, srq
	b2, err = p.hb.CreateQP(cfg)
	must(p.t, err)
	connect(p.now, a2, b2, addrB, 0x500, 0x600, 1024)
	connect(p.now, b2, a2, addrA, 0x600, 0x500, 1024)
	return a2, b2
}

func (p *pair) srqPost(srq *SRQ, id uint64, off, n int) {
	p.t.Helper()
	must(p.t, srq.PostRecv(&RecvWR{ID: id, SGL: p.sge(p.mrb, off, n)}))
}

// TestSRQEmptyRNR: an RC SEND to a QP whose SRQ is empty is RNR NAKed and
// succeeds once a receive is posted to the SRQ.
func TestSRQEmptyRNR(t *testing.T) {
	p, srq := newSRQPair(t, QPTypeRC, 8, nil)
	fill(p.mema, 0x61)
	c := p.capture()
	d := wire.RNRDelay(12)
	p.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 2500)})
	p.run(2*d + d/2)
	if n := len(c.acks(false, wire.RNRSyndrome(12))); n != 3 {
		t.Fatalf("%d RNR NAKs:\n%s", n, c.dump())
	}
	checkWCs(t, "A send", p.acq.take())
	p.srqPost(srq, 77, 65536, 4096)
	p.run(time.Second)
	checkWCs(t, "A send", p.acq.take(), wc{1, StatusSuccess})
	r := p.brq.take()
	checkWCs(t, "B recv", r, wc{77, StatusSuccess})
	if r[0].QPN != p.b.QPN() || r[0].SrcQP != p.a.QPN() || r[0].ByteLen != 2500 || !bytes.Equal(p.memb[65536:65536+2500], p.mema[:2500]) {
		t.Fatalf("recv %+v", r[0])
	}
	if srq.Len() != 0 || p.b.State() != StateRTS {
		t.Fatalf("SRQ len %d, state %d", srq.Len(), p.b.State())
	}
}

// TestSRQLimit: SetLimit arms the limit; the event comes once, when the
// count of posted receives falls below it, and disarms it.
func TestSRQLimit(t *testing.T) {
	var ev evLog
	p, srq := newSRQPair(t, QPTypeRC, 16, ev.hook())
	if err := srq.SetLimit(17); err == nil {
		t.Fatal("limit above the depth accepted")
	}
	if err := srq.SetLimit(-1); err == nil {
		t.Fatal("negative limit accepted")
	}
	for i := range 8 {
		p.srqPost(srq, uint64(100+i), i*4096, 4096)
	}
	must(t, srq.SetLimit(5))
	if srq.Limit() != 5 {
		t.Fatalf("Limit() = %d", srq.Limit())
	}
	send := func(id uint64) {
		p.postA(SendWR{ID: id, Op: WRSend, SGL: p.sge(p.mra, 0, 64)})
		p.run(time.Second)
	}
	for i := range 3 { // 8 → 5 posted: not below 5
		send(uint64(i))
		checkEvents(t, ev.take())
	}
	if srq.Len() != 5 {
		t.Fatalf("Len() = %d", srq.Len())
	}
	send(3) // 4 < 5
	checkEvents(t, ev.take(), Event{Type: EventSRQLimitReached, SRQ: srq})
	if srq.Limit() != 0 {
		t.Fatalf("limit still armed: %d", srq.Limit())
	}
	send(4)
	send(5)
	checkEvents(t, ev.take())
	// Re-arm above the current count: the next receive taken fires it.
	must(t, srq.SetLimit(10))
	send(6)
	checkEvents(t, ev.take(), Event{Type: EventSRQLimitReached, SRQ: srq})
	// Disarmed with 0.
	must(t, srq.SetLimit(0))
	for i := range 8 {
		p.srqPost(srq, uint64(200+i), 65536+i*4096, 4096)
	}
	send(7)
	checkEvents(t, ev.take())
	r := p.brq.take()
	if len(r) != 8 || srq.Len() != 8 {
		t.Fatalf("receives %+v, %d left", r, srq.Len())
	}
	for i := range 8 {
		if r[i].WRID != uint64(100+i) || r[i].Status != StatusSuccess {
			t.Fatalf("receive %d: %+v", i, r[i])
		}
	}
}

// TestSRQQPError: a QP attached to an SRQ that goes to ERR raises
// LAST_WQE_REACHED and leaves the SRQ's receives posted for the other QPs.
func TestSRQQPError(t *testing.T) {
	var ev evLog
	p, srq := newSRQPair(t, QPTypeRC, 16, ev.hook())
	a2, b2 := p.extra(QPTypeRC, srq)
	fill(p.mema, 0x71)
	for i := range 6 {
		p.srqPost(srq, uint64(100+i), i*4096, 4096)
	}
	p.postA(SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, 300)})
	p.run(time.Second)
	checkWCs(t, "B recv", p.brq.take(), wc{100, 0})
	ev.take()
	p.b.Modify(p.now, &Attr{State: StateErr}, AttrState)
	checkEvents(t, ev.take(), Event{Type: EventQPLastWQEReached, QP: p.b})
	checkWCs(t, "B recv after ERR", p.brq.take())
	if n := srq.Len(); n != 5 {
		t.Fatalf("SRQ has %d receives, want 5", n)
	}
	// The other QP still uses them, in order.
	for i := range 3 {
		must(t, a2.PostSend(p.now, &SendWR{ID: uint64(10 + i), Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 1000+i)}))
	}
	p.run(time.Second)
	r := p.brq.take()
	checkWCs(t, "b2 recv", r, wc{101, 0}, wc{102, 0}, wc{103, 0})
	for i, c := range r {
		if c.QPN != b2.QPN() || c.ByteLen != uint32(1000+i) {
			t.Fatalf("completion %+v", c)
		}
	}
	checkWCs(t, "A send", p.acq.take(), wc{10, 0}, wc{11, 0}, wc{12, 0})
	// A second move to ERR raises nothing; RESET and ERR again raises it
	// again.
	p.b.Modify(p.now, &Attr{State: StateErr}, AttrState)
	checkEvents(t, ev.take())
	p.b.Modify(p.now, &Attr{State: StateReset}, AttrState)
	p.b.Modify(p.now, &Attr{State: StateErr}, AttrState)
	checkEvents(t, ev.take(), Event{Type: EventQPLastWQEReached, QP: p.b})
	if n := srq.Len(); n != 2 {
		t.Fatalf("SRQ has %d receives, want 2", n)
	}
}

// TestFlushReceiveInProgress: a receive a QP has started to fill (the FIRST
// packet of a SEND arrived) belongs to that QP; when the QP goes to ERR it
// completes with WR_FLUSH_ERR like every other receive, before the rest of
// the queue and before LAST_WQE_REACHED on an SRQ, instead of vanishing.
func TestFlushReceiveInProgress(t *testing.T) {
	for _, typ := range []QPType{QPTypeRC, QPTypeUC} {
		for _, useSRQ := range []bool{false, true} {
			t.Run(fmt.Sprintf("type=%d/srq=%v", typ, useSRQ), func(t *testing.T) {
				var ev evLog
				var p *pair
				var srq *SRQ
				post := func(id uint64, off int) { p.recvB(id, p.mrb, off, 8192) }
				if useSRQ {
					p, srq = newSRQPair(t, typ, 8, ev.hook())
					post = func(id uint64, off int) { p.srqPost(srq, id, off, 8192) }
				} else {
					p = newPairOf(t, typ, addrA, addrB, ev.hook(), nil)
				}
				post(50, 0)
				post(51, 8192)
				p.postA(SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, 3000)})
				first := p.la.q[0]
				p.la.q = nil
				p.hb.Receive(p.now, []link.Datagram{first})
				ev.take()
				p.b.Modify(p.now, &Attr{State: StateErr}, AttrState)
				if useSRQ {
					checkWCs(t, "B recv", p.brq.take(), wc{50, StatusWRFlushErr})
					checkEvents(t, ev.take(), Event{Type: EventQPLastWQEReached, QP: p.b})
					if srq.Len() != 1 {
						t.Fatalf("SRQ len %d", srq.Len())
					}
				} else {
					checkWCs(t, "B recv", p.brq.take(), wc{50, StatusWRFlushErr}, wc{51, StatusWRFlushErr})
					checkEvents(t, ev.take())
				}
			})
		}
	}
}

// TestSRQResize: Resize keeps the posted receives, in order; it refuses a
// depth below the number posted. PostRecv checks the SGE count, keys and
// room.
func TestSRQResize(t *testing.T) {
	p, srq := newSRQPair(t, QPTypeRC, 4, nil)
	fill(p.mema, 0x13)
	if _, err := p.hb.CreateSRQ(1, 0, 1); err == nil {
		t.Fatal("depth 0 accepted")
	}
	for i := range 4 {
		p.srqPost(srq, uint64(i), i*4096, 4096)
	}
	if err := srq.PostRecv(&RecvWR{ID: 99, SGL: p.sge(p.mrb, 0, 10)}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("post to a full SRQ: %v", err)
	}
	if err := srq.Resize(3); err == nil {
		t.Fatal("resize below the posted count accepted")
	}
	if err := srq.Resize(0); err == nil {
		t.Fatal("resize to 0 accepted")
	}
	must(t, srq.Resize(4))
	must(t, srq.Resize(9))
	if srq.Cap() != 9 || srq.Len() != 4 {
		t.Fatalf("cap %d len %d", srq.Cap(), srq.Len())
	}
	sgl := p.sge(p.mrb, 0, 8)
	sgl = append(sgl, sgl[0], sgl[0])
	if err := srq.PostRecv(&RecvWR{ID: 99, SGL: sgl}); !errors.Is(err, ErrTooManySGE) {
		t.Fatalf("3 SGEs on a 2-SGE SRQ: %v", err)
	}
	if err := srq.PostRecv(&RecvWR{ID: 99, SGL: []SGE{{Addr: p.mrb.Addr, Length: 8, LKey: p.mrb.LKey ^ 1}}}); err == nil {
		t.Fatal("bad L_Key accepted")
	}
	// Two SGEs: the message is scattered over both.
	must(t, srq.PostRecv(&RecvWR{ID: 4, SGL: []SGE{{Addr: p.mrb.Addr + 4*4096, Length: 100, LKey: p.mrb.LKey}, {Addr: p.mrb.Addr + 5*4096, Length: 4000, LKey: p.mrb.LKey}}}))
	for i := 5; i < 9; i++ {
		p.srqPost(srq, uint64(i), (i+1)*4096, 4096)
	}
	if srq.Len() != 9 {
		t.Fatalf("len %d", srq.Len())
	}
	must(t, srq.Resize(9)) // full and same depth: fine
	// Consume three, shrink to exactly what is left, then consume the rest.
	for i := range 3 {
		p.postA(SendWR{ID: uint64(i), Op: WRSend, SGL: p.sge(p.mra, i*64, 200)})
	}
	p.run(time.Second)
	must(t, srq.Resize(6))
	if srq.Cap() != 6 {
		t.Fatalf("cap %d", srq.Cap())
	}
	for i := 3; i < 9; i++ {
		p.postA(SendWR{ID: uint64(i), Op: WRSend, SGL: p.sge(p.mra, i*64, 200)})
	}
	p.run(time.Second)
	r := p.brq.take()
	if len(r) != 9 {
		t.Fatalf("%d receives", len(r))
	}
	for i, c := range r {
		if c.WRID != uint64(i) || c.Status != StatusSuccess || c.ByteLen != 200 {
			t.Fatalf("receive %d: %+v", i, c)
		}
		var got []byte
		switch {
		case i < 4:
			got = p.memb[i*4096 : i*4096+200]
		case i == 4:
			got = append(clone(p.memb[4*4096:4*4096+100]), p.memb[5*4096:5*4096+100]...)
		default:
			got = p.memb[(i+1)*4096 : (i+1)*4096+200]
		}
		if !bytes.Equal(got, p.mema[i*64:i*64+200]) {
			t.Fatalf("receive %d: data damaged", i)
		}
	}
}

// TestSRQConcurrentUse: the SRQ's methods are safe while its QPs receive on
// another goroutine (run with -race).
func TestSRQConcurrentUse(t *testing.T) {
	p, srq := newSRQPair(t, QPTypeRC, 64, nil)
	const msgs = 300
	var wg sync.WaitGroup
	stop, posted := make(chan struct{}), make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		id := uint64(0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if id < msgs {
				if err := srq.PostRecv(&RecvWR{ID: id, SGL: p.sge(p.mrb, int(id%64)*1024, 1024)}); err == nil {
					if id++; id == msgs {
						close(posted)
					}
				}
			}
			_ = srq.Len() + srq.Cap() + srq.Limit()
			_ = srq.SetLimit(1)
			_ = srq.Resize(64 + int(id%3))
		}
	}()
	wg.Add(1)
	go func() { // an application thread querying the SRQ
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c := srq.Cap(); c < 64 || c > 66 {
				t.Errorf("cap %d", c)
				return
			}
			_ = srq.Len()
		}
	}()
	for i := range msgs {
		p.postA(SendWR{ID: uint64(i), Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 100)})
		p.run(time.Second)
	}
	<-posted
	p.run(time.Minute) // whatever still waited for a receive
	close(stop)
	wg.Wait()
	sc := p.acq.take()
	if len(sc) != msgs {
		t.Fatalf("%d send completions", len(sc))
	}
	r := p.brq.take()
	if len(r) != msgs {
		t.Fatalf("%d receives", len(r))
	}
	for i, c := range r {
		if c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("receive %d: %+v", i, c)
		}
	}
}

// TestSRQManyQPs: 16 RC QPs on one host share one SRQ (smaller than the
// traffic, so it runs dry and RNR NAKs happen) and 16 peers send to them;
// every message arrives exactly once, in order per QP, intact, on the right
// QP. Then the same under loss, reordering, duplication and corruption.
func TestSRQManyQPs(t *testing.T) {
	calm := memlink.Faults{Delay: 5 * time.Microsecond}
	t.Run("calm", func(t *testing.T) { srqWorld(t, 1, calm, 16, 30) })
	for _, seed := range []int64{2, 3} {
		t.Run(fmt.Sprintf("lossy/seed=%d", seed), func(t *testing.T) {
			f := lossyFaults
			f.Jitter = 10 * time.Microsecond
			srqWorld(t, seed, f, 16, 30)
		})
	}
}

func srqWorld(t *testing.T, seed int64, f memlink.Faults, pairs, perQP int) {
	const (
		depth  = 8
		slot   = 8192
		maxLen = 5000
	)
	n := newLossyNet(t, seed, f)
	ha, hb := n.host(addrA, nil), n.host(addrB, nil)
	srq, err := hb.CreateSRQ(1, depth, 1)
	must(t, err)
	acq, brq := &sliceCQ{}, &sliceCQ{}
	mema := make([]byte, pairs*perQP*slot)
	memb := make([]byte, depth*slot)
	mra := ha.Mem().Register(1, mema, AccessLocalWrite)
	mrb := hb.Mem().Register(1, memb, AccessLocalWrite)
	var as, bs []*QP
	byQPN := map[uint32]int{}
	for i := range pairs {
		a := n.qp(ha, QPConfig{Type: QPTypeRC, PD: 1, MaxSendWR: perQP, MaxRecvWR: 1, MaxSendSGE: 1, SendCQ: acq})
		b := n.qp(hb, QPConfig{Type: QPTypeRC, PD: 1, MaxSendWR: 1, MaxRecvWR: 1, RecvCQ: brq, SRQ: srq})
		psn := uint32(i) * 0x10000
		connect(n.now, a, b, addrB, psn, psn, 1024)
		connect(n.now, b, a, addrA, psn, psn, 1024)
		// Timeout 10: 4 ms, so losses at the tail recover quickly.
		a.Modify(n.now, &Attr{Timeout: 10}, AttrTimeout)
		as, bs = append(as, a), append(bs, b)
		byQPN[b.QPN()] = i
	}
	post := func(id uint64) {
		must(t, srq.PostRecv(&RecvWR{ID: id, SGL: []SGE{{Addr: mrb.Addr + id*slot, Length: slot, LKey: mrb.LKey}}}))
	}
	for i := range depth {
		post(uint64(i))
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5A9))
	for k := range perQP {
		for i, a := range as {
			seq := i*perQP + k
			ln := stampMin + rng.IntN(maxLen-stampMin)
			off := seq * slot
			stamp(mema[off:off+ln], uint32(i)<<16|uint32(k))
			must(t, a.PostSend(n.now, &SendWR{ID: uint64(seq), Op: WRSend, Flags: SendSignaled,
				SGL: []SGE{{Addr: mra.Addr + uint64(off), Length: uint32(ln), LKey: mra.LKey}}}))
		}
	}
	nextK := make([]int, pairs)
	got := 0
	for iter := 0; ; iter++ {
		if iter > 2_000_000 {
			t.Fatalf("no end: %d of %d received", got, pairs*perQP)
		}
		moved := n.step(n.now.Add(10 * time.Second))
		for _, r := range brq.take() {
			if r.Status != StatusSuccess {
				t.Fatalf("receive completion %+v", r)
			}
			i, ok := byQPN[r.QPN]
			if !ok || r.SrcQP != as[i].QPN() {
				t.Fatalf("completion for an unknown QP: %+v", r)
			}
			x, err := unstamp(memb[int(r.WRID)*slot:][:r.ByteLen])
			if err != nil {
				t.Fatalf("QP %d: damaged message: %v", i, err)
			}
			if int(x>>16) != i || int(x&0xFFFF) != nextK[i] {
				t.Fatalf("QP %d: got message %d/%d, want %d/%d", i, x>>16, x&0xFFFF, i, nextK[i])
			}
			nextK[i]++
			got++
			post(r.WRID)
		}
		if !moved && n.idle() {
			break
		}
		if n.now.Sub(n.start) > time.Hour {
			t.Fatal("virtual time limit")
		}
	}
	if got != pairs*perQP {
		t.Fatalf("%d of %d received", got, pairs*perQP)
	}
	sc := acq.take()
	if len(sc) != pairs*perQP {
		t.Fatalf("%d send completions", len(sc))
	}
	for _, c := range sc {
		if c.Status != StatusSuccess {
			t.Fatalf("send completion %+v", c)
		}
	}
	for i := range pairs {
		if as[i].State() != StateRTS || bs[i].State() != StateRTS {
			t.Fatalf("pair %d: states %d %d", i, as[i].State(), bs[i].State())
		}
	}
	if srq.Len() != depth {
		t.Fatalf("SRQ has %d receives, want %d", srq.Len(), depth)
	}
	st := hb.Stats()
	if st.RNRNAKsSent.Load() == 0 {
		t.Fatal("the SRQ never ran dry")
	}
	sa := ha.Stats()
	t.Logf("A: retransmits %d, seq NAKs %d, RNR NAKs %d, sent %d, stale %d", sa.Retransmits.Load(), sa.SeqNAKsReceived.Load(), sa.RNRNAKsReceived.Load(), sa.Sent.Load(), sa.DropStaleNAK.Load())
	t.Logf("%d messages over %d QPs in %v virtual; net %+v; B: RNR NAKs %d, duplicates %d, ICRC drops %d",
		got, pairs, n.now.Sub(n.start), n.net.Stats(), st.RNRNAKsSent.Load(), st.Duplicates.Load(), st.DropICRC.Load())
}
