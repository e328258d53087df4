package verbs

// Device list, configuration parsing, device queries, address conflicts and
// the lifetime rules of contexts, PDs, MRs, CQs and QPs. The registry of
// devices is loaded once per process, so the parsing is tested through
// configDevices, parseConfig and parseEnv, which do not touch it.

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
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

func TestParseEnv(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [][2]string
		err  string
	}{
		{"", nil, ""},
		{"   ", nil, ""},
		{"rgo1=127.0.0.9", [][2]string{{"rgo1", "127.0.0.9"}}, ""},
		{" rgo1 = 127.0.0.9 , rgo2=::1,rgo3=auto", [][2]string{{"rgo1", "127.0.0.9"}, {"rgo2", "::1"}, {"rgo3", "auto"}}, ""},
		{"rgo1", nil, `RDMA_GO_DEVICES: want name=address, got "rgo1"`},
		{"rgo1=127.0.0.9,", nil, `want name=address, got ""`},
		{"rgo1=127.0.0.9;rgo2=127.0.0.10", [][2]string{{"rgo1", "127.0.0.9;rgo2=127.0.0.10"}}, ""}, // caught by the address check
	} {
		got, err := parseEnv(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("parseEnv(%q) error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("parseEnv(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	const good = `# rdma-go devices
rgo1 127.0.0.9
   rgo2	::1   # an IPv6 one

rgo3 auto#no space before the comment
# rgo4 127.0.0.10
`
	got, err := parseConfig(strings.NewReader(good), "devices")
	want := [][2]string{{"rgo1", "127.0.0.9"}, {"rgo2", "::1"}, {"rgo3", "auto"}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parseConfig = %v, %v; want %v", got, err, want)
	}
	if got, err := parseConfig(strings.NewReader(""), "empty"); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %v, %v", got, err)
	}
	for _, tc := range []struct{ in, err string }{
		{"rgo1 127.0.0.9\nrgo2\n", `/etc/x:2: want "name address", got "rgo2"`},
		{"\n\n  rgo1 127.0.0.9 extra # c\n", `/etc/x:3: want "name address", got "rgo1 127.0.0.9 extra"`},
		{"rgo1=127.0.0.9\n", `/etc/x:1: want "name address", got "rgo1=127.0.0.9"`},
	} {
		_, err := parseConfig(strings.NewReader(tc.in), "/etc/x")
		if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("parseConfig(%q): %v, want an error containing %q", tc.in, err, tc.err)
		}
	}
}

// fakeEnv is a getenv over a map.
func fakeEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func describe(devs []*Device) string {
	var b []string
	for _, d := range devs {
		a := d.addr.String()
		if d.auto {
			a = "auto"
		}
		b = append(b, d.name+"="+a)
	}
	return strings.Join(b, ",")
}

func TestConfigDevices(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfgFile := write("cfg", "# test\nfile1 127.0.0.20\nfile2 auto\n")
	empty := t.TempDir() // an XDG_CONFIG_HOME without rdma-go/devices
	xdg := filepath.Dir(filepath.Dir(write("xdg/rdma-go/devices", "xdg1 127.0.0.21\n")))
	home := filepath.Dir(filepath.Dir(filepath.Dir(write("home/.config/rdma-go/devices", "home1 127.0.0.22\n"))))

	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // prefix of the list
		err  string
		is   error
	}{
		{"default", map[string]string{"XDG_CONFIG_HOME": empty}, "rgo0=auto", "", nil},
		{"loopback address", map[string]string{LoopbackEnv: "127.0.0.5", ConfigFileEnv: cfgFile},
			"rgo0=127.0.0.5,file1=127.0.0.20,file2=auto", "", nil},
		{"loopback off", map[string]string{LoopbackEnv: "off", ConfigFileEnv: cfgFile}, "file1=127.0.0.20,file2=auto", "", nil},
		{"config file then env", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "env1=::1,env2=127.0.0.30"},
			"rgo0=auto,file1=127.0.0.20,file2=auto,env1=::1,env2=127.0.0.30", "", nil},
		{"XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home}, "rgo0=auto,xdg1=127.0.0.21", "", nil},
		{"HOME", map[string]string{"HOME": home}, "rgo0=auto,home1=127.0.0.22", "", nil},
		{"IPv4-mapped address", map[string]string{LoopbackEnv: "off", ConfigFileEnv: cfgFile, DevicesEnv: "m=::ffff:127.0.0.40"},
			"file1=127.0.0.20,file2=auto,m=127.0.0.40", "", nil},
		{"missing config file", map[string]string{ConfigFileEnv: filepath.Join(dir, "nope")}, "",
			"RDMA_GO_CONFIG", fs.ErrNotExist},
		{"bad config line", map[string]string{ConfigFileEnv: write("bad", "ok 127.0.0.1\nnot-ok\n")}, "",
			"bad:2: want \"name address\"", syscall.EINVAL},
		{"bad env item", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "x"}, "",
			"RDMA_GO_DEVICES: want name=address", syscall.EINVAL},
		{"bad address", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "x=127.0.0.300"}, "",
			`device x: bad address "127.0.0.300"`, syscall.EINVAL},
		{"bad loopback address", map[string]string{LoopbackEnv: "localhost"}, "",
			`RDMA_GO_LOOPBACK="localhost"`, syscall.EINVAL},
		{"bad name", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "a/b=127.0.0.1"}, "",
			`bad device name "a/b"`, syscall.EINVAL},
		{"empty name", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "=127.0.0.1"}, "",
			`bad device name ""`, syscall.EINVAL},
		{"duplicate name", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "file1=127.0.0.2"}, "",
			"device file1 already exists", syscall.EBUSY},
		{"duplicate loopback", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "rgo0=127.0.0.2"}, "",
			"device rgo0 already exists", ErrBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs, err := configDevices(fakeEnv(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, tc.is) {
					t.Fatalf("configDevices: %v (%s), want an error containing %q wrapping %v", err, describe(devs), tc.err, tc.is)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := describe(devs)
			if !strings.HasPrefix(got+",", tc.want+",") {
				t.Fatalf("devices %s, want %s", got, tc.want)
			}
			if _, explicit := tc.env[ConfigFileEnv]; explicit && got != tc.want {
				t.Fatalf("devices %s, want exactly %s", got, tc.want)
			}
			for _, d := range devs {
				if d.guid == 0 || d.guid != guidFor(d.name, d.addr) {
					t.Errorf("device %s GUID %#x", d.name, d.guid)
				}
			}
		})
	}
}

func TestQueryDevice(t *testing.T) {
	t.Parallel()
	d, c := openLoopback(t)
	addr := c.Addr()
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
	addr := c1.Addr()
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
	if c3.Addr() != addr {
		t.Fatalf("second context on %s, want %s", c3.Addr(), addr)
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
		if c4.Addr() != addr {
			t.Errorf("address %s, want %s", c4.Addr(), addr)
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
