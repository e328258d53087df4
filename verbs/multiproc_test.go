package verbs_test

// Two processes, each with its own soft device on its own loopback address:
// the test re-executes its binary as a child that runs TestHelperProcess.
// The two exchange QPN, PSN, GID, address and R_Key over the child's stdin
// and stdout, then each side does SEND, WRITE, READ and both atomics to the
// other, over real UDP between the two processes.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

const (
	helperEnv  = "RDMA_GO_VERBS_TEST_HELPER"
	procPrefix = "RGO " // protocol lines start with this; the rest is test output
	procLimit  = 60 * time.Second
)

// Memory layout of each side's MR.
const (
	mpSrc     = 0         // 64 KiB this side WRITEs and SENDs from
	mpWritten = 64 << 10  // 64 KiB the peer WRITEs into
	mpReadMe  = 128 << 10 // 64 KiB the peer READs
	mpRecv    = 192 << 10 // two receive buffers of 4 KiB
	mpCounter = 200 << 10 // 8-byte word the peer FETCH_ADDs to
	mpSwap    = mpCounter + 8
	mpReadTo  = 208 << 10 // 64 KiB where this side's READ lands
	mpResult  = 272 << 10 // atomic results
	mpSize    = 512 << 10
	mpChunk   = 64 << 10
	mpSendLen = 4000 // SEND length: several packets at MTU 1024
)

// procConn is the line protocol between the two processes.
type procConn struct {
	lines <-chan string // protocol lines, without procPrefix
	w     io.Writer
}

func (c *procConn) send(kind string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.w, "%s%s %s\n", procPrefix, kind, b)
	return err
}

func (c *procConn) recv(ctx context.Context, kind string, v any) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting for %q: %w", kind, ctx.Err())
	case line, ok := <-c.lines:
		if !ok {
			return fmt.Errorf("waiting for %q: the other process closed the pipe", kind)
		}
		k, body, _ := strings.Cut(line, " ")
		if k != kind {
			return fmt.Errorf("got %q, want %q", line, kind)
		}
		return json.Unmarshal([]byte(body), v)
	}
}

// readLines feeds the protocol lines of r to the returned channel, and
// copies the other lines (test output) to other, until EOF; once stop is
// closed it drops protocol lines. At EOF it calls eof (the other process is
// gone: stop waiting for it). done closes when it ends.
func readLines(r io.Reader, other io.Writer, stop <-chan struct{}, eof func()) (lines <-chan string, done <-chan struct{}) {
	ch, d := make(chan string, 64), make(chan struct{})
	go func() {
		defer close(d)
		defer close(ch)
		defer eof()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), procPrefix)
			if !ok {
				fmt.Fprintln(other, line)
				continue
			}
			select {
			case ch <- line:
			case <-stop:
			}
		}
	}()
	return ch, d
}

// mpCheck is what a side reports at the end.
type mpCheck struct {
	Role string `json:"role"`
}

func mpConfig() pairConfig {
	cfg := defaultPairConfig()
	cfg.BufSize, cfg.MTU = mpSize, verbs.MTU1024
	return cfg
}

