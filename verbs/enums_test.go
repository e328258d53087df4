package verbs

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestEnumWCStatusString(t *testing.T) {
	// ibv_wc_status_str, as tools.md §0.3 lists it.
	want := []string{
		0: "success", 1: "local length error", 2: "local QP operation error",
		3: "local EE context operation error", 4: "local protection error",
		5: "Work Request Flushed Error", 6: "memory management operation error",
		7: "bad response error", 8: "local access error",
		9: "remote invalid request error", 10: "remote access error",
		11: "remote operation error", 12: "transport retry counter exceeded",
		13: "RNR retry counter exceeded", 14: "local RDD violation error",
		15: "remote invalid RD request", 16: "aborted error",
		17: "invalid EE context number", 18: "invalid EE context state",
		19: "fatal error", 20: "response timeout error", 21: "general error",
		22: "TM error", 23: "TM software rendezvous",
	}
	for v, s := range want {
		if got := WCStatus(v).String(); got != s {
			t.Errorf("WCStatus(%d).String() = %q, want %q", v, got, s)
		}
	}
	for _, v := range []uint32{24, 100, 1 << 31, ^uint32(0)} {
		if got := WCStatus(v).String(); got != "unknown" {
			t.Errorf("WCStatus(%d).String() = %q, want unknown", v, got)
		}
	}
	consts := []WCStatus{WCSuccess, WCLocLenErr, WCLocQPOpErr, WCLocEECOpErr,
		WCLocProtErr, WCWRFlushErr, WCMWBindErr, WCBadRespErr, WCLocAccessErr,
		WCRemInvReqErr, WCRemAccessErr, WCRemOpErr, WCRetryExcErr,
		WCRNRRetryExcErr, WCLocRDDViolErr, WCRemInvRDReqErr, WCRemAbortErr,
		WCInvEECNErr, WCInvEECStateErr, WCFatalErr, WCRespTimeoutErr,
		WCGeneralErr, WCTMErr, WCTMRndvIncomplete}
	for i, c := range consts {
		if uint32(c) != uint32(i) {
			t.Errorf("status constant #%d has value %d", i, c)
		}
	}
}

func TestEnumOpcodes(t *testing.T) {
	wc := map[WCOpcode]struct {
		v    uint32
		name string
	}{
		WCSend: {0, "SEND"}, WCRDMAWrite: {1, "RDMA_WRITE"}, WCRDMARead: {2, "RDMA_READ"},
		WCCompSwap: {3, "COMP_SWAP"}, WCFetchAdd: {4, "FETCH_ADD"}, WCBindMW: {5, "BIND_MW"},
		WCLocalInv: {6, "LOCAL_INV"}, WCTSO: {7, "TSO"}, WCFlush: {8, "FLUSH"},
		WCAtomicWrite: {9, "ATOMIC_WRITE"}, WCRecv: {128, "RECV"},
		WCRecvRDMAWithImm: {129, "RECV_RDMA_WITH_IMM"},
	}
	for op, w := range wc {
		if uint32(op) != w.v || op.String() != w.name {
			t.Errorf("WC opcode %d %q, want %d %q", uint32(op), op, w.v, w.name)
		}
		if op.IsRecv() != (w.v >= 128) {
			t.Errorf("%s.IsRecv() = %v", op, op.IsRecv())
		}
	}
	if got := WCOpcode(77).String(); got != "WCOpcode(77)" {
		t.Errorf("unknown WC opcode: %q", got)
	}
	wr := map[WROpcode]struct {
		v    uint32
		name string
	}{
		WRRDMAWrite: {0, "RDMA_WRITE"}, WRRDMAWriteWithImm: {1, "RDMA_WRITE_WITH_IMM"},
		WRSend: {2, "SEND"}, WRSendWithImm: {3, "SEND_WITH_IMM"}, WRRDMARead: {4, "RDMA_READ"},
		WRAtomicCmpAndSwp: {5, "ATOMIC_CMP_AND_SWP"}, WRAtomicFetchAndAdd: {6, "ATOMIC_FETCH_AND_ADD"},
		WRLocalInv: {7, "LOCAL_INV"}, WRBindMW: {8, "BIND_MW"}, WRSendWithInv: {9, "SEND_WITH_INV"},
		WRTSO: {10, "TSO"}, WRDriver1: {11, "DRIVER1"}, WRFlush: {14, "FLUSH"},
		WRAtomicWrite: {15, "ATOMIC_WRITE"},
	}
	for op, w := range wr {
		if uint32(op) != w.v || op.String() != w.name {
			t.Errorf("WR opcode %d %q, want %d %q", uint32(op), op, w.v, w.name)
		}
	}
	if got := WROpcode(12).String(); got != "WROpcode(12)" {
		t.Errorf("unknown WR opcode: %q", got)
	}
}

