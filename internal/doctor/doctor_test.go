package doctor

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
	"golang.org/x/sys/unix"
)

// fakeEnv is a machine with no kernel devices, an unlimited memlock limit
// and the devices given.
func fakeEnv(devs ...*verbs.Device) Env {
	return Env{
		Kernel:  func() KernelProbe { return KernelProbe{SysfsErr: os.ErrNotExist} },
		DevDir:  "/nonexistent",
		Access:  func(string) error { return nil },
		Memlock: func() (uint64, uint64, error) { return ^uint64(0), ^uint64(0), nil },
		Devices: func() ([]*verbs.Device, error) { return devs, nil },
	}
}

// find returns the first finding of check, failing the test without one.
func find(t *testing.T, fs []Finding, check string) Finding {
	t.Helper()
	for _, f := range fs {
		if f.Check == check {
			return f
		}
	}
	t.Fatalf("no %q finding among %+v", check, fs)
	return Finding{}
}

// want checks a finding's level and that its message and fix hold the
// given words.
func want(t *testing.T, f Finding, l Level, msg, fix string) {
	t.Helper()
	if f.Level != l || !strings.Contains(f.Message, msg) || !strings.Contains(f.Fix, fix) {
		t.Errorf("finding %+v: want level %s, message with %q, fix with %q", f, l, msg, fix)
	}
}

func TestKernelChecks(t *testing.T) {
	dir := t.TempDir()
	uverbs := filepath.Join(dir, "uverbs0")
	if err := os.WriteFile(uverbs, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	denied := errors.New("permission denied")
	for _, tc := range []struct {
		name    string
		probe   KernelProbe
		devDir  string
		access  error
		check   string
		level   Level
		msg     string
		fix     string
		noCheck string // a check that must not appear
	}{
		{name: "no driver", probe: KernelProbe{SysfsErr: os.ErrNotExist}, check: "kernel", level: Info,
			msg: "no kernel RDMA devices", fix: "modprobe rdma_rxe", noCheck: "rdma-core"},
		{name: "no uverbs", probe: KernelProbe{Sysfs: []string{"rxe0"}, Listed: []string{"rxe0"}}, devDir: "/nonexistent",
			check: "devfs", level: Error, msg: "no uverbs devices", fix: "modprobe ib_uverbs"},
		{name: "no access", probe: KernelProbe{Sysfs: []string{"rxe0"}, Listed: []string{"rxe0"}}, devDir: dir, access: denied,
			check: "devfs", level: Error, msg: "no read/write access to " + uverbs, fix: "rdma group"},
		{name: "access", probe: KernelProbe{Sysfs: []string{"rxe0"}, Listed: []string{"rxe0"}}, devDir: dir,
			check: "devfs", level: OK, msg: uverbs},
		{name: "no library", probe: KernelProbe{Sysfs: []string{"mlx5_0"}, LibErr: errors.New("libibverbs.so.1: cannot open shared object file")}, devDir: dir,
			check: "rdma-core", level: Error, msg: "cannot open shared object file", fix: "apt install libibverbs1"},
		{name: "no provider", probe: KernelProbe{Sysfs: []string{"mlx5_0"}}, devDir: dir,
			check: "rdma-core", level: Error, msg: "lists none of mlx5_0", fix: "ibverbs-providers"},
		{name: "library", probe: KernelProbe{Sysfs: []string{"rxe0"}, Listed: []string{"rxe0"}}, devDir: dir,
			check: "rdma-core", level: OK, msg: "lists rxe0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := fakeEnv()
			env.Kernel = func() KernelProbe { return tc.probe }
			env.DevDir = tc.devDir
			env.Access = func(string) error { return tc.access }
			fs := Run(context.Background(), Config{Env: env})
			want(t, find(t, fs, tc.check), tc.level, tc.msg, tc.fix)
			for _, f := range fs {
				if tc.noCheck != "" && f.Check == tc.noCheck {
					t.Errorf("unexpected finding %+v", f)
				}
			}
		})
	}
}

