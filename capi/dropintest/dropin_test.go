package dropintest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"github.com/rdma-go/rdma-go/internal/testdev"
)

// dir holds the drop-in TestMain built, or skip says why there is none.
var dir, skip string

func TestMain(m *testing.M) {
	code := func() int {
		if runtime.GOOS != "linux" {
			skip = "the drop-in is built for Linux only"
			return m.Run()
		}
		if _, err := exec.LookPath("gcc"); err != nil {
			skip = "no gcc: the drop-in is built with cgo"
			return m.Run()
		}
		if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
			skip = "no verbs.h (Debian: libibverbs-dev): the drop-in is built against it"
			return m.Run()
		}
		tmp, err := os.MkdirTemp("", "rdmago-capi-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(tmp)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "sh", "../build.sh", tmp).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "capi/build.sh: %v\n%s", err, out)
			return 1
		}
		dir = tmp
		return m.Run()
	}()
	os.Exit(code)
}

// need skips t without the drop-in or without the system programs named.
func need(t *testing.T, progs ...string) {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s (Debian: ibverbs-utils, perftest, rdmacm-utils)", p)
		}
	}
}

// env is the environment of a program run over the drop-in: the soft
// devices of a fresh machine, in the process itself, with rgo0 on a
// loopback address no other test process uses (its node GUID derives from
// it, and a peer's late packets must not reach another test's device).
func env(t *testing.T) []string { return envAt(t, testdev.Addr().String()) }

// envAt is env with rgo0 on addr.
func envAt(t *testing.T, addr string) []string {
	return clitest.Env(t, "LD_LIBRARY_PATH="+dir, "RDMA_GO_SERVICE=off", "RDMA_GO_LOOPBACK="+addr)
}

func TestSymbols(t *testing.T) {
	need(t)
	for _, lib := range []string{"libibverbs.so.1", "librdmacm.so.1"} {
		t.Run(lib, func(t *testing.T) {
			ours := versioned(t, filepath.Join(dir, lib))
			sys := filepath.Join("/usr/lib", gnuTriplet(), lib)
			if _, err := os.Stat(sys); err != nil {
				t.Skipf("no system %s to compare with", lib)
			}
			want := versioned(t, sys)
			if len(want) < 50 {
				t.Fatalf("the system %s exports only %d versioned symbols", lib, len(want))
			}
			for name, ver := range want {
				if ours[name] != ver {
					t.Errorf("%s: %s@@%s missing (ours: %q)", lib, name, ver, ours[name])
				}
			}
		})
	}
}

// versioned lists a library's defined dynamic symbols with their default
// version.
func versioned(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF || s.Section == elf.SHN_ABS || s.HasVersion && s.VersionIndex&0x8000 != 0 {
			continue // undefined, a version's own symbol, or a hidden (compat) version
		}
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC || elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
			m[s.Name] = s.Version
		}
	}
	return m
}

func gnuTriplet() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// TestLayout compiles layout.h's list against the system's verbs.h and
// compares it with the table the drop-in was compiled with.
func TestLayout(t *testing.T) {
	need(t)
	src := filepath.Join(t.TempDir(), "layout.c")
	prog := strings.TrimSuffix(src, ".c")
	if err := os.WriteFile(src, []byte(layoutProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	capi, _ := filepath.Abs("..")
	if out, err := exec.Command("gcc", "-Wall", "-o", prog, "-I", capi, src, "-L", dir, "-l:librdmago.so.1").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, errOut, code := clitest.Run(t, prog, env(t))
	if code != 0 {
		t.Fatalf("layout check failed (exit %d):\n%s%s", code, out, errOut)
	}
	if n, _ := strconv.Atoi(strings.Fields(out + " 0")[0]); n < 250 {
		t.Fatalf("checked only %q entries", out)
	}
	t.Logf("%s", out)
}

const layoutProgram = `#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include "layout.h"

const struct rgo_layout_entry *rgo_layout(void);

static const struct rgo_layout_entry header[] = {
	RGO_LAYOUT(RGO_LAYOUT_OFF, RGO_LAYOUT_SIZE)
	{NULL, 0},
};

int main(void) {
	const struct rgo_layout_entry *lib = rgo_layout();
	int n = 0, bad = 0;
	for (; header[n].name; n++) {
		if (!lib[n].name || strcmp(lib[n].name, header[n].name)) {
			printf("entry %d: library has %s, header %s\n", n, lib[n].name ? lib[n].name : "(end)", header[n].name);
			return 1;
		}
		if (lib[n].value != header[n].value) {
			printf("%s: library %lu, verbs.h %lu\n", header[n].name, lib[n].value, header[n].value);
			bad++;
		}
	}
	if (lib[n].name) {
		printf("library has more entries than the header list\n");
		return 1;
	}
	printf("%d entries checked, %d differ\n", n, bad);
	return bad != 0;
}
`

// TestDevices runs ibv_devices and ibv_devinfo over the drop-in and
// compares their output with rdma-go's Go tools on the same devices.
func TestDevices(t *testing.T) {
	need(t, "ibv_devices", "ibv_devinfo")
	for _, c := range [][]string{{"ibv_devices"}, {"ibv_devinfo"}, {"ibv_devinfo", "-v"}, {"ibv_devinfo", "-d", "rgo0", "-i", "1"}} {
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			ours := clitest.BuildPackage(t, c[0], "github.com/rdma-go/rdma-go/cmd/"+c[0])
			e := env(t) // one address for both: the same device
			sysOut, sysErr, sysCode := clitest.Run(t, c[0], e, c[1:]...)
			goOut, goErr, goCode := clitest.Run(t, ours, e, c[1:]...)
			if sysOut != goOut || sysErr != goErr || sysCode != goCode || !strings.Contains(sysOut, "rgo0") {
				t.Errorf("Debian's %s over the drop-in (exit %d):\n%s%s\nrdma-go's (exit %d):\n%s%s", c[0], sysCode, sysOut, sysErr, goCode, goOut, goErr)
			}
		})
	}
}