func TestEnumFlags(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{WCFlags(0).String(), "0"},
		{(WCFlagGRH | WCFlagWithImm).String(), "GRH|WITH_IMM"},
		{(WCFlagIPCsumOK | WCFlagWithInv | 0x40).String(), "IP_CSUM_OK|WITH_INV|0x40"},
		{(SendSignaled | SendInline).String(), "SIGNALED|INLINE"},
		{(SendFence | SendSolicited | SendIPCsum).String(), "FENCE|SOLICITED|IP_CSUM"},
		{(AccessLocalWrite | AccessRemoteRead).String(), "LOCAL_WRITE|REMOTE_READ"},
		{(AccessRemoteWrite | AccessRemoteAtomic | AccessMWBind | AccessZeroBased).String(),
			"REMOTE_WRITE|REMOTE_ATOMIC|MW_BIND|ZERO_BASED"},
		{(AccessOnDemand | AccessHugeTLB | AccessRelaxedOrdering | 1<<21).String(),
			"ON_DEMAND|HUGETLB|RELAXED_ORDERING|0x200000"},
		{AccessFlags(0x1000).String(), "0x1000"},
		{(QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags).String(),
			"STATE|ACCESS_FLAGS|PKEY_INDEX|PORT"},
		{(QPAttrRateLimit | QPAttrDestQPN | QPAttrCap).String(), "CAP|DEST_QPN|RATE_LIMIT"},
		{QPAttrMask(1 << 22).String(), "0x400000"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	// Numeric values from rdma-core-surface.md §1.3.
	vals := []struct {
		got, want uint64
	}{
		{uint64(WCFlagGRH), 1}, {uint64(WCFlagWithImm), 2}, {uint64(WCFlagIPCsumOK), 4}, {uint64(WCFlagWithInv), 8},
		{uint64(SendFence), 1}, {uint64(SendSignaled), 2}, {uint64(SendSolicited), 4}, {uint64(SendInline), 8}, {uint64(SendIPCsum), 16},
		{uint64(AccessLocalWrite), 1}, {uint64(AccessRemoteWrite), 2}, {uint64(AccessRemoteRead), 4},
		{uint64(AccessRemoteAtomic), 8}, {uint64(AccessMWBind), 16}, {uint64(AccessZeroBased), 32},
		{uint64(AccessOnDemand), 64}, {uint64(AccessHugeTLB), 128}, {uint64(AccessFlushGlobal), 256},
		{uint64(AccessFlushPersistent), 512}, {uint64(AccessRelaxedOrdering), 1 << 20},
		{uint64(QPAccessMask), 31},
	}
	for i, v := range vals {
		if v.got != v.want {
			t.Errorf("value #%d = %d, want %d", i, v.got, v.want)
		}
	}
}

func TestEnumQPAttrMaskBits(t *testing.T) {
	bits := []QPAttrMask{QPAttrState, QPAttrCurState, QPAttrEnSQDAsyncNotify,
		QPAttrAccessFlags, QPAttrPKeyIndex, QPAttrPort, QPAttrQKey, QPAttrAV,
		QPAttrPathMTU, QPAttrTimeout, QPAttrRetryCnt, QPAttrRNRRetry, QPAttrRQPSN,
		QPAttrMaxQPRDAtomic, QPAttrAltPath, QPAttrMinRNRTimer, QPAttrSQPSN,
		QPAttrMaxDestRDAtomic, QPAttrPathMigState, QPAttrCap, QPAttrDestQPN}
	names := []string{"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS",
		"PKEY_INDEX", "PORT", "QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT",
		"RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC", "ALT_PATH", "MIN_RNR_TIMER",
		"SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN"}
	var all QPAttrMask
	for i, b := range bits {
		if b != 1<<i {
			t.Errorf("mask bit %s = %#x, want 1<<%d", names[i], uint32(b), i)
		}
		if b.String() != names[i] {
			t.Errorf("(1<<%d).String() = %q, want %q", i, b, names[i])
		}
		all |= b
	}
	if QPAttrRateLimit != 1<<25 || QPAttrRateLimit.String() != "RATE_LIMIT" {
		t.Errorf("RATE_LIMIT = %#x %q", uint32(QPAttrRateLimit), QPAttrRateLimit)
	}
	if all|QPAttrRateLimit != QPAttrAll {
		t.Errorf("QPAttrAll = %#x, want %#x", uint32(QPAttrAll), uint32(all|QPAttrRateLimit))
	}
}

func TestEnumStates(t *testing.T) {
	names := []string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"}
	states := []QPState{QPStateReset, QPStateInit, QPStateRTR, QPStateRTS,
		QPStateSQD, QPStateSQE, QPStateErr, QPStateUnknown}
	for i, s := range states {
		if uint32(s) != uint32(i) || s.String() != names[i] {
			t.Errorf("state %d %q, want %d %q", uint32(s), s, i, names[i])
		}
	}
	if got := QPState(8).String(); got != "QPState(8)" {
		t.Errorf("QPState(8) = %q", got)
	}
	types := map[QPType]struct {
		v    uint32
		name string
	}{
		QPTypeRC: {2, "RC"}, QPTypeUC: {3, "UC"}, QPTypeUD: {4, "UD"},
		QPTypeRawPacket: {8, "RAW_PACKET"}, QPTypeXRCSend: {9, "XRC_SEND"}, QPTypeXRCRecv: {10, "XRC_RECV"},
	}
	for ty, w := range types {
		if uint32(ty) != w.v || ty.String() != w.name {
			t.Errorf("QP type %d %q, want %d %q", uint32(ty), ty, w.v, w.name)
		}
	}
	if got := QPType(1).String(); got != "QPType(1)" {
		t.Errorf("QPType(1) = %q", got)
	}
	ps := []string{"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"}
	for i, want := range ps {
		if got := PortState(i).String(); got != want {
			t.Errorf("PortState(%d) = %q, want %q", i, got, want)
		}
	}
	if PortDown != 1 || PortActive != 4 || PortActive.String() != "PORT_ACTIVE" {
		t.Error("port state values")
	}
	if got := PortState(6).String(); got != "PortState(6)" {
		t.Errorf("PortState(6) = %q", got)
	}
}

func TestEnumMTU(t *testing.T) {
	want := map[MTU]int{MTU256: 256, MTU512: 512, MTU1024: 1024, MTU2048: 2048, MTU4096: 4096}
	for m, n := range want {
		if m.Bytes() != n {
			t.Errorf("%d.Bytes() = %d, want %d", uint32(m), m.Bytes(), n)
		}
		if m.String() != fmt.Sprint(n) {
			t.Errorf("%d.String() = %q", uint32(m), m)
		}
		if got, ok := MTUFromBytes(n); !ok || got != m {
			t.Errorf("MTUFromBytes(%d) = %d, %v", n, got, ok)
		}
		if !m.Valid() {
			t.Errorf("%s not valid", m)
		}
	}
	if MTU256 != 1 || MTU4096 != 5 {
		t.Error("MTU codes")
	}
	for _, m := range []MTU{0, 6, 100} {
		if m.Bytes() != 0 || m.Valid() {
			t.Errorf("MTU(%d) valid", uint32(m))
		}
		if m.String() != fmt.Sprintf("MTU(%d)", uint32(m)) {
			t.Errorf("MTU(%d).String() = %q", uint32(m), m)
		}
	}
	for _, n := range []int{0, 255, 257, 1500, 8192, -1} {
		if _, ok := MTUFromBytes(n); ok {
			t.Errorf("MTUFromBytes(%d) ok", n)
		}
	}
	floor := map[int]MTU{256: MTU256, 511: MTU256, 1500: MTU1024, 4096: MTU4096, 9000: MTU4096, 2048: MTU2048}
	for n, m := range floor {
		if got, ok := MTUFloor(n); !ok || got != m {
			t.Errorf("MTUFloor(%d) = %s, %v; want %s", n, got, ok, m)
		}
	}
	if _, ok := MTUFloor(255); ok {
		t.Error("MTUFloor(255) ok")
	}
}

func TestEnumDeviceAndPort(t *testing.T) {
	checks := []struct{ got, want string }{
		{LinkLayerUnspecified.String(), "Unspecified"},
		{LinkLayerInfiniBand.String(), "InfiniBand"},
		{LinkLayerEthernet.String(), "Ethernet"},
		{LinkLayer(9).String(), "Unknown"},
		{NodeCA.String(), "InfiniBand channel adapter"},
		{NodeSwitch.String(), "InfiniBand switch"},
		{NodeRouter.String(), "InfiniBand router"},
		{NodeRNIC.String(), "iWARP NIC"},
		{NodeUSNIC.String(), "usNIC"},
		{NodeUSNICUDP.String(), "usNIC UDP"},
		{NodeUnspecified.String(), "unknown"},
		{NodeUnknown.String(), "unknown"},
		{TransportIB.String(), "InfiniBand"},
		{TransportIWARP.String(), "iWARP"},
		{TransportUSNIC.String(), "usNIC"},
		{TransportUSNICUDP.String(), "usNIC UDP"},
		{TransportUnspecified.String(), "unspecified"},
		{TransportUnknown.String(), "invalid transport"},
		{AtomicNone.String(), "ATOMIC_NONE"},
		{AtomicHCA.String(), "ATOMIC_HCA"},
		{AtomicGlob.String(), "ATOMIC_GLOB"},
		{AtomicCap(3).String(), "AtomicCap(3)"},
		{GIDTypeIB.String(), "IB"},
		{GIDTypeRoCEv1.String(), "RoCE v1"},
		{GIDTypeRoCEv2.String(), "RoCE v2"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	ints := []struct{ got, want int64 }{
		{int64(LinkLayerEthernet), 2}, {int64(NodeUnknown), -1}, {int64(NodeCA), 1},
		{int64(NodeUnspecified), 7}, {int64(TransportUnknown), -1}, {int64(TransportIB), 0},
		{int64(TransportUnspecified), 4}, {int64(AtomicGlob), 2}, {int64(GIDTypeRoCEv2), 2},
		{int64(DeviceCapResizeMaxWR), 1}, {int64(DeviceCapCurrQPStateMod), 128},
		{int64(DeviceCapPortActiveEvent), 1 << 10}, {int64(DeviceCapNNotifyCQ), 1 << 14},
		{int64(DeviceCapMemWindow), 1 << 17}, {int64(DeviceCapXRC), 1 << 20},
		{int64(DeviceCapMemWindowType2B), 1 << 24}, {int64(DeviceCapManagedFlowSteering), 1 << 29},
		{int64(DeviceCapRawScatterFCS), 1 << 34}, {int64(DeviceCapPCIWriteEndPadding), 1 << 36},
		{int64(DeviceCapCCDMABounce), 1 << 41},
	}
	for i, c := range ints {
		if c.got != c.want {
			t.Errorf("value #%d = %d, want %d", i, c.got, c.want)
		}
	}
	// The rxe sample in tools.md: device_cap_flags 0x01223c76.
	names, unknown := DeviceCapFlags(0x01223c76).Names()
	wantNames := []string{"BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "AUTO_PATH_MIG",
		"CHANGE_PHY_PORT", "UD_AV_PORT_ENFORCE", "PORT_ACTIVE_EVENT",
		"SYS_IMAGE_GUID", "RC_RNR_NAK_GEN", "SRQ_RESIZE", "MEM_WINDOW",
		"MEM_MGT_EXTENSIONS", "MEM_WINDOW_TYPE_2B"}
	if !reflect.DeepEqual(names, wantNames) || unknown != 0 {
		t.Errorf("Names() = %v, %#x; want %v", names, uint64(unknown), wantNames)
	}
	_, unknown = (DeviceCapRawScatterFCS | 1<<15 | 1<<50).Names()
	if unknown != 1<<15|1<<50 {
		t.Errorf("unknown = %#x", uint64(unknown))
	}
	if got := (DeviceCapXRC | DeviceCapCCDMABounce).String(); got != "XRC|CC_DMA_BOUNCE" {
		t.Errorf("String = %q", got)
	}
}

func TestEnumEventType(t *testing.T) {
	text := []string{"CQ error", "local work queue catastrophic error",
		"invalid request local work queue error", "local access violation work queue error",
		"communication established", "send queue drained", "path migrated",
		"path migration request error", "local catastrophic error", "port active",
		"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
		"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change",
		// libibverbs stops describing after GID_CHANGE.
		"unknown", "unknown", "unknown"}
	for i, want := range text {
		if got := EventType(i).String(); got != want {
			t.Errorf("EventType(%d).String() = %q, want %q", i, got, want)
		}
	}
	evs := []EventType{EventCQErr, EventQPFatal, EventQPReqErr, EventQPAccessErr,
		EventCommEst, EventSQDrained, EventPathMig, EventPathMigErr, EventDeviceFatal,
		EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange,
		EventSRQErr, EventSRQLimitReached, EventQPLastWQEReached, EventClientReregister,
		EventGIDChange, EventWQFatal, EventDeviceSpeedChange}
	for i, e := range evs {
		if uint32(e) != uint32(i) {
			t.Errorf("event #%d = %d", i, e)
		}
		if !strings.HasPrefix(e.Name(), "IBV_EVENT_") {
			t.Errorf("Name(%d) = %q", i, e.Name())
		}
	}
	if EventQPFatal.Name() != "IBV_EVENT_QP_FATAL" || EventDeviceSpeedChange.Name() != "IBV_EVENT_DEVICE_SPEED_CHANGE" {
		t.Error("event names")
	}
	if EventType(21).Name() != "EventType(21)" {
		t.Errorf("EventType(21).Name() = %q", EventType(21).Name())
	}
}

func TestGIDStringParse(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"::ffff:127.0.0.1", "::ffff:127.0.0.1"},
		{"fe80::5054:ff:fe12:3456", "fe80::5054:ff:fe12:3456"},
		{"FE80:0000:0000:0000:5054:00FF:FE12:3456", "fe80::5054:ff:fe12:3456"},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.1"},
		{"::ffff:7f00:1", "::ffff:127.0.0.1"},
		{"::", "::"},
		{"::1", "::1"},
		{"2001:db8::1", "2001:db8::1"},
		{"1:0:0:2:3:0:0:4", "1::2:3:0:0:4"},    // first of two equal runs
		{"1:0:0:2:0:0:0:3", "1:0:0:2::3"},      // longest run
		{"1:2:3:4:5:6:7:0", "1:2:3:4:5:6:7:0"}, // a single zero group is not compressed
		{"1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"}, // nor here
		{"1:2:3:4:5:6:0:0", "1:2:3:4:5:6::"},   // trailing run
		{"::1.2.3.4", "::1.2.3.4"},             // IPv4-compatible, as glibc prints it
		{"::ffff:0:0", "::ffff:0.0.0.0"},       // mapped with a zero address
		{"0:0:0:0:1:ffff:102:304", "::1:ffff:102:304"},
		{"192.0.2.7", "::ffff:192.0.2.7"}, // plain IPv4 accepted
	}
	for _, tc := range tests {
		g, err := ParseGID(tc.in)
		if err != nil {
			t.Errorf("ParseGID(%q): %v", tc.in, err)
			continue
		}
		if got := g.String(); got != tc.want {
			t.Errorf("ParseGID(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		back, err := ParseGID(g.String())
		if err != nil || back != g {
			t.Errorf("round trip of %q: %v, %v", g, back, err)
		}
	}
	for _, bad := range []string{"", "bogus", "fe80::1%eth0", "1:2:3:4:5:6:7:8:9", "::fffff", "1.2.3"} {
		if _, err := ParseGID(bad); !errors.Is(err, ErrInvalidArgument) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("ParseGID(%q) error = %v, want invalid argument", bad, err)
		}
	}
}

// TestGIDStringMatchesNetip compares random GIDs with netip's RFC 5952 text,
// which agrees with inet_ntop except for IPv4-compatible addresses.
func TestGIDStringMatchesNetip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var g GID
		for i := 0; i < 8; i++ {
			switch r.IntN(3) {
			case 0: // zero group
			case 1:
				g[2*i+1] = byte(r.IntN(256))
			default:
				g[2*i], g[2*i+1] = byte(r.IntN(256)), byte(r.IntN(256))
			}
		}
		if r.IntN(8) == 0 {
			copy(g[:], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
		}
		a := netip.AddrFrom16(g)
		compat := [12]byte(g[:12]) == [12]byte{} && (g[12] != 0 || g[13] != 0)
		if !compat {
			if got, want := g.String(), a.String(); got != want {
				t.Fatalf("% x: got %q, netip %q", g[:], got, want)
			}
		}
		back, err := ParseGID(g.String())
		if err != nil || back != g {
			t.Fatalf("round trip %q: %v %v", g, back, err)
		}
	}
}

func TestGIDFromIP(t *testing.T) {
	v4 := netip.MustParseAddr("127.0.0.1")
	g := GIDFromIP(v4)
	want := GID{10: 0xff, 11: 0xff, 12: 127, 15: 1}
	if g != want {
		t.Fatalf("GIDFromIP(127.0.0.1) = % x", g[:])
	}
	if g.String() != "::ffff:127.0.0.1" || g.IP() != v4 || !g.IP().Is4() {
		t.Errorf("IPv4 GID: %s, %s", g, g.IP())
	}
	v6 := netip.MustParseAddr("fe80::5054:ff:fe12:3456%eth0")
	g6 := GIDFromIP(v6)
	if g6.String() != "fe80::5054:ff:fe12:3456" || g6.IP() != v6.WithZone("") {
		t.Errorf("IPv6 GID: %s, %s", g6, g6.IP())
	}
	if g6.SubnetPrefix() != 0xfe80000000000000 || g6.InterfaceID() != 0x505400fffe123456 {
		t.Errorf("prefix %#x id %#x", g6.SubnetPrefix(), g6.InterfaceID())
	}
	if GIDFromIP(netip.Addr{}) != (GID{}) || !(GID{}).IsZero() || g.IsZero() {
		t.Error("zero GID handling")
	}
	if !(GID{}).InterfaceIDZero() || g.InterfaceIDZero() || g6.InterfaceIDZero() {
		t.Error("InterfaceIDZero")
	}
	prefixOnly := GID{0: 0xfe, 1: 0x80}
	if !prefixOnly.InterfaceIDZero() || prefixOnly.IsZero() {
		t.Error("prefix-only GID")
	}
}

func TestGIDText(t *testing.T) {
	type s struct{ G GID }
	in := s{GIDFromIP(netip.MustParseAddr("192.0.2.1"))}
	b, err := json.Marshal(in)
	if err != nil || string(b) != `{"G":"::ffff:192.0.2.1"}` {
		t.Fatalf("Marshal: %s %v", b, err)
	}
	var out s
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("Unmarshal: %v %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"G":"nope"}`), &out); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad text: %v", err)
	}
}

