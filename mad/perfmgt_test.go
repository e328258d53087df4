package mad_test

import (
	"testing"

	"github.com/rdma-go/rdma-go/mad"
)

// TestPerfMgt: ClassPortInfo, PortCounters (saturating, data in 4-octet
// units), PortCountersExtended, Set clearing selected counters, bad port,
// unknown attribute.
func TestPerfMgt(t *testing.T) {
	a, tr, _ := newAgent()
	vals := mad.PortCounterValues{XmitData: 400, RcvData: 1 << 40, XmitPkts: 10, RcvPkts: 20, UnicastXmitPkts: 10,
		UnicastRcvPkts: 20, RcvErrors: 70000, XmitDiscards: 3}
	p, err := mad.ServePerfMgt(a, mad.PerfMgtConfig{Counters: func() mad.PortCounterValues { return vals }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ask := func(method uint8, attr uint16, fill func(attr []byte)) mad.MAD {
		t.Helper()
		m := mad.New(mad.ClassPerfMgt, 1, method, attr, 0x1234)
		if fill != nil {
			fill(m.PerfAttr())
		}
		a.Deliver(t0, m, mad.Address{Remote: peer, QPN: 9, QKey: mad.GSIQKey})
		out := tr.take()
		if len(out) != 1 || out[0].to.QPN != 9 || out[0].to.Remote != peer {
			t.Fatalf("answers %+v", out)
		}
		r := out[0].m
		if r.Method() != mad.MethodGetResp || r.TID() != 0x1234 || r.AttrID() != attr {
			t.Fatalf("response header %v", r)
		}
		return r
	}
	r := ask(mad.MethodGet, mad.AttrClassPortInfo, nil)
	cpi := mad.ClassPortInfo(r.PerfAttr())
	if r.Status() != 0 || cpi.BaseVersion() != 1 || cpi.ClassVersion() != 1 || cpi.CapabilityMask() != 0x0200 ||
		cpi.CapabilityMask2() != 0 || cpi.RespTimeValue() != 16 || cpi.RedirectQP() != 0 || cpi.TrapQKey() != 0 {
		t.Fatalf("ClassPortInfo % x", r.PerfAttr()[:72])
	}
	sel := func(b []byte) { b[1] = 1 }
	r = ask(mad.MethodGet, mad.AttrPortCounters, sel)
	pc := mad.PortCounters(r.PerfAttr())
	if r.Status() != 0 || pc.PortSelect() != 1 || pc.PortXmitData() != 100 || pc.PortRcvData() != 0xFFFFFFFF ||
		pc.PortXmitPkts() != 10 || pc.PortRcvPkts() != 20 || pc.PortRcvErrors() != 0xFFFF || pc.PortXmitDiscards() != 3 {
		t.Fatalf("PortCounters % x", r.PerfAttr()[:44])
	}
	r = ask(mad.MethodGet, mad.AttrPortCountersExtended, sel)
	px := mad.PortCountersExtended(r.PerfAttr())
	if r.Status() != 0 || px.PortXmitData() != 100 || px.PortRcvData() != 1<<38 || px.PortUnicastRcvPkts() != 20 ||
		px.PortMulticastXmitPkts() != 0 {
		t.Fatalf("PortCountersExtended % x", r.PerfAttr()[:184])
	}
	// Set clears the selected counters only.
	r = ask(mad.MethodSet, mad.AttrPortCounters, func(b []byte) {
		pc := mad.PortCounters(b)
		pc.SetPortSelect(1)
		pc.SetCounterSelect(mad.SelPortXmitData | mad.SelPortRcvErrors)
	})
	pc = mad.PortCounters(r.PerfAttr())
	if r.Status() != 0 || pc.PortXmitData() != 0 || pc.PortRcvErrors() != 0 || pc.PortXmitPkts() != 10 || pc.CounterSelect() != 0x1008 {
		t.Fatalf("after Set % x", r.PerfAttr()[:44])
	}
	vals.XmitData += 40
	r = ask(mad.MethodGet, mad.AttrPortCounters, sel)
	if pc = mad.PortCounters(r.PerfAttr()); pc.PortXmitData() != 10 {
		t.Fatalf("after traffic: %d", pc.PortXmitData())
	}
	if r = ask(mad.MethodGet, mad.AttrPortCounters, func(b []byte) { b[1] = 2 }); r.Status() != mad.StatusInvalidAttrValue {
		t.Fatalf("port 2: status %#x", r.Status())
	}
	if r = ask(mad.MethodGet, mad.AttrPortSamplesControl, nil); r.Status() != mad.StatusMethodAttrUnsupported {
		t.Fatalf("PortSamplesControl: status %#x", r.Status())
	}
}
