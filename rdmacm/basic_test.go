package rdmacm_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// newDevice opens a soft device on a loopback address that no other test
// process uses (see internal/testdev) and returns its address; the device
// stays open until the test ends.
func newDevice(t testing.TB) netip.Addr {
	t.Helper()
	return testdev.Device(t, "cm").Device().Addr()
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// next returns the next event of ch, which must be of type want.
func next(t testing.TB, ch *rdmacm.EventChannel, want rdmacm.EventType) *rdmacm.Event {
	t.Helper()
	ev, err := ch.GetCMEvent(tctx(t))
	if err != nil {
		t.Fatalf("waiting for %v: %v", want, err)
	}
	if ev.Type != want {
		t.Fatalf("got %v (status %d), want %v", ev.Type, ev.Status, want)
	}
	return ev
}

// TestConnectAcceptAsync: the librdmacm event flow of rping with private
// data both ways, a SEND over the connected QPs, and a disconnect.
func TestConnectAcceptAsync(t *testing.T) {
	srvAddr, cliAddr := newDevice(t), newDevice(t)
	ctx := tctx(t)
	sch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer sch.Destroy()
	lid, err := rdmacm.CreateID(sch, "listener", rdmacm.PSTCP)
	must(t, err)
	must(t, lid.BindAddr(netip.AddrPortFrom(srvAddr, 0)))
	must(t, lid.Listen(4))
	port := lid.SrcPort()

	cch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer cch.Destroy()
	cid, err := rdmacm.CreateID(cch, "client", rdmacm.PSTCP)
	must(t, err)
	must(t, cid.ResolveAddr(ctx, netip.AddrPortFrom(cliAddr, 0), netip.AddrPortFrom(srvAddr, port), time.Second))
	next(t, cch, rdmacm.EventAddrResolved)
	must(t, cid.ResolveRoute(ctx, time.Second))
	next(t, cch, rdmacm.EventRouteResolved)
	if cid.Verbs() == nil || cid.SrcAddr().Addr() != cliAddr {
		t.Fatalf("client bound to %v", cid.SrcAddr())
	}
	must(t, cid.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	must(t, cid.Connect(ctx, &rdmacm.ConnParam{PrivateData: []byte("hello server"), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}))

	req := next(t, sch, rdmacm.EventConnectRequest)
	if req.ListenID != lid || req.ID.Context() != "listener" || len(req.Conn.PrivateData) != 56 ||
		!bytes.HasPrefix(req.Conn.PrivateData, []byte("hello server")) || req.Conn.QPNum != cid.QP().QPN() ||
		req.Conn.ResponderResources != 1 || req.Conn.RetryCount != 7 {
		t.Fatalf("CONNECT_REQUEST %+v", req.Conn)
	}
	sid := req.ID
	if sid.DstAddr() != cid.SrcAddr() || sid.SrcAddr() != netip.AddrPortFrom(srvAddr, port) {
		t.Fatalf("server id %v → %v, client %v", sid.SrcAddr(), sid.DstAddr(), cid.SrcAddr())
	}
	must(t, sid.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	// Post a receive before accepting.
	buf := make([]byte, 64)
	mr, err := sid.PD().RegMR(buf, verbs.AccessLocalWrite)
	must(t, err)
	defer mr.Dereg()
	must(t, sid.QP().PostRecv(verbs.RecvWR{ID: 9, SGL: []verbs.SGE{mr.SGE(0, 64)}}))
	must(t, sid.Accept(ctx, &rdmacm.ConnParam{PrivateData: []byte("welcome"), ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}))

	est := next(t, cch, rdmacm.EventEstablished)
	if len(est.Conn.PrivateData) != 196 || !bytes.HasPrefix(est.Conn.PrivateData, []byte("welcome")) || est.Conn.QPNum != sid.QP().QPN() {
		t.Fatalf("client ESTABLISHED %+v", est.Conn)
	}
	next(t, sch, rdmacm.EventEstablished)
	if cid.QP().State() != verbs.QPStateRTS || sid.QP().State() != verbs.QPStateRTS {
		t.Fatalf("QP states %v %v", cid.QP().State(), sid.QP().State())
	}

	// Data flows over the connected QPs.
	sbuf := []byte("ping over rdma_cm")
	smr, err := cid.PD().RegMR(sbuf, 0)
	must(t, err)
	defer smr.Dereg()
	must(t, cid.QP().PostSend(verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{smr.SGE(0, len(sbuf))}}))
	wc := waitWC(t, sid.RecvCQ())
	if wc.Status != verbs.WCSuccess || !bytes.Equal(buf[:wc.ByteLen], sbuf) {
		t.Fatalf("receive %+v %q", wc, buf[:wc.ByteLen])
	}
	if wc := waitWC(t, cid.SendCQ()); wc.Status != verbs.WCSuccess {
		t.Fatalf("send %+v", wc)
	}

	// Client disconnects: both see DISCONNECTED, then TIMEWAIT_EXIT.
	must(t, cid.Disconnect())
	next(t, sch, rdmacm.EventDisconnected)
	must(t, sid.Disconnect()) // sends the DREP
	next(t, cch, rdmacm.EventDisconnected)
	next(t, sch, rdmacm.EventTimewaitExit)
	next(t, cch, rdmacm.EventTimewaitExit)
	must(t, sid.DestroyQP())
	must(t, cid.DestroyQP())
	must(t, sid.Destroy())
	must(t, cid.Destroy())
	must(t, lid.Destroy())
}

func waitWC(t testing.TB, cq *verbs.CQ) verbs.WC {
	t.Helper()
	var wc [1]verbs.WC
	for {
		n, err := cq.Poll(wc[:])
		must(t, err)
		if n == 1 {
			return wc[0]
		}
		must(t, cq.Wait(tctx(t)))
	}
}

// TestNoListener: a REQ to a port nobody listens on is rejected with
// reason 8, which the client sees as REJECTED, status 8 (and a synchronous
// Connect as ECONNREFUSED).
func TestNoListener(t *testing.T) {
	srvAddr, cliAddr := newDevice(t), newDevice(t)
	ctx := tctx(t)
	ch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer ch.Destroy()
	id, err := rdmacm.CreateID(ch, nil, rdmacm.PSTCP)
	must(t, err)
	defer id.Destroy()
	must(t, id.ResolveAddr(ctx, netip.AddrPortFrom(cliAddr, 0), netip.AddrPortFrom(srvAddr, 7471), time.Second))
	next(t, ch, rdmacm.EventAddrResolved)
	must(t, id.ResolveRoute(ctx, time.Second))
	next(t, ch, rdmacm.EventRouteResolved)
	must(t, id.CreateQP(nil, nil))
	defer id.DestroyQP()
	must(t, id.Connect(ctx, nil))
	ev := next(t, ch, rdmacm.EventRejected)
	if ev.Status != mad.RejInvalidServiceID || len(ev.Conn.PrivateData) != 148 || id.QP().State() != verbs.QPStateErr {
		t.Fatalf("REJECTED status %d, QP %v", ev.Status, id.QP().State())
	}

	sid, err := rdmacm.CreateID(nil, nil, rdmacm.PSTCP)
	must(t, err)
	defer sid.Destroy()
	must(t, sid.ResolveAddr(ctx, netip.AddrPortFrom(cliAddr, 0), netip.AddrPortFrom(srvAddr, 7471), time.Second))
	must(t, sid.ResolveRoute(ctx, time.Second))
	err = sid.Connect(ctx, nil)
	var rej *rdmacm.RejectedError
	if !errors.As(err, &rej) || rej.Reason != 8 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("synchronous connect: %v", err)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// TestMigrateMovesQueuedEvents: an event queued on the old channel and not
// yet taken moves with the id (the kernel's ucma moves them too), so none
// is lost to a Migrate that races the peer (seen: a DISCONNECTED posted
// just before cmatose -m migrated).
func TestMigrateMovesQueuedEvents(t *testing.T) {
	srvAddr, cliAddr := newDevice(t), newDevice(t)
	ctx := tctx(t)
	a, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer a.Destroy()
	b, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer b.Destroy()
	other, err := rdmacm.CreateID(a, nil, rdmacm.PSTCP)
	must(t, err)
	defer other.Destroy()
	id, err := rdmacm.CreateID(a, nil, rdmacm.PSTCP)
	must(t, err)
	defer id.Destroy()
	must(t, other.ResolveAddr(ctx, netip.AddrPortFrom(cliAddr, 0), netip.AddrPortFrom(srvAddr, 7471), time.Second))
	must(t, id.ResolveAddr(ctx, netip.AddrPortFrom(cliAddr, 0), netip.AddrPortFrom(srvAddr, 7471), time.Second))
	must(t, id.Migrate(b))
	if ev := next(t, b, rdmacm.EventAddrResolved); ev.ID != id {
		t.Fatalf("the migrated channel gave an event of %p, want %p", ev.ID, id)
	}
	if ev := next(t, a, rdmacm.EventAddrResolved); ev.ID != other {
		t.Fatalf("the old channel gave an event of %p, want the other id's", ev.ID)
	}
	if ev, ok, _ := a.TryGetCMEvent(); ok {
		t.Fatalf("the old channel kept %v", ev)
	}
}

// TestBindLoopbackNoDevice: binding a loopback address that no device has
// and that the loopback device does not take (it takes the first free one
// of 127.0.0.1–127.0.0.254) fails with ErrAddrNotAvail and says what to
// do; the device it opened to try is closed again.
func TestBindLoopbackNoDevice(t *testing.T) {
	if _, err := verbs.AddLoopbackDevice("rgo-bindtest"); err != nil && !errors.Is(err, verbs.ErrBusy) {
		t.Fatal(err) // ErrBusy: added by an earlier run (-count)
	}
	open := func() map[string]bool {
		ds, err := verbs.Devices()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, d := range ds {
			m[d.Name()] = d.Addr().IsValid()
		}
		return m
	}
	before := open()
	id, err := rdmacm.CreateID(nil, nil, rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer id.Destroy()
	a := netip.AddrPortFrom(testdev.Addr(), 7174) // outside 127.0.0.0/24
	err = id.BindAddr(a)
	if !errors.Is(err, rdmacm.ErrAddrNotAvail) || !strings.Contains(err.Error(), "RDMA_GO_LOOPBACK="+a.Addr().String()) {
		t.Fatalf("BindAddr(%s) = %v; want ErrAddrNotAvail that names RDMA_GO_LOOPBACK", a, err)
	}
	for name, on := range open() {
		if on && !before[name] {
			t.Fatalf("device %s, opened to try the bind, is still open", name)
		}
	}
}
