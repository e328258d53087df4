package main

import (
	"bytes"
	"errors"
	"github.com/rdma-go/rdma-go/internal/cli"
	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"github.com/rdma-go/rdma-go/internal/testdev"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

func TestStrerror(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("no errno"), "Input/output error"},
		{syscall.EINVAL, "Invalid argument"},
		{syscall.ENODEV, "No such device"},
		{syscall.Errno(41), "Unknown error 41"},
		{syscall.Errno(133), "Memory page has hardware error"},
	} {
		if got := cli.Strerror(c.err); got != c.want {
			t.Errorf("cli.Strerror(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestRunArgsWithoutDevices checks the command lines that end before the
// device list is read, in process.
func TestRunArgsWithoutDevices(t *testing.T) {
	var usage bytes.Buffer
	writeUsage(&usage, "prog")
	for _, c := range []struct {
		args       []string
		code       int
		out, stder string
	}{
		{[]string{"-i", "0"}, 1, usage.String(), ""},
		{[]string{"-i", "-3"}, 1, usage.String(), ""},
		{[]string{"--ib-port=junk"}, 1, usage.String(), ""},
		{[]string{"-i", "4294967296"}, 1, usage.String(), ""}, // (int)strtol: 0
		{[]string{"-v", "-i0", "-x"}, 1, usage.String(), ""},  // -i acts before getopt sees -x
		{[]string{"-x"}, 255, usage.String(), "prog: invalid option -- 'x'\n"},
		{[]string{"-vx"}, 255, usage.String(), "prog: invalid option -- 'x'\n"},
		{[]string{"--bogus"}, 255, usage.String(), "prog: unrecognized option '--bogus'\n"},
		{[]string{"--list=1"}, 255, usage.String(), "prog: option '--list' doesn't allow an argument\n"},
		{[]string{"-d"}, 255, usage.String(), "prog: option requires an argument -- 'd'\n"},
		{[]string{"--ib-port"}, 255, usage.String(), "prog: option '--ib-port' requires an argument\n"},
		{[]string{"--ib"}, 255, usage.String(), "prog: option '--ib' is ambiguous; possibilities: '--ib-dev' '--ib-port'\n"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"prog"}, c.args...), &out, &errb)
		if code != c.code || out.String() != c.out || errb.String() != c.stder {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q",
				c.args, code, out.String(), errb.String(), c.code, c.out, c.stder)
		}
	}
}

