package ibcm_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/link/memlink"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/gsi/gsisim"
)

var (
	ipA, ipB = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
)

const (
	guidA, guidB = 0xA0A0, 0xB0B0
	service      = 0x1061D2F
)

// world is two CM nodes on a simulated network.
type world struct {
	t      *testing.T
	s      *gsisim.Sim
	a, b   *gsisim.Node
	log    []string // events, as "side:TYPE"
	sent   []string // MADs sent, as "A>B REQ"
	listen *ibcm.Listener
}

func newWorld(t *testing.T, f memlink.Faults) *world {
	w := &world{t: t, s: gsisim.New(1, f)}
	w.a, w.b = w.s.Add(ipA, guidA), w.s.Add(ipB, guidB)
	w.s.Trace = func(_ time.Time, from, to netip.Addr, m mad.MAD) {
		w.sent = append(w.sent, fmt.Sprintf("%s>%s %s", side(from), side(to), mad.CMAttrName(m.AttrID())))
	}
	return w
}

func side(a netip.Addr) string {
	if a == ipA {
		return "A"
	}
	return "B"
}

// record returns a handler that logs events as "name:TYPE" and then runs f.
func (w *world) record(name string, f func(c *ibcm.Conn, ev *ibcm.Event) error) ibcm.Handler {
	return func(c *ibcm.Conn, ev *ibcm.Event) error {
		w.log = append(w.log, name+":"+ev.Type.String())
		if f != nil {
			return f(c, ev)
		}
		return nil
	}
}

func (w *world) run(d time.Duration) { w.s.Run(d, 100000, nil) }

