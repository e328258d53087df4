package mad_test

import (
	"testing"

	"github.com/rdma-go/rdma-go/mad"
)

// FuzzParse: any bytes, parsed and read through every view, never panic;
// what parses re-encodes to the same bytes.
func FuzzParse(f *testing.F) {
	f.Add([]byte(mad.NewCM(mad.AttrREQ, 1)))
	f.Add([]byte(mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrPortCounters, 2)))
	f.Add([]byte{1, 7, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := mad.Parse(b)
		if err != nil {
			return
		}
		orig := m.Clone()
		readAll(m)
		if string(m) != string(orig) {
			t.Fatal("reading changed the MAD")
		}
	})
}

// readAll calls every getter of every view.
func readAll(m mad.MAD) {
	_ = m.String()
	_, _, _, _ = m.IsResponse(), m.Status(), m.ClassSpecific(), m.AttrMod()
	r := mad.REQ(m)
	_, _, _, _, _ = r.LocalCommID(), r.VendorID(), r.ServiceID(), r.LocalCAGUID(), r.LocalQKey()
	_, _, _, _, _ = r.LocalQPN(), r.ResponderResources(), r.LocalEECN(), r.InitiatorDepth(), r.RemoteEECN()
	_, _, _, _, _ = r.RemoteCMResponseTimeout(), r.TransportServiceType(), r.EndToEndFlowControl(), r.StartingPSN(), r.LocalCMResponseTimeout()
	_, _, _, _, _ = r.RetryCount(), r.PartitionKey(), r.PathMTU(), r.RDCExists(), r.RNRRetryCount()
	_, _, _, _ = r.MaxCMRetries(), r.SRQ(), r.ExtendedTransportType(), r.SAPSupported()
	for _, p := range []mad.Path{r.Primary(), r.Alternate()} {
		_, _, _, _, _, _ = p.LocalLID(), p.RemoteLID(), mad.GIDAddr(p.LocalGID()), mad.GIDAddr(p.RemoteGID()), p.FlowLabel(), p.PacketRate()
		_, _, _, _, _ = p.TrafficClass(), p.HopLimit(), p.SL(), p.SubnetLocal(), p.LocalACKTimeout()
	}
	h := mad.CMAHeader(r.PrivateData())
	_, _, _, _, _, _ = h.Version(), h.IPVersion(), h.Port(), h.SrcAddr(), h.DstAddr(), h.Validate()
	h = mad.CMAHeader(mad.SIDRREQ(m).PrivateData())
	_, _, _ = h.SrcAddr(), h.DstAddr(), h.Validate()
	a := mad.MRA(m)
	_, _, _, _, _ = a.LocalCommID(), a.RemoteCommID(), a.MessageMRAed(), a.ServiceTimeout(), a.PrivateData()
	j := mad.REJ(m)
	_, _, _, _, _, _, _ = j.LocalCommID(), j.RemoteCommID(), j.MessageRejected(), j.RejectedInfoLength(), j.Reason(), j.ARI(), j.PrivateData()
	_ = mad.RejReasonString(j.Reason())
	p := mad.REP(m)
	_, _, _, _, _, _ = p.LocalCommID(), p.RemoteCommID(), p.LocalQKey(), p.LocalQPN(), p.VendorID(), p.LocalEECN()
	_, _, _, _, _, _ = p.StartingPSN(), p.ResponderResources(), p.InitiatorDepth(), p.TargetACKDelay(), p.FailoverAccepted(), p.EndToEndFlowControl()
	_, _, _, _ = p.RNRRetryCount(), p.SRQ(), p.LocalCAGUID(), p.PrivateData()
	u := mad.RTU(m)
	_, _, _ = u.LocalCommID(), u.RemoteCommID(), u.PrivateData()
	d := mad.DREQ(m)
	_, _, _, _ = d.LocalCommID(), d.RemoteCommID(), d.RemoteQPN(), d.PrivateData()
	e := mad.DREP(m)
	_, _, _ = e.LocalCommID(), e.RemoteCommID(), e.PrivateData()
	s := mad.SIDRREQ(m)
	_, _, _, _ = s.RequestID(), s.PartitionKey(), s.ServiceID(), s.PrivateData()
	sr := mad.SIDRREP(m)
	_, _, _, _, _, _ = sr.RequestID(), sr.Status(), sr.AdditionalInfoLength(), sr.VendorIDH(), sr.QPN(), sr.VendorIDL()
	_, _, _, _ = sr.ServiceID(), sr.QKey(), sr.AdditionalInfo(), sr.PrivateData()
	c := mad.ClassPortInfo(m.PerfAttr())
	_, _, _, _, _, _, _ = c.BaseVersion(), c.ClassVersion(), c.CapabilityMask(), c.CapabilityMask2(), c.RespTimeValue(), c.RedirectGID(), c.RedirectTC()
	_, _, _, _, _, _, _ = c.RedirectSL(), c.RedirectFL(), c.RedirectLID(), c.RedirectPKey(), c.RedirectQP(), c.RedirectQKey(), c.TrapGID()
	_, _, _, _, _, _, _, _ = c.TrapTC(), c.TrapSL(), c.TrapFL(), c.TrapLID(), c.TrapPKey(), c.TrapHL(), c.TrapQP(), c.TrapQKey()
	pc := mad.PortCounters(m.PerfAttr())
	_, _, _, _, _, _ = pc.PortSelect(), pc.CounterSelect(), pc.SymbolErrorCounter(), pc.LinkErrorRecoveryCounter(), pc.LinkDownedCounter(), pc.PortRcvErrors()
	_, _, _, _, _ = pc.PortRcvRemotePhysicalErrors(), pc.PortRcvSwitchRelayErrors(), pc.PortXmitDiscards(), pc.PortXmitConstraintErrors(), pc.PortRcvConstraintErrors()
	_, _, _, _, _ = pc.CounterSelect2(), pc.LocalLinkIntegrityErrors(), pc.ExcessiveBufferOverrunErrors(), pc.QP1Dropped(), pc.VL15Dropped()
	_, _, _, _, _ = pc.PortXmitData(), pc.PortRcvData(), pc.PortXmitPkts(), pc.PortRcvPkts(), pc.PortXmitWait()
	px := mad.PortCountersExtended(m.PerfAttr())
	_, _, _ = px.PortSelect(), px.CounterSelect(), px.CounterSelect2()
	for i := range mad.XNumCounters {
		_ = px.Counter(i)
	}
}

// FuzzAgent: hostile MADs delivered to an agent with a CM registration and
// a PerfMgt responder never panic, and any answer is a 256-byte GetResp.
func FuzzAgent(f *testing.F) {
	f.Add([]byte(mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrPortCountersExtended, 2)))
	f.Add([]byte(mad.New(mad.ClassPerfMgt, 1, mad.MethodSet, mad.AttrPortCounters, 2)))
	f.Add([]byte(mad.New(0x09, 1, mad.MethodGet, 0x1, 2)))
	f.Add([]byte(mad.NewCM(mad.AttrDREQ, 3)))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, tr, _ := newAgent()
		if _, err := mad.ServePerfMgt(a, mad.PerfMgtConfig{Counters: func() mad.PortCounterValues {
			return mad.PortCounterValues{XmitData: ^uint64(0), RcvPkts: 5}
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Register(mad.ClassCM, 2, []uint8{mad.MethodSend}, func(*mad.Registration, *mad.Received) {}); err != nil {
			t.Fatal(err)
		}
		a.Deliver(t0, b, from)
		for _, s := range tr.take() {
			if len(s.m) != mad.Size || s.m.Method() != mad.MethodGetResp {
				t.Fatalf("answer %v", s.m)
			}
		}
	})
}
