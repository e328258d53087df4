package doctor

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/rdma-go/rdma-go/provider/soft/service"
	"github.com/rdma-go/rdma-go/verbs"
)

// TestPeerNoRoute runs the peer check in a network namespace of its own,
// where only the loopback interface exists: an address outside it has no
// route; then on a veth link with an address on the peer's subnet where
// nobody answers ARP. It needs CAP_SYS_ADMIN (root) for the namespace.
func TestPeerNoRoute(t *testing.T) {
	if os.Getenv("DOCTOR_NOROUTE_CHILD") == "1" {
		env := fakeEnv()
		env.Devices = verbs.Devices
		fs := Run(context.Background(), Config{Env: env, Peer: netip.MustParseAddrPort("198.51.100.9:7175"), Timeout: time.Second})
		want(t, fs[len(fs)-1], Error, "resolving 198.51.100.9: no local RDMA device reaches it", "ip route add")
		// Now a link with an address on the peer's subnet, and a
		// device on it: the route exists, but nobody answers ARP.
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dr0"}, PeerName: "dr1"}); err != nil {
			t.Fatal(err)
		}
		v0, err0 := netlink.LinkByName("dr0")
		v1, err1 := netlink.LinkByName("dr1")
		addr, err2 := netlink.ParseAddr("198.51.100.1/24")
		if err := errors.Join(err0, err1, err2); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(netlink.AddrAdd(v0, addr), netlink.LinkSetUp(v0), netlink.LinkSetUp(v1)); err != nil {
			t.Fatal(err)
		}
		if _, err := verbs.AddDevice("dr-veth", netip.MustParseAddr("198.51.100.1")); err != nil {
			t.Fatal(err)
		}
		fs = Run(context.Background(), Config{Env: env, Peer: netip.MustParseAddrPort("198.51.100.9:7175"), Timeout: 300 * time.Millisecond})
		want(t, fs[len(fs)-1], Error, "resolving 198.51.100.9: the next hop did not answer ARP/neighbour discovery within 300ms", "ip neigh show")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPeerNoRoute$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DOCTOR_NOROUTE_CHILD=1", "RDMA_GO_DEVICES=", "RDMA_GO_CONFIG=/dev/null")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Skipf("no network namespace for the test (needs root): %v", err)
	}
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("in a namespace without routes: %v\n%s", err, out)
	}
}

// TestServiceCheck: the host service finding for a service that answers,
// one that is gone (its socket file left), none, and RDMA_GO_SERVICE=off,
// each made real: a service listening in a temporary directory, then
// stopped with its socket file put back.
func TestServiceCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "service.sock")
	probe := func() (string, error) { return path, service.Probe(path) }
	run := func() Finding {
		env := fakeEnv()
		env.Service = probe
		return find(t, Run(context.Background(), Config{Env: env}), "host service")
	}
	want(t, run(), Info, "none", "rdma-go service")

	srv, err := service.Listen(service.Config{Path: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	want(t, run(), OK, "answers on "+path, "")
	srv.Close()
	// A service that died leaves its socket file behind.
	l, err := net.Listen("unixpacket", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	want(t, run(), Warn, "left by a service that is gone", "start it again")

	env := fakeEnv()
	env.Service = func() (string, error) { return "", nil }
	want(t, find(t, Run(context.Background(), Config{Env: env}), "host service"), Info, "RDMA_GO_SERVICE=off", "")
}
