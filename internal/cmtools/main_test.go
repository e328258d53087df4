package cmtools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
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
		prog := os.Getenv(progEnv)
		if prog == "" {
			prog = name
		}
		os.Exit(tools[name](&Env{Prog: prog, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// proc is a tool running as a child process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// start runs tool with args in a child process whose only RDMA device is
// the loopback one at addr (none when addr is "off").
func start(t *testing.T, tool, addr string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, os.Args[0], args...)
	cfg := filepath.Join(t.TempDir(), "devices")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Env = append(os.Environ(), toolEnv+"="+tool, progEnv+"="+tool, "RDMA_GO_LOOPBACK="+addr,
		"RDMA_GO_DEVICES=", "RDMA_GO_CONFIG="+cfg)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
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

// wait returns the process's exit status, stdout and stderr.
func (p *proc) wait(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(70 * time.Second):
		t.Fatal("process did not end")
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
func run(t *testing.T, tool, addr string, args ...string) (int, string, string) {
	t.Helper()
	return start(t, tool, addr, args...).wait(t)
}

// freeLoopback returns a 127/8 address whose RoCE port is free, chosen at
// random so that concurrent test runs do not meet.
func freeLoopback(t *testing.T) netip.Addr {
	t.Helper()
	for range 100 {
		a := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
		c, err := net.ListenPacket("udp", netip.AddrPortFrom(a, 4791).String())
		if err == nil {
			c.Close()
			return a
		}
	}
	t.Fatal("no free loopback address")
	return netip.Addr{}
}

// waitDevice waits until a process has opened its device at a (its RoCE
// port is taken), then lets it reach its listen call.
func waitDevice(t *testing.T, p *proc, a netip.Addr) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("server exited early: %v\n%s%s", p.err, p.stdout.String(), p.stderr.String())
		default:
		}
		c, err := net.ListenPacket("udp", netip.AddrPortFrom(a, 4791).String())
		if err != nil && errors.Is(err, syscall.EADDRINUSE) {
			time.Sleep(200 * time.Millisecond)
			return
		}
		if c != nil {
			c.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the server's device did not open")
}

var devSeq atomic.Int32

// openDevice adds and opens a loopback device in this process and returns
// its address; it stays open until the test ends.
func openDevice(t *testing.T) netip.Addr {
	t.Helper()
	d, err := verbs.AddLoopbackDevice(fmt.Sprintf("cmt%d", devSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Addr()
}

// syncBuffer is a bytes.Buffer safe for a tool's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// inproc is a tool running in this process.
type inproc struct {
	stdout, stderr syncBuffer
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
		t.Fatal("server does not listen")
	}
}

// wait returns the tool's exit status and output.
func (r *inproc) wait(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(70 * time.Second):
		t.Fatal("tool did not end")
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
