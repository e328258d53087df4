package mad

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
)

// hexDump parses the spec's dumps: "offset offset: xx xx ..." lines.
func hexDump(t *testing.T, s string) []byte {
	t.Helper()
	var out []byte
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("bad dump line %q", line)
		}
		b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(rest), " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// docs/spec/cm-mad.md §8.2: the REQ of an rdma_cm client on 192.0.2.1 port 40000
// connecting to 192.0.2.2 port 7471 (RDMA_PS_TCP).
const specREQ = `
  0  00:  01 07 02 03 00 00 00 00 00 00 00 02 8a 3c 1d 27
 16  10:  00 10 00 00 00 00 00 00 8a 3c 1d 27 00 00 00 00
 32  20:  00 00 00 00 01 06 1d 2f 50 54 00 ff fe 12 34 01
 48  30:  00 00 00 00 00 00 00 00 00 00 11 01 00 00 00 01
 64  40:  00 00 00 a0 4b 1d 2e a7 ff ff 37 f0 ff ff ff ff
 80  50:  00 00 00 00 00 00 00 00 00 00 ff ff c0 00 02 01
 96  60:  00 00 00 00 00 00 00 00 00 00 ff ff c0 00 02 02
112  70:  30 8e f0 00 00 40 00 88 00 00 00 00 00 00 00 00
128  80:  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
144  90:  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
160  a0:  00 00 00 00 00 40 9c 40 00 00 00 00 00 00 00 00
176  b0:  00 00 00 00 c0 00 02 01 00 00 00 00 00 00 00 00
192  c0:  00 00 00 00 c0 00 02 02 00 00 00 00 00 00 00 00
208  d0:  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
224  e0:  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
240  f0:  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
`

// §8.5: the REP a passive Linux sends back (bytes 64–255 zero).
const specREP = `
  0  00:  01 07 02 03 00 00 00 00 00 00 00 02 8a 3c 1d 27
 16  10:  00 13 00 00 00 00 00 00 3e 5a 77 81 8a 3c 1d 27
 32  20:  00 00 00 00 00 00 12 00 00 00 00 00 71 c2 a0 00
 48  30:  01 01 78 e0 50 54 00 ff fe 12 34 02 00 00 00 00
`

var (
	exClient = netip.MustParseAddr("192.0.2.1")
	exServer = netip.MustParseAddr("192.0.2.2")
)

type fieldCheck struct {
	name      string
	got, want any
}

func checkFields(t *testing.T, fs []fieldCheck) {
	t.Helper()
	for _, f := range fs {
		if f.got != f.want {
			t.Errorf("%s = %#v, want %#v", f.name, f.got, f.want)
		}
	}
}

// buildSpecREQ encodes the §8 REQ from its field values.
func buildSpecREQ() MAD {
	m := NewCM(AttrREQ, 0x000000028A3C1D27)
	r := REQ(m)
	r.SetLocalCommID(0x8A3C1D27)
	r.SetServiceID(0x0000000001061D2F)
	r.SetLocalCAGUID(0x505400FFFE123401)
	r.SetLocalQPN(0x11)
	r.SetResponderResources(1)
	r.SetInitiatorDepth(1)
	r.SetRemoteCMResponseTimeout(20)
	r.SetTransportServiceType(TransportRC)
	r.SetStartingPSN(0x4B1D2E)
	r.SetLocalCMResponseTimeout(20)
	r.SetRetryCount(7)
	r.SetPartitionKey(0xFFFF)
	r.SetPathMTU(3)
	r.SetRNRRetryCount(7)
	r.SetMaxCMRetries(15)
	p := r.Primary()
	p.SetLocalLID(0xFFFF)
	p.SetRemoteLID(0xFFFF)
	p.SetLocalGID(AddrGID(exClient))
	p.SetRemoteGID(AddrGID(exServer))
	p.SetFlowLabel((40000*31 + 7471) & 0xFFFFF)
	p.SetHopLimit(64)
	p.SetLocalACKTimeout(17)
	var pd [REQPrivateDataLen]byte
	CMAHeader(pd[:]).Encode(40000, exClient, exServer)
	r.SetPrivateData(pd[:])
	return m
}