// runPeer is one side, on e (opened with mpConfig): seed is its data
// pattern and peerSeed the other's. The caller closes e only once it knows
// the peer is done with it (the "done"/"bye" exchange), so that no ACK the
// peer waits for is lost to a closed socket.
func runPeer(ctx context.Context, c *procConn, e *tEnd, seed, peerSeed byte) (err error) {
	cfg := mpConfig()
	ne := binary.NativeEndian
	fill(e.buf[mpSrc:mpSrc+mpChunk], seed)
	fill(e.buf[mpReadMe:mpReadMe+mpChunk], seed^0x80)
	ne.PutUint64(e.buf[mpCounter:], 1000*uint64(seed))
	ne.PutUint64(e.buf[mpSwap:], uint64(seed))
	if err := qpToInit(e.qp, &cfg); err != nil {
		return err
	}
	for i := range 2 {
		if err := e.qp.PostRecv(verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{e.mr.SGE(mpRecv+4096*i, 4096)}}); err != nil {
			return err
		}
	}
	if err := c.send("info", e.info()); err != nil {
		return err
	}
	var peer peerInfo
	if err := c.recv(ctx, "info", &peer); err != nil {
		return err
	}
	if peer.GID == e.gid || !peer.GID.IP().IsLoopback() {
		return fmt.Errorf("peer GID %s (mine %s): want another loopback address", peer.GID, e.gid)
	}
	if err := qpToRTS(e.qp, e.psn, peer, &cfg); err != nil {
		return err
	}
	remote := func(off int) uint64 { return peer.Addr + uint64(off) }
	imm := 0xC0DE0000 | uint32(seed)
	err = e.qp.PostSend(
		verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{e.mr.SGE(mpSrc, mpChunk)}, RemoteAddr: remote(mpWritten), RKey: peer.RKey},
		verbs.SendWR{ID: 2, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled, ImmData: imm,
			SGL: []verbs.SGE{e.mr.SGE(mpSrc, mpSendLen)}},
		verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{e.mr.SGE(mpReadTo, mpChunk)}, RemoteAddr: remote(mpReadMe), RKey: peer.RKey},
		verbs.SendWR{ID: 4, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled, CompareAdd: uint64(seed),
			SGL: []verbs.SGE{e.mr.SGE(mpResult, 8)}, RemoteAddr: remote(mpCounter), RKey: peer.RKey},
		verbs.SendWR{ID: 5, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled,
			CompareAdd: uint64(peerSeed), Swap: 0xFFFF * uint64(seed),
			SGL: []verbs.SGE{e.mr.SGE(mpResult+8, 8)}, RemoteAddr: remote(mpSwap), RKey: peer.RKey})
	if err != nil {
		return err
	}
	wcs, err := collectWCsCtx(ctx, e.scq, e.ch, 5)
	if err != nil {
		return err
	}
	for i, wc := range wcs {
		if wc.WRID != uint64(i+1) || wc.Status != verbs.WCSuccess {
			return fmt.Errorf("send completion %d: wr_id %d status %s", i, wc.WRID, wc.Status)
		}
	}
	if i := firstDiff(e.buf[mpReadTo:mpReadTo+mpChunk], pattern(mpChunk, peerSeed^0x80)); i >= 0 {
		return fmt.Errorf("READ data differs from byte %d", i)
	}
	if got, want := ne.Uint64(e.buf[mpResult:]), 1000*uint64(peerSeed); got != want {
		return fmt.Errorf("FETCH_ADD returned %d, want %d", got, want)
	}
	if got := ne.Uint64(e.buf[mpResult+8:]); got != uint64(peerSeed) {
		return fmt.Errorf("CMP_SWP returned %d, want %d", got, peerSeed)
	}
	// The peer's SEND, which it posted after its WRITE.
	rwcs, err := collectWCsCtx(ctx, e.rcq, e.ch, 1)
	if err != nil {
		return err
	}
	rwc := rwcs[0]
	if rwc.Status != verbs.WCSuccess || rwc.WRID != 0 || rwc.ByteLen != mpSendLen || rwc.ImmData != 0xC0DE0000|uint32(peerSeed) ||
		rwc.Flags&verbs.WCFlagWithImm == 0 || rwc.Opcode != verbs.WCRecv {
		return fmt.Errorf("receive completion %+v", rwc)
	}
	if i := firstDiff(e.buf[mpRecv:mpRecv+mpSendLen], pattern(mpSendLen, peerSeed)); i >= 0 {
		return fmt.Errorf("received data differs from byte %d", i)
	}
	if i := firstDiff(e.buf[mpWritten:mpWritten+mpChunk], pattern(mpChunk, peerSeed)); i >= 0 {
		return fmt.Errorf("written data differs from byte %d", i)
	}
	// Finish: a SEND each way, so that neither side goes away while the
	// other still needs it.
	if err := e.qp.PostSend(verbs.SendWR{ID: 6, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{e.mr.SGE(mpSrc, 8)}}); err != nil {
		return err
	}
	if wcs, err = collectWCsCtx(ctx, e.scq, e.ch, 1); err != nil {
		return err
	}
	if wcs[0].Status != verbs.WCSuccess {
		return fmt.Errorf("final SEND: %s", wcs[0].Status)
	}
	if rwcs, err = collectWCsCtx(ctx, e.rcq, e.ch, 1); err != nil {
		return err
	}
	if rwcs[0].Status != verbs.WCSuccess || rwcs[0].ByteLen != 8 {
		return fmt.Errorf("final receive: %+v", rwcs[0])
	}
	if got, want := ne.Uint64(e.buf[mpCounter:]), 1000*uint64(seed)+uint64(peerSeed); got != want {
		return fmt.Errorf("my counter is %d after the peer's FETCH_ADD, want %d", got, want)
	}
	if got, want := ne.Uint64(e.buf[mpSwap:]), 0xFFFF*uint64(peerSeed); got != want {
		return fmt.Errorf("my swap word is %d after the peer's CMP_SWP, want %d", got, want)
	}
	return nil
}

