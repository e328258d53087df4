package cmtools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"github.com/rdma-go/rdma-go/internal/testdev"
)

// The test binary doubles as the five tools: with CMTOOLS_TEST_TOOL set it
// runs that tool on its arguments and exits, so that tests can start
// real processes (a device per process, as the tools are used) without
// building the commands.
const (
	toolEnv = "CMTOOLS_TEST_TOOL"
	progEnv = "CMTOOLS_TEST_PROG"
)

var tools = map[string]func(*Env, []string) int{
	"rping":       Rping,
	"ucmatose":    Ucmatose,
	"udaddy":      Udaddy,
	"rdma_server": RdmaServer,
	"rdma_client": RdmaClient,
}

func TestMain(m *testing.M) {
	if name := os.Getenv(toolEnv); name != "" {
		os.Exit(runChild(name))
	}
	os.Exit(m.Run())
}

// The child tool tells the test, one line at a time on file descriptor 3,
// the address of its device ("device 127.x.y.z") and when its server
// listens ("listening"): events its output does not show.
const (
	deviceEnv = "CMTOOLS_TEST_DEVICE" // "1": open a device of the child's own
	eventsFD  = 3
)

// runChild runs the tool that the environment names, with a device of its
// own on a loopback address no other test process uses (testdev) unless
// told not to have any.
func runChild(name string) int {
	prog := os.Getenv(progEnv)
	if prog == "" {
		prog = name
	}
	events := os.NewFile(eventsFD, "events")
	env := &Env{Prog: prog, Stdout: os.Stdout, Stderr: os.Stderr,
		listening: func() { fmt.Fprintln(events, "listening") }}
	if os.Getenv(deviceEnv) == "1" {
		c, err := testdev.Open("rgo")
		if err != nil {
			fmt.Fprintln(os.Stderr, "test child:", err)
			return 125
		}
		defer c.Close()
		fmt.Fprintln(events, "device", c.Device().Addr())
	}
	return tools[name](env, os.Args[1:])
}

// proc is a tool running as a child process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr clitest.Buffer
	events         chan string // the lines of eventsFD; closed at EOF
	done           chan struct{}
	err            error
}

// start runs tool with args in a child process whose only RDMA device is
// one of its own (device), or which has none.
func start(t *testing.T, tool string, device bool, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	p := &proc{done: make(chan struct{}), events: make(chan string, 16)}
	p.cmd = exec.CommandContext(ctx, os.Args[0], args...)
	cfg := filepath.Join(t.TempDir(), "devices")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := "0"
	if device {
		dev = "1"
	}
	p.cmd.Env = append(os.Environ(), toolEnv+"="+tool, progEnv+"="+tool, deviceEnv+"="+dev,
		"RDMA_GO_LOOPBACK=off", "RDMA_GO_DEVICES=", "RDMA_GO_CONFIG="+cfg)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	r, w, err := os.Pipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p.cmd.ExtraFiles = []*os.File{w} // file descriptor 3 (eventsFD)
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.events <- sc.Text()
		}
		close(p.events)
	}()
	go func() {
		p.err = p.cmd.Wait()
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// event waits for the child's next event line, which must start with want,
// and returns the rest of it.
func (p *proc) event(t *testing.T, want string) string {
	t.Helper()
	select {
	case ev, ok := <-p.events:
		if !ok {
			<-p.done
			t.Fatalf("waiting for %q: the child ended (%v)\n%s%s", want, p.err, p.stdout.String(), p.stderr.String())
		}
		rest, found := strings.CutPrefix(ev, want)
		if !found {
			t.Fatalf("waiting for %q: the child said %q", want, ev)
		}
		return strings.TrimSpace(rest)
	case <-time.After(30 * time.Second):
		t.Fatalf("waiting for %q: the child said nothing for 30 s\n%s%s", want, p.stdout.String(), p.stderr.String())
	}
	return ""
}

// device returns the address of the child's device.
func (p *proc) device(t *testing.T) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(p.event(t, "device"))
	if err != nil {
		t.Fatalf("the child's device: %v", err)
	}
	return a
}

// waitListen waits until the child's server listens.
func (p *proc) waitListen(t *testing.T) { t.Helper(); p.event(t, "listening") }

// wait returns the process's exit status, stdout and stderr.
func (p *proc) wait(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(70 * time.Second):
		t.Fatalf("the child did not end in 70 s\n%s%s", p.stdout.String(), p.stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		code = ee.ExitCode()
	} else if p.err != nil {
		t.Fatal(p.err)
	}
	return code, p.stdout.String(), p.stderr.String()
}

// run runs tool to completion in a child process.
func run(t *testing.T, tool string, device bool, args ...string) (int, string, string) {
	t.Helper()
	return start(t, tool, device, args...).wait(t)
}

// startServer starts a server tool in a child process and returns it and
// its device's address once it listens.
func startServer(t *testing.T, tool string, args ...string) (*proc, netip.Addr) {
	t.Helper()
	p := start(t, tool, true, args...)
	a := p.device(t)
	p.waitListen(t)
	return p, a
}

// openDevice opens a soft device in this process on a loopback address no
// other test process uses, and returns its address; it stays open until
// the test ends.
func openDevice(t *testing.T) netip.Addr {
	t.Helper()
	return testdev.Device(t, "cmt").Device().Addr()
}

// portSeq numbers the CM ports of the tests in this process. CM ports
// live in the process (rdmacm's port spaces), so no other process can
// take them, and each test's tools are gone before the next starts.
var portSeq atomic.Int32

// inproc is a tool running in this process.
type inproc struct {
	stdout, stderr clitest.Buffer
	code           int
	done           chan struct{}
	cancel         context.CancelFunc
	listening      chan struct{}
	listenOnce     sync.Once
}

// goTool runs tool in a goroutine of this process.
func goTool(t *testing.T, tool string, args ...string) *inproc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	r := &inproc{done: make(chan struct{}), cancel: cancel, listening: make(chan struct{})}
	e := &Env{Prog: tool, Stdout: &r.stdout, Stderr: &r.stderr, Ctx: ctx,
		listening: func() { r.listenOnce.Do(func() { close(r.listening) }) }}
	go func() {
		defer close(r.done)
		r.code = tools[tool](e, args)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// waitListen waits until the server tool listens.
func (r *inproc) waitListen(t *testing.T) {
	t.Helper()
	select {
	case <-r.listening:
	case <-r.done:
		t.Fatalf("server exited: %d\n%s%s", r.code, r.stdout.String(), r.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("waiting 30 s for the server to listen\n%s%s", r.stdout.String(), r.stderr.String())
	}
}

// wait returns the tool's exit status and output.
func (r *inproc) wait(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(70 * time.Second):
		t.Fatalf("%s did not end in 70 s\n%s%s", "the tool", r.stdout.String(), r.stderr.String())
	}
	return r.code, r.stdout.String(), r.stderr.String()
}

// lines splits output into lines.
func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// wantLines fails unless out is exactly want, line by line.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	got := lines(out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
