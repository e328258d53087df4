package verbs

import (
	"context"
	"testing"
	"time"
)

// TestPortDownEvent: when a running device's link fails, every open
// context gets a PORT_ERR event and the port reports DOWN.
func TestPortDownEvent(t *testing.T) {
	dev, err := AddLoopbackDevice("porttest0")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := dev.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := dev.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if pa, _ := c1.QueryPort(1); pa.State != PortActive {
		t.Fatalf("port state %s before the failure", pa.State)
	}
	dev.portDown() // what the runtime calls when its link fails
	for _, c := range []*Context{c1, c2} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ev, err := c.GetAsyncEvent(ctx)
		cancel()
		if err != nil || ev.Type != EventPortErr || ev.Port != 1 {
			t.Fatalf("event %+v, %v; want PORT_ERR on port 1", ev, err)
		}
		c.AckAsyncEvent(ev)
		if pa, _ := c.QueryPort(1); pa.State != PortDown {
			t.Fatalf("port state %s after the failure, want DOWN", pa.State)
		}
		if pc, _ := c.QueryPortCounters(1); pc.LinkDowned != 1 {
			t.Fatalf("LinkDowned = %d, want 1", pc.LinkDowned)
		}
	}
}
