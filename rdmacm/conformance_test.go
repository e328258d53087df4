package rdmacm_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// The conformance tests (TestConformance*) run the connection manager on
// the device RDMA_GO_TEST_DEVICE names (a kernel device, through the
// kernel's rdma_cm) or, unset, on a soft device (its in-band CM):
//
//	go test -c -o rdmacm.test ./rdmacm
//	RDMA_GO_TEST_DEVICE=rxe0 ./rdmacm.test -test.run Conformance -test.v
//
// Listener and client are ids of one process on the device's address.

// conformanceAddr returns the address of the conformance device, which
// stays open until the test ends.
func conformanceAddr(t *testing.T) netip.Addr {
	t.Helper()
	return testdev.Conformance(t).Device().Addr()
}

// conformanceListen listens on addr (an ephemeral port) in port space ps.
func conformanceListen(t *testing.T, addr netip.Addr, ps rdmacm.PortSpace) (*rdmacm.EventChannel, *rdmacm.ID) {
	t.Helper()
	ch, err := rdmacm.CreateEventChannel()
	must(t, err)
	lid, err := rdmacm.CreateID(ch, nil, ps)
	must(t, err)
	must(t, lid.BindAddr(netip.AddrPortFrom(addr, 0)))
	must(t, lid.Listen(0))
	t.Cleanup(func() { lid.Destroy(); ch.Destroy() })
	if lid.SrcPort() == 0 {
		t.Fatal("listener bound port 0")
	}
	return ch, lid
}

