//go:build linux

package rdmacm_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// TestResolveNeighbour resolves addresses on a veth link of a network
// namespace the test makes for itself (it re-runs itself there; it needs
// root): a next hop nobody answers for gives ADDR_ERROR ETIMEDOUT within
// the timeout, as Linux's rdma_cm does (not a REQ re-sent for a minute); a
// next hop with a known link-layer address, and an address of the host
// itself, resolve.
func TestResolveNeighbour(t *testing.T) {
	if os.Getenv("RDMACM_NEIGH_CHILD") == "1" {
		neighbourChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestResolveNeighbour$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "RDMACM_NEIGH_CHILD=1", "RDMA_GO_DEVICES=", "RDMA_GO_CONFIG=/dev/null", "RDMA_GO_LOOPBACK=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Skipf("no network namespace for the test (needs root): %v", err)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestResolveNeighbour") {
		t.Fatalf("in a namespace of its own: %v\n%s", err, out)
	}
}

func neighbourChild(t *testing.T) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	must(t, netlink.LinkSetUp(lo))
	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nb0"}, PeerName: "nb1"}))
	v0, err := netlink.LinkByName("nb0")
	must(t, err)
	v1, err := netlink.LinkByName("nb1")
	must(t, err)
	for _, a := range []string{"198.51.100.1/24", "198.51.100.3/24"} {
		addr, err := netlink.ParseAddr(a)
		must(t, err)
		must(t, netlink.AddrAdd(v0, addr))
	}
	must(t, netlink.LinkSetUp(v0))
	must(t, netlink.LinkSetUp(v1))
	// 198.51.100.2 has a known link-layer address; nothing answers
	// for 198.51.100.77.
	must(t, netlink.NeighAdd(&netlink.Neigh{LinkIndex: v0.Attrs().Index, IP: net.ParseIP("198.51.100.2"),
		HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2}, State: unix.NUD_PERMANENT, Family: netlink.FAMILY_V4}))
	if _, err := verbs.AddDevice("nb", netip.MustParseAddr("198.51.100.1")); err != nil {
		t.Fatal(err)
	}
	resolve := func(dst string, timeout time.Duration) (rdmacm.EventType, int, time.Duration) {
		t.Helper()
		ch, err := rdmacm.CreateEventChannel()
		must(t, err)
		defer ch.Destroy()
		id, err := rdmacm.CreateID(ch, nil, rdmacm.PSTCP)
		must(t, err)
		defer id.Destroy()
		start := time.Now()
		must(t, id.ResolveAddr(context.Background(), netip.AddrPort{}, netip.MustParseAddrPort(dst), timeout))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ev, err := ch.GetCMEvent(ctx)
		must(t, err)
		defer ev.Ack()
		return ev.Type, ev.Status, time.Since(start)
	}
	if typ, st, took := resolve("198.51.100.77:7471", 300*time.Millisecond); typ != rdmacm.EventAddrError || st != -int(syscall.ETIMEDOUT) || took < 300*time.Millisecond {
		t.Errorf("unanswered next hop: %v status %d after %v; want ADDR_ERROR -110 after the 300ms timeout", typ, st, took)
	}
	if typ, st, _ := resolve("198.51.100.2:7471", 5*time.Second); typ != rdmacm.EventAddrResolved {
		t.Errorf("next hop with a known address: %v status %d, want ADDR_RESOLVED", typ, st)
	}
	if typ, st, _ := resolve("198.51.100.3:7471", 5*time.Second); typ != rdmacm.EventAddrResolved {
		t.Errorf("an address of this host: %v status %d, want ADDR_RESOLVED", typ, st)
	}
	// A synchronous id: the error comes back from ResolveAddr.
	id, err := rdmacm.CreateID(nil, nil, rdmacm.PSTCP)
	must(t, err)
	defer id.Destroy()
	if err := id.ResolveAddr(context.Background(), netip.AddrPort{}, netip.MustParseAddrPort("198.51.100.77:7471"), 200*time.Millisecond); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("synchronous resolve of an unanswered next hop: %v, want ETIMEDOUT", err)
	}
}
