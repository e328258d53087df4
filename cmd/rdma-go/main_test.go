package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-go/rdma-go/internal/testdev"
)

// rdmago runs the program with args and returns its exit status and
// output.
func rdmago(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestLinkAddShowDelete adds soft devices to a config file of the test's
// own and deletes them again, checking the file after each step and the
// errors of each command.
func TestLinkAddShowDelete(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "devices")
	if err := os.WriteFile(cfg, []byte("# soft devices\nrgo7 127.0.0.7 # kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RDMA_GO_CONFIG", cfg)
	t.Setenv("RDMA_GO_DEVICES", "")
	addr := testdev.Addr().String()
	if code, out, errOut := rdmago(t, "link", "add", "rgo9", "type", "rgo", "addr", addr); code != 0 || !strings.Contains(out, "added rgo9 (addr "+addr+") to "+cfg) {
		t.Fatalf("link add: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := rdmago(t, "link", "add", "rgo8", "type", "rgo", "netdev", "lo"); code != 0 || !strings.Contains(out, "added rgo8 (addr 127.0.0.1)") {
		t.Fatalf("link add netdev lo: %d %q %q", code, out, errOut)
	}
	b, _ := os.ReadFile(cfg)
	if want := "# soft devices\nrgo7 127.0.0.7 # kept\nrgo9 " + addr + "\nrgo8 127.0.0.1\n"; string(b) != want {
		t.Fatalf("config after add:\n%s\nwant:\n%s", b, want)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"link", "add", "rgo7", "type", "rgo", "addr", "127.0.0.8"}, "device rgo7 exists already"},
		// A kernel link goes to RDMA netlink; a netdev that does not
		// exist fails there (or where there is no RDMA netlink).
		{[]string{"link", "add", "x", "type", "rxe", "netdev", "nosuch0"}, "link add x type rxe netdev nosuch0: "},
		{[]string{"link", "add", "x", "type", "rgo", "addr", "300.1.1.1"}, "bad address"},
		{[]string{"link", "add", "x", "type", "rgo", "netdev", "nosuch0"}, "netdev nosuch0"},
		{[]string{"link", "add", "x/y", "type", "rgo", "addr", "auto"}, "bad device name"},
		{[]string{"link", "delete", "nosuch"}, "no soft device nosuch in " + cfg},
		{[]string{"link", "delete", "rgo0"}, "RDMA_GO_LOOPBACK=off"},
		{[]string{"link", "show", "nosuch"}, "Wrong device name"},
		{[]string{"link", "frob"}, `Command "frob" is unknown`},
		{[]string{"frob"}, `Object "frob" is unknown`},
	} {
		if code, _, errOut := rdmago(t, tc.args...); code != 1 || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errOut, tc.msg)
		}
	}
	if code, _, errOut := rdmago(t, "link", "del", "rgo9"); code != 0 {
		t.Fatalf("link del: %d %q", code, errOut)
	}
	b, _ = os.ReadFile(cfg)
	if want := "# soft devices\nrgo7 127.0.0.7 # kept\nrgo8 127.0.0.1\n"; string(b) != want {
		t.Fatalf("config after delete:\n%s\nwant:\n%s", b, want)
	}
}

// TestLinkShow lists the devices of the environment: rgo0 on an automatic
// loopback address, and a device on a loopback address of the test's.
func TestLinkShow(t *testing.T) {
	code, out, errOut := rdmago(t, "link", "show")
	if code != 0 || !strings.Contains(out, "link rgo0/1 state ACTIVE physical_state LINK_UP netdev lo type rgo addr ") {
		t.Fatalf("link show: %d %q %q", code, out, errOut)
	}
	code, out, errOut = rdmago(t, "-j", "link", "show", "rgo0/1")
	var links []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &links) != nil || len(links) != 1 {
		t.Fatalf("-j link show rgo0/1: %d %q %q", code, out, errOut)
	}
	l := links[0]
	if l["ifname"] != "rgo0" || l["port"] != 1.0 || l["state"] != "ACTIVE" || l["physical_state"] != "LINK_UP" || l["netdev"] != "lo" || l["type"] != "rgo" {
		t.Errorf("-j link show: %v", l)
	}
	// As iproute2: no such port is a wrong device name, after an empty
	// JSON array.
	if code, out, errOut := rdmago(t, "-j", "-p", "link", "show", "rgo0/2"); code != 1 || out != "[]\n" || errOut != "Wrong device name\n" {
		t.Errorf("-j -p link show rgo0/2 (no such port): %d %q %q", code, out, errOut)
	}
	for _, arg := range []string{"rgo0", "rgo0/x", "rgo0/0", "nosuch/1"} {
		if code, _, errOut := rdmago(t, "link", "show", arg); code != 1 || errOut != "Wrong device name\n" {
			t.Errorf("link show %s: %d %q", arg, code, errOut)
		}
	}
}

// TestPretty checks -p's layout against iproute2's, as rdma -j -p link
// show printed it on Linux 6.1 (two ports made of one).
func TestPretty(t *testing.T) {
	in := `[{"ifindex":0,"ifname":"rxe0","port":1,"netdev_index":2},{"ifindex":1,"ifname":"rxe1","port":1,"netdev_index":3}]`
	want := "[ {\n" +
		"        \"ifindex\": 0,\n        \"ifname\": \"rxe0\",\n        \"port\": 1,\n        \"netdev_index\": 2\n" +
		"    },{\n" +
		"        \"ifindex\": 1,\n        \"ifname\": \"rxe1\",\n        \"port\": 1,\n        \"netdev_index\": 3\n" +
		"    } ]"
	got, err := pretty([]byte(in))
	if err != nil || string(got) != want {
		t.Errorf("pretty:\n%s\nwant:\n%s\n(%v)", got, want, err)
	}
}

// TestDoctor runs the doctor on this machine: its soft device works, so
// no finding is an error and the exit status is 0; -j gives the same
// findings as JSON; a device that does not exist is an error, status 1.
func TestDoctor(t *testing.T) {
	code, out, errOut := rdmago(t, "doctor", "--memlock", "unlimited")
	if code != 0 || !strings.Contains(out, "OK    devices") || !strings.Contains(out, "rgo0      soft, port 1 ACTIVE") {
		t.Fatalf("doctor: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = rdmago(t, "-j", "doctor", "-d", "rgo0")
	var fs []struct{ Check, Level, Message, Fix string }
	if code != 0 || json.Unmarshal([]byte(out), &fs) != nil || len(fs) < 3 {
		t.Fatalf("-j doctor: %d %q", code, out)
	}
	if code, out, _ := rdmago(t, "doctor", "-d", "nosuch"); code != 1 || !strings.Contains(out, `ERROR devices   no device "nosuch"`) {
		t.Errorf("doctor -d nosuch: %d %q", code, out)
	}
	for _, bad := range [][]string{{"doctor", "--memlock", "12Q"}, {"doctor", "--peer", "h:p"}, {"doctor", "extra"}} {
		if code, _, _ := rdmago(t, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"4096": 4096, "64K": 64 << 10, "64m": 64 << 20, "1G": 1 << 30, "unlimited": ^uint64(0)} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1T", "99999999999999999999G"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) succeeded", in)
		}
	}
}
