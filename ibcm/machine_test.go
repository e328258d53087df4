package ibcm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/mad"
)

// The connection state machine, tested by tables: every (state, input)
// pair's outcome — next state, MADs sent, events — is pinned; pairs not in
// the table must change nothing (and user calls must return ErrState).

const (
	guidA, guidB = 0x505400FFFE123401, 0x505400FFFE123402
	idA, idB     = 0x8A3C1D27, 0x3E5A7781
	qpnA, qpnB   = 0x11, 0x12
	tidA         = 0x000000028A3C1D27
)

var (
	ipA, ipB = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	t0       = time.Unix(5000, 0)
	fromA    = mad.Address{Remote: ipA, Local: ipB, QPN: 1, QKey: mad.GSIQKey}
	fromB    = mad.Address{Remote: ipB, Local: ipA, QPN: 1, QKey: mad.GSIQKey}
)

func connectParams() *ConnectParams {
	return &ConnectParams{
		Path:      Path{Local: ipA, Remote: ipB, FlowLabel: 0x308EF, HopLimit: 64, MTU: 3, PacketLifeTime: 16},
		ServiceID: 0x1061D2F, QPN: qpnA, StartingPSN: 0x4B1D2E, ResponderResources: 1, InitiatorDepth: 1,
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, RetryCount: 7, RNRRetryCount: 7,
		MaxCMRetries: 2, LocalACKDelay: 15,
	}
}

func acceptParams() *AcceptParams {
	return &AcceptParams{QPN: qpnB, StartingPSN: 0x71C2A0, ResponderResources: 1, InitiatorDepth: 1, TargetACKDelay: 15, RNRRetryCount: 7}
}