func TestErrorSentinels(t *testing.T) {
	tests := []struct {
		err   error
		errno syscall.Errno
		msg   string
	}{
		{ErrInvalidArgument, syscall.EINVAL, "verbs: invalid argument"},
		{ErrNoMemory, syscall.ENOMEM, "verbs: cannot allocate memory"},
		{ErrNotSupported, syscall.EOPNOTSUPP, "verbs: operation not supported"},
		{ErrBusy, syscall.EBUSY, "verbs: device or resource busy"},
		{ErrNoDevice, syscall.ENODEV, "verbs: no such device"},
		{ErrClosed, syscall.EBADF, "verbs: object already closed"},
	}
	for _, tc := range tests {
		if tc.err.Error() != tc.msg {
			t.Errorf("message %q, want %q", tc.err, tc.msg)
		}
		if !errors.Is(tc.err, tc.errno) {
			t.Errorf("%v is not %v", tc.err, tc.errno)
		}
		if ErrnoOf(tc.err) != tc.errno {
			t.Errorf("ErrnoOf(%v) = %v", tc.err, ErrnoOf(tc.err))
		}
		wrapped := verrorf(tc.err, "create QP: %d too many", 5)
		want := "verbs: create QP: 5 too many: " + strings.TrimPrefix(tc.msg, "verbs: ")
		if wrapped.Error() != want {
			t.Errorf("wrapped message %q, want %q", wrapped, want)
		}
		if !errors.Is(wrapped, tc.err) || !errors.Is(wrapped, tc.errno) {
			t.Errorf("%v does not wrap %v / %v", wrapped, tc.err, tc.errno)
		}
		gowrapped := fmt.Errorf("outer: %w", wrapped)
		if !errors.Is(gowrapped, tc.errno) || ErrnoOf(gowrapped) != tc.errno {
			t.Errorf("fmt-wrapped %v lost its errno", gowrapped)
		}
		for _, other := range tests {
			if other.err != tc.err && (errors.Is(tc.err, other.err) || errors.Is(tc.err, other.errno)) {
				t.Errorf("%v matches %v", tc.err, other.err)
			}
		}
	}
	if !errors.Is(ErrNotSupported, errors.ErrUnsupported) {
		t.Error("ErrNotSupported should match errors.ErrUnsupported")
	}
	if ErrnoOf(nil) != 0 || ErrnoOf(errors.New("x")) != syscall.EIO {
		t.Error("ErrnoOf defaults")
	}
}

func TestErrorPostError(t *testing.T) {
	inner := verrorf(ErrNoMemory, "post send: queue full (%d WRs)", 16)
	var err error = &PostError{Index: 3, Err: inner}
	if got, want := err.Error(), "verbs: work request 3: post send: queue full (16 WRs): cannot allocate memory"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrNoMemory) || !errors.Is(err, syscall.ENOMEM) || errors.Is(err, ErrInvalidArgument) {
		t.Error("errors.Is through PostError")
	}
	var pe *PostError
	if !errors.As(fmt.Errorf("wrap: %w", err), &pe) || pe.Index != 3 {
		t.Error("errors.As PostError")
	}
	if errors.Unwrap(err) != inner {
		t.Error("Unwrap")
	}
	if ErrnoOf(err) != syscall.ENOMEM {
		t.Error("ErrnoOf PostError")
	}
	plain := &PostError{Index: 0, Err: syscall.EINVAL}
	if plain.Error() != "verbs: work request 0: invalid argument" {
		t.Errorf("plain = %q", plain.Error())
	}
	if (&PostError{Index: 2}).Error() != "verbs: work request 2 failed" {
		t.Error("nil Err message")
	}
}