// TestGoldenREQ: the §8.2 bytes decode to the §8.3 fields, and encoding
// those fields gives the same 256 bytes.
func TestGoldenREQ(t *testing.T) {
	b := hexDump(t, specREQ)
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	r := REQ(m)
	p, alt := r.Primary(), r.Alternate()
	h := CMAHeader(r.PrivateData())
	checkFields(t, []fieldCheck{
		{"BaseVersion", m.BaseVersion(), uint8(1)}, {"MgmtClass", m.MgmtClass(), uint8(ClassCM)},
		{"ClassVersion", m.ClassVersion(), uint8(2)}, {"Method", m.Method(), uint8(MethodSend)},
		{"Status", m.Status(), uint16(0)}, {"ClassSpecific", m.ClassSpecific(), uint16(0)},
		{"TID", m.TID(), uint64(0x000000028A3C1D27)}, {"AttrID", m.AttrID(), uint16(AttrREQ)},
		{"AttrMod", m.AttrMod(), uint32(0)}, {"IsResponse", m.IsResponse(), false},
		{"LocalCommID", r.LocalCommID(), uint32(0x8A3C1D27)}, {"VendorID", r.VendorID(), uint32(0)},
		{"ServiceID", r.ServiceID(), uint64(0x0000000001061D2F)},
		{"LocalCAGUID", r.LocalCAGUID(), uint64(0x505400FFFE123401)},
		{"LocalQKey", r.LocalQKey(), uint32(0)}, {"LocalQPN", r.LocalQPN(), uint32(0x11)},
		{"ResponderResources", r.ResponderResources(), uint8(1)}, {"LocalEECN", r.LocalEECN(), uint32(0)},
		{"InitiatorDepth", r.InitiatorDepth(), uint8(1)}, {"RemoteEECN", r.RemoteEECN(), uint32(0)},
		{"RemoteCMResponseTimeout", r.RemoteCMResponseTimeout(), uint8(20)},
		{"TransportServiceType", r.TransportServiceType(), uint8(0)},
		{"EndToEndFlowControl", r.EndToEndFlowControl(), false},
		{"StartingPSN", r.StartingPSN(), uint32(0x4B1D2E)},
		{"LocalCMResponseTimeout", r.LocalCMResponseTimeout(), uint8(20)},
		{"RetryCount", r.RetryCount(), uint8(7)}, {"PartitionKey", r.PartitionKey(), uint16(0xFFFF)},
		{"PathMTU", r.PathMTU(), uint8(3)}, {"RDCExists", r.RDCExists(), false},
		{"RNRRetryCount", r.RNRRetryCount(), uint8(7)}, {"MaxCMRetries", r.MaxCMRetries(), uint8(15)},
		{"SRQ", r.SRQ(), false}, {"ExtendedTransportType", r.ExtendedTransportType(), uint8(0)},
		{"PrimaryLocalPortLID", p.LocalLID(), uint16(0xFFFF)}, {"PrimaryRemotePortLID", p.RemoteLID(), uint16(0xFFFF)},
		{"PrimaryLocalPortGID", GIDAddr(p.LocalGID()), exClient},
		{"PrimaryRemotePortGID", GIDAddr(p.RemoteGID()), exServer},
		{"PrimaryLocalPortGID bytes", p.LocalGID(), [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 1}},
		{"PrimaryFlowLabel", p.FlowLabel(), uint32(0x308EF)}, {"PrimaryPacketRate", p.PacketRate(), uint8(0)},
		{"PrimaryTrafficClass", p.TrafficClass(), uint8(0)}, {"PrimaryHopLimit", p.HopLimit(), uint8(64)},
		{"PrimarySL", p.SL(), uint8(0)}, {"PrimarySubnetLocal", p.SubnetLocal(), false},
		{"PrimaryLocalACKTimeout", p.LocalACKTimeout(), uint8(17)},
		{"AlternateLocalPortLID", alt.LocalLID(), uint16(0)}, {"AlternateFlowLabel", alt.FlowLabel(), uint32(0)},
		{"AlternateGID", alt.LocalGID(), [16]byte{}}, {"AlternateLocalACKTimeout", alt.LocalACKTimeout(), uint8(0)},
		{"SAPSupported", r.SAPSupported(), false},
		{"CMA version", h.Version(), uint8(0)}, {"CMA IP version", h.IPVersion(), uint8(4)},
		{"CMA port", h.Port(), uint16(40000)}, {"CMA src", h.SrcAddr(), exClient}, {"CMA dst", h.DstAddr(), exServer},
		{"CMA valid", h.Validate(), nil},
	})
	if !bytes.Equal(r.PrivateData()[CMAHeaderLen:], make([]byte, REQPrivateDataLen-CMAHeaderLen)) {
		t.Error("user private data not zero")
	}
	if enc := buildSpecREQ(); !bytes.Equal(enc, b) {
		t.Fatalf("re-encoded REQ differs:\n got % x\nwant % x", enc, b)
	}
}

