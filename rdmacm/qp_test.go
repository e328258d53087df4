package rdmacm_test

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// TestQPAttributes: after the handshake both QPs carry the attributes of
// docs/spec/cm-mad.md §3.7 — each other's QPN, the PSNs exchanged, the path MTU,
// retry counts, the ACK timeout (17 from rxe's ACK delay 15 and packet
// life time 16), RDMA READ depths — and InitQPAttr gives the same.
func TestQPAttributes(t *testing.T) {
	p := newPair(t, 0)
	cid := p.dial(nil, false)
	req := next(t, p.sch, rdmacm.EventConnectRequest)
	sid := req.ID
	must(t, sid.CreateQP(nil, nil))
	defer func() { sid.DestroyQP(); sid.Destroy() }()
	must(t, sid.Accept(tctx(t), &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 6}))
	next(t, p.cch, rdmacm.EventEstablished)
	next(t, p.sch, rdmacm.EventEstablished)
	ca, _, err := cid.QP().Query()
	must(t, err)
	sa, _, err := sid.QP().Query()
	must(t, err)
	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("client dest QPN", ca.DestQPN, sid.QP().QPN())
	check("server dest QPN", sa.DestQPN, cid.QP().QPN())
	check("client state", ca.State, verbs.QPStateRTS)
	check("server state", sa.State, verbs.QPStateRTS)
	check("client MTU", ca.PathMTU, verbs.MTU4096) // loopback devices: 4096
	check("server MTU", sa.PathMTU, verbs.MTU4096)
	check("client timeout", ca.Timeout, uint8(17))
	check("server timeout", sa.Timeout, uint8(17))
	check("client retry", ca.RetryCnt, uint8(7))
	check("server retry", sa.RetryCnt, uint8(7))
	check("client RNR retry (from the REP)", ca.RNRRetry, uint8(6))
	check("server RNR retry (from the REQ)", sa.RNRRetry, uint8(7))
	check("client max_rd_atomic", ca.MaxRDAtomic, uint8(1))
	check("server max_dest_rd_atomic", sa.MaxDestRDAtomic, uint8(1))
	check("client AV", ca.AH.GRH.DGID.IP(), p.srv)
	check("server AV", sa.AH.GRH.DGID.IP(), p.cli)
	check("access", ca.AccessFlags&verbs.AccessRemoteRead != 0, true)
	for _, st := range []verbs.QPState{verbs.QPStateInit, verbs.QPStateRTR, verbs.QPStateRTS} {
		a, mask, err := cid.InitQPAttr(st)
		must(t, err)
		if mask&verbs.QPAttrState == 0 || a.State != st {
			t.Fatalf("InitQPAttr(%v): %v %v", st, a.State, mask)
		}
		if st == verbs.QPStateRTR && (a.DestQPN != ca.DestQPN || a.RQPSN != ca.RQPSN || a.PathMTU != ca.PathMTU) {
			t.Fatalf("InitQPAttr(RTR) %+v vs %+v", a, ca)
		}
		if st == verbs.QPStateRTS && (a.SQPSN != ca.SQPSN || a.Timeout != ca.Timeout) {
			t.Fatalf("InitQPAttr(RTS) %+v vs %+v", a, ca)
		}
	}
}

// TestConnectError: a REP the client cannot apply (its QP went to ERR)
// gives CONNECT_ERROR on the client and REJECTED 28 on the server, as
// Linux does.
func TestConnectError(t *testing.T) {
	p := newPair(t, 0)
	cid := p.dial(nil, false)
	must(t, cid.QP().Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState))
	req := next(t, p.sch, rdmacm.EventConnectRequest)
	must(t, req.ID.CreateQP(nil, nil))
	defer func() { req.ID.DestroyQP(); req.ID.Destroy() }()
	must(t, req.ID.Accept(tctx(t), nil))
	if ev := next(t, p.cch, rdmacm.EventConnectError); ev.Status >= 0 {
		t.Fatalf("CONNECT_ERROR status %d", ev.Status)
	}
	if ev := next(t, p.sch, rdmacm.EventRejected); ev.Status != mad.RejConsumerDefined {
		t.Fatalf("server REJECTED status %d", ev.Status)
	}
}

// TestAddrError: no device reaches the destination: ADDR_ERROR (and a
// synchronous id's error).
func TestAddrError(t *testing.T) {
	newDevice(t)
	ch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer ch.Destroy()
	id, err := rdmacm.CreateID(ch, nil, rdmacm.PSTCP)
	must(t, err)
	defer id.Destroy()
	must(t, id.ResolveAddr(tctx(t), netip.AddrPort{}, netip.MustParseAddrPort("[::1]:7471"), time.Second))
	if ev := next(t, ch, rdmacm.EventAddrError); ev.Status >= 0 {
		t.Fatalf("ADDR_ERROR status %d", ev.Status)
	}
	if err := id.ResolveRoute(tctx(t), time.Second); err == nil {
		t.Fatal("ResolveRoute after ADDR_ERROR")
	}
	sid, err := rdmacm.CreateID(nil, nil, rdmacm.PSTCP)
	must(t, err)
	defer sid.Destroy()
	if err := sid.ResolveAddr(tctx(t), netip.AddrPort{}, netip.MustParseAddrPort("[::1]:7471"), time.Second); err == nil {
		t.Fatal("synchronous ResolveAddr to an unreachable address succeeded")
	}
	if _, err := rdmacm.CreateID(nil, nil, rdmacm.PSIPoIB); err == nil || !errorsIs(err, syscall.EINVAL) {
		t.Fatalf("RDMA_PS_IPOIB: %v", err)
	}
}
