package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/internal/version"
)

// TestMain makes the test binary rdma-bench's peer process when a test
// (through runWith -procs 2, which starts os.Executable()) asks for one.
func TestMain(m *testing.M) {
	if isPeer() {
		os.Exit(peerMain(os.Stdin, os.Stdout, os.Stderr))
	}
	if os.Getenv(parentEnv) == "1" {
		os.Exit(parentMain())
	}
	os.Exit(m.Run())
}

// wantNames are the scenarios' names: the JSON carries them, so they stay.
var wantNames = []string{"write-64k", "send-64k", "read-64k", "send-lat", "send-lat-p99", "write-lat", "write-lat-p99",
	"write-rate-1qp", "write-rate-2qp", "write-rate-4qp", "write-rate-8qp"}

// checkReport checks the structure of a report of runs rounds over procs
// processes, with at least ops operations measured per run.
func checkReport(t *testing.T, r Report, procs, runs, ops int) {
	t.Helper()
	if r.Procs != procs || r.Runs != runs || r.RdmaGo == "" || r.RdmaGo != version.String() || r.Env.GoVersion == "" || r.Budget == "" {
		t.Errorf("report header %+v", r)
	}
	var names []string
	for _, s := range r.Scenarios {
		names = append(names, s.Name)
		if s.Title == "" || s.TCP == "" || s.Unit == "" || (s.Better != "higher" && s.Better != "lower") {
			t.Errorf("%s: %+v", s.Name, s)
		}
		if len(s.RDMA) != runs || len(s.TCPs) != runs || len(s.Ratios) != runs || len(s.RDMAOps) != runs || len(s.TCPOps) != runs {
			t.Errorf("%s: not %d runs: %+v", s.Name, runs, s)
			continue
		}
		for i := range runs {
			if s.RDMA[i] <= 0 || s.TCPs[i] <= 0 || s.RDMAOps[i] < ops || s.TCPOps[i] < ops {
				t.Errorf("%s run %d: %+v", s.Name, i, s)
			}
			if want := s.RDMA[i] / s.TCPs[i]; s.Ratios[i] != want {
				t.Errorf("%s run %d: ratio %v, want %v", s.Name, i, s.Ratios[i], want)
			}
		}
		m := s.Median
		if m.RDMA != workload.Median(s.RDMA) || m.TCP != workload.Median(s.TCPs) || m.Ratio != workload.Median(s.Ratios) ||
			s.RatioMin != slices.Min(s.Ratios) || s.RatioMax != slices.Max(s.Ratios) || m.Ratio < s.RatioMin || m.Ratio > s.RatioMax {
			t.Errorf("%s: medians or range wrong: %+v", s.Name, s)
		}
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("scenarios %q, want %q", names, wantNames)
	}
}

func TestRunSmallJSON(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"-iters", "64", "--json"}, &o, &e); code != 0 {
		t.Fatalf("status %d: %s", code, e.String())
	}
	var r Report
	if err := json.Unmarshal(o.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, o.String())
	}
	checkReport(t, r, 1, 1, 64)
	if len(r.Addresses) != 0 {
		t.Errorf("one process reports peer addresses %q", r.Addresses)
	}
}

func TestRunTable(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"-iters", "32"}, &o, &e); code != 0 {
		t.Fatalf("status %d: %s", code, e.String())
	}
	for _, w := range append([]string{"in one process", "WRITE 64 KiB bandwidth", "SEND 8 B ping-pong latency",
		"WRITE 8 B ping-pong latency", "WRITE 8 B message rate", "READ 64 KiB", "8 QPs", "RDMA/TCP"}, wantNames...) {
		if !strings.Contains(o.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, o.String())
		}
	}
	// Progress: plain lines when stderr is not a terminal, one per side.
	// The percentile rows are read from their ping-pong's runs.
	measured := 0
	for _, n := range wantNames {
		if !strings.HasSuffix(n, "-p99") {
			measured++
		}
	}
	if n := strings.Count(e.String(), "rdma-bench: round 1/1, "); n != 2*measured || strings.Contains(e.String(), "\r") {
		t.Errorf("%d progress lines, want %d:\n%q", n, 2*measured, e.String())
	}
}

func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"-procs", "3"}, {"-procs", "0"}, {"-runs", "0"}, {"-iters", "-1"},
		{"-only", "write-64k,nope"}} {
		var o, e bytes.Buffer
		if code := run(args, &o, &e); code != 2 {
			t.Errorf("%q: status %d, want 2 (%s)", args, code, e.String())
		}
	}
}