func (w *world) expect(what string, got []string, want ...string) {
	w.t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		w.t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func params(qpn uint32) *ibcm.ConnectParams {
	return &ibcm.ConnectParams{
		Path:      ibcm.Path{Local: ipA, Remote: ipB, HopLimit: 64, MTU: 3, PacketLifeTime: 16},
		ServiceID: service, QPN: qpn, StartingPSN: 1, ResponderResources: 1, InitiatorDepth: 1,
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, RetryCount: 7, RNRRetryCount: 7,
		MaxCMRetries: 3, LocalACKDelay: 15,
	}
}

var accept = &ibcm.AcceptParams{QPN: 0x22, StartingPSN: 2, ResponderResources: 1, InitiatorDepth: 1, TargetACKDelay: 15, RNRRetryCount: 7}

// serve listens on B: accept every REQ, answer every DREQ.
func (w *world) serve(onREQ func(c *ibcm.Conn, ev *ibcm.Event) error) {
	if onREQ == nil {
		onREQ = func(c *ibcm.Conn, ev *ibcm.Event) error { return c.Accept(accept) }
	}
	l, err := w.b.Port.CM().Listen(service, w.record("B", func(c *ibcm.Conn, ev *ibcm.Event) error {
		switch ev.Type {
		case ibcm.EventREQReceived:
			return onREQ(c, ev)
		case ibcm.EventDREQReceived:
			return c.SendDREP(nil)
		}
		return nil
	}))
	if err != nil {
		w.t.Fatal(err)
	}
	w.listen = l
}

// client handles the active side: RTU on REP, DREP on DREQ.
func (w *world) client() ibcm.Handler {
	return w.record("A", func(c *ibcm.Conn, ev *ibcm.Event) error {
		switch ev.Type {
		case ibcm.EventREPReceived:
			return c.SendRTU(nil)
		case ibcm.EventDREQReceived:
			return c.SendDREP(nil)
		}
		return nil
	})
}

// TestConnectDisconnect: REQ, REP, RTU, DREQ, DREP, TimeWait on both
// sides, and the tables empty once both users destroy their ids.
func TestConnectDisconnect(t *testing.T) {
	w := newWorld(t, memlink.Faults{Delay: time.Millisecond})
	var pconn *ibcm.Conn
	w.serve(func(c *ibcm.Conn, ev *ibcm.Event) error {
		pconn = c
		r := mad.REQ(ev.MAD)
		if ev.Listener != w.listen || r.LocalQPN() != 0x11 || ev.From.Remote != ipA || c.RemoteID() != r.LocalCommID() {
			t.Errorf("REQ_RECEIVED %+v", ev)
		}
		return c.Accept(accept)
	})
	c, err := w.a.Port.CM().Connect(params(0x11), w.client())
	if err != nil {
		t.Fatal(err)
	}
	w.run(time.Second)
	w.expect("events", w.log, "B:REQ_RECEIVED", "A:REP_RECEIVED", "B:RTU_RECEIVED")
	w.expect("wire", w.sent, "A>B REQ", "B>A REP", "A>B RTU")
	if c.State() != ibcm.StateEstablished || pconn.State() != ibcm.StateEstablished || c.RemoteQPN() != 0x22 || pconn.RemoteQPN() != 0x11 {
		t.Fatalf("states %v %v", c.State(), pconn.State())
	}
	if err := c.Disconnect(nil); err != nil {
		t.Fatal(err)
	}
	w.run(5 * time.Second)
	w.expect("events", w.log[3:], "B:DREQ_RECEIVED", "A:DREP_RECEIVED", "B:TIMEWAIT_EXIT", "A:TIMEWAIT_EXIT")
	w.expect("wire", w.sent[3:], "A>B DREQ", "B>A DREP")
	c.Destroy()
	pconn.Destroy()
	if w.a.Port.CM().Conns() != 0 || w.b.Port.CM().Conns() != 0 {
		t.Fatalf("conns left: %d %d", w.a.Port.CM().Conns(), w.b.Port.CM().Conns())
	}
	// A DREQ for the forgotten connection still gets its DREP.
	d := mad.NewCM(mad.AttrDREQ, 77)
	mad.DREQ(d).SetLocalCommID(c.LocalID())
	mad.DREQ(d).SetRemoteCommID(pconn.LocalID())
	if err := w.a.Port.SendMAD(mad.Address{Remote: ipB, QPN: 1}, d); err != nil {
		t.Fatal(err)
	}
	w.run(time.Second)
	w.expect("wire", w.sent[5:], "A>B DREQ", "B>A DREP")
	if w.b.Port.CM().Stats().DREPUnknown.Load() != 1 {
		t.Fatal("DREPUnknown not counted")
	}
}

// TestDestroyReleasesUser: a destroyed connection lives on through
// TimeWait, but without its handler, and so without what the handler
// reaches (rdmacm's id, QP and queues): at thousands of connections a
// second, two seconds of TimeWait would otherwise hold every closed
// connection's objects.
func TestDestroyReleasesUser(t *testing.T) {
	w := newWorld(t, memlink.Faults{Delay: time.Millisecond})
	w.serve(nil)
	// The user's state, reachable only through the handler.
	userState := func() (ibcm.Handler, weak.Pointer[[4096]byte]) {
		state := new([4096]byte)
		h := w.client()
		return func(c *ibcm.Conn, ev *ibcm.Event) error {
			state[0]++
			return h(c, ev)
		}, weak.Make(state)
	}
	h, state := userState()
	c, err := w.a.Port.CM().Connect(params(0x11), h)
	if err != nil {
		t.Fatal(err)
	}
	h = nil
	w.run(time.Second)
	if c.State() != ibcm.StateEstablished {
		t.Fatalf("state %v, want ESTABLISHED", c.State())
	}
	c.Destroy() // DREQ, then TimeWait once the DREP is in
	w.run(100 * time.Millisecond)
	if c.State() != ibcm.StateTimeWait || w.a.Port.CM().Conns() != 1 {
		t.Fatalf("state %v with %d connections, want TIMEWAIT with 1", c.State(), w.a.Port.CM().Conns())
	}
	if c.REQ() != nil || c.REP() != nil {
		t.Error("the REQ and REP are kept through TimeWait")
	}
	runtime.GC()
	if state.Value() != nil {
		t.Fatal("a connection in TimeWait still holds its destroyed user's handler")
	}
}

// TestNoListener: Linux's REJ "invalid service ID" (8) to a REQ nobody
// listens for; LocalCommID copied from REQ bytes 28–31, MessageRejected 0.
func TestNoListener(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	var rej mad.REJ
	c, err := w.a.Port.CM().Connect(params(0x11), w.record("A", func(c *ibcm.Conn, ev *ibcm.Event) error {
		rej = mad.REJ(ev.MAD)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	w.run(time.Second)
	w.expect("events", w.log, "A:REJ_RECEIVED")
	if rej.Reason() != mad.RejInvalidServiceID || rej.RemoteCommID() != c.LocalID() || rej.LocalCommID() != 0 ||
		rej.MessageRejected() != mad.MsgREQ || rej.MAD().TID() != c.REQ().TID() || c.State() != ibcm.StateIdle {
		t.Fatalf("REJ % x, state %v", rej[:40], c.State())
	}
}

// TestReject: the passive user refuses with private data.
func TestReject(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	w.serve(func(c *ibcm.Conn, ev *ibcm.Event) error {
		return c.Reject(mad.RejConsumerDefined, nil, []byte("go away"))
	})
	var rej mad.REJ
	w.a.Port.CM().Connect(params(0x11), w.record("A", func(c *ibcm.Conn, ev *ibcm.Event) error {
		rej = mad.REJ(ev.MAD)
		return nil
	}))
	w.run(time.Second)
	w.expect("events", w.log, "B:REQ_RECEIVED", "A:REJ_RECEIVED")
	if rej.Reason() != 28 || string(rej.PrivateData()[:7]) != "go away" {
		t.Fatalf("REJ % x", rej[:40])
	}
}

// TestPeerVanishes: no answer → the REQ is sent 1 + MaxCMRetries times,
// 4608 ms apart, then REQ_ERROR; a passive side whose REP is never
// answered: REP_ERROR after the REQ's MaxCMRetries re-sends.
func TestPeerVanishes(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	w.b.SetDown(true)
	start := w.s.Clock.Now()
	var at time.Time
	w.a.Port.CM().Connect(params(0x11), w.record("A", func(c *ibcm.Conn, ev *ibcm.Event) error { at = w.s.Clock.Now(); return nil }))
	w.run(time.Minute)
	w.expect("events", w.log, "A:REQ_ERROR")
	w.expect("wire", w.sent, "A>B REQ", "A>B REQ", "A>B REQ", "A>B REQ")
	if d := at.Sub(start); d != 4*4608*time.Millisecond {
		t.Fatalf("REQ_ERROR after %v", d)
	}

	w = newWorld(t, memlink.Faults{})
	w.serve(nil)
	w.s.Drop = func(from, to netip.Addr, m mad.MAD) bool { return from == ipA && m.AttrID() != mad.AttrREQ }
	w.a.Port.CM().Connect(params(0x11), w.client())
	w.run(time.Minute)
	w.expect("events", w.log, "B:REQ_RECEIVED", "A:REP_RECEIVED", "B:REP_ERROR")
	w.expect("wire", w.sent, "A>B REQ", "B>A REP", "B>A REP", "B>A REP", "B>A REP")
}

// TestDuplicates: a REQ repeated while the server decides gets an MRA
// (which stretches the client's wait); a lost RTU is repaired by the REP
// retransmission, answered by a re-sent RTU; duplicate REPs get RTUs.
func TestDuplicates(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	var pending *ibcm.Conn
	w.serve(func(c *ibcm.Conn, ev *ibcm.Event) error { pending = c; return nil })
	c, _ := w.a.Port.CM().Connect(params(0x11), w.client())
	w.run(5 * time.Second) // REQ, then its first retransmission at 4.608 s
	w.expect("wire", w.sent, "A>B REQ", "A>B REQ", "B>A MRA")
	w.expect("events", w.log, "B:REQ_RECEIVED", "A:MRA_RECEIVED")
	if c.State() != ibcm.StateMRAREQRcvd {
		t.Fatalf("client %v", c.State())
	}
	// Lose the first RTU.
	lost := false
	w.s.Drop = func(from, to netip.Addr, m mad.MAD) bool {
		if m.AttrID() == mad.AttrRTU && !lost {
			lost = true
			return true
		}
		return false
	}
	if err := pending.Accept(accept); err != nil {
		t.Fatal(err)
	}
	w.run(10 * time.Second)
	w.expect("wire", w.sent[3:], "B>A REP", "B>A REP", "A>B RTU")
	w.expect("events", w.log[2:], "A:REP_RECEIVED", "B:RTU_RECEIVED")
	if pending.State() != ibcm.StateEstablished {
		t.Fatalf("server %v", pending.State())
	}
}

// TestDestroyConnecting: a client that gives up sends REJ "timeout" with
// its GUID as ARI; the server finds its connection by that and hears
// REJ_RECEIVED.
func TestDestroyConnecting(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	w.serve(func(c *ibcm.Conn, ev *ibcm.Event) error { return nil })
	c, _ := w.a.Port.CM().Connect(params(0x11), w.client())
	w.run(time.Second)
	c.Destroy()
	w.run(time.Second)
	w.expect("events", w.log, "B:REQ_RECEIVED", "B:REJ_RECEIVED")
	w.expect("wire", w.sent, "A>B REQ", "A>B REJ")
}

// TestDrop: a REQ dropped by the listener (backlog full) gets no answer;
// the client's retransmission is taken as a new request.
func TestDrop(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	n := 0
	w.serve(func(c *ibcm.Conn, ev *ibcm.Event) error {
		if n++; n == 1 {
			return ibcm.ErrDrop
		}
		return c.Accept(accept)
	})
	c, _ := w.a.Port.CM().Connect(params(0x11), w.client())
	w.run(10 * time.Second)
	w.expect("wire", w.sent, "A>B REQ", "A>B REQ", "B>A REP", "A>B RTU")
	if c.State() != ibcm.StateEstablished {
		t.Fatalf("client %v", c.State())
	}
}

// TestStale: a REQ from a (GUID, QPN) that B still has connected is
// rejected with reason 10, and B disconnects the old connection.
func TestStale(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	w.serve(nil)
	old, _ := w.a.Port.CM().Connect(params(0x11), w.client())
	w.run(time.Second)
	if old.State() != ibcm.StateEstablished {
		t.Fatal("not connected")
	}
	var reason uint16
	w.log = nil
	w.sent = nil
	w.a.Port.CM().Connect(params(0x11), w.record("A2", func(c *ibcm.Conn, ev *ibcm.Event) error {
		if ev.Type == ibcm.EventREJReceived {
			reason = mad.REJ(ev.MAD).Reason()
		}
		return nil
	}))
	w.run(time.Second)
	if reason != mad.RejStaleConn {
		t.Fatalf("reason %d; events %v", reason, w.log)
	}
	w.expect("wire", w.sent, "A>B REQ", "B>A REJ", "B>A DREQ", "A>B DREP")
}

// TestSIDR: resolution, "service ID not supported" without a listener,
// duplicates dropped while one is being answered.
func TestSIDR(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	sp := &ibcm.SIDRParams{To: ipB, ServiceID: 0x1111234, Timeout: 20, MaxCMRetries: 3, PrivateData: []byte("hello")}
	var rep mad.SIDRREP
	h := w.record("A", func(c *ibcm.Conn, ev *ibcm.Event) error {
		if ev.MAD != nil {
			rep = mad.SIDRREP(ev.MAD)
		}
		return nil
	})
	w.a.Port.CM().SIDRRequest(sp, h)
	w.run(time.Second)
	if rep == nil || rep.Status() != mad.SIDRUnsupported || rep.ServiceID() != 0x1111234 {
		t.Fatalf("no-listener SIDR_REP: %v", w.log)
	}
	var req *ibcm.Conn
	w.b.Port.CM().Listen(0x1111234, w.record("B", func(c *ibcm.Conn, ev *ibcm.Event) error {
		if string(mad.SIDRREQ(ev.MAD).PrivateData()[:5]) != "hello" {
			t.Errorf("SIDR_REQ private data")
		}
		req = c
		return nil
	}))
	w.log, w.sent = nil, nil
	c, _ := w.a.Port.CM().SIDRRequest(sp, h)
	w.run(5 * time.Second) // the retransmission is dropped as a duplicate
	w.expect("wire", w.sent, "A>B SIDR_REQ", "A>B SIDR_REQ")
	if w.b.Port.CM().Stats().DuplicateSIDRREQ.Load() != 1 {
		t.Fatal("duplicate SIDR_REQ not dropped")
	}
	if err := req.SIDRReply(&ibcm.SIDRReply{Status: mad.SIDRAccept, QPN: 0x33, QKey: 0x01234567, PrivateData: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	w.run(time.Second)
	w.expect("events", w.log, "B:SIDR_REQ_RECEIVED", "A:SIDR_REP_RECEIVED")
	if rep.Status() != 0 || rep.QPN() != 0x33 || rep.QKey() != 0x01234567 || rep.RequestID() != c.LocalID() || string(rep.PrivateData()[:2]) != "hi" {
		t.Fatalf("SIDR_REP % x", rep[:64])
	}
}

// TestUnknownAttributes: LAP, APR and unknown CM attributes are dropped.
func TestUnknownAttributes(t *testing.T) {
	w := newWorld(t, memlink.Faults{})
	for _, a := range []uint16{mad.AttrLAP, mad.AttrAPR, 0x1B, 0x99} {
		w.a.Port.SendMAD(mad.Address{Remote: ipB, QPN: 1}, mad.NewCM(a, 1))
	}
	w.run(time.Second)
	if len(w.sent) != 4 || w.b.Port.CM().Stats().Ignored.Load() != 4 {
		t.Fatalf("sent %v", w.sent)
	}
}