// TestGoldenREP: §8.5's REP decodes and re-encodes, and so do the RTU,
// DREQ, DREP and no-listener REJ the section describes.
func TestGoldenREP(t *testing.T) {
	b := append(hexDump(t, specREP), make([]byte, 192)...)
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	r := REP(m)
	checkFields(t, []fieldCheck{
		{"TID", m.TID(), uint64(0x000000028A3C1D27)}, {"AttrID", m.AttrID(), uint16(AttrREP)},
		{"LocalCommID", r.LocalCommID(), uint32(0x3E5A7781)}, {"RemoteCommID", r.RemoteCommID(), uint32(0x8A3C1D27)},
		{"LocalQKey", r.LocalQKey(), uint32(0)}, {"LocalQPN", r.LocalQPN(), uint32(0x12)},
		{"StartingPSN", r.StartingPSN(), uint32(0x71C2A0)}, {"VendorID", r.VendorID(), uint32(0)},
		{"LocalEECN", r.LocalEECN(), uint32(0)},
		{"ResponderResources", r.ResponderResources(), uint8(1)}, {"InitiatorDepth", r.InitiatorDepth(), uint8(1)},
		{"TargetACKDelay", r.TargetACKDelay(), uint8(15)}, {"FailoverAccepted", r.FailoverAccepted(), uint8(0)},
		{"EndToEndFlowControl", r.EndToEndFlowControl(), false}, {"RNRRetryCount", r.RNRRetryCount(), uint8(7)},
		{"SRQ", r.SRQ(), false}, {"LocalCAGUID", r.LocalCAGUID(), uint64(0x505400FFFE123402)},
	})
	e := NewCM(AttrREP, 0x000000028A3C1D27)
	er := REP(e)
	er.SetLocalCommID(0x3E5A7781)
	er.SetRemoteCommID(0x8A3C1D27)
	er.SetLocalQPN(0x12)
	er.SetStartingPSN(0x71C2A0)
	er.SetResponderResources(1)
	er.SetInitiatorDepth(1)
	er.SetTargetACKDelay(15)
	er.SetRNRRetryCount(7)
	er.SetLocalCAGUID(0x505400FFFE123402)
	if !bytes.Equal(e, b) {
		t.Fatalf("re-encoded REP differs:\n got % x\nwant % x", e, b)
	}

	// RTU: same TID, the two comm IDs, everything else 0.
	rtu := RTU(NewCM(AttrRTU, 0x000000028A3C1D27))
	rtu.SetLocalCommID(0x8A3C1D27)
	rtu.SetRemoteCommID(0x3E5A7781)
	want := make([]byte, Size)
	copy(want, hexDump(t, `
  0  00:  01 07 02 03 00 00 00 00 00 00 00 02 8a 3c 1d 27
 16  10:  00 14 00 00 00 00 00 00 8a 3c 1d 27 3e 5a 77 81`))
	if !bytes.Equal(rtu, want) {
		t.Fatalf("RTU % x", rtu[:32])
	}
	// DREQ: RemoteQPN 0x12 at MAD 32–34.
	dreq := DREQ(NewCM(AttrDREQ, 0x000000028A3C1D27))
	dreq.SetLocalCommID(0x8A3C1D27)
	dreq.SetRemoteCommID(0x3E5A7781)
	dreq.SetRemoteQPN(0x12)
	if !bytes.Equal(dreq[16:36], []byte{0, 0x15, 0, 0, 0, 0, 0, 0, 0x8a, 0x3c, 0x1d, 0x27, 0x3e, 0x5a, 0x77, 0x81, 0, 0, 0x12, 0}) ||
		dreq.RemoteQPN() != 0x12 {
		t.Fatalf("DREQ % x", dreq[:40])
	}
	drep := DREP(NewCM(AttrDREP, dreq.MAD().TID()))
	drep.SetLocalCommID(dreq.RemoteCommID())
	drep.SetRemoteCommID(dreq.LocalCommID())
	if drep.LocalCommID() != 0x3E5A7781 || drep.RemoteCommID() != 0x8A3C1D27 || drep.MAD().AttrID() != 0x16 {
		t.Fatal("DREP")
	}
	// REJ "no listener": LocalCommID = REQ CM bytes 4–7 (0 here),
	// RemoteCommID = REQ LocalCommID, MessageRejected 0, reason 8.
	req := REQ(hexDump(t, specREQ))
	rej := REJ(NewCM(AttrREJ, req.MAD().TID()))
	rej.SetLocalCommID(get32(req, 28))
	rej.SetRemoteCommID(req.LocalCommID())
	rej.SetMessageRejected(MsgREQ)
	rej.SetReason(RejInvalidServiceID)
	if !bytes.Equal(rej[16:36], []byte{0, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x8a, 0x3c, 0x1d, 0x27, 0, 0, 0, 8}) ||
		RejReasonString(rej.Reason()) != "invalid service ID" {
		t.Fatalf("REJ % x", rej[:40])
	}
}

