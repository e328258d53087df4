package verbs_test

// A peer process killed in the middle of a transfer: the parent streams
// 64 KiB RDMA WRITEs to a child over real UDP, kills the child with SIGKILL,
// and checks what an application sees (IBTA C9-140/141, as rxe does): the
// first unacknowledged WR completes with RETRY_EXC_ERR within the QP's
// configured transport timeouts, every later one is flushed, nothing is
// lost or left pending, and the QP's resources go away (the package's
// goleak check runs at the end).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

const deathEnv = "RDMA_GO_VERBS_TEST_DEATH"

// deathConfig: 64 KiB chunks with many outstanding WRITEs; timeout 16
// (4.096 µs × 2^16 ≈ 268 ms) and retry_cnt 6 (7 retries for ever, as on
// rxe). Shorter timers fail a live peer that a loaded machine leaves
// unscheduled for a few hundred milliseconds.
func deathConfig() pairConfig {
	cfg := defaultPairConfig()
	cfg.BufSize = 1 << 20
	cfg.Timeout, cfg.RetryCnt = 16, 6
	return cfg
}

// TestHelperPeerDeath is the child of TestRCPeerKilledMidTransfer: it
// connects, reports "ready", and waits to be killed.
func TestHelperPeerDeath(t *testing.T) {
	if os.Getenv(deathEnv) != "1" {
		t.Skip("the child process of TestRCPeerKilledMidTransfer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	lines, _ := readLines(os.Stdin, os.Stderr, make(chan struct{}), cancel)
	c := &procConn{lines: lines, w: os.Stdout}
	cfg := deathConfig()
	dev, err := verbs.AddLoopbackDevice("death-child")
	if err != nil {
		t.Fatal(err)
	}
	e, err := openEnd(dev, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if err := qpToInit(e.qp, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.send("info", e.info()); err != nil {
		t.Fatal(err)
	}
	var peer peerInfo
	if err := c.recv(ctx, "info", &peer); err != nil {
		t.Fatal(err)
	}
	if err := qpToRTS(e.qp, e.psn, peer, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.send("ready", mpCheck{Role: "child"}); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done() // the parent kills this process long before
}

func TestRCPeerKilledMidTransfer(t *testing.T) {
	if os.Getenv(deathEnv) == "1" {
		t.Skip("in the child")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperPeerDeath$", "-test.count=1",
		fmt.Sprintf("-test.timeout=%v", procLimit+10*time.Second))
	cmd.Env = append(os.Environ(), deathEnv+"=1")
	cmd.WaitDelay = 5 * time.Second
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	childOut := &lockedBuffer{}
	lines, done := readLines(stdout, childOut, stop, func() {})
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
		}
		stdin.Close()
		close(stop)
		<-done
		cmd.Wait()
		if t.Failed() {
			t.Logf("child stdout:\n%s\nchild stderr:\n%s", childOut.String(), stderr.String())
		}
	}()
	c := &procConn{lines: lines, w: stdin}

	cfg := deathConfig()
	e := newEnd(t, "death-parent", &cfg)
	if err := qpToInit(e.qp, &cfg); err != nil {
		t.Fatal(err)
	}
	var peer peerInfo
	if err := c.recv(ctx, "info", &peer); err != nil {
		t.Fatal(err)
	}
	if err := c.send("info", e.info()); err != nil {
		t.Fatal(err)
	}
	if err := qpToRTS(e.qp, e.psn, peer, &cfg); err != nil {
		t.Fatal(err)
	}
	var ready mpCheck
	if err := c.recv(ctx, "ready", &ready); err != nil {
		t.Fatal(err)
	}

	// Stream: keep `window` WRITEs outstanding; after `before` have
	// completed, kill the child and post one window more.
	const chunk, window, before = 64 << 10, 16, 64
	slots := cfg.BufSize / chunk
	write := func(id uint64) verbs.SendWR {
		off := int(id) % slots * chunk
		return verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{e.mr.SGE(off, chunk)}, RemoteAddr: peer.Addr + uint64(off), RKey: peer.RKey}
	}
	var posted, completed uint64
	for ; posted < window; posted++ {
		e.post(t, write(posted))
	}
	for completed < before {
		wcs, err := collectWCsCtx(ctx, e.scq, e.ch, 1)
		if err != nil {
			t.Fatalf("streaming, after %d completions: %v", completed, err)
		}
		if wcs[0].Status != verbs.WCSuccess || wcs[0].WRID != completed {
			t.Fatalf("completion %d before the kill: %+v", completed, wcs[0])
		}
		completed++
		e.post(t, write(posted))
		posted++
	}
	killed = true
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	// What was outstanding may all have been acknowledged before the
	// child died; these cannot be.
	for range window {
		e.post(t, write(posted))
		posted++
	}

	// Every outstanding WR completes, in order: successes (acknowledged
	// before the kill), then one RETRY_EXC_ERR, then flushes.
	rest, err := collectWCsCtx(ctx, e.scq, e.ch, int(posted-completed))
	if err != nil {
		t.Fatalf("after the kill, %d WRs outstanding: %v", posted-completed, err)
	}
	took := time.Since(killedAt)
	retryExc := -1
	for i, wc := range rest {
		id := completed + uint64(i)
		if wc.WRID != id {
			t.Fatalf("completion %d after the kill has wr_id %d, want %d", i, wc.WRID, id)
		}
		switch {
		case retryExc < 0 && wc.Status == verbs.WCSuccess:
		case retryExc < 0 && wc.Status == verbs.WCRetryExcErr:
			retryExc = i
		case retryExc >= 0 && wc.Status == verbs.WCWRFlushErr:
		default:
			t.Fatalf("completion %d after the kill (wr_id %d): %s", i, id, wc.Status)
		}
	}
	if retryExc < 0 {
		t.Fatalf("no RETRY_EXC_ERR among the %d completions after the kill", len(rest))
	}
	// retry_cnt+1 timeouts of 4.096 µs × 2^timeout each; the bound allows
	// each timer twice its time, plus a second for a loaded machine.
	per := time.Duration(4096<<cfg.Timeout) * time.Nanosecond
	if bound := 2*time.Duration(cfg.RetryCnt+1)*per + time.Second; took > bound {
		t.Errorf("RETRY_EXC_ERR %v after the kill, want within %v", took, bound)
	}
	if st := e.qp.State(); st != verbs.QPStateErr {
		t.Fatalf("QP state %v, want ERR", st)
	}
	// Nothing more arrives; the QP and its CQs are released.
	var extra [4]verbs.WC
	if n, _ := e.scq.Poll(extra[:]); n != 0 {
		t.Fatalf("%d more completions: %+v", n, extra[:n])
	}
	if err := e.qp.Destroy(); err != nil {
		t.Fatalf("destroy the QP: %v", err)
	}
	e.qp = nil
	t.Logf("killed after %d WRITEs of 64 KiB; %d outstanding: %d acknowledged, RETRY_EXC_ERR after %v, %d flushed",
		completed, len(rest), retryExc, took.Round(time.Millisecond), len(rest)-retryExc-1)
}
