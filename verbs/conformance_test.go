package verbs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// The conformance tests (TestConformance*) check what a program may expect
// of any device through this API, and run on the device RDMA_GO_TEST_DEVICE
// names (a kernel device such as rxe0, through provider/kernel) or, unset,
// on a soft device:
//
//	go test -c -o verbs.test ./verbs
//	RDMA_GO_TEST_DEVICE=rxe0 ./verbs.test -test.run Conformance -test.v
//
// Both sides of each test are QPs of one device, connected to each other
// over its own address, at the port's active MTU.

// conformancePair opens the conformance device twice (two contexts) and
// connects an RC QP of each to the other.
func conformancePair(t *testing.T, opts ...func(*pairConfig)) (a, b *tEnd) {
	t.Helper()
	a, b = conformanceEnds(t, opts...)
	cfg := conformanceConfig(t, a.ctx, opts...)
	if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
		t.Fatalf("connect a: %v", err)
	}
	if err := connectQP(b.qp, b.psn, a.info(), &cfg); err != nil {
		t.Fatalf("connect b: %v", err)
	}
	return a, b
}

// conformanceConfig is defaultPairConfig for ctx's device: its active MTU
// and the GID of its address.
func conformanceConfig(t *testing.T, ctx *verbs.Context, opts ...func(*pairConfig)) pairConfig {
	t.Helper()
	cfg := defaultPairConfig()
	pa, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MTU = pa.ActiveMTU
	if cfg.GIDIndex, err = testdev.GIDIndex(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// conformanceEnds opens the two ends, not connected.
func conformanceEnds(t *testing.T, opts ...func(*pairConfig)) (a, b *tEnd) {
	t.Helper()
	ctx := testdev.Conformance(t)
	cfg := conformanceConfig(t, ctx, opts...)
	var err error
	if a, err = openEnd(ctx.Device(), &cfg); err != nil {
		t.Fatalf("open a: %v", err)
	}
	t.Cleanup(a.close)
	if b, err = openEnd(ctx.Device(), &cfg); err != nil {
		t.Fatalf("open b: %v", err)
	}
	t.Cleanup(b.close)
	return a, b
}

// TestConformanceQuery: the device, its port 1 and the GID of its address.
func TestConformanceQuery(t *testing.T) {
	ctx := testdev.Conformance(t)
	da, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da.PhysPortCnt < 1 || da.MaxQP < 2 || da.MaxCQE < 64 || da.MaxMRSize == 0 {
		t.Fatalf("device attributes %+v", da)
	}
	pa, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.State != verbs.PortActive || pa.LinkLayer != verbs.LinkLayerEthernet || pa.ActiveMTU < verbs.MTU256 {
		t.Fatalf("port 1: state %v, link layer %v, active MTU %v", pa.State, pa.LinkLayer, pa.ActiveMTU)
	}
	i, err := testdev.GIDIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s, GID %d, active MTU %v", ctx.Device().Name(), ctx.Device().Addr(), i, pa.ActiveMTU)
}

// TestConformanceRCSend: SENDs of 1 byte, of several MTUs and with an
// immediate arrive whole, in order, with their lengths and immediates.
func TestConformanceRCSend(t *testing.T) {
	a, b := conformancePair(t)
	qa, _, err := a.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	if qa.State != verbs.QPStateRTS || qa.DestQPN != b.qp.QPN() || qa.SQPSN != a.psn || qa.RQPSN != b.psn ||
		qa.AH.GRH.DGID != b.gid || qa.Timeout != 14 || qa.RetryCnt != 7 {
		t.Fatalf("QP.Query after connecting: %+v", qa)
	}
	sizes := []int{1, 4096 + 17, 60 << 10}
	for i, n := range sizes {
		b.postRecv(t, uint64(i), 0, len(b.buf))
		fill(a.buf[:n], byte(i+1))
		wr := verbs.SendWR{ID: uint64(100 + i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, n)}}
		if i == 2 {
			wr.Opcode, wr.ImmData = verbs.WRSendWithImm, 0xC0FFEE
		}
		a.post(t, wr)
		a.sendWC(t, uint64(100+i), verbs.WCSend)
		wc := b.recvWCs(t, 1)[0]
		checkWC(t, wc, uint64(i), verbs.WCSuccess, verbs.WCRecv)
		if int(wc.ByteLen) != n {
			t.Fatalf("SEND %d: byte_len %d, want %d", i, wc.ByteLen, n)
		}
		if (wc.Flags&verbs.WCFlagWithImm != 0) != (i == 2) || (i == 2 && wc.ImmData != 0xC0FFEE) {
			t.Fatalf("SEND %d: flags %v imm %#x", i, wc.Flags, wc.ImmData)
		}
		checkBytes(t, "received", b.buf[:n], a.buf[:n])
	}
}

// TestConformanceRCWriteRead: an RDMA WRITE lands in the peer's memory, a
// WRITE with immediate consumes a receive, an RDMA READ brings memory back.
func TestConformanceRCWriteRead(t *testing.T) {
	a, b := conformancePair(t)
	const n = 20000
	fill(a.buf[:n], 7)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()})
	a.sendWC(t, 1, verbs.WCRDMAWrite)
	checkBytes(t, "written", b.buf[100:100+n], a.buf[:n])

	b.postRecv(t, 9, 0, 0)
	a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, ImmData: 42,
		SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr() + 40000, RKey: b.mr.RKey()})
	a.sendWC(t, 2, verbs.WCRDMAWrite)
	wc := b.recvWCs(t, 1)[0]
	checkWC(t, wc, 9, verbs.WCSuccess, verbs.WCRecvRDMAWithImm)
	if wc.ImmData != 42 || wc.Flags&verbs.WCFlagWithImm == 0 {
		t.Fatalf("WRITE with immediate: %+v", wc)
	}

	fill(b.buf[50000:50000+n/2], 9)
	a.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(30000, n/2)}, RemoteAddr: b.mr.Addr() + 50000, RKey: b.mr.RKey()})
	a.sendWC(t, 3, verbs.WCRDMARead)
	checkBytes(t, "read", a.buf[30000:30000+n/2], b.buf[50000:50000+n/2])
}

