package rdmacm_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// selfQP is a QP the application made itself on the id's device and took
// to INIT, as rping -q does.
func selfQP(t *testing.T, id *rdmacm.ID) (*verbs.QP, *verbs.CQ, *verbs.PD) {
	t.Helper()
	pd, err := id.Verbs().AllocPD()
	must(t, err)
	cq, err := id.Verbs().CreateCQ(8, nil)
	must(t, err)
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(t, err)
	must(t, qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags))
	t.Cleanup(func() { qp.Destroy(); cq.Destroy(); pd.Dealloc() })
	return qp, cq, pd
}

// toRTS moves qp through INIT, RTR and RTS with InitQPAttr's attributes.
func toRTS(t *testing.T, id *rdmacm.ID, qp *verbs.QP) {
	t.Helper()
	for _, st := range []verbs.QPState{verbs.QPStateInit, verbs.QPStateRTR, verbs.QPStateRTS} {
		a, mask, err := id.InitQPAttr(st)
		must(t, err)
		must(t, qp.Modify(&a, mask))
	}
}

// TestSelfCreatedQPs: the flow of rping -q on both sides. The passive side
// moves its own QP to RTS with InitQPAttr before Accept (the kernel allows
// it in REQ_RCVD; the REP then carries the PSN the QP expects); the active
// side gets CONNECT_RESPONSE, moves its QP, and Establish sends the RTU
// without an ESTABLISHED event of its own, as librdmacm's rdma_establish.
// A SEND then crosses both ways.
func TestSelfCreatedQPs(t *testing.T) {
	p := newPair(t, 0)
	ctx := tctx(t)
	cid, err := rdmacm.CreateID(p.cch, nil, rdmacm.PSTCP)
	must(t, err)
	defer cid.Destroy()
	must(t, cid.ResolveAddr(ctx, netip.AddrPortFrom(p.cli, 0), netip.AddrPortFrom(p.srv, p.port), time.Second))
	next(t, p.cch, rdmacm.EventAddrResolved)
	must(t, cid.ResolveRoute(ctx, time.Second))
	next(t, p.cch, rdmacm.EventRouteResolved)
	cqp, ccq, cpd := selfQP(t, cid)
	param := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	param.QPNum = cqp.QPN()
	must(t, cid.Connect(ctx, &param))

	req := next(t, p.sch, rdmacm.EventConnectRequest)
	sid := req.ID
	defer sid.Destroy()
	sqp, scq, spd := selfQP(t, sid)
	toRTS(t, sid, sqp)
	param.QPNum = sqp.QPN()
	must(t, sid.Accept(ctx, &param))

	resp := next(t, p.cch, rdmacm.EventConnectResponse)
	if resp.Conn.QPNum != sqp.QPN() {
		t.Fatalf("CONNECT_RESPONSE QPN %#x, want %#x", resp.Conn.QPNum, sqp.QPN())
	}
	toRTS(t, cid, cqp)
	must(t, cid.Establish())
	next(t, p.sch, rdmacm.EventEstablished)
	if ev, ok, _ := p.cch.TryGetCMEvent(); ok {
		t.Fatalf("active side got %v after Establish; librdmacm reports nothing", ev.Type)
	}

	send := func(from, to *verbs.QP, fromCQ, toCQ *verbs.CQ, fromPD, toPD *verbs.PD, msg string) {
		t.Helper()
		rbuf := make([]byte, 64)
		rmr, err := toPD.RegMR(rbuf, verbs.AccessLocalWrite)
		must(t, err)
		defer rmr.Dereg()
		must(t, to.PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{rmr.SGE(0, len(rbuf))}}))
		sbuf := []byte(msg)
		smr, err := fromPD.RegMR(sbuf, 0)
		must(t, err)
		defer smr.Dereg()
		must(t, from.PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{smr.SGE(0, len(sbuf))}}))
		if wc := waitWC(t, fromCQ); wc.Status != verbs.WCSuccess {
			t.Fatalf("send: %v", wc.Status)
		}
		wc := waitWC(t, toCQ)
		if wc.Status != verbs.WCSuccess || string(rbuf[:wc.ByteLen]) != msg {
			t.Fatalf("receive: %v %q", wc.Status, rbuf[:wc.ByteLen])
		}
	}
	send(cqp, sqp, ccq, scq, cpd, spd, "ping")
	send(sqp, cqp, scq, ccq, spd, cpd, "pong")
}
