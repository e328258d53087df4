package doctor

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// TestPeerNoRoute runs the peer check in a network namespace of its own,
// where only the loopback interface exists: an address outside it has no
// route. It needs CAP_SYS_ADMIN (root) for the namespace.
func TestPeerNoRoute(t *testing.T) {
	if os.Getenv("DOCTOR_NOROUTE_CHILD") == "1" {
		env := fakeEnv()
		env.Devices = verbs.Devices
		fs := Run(context.Background(), Config{Env: env, Peer: netip.MustParseAddrPort("198.51.100.9:7175"), Timeout: time.Second})
		want(t, fs[len(fs)-1], Error, "resolving 198.51.100.9: no local RDMA device reaches it", "ip route add")
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