func TestDeviceListChecks(t *testing.T) {
	env := fakeEnv()
	env.Devices = func() ([]*verbs.Device, error) { return nil, errors.New(`RDMA_GO_DEVICES: bad entry "x"`) }
	want(t, find(t, Run(context.Background(), Config{Env: env}), "devices"), Error, "bad entry", "RDMA_GO_DEVICES")

	fs := Run(context.Background(), Config{Env: fakeEnv()})
	want(t, find(t, fs, "devices"), Error, "no RDMA devices at all", "RDMA_GO_LOOPBACK=off")
	if Worst(fs) != Error {
		t.Errorf("worst level %s with no devices, want error", Worst(fs))
	}

	d, err := verbs.AddDevice(testdev.Name("dr-list"), testdev.Addr())
	if err != nil {
		t.Fatal(err)
	}
	fs = Run(context.Background(), Config{Env: fakeEnv(d), Device: "nosuch"})
	want(t, find(t, fs, "devices"), Error, `no device "nosuch" among 1: `+d.Name(), "ibv_devices")
}

func TestMemlock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur, want uint64
		kernel    bool
		level     Level
		msg, fix  string
	}{
		{"unlimited", ^uint64(0), 1 << 30, true, OK, "unlimited", ""},
		{"no size", 8 << 20, 0, true, OK, "8 MiB: the most a program may register", ""},
		{"enough", 1 << 30, 64 << 20, true, OK, "1 GiB covers the 64 MiB", ""},
		{"low, kernel device", 64 << 10, 64 << 20, true, Error, "64 KiB is below the 64 MiB", "ulimit -l unlimited"},
		{"low, soft only", 64 << 10, 64 << 20, false, Info, "soft devices pin no memory", "only if you use a kernel device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := fakeEnv()
			env.Memlock = func() (uint64, uint64, error) { return tc.cur, tc.cur, nil }
			if tc.kernel {
				env.Kernel = func() KernelProbe { return KernelProbe{Sysfs: []string{"rxe0"}, Listed: []string{"rxe0"}} }
			}
			want(t, find(t, Run(context.Background(), Config{Env: env, Memlock: tc.want}), "memlock"), tc.level, tc.msg, tc.fix)
		})
	}
	env := fakeEnv()
	env.Memlock = func() (uint64, uint64, error) { return 0, 0, errors.New("getrlimit: operation not permitted") }
	want(t, find(t, Run(context.Background(), Config{Env: env}), "memlock"), Warn, "cannot read RLIMIT_MEMLOCK: getrlimit", "")
	// The real limit, lowered for this process: the soft limit only, and
	// put back.
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	low := unix.Rlimit{Cur: 32 << 10, Max: old.Max}
	if old.Max < low.Cur {
		low.Cur = old.Max
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Skipf("cannot lower RLIMIT_MEMLOCK: %v", err)
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)
	cur, _, err := Default().Memlock()
	if err != nil || cur != low.Cur {
		t.Fatalf("Default().Memlock() = %d, %v; want %d", cur, err, low.Cur)
	}
}

