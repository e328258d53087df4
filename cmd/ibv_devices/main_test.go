package main

import (
	"bytes"
	"errors"
	"github.com/rdma-go/rdma-go/internal/cli"
	"os"
	"os/exec"
	"path/filepath"
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

// buildTool builds the package's command into a temporary directory.
func buildTool(t *testing.T, name string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// toolEnv is the test's environment without rdma-go settings, with an
// empty device config file, plus extra.
func toolEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "devices")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RDMA_GO_") && !strings.HasPrefix(kv, "POSIXLY_CORRECT=") {
			env = append(env, kv)
		}
	}
	env = append(env, "RDMA_GO_CONFIG="+cfg)
	return append(env, extra...)
}

// runTool runs bin and returns its standard output, standard error and exit
// status.
func runTool(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("run %s: %v", bin, err)
	return "", "", -1
}

func TestBinary(t *testing.T) {
	bin := buildTool(t, "ibv_devices")
	const header = "    device          \t   node GUID\n    ------          \t----------------\n"

	t.Run("no devices", func(t *testing.T) {
		out, errs, code := runTool(t, bin, toolEnv(t, "RDMA_GO_LOOPBACK=off"))
		if code != 0 || out != header || errs != "" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 0, headers only, nothing", code, out, errs)
		}
	})
	t.Run("list failure", func(t *testing.T) {
		out, errs, code := runTool(t, bin, toolEnv(t, "RDMA_GO_DEVICES=bad"))
		if code != 1 || out != "" || errs != "Failed to get IB devices list: Invalid argument\n" {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
	line := regexp.MustCompile(`^    rgo0            \t[0-9a-f]{16}\n$`)
	for _, args := range [][]string{nil, {"-x", "--bogus", "operand"}} {
		t.Run("loopback "+strings.Join(args, " "), func(t *testing.T) {
			out, errs, code := runTool(t, bin, toolEnv(t), args...)
			if code != 0 || errs != "" || !strings.HasPrefix(out, header) || !line.MatchString(out[len(header):]) {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}
}

func errNo(n int) error { return syscall.Errno(n) }