// conformanceDial resolves and connects a client id with a QP to dst.
func conformanceDial(t *testing.T, dst netip.AddrPort, ps rdmacm.PortSpace, p *rdmacm.ConnParam) (*rdmacm.EventChannel, *rdmacm.ID) {
	t.Helper()
	ctx := tctx(t)
	ch, err := rdmacm.CreateEventChannel()
	must(t, err)
	id, err := rdmacm.CreateID(ch, nil, ps)
	must(t, err)
	t.Cleanup(func() { id.DestroyQP(); id.Destroy(); ch.Destroy() })
	must(t, id.ResolveAddr(ctx, netip.AddrPort{}, dst, 2*time.Second))
	next(t, ch, rdmacm.EventAddrResolved)
	if id.Verbs() == nil || id.DstAddr() != dst {
		t.Fatalf("resolved: device %v, destination %s", id.Verbs(), id.DstAddr())
	}
	must(t, id.ResolveRoute(ctx, 2*time.Second))
	next(t, ch, rdmacm.EventRouteResolved)
	must(t, id.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	must(t, id.Connect(ctx, p))
	return ch, id
}

// TestConformanceCMConnect: CONNECT_REQUEST with the client's private
// data, ESTABLISHED on both sides with the server's, a SEND each way over
// the QPs the CM connected, then DISCONNECTED on both.
func TestConformanceCMConnect(t *testing.T) {
	addr := conformanceAddr(t)
	sch, lid := conformanceListen(t, addr, rdmacm.PSTCP)
	cch, cid := conformanceDial(t, netip.AddrPortFrom(addr, lid.SrcPort()), rdmacm.PSTCP,
		&rdmacm.ConnParam{PrivateData: []byte("hello"), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	req := next(t, sch, rdmacm.EventConnectRequest)
	sid := req.ID
	t.Cleanup(func() { sid.DestroyQP(); sid.Destroy() })
	if !bytes.HasPrefix(req.Conn.PrivateData, []byte("hello")) || req.ListenID != lid {
		t.Fatalf("CONNECT_REQUEST: private data %q, listener %p", req.Conn.PrivateData, req.ListenID)
	}
	must(t, sid.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	sbuf, cbuf := make([]byte, 4096), make([]byte, 4096)
	smr, err := sid.RegMsgs(sbuf)
	must(t, err)
	defer smr.Dereg()
	cmr, err := cid.RegMsgs(cbuf)
	must(t, err)
	defer cmr.Dereg()
	must(t, sid.PostRecv(1, sbuf[:100], smr))
	must(t, cid.PostRecv(2, cbuf[2048:2148], cmr))
	must(t, sid.Accept(tctx(t), &rdmacm.ConnParam{PrivateData: []byte("welcome"), ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}))
	est := next(t, cch, rdmacm.EventEstablished)
	next(t, sch, rdmacm.EventEstablished)
	if !bytes.HasPrefix(est.Conn.PrivateData, []byte("welcome")) {
		t.Fatalf("client's ESTABLISHED: private data %q", est.Conn.PrivateData)
	}
	if cid.QP().State() != verbs.QPStateRTS || sid.QP().State() != verbs.QPStateRTS {
		t.Fatalf("QPs in %v and %v, want RTS", cid.QP().State(), sid.QP().State())
	}
	copy(cbuf, "ping")
	must(t, cid.PostSend(3, cbuf[:4], cmr, verbs.SendSignaled))
	if wc := waitWC(t, sid.RecvCQ()); wc.Status != verbs.WCSuccess || wc.ByteLen != 4 || string(sbuf[:4]) != "ping" {
		t.Fatalf("server receive: %+v %q", wc, sbuf[:4])
	}
	copy(sbuf[1000:], "pong")
	must(t, sid.PostSend(4, sbuf[1000:1004], smr, verbs.SendSignaled))
	if wc := waitWC(t, cid.RecvCQ()); wc.Status != verbs.WCSuccess || string(cbuf[2048:2052]) != "pong" {
		t.Fatalf("client receive: %+v %q", wc, cbuf[2048:2052])
	}
	// The DREQ makes the server's DISCONNECTED; its Disconnect answers
	// with the DREP, which makes the client's.
	must(t, cid.Disconnect())
	next(t, sch, rdmacm.EventDisconnected)
	must(t, sid.Disconnect())
	next(t, cch, rdmacm.EventDisconnected)
}

// TestConformanceCMReject: a refused request reaches the client as
// REJECTED, reason 28 (consumer defined), with the server's private data.
func TestConformanceCMReject(t *testing.T) {
	addr := conformanceAddr(t)
	sch, lid := conformanceListen(t, addr, rdmacm.PSTCP)
	cch, cid := conformanceDial(t, netip.AddrPortFrom(addr, lid.SrcPort()), rdmacm.PSTCP, nil)
	req := next(t, sch, rdmacm.EventConnectRequest)
	must(t, req.ID.Reject([]byte("go away")))
	req.ID.Destroy()
	ev := next(t, cch, rdmacm.EventRejected)
	if ev.Status != mad.RejConsumerDefined || !bytes.HasPrefix(ev.Conn.PrivateData, []byte("go away")) {
		t.Fatalf("REJECTED status %d, private data %q", ev.Status, ev.Conn.PrivateData)
	}
	if st := cid.QP().State(); st != verbs.QPStateErr {
		t.Fatalf("client QP in %v after the reject, want ERR", st)
	}
}

// TestConformanceCMNoListener: a request for a port nobody listens on is
// REJECTED with reason 8 (invalid service ID).
func TestConformanceCMNoListener(t *testing.T) {
	addr := conformanceAddr(t)
	_, lid := conformanceListen(t, addr, rdmacm.PSTCP) // a port that was listened on, then is not
	port := lid.SrcPort()
	lid.Destroy()
	cch, _ := conformanceDial(t, netip.AddrPortFrom(addr, port), rdmacm.PSTCP, nil)
	if ev := next(t, cch, rdmacm.EventRejected); ev.Status != mad.RejInvalidServiceID {
		t.Fatalf("REJECTED status %d, want %d", ev.Status, mad.RejInvalidServiceID)
	}
}

// TestConformanceCMUD: a UD id resolves the server's QPN and Q_Key
// (SIDR) and a datagram goes through the address handle ESTABLISHED gave.
func TestConformanceCMUD(t *testing.T) {
	addr := conformanceAddr(t)
	sch, lid := conformanceListen(t, addr, rdmacm.PSUDP)
	cch, cid := conformanceDial(t, netip.AddrPortFrom(addr, lid.SrcPort()), rdmacm.PSUDP, nil)
	req := next(t, sch, rdmacm.EventConnectRequest)
	sid := req.ID
	t.Cleanup(func() { sid.DestroyQP(); sid.Destroy() })
	must(t, sid.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	sbuf := make([]byte, 4096)
	smr, err := sid.RegMsgs(sbuf)
	must(t, err)
	defer smr.Dereg()
	must(t, sid.PostRecv(1, sbuf[:verbs.GRHLen+64], smr))
	must(t, sid.Accept(tctx(t), nil))
	est := next(t, cch, rdmacm.EventEstablished)
	if est.UD.QPNum != sid.QP().QPN() || est.UD.QKey != rdmacm.UDPQKey {
		t.Fatalf("ESTABLISHED: QPN %#x (want %#x), Q_Key %#x", est.UD.QPNum, sid.QP().QPN(), est.UD.QKey)
	}
	ah, err := cid.PD().CreateAH(est.UD.AHAttr)
	must(t, err)
	defer ah.Destroy()
	cbuf := make([]byte, 64)
	cmr, err := cid.RegMsgs(cbuf)
	must(t, err)
	defer cmr.Dereg()
	copy(cbuf, "datagram")
	must(t, cid.PostUDSend(2, cbuf[:8], cmr, verbs.SendSignaled, ah, est.UD.QPNum))
	wc := waitWC(t, sid.RecvCQ())
	if wc.Status != verbs.WCSuccess || wc.ByteLen != verbs.GRHLen+8 || string(sbuf[verbs.GRHLen:verbs.GRHLen+8]) != "datagram" {
		t.Fatalf("server receive: %+v %q", wc, sbuf[verbs.GRHLen:verbs.GRHLen+8])
	}
}

// TestConformanceCMDial: the Go API's Listen, Accept and Dial give
// connected QPs that carry a SEND each way, and a Close the peer sees.
func TestConformanceCMDial(t *testing.T) {
	addr := conformanceAddr(t)
	l, err := rdmacm.Listen(netip.AddrPortFrom(addr, 0).String(), nil)
	must(t, err)
	defer l.Close()
	c, s := dialAccept(t, l, &rdmacm.Options{Source: addr})
	exchangeAndClose(t, c, s)
}