// TestFieldRoundTrip sets every field of every view to a distinct value
// (all ones and a pattern), reads it back, and checks no field disturbs
// another.
func TestFieldRoundTrip(t *testing.T) {
	m := NewCM(AttrREQ, 1)
	r := REQ(m)
	r.SetVendorID(0xFFFFFF)
	r.SetRemoteCMResponseTimeout(31)
	r.SetTransportServiceType(3)
	r.SetEndToEndFlowControl(true)
	r.SetLocalCMResponseTimeout(0x15)
	r.SetRetryCount(5)
	r.SetPathMTU(5)
	r.SetRDCExists(true)
	r.SetRNRRetryCount(6)
	r.SetMaxCMRetries(9)
	r.SetSRQ(true)
	r.SetExtendedTransportType(1)
	p := r.Primary()
	p.SetFlowLabel(0xFFFFF)
	p.SetPacketRate(0x2A)
	p.SetSL(0xF)
	p.SetSubnetLocal(true)
	p.SetLocalACKTimeout(31)
	r.SetSAPSupported(true)
	a := r.Alternate()
	a.SetFlowLabel(0x12345)
	a.SetLocalACKTimeout(3)
	checkFields(t, []fieldCheck{
		{"VendorID", r.VendorID(), uint32(0xFFFFFF)}, {"byte28", m[28], uint8(0)},
		{"RemoteCMResponseTimeout", r.RemoteCMResponseTimeout(), uint8(31)},
		{"TransportServiceType", r.TransportServiceType(), uint8(3)}, {"EndToEndFlowControl", r.EndToEndFlowControl(), true},
		{"LocalCMResponseTimeout", r.LocalCMResponseTimeout(), uint8(0x15)}, {"RetryCount", r.RetryCount(), uint8(5)},
		{"PathMTU", r.PathMTU(), uint8(5)}, {"RDCExists", r.RDCExists(), true}, {"RNRRetryCount", r.RNRRetryCount(), uint8(6)},
		{"MaxCMRetries", r.MaxCMRetries(), uint8(9)}, {"SRQ", r.SRQ(), true}, {"ExtendedTransportType", r.ExtendedTransportType(), uint8(1)},
		{"FlowLabel", p.FlowLabel(), uint32(0xFFFFF)}, {"PacketRate", p.PacketRate(), uint8(0x2A)},
		{"SL", p.SL(), uint8(0xF)}, {"SubnetLocal", p.SubnetLocal(), true}, {"LocalACKTimeout", p.LocalACKTimeout(), uint8(31)},
		{"SAPSupported", r.SAPSupported(), true}, {"AltACK", a.LocalACKTimeout(), uint8(3)}, {"AltFL", a.FlowLabel(), uint32(0x12345)},
		{"byte115", m[115], uint8(0x2A)}, {"byte163", m[163], uint8(0x1C)}, {"byte118", m[118], uint8(0xF8)},
	})
	p.SetFlowLabel(0x308EF)
	if p.PacketRate() != 0x2A || m[114] != 0xF0 {
		t.Fatal("flow label disturbed the rate")
	}
	if r.SetPrivateData(make([]byte, 93)) || !r.SetPrivateData([]byte{1, 2}) || r.PrivateData()[1] != 2 || len(r.PrivateData()) != 92 {
		t.Fatal("REQ private data")
	}

	mra := MRA(NewCM(AttrMRA, 2))
	mra.SetLocalCommID(1)
	mra.SetRemoteCommID(2)
	mra.SetMessageMRAed(MsgREP)
	mra.SetServiceTimeout(24)
	checkFields(t, []fieldCheck{{"MRAed", mra.MessageMRAed(), uint8(1)}, {"ServiceTimeout", mra.ServiceTimeout(), uint8(24)},
		{"b32", mra[32], uint8(0x40)}, {"b33", mra[33], uint8(0xC0)}, {"len", len(mra.PrivateData()), 222}})

	rej := REJ(NewCM(AttrREJ, 3))
	rej.SetMessageRejected(MsgOther)
	rej.SetReason(RejTimeout)
	rej.SetARI([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	checkFields(t, []fieldCheck{{"MessageRejected", rej.MessageRejected(), uint8(2)}, {"InfoLen", rej.RejectedInfoLength(), uint8(8)},
		{"b33", rej[33], uint8(0x10)}, {"ARI", rej.ARI()[7], uint8(8)}, {"len", len(rej.PrivateData()), 148}})

	rep := REP(NewCM(AttrREP, 4))
	rep.SetLocalQPN(0xABCDEF)
	rep.SetVendorID(0x123456)
	rep.SetLocalEECN(0x111111)
	rep.SetStartingPSN(0xFFFFFF)
	rep.SetFailoverAccepted(2)
	rep.SetEndToEndFlowControl(true)
	rep.SetSRQ(true)
	rep.SetRNRRetryCount(5)
	rep.SetTargetACKDelay(16)
	checkFields(t, []fieldCheck{{"QPN", rep.LocalQPN(), uint32(0xABCDEF)}, {"VendorID", rep.VendorID(), uint32(0x123456)},
		{"EECN", rep.LocalEECN(), uint32(0x111111)}, {"PSN", rep.StartingPSN(), uint32(0xFFFFFF)},
		{"Failover", rep.FailoverAccepted(), uint8(2)}, {"FC", rep.EndToEndFlowControl(), true}, {"SRQ", rep.SRQ(), true},
		{"RNR", rep.RNRRetryCount(), uint8(5)}, {"ACK", rep.TargetACKDelay(), uint8(16)}, {"b50", rep[50], uint8(0x85)},
		{"b51", rep[51], uint8(0xB0)}, {"len", len(rep.PrivateData()), 196}})

	sreq := SIDRREQ(NewCM(AttrSIDRREQ, 5))
	sreq.SetRequestID(0xDEADBEEF)
	sreq.SetPartitionKey(0xFFFF)
	sreq.SetServiceID(0x11104D2)
	checkFields(t, []fieldCheck{{"RequestID", sreq.RequestID(), uint32(0xDEADBEEF)}, {"PKey", sreq.PartitionKey(), uint16(0xFFFF)},
		{"SID", sreq.ServiceID(), uint64(0x11104D2)}, {"len", len(sreq.PrivateData()), 216}})

	srep := SIDRREP(NewCM(AttrSIDRREP, 6))
	srep.SetRequestID(7)
	srep.SetStatus(SIDRReject)
	srep.SetVendorIDH(0x12)
	srep.SetQPN(0x123)
	srep.SetVendorIDL(0x34)
	srep.SetServiceID(0x11104D2)
	srep.SetQKey(0x01234567)
	srep.SetAdditionalInfo([]byte{9, 9})
	checkFields(t, []fieldCheck{{"RequestID", srep.RequestID(), uint32(7)}, {"Status", srep.Status(), uint8(2)},
		{"VendorIDH", srep.VendorIDH(), uint16(0x12)}, {"QPN", srep.QPN(), uint32(0x123)}, {"VendorIDL", srep.VendorIDL(), uint8(0x34)},
		{"SID", srep.ServiceID(), uint64(0x11104D2)}, {"QKey", srep.QKey(), uint32(0x01234567)},
		{"InfoLen", srep.AdditionalInfoLength(), uint8(2)}, {"len", len(srep.PrivateData()), 136}})

	var h [CMAHeaderLen]byte
	v6a, v6b := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	CMAHeader(h[:]).Encode(7, v6a, v6b)
	hh := CMAHeader(h[:])
	if hh.IPVersion() != 6 || hh.SrcAddr() != v6a || hh.DstAddr() != v6b || hh.Port() != 7 || hh.Validate() != nil {
		t.Fatal("IPv6 CMA header")
	}
	h[0] = 1
	if hh.Validate() == nil {
		t.Fatal("CMA version 1 accepted")
	}
}
