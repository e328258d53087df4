package engine

import (
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// TestCountersLayout: Stats and Counters list the same counters in the same
// order (Snapshot copies one onto the other), every counter has a distinct
// name, and the first RxeCounters are rxe's hw counters in rxe's order.
func TestCountersLayout(t *testing.T) {
	st, ct := reflect.TypeFor[Stats](), reflect.TypeFor[Counters]()
	if st.NumField() != ct.NumField() || st.NumField() != numCounters {
		t.Fatalf("Stats has %d fields, Counters %d, numCounters %d", st.NumField(), ct.NumField(), numCounters)
	}
	seen := map[string]bool{}
	for i := range st.NumField() {
		sf, cf := st.Field(i), ct.Field(i)
		if sf.Type != reflect.TypeFor[atomic.Uint64]() || cf.Type.Kind() != reflect.Uint64 || sf.Name != cf.Name {
			t.Errorf("field %d: Stats.%s %v, Counters.%s %v", i, sf.Name, sf.Type, cf.Name, cf.Type)
		}
		n := cf.Tag.Get("rxe")
		if n == "" || seen[n] {
			t.Errorf("Counters.%s: name %q empty or used twice", cf.Name, n)
		}
		seen[n] = true
	}
	rxe := []string{"sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request", "rcvd_rnr_err",
		"send_rnr_err", "rcvd_seq_err", "ack_deferred", "retry_exceeded_err", "retry_rnr_exceeded_err",
		"completer_retry_err", "send_err", "link_downed", "rdma_sends", "rdma_recvs"}
	if got := CounterNames()[:RxeCounters]; !slices.Equal(got, rxe) {
		t.Errorf("rxe counters %q, want %q", got, rxe)
	}

	// Snapshot and List carry each counter's own value.
	var s Stats
	sv := reflect.ValueOf(&s).Elem()
	for i := range numCounters {
		sv.Field(i).Addr().Interface().(*atomic.Uint64).Store(uint64(1000 + i))
	}
	c := s.Snapshot()
	for i, nc := range c.List() {
		if nc.Value != uint64(1000+i) || nc.Name != CounterNames()[i] {
			t.Fatalf("List()[%d] = %+v", i, nc)
		}
		if v := reflect.ValueOf(c).Field(i).Uint(); v != uint64(1000+i) {
			t.Fatalf("Counters.%s = %d", ct.Field(i).Name, v)
		}
	}
}

// errLink refuses every send.
type errLink struct{}

func (errLink) Send([]link.Datagram) error { return errors.New("link down") }
func (errLink) SourcePort(w uint16) uint16 { return w }

// toB hands datagrams straight to B's receive path.
func (p *pair) toB(ds ...link.Datagram) { p.hb.Receive(p.now, ds) }

// forgeToA builds a response from B to A's QP: opcode op at psn, ext filling
// the extended headers.
func (p *pair) forgeToA(op wire.Opcode, psn wire.PSN, ext func(h []byte)) link.Datagram {
	b := make([]byte, wire.PacketLen(op, 0))
	if ext != nil {
		ext(b[wire.BTHLen:op.HdrLen()])
	}
	wire.BTH(b).Encode(op, false, 0, p.a.QPN(), false, psn)
	wire.PutICRC(addrB, addrA, p.b.sport, link.RoCEPort, b)
	return link.Datagram{Buf: b, Src: netip.AddrPortFrom(addrB, p.b.sport), Dst: netip.AddrPortFrom(addrA, link.RoCEPort)}
}

func syndrome(s wire.Syndrome) func(h []byte) {
	return func(h []byte) { wire.AETH(h).Encode(s, 0) }
}

// reseal recomputes d's ICRC after a change.
func reseal(d link.Datagram) link.Datagram {
	wire.PutICRC(d.Src.Addr(), d.Dst.Addr(), d.Src.Port(), d.Dst.Port(), d.Buf)
	return d
}

// TestCounters hits every counter: each case makes one thing happen and
// checks that the named counters moved, on the device and on the QP
// (a*/b* lists) or on the device alone, the QP's staying 0 (aPort/bPort).
func TestCounters(t *testing.T) {
	type tcase struct {
		name         string
		typ          QPType
		hc           func(*HostConfig)
		run          func(p *pair)
		a, b         []string // counters of the device and of its QP
		aPort, bPort []string // counters of the device only
	}
	send := func(p *pair, id uint64, n int) {
		p.postA(SendWR{ID: id, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 0, n)})
	}
	cases := []tcase{
		{name: "send", run: func(p *pair) {
			p.recvB(1, p.mrb, 0, 4096)
			send(p, 1, 100)
			p.run(time.Second)
		}, a: []string{"Sent", "Received", "RDMASends"}, b: []string{"Sent", "Received", "RDMARecvs", "AckDeferred"},
			aPort: []string{"SentBytes"}, bPort: []string{"ReceivedBytes"}},
		{name: "duplicate", run: func(p *pair) {
			p.toB(p.forge(wire.RCSendOnly, 0x100-1, nil, []byte("again")))
		}, b: []string{"Duplicates"}},
		{name: "duplicate READ without resource", run: func(p *pair) {
			p.toB(p.forge(wire.RCReadRequest, 0x100-1, func(h []byte) { wire.RETH(h).Encode(p.mrb.Addr, p.mrb.RKey, 8) }, nil))
		}, b: []string{"Duplicates", "DropDuplicate"}},
		{name: "out of sequence", run: func(p *pair) {
			p.toB(p.forge(wire.RCSendOnly, 0x180, nil, []byte("ahead")))
			p.run(time.Second)
		}, b: []string{"DropOutOfSequence", "SeqNAKsSent"}, a: []string{"DropBadResponse"}},
		{name: "sequence NAK", run: func(p *pair) {
			p.recvB(1, p.mrb, 0, 4096)
			c := p.capture()
			c.dropA = once(func(s *sentPkt) bool { return s.p.Op == wire.RCSendMiddle })
			send(p, 1, 3000)
			p.run(time.Second)
		}, a: []string{"SeqNAKsReceived", "Retries"}, b: []string{"DropOutOfSequence", "SeqNAKsSent"}},
		{name: "RNR retry exceeded", run: func(p *pair) {
			p.a.Modify(p.now, &Attr{RNRRetry: 1}, AttrRNRRetry)
			send(p, 1, 100)
			p.run(time.Second)
		}, a: []string{"RNRNAKsReceived", "RNRRetryExceeded"}, b: []string{"RNRNAKsSent"}},
		{name: "retry exceeded", run: func(p *pair) {
			p.a.Modify(p.now, &Attr{RetryCnt: 1}, AttrRetryCnt)
			c := p.capture()
			c.dropA = dropAll
			send(p, 1, 100)
			p.run(10 * time.Second)
		}, a: []string{"Retransmits", "Retries", "RetryExceeded"}},
		{name: "stale NAK", run: func(p *pair) {
			p.recvB(1, p.mrb, 0, 4096)
			send(p, 1, 100)
			p.run(time.Second)
			p.ha.Receive(p.now, []link.Datagram{p.forgeToA(wire.RCAck, 0x100, syndrome(wire.SyndromePSNSeqErr))})
		}, a: []string{"DropStaleNAK"}},
		{name: "response out of order", run: func(p *pair) {
			c := p.capture()
			c.dropB = once(func(s *sentPkt) bool { return s.p.Op == wire.RCReadResponseFirst })
			p.postA(SendWR{ID: 1, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 3000), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
			p.run(time.Second)
		}, a: []string{"DropOutOfOrderResponse"}},
		{name: "invalid request", run: func(p *pair) {
			p.b.Modify(p.now, &Attr{AccessFlags: AccessRemoteRead}, AttrAccessFlags)
			p.postA(SendWR{ID: 1, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
			p.run(time.Second)
		}, a: []string{"InvalidRequestNAKsReceived"}, b: []string{"RequestErrors", "InvalidRequestNAKsSent"}},
		{name: "dropped while responding", hc: func(c *HostConfig) { c.ReadBurst = 2 }, run: func(p *pair) {
			p.recvB(1, p.mrb, 0, 4096)
			p.postA(SendWR{ID: 1, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8000), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
			send(p, 2, 100)
			p.run(time.Second)
			checkWCs(p.t, "A", p.acq.take(), wc{1, StatusSuccess}, wc{2, StatusSuccess})
		}, a: []string{"SeqNAKsReceived", "Retries"}, b: []string{"DropResponding", "SeqNAKsSent"}},
		{name: "remote access", run: func(p *pair) {
			p.postA(SendWR{ID: 1, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 8), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey ^ 0x100})
			p.run(time.Second)
		}, a: []string{"RemoteAccessNAKsReceived"}, b: []string{"RequestErrors", "RemoteAccessNAKsSent"}},
		{name: "remote operational error", run: func(p *pair) {
			p.brq.cap = 1
			p.recvB(1, p.mrb, 0, 64)
			p.recvB(2, p.mrb, 64, 64)
			send(p, 1, 8)
			send(p, 2, 8)
			p.run(time.Second)
			checkWCs(p.t, "A", p.acq.take(), wc{1, StatusSuccess}, wc{2, StatusRemOpErr})
		}, a: []string{"RemoteOpNAKsReceived"}, b: []string{"CQOverflow", "RequestErrors", "RemoteOpNAKsSent"}},
		{name: "receive filters", run: func(p *pair) {
			good := func() link.Datagram { return p.forge(wire.RCSendOnly, 0x100-1, nil, []byte("x")) }
			d := good()
			d.Buf[len(d.Buf)-1] ^= 1 // ICRC
			p.toB(d)
			d = good()
			d.Dst = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.9"), link.RoCEPort)
			p.toB(reseal(d))
			d = good()
			wire.BTH(d.Buf).SetDestQP(0x999)
			p.toB(reseal(d))
			d = good()
			wire.BTH(d.Buf).SetPKey(0x1234)
			p.toB(reseal(d))
			d = good()
			wire.BTH(d.Buf).SetOpcode(wire.UCSendOnly)
			p.toB(reseal(d))
			d = good()
			d.Src = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.3"), d.Src.Port())
			p.toB(reseal(d))
			p.toB(link.Datagram{Buf: []byte{1, 2, 3}, Src: d.Src, Dst: d.Dst})
			cnp := make([]byte, wire.PacketLen(wire.CNP, 0))
			wire.BTH(cnp).Encode(wire.CNP, false, 0, p.b.QPN(), false, 0)
			p.toB(p.seal(cnp, addrA, addrB))
			p.b.Modify(p.now, &Attr{State: StateErr}, AttrState)
			p.toB(good())
		}, b: []string{"DropPKey", "DropWrongTransport", "DropWrongSource", "DropState"},
			bPort: []string{"DropICRC", "DropNotForUs", "DropUnknownQP", "DropMalformed", "DropCNP"}},
		{name: "send error", run: func(p *pair) {
			h := NewHost(HostConfig{Addr: addrA, Link: errLink{}})
			q, err := h.CreateQP(QPConfig{Type: QPTypeRC, PD: 1, MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, SendCQ: p.acq})
			must(p.t, err)
			connect(p.now, q, p.b, addrB, 0, 0, 1024)
			must(p.t, q.PostSend(p.now, &SendWR{ID: 1, Op: WRSend, SGL: nil}))
			p.ha = h // checked as A's device
		}, aPort: []string{"SendErrors"}},
		{name: "link downed", run: func(p *pair) { p.ha.LinkDowned() }, aPort: []string{"LinkDowned"}},
		{name: "UD", typ: QPTypeUD, run: func(p *pair) {
			p.postA(p.udTo(1, WRSend, addrB, p.b.QPN(), udQKey, 0, 100))    // no receive
			p.postA(p.udTo(2, WRSend, addrB, p.b.QPN(), udQKey^1, 0, 100))  // wrong Q_Key
			p.postA(p.udTo(3, WRSend, addrB, p.b.QPN(), udQKey, 0, 100000)) // longer than the MTU
			p.run(time.Second)
		}, a: []string{"DropUDTooLong"}, b: []string{"DropNoRecv", "DropQKey"}},
		{name: "UC", typ: QPTypeUC, run: func(p *pair) {
			p.postA(SendWR{ID: 1, Op: WRSend, SGL: p.sge(p.mra, 0, 100)}) // no receive
			p.run(time.Second)
			uc := func(op wire.Opcode, psn wire.PSN, n int) link.Datagram {
				b := make([]byte, wire.PacketLen(op, n))
				wire.BTH(b).Encode(op, false, 0, p.b.QPN(), false, psn)
				return p.seal(b, addrA, addrB)
			}
			// A gap, then a message longer than the MTU.
			p.toB(uc(wire.UCSendMiddle, 0x300, 1024), uc(wire.UCSendOnly, 0x301, 2048))
		}, b: []string{"DropNoRecv", "DropUCMessage", "DropOutOfSequence"}},
	}
	all := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ := tc.typ
			if typ == 0 {
				typ = QPTypeRC
			}
			p := newPairOf(t, typ, addrA, addrB, tc.hc, nil)
			tc.run(p)
			for _, side := range []struct {
				name       string
				h          *Host
				q          *QP
				both, port []string
			}{{"A", p.ha, p.a, tc.a, tc.aPort}, {"B", p.hb, p.b, tc.b, tc.bPort}} {
				hc, qc := reflect.ValueOf(side.h.Counters()), reflect.ValueOf(side.q.Counters())
				for _, n := range side.both {
					if hc.FieldByName(n).Uint() == 0 || (side.q.host == side.h && qc.FieldByName(n).Uint() == 0) {
						t.Errorf("%s: %s device %d, QP %d; want both > 0", side.name, n, hc.FieldByName(n).Uint(), qc.FieldByName(n).Uint())
					}
				}
				for _, n := range side.port {
					if hc.FieldByName(n).Uint() == 0 || qc.FieldByName(n).Uint() != 0 {
						t.Errorf("%s: %s device %d, QP %d; want device > 0, QP 0", side.name, n, hc.FieldByName(n).Uint(), qc.FieldByName(n).Uint())
					}
				}
			}
		})
		for _, l := range [][]string{tc.a, tc.b, tc.aPort, tc.bPort} {
			for _, n := range l {
				all[n] = true
			}
		}
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Counters]()) {
		if !all[f.Name] {
			t.Errorf("no case hits %s", f.Name)
		}
	}
}