// TestConformanceRCAtomics: fetch-and-add and compare-and-swap on 8
// aligned bytes return the old value and change the peer's memory.
func TestConformanceRCAtomics(t *testing.T) {
	a, b := conformancePair(t)
	binary.NativeEndian.PutUint64(b.buf[64:], 1000)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey(), CompareAdd: 5})
	a.sendWC(t, 1, verbs.WCFetchAdd)
	if old, now := binary.NativeEndian.Uint64(a.buf), binary.NativeEndian.Uint64(b.buf[64:]); old != 1000 || now != 1005 {
		t.Fatalf("fetch-and-add: returned %d, memory %d; want 1000, 1005", old, now)
	}
	a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(8, 8)}, RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey(), CompareAdd: 1005, Swap: 77})
	a.sendWC(t, 2, verbs.WCCompSwap)
	if old, now := binary.NativeEndian.Uint64(a.buf[8:]), binary.NativeEndian.Uint64(b.buf[64:]); old != 1005 || now != 77 {
		t.Fatalf("compare-and-swap: returned %d, memory %d; want 1005, 77", old, now)
	}
}

// TestConformanceRCBadRKey: a WRITE with a key the peer never granted
// completes with a remote access error and leaves the peer's memory alone.
func TestConformanceRCBadRKey(t *testing.T) {
	a, b := conformancePair(t)
	before := bytes.Clone(b.buf[:64])
	fill(a.buf[:64], 3)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x5A5A00})
	wc := a.sendWCs(t, 1)[0]
	checkWC(t, wc, 1, verbs.WCRemAccessErr, verbs.WCRDMAWrite)
	checkBytes(t, "peer memory", b.buf[:64], before)
	stateIs(t, a.qp, verbs.QPStateErr)
}

