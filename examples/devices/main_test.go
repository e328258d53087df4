package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// helperEnv makes the test binary run TestHelperNoDevice's body: the
// program in a process of its own whose device list starts empty.
const helperEnv = "EXAMPLES_DEVICES_HELPER"

// TestMain hides the default soft device rgo0 and any configured soft
// devices before verbs first reads the configuration, so that the listing
// holds only the tests' own devices (and the machine's kernel devices, if
// it has any): rgo0 would take the shared 127.0.0.x addresses.
func TestMain(m *testing.M) {
	os.Setenv(verbs.LoopbackEnv, "off")
	os.Setenv(verbs.DevicesEnv, "")
	os.Setenv(verbs.ConfigFileEnv, os.DevNull)
	os.Exit(m.Run())
}

var seq atomic.Int32

// options are the tests' exdev options: soft devices on addresses no other
// test process takes, under names unique in the process (-count=N reruns
// the tests in one process, whose device registry stays).
func options() *exdev.Options {
	return &exdev.Options{Add: func(name string) (*verbs.Device, error) {
		return verbs.AddDevice(fmt.Sprintf("%s-%d", name, seq.Add(1)), testdev.Addr())
	}}
}

// checkDevice checks the description of soft device d in out: its GUID,
// limits, port, and a GID table holding its address at index 1.
func checkDevice(t *testing.T, out string, d *verbs.Device) {
	t.Helper()
	ip := d.Addr()
	for _, want := range []string{
		d.Name() + ": soft RoCEv2 device",
		"IP address     " + ip.String(),
		"node GUID      " + guid(d.GUID()),
		"transport      InfiniBand transport over Ethernet/IP (RoCE)",
		"QPs,", "work requests per queue", "SGEs per work request", "max MR size",
		"atomics        ATOMIC_HCA",
		"port 1         ACTIVE, MTU 4096 active / 4096 max, link layer Ethernet",
		"    GID[0]  fe80::",
		fmt.Sprintf("    GID[1]  %-40s RoCE v2  IP %s  <- the device's address: use GID index 1", "::ffff:"+ip.String(), ip),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestDevicesNamed runs devices -d on a soft device of the test's own.
func TestDevicesNamed(t *testing.T) {
	o := options()
	d, err := o.Add("named")
	if err != nil {
		t.Fatal(err)
	}
	o.Device = d.Name()
	var out bytes.Buffer
	if err := run(&out, o); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	checkDevice(t, out.String(), d)
	if n := strings.Count(out.String(), ": soft RoCEv2 device"); n != 1 {
		t.Errorf("-d %s described %d soft devices, want 1:\n%s", d.Name(), n, out.String())
	}
}

// TestDevicesAll runs devices without -d: every device is listed, the
// test's two among them, and rgo0 (turned off) is not.
func TestDevicesAll(t *testing.T) {
	o := options()
	var devs []*verbs.Device
	for range 2 {
		d, err := o.Add("all")
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	var out bytes.Buffer
	if err := run(&out, o); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, d := range devs {
		checkDevice(t, out.String(), d)
	}
	if strings.Contains(out.String(), verbs.DefaultDeviceName+":") || strings.Contains(out.String(), "added soft device") {
		t.Errorf("output lists %s or adds a device:\n%s", verbs.DefaultDeviceName, out.String())
	}
}

// TestDevicesUnknown asks for a device that does not exist.
func TestDevicesUnknown(t *testing.T) {
	o := options()
	o.Device = "no-such-device"
	var out bytes.Buffer
	err := run(&out, o)
	if err == nil || !strings.Contains(err.Error(), `"no-such-device" not found`) {
		t.Fatalf("run -d no-such-device: %v, want a not-found error", err)
	}
}

// TestDevicesNoneConfigured runs the program where the device list is
// empty: it adds a soft device and describes it. The list starts empty only
// in a process of its own (this process's tests add devices), and only on
// a machine without kernel RDMA devices.
func TestDevicesNoneConfigured(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		var out bytes.Buffer
		err := run(&out, options())
		fmt.Print(out.String())
		if err != nil {
			fmt.Println("run:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if ents, _ := os.ReadDir(sysfs); len(ents) > 0 {
		t.Skipf("%s lists kernel RDMA devices: the device list is never empty here", sysfs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDevicesNoneConfigured$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, want := range []string{
		"no RDMA device is configured: added soft device " + softName + "-",
		": soft RoCEv2 device", "port 1         ACTIVE", "<- the device's address: use GID index 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