// fixture is a machine in a given state and the role it plays.
type fixture struct {
	c       *machine
	passive bool
	peerID  uint32
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func active() *fixture {
	c := &machine{guid: guidA, localID: idA}
	must(c.connect(t0, connectParams(), tidA, &output{}))
	return &fixture{c: c, peerID: idB}
}

func peerREQ() mad.MAD {
	m, err := buildREQ(connectParams(), guidA, idA, tidA)
	must(err)
	return m
}

func passive() *fixture {
	c := &machine{guid: guidB, localID: idB}
	c.initPassive(peerREQ(), fromA, &output{})
	return &fixture{c: c, passive: true, peerID: idA}
}

func peerREP() mad.MAD {
	m, err := buildREP(acceptParams(), guidB, idB, idA, tidA)
	must(err)
	return m
}

// fixtures builds each state along the path Linux takes to it.
var fixtures = map[string]func() *fixture{
	"a/REQ_SENT": active,
	"a/MRA_REQ_RCVD": func() *fixture {
		f := active()
		f.c.onMRA(t0, mra(f, mad.MsgREQ), fromB, &output{})
		return f
	},
	"a/MRA_REP_SENT": func() *fixture {
		f := active()
		f.c.onREP(t0, peerREP(), fromB, &output{})
		return f
	},
	"a/REP_RCVD": func() *fixture {
		f := active()
		f.c.onREP(t0, peerREP(), fromB, &output{})
		f.c.state = StateREPRcvd
		return f
	},
	"a/ESTABLISHED": aEstablished,
	"a/DREQ_SENT": func() *fixture {
		f := aEstablished()
		must(f.c.disconnect(t0, tidA, nil, &output{}))
		return f
	},
	"a/DREQ_RCVD": func() *fixture {
		f := aEstablished()
		f.c.onDREQ(t0, dreq(f, f.c.localQPN), fromB, &output{})
		return f
	},
	"a/TIMEWAIT": func() *fixture {
		f := aEstablished()
		must(f.c.disconnect(t0, tidA, nil, &output{}))
		f.c.onDREP(t0, drep(f), fromB, &output{})
		return f
	},
	"a/IDLE": func() *fixture {
		f := active()
		f.c.onREJ(t0, rej(f, mad.RejConsumerDefined), fromB, &output{})
		return f
	},
	"p/MRA_REQ_SENT": passive,
	"p/REQ_RCVD": func() *fixture {
		f := passive()
		f.c.state = StateREQRcvd
		return f
	},
	"p/REP_SENT": pREPSent,
	"p/MRA_REP_RCVD": func() *fixture {
		f := pREPSent()
		f.c.onMRA(t0, mra(f, mad.MsgREP), fromA, &output{})
		return f
	},
	"p/ESTABLISHED": func() *fixture {
		f := pREPSent()
		f.c.onRTU(rtu(f), fromA, &output{})
		return f
	},
	"s/SIDR_REQ_SENT": func() *fixture {
		c := &machine{guid: guidA, localID: idA}
		must(c.sidrRequest(t0, &SIDRParams{To: ipB, ServiceID: 0x1111234, Timeout: 20, MaxCMRetries: 2}, tidA, &output{}))
		return &fixture{c: c, peerID: idB}
	},
	"s/SIDR_REQ_RCVD": func() *fixture {
		c := &machine{guid: guidB, localID: idB}
		m := mad.NewCM(mad.AttrSIDRREQ, tidA)
		mad.SIDRREQ(m).SetRequestID(idA)
		mad.SIDRREQ(m).SetServiceID(0x1111234)
		c.initSIDR(m, fromA, &output{})
		return &fixture{c: c, passive: true, peerID: idA}
	},
}

func aEstablished() *fixture {
	f := active()
	f.c.onREP(t0, peerREP(), fromB, &output{})
	must(f.c.sendRTU(nil, &output{}))
	return f
}

func pREPSent() *fixture {
	f := passive()
	must(f.c.accept(t0, acceptParams(), &output{}))
	return f
}

func (f *fixture) from() mad.Address {
	if f.passive {
		return fromA
	}
	return fromB
}

func mra(f *fixture, msg uint8) mad.MAD {
	m := mad.NewCM(mad.AttrMRA, tidA)
	a := mad.MRA(m)
	a.SetLocalCommID(f.peerID)
	a.SetRemoteCommID(f.c.localID)
	a.SetMessageMRAed(msg)
	a.SetServiceTimeout(24)
	return m
}

func rej(f *fixture, reason uint16) mad.MAD {
	m := mad.NewCM(mad.AttrREJ, tidA)
	r := mad.REJ(m)
	r.SetLocalCommID(f.peerID)
	r.SetRemoteCommID(f.c.localID)
	r.SetReason(reason)
	return m
}

func dreq(f *fixture, qpn uint32) mad.MAD {
	m := mad.NewCM(mad.AttrDREQ, 0x99)
	d := mad.DREQ(m)
	d.SetLocalCommID(f.peerID)
	d.SetRemoteCommID(f.c.localID)
	d.SetRemoteQPN(qpn)
	return m
}

func drep(f *fixture) mad.MAD {
	m := mad.NewCM(mad.AttrDREP, tidA)
	mad.DREP(m).SetLocalCommID(f.peerID)
	mad.DREP(m).SetRemoteCommID(f.c.localID)
	return m
}

func rtu(f *fixture) mad.MAD {
	m := mad.NewCM(mad.AttrRTU, tidA)
	mad.RTU(m).SetLocalCommID(f.peerID)
	mad.RTU(m).SetRemoteCommID(f.c.localID)
	return m
}

// inputs are applied to a fixture; user calls return their error.
var inputs = map[string]func(f *fixture, o *output) error{
	"REP": func(f *fixture, o *output) error { f.c.onREP(t0, peerREP(), f.from(), o); return nil },
	"RTU": func(f *fixture, o *output) error { f.c.onRTU(rtu(f), f.from(), o); return nil },
	"REJ": func(f *fixture, o *output) error {
		f.c.onREJ(t0, rej(f, mad.RejConsumerDefined), f.from(), o)
		return nil
	},
	"REJ_STALE": func(f *fixture, o *output) error { f.c.onREJ(t0, rej(f, mad.RejStaleConn), f.from(), o); return nil },
	"MRA_REQ":   func(f *fixture, o *output) error { f.c.onMRA(t0, mra(f, mad.MsgREQ), f.from(), o); return nil },
	"MRA_REP":   func(f *fixture, o *output) error { f.c.onMRA(t0, mra(f, mad.MsgREP), f.from(), o); return nil },
	"DREQ":      func(f *fixture, o *output) error { f.c.onDREQ(t0, dreq(f, f.c.localQPN), f.from(), o); return nil },
	"DREQ_QPN":  func(f *fixture, o *output) error { f.c.onDREQ(t0, dreq(f, 0x777), f.from(), o); return nil },
	"DREP":      func(f *fixture, o *output) error { f.c.onDREP(t0, drep(f), f.from(), o); return nil },
	"DUP_REQ":   func(f *fixture, o *output) error { f.c.dupREQ(f.from(), o); return nil },
	"SIDR_REP": func(f *fixture, o *output) error {
		m := mad.NewCM(mad.AttrSIDRREP, tidA)
		mad.SIDRREP(m).SetRequestID(f.c.localID)
		f.c.onSIDRREP(m, f.from(), o)
		return nil
	},
	"TIMER": func(f *fixture, o *output) error {
		if !f.c.deadline.IsZero() {
			f.c.timer(f.c.deadline, o)
		}
		return nil
	},
	"TIMER_LAST": func(f *fixture, o *output) error {
		f.c.left = 0
		if !f.c.deadline.IsZero() {
			f.c.timer(f.c.deadline, o)
		}
		return nil
	},
	"accept":    func(f *fixture, o *output) error { return f.c.accept(t0, acceptParams(), o) },
	"reject":    func(f *fixture, o *output) error { return f.c.reject(t0, 28, nil, []byte("no"), o) },
	"sendRTU":   func(f *fixture, o *output) error { return f.c.sendRTU(nil, o) },
	"establish": func(f *fixture, o *output) error { return f.c.establish(o) },
	"disconnect": func(f *fixture, o *output) error {
		return f.c.disconnect(t0, uint64(0x2)<<32|uint64(f.c.localID), nil, o)
	},
	"sendDREP":  func(f *fixture, o *output) error { return f.c.sendDREP(t0, nil, o) },
	"sidrReply": func(f *fixture, o *output) error { return f.c.sidrReply(&SIDRReply{QPN: 5, QKey: 0x01234567}, o) },
	"destroy":   func(f *fixture, o *output) error { f.c.destroy(t0, tidA, o); return nil },
}

// transitions: "fixture input" → "NEXT_STATE sends events"; sends and events
// are comma-separated message and event names, "-" for none. "ok" in place
// of the state means a user call that succeeds without any effect.
var transitions = map[string]string{
	"a/REQ_SENT REP":        "MRA_REP_SENT - REP_RECEIVED",
	"a/REQ_SENT REJ":        "IDLE - REJ_RECEIVED",
	"a/REQ_SENT REJ_STALE":  "TIMEWAIT - REJ_RECEIVED",
	"a/REQ_SENT MRA_REQ":    "MRA_REQ_RCVD - MRA_RECEIVED",
	"a/REQ_SENT TIMER":      "REQ_SENT REQ -",
	"a/REQ_SENT TIMER_LAST": "IDLE - REQ_ERROR",
	"a/REQ_SENT reject":     "IDLE REJ -",
	"a/REQ_SENT destroy":    "IDLE REJ -",

	"a/MRA_REQ_RCVD REP":        "MRA_REP_SENT - REP_RECEIVED",
	"a/MRA_REQ_RCVD REJ":        "IDLE - REJ_RECEIVED",
	"a/MRA_REQ_RCVD REJ_STALE":  "TIMEWAIT - REJ_RECEIVED",
	"a/MRA_REQ_RCVD TIMER":      "MRA_REQ_RCVD REQ -",
	"a/MRA_REQ_RCVD TIMER_LAST": "IDLE - REQ_ERROR",
	"a/MRA_REQ_RCVD reject":     "IDLE REJ -",
	"a/MRA_REQ_RCVD destroy":    "IDLE REJ -",

	"a/MRA_REP_SENT REP":       "MRA_REP_SENT MRA -",
	"a/MRA_REP_SENT REJ":       "TIMEWAIT - REJ_RECEIVED",
	"a/MRA_REP_SENT REJ_STALE": "TIMEWAIT - REJ_RECEIVED",
	"a/MRA_REP_SENT sendRTU":   "ESTABLISHED RTU -",
	"a/MRA_REP_SENT reject":    "IDLE REJ -",
	"a/MRA_REP_SENT destroy":   "IDLE REJ -",

	"a/REP_RCVD REJ":       "TIMEWAIT - REJ_RECEIVED",
	"a/REP_RCVD REJ_STALE": "TIMEWAIT - REJ_RECEIVED",
	"a/REP_RCVD sendRTU":   "ESTABLISHED RTU -",
	"a/REP_RCVD reject":    "IDLE REJ -",
	"a/REP_RCVD destroy":   "IDLE REJ -",

	"a/ESTABLISHED REP":        "ESTABLISHED RTU -",
	"a/ESTABLISHED REJ":        "TIMEWAIT - REJ_RECEIVED",
	"a/ESTABLISHED REJ_STALE":  "TIMEWAIT - REJ_RECEIVED",
	"a/ESTABLISHED DREQ":       "DREQ_RCVD - DREQ_RECEIVED",
	"a/ESTABLISHED disconnect": "DREQ_SENT DREQ -",
	"a/ESTABLISHED establish":  "ok",
	"a/ESTABLISHED destroy":    "TIMEWAIT DREQ -",

	"a/DREQ_SENT REJ":        "TIMEWAIT - REJ_RECEIVED",
	"a/DREQ_SENT REJ_STALE":  "TIMEWAIT - REJ_RECEIVED",
	"a/DREQ_SENT DREQ":       "DREQ_RCVD - DREQ_RECEIVED",
	"a/DREQ_SENT DREP":       "TIMEWAIT - DREP_RECEIVED",
	"a/DREQ_SENT TIMER":      "DREQ_SENT DREQ -",
	"a/DREQ_SENT TIMER_LAST": "TIMEWAIT - DREQ_ERROR",
	"a/DREQ_SENT destroy":    "TIMEWAIT - -",

	"a/DREQ_RCVD DREP":     "TIMEWAIT - DREP_RECEIVED",
	"a/DREQ_RCVD sendDREP": "TIMEWAIT DREP -",
	"a/DREQ_RCVD destroy":  "TIMEWAIT DREP -",

	"a/TIMEWAIT DREQ":       "TIMEWAIT DREP -",
	"a/TIMEWAIT TIMER":      "IDLE - TIMEWAIT_EXIT",
	"a/TIMEWAIT TIMER_LAST": "IDLE - TIMEWAIT_EXIT",

	"p/MRA_REQ_SENT DUP_REQ":   "MRA_REQ_SENT MRA -",
	"p/MRA_REQ_SENT REJ":       "IDLE - REJ_RECEIVED",
	"p/MRA_REQ_SENT REJ_STALE": "TIMEWAIT - REJ_RECEIVED",
	"p/MRA_REQ_SENT accept":    "REP_SENT REP -",
	"p/MRA_REQ_SENT reject":    "IDLE REJ -",
	"p/MRA_REQ_SENT destroy":   "IDLE REJ -",

	"p/REQ_RCVD REJ":       "IDLE - REJ_RECEIVED",
	"p/REQ_RCVD REJ_STALE": "TIMEWAIT - REJ_RECEIVED",
	"p/REQ_RCVD accept":    "REP_SENT REP -",
	"p/REQ_RCVD reject":    "IDLE REJ -",
	"p/REQ_RCVD destroy":   "IDLE REJ -",

	"p/REP_SENT RTU":        "ESTABLISHED - RTU_RECEIVED",
	"p/REP_SENT MRA_REP":    "MRA_REP_RCVD - MRA_RECEIVED",
	"p/REP_SENT DREQ":       "DREQ_RCVD - DREQ_RECEIVED",
	"p/REP_SENT REJ":        "IDLE - REJ_RECEIVED",
	"p/REP_SENT REJ_STALE":  "TIMEWAIT - REJ_RECEIVED",
	"p/REP_SENT establish":  "ESTABLISHED - USER_ESTABLISHED",
	"p/REP_SENT TIMER":      "REP_SENT REP -",
	"p/REP_SENT TIMER_LAST": "IDLE - REP_ERROR",
	"p/REP_SENT reject":     "TIMEWAIT REJ -",
	"p/REP_SENT destroy":    "TIMEWAIT REJ -",

	"p/MRA_REP_RCVD RTU":        "ESTABLISHED - RTU_RECEIVED",
	"p/MRA_REP_RCVD DREQ":       "DREQ_RCVD - DREQ_RECEIVED",
	"p/MRA_REP_RCVD REJ":        "IDLE - REJ_RECEIVED",
	"p/MRA_REP_RCVD REJ_STALE":  "TIMEWAIT - REJ_RECEIVED",
	"p/MRA_REP_RCVD establish":  "ESTABLISHED - USER_ESTABLISHED",
	"p/MRA_REP_RCVD TIMER":      "MRA_REP_RCVD REP -",
	"p/MRA_REP_RCVD TIMER_LAST": "IDLE - REP_ERROR",
	"p/MRA_REP_RCVD reject":     "TIMEWAIT REJ -",
	"p/MRA_REP_RCVD destroy":    "TIMEWAIT REJ -",

	"p/ESTABLISHED REJ":        "TIMEWAIT - REJ_RECEIVED",
	"p/ESTABLISHED REJ_STALE":  "TIMEWAIT - REJ_RECEIVED",
	"p/ESTABLISHED DREQ":       "DREQ_RCVD - DREQ_RECEIVED",
	"p/ESTABLISHED disconnect": "DREQ_SENT DREQ -",
	"p/ESTABLISHED establish":  "ok",
	"p/ESTABLISHED destroy":    "TIMEWAIT DREQ -",

	"s/SIDR_REQ_SENT SIDR_REP":   "IDLE - SIDR_REP_RECEIVED",
	"s/SIDR_REQ_SENT TIMER":      "SIDR_REQ_SENT SIDR_REQ -",
	"s/SIDR_REQ_SENT TIMER_LAST": "IDLE - SIDR_REQ_ERROR",
	"s/SIDR_REQ_SENT destroy":    "IDLE - -",

	"s/SIDR_REQ_RCVD sidrReply": "IDLE SIDR_REP -",
	"s/SIDR_REQ_RCVD destroy":   "IDLE SIDR_REP -",
}

var userCalls = map[string]bool{"accept": true, "reject": true, "sendRTU": true, "establish": true,
	"disconnect": true, "sendDREP": true, "sidrReply": true}

func summary(c *machine, o *output) string {
	var s, e []string
	for _, x := range o.sends {
		s = append(s, mad.CMAttrName(x.m.AttrID()))
	}
	for _, x := range o.events {
		e = append(e, x.Type.String())
	}
	j := func(l []string) string {
		if len(l) == 0 {
			return "-"
		}
		return strings.Join(l, ",")
	}
	return fmt.Sprintf("%s %s %s", c.state, j(s), j(e))
}

// TestTransitions applies every input to every state.
func TestTransitions(t *testing.T) {
	var fnames, inames []string
	for n := range fixtures {
		fnames = append(fnames, n)
	}
	for n := range inputs {
		inames = append(inames, n)
	}
	sort.Strings(fnames)
	sort.Strings(inames)
	used := map[string]bool{}
	for _, fn := range fnames {
		for _, in := range inames {
			key := fn + " " + in
			f := fixtures[fn]()
			before := f.c.state
			var o output
			err := inputs[in](f, &o)
			want, ok := transitions[key]
			used[key] = ok
			switch {
			case want == "ok":
				if err != nil || f.c.state != before || len(o.sends)+len(o.events) != 0 {
					t.Errorf("%s: %v, %s", key, err, summary(f.c, &o))
				}
			case ok:
				if err != nil {
					t.Errorf("%s: %v", key, err)
				} else if got := summary(f.c, &o); got != want {
					t.Errorf("%s: got %q, want %q", key, got, want)
				}
			default:
				if got := summary(f.c, &o); got != fmt.Sprintf("%s - -", before) {
					t.Errorf("%s: should change nothing, got %q", key, got)
				}
				if userCalls[in] && !errors.Is(err, ErrState) {
					t.Errorf("%s: err %v, want ErrState", key, err)
				}
			}
		}
	}
	for k := range transitions {
		if !used[k] {
			t.Errorf("table entry %q matches no fixture and input", k)
		}
	}
}

// TestTimers: the REQ, REP, DREQ, SIDR, MRA and TimeWait timers of §3.6,
// retransmissions identical to the first send.
func TestTimers(t *testing.T) {
	f := active()
	c := f.c
	if d := c.deadline.Sub(t0); d != 4608*time.Millisecond {
		t.Fatalf("REQ timer %v, want 4608 ms", d)
	}
	var o output
	c.timer(c.deadline.Add(-time.Nanosecond), &o)
	if len(o.sends) != 0 {
		t.Fatal("timer fired early")
	}
	first := c.msg.Clone()
	for i := range 2 {
		at := c.deadline
		c.timer(at, &o)
		if len(o.sends) != i+1 || string(o.sends[i].m) != string(first) || o.sends[i].to.Remote != ipB || o.sends[i].to.QPN != 1 {
			t.Fatalf("retry %d: %+v", i, o.sends)
		}
		if c.deadline.Sub(at) != 4608*time.Millisecond {
			t.Fatalf("retry %d re-armed for %v", i, c.deadline.Sub(at))
		}
	}
	// MRA stretches the wait: 2^(24−8) + 2^(17−8) ms.
	c.onMRA(t0, mra(f, mad.MsgREQ), fromB, &o)
	if d := c.deadline.Sub(t0); d != (65536+512)*time.Millisecond {
		t.Fatalf("after MRA: %v", d)
	}
	p := pREPSent()
	if d := p.c.deadline.Sub(t0); d != 4096*time.Millisecond {
		t.Fatalf("REP timer %v, want 4096 ms", d)
	}
	if p.c.maxRetries != 2 {
		t.Fatalf("REP retries %d, want the REQ's 2", p.c.maxRetries)
	}
	e := fixtures["a/TIMEWAIT"]()
	if d := e.c.deadline.Sub(t0); d != 512*time.Millisecond {
		t.Fatalf("TimeWait %v, want 512 ms", d)
	}
	pe := fixtures["p/ESTABLISHED"]()
	must(pe.c.disconnect(t0, 7, nil, &o))
	if d := pe.c.deadline.Sub(t0); d != 4096*time.Millisecond {
		t.Fatalf("passive DREQ timer %v", d)
	}
	s := fixtures["s/SIDR_REQ_SENT"]()
	if d := s.c.deadline.Sub(t0); d != 4096*time.Millisecond {
		t.Fatalf("SIDR timer %v", d)
	}
	if Duration(0) != time.Millisecond || Duration(8) != time.Millisecond || Duration(31) != (1<<23)*time.Millisecond {
		t.Fatal("Duration")
	}
	for _, c := range []struct{ delay, plt, want uint8 }{{15, 16, 17}, {16, 16, 18}, {15, 18, 19}, {20, 16, 20}, {18, 16, 19}, {19, 16, 19}, {0, 31, 31}} {
		if got := AckTimeout(c.delay, c.plt); got != c.want {
			t.Errorf("AckTimeout(%d, %d) = %d, want %d", c.delay, c.plt, got, c.want)
		}
	}
}

// TestMessages: what the machines put in their messages.
func TestMessages(t *testing.T) {
	f := active()
	r := mad.REQ(f.c.req)
	if r.LocalCommID() != idA || r.LocalCAGUID() != guidA || r.LocalQPN() != qpnA || r.Primary().LocalACKTimeout() != 17 ||
		r.MaxCMRetries() != 2 || r.Primary().LocalLID() != 0xFFFF || mad.GIDAddr(r.Primary().LocalGID()) != ipA ||
		r.MAD().TID() != tidA || r.PartitionKey() != 0xFFFF {
		t.Fatalf("REQ % x", f.c.req)
	}
	// The passive side addresses the REQ's PrimaryLocalPortGID.
	p := passive()
	if p.c.av.Remote != ipA || p.c.av.QPN != 1 || p.c.av.FlowLabel != 0x308EF || p.c.timeout != 4096*time.Millisecond {
		t.Fatalf("passive AV %+v", p.c.av)
	}
	var o output
	p.c.dupREQ(fromA, &o)
	a := mad.MRA(o.sends[0].m)
	if a.LocalCommID() != idB || a.RemoteCommID() != idA || a.MessageMRAed() != mad.MsgREQ || a.ServiceTimeout() != 24 || a.MAD().TID() != tidA {
		t.Fatalf("MRA % x", o.sends[0].m[:40])
	}
	must(p.c.accept(t0, acceptParams(), &o))
	rep := mad.REP(o.sends[1].m)
	if rep.MAD().TID() != tidA || rep.LocalCommID() != idB || rep.RemoteCommID() != idA || rep.LocalQPN() != qpnB || rep.LocalCAGUID() != guidB {
		t.Fatalf("REP % x", rep[:64])
	}
	// Destroying a connecting id: REJ timeout, ARI = own GUID, MessageRejected other.
	o = output{}
	f.c.destroy(t0, tidA, &o)
	j := mad.REJ(o.sends[0].m)
	if j.Reason() != mad.RejTimeout || j.MessageRejected() != mad.MsgOther || binary.BigEndian.Uint64(j.ARI()) != guidA ||
		j.RejectedInfoLength() != 8 || j.LocalCommID() != idA || j.RemoteCommID() != 0 {
		t.Fatalf("REJ on destroy % x", j[:48])
	}
	// Passive reject: consumer defined with private data, MessageRejected REQ.
	p = passive()
	o = output{}
	must(p.c.reject(t0, mad.RejConsumerDefined, nil, []byte("busy"), &o))
	j = mad.REJ(o.sends[0].m)
	if j.Reason() != 28 || j.MessageRejected() != mad.MsgREQ || j.LocalCommID() != idB || j.RemoteCommID() != idA || string(j.PrivateData()[:4]) != "busy" {
		t.Fatalf("passive REJ % x", j[:48])
	}
	if err := p.c.reject(t0, 28, nil, make([]byte, 149), &o); !errors.Is(err, ErrState) {
		t.Fatal("reject after reject")
	}
	// DREQ carries the peer's QPN; the DREP reuses the DREQ's TID.
	e := aEstablished()
	o = output{}
	must(e.c.disconnect(t0, 0x2_00000000|idA, nil, &o))
	d := mad.DREQ(o.sends[0].m)
	if d.RemoteQPN() != qpnB || d.LocalCommID() != idA || d.RemoteCommID() != idB || d.MAD().TID() != 0x2_00000000|idA {
		t.Fatalf("DREQ % x", d[:40])
	}
	e = aEstablished()
	e.c.onDREQ(t0, dreq(e, qpnA), fromB, &o)
	o = output{}
	must(e.c.sendDREP(t0, nil, &o))
	if dp := mad.DREP(o.sends[0].m); dp.MAD().TID() != 0x99 || dp.LocalCommID() != idA || dp.RemoteCommID() != idB {
		t.Fatalf("DREP % x", dp[:40])
	}
	// Private data limits.
	c := &machine{guid: guidA, localID: idA}
	cp := connectParams()
	cp.PrivateData = make([]byte, 93)
	if err := c.connect(t0, cp, 1, &o); !errors.Is(err, ErrPrivateData) || c.state != StateIdle {
		t.Fatalf("93-byte REQ private data: %v", err)
	}
	p = passive()
	ap := acceptParams()
	ap.PrivateData = make([]byte, 197)
	if err := p.c.accept(t0, ap, &o); !errors.Is(err, ErrPrivateData) || p.c.state != StateMRAREQSent {
		t.Fatalf("197-byte REP private data: %v", err)
	}
}
