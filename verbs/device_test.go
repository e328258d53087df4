package verbs

// Device list, configuration parsing, device queries, address conflicts and
// the lifetime rules of contexts, PDs, MRs, CQs and QPs. The registry of
// devices is loaded once per process, so the parsing is tested through
// configDevices, parseConfig and parseEnv, which do not touch it.

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"
)

var devTestN atomic.Uint32

// openLoopback registers and opens a fresh loopback device.
func openLoopback(t *testing.T) (*Device, *Context) {
	t.Helper()
	d, err := AddLoopbackDevice(fmt.Sprintf("vd%d", devTestN.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return d, c
}

func TestDevicesListsLoopbackFirst(t *testing.T) {
	if v := strings.TrimSpace(os.Getenv(LoopbackEnv)); v == "off" || v == "none" || v == "0" {
		t.Skipf("%s=%s", LoopbackEnv, v)
	}
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 || devs[0].Name() != DefaultDeviceName {
		t.Fatalf("Devices() = %v, want %s first", devs, DefaultDeviceName)
	}
	d, err := DeviceByName(DefaultDeviceName)
	if err != nil || d != devs[0] {
		t.Fatalf("DeviceByName(%s) = %v, %v", DefaultDeviceName, d, err)
	}
	if _, err := DeviceByName("no-such-device"); !errors.Is(err, ErrNoDevice) || !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("DeviceByName(missing): %v", err)
	}
	// A copy: changing it does not change the registry.
	devs[0] = nil
	if again, _ := Devices(); again[0] == nil {
		t.Fatal("Devices returned the registry's own slice")
	}
	// Newly added devices come after it.
	added, err := AddLoopbackDevice(fmt.Sprintf("vd%d", devTestN.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Devices(); again[0].Name() != DefaultDeviceName || again[len(again)-1] != added {
		t.Fatalf("after AddLoopbackDevice: %v", again)
	}
}

func TestQueryDevice(t *testing.T) {
	t.Parallel()
	d, c := openLoopback(t)
	addr := c.Device().Addr()
	if !addr.Is4() || !addr.IsLoopback() || d.Addr() != addr {
		t.Fatalf("device address %s (Device.Addr %s), want a 127.0.0.0/8 address", addr, d.Addr())
	}
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.VendorID != 0xffffff || attr.PhysPortCnt != 1 || attr.NodeGUID != d.GUID() || attr.SysImageGUID != d.GUID() ||
		attr.MaxMRSize != ^uint64(0) || attr.PageSizeCap != 0xfffff000 || attr.MaxSGE != 32 || attr.MaxSGERD != 32 ||
		attr.AtomicCap != AtomicHCA || attr.MaxPKeys != 1 || attr.MaxQPRDAtom < 1 || attr.MaxQPInitRDAtom < 1 ||
		attr.MaxQPWR < 1024 || attr.MaxCQE < 1024 || attr.MaxInlineData < 64 || attr.FWVer != "0.0.0" {
		t.Errorf("QueryDevice = %+v", attr)
	}
	if attr.DeviceCapFlags&DeviceCapRCRNRNAKGen == 0 || attr.DeviceCapFlags&DeviceCapSysImageGUID == 0 {
		t.Errorf("device_cap_flags %s lack RC_RNR_NAK_GEN or SYS_IMAGE_GUID", attr.DeviceCapFlags)
	}
	// The GUID looks like rxe's: an EUI-64 with ff:fe in the middle.
	if g := d.GUID(); byte(g>>32) != 0xff || byte(g>>24) != 0xfe {
		t.Errorf("GUID %016x is not EUI-64 (xxxx:xxff:fexx:xxxx)", g)
	}

	port, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if port.State != PortActive || port.MaxMTU != MTU4096 || port.ActiveMTU != MTU4096 || port.LinkLayer != LinkLayerEthernet ||
		port.GIDTblLen != 2 || port.PKeyTblLen != 1 || port.LID != 0 || port.SMLID != 0 || port.PhysState != 5 ||
		port.MaxMsgSz < 1<<30 {
		t.Errorf("QueryPort(1) = %+v", port)
	}
	if _, err := c.QueryPort(2); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("QueryPort(2): %v", err)
	}
	if _, err := c.QueryPort(0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("QueryPort(0): %v", err)
	}

	g1, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if g1 != GIDFromIP(addr) || g1.String() != "::ffff:"+addr.String() || g1.IP() != addr {
		t.Errorf("GID[1] = %s, want ::ffff:%s", g1, addr)
	}
	g0, err := c.QueryGID(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g0.String(), "fe80::") || g0.SubnetPrefix() != 0xfe80<<48 || g0.InterfaceID() != d.GUID() {
		t.Errorf("GID[0] = %s, want fe80::<GUID %016x>", g0, d.GUID())
	}
	for _, bad := range [][2]int{{1, 2}, {1, -1}, {2, 0}} {
		if _, err := c.QueryGID(uint8(bad[0]), bad[1]); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("QueryGID(%d, %d): %v", bad[0], bad[1], err)
		}
	}
	if k, err := c.QueryPKey(1, 0); k != 0xffff || err != nil {
		t.Errorf("QueryPKey(1, 0) = %#x, %v", k, err)
	}
	if _, err := c.QueryPKey(1, 1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("QueryPKey(1, 1): %v", err)
	}
	if c.Device() != d || !strings.Contains(c.String(), addr.String()) {
		t.Errorf("Device() %v, String() %q", c.Device(), c.String())
	}
}

// TestAddressInUse is not parallel: it frees an address and takes it again,
// and the automatic devices of parallel tests would grab it in between.
func TestAddressInUse(t *testing.T) {
	d1, c1 := openLoopback(t)
	addr := c1.Device().Addr()
	dup, err := AddDevice(fmt.Sprintf("vd%d-dup", devTestN.Add(1)), addr)
	if err != nil {
		t.Fatal(err)
	}
	if dup.Addr() != addr {
		t.Fatalf("unopened device address %s, want %s", dup.Addr(), addr)
	}
	c2, err := dup.Open()
	if err == nil {
		c2.Close()
		t.Fatalf("a second device on %s opened", addr)
	}
	msg := err.Error()
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(msg, "already in use") ||
		!strings.Contains(msg, addr.String()) || !strings.Contains(msg, "another address") || !strings.Contains(msg, dup.Name()) {
		t.Fatalf("second device on %s: %q, want EADDRINUSE saying the address is in use and what to do", addr, msg)
	}
	// The first device still works, and a second context shares it.
	c3, err := d1.Open()
	if err != nil {
		t.Fatal(err)
	}
	if c3.Device().Addr() != addr {
		t.Fatalf("second context on %s, want %s", c3.Device().Addr(), addr)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c3.QueryGID(1, 1); err != nil {
		t.Fatalf("context after another context of the device closed: %v", err)
	}
	if err := c3.Close(); err != nil {
		t.Fatal(err)
	}
	// Once the first device is closed, the address is free again.
	switch c4, err := dup.Open(); {
	case errors.Is(err, syscall.EADDRINUSE):
		t.Logf("%s was taken by another process in between: %v", addr, err)
	case err != nil:
		t.Fatalf("open %s after the first device closed: %v", addr, err)
	default:
		if c4.Device().Addr() != addr {
			t.Errorf("address %s, want %s", c4.Device().Addr(), addr)
		}
		c4.Close()
	}

	// AddDevice's own checks.
	if _, err := AddDevice(dup.Name(), netip.MustParseAddr("127.0.0.1")); !errors.Is(err, ErrBusy) {
		t.Errorf("AddDevice with a taken name: %v", err)
	}
	if _, err := AddDevice("bad name", netip.MustParseAddr("127.0.0.1")); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("AddDevice with a bad name: %v", err)
	}
	if _, err := AddDevice(fmt.Sprintf("vd%d", devTestN.Add(1)), netip.Addr{}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("AddDevice without an address: %v", err)
	}
}

func TestObjectLifetimes(t *testing.T) {
	t.Parallel()
	_, c := openLoopback(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(make([]byte, 4096), AccessLocalWrite|AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	if mr.RKey() == 0 || mr.LKey() == 0 || mr.RKey() != mr.LKey() || mr.Len() != 4096 || mr.PD() != pd {
		t.Errorf("MR keys %#x/%#x len %d", mr.LKey(), mr.RKey(), mr.Len())
	}
	if local, err := pd.RegMR(make([]byte, 64), AccessLocalWrite); err != nil || local.RKey() != 0 {
		t.Errorf("local-only MR: R_Key %#x, %v (want 0)", local.RKey(), err)
	} else {
		local.Dereg()
	}
	if _, err := pd.RegMR(make([]byte, 64), AccessRemoteWrite); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("REMOTE_WRITE without LOCAL_WRITE: %v", err)
	}
	if _, err := pd.RegMR(make([]byte, 64), AccessLocalWrite|AccessOnDemand); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("ON_DEMAND: %v", err)
	}
	if err := pd.Dealloc(); !errors.Is(err, ErrBusy) || !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Dealloc of a PD with an MR: %v, want EBUSY", err)
	}

	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, ch)
	if err != nil {
		t.Fatal(err)
	}
	if cq.Cap() < 16 {
		t.Errorf("CQ capacity %d < 16", cq.Cap())
	}
	for _, n := range []int{0, -1, maxCQE + 1} {
		if _, err := c.CreateCQ(n, nil); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("CreateCQ(%d): %v", n, err)
		}
	}
	init := QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}}
	for _, bad := range []struct {
		name string
		mod  func(*QPInitAttr)
		is   error
	}{
		{"RAW_PACKET", func(a *QPInitAttr) { a.Type = QPTypeRawPacket }, syscall.EINVAL},
		{"type 99", func(a *QPInitAttr) { a.Type = 99 }, syscall.EINVAL},
		{"no send CQ", func(a *QPInitAttr) { a.SendCQ = nil }, syscall.EINVAL},
		{"max_send_sge 33", func(a *QPInitAttr) { a.Cap.MaxSendSGE = 33 }, syscall.EINVAL},
		{"max_inline_data 4096", func(a *QPInitAttr) { a.Cap.MaxInlineData = 4096 }, syscall.EINVAL},
		{"max_send_wr too big", func(a *QPInitAttr) { a.Cap.MaxSendWR = maxQPWR + 1 }, syscall.EINVAL},
	} {
		a := init
		bad.mod(&a)
		if qp, err := pd.CreateQP(a); !errors.Is(err, bad.is) {
			if qp != nil {
				qp.Destroy()
			}
			t.Errorf("CreateQP %s: %v, want %v", bad.name, err, bad.is)
		}
	}
	// A CQ of another context.
	_, other := openLoopback(t)
	ocq, err := other.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := init
	a.RecvCQ = ocq
	if _, err := pd.CreateQP(a); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("CreateQP with another context's CQ: %v", err)
	}
	if _, err := other.CreateCQ(4, ch); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("CreateCQ with another context's channel: %v", err)
	}
	ocq.Destroy()

	qp, err := pd.CreateQP(init)
	if err != nil {
		t.Fatal(err)
	}
	if got := qp.Cap(); got.MaxSendWR != 4 || got.MaxSendSGE < 1 || got.MaxRecvSGE < 1 {
		t.Errorf("granted caps %+v", got)
	}
	if qp.State() != QPStateReset || qp.Type() != QPTypeRC || qp.QPN() < 2 || qp.QPN() > 0xFFFFFF {
		t.Errorf("new QP: state %s type %s QPN %#x", qp.State(), qp.Type(), qp.QPN())
	}
	checkOneObject(t, qp)
	if err := cq.Destroy(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Destroy of a CQ used by a QP: %v, want ErrBusy", err)
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := mr.Dereg(); !errors.Is(err, ErrClosed) || !errors.Is(err, syscall.EBADF) {
		t.Errorf("second Dereg: %v", err)
	}
	if err := pd.Dealloc(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Dealloc of a PD with a QP: %v, want ErrBusy", err)
	}
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Destroy(); err != nil {
		t.Fatalf("Destroy of an unused CQ: %v", err)
	}
	var wc [1]WC
	if _, err := cq.Poll(wc[:]); !errors.Is(err, ErrClosed) {
		t.Errorf("Poll of a destroyed CQ: %v", err)
	}
	if err := cq.ReqNotify(false); !errors.Is(err, ErrClosed) {
		t.Errorf("ReqNotify of a destroyed CQ: %v", err)
	}
	if err := cq.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("second CQ Destroy: %v", err)
	}
	if _, err := pd.CreateQP(init); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateQP on a destroyed CQ: %v", err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatalf("Dealloc of an empty PD: %v", err)
	}
	if err := pd.Dealloc(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Dealloc: %v", err)
	}
	if _, err := pd.RegMR(make([]byte, 8), AccessLocalWrite); !errors.Is(err, ErrClosed) {
		t.Errorf("RegMR on a deallocated PD: %v", err)
	}
	if err := ch.Destroy(); err != nil {
		t.Fatal(err)
	}

	// After Close, the context refuses everything with ErrClosed.
	pd2, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checks := map[string]error{}
	_, checks["AllocPD"] = c.AllocPD()
	_, checks["CreateCQ"] = c.CreateCQ(4, nil)
	_, checks["CreateCompChannel"] = c.CreateCompChannel()
	_, checks["QueryDevice"] = c.QueryDevice()
	_, checks["QueryPort"] = c.QueryPort(1)
	_, checks["QueryGID"] = c.QueryGID(1, 1)
	_, checks["RegMR"] = pd2.RegMR(make([]byte, 8), AccessLocalWrite)
	_, checks["CreateQP"] = pd2.CreateQP(init)
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) || !errors.Is(err, syscall.EBADF) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// The soft device's limits, which the tests go just past.
const (
	maxCQE  = 1 << 20
	maxQPWR = 1 << 14
)

// checkOneObject checks that a soft device's QP and the provider's QP
// behind it are one allocation: the provider's object lies inside the
// softQP that holds verbs' QP, so a post finds the provider's state next
// to verbs' own instead of behind a pointer to somewhere else in memory.
func checkOneObject(t *testing.T, qp *QP) {
	t.Helper()
	start := uintptr(unsafe.Pointer(qp))
	prov := reflect.ValueOf(qp.p).Pointer() // the provider's QP object
	if prov < start+unsafe.Offsetof(softQP{}.prov) || prov >= start+unsafe.Sizeof(softQP{}) {
		t.Errorf("provider QP at %#x, outside the softQP at %#x (%d bytes)", prov, start, unsafe.Sizeof(softQP{}))
	}
}