func TestRunOnly(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"-iters", "16", "-runs", "3", "-json", "-only", "write-rate-2qp, send-lat"}, &o, &e); code != 0 {
		t.Fatalf("status %d: %s", code, e.String())
	}
	var r Report
	if err := json.Unmarshal(o.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, o.String())
	}
	// In the table's order, whatever the order asked; a ping-pong with
	// its 99th percentile, read from the same runs (no faster than the
	// median).
	if len(r.Scenarios) != 3 || r.Scenarios[0].Name != "send-lat" || r.Scenarios[1].Name != "send-lat-p99" ||
		r.Scenarios[2].Name != "write-rate-2qp" || len(r.Scenarios[2].Ratios) != 3 {
		t.Fatalf("%+v", r.Scenarios)
	}
	for i := range 3 {
		med, p99 := r.Scenarios[0], r.Scenarios[1]
		if p99.RDMAOps[i] != med.RDMAOps[i] || p99.RDMA[i] < med.RDMA[i]*0.5 || p99.TCPs[i] <= 0 {
			t.Errorf("run %d: p99 %+v against the median's %+v", i, p99, med)
		}
	}
	var o2, e2 bytes.Buffer
	if code := run([]string{"-iters", "16", "-json", "-only", "write-lat-p99"}, &o2, &e2); code != 0 {
		t.Fatalf("status %d: %s", code, e2.String())
	}
	if err := json.Unmarshal(o2.Bytes(), &r); err != nil || len(r.Scenarios) != 2 || r.Scenarios[0].Name != "write-lat" {
		t.Errorf("-only write-lat-p99: %v %+v", err, r.Scenarios)
	}
}

func TestVersion(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"-version"}, &o, &e); code != 0 {
		t.Fatalf("status %d: %s", code, e.String())
	}
	if got, want := o.String(), version.Line()+"\n"; got != want {
		t.Errorf("-version printed %q, want %q", got, want)
	}
}

// gone reports whether process pid no longer exists (exited and reaped),
// or is a zombie nobody reaps (on Linux, when its parent died and no
// process adopts it to reap it, as in some containers).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// waitGone waits, up to d, for pid to be gone.
func waitGone(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if gone(pid) {
			return true
		}
	}
	return gone(pid)
}

// runBounded runs rdma-bench with h, failing the test if it takes longer
// than limit. It returns the status, stdout and stderr.
func runBounded(t *testing.T, limit time.Duration, args []string, h hooks) (int, string, string) {
	t.Helper()
	var o bytes.Buffer
	e := &clitest.Buffer{}
	done := make(chan int, 1)
	go func() { done <- runWith(args, &o, e, h) }()
	select {
	case code := <-done:
		return code, o.String(), e.String()
	case <-time.After(limit):
		t.Fatalf("rdma-bench %q still runs after %v:\n%s", args, limit, e.String())
		return 0, "", ""
	}
}

func TestTwoProcsJSON(t *testing.T) {
	var pids []int
	code, out, errs := runBounded(t, 3*time.Minute, []string{"-procs", "2", "-runs", "2", "-iters", "64", "-json"},
		hooks{child: func(pid int) { pids = append(pids, pid) }})
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	if len(pids) != 1 {
		t.Fatalf("started %d peer processes, want 1", len(pids))
	}
	// rdma-bench waited for its peer: nothing is left of it.
	if !gone(pids[0]) {
		t.Errorf("peer process %d is still there", pids[0])
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	checkReport(t, r, 2, 2, 64)
	// Each process on its own soft device and random loopback address.
	if len(r.Addresses) != 2 || r.Addresses[0] == r.Addresses[1] {
		t.Fatalf("device addresses %q", r.Addresses)
	}
	for _, a := range r.Addresses {
		if ip, err := netip.ParseAddr(a); err != nil || !ip.IsLoopback() {
			t.Errorf("device address %q is not a loopback address", a)
		}
	}
	for _, w := range []string{"rdma-bench: round 1/2, write-64k (1/9), RDMA, 2 processes", "round 2/2, write-rate-8qp (9/9), TCP, 2 processes"} {
		if !strings.Contains(errs, w) {
			t.Errorf("progress lacks %q:\n%s", w, errs)
		}
	}
}

func TestTwoProcsTable(t *testing.T) {
	var pid int
	code, out, errs := runBounded(t, 2*time.Minute, []string{"-procs", "2", "-iters", "32", "-only", "send-64k,write-lat,write-rate-4qp"},
		hooks{child: func(p int) { pid = p }})
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	if !gone(pid) {
		t.Errorf("peer process %d is still there", pid)
	}
	for _, w := range []string{"between two processes", "send-64k", "write-lat", "write-rate-4qp", "4 QPs", "RDMA/TCP"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "read-64k") {
		t.Errorf("-only left read-64k in:\n%s", out)
	}
}

// TestPeerKilled kills the peer process while a workload runs: rdma-bench
// must fail soon, saying that its peer died, and leave no process behind.
func TestPeerKilled(t *testing.T) {
	for _, c := range []struct{ name, side, dur string }{
		{"write-lat", "RDMA", "20s"}, // the measuring side polls memory
		{"send-lat", "RDMA", "20s"},  // it waits on its CQ
		{"write-64k", "RDMA", "20s"}, // the peer's CPU takes no part
		{"send-lat", "TCP", "3s"},    // after 3 s of RDMA
	} {
		t.Run(c.name+"-"+c.side, func(t *testing.T) {
			var mu sync.Mutex
			pid, killed := 0, time.Time{}
			h := hooks{
				child: func(p int) {
					mu.Lock()
					defer mu.Unlock()
					pid = p
				},
				measuring: func(name, side string) {
					if name != c.name || side != c.side {
						return
					}
					mu.Lock()
					p := pid
					mu.Unlock()
					go func() {
						time.Sleep(300 * time.Millisecond) // into the measured loop
						mu.Lock()
						defer mu.Unlock()
						killed = time.Now()
						syscall.Kill(p, syscall.SIGKILL)
					}()
				},
			}
			code, _, errs := runBounded(t, 2*time.Minute, []string{"-procs", "2", "-duration", c.dur, "-only", c.name}, h)
			if code != 1 {
				t.Fatalf("status %d, want 1:\n%s", code, errs)
			}
			// The workload's own bounds are 20 s of measuring and 10 s per
			// wait: failing well within them shows the peer's death was seen.
			mu.Lock()
			el := time.Since(killed)
			mu.Unlock()
			if killed.IsZero() || el > 8*time.Second {
				t.Errorf("rdma-bench failed %v after the kill (at %v)", el, killed)
			}
			for _, want := range []string{fmt.Sprintf("rdma-bench: %s, round 1, %s: ", c.name, c.side),
				fmt.Sprintf("the peer process (pid %d) exited: signal: killed", pid)} {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errs)
				}
			}
			if !gone(pid) {
				t.Errorf("peer process %d is still there", pid)
			}
		})
	}
}