// TestConformanceSRQ: an RC QP whose receives come from an SRQ.
func TestConformanceSRQ(t *testing.T) {
	a, b := conformanceEnds(t)
	cfg := conformanceConfig(t, a.ctx)
	srq, err := b.pd.CreateSRQ(verbs.SRQAttr{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	retypeQP(t, b, verbs.QPTypeRC, srq, &cfg)
	t.Cleanup(func() { b.qp.Destroy(); b.qp = nil; srq.Destroy() })
	if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := connectQP(b.qp, b.psn, a.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := srq.PostRecv(verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{b.mr.SGE(i*1024, 1024)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		fill(a.buf[i*100:i*100+100], byte(i+1))
		a.post(t, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(i*100, 100)}})
	}
	a.sendWCs(t, 4)
	for i, wc := range b.recvWCs(t, 4) {
		checkWC(t, wc, uint64(i), verbs.WCSuccess, verbs.WCRecv)
		if wc.QPNum != b.qp.QPN() || wc.ByteLen != 100 {
			t.Fatalf("SRQ receive %d: %+v", i, wc)
		}
		checkBytes(t, "received", b.buf[i*1024:i*1024+100], a.buf[i*100:i*100+100])
	}
}

// TestConformanceUD: a datagram to the device's own address arrives behind
// a 40-byte GRH area, from the sender's QPN.
func TestConformanceUD(t *testing.T) {
	a, b := conformanceEnds(t)
	cfg := conformanceConfig(t, a.ctx)
	const qkey = 0x11111111
	for _, e := range []*tEnd{a, b} {
		retypeQP(t, e, verbs.QPTypeUD, nil, &cfg)
		if err := udToRTS(e.qp, qkey, e.psn); err != nil {
			t.Fatal(err)
		}
	}
	ah, err := a.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: verbs.GlobalRoute{DGID: b.gid, SGIDIndex: uint8(cfg.GIDIndex), HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ah.Destroy() })
	const n = 512
	b.postRecv(t, 5, 0, verbs.GRHLen+n)
	fill(a.buf[:n], 4)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, n)},
		AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey})
	a.sendWC(t, 1, verbs.WCSend)
	wc := b.recvWCs(t, 1)[0]
	checkWC(t, wc, 5, verbs.WCSuccess, verbs.WCRecv)
	if wc.ByteLen != verbs.GRHLen+n || wc.SrcQP != a.qp.QPN() || wc.Flags&verbs.WCFlagGRH == 0 {
		t.Fatalf("UD receive: %+v", wc)
	}
	checkBytes(t, "datagram", b.buf[verbs.GRHLen:verbs.GRHLen+n], a.buf[:n])
}

// TestConformanceCQWait: CQ.Wait on a CQ made without a channel returns
// once a completion arrives (not before), leaves it for Poll, and honours
// its context.
func TestConformanceCQWait(t *testing.T) {
	a, b := conformanceEnds(t)
	cfg := conformanceConfig(t, a.ctx)
	cq, err := b.ctx.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := b.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: b.scq, RecvCQ: cq, Cap: cfg.Cap})
	if err != nil {
		cq.Destroy()
		t.Fatal(err)
	}
	b.qp.Destroy()
	b.qp = qp
	t.Cleanup(func() { b.qp.Destroy(); b.qp = nil; cq.Destroy() }) // before b.close
	if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := connectQP(b.qp, b.psn, a.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := cq.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an empty CQ: %v, want the context's deadline", err)
	}
	b.postRecv(t, 7, 0, 64)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- cq.Wait(ctx)
	}()
	time.Sleep(20 * time.Millisecond) // let the Wait sleep first
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	var wc [2]verbs.WC
	n, err := cq.Poll(wc[:])
	if err != nil || n != 1 {
		t.Fatalf("Poll after Wait: %d completions, %v", n, err)
	}
	checkWC(t, wc[0], 7, verbs.WCSuccess, verbs.WCRecv)
}

// TestConformanceRCLists: one PostSend of a WRITE, a SEND gathered from
// three pieces and a READ, all in order; the SEND scattered into a receive
// of two pieces; and an inline SEND, whose data is taken when it is posted.
func TestConformanceRCLists(t *testing.T) {
	a, b := conformancePair(t)
	fill(a.buf[:3000], 5)
	for i := range 900 {
		a.buf[10000+i] = byte(i)
	}
	fill(b.buf[40000:40500], 6)
	if err := b.qp.PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{b.mr.SGE(20000, 500), b.mr.SGE(30000, 1000)}}); err != nil {
		t.Fatal(err)
	}
	a.post(t,
		verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{a.mr.SGE(0, 3000)},
			RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()},
		verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(10000, 300), a.mr.SGE(10300, 1), a.mr.SGE(10301, 599)}},
		verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(50000, 500)}, RemoteAddr: b.mr.Addr() + 40000, RKey: b.mr.RKey()})
	wcs := a.sendWCs(t, 2)
	checkWC(t, wcs[0], 2, verbs.WCSuccess, verbs.WCSend)
	checkWC(t, wcs[1], 3, verbs.WCSuccess, verbs.WCRDMARead)
	checkBytes(t, "written", b.buf[100:3100], a.buf[:3000])
	checkBytes(t, "read", a.buf[50000:50500], b.buf[40000:40500])
	wc := b.recvWCs(t, 1)[0]
	checkWC(t, wc, 1, verbs.WCSuccess, verbs.WCRecv)
	if wc.ByteLen != 900 {
		t.Fatalf("gathered SEND: byte_len %d, want 900", wc.ByteLen)
	}
	checkBytes(t, "scattered, first piece", b.buf[20000:20500], a.buf[10000:10500])
	checkBytes(t, "scattered, second piece", b.buf[30000:30400], a.buf[10500:10900])

	b.postRecv(t, 2, 0, 64)
	fill(a.buf[60000:60040], 8)
	want := bytes.Clone(a.buf[60000:60040])
	a.post(t, verbs.SendWR{ID: 4, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: []verbs.SGE{a.mr.SGE(60000, 40)}})
	fill(a.buf[60000:60040], 9) // the device took the data when it was posted
	a.sendWC(t, 4, verbs.WCSend)
	if wc := b.recvWCs(t, 1)[0]; wc.ByteLen != 40 {
		t.Fatalf("inline SEND: %+v", wc)
	}
	checkBytes(t, "inline SEND", b.buf[:40], want)
}

