package soft

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/provider"
)

// testDevSeq numbers the devices the tests add: the device list is the
// process's, so a test run again (go test -count N) needs new names.
var testDevSeq atomic.Int32

// testDeviceName returns prefix and a number no other test device has.
func testDeviceName(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, testDevSeq.Add(1)-1)
}

// TestPortDownEvent: when a running device's link fails, every open
// context gets a PORT_ERR event and the port reports DOWN.
func TestPortDownEvent(t *testing.T) {
	dev, err := AddLoopbackDevice(testDeviceName("porttest"))
	if err != nil {
		t.Fatal(err)
	}
	evs := make(chan provider.AsyncEvent, 4)
	var ctxs []provider.Context
	for range 2 {
		c, err := dev.Open(func(ev provider.AsyncEvent) { evs <- ev })
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctxs = append(ctxs, c)
	}
	if pa, _ := ctxs[0].QueryPort(1); pa.State != provider.PortActive {
		t.Fatalf("port state %s before the failure", pa.State)
	}
	dev.portDown() // what the runtime calls when its link fails
	for range ctxs {
		select {
		case ev := <-evs:
			if ev.Type != provider.EventPortErr || ev.Port != 1 || ev.Owner != nil {
				t.Fatalf("event %+v; want PORT_ERR on port 1", ev)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no PORT_ERR event")
		}
	}
	for _, c := range ctxs {
		if pa, _ := c.QueryPort(1); pa.State != provider.PortDown {
			t.Fatalf("port state %s after the failure, want DOWN", pa.State)
		}
		if pc, _ := c.QueryPortCounters(1); pc.LinkDowned != 1 {
			t.Fatalf("LinkDowned = %d, want 1", pc.LinkDowned)
		}
	}
}

// TestLoopbackGUIDs: loopback devices that bind different addresses have
// different node GUIDs, each derived from its name and the address it
// bound, so it is the same for the same device every time it runs.
func TestLoopbackGUIDs(t *testing.T) {
	t.Setenv("RDMA_GO_SERVICE", "off")
	var guids []uint64
	var addrs []string
	for range 2 {
		dev, err := AddLoopbackDevice(testDeviceName("guidtest"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := dev.Open(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		a, _ := c.QueryDevice()
		addr := c.(*Context).Addr()
		if a.NodeGUID != guidFor(dev.Name(), addr) || dev.GUID() != a.NodeGUID {
			t.Errorf("%s on %s: GUID %#x, device says %#x, want %#x", dev.Name(), addr, a.NodeGUID, dev.GUID(), guidFor(dev.Name(), addr))
		}
		guids, addrs = append(guids, a.NodeGUID), append(addrs, addr.String())
	}
	if guids[0] == guids[1] || addrs[0] == addrs[1] {
		t.Errorf("two loopback devices: addresses %v, GUIDs %#x", addrs, guids)
	}
}

// TestICRCEnv: RDMA_GO_ICRC takes verify or auto; anything else makes
// Open fail with a message that names the variable.
func TestICRCEnv(t *testing.T) {
	t.Setenv("RDMA_GO_SERVICE", "off")
	for _, c := range []struct {
		val string
		ok  bool
	}{{"verify", true}, {"auto", true}, {"", true}, {"off", false}} {
		t.Setenv(ICRCEnv, c.val)
		dev, err := AddLoopbackDevice(testDeviceName("icrcenv"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, err := dev.Open(func(provider.AsyncEvent) {})
		if c.ok != (err == nil) {
			t.Fatalf("%s=%q: Open error %v", ICRCEnv, c.val, err)
		}
		if err != nil && !strings.Contains(err.Error(), ICRCEnv) {
			t.Fatalf("error %q does not name %s", err, ICRCEnv)
		}
		if ctx != nil {
			ctx.Close()
		}
	}
}
