package main

import (
	"bytes"
	"errors"
	"github.com/rdma-go/rdma-go/internal/cli"
	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

func TestWriteDevicesGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/devices.golden")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeDevices(&b, []entry{{Name: "rxe0", GUID: 0x505400fffe123456}})
	if got := b.String(); got != string(want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestWriteDevicesLines(t *testing.T) {
	var b bytes.Buffer
	writeDevices(&b, []entry{
		{Name: "a", GUID: 1},
		{Name: "exactly16bytes__", GUID: 0xffffffffffffffff},
		{Name: "longer_than_16_bytes", GUID: 0x0202},
		{Name: "é", GUID: 0}, // two bytes: C pads to 16 bytes, not runes
	})
	want := "" +
		"    device          \t   node GUID\n" +
		"    ------          \t----------------\n" +
		"    a               \t0000000000000001\n" +
		"    exactly16bytes__\tffffffffffffffff\n" +
		"    longer_than_16_bytes\t0000000000000202\n" +
		"    é              \t0000000000000000\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	writeDevices(&b, nil)
	if got := b.String(); got != "    device          \t   node GUID\n    ------          \t----------------\n" {
		t.Errorf("empty list: got %q", got)
	}
}

func TestStrerror(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("no errno"), "Input/output error"},
		{os.ErrNotExist, "Input/output error"},
		{&os.PathError{Op: "open", Path: "x", Err: errNo(2)}, "No such file or directory"},
		{errNo(22), "Invalid argument"},
		{errNo(41), "Unknown error 41"},
		{errNo(133), "Memory page has hardware error"},
	} {
		if got := cli.Strerror(c.err); got != c.want {
			t.Errorf("cli.Strerror(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestBinary(t *testing.T) {
	bin := clitest.Build(t, "ibv_devices")
	const header = "    device          \t   node GUID\n    ------          \t----------------\n"

	t.Run("no devices", func(t *testing.T) {
		out, errs, code := clitest.Run(t, bin, clitest.Env(t, "RDMA_GO_LOOPBACK=off"))
		if code != 0 || out != header || errs != "" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 0, headers only, nothing", code, out, errs)
		}
	})
	t.Run("list failure", func(t *testing.T) {
		out, errs, code := clitest.Run(t, bin, clitest.Env(t, "RDMA_GO_DEVICES=bad"))
		if code != 1 || out != "" || errs != "Failed to get IB devices list: Invalid argument\n" {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
	line := regexp.MustCompile(`^    rgo0            \t[0-9a-f]{16}\n$`)
	for _, args := range [][]string{nil, {"-x", "--bogus", "operand"}} {
		t.Run("loopback "+strings.Join(args, " "), func(t *testing.T) {
			out, errs, code := clitest.Run(t, bin, clitest.Env(t), args...)
			if code != 0 || errs != "" || !strings.HasPrefix(out, header) || !line.MatchString(out[len(header):]) {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}
}

func errNo(n int) error { return syscall.Errno(n) }