// freePort returns a TCP port nobody listens on now.
func freePort(t *testing.T) string { return strconv.Itoa(clitest.FreePort(t, "tcp4")) }

// listening reports whether a process listens on TCP port (any address).
func listening(port string) bool {
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X ", p)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
				fh.Close()
				return true
			}
		}
		fh.Close()
	}
	return false
}

// proc is a program started for a test.
type proc struct {
	out    clitest.Buffer
	done   chan error
	cancel context.CancelFunc
}

// startProc starts argv with env, for at most two minutes: a server, or a
// client that the test watches while it runs.
func startProc(t *testing.T, argv, env []string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s := &proc{done: make(chan error, 1), cancel: cancel}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &s.out, &s.out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	return s
}

// awaitListen returns once listening reports true, polling it every 20 ms;
// the test fails (and the server is killed) if the server ends first or
// does not listen within a minute.
func (s *proc) awaitListen(t *testing.T, name string, listening func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !listening() {
		select {
		case err := <-s.done:
			t.Fatalf("server %s ended before listening: %v\n%s", name, err, s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.cancel()
			t.Fatalf("server %s not listening after a minute\n%s", name, s.out.String())
		}
	}
}

// wait returns the program's exit error, killing it after a minute.
func (s *proc) wait() error {
	defer s.cancel()
	select {
	case err := <-s.done:
		return err
	case <-time.After(time.Minute):
		s.cancel()
		return <-s.done
	}
}

// pair runs a server and then its client (the server's args plus the
// server's host) and returns both outputs; both must exit 0.
func pair(t *testing.T, server, client string, serverEnv, clientEnv []string, port string, args ...string) (string, string) {
	t.Helper()
	srv := startProc(t, append([]string{server}, args...), serverEnv)
	srv.awaitListen(t, fmt.Sprintf("%s %q (port %s)", server, args, port), func() bool { return listening(port) })
	cout, cerr, code := clitest.Run(t, client, clientEnv, append(append([]string{}, args...), "localhost")...)
	if serr := srv.wait(); code != 0 || serr != nil {
		t.Fatalf("%s %q: client exit %d, server %v\nclient:\n%s%s\nserver:\n%s", client, args, code, serr, cout, cerr, srv.out.String())
	}
	return srv.out.String(), cout + cerr
}

var itersLine = regexp.MustCompile(`(?m)^\d+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter$`)

// TestPingpongs runs Debian's four pingpongs, both ends over the drop-in.
func TestPingpongs(t *testing.T) {
	for _, c := range [][]string{
		{"ibv_rc_pingpong"}, {"ibv_rc_pingpong", "-e"}, {"ibv_rc_pingpong", "-N"}, {"ibv_rc_pingpong", "-s", "65536"},
		{"ibv_uc_pingpong"}, {"ibv_uc_pingpong", "-e"}, {"ibv_ud_pingpong"}, {"ibv_ud_pingpong", "-e"},
		{"ibv_srq_pingpong"}, {"ibv_srq_pingpong", "-e"},
	} {
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			need(t, c[0])
			port := freePort(t)
			sout, cout := pair(t, c[0], c[0], env(t), env(t), port, append([]string{"-d", "rgo0", "-g", "1", "-n", "200", "-p", port}, c[1:]...)...)
			if !itersLine.MatchString(sout) || !itersLine.MatchString(cout) {
				t.Errorf("no result line\nserver:\n%s\nclient:\n%s", sout, cout)
			}
		})
	}
}

