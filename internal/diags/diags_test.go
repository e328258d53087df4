package diags

import (
	"bytes"
	"os"
	"testing"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// rxe0 is the lab guest's rxe0 (Linux 6.1, rdma-core 44), whose ibstat and
// ibstatus output the golden files hold.
var rxe0 = CA{Name: "rxe0", NodeGUID: 0x505400fffec00002, SysImageGUID: 0x505400fffec00002,
	Ports: []Port{{Num: 1, State: verbs.PortActive, PhysState: 5, Rate: "2.5 Gb/sec (1X SDR)", CapMask: 0x00010000,
		GID0:      verbs.GID{0xfe, 0x80, 8: 0x50, 9: 0x54, 10: 0x00, 11: 0xff, 12: 0xfe, 13: 0xc0, 14: 0x00, 15: 0x02},
		LinkLayer: verbs.LinkLayerEthernet}}}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	want, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// TestGolden: ibstat's and ibstatus' output for rxe0's attributes is
// infiniband-diags' for rxe0, byte for byte.
func TestGolden(t *testing.T) {
	var b bytes.Buffer
	WriteIbstat(&b, rxe0, false, 0)
	golden(t, "ibstat.golden", b.Bytes())
	b.Reset()
	WriteIbstat(&b, rxe0, true, 0)
	golden(t, "ibstat-short.golden", b.Bytes())
	b.Reset()
	WriteIbstat(&b, rxe0, false, 1)
	golden(t, "ibstat-port.golden", b.Bytes())
	b.Reset()
	PortGUIDs(&b, rxe0)
	golden(t, "ibstat-ports.golden", b.Bytes())
	b.Reset()
	WriteIbstatus(&b, rxe0, rxe0.Ports[0])
	golden(t, "ibstatus.golden", b.Bytes())
}

// TestRateString: the kernel's rate strings, and ibstat's Rate from them.
func TestRateString(t *testing.T) {
	for _, c := range []struct {
		speed, width uint8
		rate, stat   string
	}{
		{1, 1, "2.5 Gb/sec (1X SDR)", "2.5"},
		{1, 2, "10 Gb/sec (4X SDR)", "10"},
		{8, 1, "10 Gb/sec (1X FDR10)", "10 (FDR10)"},
		{16, 2, "56 Gb/sec (4X FDR)", "56"},
		{32, 2, "100 Gb/sec (4X EDR)", "100"},
		{64, 16, "100 Gb/sec (2X HDR)", "100"},
		{2, 8, "60 Gb/sec (12X DDR)", "60"},
	} {
		if got := RateString(c.speed, c.width); got != c.rate {
			t.Errorf("RateString(%d, %d) = %q, want %q", c.speed, c.width, got, c.rate)
		}
		if got := statRate(c.rate); got != c.stat {
			t.Errorf("statRate(%q) = %q, want %q", c.rate, got, c.stat)
		}
	}
}

// TestReadSoftDevice: a soft device reads as rxe shows itself: one active
// Ethernet port at the FDR10 rate its attributes give, GID 0 link-local.
func TestReadSoftDevice(t *testing.T) {
	d, err := verbs.AddDevice(testdev.Name("diags"), testdev.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := Read(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(ca.Ports) != 1 || ca.Type != "" || ca.NodeGUID == 0 {
		t.Fatalf("soft device: %+v", ca)
	}
	p := ca.Ports[0]
	if p.State != verbs.PortActive || p.LinkLayer != verbs.LinkLayerEthernet || p.GID0[0] != 0xfe || p.Rate == "" {
		t.Fatalf("soft device port: %+v", p)
	}
	var b bytes.Buffer
	WriteIbstat(&b, ca, false, 0)
	if !bytes.Contains(b.Bytes(), []byte("\t\tState: Active\n")) {
		t.Fatalf("ibstat output:\n%s", b.String())
	}
}
