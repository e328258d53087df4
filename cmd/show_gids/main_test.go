package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-go/rdma-go/internal/netdev"
	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// fakeSysfs writes the files testdata/sysfs.txt lists into a temporary
// directory and points sysfsDir at it for the test; with noSoft the verbs
// device list is empty too, so that the output is the sysfs tree's alone.
func fakeSysfs(t *testing.T, noSoft bool) {
	t.Helper()
	f, err := os.Open("testdata/sysfs.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		path, content, _ := strings.Cut(line, " ")
		p := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	old, oldList := sysfsDir, listDevices
	sysfsDir = dir
	if noSoft {
		listDevices = func() ([]*verbs.Device, error) { return nil, nil }
	}
	t.Cleanup(func() { sysfsDir, listDevices = old, oldList })
}

// runOK runs show_gids with args and returns its standard output and error;
// it fails the test unless the status is 0, which it always is.
func runOK(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if rc := run(append([]string{"show_gids"}, args...), &out, &errb); rc != 0 {
		t.Fatalf("show_gids %q: status %d, stderr %q", args, rc, errb.String())
	}
	return out.String(), errb.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from testdata/%s:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// TestKernelDevices: on sysfs files, the output is the show_gids script's
// byte for byte. rxe0.golden was recorded in the lab guest (the script on
// the real rxe0), the other goldens from the script on the files of
// testdata/sysfs.txt.
func TestKernelDevices(t *testing.T) {
	fakeSysfs(t, true)
	out, errs := runOK(t, "rxe0")
	golden(t, "rxe0.golden", out)
	if errs != "" {
		t.Errorf("stderr %q", errs)
	}
	out, errs = runOK(t)
	golden(t, "sysfs.golden", out)
	if errs != "" {
		t.Errorf("stderr %q", errs)
	}
	// Several devices in the one argument, and one that does not exist:
	// its message on stderr, the table of the others, status 0.
	out, errs = runOK(t, "mlx5_1 nosuch")
	golden(t, "two.golden", out)
	if want := "show_gids: cannot access '" + filepath.Join(sysfsDir, "nosuch", "ports") + "/': No such file or directory\n"; errs != want {
		t.Errorf("stderr %q, want %q", errs, want)
	}
}

// TestSoftDevice: a soft device's GIDs come from the verbs API: the
// link-local GID from its GUID and its IPv4-mapped address, both RoCE v2,
// on the loopback interface that holds its 127.x.y.z address.
func TestSoftDevice(t *testing.T) {
	fakeSysfs(t, false)
	c := testdev.Device(t, "sg")
	d := c.Device()
	ip := d.Addr()
	if !ip.Is4() || !ip.IsLoopback() {
		t.Fatalf("test device address %s, want 127.x.y.z", ip)
	}
	ifi := netdev.Holding(ip)
	if ifi == nil {
		t.Fatalf("no interface holds %s", ip)
	}
	lo := ifi.Name
	g := d.GUID()
	a := ip.As4()
	want := header +
		fmt.Sprintf("%s\t1\t0\tfe80:0000:0000:0000:%04x:%04x:%04x:%04x\t\t\tv2\t%s\n",
			d.Name(), g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff, lo) +
		fmt.Sprintf("%s\t1\t1\t0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\t%s \tv2\t%s\n",
			d.Name(), a[0], a[1], a[2], a[3], ip, lo) +
		"n_gids_found=2\n"
	out, errs := runOK(t, d.Name())
	if out != want || errs != "" {
		t.Fatalf("show_gids %s:\n%s(stderr %q)\nwant:\n%s", d.Name(), out, errs, want)
	}
	// The kernel device of the same tree is listed with it.
	out, _ = runOK(t, "rxe0 "+d.Name())
	if !strings.HasPrefix(out, header+"rxe0\t1\t0\t") || !strings.HasSuffix(out, "\tv2\t"+lo+"\nn_gids_found=4\n") {
		t.Fatalf("show_gids \"rxe0 %s\":\n%s", d.Name(), out)
	}
}

// TestVersion: the VER column is the GID type from its first v, as the
// script's grep -o "[Vv].*" takes it; nothing for an unreadable type.
func TestVersion(t *testing.T) {
	for in, want := range map[string]string{"RoCE v2": "v2", "IB/RoCE v1": "v1", "": "", "IB": "", "RoCE  V2 x": "V2 x"} {
		if got := version(in); got != want {
			t.Errorf("version(%q) = %q, want %q", in, got, want)
		}
	}
}