// TestPingpongWithGo runs Debian's ibv_rc_pingpong over the drop-in
// against rdma-go's Go one, each as the server.
func TestPingpongWithGo(t *testing.T) {
	need(t, "ibv_rc_pingpong")
	ours := clitest.BuildPackage(t, "ibv_rc_pingpong", "github.com/rdma-go/rdma-go/cmd/ibv_rc_pingpong")
	for _, c := range []struct{ name, server, client string }{
		{"drop-in server", "ibv_rc_pingpong", ours}, {"Go server", ours, "ibv_rc_pingpong"},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := freePort(t)
			sout, cout := pair(t, c.server, c.client, env(t), env(t), port, "-d", "rgo0", "-g", "1", "-n", "200", "-s", "4096", "-p", port)
			if !itersLine.MatchString(sout) || !itersLine.MatchString(cout) {
				t.Errorf("no result line\nserver:\n%s\nclient:\n%s", sout, cout)
			}
		})
	}
}

var bwLine = regexp.MustCompile(`(?m)^\s*\d+\s+\d+(\s+[0-9.]+){3}\s*$`)
var latLine = regexp.MustCompile(`(?m)^\s*\d+\s+\d+(\s+[0-9.]+){7}\s*$`)

// TestPerftest runs perftest's tools, both ends over the drop-in.
func TestPerftest(t *testing.T) {
	for _, c := range [][]string{
		{"ib_write_bw"}, {"ib_write_bw", "--use_old_post_send"}, {"ib_read_bw"}, {"ib_send_bw"}, {"ib_send_bw", "-e"},
		{"ib_atomic_bw"}, {"ib_send_lat"}, {"ib_write_lat"}, {"ib_read_lat"},
	} {
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			need(t, c[0])
			port := freePort(t)
			_, cout := pair(t, c[0], c[0], env(t), env(t), port, append([]string{"-d", "rgo0", "-x", "1", "-n", "200", "-p", port}, c[1:]...)...)
			re := bwLine
			if strings.HasSuffix(c[0], "_lat") {
				re = latLine
			}
			if !re.MatchString(cout) {
				t.Errorf("no result line in the client's output:\n%s", cout)
			}
		})
	}
}

// TestAsyncWatch starts ibv_asyncwatch, which opens the device and waits
// on its async event fd, and checks that it does until stopped.
func TestAsyncWatch(t *testing.T) {
	need(t, "ibv_asyncwatch")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "stdbuf", "-oL", "ibv_asyncwatch", "-d", "rgo0")
	cmd.Env = env(t)
	out, _ := cmd.CombinedOutput()
	if ctx.Err() == nil || !regexp.MustCompile(`^rgo0: async event FD \d+\n$`).Match(out) {
		t.Fatalf("ibv_asyncwatch ended before it was stopped, or printed %q", out)
	}
}

// Debug records of the server's connection manager (RDMA_GO_DEBUG=cm)
// that cmPair watches for.
const (
	cmListening = `msg="ibcm: listening"`
	cmRejected  = `msg="ibcm: REQ for a service ID nobody listens on: rejected"`
)

// cmPair runs an rdma_cm server and then its client; both must exit 0.
// The client starts once the server listens, which the server's connection
// manager says in a debug record.
//
// relisten marks a server that listens a second time after its client
// has connected once (perftest with -R: the control connection, then the
// test's): the client's second connect races that listen, on any RDMA
// stack, and perftest 4.5-0.17 does not survive losing the race (it retries
// with the rdma_cm IDs and event channel it has just destroyed, and hangs
// or crashes). When the server's connection manager says it rejected a
// connect for want of a listener, cmPair runs the pair again, up to six
// times; for any other server a rejected connect fails the test.
func cmPair(t *testing.T, server, client []string, serverEnv, clientEnv []string, relisten bool) (string, string) {
	t.Helper()
	const tries = 6
	for try := 1; ; try++ {
		sout, cout, raced := cmPairOnce(t, server, client, serverEnv, clientEnv)
		if !raced {
			return sout, cout
		}
		if !relisten || try == tries {
			t.Fatalf("%q: the server rejected a connect for want of a listener (try %d of %d)\nclient:\n%s\nserver:\n%s", client, try, tries, cout, sout)
		}
		t.Logf("%q connected before %q listened again (perftest's race): running the pair again", client, server)
	}
}