// TestConformancePostErrors: a chain longer than the send queue stops with
// ErrNoMemory at the first work request that does not fit (the ones before
// it run) unless the device drains the queue meanwhile, and a work request with more SGEs than the QP takes is refused
// with ErrInvalidArgument; the QP keeps working.
func TestConformancePostErrors(t *testing.T) {
	a, b := conformancePair(t)
	attr, _, err := a.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	wrs := make([]verbs.SendWR, 4096)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{a.mr.SGE(i%1000, 1)},
			RemoteAddr: b.mr.Addr() + uint64(i%1000), RKey: b.mr.RKey()}
	}
	// A provider that posts a long chain in pieces, ringing the doorbell
	// after each, may see the device drain the queue as fast as it fills
	// (rxe through rdma-core's C provider does): then all of them fit.
	err = a.qp.PostSend(wrs...)
	var pe *verbs.PostError
	switch {
	case err == nil:
		t.Logf("send queue of %d took all %d: the device drained it while the chain was posted", attr.Cap.MaxSendWR, len(wrs))
	case !errors.As(err, &pe) || !errors.Is(err, verbs.ErrNoMemory) || pe.Index < int(attr.Cap.MaxSendWR):
		t.Fatalf("posting %d WRITEs to a send queue of %d: %v, want a PostError wrapping ErrNoMemory at an index in [%d, %d)",
			len(wrs), attr.Cap.MaxSendWR, err, attr.Cap.MaxSendWR, len(wrs))
	default:
		t.Logf("send queue of %d took %d of %d", attr.Cap.MaxSendWR, pe.Index, len(wrs))
	}

	sgl := make([]verbs.SGE, attr.Cap.MaxSendSGE+1)
	for i := range sgl {
		sgl[i] = a.mr.SGE(i, 1)
	}
	err = a.qp.PostSend(verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGL: sgl})
	if !errors.As(err, &pe) || !errors.Is(err, verbs.ErrInvalidArgument) || pe.Index != 0 {
		t.Fatalf("a SEND of %d SGEs on a QP of %d: %v, want ErrInvalidArgument at index 0", len(sgl), attr.Cap.MaxSendSGE, err)
	}

	// The queue drains (the WRITEs were unsignaled): a signaled WRITE
	// posted once there is room completes, after all of them.
	deadline := time.Now().Add(wcTimeout)
	fill(a.buf[2000:2100], 3)
	last := verbs.SendWR{ID: 99, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(2000, 100)},
		RemoteAddr: b.mr.Addr() + 2000, RKey: b.mr.RKey()}
	for {
		err := a.qp.PostSend(last)
		if err == nil {
			break
		}
		if !errors.Is(err, verbs.ErrNoMemory) || time.Now().After(deadline) {
			t.Fatalf("posting after the queue was full: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	a.sendWC(t, 99, verbs.WCRDMAWrite)
	checkBytes(t, "written", b.buf[2000:2100], a.buf[2000:2100])
}

// TestConformanceReqNotify: the arming rule every device follows (Linux
// rxe and NICs, and so the soft device): a completion queued before
// ReqNotify raises no event; the next one added after it does.
func TestConformanceReqNotify(t *testing.T) {
	c := testdev.Conformance(t)
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
	first := flushedRecvQP(t, pd, cq)
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
	second := flushedRecvQP(t, pd, cq)
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