// TestPeerExitsOnEOF starts a peer process by hand, as rdma-bench does,
// sets it to work (answering WRITEs in a loop that polls memory), and
// closes its stdin without a word: the peer must exit, soon.
func TestPeerExitsOnEOF(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), peerEnv+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr clitest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	enc, dec := json.NewEncoder(in), json.NewDecoder(outp)
	ask := func(m msg, want string) msg {
		t.Helper()
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
		var r msg
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%v; stderr: %s", err, stderr.String())
		}
		if r.Op != want {
			t.Fatalf("peer said %+v, want %q", r, want)
		}
		return r
	}
	if r := ask(msg{Op: "hello"}, "ok"); r.Version != version.String() || r.Addr == "" {
		t.Fatalf("hello: %+v", r)
	}
	s, err := lookup("write-lat")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := workload.OpenSoft("tb")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	x, err := workload.NewEnd(dev, s.config())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	info := x.Info()
	r := ask(msg{Op: "rdma", Scenario: s.name, Info: &info}, "ready")
	if err := x.Connect(*r.Info); err != nil {
		t.Fatal(err)
	}
	// The peer answers: its loop runs.
	if res, err := s.active(ctx, x, workload.Budget{Iters: 10}); err != nil || res.Ops != 10 {
		t.Fatalf("%+v, %v", res, err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, outp)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("peer exited: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the peer process still runs 20 s after its stdin closed")
	}
}

// parentEnv makes the test binary a parent that runs rdma-bench -procs 2
// and prints its peer's pid (for TestPeerDiesWithParent).
const parentEnv = "RDMA_BENCH_TEST_PARENT"

// parentMain runs a long rdma-bench -procs 2 that prints its peer's pid on
// stdout once the peer works.
func parentMain() int {
	var pid int
	h := hooks{
		child: func(p int) { pid = p },
		measuring: func(name, side string) {
			fmt.Printf("peer %d\n", pid)
		},
	}
	return runWith([]string{"-procs", "2", "-duration", "60s", "-only", "write-lat"}, io.Discard, os.Stderr, h)
}

// TestPeerDiesWithParent kills a parent rdma-bench (another process) while
// its peer works: the peer must not outlive it.
func TestPeerDiesWithParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), parentEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr clitest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var pid int
	if _, err := fmt.Fscanf(out, "peer %d\n", &pid); err != nil || pid <= 0 {
		t.Fatalf("no peer pid: %v; stderr: %s", err, stderr.String())
	}
	time.Sleep(300 * time.Millisecond) // into the measured loop
	if gone(pid) {
		t.Fatalf("peer %d gone before its parent", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !waitGone(pid, 20*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("peer %d outlived its parent by 20 s", pid)
	}
}