// cmPairOnce is one run of cmPair; raced says the server rejected a
// connect for want of a listener, and then both programs were killed.
func cmPairOnce(t *testing.T, server, client []string, serverEnv, clientEnv []string) (sout, cout string, raced bool) {
	t.Helper()
	srv := startProc(t, server, append(append([]string{}, serverEnv...), "RDMA_GO_DEBUG=cm"))
	defer srv.cancel()
	srv.awaitListen(t, fmt.Sprintf("%q", server), func() bool { return strings.Contains(srv.out.String(), cmListening) })
	deadline := time.Now().Add(time.Minute)
	cli := startProc(t, client, clientEnv)
	defer cli.cancel()
	var cerr, serr error
	cdone, sdone := false, false
	for !cdone || !sdone {
		select {
		case cerr = <-cli.done:
			cdone = true
		case serr = <-srv.done:
			sdone = true
		case <-time.After(20 * time.Millisecond):
		}
		if strings.Contains(srv.out.String(), cmRejected) {
			srv.cancel()
			cli.cancel()
			if !sdone {
				<-srv.done
			}
			if !cdone {
				<-cli.done
			}
			return srv.out.String(), cli.out.String(), true
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q and %q did not end in a minute\nclient:\n%s\nserver:\n%s", client, server, cli.out.String(), srv.out.String())
		}
	}
	if cerr != nil || serr != nil {
		t.Fatalf("%q: client %v, server %v\nclient:\n%s\nserver:\n%s", client, cerr, serr, cli.out.String(), srv.out.String())
	}
	return srv.out.String(), cli.out.String(), false
}

// TestRDMACM runs rdmacm-utils' programs, both ends over the drop-in, and
// rping against rdma-go's Go rping both ways.
func TestRDMACM(t *testing.T) {
	need(t, "rping", "ucmatose", "udaddy", "rdma_server", "rdma_client", "ib_write_bw", "ib_send_lat")
	goRping := clitest.BuildPackage(t, "rping", "github.com/rdma-go/rdma-go/cmd/rping")
	for _, c := range []struct {
		name           string
		server, client []string
		want           string // in the client's output
		relisten       bool   // see cmPair
	}{
		{"rping", []string{"rping", "-s", "-a", "ADDR", "-p", "PORT", "-C", "10", "-v"}, []string{"rping", "-c", "-a", "ADDR", "-p", "PORT", "-C", "10", "-v"}, "rdma-ping-9: ", false},
		{"rping Go server", []string{"GO", "-s", "-a", "ADDR", "-p", "PORT", "-C", "10", "-v"}, []string{"rping", "-c", "-a", "ADDR", "-p", "PORT", "-C", "10", "-v"}, "rdma-ping-9: ", false},
		{"rping Go client", []string{"rping", "-s", "-a", "ADDR", "-p", "PORT", "-C", "10", "-v"}, []string{"GO", "-c", "-a", "ADDR", "-p", "PORT", "-C", "10", "-v"}, "rdma-ping-9: ", false},
		{"ucmatose", []string{"ucmatose", "-b", "ADDR", "-p", "PORT"}, []string{"ucmatose", "-s", "ADDR", "-p", "PORT"}, "test complete", false},
		{"udaddy", []string{"udaddy", "-b", "ADDR"}, []string{"udaddy", "-s", "ADDR"}, "test complete", false},
		{"rdma_server", []string{"rdma_server", "-s", "ADDR", "-p", "PORT"}, []string{"rdma_client", "-s", "ADDR", "-p", "PORT"}, "rdma_client: end 0", false},
		// perftest with -R: its control channel and its QPs connected by
		// rdma_cm, both libraries in one process.
		{"ib_write_bw -R", []string{"ib_write_bw", "-d", "rgo0", "-R", "-n", "200", "-p", "PORT"}, []string{"ib_write_bw", "-d", "rgo0", "-R", "-n", "200", "-p", "PORT", "ADDR"}, "65536      200", true},
		{"ib_send_lat -R", []string{"ib_send_lat", "-d", "rgo0", "-R", "-n", "200", "-p", "PORT"}, []string{"ib_send_lat", "-d", "rgo0", "-R", "-n", "200", "-p", "PORT", "ADDR"}, " 2       200 ", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			port, addr := freePort(t), testdev.Addr().String()
			fix := func(args []string) []string {
				out := append([]string{}, args...)
				for i, a := range out {
					switch a {
					case "PORT":
						out[i] = port
					case "ADDR":
						out[i] = addr
					case "GO":
						out[i] = goRping
					}
				}
				return out
			}
			_, cout := cmPair(t, fix(c.server), fix(c.client), envAt(t, addr), env(t), c.relisten)
			if !strings.Contains(cout, c.want) {
				t.Errorf("client output lacks %q:\n%s", c.want, cout)
			}
		})
	}
}

