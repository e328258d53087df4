// Package testdev gives tests soft devices on loopback addresses that no
// other test process uses.
//
// go test ./... runs the packages' test binaries in parallel, and every
// automatically addressed device (verbs' rgo0, AddLoopbackDevice) takes the
// first free address of 127.0.0.1–127.0.0.254. A test device there shares
// its address with whatever process takes it next: a peer's retransmissions,
// CM retries and keepalives meant for a device that closed reach another
// process's device, whose QPNs (0x11, 0x12, ...) are the same. The devices
// of this package bind a random address of the rest of 127.0.0.0/8 instead,
// which no automatically addressed device takes; the device's own bind is
// the reservation, and a taken address (EADDRINUSE) is retried with another
// one, a bounded number of times.
package testdev

import (
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"

	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/verbs"
)

// Addr returns a random address of 127.1.0.1–127.254.255.254: outside
// 127.0.0.0/24, where automatically addressed devices live. It is a
// candidate, not a reservation: bind it (Open does) and draw another when
// it is taken.
func Addr() netip.Addr { return workload.RandomLoopback() }

// nameSeq numbers the names Name hands out.
var nameSeq atomic.Int32

// Name returns prefix and a number no earlier call in this process
// returned: the device list is the process's and a device cannot be
// removed, so a test that adds a device by name needs a new name when it
// runs again (go test -count N).
func Name(prefix string) string { return fmt.Sprintf("%s%d", prefix, nameSeq.Add(1)) }

// Open registers a soft device named prefix plus a sequence number on a
// random loopback address (Addr) and opens it, drawing another address a
// bounded number of times when one is taken. The returned context keeps
// the device, and so its address, until it is closed.
func Open(prefix string) (*verbs.Context, error) { return workload.OpenSoft(prefix) }

// Device is Open for a test: the device is closed when the test ends.
func Device(t testing.TB, prefix string) *verbs.Context {
	t.Helper()
	c, err := Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// DeviceEnv names the device the conformance tests (TestConformance* of
// packages verbs and rdmacm) run on, for example "rxe0" or "mlx5_0"; unset,
// they run on a soft device of this package. The same tests, built with
// go test -c, so check a kernel device and the soft device alike.
const DeviceEnv = "RDMA_GO_TEST_DEVICE"

// Conformance opens the device the conformance tests run on (DeviceEnv's,
// or a new soft device) for the test; the context closes when it ends. A
// device DeviceEnv names that is not there fails the test.
func Conformance(t testing.TB) *verbs.Context {
	t.Helper()
	name := os.Getenv(DeviceEnv)
	if name == "" {
		return Device(t, "cf")
	}
	d, err := workload.FindDevice(name)
	if err != nil {
		t.Fatalf("%s=%s: %v", DeviceEnv, name, err)
	}
	c, err := d.Open()
	if err != nil {
		t.Fatalf("%s=%s: %v", DeviceEnv, name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// GIDIndex returns the index of port 1's GID that holds the device's IP
// address (the RoCEv2 GID a test addresses it by).
func GIDIndex(c *verbs.Context) (int, error) { return workload.GIDIndex(c) }