func TestBinary(t *testing.T) {
	bin := clitest.Build(t, "ibv_devinfo")
	var usageBuf bytes.Buffer
	writeUsage(&usageBuf, bin)
	usage := usageBuf.String()

	type result struct {
		out, err string
		code     int
	}
	check := func(t *testing.T, env []string, args []string, want result) {
		t.Helper()
		out, errs, code := clitest.Run(t, bin, env, args...)
		if out != want.out || errs != want.err || code != want.code {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q",
				args, code, out, errs, want.code, want.out, want.err)
		}
	}

	t.Run("no devices", func(t *testing.T) {
		env := clitest.Env(t, "RDMA_GO_LOOPBACK=off")
		none := result{"", "No IB devices found\n", 255}
		check(t, env, nil, none)
		check(t, env, []string{"-v"}, none)
		check(t, env, []string{"-i", "1"}, none)
		check(t, env, []string{"-l"}, result{"0 HCAs found:\n\n", "", 0})
		check(t, env, []string{"-d", "rgo0"}, result{"", "IB device 'rgo0' wasn't found\n", 255})
	})
	t.Run("list failure", func(t *testing.T) {
		env := clitest.Env(t, "RDMA_GO_DEVICES=bad")
		fail := result{"", "Failed to get IB devices list: Invalid argument\n", 255}
		check(t, env, nil, fail)
		check(t, env, []string{"-l"}, fail)
		check(t, env, []string{"-d", "rgo0"}, fail)
	})
	t.Run("argument errors", func(t *testing.T) {
		env := clitest.Env(t)
		check(t, env, []string{"-x"}, result{usage, bin + ": invalid option -- 'x'\n", 255})
		check(t, env, []string{"--xyz"}, result{usage, bin + ": unrecognized option '--xyz'\n", 255})
		check(t, env, []string{"-i", "0"}, result{usage, "", 1})
		check(t, env, []string{"-i", "2"}, result{"", "Invalid port requested for device\n", 4})
		check(t, env, []string{"-d", "nosuch"}, result{"", "IB device 'nosuch' wasn't found\n", 255})
		check(t, env, []string{"-d", "nosuch", "-l"}, result{"1 HCA found:\n\trgo0\n\n", "", 0})
		check(t, env, []string{"-l", "-x"}, result{"1 HCA found:\n\trgo0\n\n", "", 0})
		check(t, env, []string{"-x", "-l"}, result{usage, bin + ": invalid option -- 'x'\n", 255})
	})

	t.Run("loopback", func(t *testing.T) {
		// The loopback device's node GUID derives from the address it
		// binds: pin one no other test process uses, so that every run
		// here prints the same device.
		env := clitest.Env(t, "RDMA_GO_LOOPBACK="+testdev.Addr().String())
		plain, errs, code := clitest.Run(t, bin, env)
		if code != 0 || errs != "" {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		for _, want := range []string{
			"hca_id:\trgo0\n",
			"\ttransport:\t\t\tInfiniBand (0)\n",
			"\tvendor_id:\t\t\t0xffffff\n",
			"\tphys_port_cnt:\t\t\t1\n",
			"\t\tport:\t1\n",
			"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
			"\t\t\tmax_mtu:\t\t4096 (5)\n",
			"\t\t\tlink_layer:\t\tEthernet\n",
		} {
			if !strings.Contains(plain, want) {
				t.Errorf("output lacks %q:\n%s", want, plain)
			}
		}
		if !strings.HasPrefix(plain, "hca_id:\trgo0\n") || !strings.HasSuffix(plain, "\t\t\tlink_layer:\t\tEthernet\n\n") {
			t.Errorf("plain output:\n%s", plain)
		}
		if strings.Contains(plain, "GID[") || strings.Contains(plain, "max_qp") {
			t.Errorf("verbose lines without -v:\n%s", plain)
		}
		for _, args := range [][]string{{"-i", "1"}, {"-i", "0x1"}, {"-i", "257"}, {"-i", "256"}, {"-d", "rgo0"}, {"--ib-d", "rgo0", "--ib-p=1"}} {
			check(t, env, args, result{plain, "", 0})
		}

		verbose, errs, code := clitest.Run(t, bin, env, "-v")
		if code != 0 || errs != "" {
			t.Fatalf("-v: exit %d, stderr %q", code, errs)
		}
		for _, re := range []string{
			`(?m)^\tmax_qp:\t\t\t\t\d+$`,
			`(?m)^\tdevice_cap_flags:\t\t0x[0-9a-f]{8}$`,
			`(?m)^\tnum_comp_vectors:\t\t\d+$`,
			`(?m)^\t\t\tphys_state:\t\tLINK_UP \(5\)$`,
			`(?m)^\t\t\tGID\[  0\]:\t\tfe80::[0-9a-f:]+, RoCE v2$`,
			`(?m)^\t\t\tGID\[  1\]:\t\t::ffff:127\.\d+\.\d+\.\d+, RoCE v2\n\n\z`,
		} {
			if !regexp.MustCompile(re).MatchString(verbose) {
				t.Errorf("-v output does not match %s:\n%s", re, verbose)
			}
		}
		again, errs, code := clitest.Run(t, bin, env, "rgo0", "-v", "--verbose")
		if code != 0 || errs != "" || again != verbose {
			t.Errorf("rgo0 -v --verbose: exit %d, stderr %q, stdout\n%s\nwant\n%s", code, errs, again, verbose)
		}
	})
}