// TestHelperProcess is the child side of TestTwoProcesses; it does nothing
// in a normal run.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the child process of TestTwoProcesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	stop := make(chan struct{})
	// If the parent dies, its kill or the timeout ends this process.
	lines, done := readLines(os.Stdin, os.Stderr, stop, func() {})
	defer func() {
		close(stop)
		if t.Failed() {
			return // exit now: the parent is not going to close stdin
		}
		select { // the parent closes our stdin after "bye"
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("stdin not closed")
		}
	}()
	c := &procConn{lines: lines, w: os.Stdout}
	dev, err := verbs.AddLoopbackDevice("child")
	if err != nil {
		t.Fatal(err)
	}
	cfg := mpConfig()
	e, err := openEnd(dev, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if err := runPeer(ctx, c, e, 2, 1); err != nil {
		t.Fatalf("child: %v", err)
	}
	var bye mpCheck
	if err := c.send("done", mpCheck{Role: "child"}); err != nil {
		t.Fatal(err)
	}
	if err := c.recv(ctx, "bye", &bye); err != nil {
		t.Fatal(err)
	}
}

// lockedBuffer collects the child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestTwoProcesses(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		t.Skip("in the child")
	}
	t.Parallel()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1",
		fmt.Sprintf("-test.timeout=%v", procLimit+10*time.Second))
	cmd.Env = append(os.Environ(), helperEnv+"=1")
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
	// The child's end of its stdout closes when it exits: stop waiting.
	peerCtx, peerGone := context.WithCancel(ctx)
	defer peerGone()
	childOut := &lockedBuffer{}
	lines, done := readLines(stdout, childOut, stop, peerGone)
	c := &procConn{lines: lines, w: stdin}
	waited := false
	wait := func() error {
		waited = true
		close(stop)
		<-done // ends at the child's exit (or kill, at the latest at ctx's end)
		return cmd.Wait()
	}
	defer func() {
		if !waited {
			cancel() // kills the child
			stdin.Close()
			wait()
		}
		if t.Failed() {
			t.Logf("child stdout:\n%s\nchild stderr:\n%s", childOut.String(), stderr.String())
		}
	}()

	cfg := mpConfig()
	e := newEnd(t, "parent", &cfg) // closed after the child has exited
	if err := runPeer(peerCtx, c, e, 1, 2); err != nil {
		t.Fatalf("parent: %v", err)
	}
	var fin mpCheck
	if err := c.recv(ctx, "done", &fin); err != nil || fin.Role != "child" {
		t.Fatalf("child did not finish: %v %+v", err, fin)
	}
	if err := c.send("bye", mpCheck{Role: "parent"}); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := wait(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("child exited with %v", ee)
		}
		t.Fatal(err)
	}
	t.Logf("two processes: SEND, WRITE, READ, FETCH_ADD and CMP_SWP both ways in %v", time.Since(start))
}
