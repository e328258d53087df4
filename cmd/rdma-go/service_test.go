//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// streamChild is one end of an RC stream set up with rdma_cm: "server"
// accepts one connection and receives 64 KiB SENDs, reposting each
// receive; "client" dials (retry count 6: a dead peer fails the QP, where
// 7 retries for ever, as on rxe) and sends 64 KiB at a time, 16
// outstanding, until a completion fails, and prints its status. Both say
// "connected" once connected.
func streamChild(role, addr string) {
	const size, depth = 64 << 10, 16
	opts := &rdmacm.Options{RetryCount: 6, Cap: verbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth}}
	var c *rdmacm.Conn
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if role == "server" {
		var l *rdmacm.Listener
		if l, err = rdmacm.Listen(addr, opts); err == nil {
			c, err = l.Accept(ctx)
		}
	} else {
		c, err = rdmacm.Dial(ctx, addr, opts)
	}
	if err != nil {
		fmt.Println("child:", err)
		os.Exit(2)
	}
	buf := make([]byte, depth*size)
	mr, err := c.PD().RegMR(buf, verbs.AccessLocalWrite)
	if err != nil {
		fmt.Println("child:", err)
		os.Exit(2)
	}
	post := func(i uint64) error {
		sge := []verbs.SGE{mr.SGE(int(i%depth)*size, size)}
		if role == "server" {
			return c.QP().PostRecv(verbs.RecvWR{ID: i, SGL: sge})
		}
		return c.QP().PostSend(verbs.SendWR{ID: i, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: sge})
	}
	for i := range uint64(depth) {
		if err := post(i); err != nil {
			fmt.Println("child:", err)
			os.Exit(2)
		}
	}
	fmt.Println("connected")
	cq := c.SendCQ()
	if role == "server" {
		cq = c.RecvCQ()
	}
	wc := make([]verbs.WC, depth)
	for next := uint64(depth); ; {
		n, err := cq.Poll(wc)
		if err != nil {
			fmt.Println("poll:", err)
			os.Exit(2)
		}
		for _, w := range wc[:n] {
			if w.Status != verbs.WCSuccess {
				fmt.Printf("completion: %v\n", w.Status)
				os.Exit(1)
			}
			if err := post(next); err != nil {
				fmt.Println("post:", err)
				os.Exit(2)
			}
			next++
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
}

// proc is a process the test started, bounded by the test's context.
type proc struct {
	name     string
	cmd      *exec.Cmd
	out, err clitest.Buffer
	done     chan struct{}
	werr     error
}

func start(t *testing.T, ctx context.Context, env []string, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.CommandContext(ctx, bin, args...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.werr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for p to exit and returns its exit status.
func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s did not end within %v\nstdout:\n%s\nstderr:\n%s", p.name, within, p.out.String(), p.err.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// eventually polls cond every 10 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tcpListening reports whether a TCP socket listens on 127.0.0.1:port or
// on any address, from /proc/net/tcp and tcp6 (connecting to find out would use up
// a pingpong server's one connection).
func tcpListening(t *testing.T, port string) bool {
	t.Helper()
	b4, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	b6, _ := os.ReadFile("/proc/net/tcp6")
	var p int
	fmt.Sscan(port, &p)
	for _, want := range []string{fmt.Sprintf("0100007F:%04X", p), fmt.Sprintf("00000000:%04X", p), fmt.Sprintf("%032d:%04X", 0, p)} {
		for _, line := range strings.Split(string(b4)+string(b6), "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[1] == want && f[3] == "0A" {
				return true
			}
		}
	}
	return false
}

var attachedRE = regexp.MustCompile(`msg="service: attached" addr=\S+ slot=(\d+) pid=(\d+)`)

// TestServiceFourProcesses: four processes share the loopback device's one
// address, 127.0.0.1, through the host service, two pairs at once: an
// ibv_rc_pingpong pair (out-of-band TCP exchange) and an RC stream of
// SENDs (rdma_cm: its REQ, REP and RTU cross processes through the
// service). The stream's server is killed mid-transfer: the pingpong pair
// finishes, and the stream's sender, whose SENDs the dead process no
// longer acknowledges, fails with RETRY_EXC_ERR. (A pingpong's peer cannot show
// that: when its partner dies after acknowledging its last SEND, it waits
// for a receive forever, on any RDMA device.) A pair started afterwards
// works and gets a slot the dead process never had.
func TestServiceFourProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs five processes")
	}
	rg := clitest.Build(t, "rdma-go")
	pp := clitest.BuildPackage(t, "ibv_rc_pingpong", "../ibv_rc_pingpong")
	dir := t.TempDir()
	sock := filepath.Join(dir, "service.sock")
	env := clitest.Env(t, "RDMA_GO_SERVICE="+sock, fmt.Sprintf("RDMA_GO_PORT=%d", clitest.FreePort(t, "udp4")), "XDG_RUNTIME_DIR="+dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	svc := start(t, ctx, env, "rdma-go service", rg, "service", "--socket", sock, "-v")
	eventually(t, 30*time.Second, "service socket", func() bool { _, err := os.Stat(sock); return err == nil })

	// Pair A long enough to be mid-transfer when B's server dies; pair B
	// runs until then.
	pa, pb := fmt.Sprint(clitest.FreePort(t, "tcp4")), fmt.Sprint(clitest.FreePort(t, "tcp4"))
	common := []string{"-g", "1", "-s", "4096"}
	aSrv := start(t, ctx, env, "A server", pp, append(common, "-p", pa, "-n", "20000")...)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	streamEnv := func(role string) []string {
		return append(env[:len(env):len(env)], "RDMAGO_STREAM_CHILD="+role, "RDMAGO_STREAM_ADDR=127.0.0.1:"+pb)
	}
	bSrv := start(t, ctx, streamEnv("server"), "B server", self, "-test.run=^$")
	eventually(t, 30*time.Second, "both servers listening", func() bool {
		return tcpListening(t, pa) && strings.Contains(svc.err.String(), `msg="service: listen"`)
	})
	aCli := start(t, ctx, env, "A client", pp, append(common, "-p", pa, "-n", "20000", "127.0.0.1")...)
	bCli := start(t, ctx, streamEnv("client"), "B client", self, "-test.run=^$")
	eventually(t, 30*time.Second, "four processes attached", func() bool {
		return len(attachedRE.FindAllString(svc.err.String(), -1)) >= 4
	})
	// Let both pairs exchange (their "local address" lines come after
	// connecting), then kill B's server.
	eventually(t, 30*time.Second, "both pairs connected", func() bool {
		return strings.Contains(aCli.out.String(), "remote address") && strings.Contains(bCli.out.String(), "connected")
	})
	time.Sleep(200 * time.Millisecond)
	if !aCli.running() {
		t.Fatalf("pair A finished before the kill; it should still be running\n%s", aCli.out.String())
	}
	bSrv.cmd.Process.Signal(syscall.SIGKILL)

	if code := bCli.wait(t, time.Minute); code != 1 || !strings.Contains(bCli.out.String(), "retry counter exceeded") {
		t.Errorf("B client (peer killed): exit %d, want a failure naming the retry counter\nstdout:\n%s\nstderr:\n%s",
			code, bCli.out.String(), bCli.err.String())
	}
	for _, p := range []*proc{aSrv, aCli} {
		if code := p.wait(t, 2*time.Minute); code != 0 || !strings.Contains(p.out.String(), "20000 iters in") {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", p.name, code, p.out.String(), p.err.String())
		}
	}

	// A new pair works, and no new process gets the dead one's slot.
	pc := fmt.Sprint(clitest.FreePort(t, "tcp4"))
	cSrv := start(t, ctx, env, "C server", pp, append(common, "-p", pc, "-n", "100")...)
	eventually(t, 30*time.Second, "C server listening", func() bool { return tcpListening(t, pc) })
	cCli := start(t, ctx, env, "C client", pp, append(common, "-p", pc, "-n", "100", "127.0.0.1")...)
	for _, p := range []*proc{cSrv, cCli} {
		if code := p.wait(t, time.Minute); code != 0 {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", p.name, code, p.out.String(), p.err.String())
		}
	}
	slotOf := map[string]string{} // pid → slot
	var slots []string
	for _, m := range attachedRE.FindAllStringSubmatch(svc.err.String(), -1) {
		slotOf[m[2]] = m[1]
		slots = append(slots, m[1])
	}
	dead := slotOf[fmt.Sprint(bSrv.cmd.Process.Pid)]
	if dead == "" || len(slots) != 6 {
		t.Fatalf("service log does not show six attaches and the dead process's:\n%s", svc.err.String())
	}
	for _, s := range slots[4:] {
		if s == dead {
			t.Errorf("slot %s of the killed process was given to a new one within the quarantine\n%s", dead, svc.err.String())
		}
	}
}