// pyverbsPass is how many tests of rdma-core's suite pass over the drop-in
// (85 of 273; the others skip: mlx5, efa, ODP, device memory, dmabuf, XRC,
// flow steering, ...). Fewer is a regression.
const pyverbsPass = 85

// TestPyverbs runs rdma-core's own test suite (tests/, which Debian's
// python3-pyverbs ships under /usr/share/doc/rdma-core) over the drop-in,
// as run_tests.py --dev rgo0 --gid 1 does: no test may fail or error, and
// at least pyverbsPass must pass. The table per module is in the log.
func TestPyverbs(t *testing.T) {
	need(t)
	src := "/usr/share/doc/rdma-core/tests"
	if _, err := os.Stat(filepath.Join(src, "run_tests.py")); err != nil {
		t.Skip("no rdma-core tests (Debian: python3-pyverbs)")
	}
	py := "/usr/bin/python3" // the system's, which has pyverbs
	if out, err := exec.Command(py, "-c", "import pyverbs").CombinedOutput(); err != nil {
		t.Skipf("no pyverbs for %s: %v %s", py, err, out)
	}
	work := t.TempDir()
	tests := filepath.Join(work, "tests")
	if err := copyTests(src, tests); err != nil {
		t.Fatal(err)
	}
	driver, err := os.ReadFile("testdata/pyverbs_run.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tests, "pyverbs_run.py"), driver, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "tests/pyverbs_run.py", "--dev", "rgo0", "--gid", "1")
	cmd.Dir, cmd.Env = work, env(t)
	var stderr clitest.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the suite did not run: %v\n%s", err, stderr.String())
	}
	type counts struct{ pass, skip, bad int }
	byModule := map[string]*counts{}
	var total counts
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "RESULT" {
			continue
		}
		mod := strings.Split(f[1], ".")[1]
		c := byModule[mod]
		if c == nil {
			c = &counts{}
			byModule[mod] = c
		}
		switch f[2] {
		case "pass":
			c.pass++
			total.pass++
		case "skip":
			c.skip++
			total.skip++
		default:
			c.bad++
			total.bad++
			t.Errorf("%s: %s", f[1], f[2])
		}
	}
	var mods []string
	for m := range byModule {
		mods = append(mods, m)
	}
	slices.Sort(mods)
	var tab strings.Builder
	fmt.Fprintf(&tab, "%-24s %5s %5s %5s\n", "module", "pass", "skip", "fail")
	for _, m := range mods {
		c := byModule[m]
		fmt.Fprintf(&tab, "%-24s %5d %5d %5d\n", m, c.pass, c.skip, c.bad)
	}
	fmt.Fprintf(&tab, "%-24s %5d %5d %5d\n", "total", total.pass, total.skip, total.bad)
	t.Logf("rdma-core's tests over the drop-in:\n%s", tab.String())
	if total.bad > 0 || total.pass < pyverbsPass {
		t.Errorf("%d passed (want at least %d), %d failed\n%s", total.pass, pyverbsPass, total.bad, stderr.String())
	}
}

// copyTests copies rdma-core's tests directory, decompressing the files
// Debian gzipped.
func copyTests(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		name := e.Name()
		if strings.HasSuffix(name, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			name = strings.TrimSuffix(name, ".gz")
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// TestEventFDs runs testdata/eventfd.c, compiled here against the system's
// verbs.h and libibverbs and run over the drop-in: the completion channel
// and async event fds are pollable, honour O_NONBLOCK (EAGAIN), and a
// completion on an armed CQ makes the channel readable.
func TestEventFDs(t *testing.T) {
	need(t)
	prog := filepath.Join(t.TempDir(), "eventfd")
	if out, err := exec.Command("gcc", "-Wall", "-o", prog, "testdata/eventfd.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, errOut, code := clitest.Run(t, prog, env(t))
	if code != 0 || out != "ok\n" {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
}