func TestGIDFinding(t *testing.T) {
	ll := verbs.GIDFromIP(netip.MustParseAddr("fe80::1"))
	v4 := verbs.GIDFromIP(netip.MustParseAddr("198.51.100.2"))
	v6 := verbs.GIDFromIP(netip.MustParseAddr("2001:db8::2"))
	for _, tc := range []struct {
		name     string
		gids     []verbs.GID
		level    Level
		msg, fix string
	}{
		{"empty", nil, Error, "no GID holds a routable address (0 entries", "ip addr add"},
		{"link-local only", []verbs.GID{ll, {}}, Error, "no GID holds a routable address (2 entries", "ip addr add"},
		{"link-local first", []verbs.GID{ll, v4}, Info, "[1] 198.51.100.2; GID 0 is link-local", "pass -g 1"},
		{"routable first", []verbs.GID{v4, v6}, OK, "[0] 198.51.100.2, [1] 2001:db8::2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { want(t, GIDFinding("dev", tc.gids), tc.level, tc.msg, tc.fix) })
	}
}

func TestPortFinding(t *testing.T) {
	v4 := verbs.GIDFromIP(netip.MustParseAddr("198.51.100.2"))
	down := verbs.PortAttr{State: verbs.PortDown}
	want(t, PortFinding("rxe0", "kernel", down, []verbs.GID{v4}), Error, "port 1 is PORT_DOWN, not ACTIVE", "ip link set NETDEV up")
	want(t, PortFinding("rgo1", "soft", down, []verbs.GID{v4}), Error, "not ACTIVE", "the soft device's socket failed")
	up := verbs.PortAttr{State: verbs.PortActive, ActiveMTU: verbs.MTU1024}
	want(t, PortFinding("rxe0", "kernel", up, []verbs.GID{v4}), OK, "kernel, port 1 ACTIVE, MTU 1024; GIDs [0] 198.51.100.2", "")
}

func TestDeviceOpenChecks(t *testing.T) {
	// A device whose RoCE port another socket holds.
	var held *net.UDPConn
	var addr netip.Addr
	for range 20 {
		addr = testdev.Addr()
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 4791)))
		if err == nil {
			held = c
			break
		}
	}
	if held == nil {
		t.Fatal("no free loopback address for the RoCE port")
	}
	defer held.Close()
	busy, err := verbs.AddDevice(testdev.Name("dr-busy"), addr)
	if err != nil {
		t.Fatal(err)
	}
	want(t, find(t, Run(context.Background(), Config{Env: fakeEnv(busy)}), busy.Name()), Error, "address already in use", "RDMA_GO_PORT")

	// A device on an address this host does not have (198.51.100.0/24
	// is on no interface here; nothing is sent).
	far, err := verbs.AddDevice(testdev.Name("dr-far"), netip.MustParseAddr("198.51.100.77"))
	if err != nil {
		t.Fatal(err)
	}
	want(t, find(t, Run(context.Background(), Config{Env: fakeEnv(far)}), far.Name()), Error, "cannot open", "not on any interface")

	// A working one.
	ok, err := verbs.AddDevice(testdev.Name("dr-ok"), testdev.Addr())
	if err != nil {
		t.Fatal(err)
	}
	want(t, find(t, Run(context.Background(), Config{Env: fakeEnv(ok)}), ok.Name()), Info, "soft, port 1 ACTIVE", "pass -g 1")
}

func TestPeer(t *testing.T) {
	client := testdev.Device(t, "dr-cli")
	server := testdev.Device(t, "dr-srv")
	ln, err := rdmacm.Listen(netip.AddrPortFrom(server.Device().Addr(), 0).String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		for range 4 {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	env := fakeEnv(client.Device(), server.Device())
	run := func(peer netip.AddrPort, given bool) Finding {
		t.Helper()
		fs := Run(ctx, Config{Env: env, Peer: peer, PeerPortGiven: given, Timeout: 2 * time.Second})
		return fs[len(fs)-1]
	}
	srv := server.Device().Addr()
	want(t, run(ln.Addr(), true), OK, "a listener answers on rdma_cm port", "")
	want(t, run(netip.AddrPortFrom(srv, 7175), true), Error, "nothing listens on rdma_cm port 7175", "start the server on port 7175")
	want(t, run(netip.AddrPortFrom(srv, 7175), false), OK, "connection manager answers", "")
	// A server that refuses every request (REJ, consumer reason 28).
	rid, err := rdmacm.CreateID(nil, nil, rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer rid.Destroy()
	if err := rid.BindAddr(netip.AddrPortFrom(srv, 0)); err != nil {
		t.Fatal(err)
	}
	if err := rid.Listen(4); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range 2 {
			req, err := rid.GetRequest(ctx)
			if err != nil {
				return
			}
			req.Reject([]byte("no"))
			req.Destroy()
		}
	}()
	want(t, run(rid.SrcAddr(), true), Warn, "rejected the connection (REJ reason 28)", "the server refused")
	// An address that routes to a soft device (loopback) but where no
	// device answers: the REQs go unanswered.
	want(t, run(netip.AddrPortFrom(testdev.Addr(), 7175), false), Error, "no answer from", "UDP port 4791 is open")
}
