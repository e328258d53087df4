package main

// Two processes: rdma-bench starts itself again as its peer (peerEnv set
// in the child's environment selects the hidden peer mode). The parent
// measures, as in one process; the peer serves the other end of each
// workload: its own soft device on its own loopback address for RDMA, the
// other end of real TCP connections for TCP.
//
// The two talk over the child's stdin and stdout, one JSON object (msg) a
// line. For an RDMA workload the parent sends its QPNs, PSNs, GID and
// memory key ("rdma"), the peer creates its end, connects it and answers
// with its own ("ready"); after the measured run the parent says "stop"
// and the peer answers "done". For TCP the peer listens on 127.0.0.1 and
// answers with the address ("ready"), serves the connections the parent
// makes until the parent closes them, then says "done". For the UDP floor
// ("floor") the peer opens a UDP link on its device's address, answers
// with it ("ready") and receives the stream until "stop" ("done"). "error"
// reports a failure of the peer at any time.
//
// The peer never outlives the parent: on Linux it gets SIGKILL when the
// parent dies (Pdeathsig), and everywhere it exits when its stdin reaches
// EOF, which a dead parent's pipe does. The parent learns of the peer's
// end from Wait and fails every wait at once with the reason.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"github.com/rdma-go/rdma-go/internal/perftest/udpfloor"
	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/internal/version"
	"github.com/rdma-go/rdma-go/verbs"
)

// peerEnv, set to 1 in the environment, makes rdma-bench the peer process.
const peerEnv = "RDMA_BENCH_PEER"

// isPeer reports whether this process was started as the peer.
func isPeer() bool { return os.Getenv(peerEnv) == "1" }

// msg is one line of the control protocol, in either direction.
type msg struct {
	Op       string         `json:"op"`
	Scenario string         `json:"scenario,omitempty"`
	Device   string         `json:"device,omitempty"`
	Info     *workload.Info `json:"info,omitempty"`
	Addr     string         `json:"addr,omitempty"`
	Ops      int            `json:"ops,omitempty"`
	Version  string         `json:"version,omitempty"`
	Err      string         `json:"error,omitempty"`
}

// openDevice opens the named device, or a new soft device on a random
// loopback address of its own.
func openDevice(name, prefix string) (*verbs.Context, error) {
	if name == "" {
		return workload.OpenSoft(prefix)
	}
	d, err := workload.FindDevice(name)
	if err != nil {
		return nil, err
	}
	return d.Open()
}

// peerProc is the parent's handle on the peer process.
type peerProc struct {
	cmd    *exec.Cmd
	pid    int
	in     *os.File // the peer's stdin
	enc    *json.Encoder
	msgs   chan msg
	ctx    context.Context // done when the peer exits or reports an error
	cancel context.CancelCauseFunc
	exited chan struct{}
	endErr error // why the peer ended, once exited is closed
	dev    *verbs.Context
	addr   string // the peer's device address
}

// startPeer starts the peer process, which opens device (or its own soft
// device), and opens the parent's.
func startPeer(device string, stderr io.Writer, h hooks) (p *peerProc, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to start its peer: %w", err)
	}
	// Pipes of our own rather than cmd's: the child's output is read to its
	// end, even after Wait has seen the child exit.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), peerEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	cmd.SysProcAttr = peerAttr()
	cmd.WaitDelay = 5 * time.Second
	p = &peerProc{cmd: cmd, in: inW, enc: json.NewEncoder(inW), msgs: make(chan msg, 64), exited: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child ends, not
		// the process: keep this thread for the child's lifetime.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		p.endErr = fmt.Errorf("the peer process (pid %d) exited: %w", cmd.Process.Pid, err)
		p.cancel(p.endErr)
		close(p.exited)
	}()
	err = <-started
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start the peer process: %w", err)
	}
	p.pid = cmd.Process.Pid
	if h.child != nil {
		h.child(p.pid)
	}
	go p.read(outR)
	defer func() {
		if err != nil {
			p.close(false)
		}
	}()
	if err := p.send(msg{Op: "hello", Device: device}); err != nil {
		return p, err
	}
	m, err := p.await("ok", workload.WaitTimeout)
	if err != nil {
		return p, err
	}
	if m.Version != version.String() {
		return p, fmt.Errorf("the peer process runs rdma-go %s, this one %s", m.Version, version.String())
	}
	p.addr = m.Addr
	if p.dev, err = openDevice(device, "rb"); err != nil {
		return p, fmt.Errorf("open the device: %w", err)
	}
	return p, nil
}

// read passes the peer's messages on to msgs, and cancels p.ctx on an
// error message, so that a measuring loop stops at once. It ends at the
// end of the peer's output.
func (p *peerProc) read(r *os.File) {
	defer close(p.msgs)
	defer r.Close()
	dec := json.NewDecoder(r)
	for {
		var m msg
		if err := dec.Decode(&m); err != nil {
			if !errors.Is(err, io.EOF) {
				p.cancel(fmt.Errorf("garbled message from the peer process: %w", err))
			}
			return
		}
		if m.Op == "error" {
			p.cancel(fmt.Errorf("the peer process: %s", m.Err))
		}
		select {
		case p.msgs <- m:
		default: // the parent no longer listens: it is giving up
		}
	}
}

// send writes m to the peer.
func (p *peerProc) send(m msg) error {
	p.in.SetWriteDeadline(time.Now().Add(workload.WaitTimeout))
	if err := p.enc.Encode(m); err != nil {
		return p.explain(fmt.Errorf("send %q to the peer process: %w", m.Op, err))
	}
	return nil
}

// await returns the peer's next message, which must be op.
func (p *peerProc) await(op string, timeout time.Duration) (msg, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m, ok := <-p.msgs:
		switch {
		case !ok:
			return m, p.explain(errors.New("the peer process closed its output"))
		case m.Op == "error":
			return m, fmt.Errorf("the peer process: %s", m.Err)
		case m.Op != op:
			return m, fmt.Errorf("the peer process said %q, expected %q", m.Op, op)
		}
		return m, nil
	case <-p.ctx.Done():
		return msg{}, context.Cause(p.ctx)
	case <-t.C:
		return msg{}, fmt.Errorf("the peer process did not say %q within %v", op, timeout)
	}
}

// explain puts first, in err, that the peer process ended, when it did
// (or does within a second): its end explains a failure better than what
// the failure looked like here.
func (p *peerProc) explain(err error) error {
	select {
	case <-p.exited:
	case <-time.After(time.Second):
		return err
	}
	if errors.Is(err, p.endErr) {
		return err
	}
	return fmt.Errorf("%w (%v)", p.endErr, err)
}

// close ends the peer: with quit (when ok) and then EOF on its stdin, and
// SIGKILL if it has not exited within WaitTimeout. It always waits for
// the peer to be gone. With ok, a peer that did not exit with status 0 is
// an error.
func (p *peerProc) close(ok bool) error {
	var err error
	if ok {
		err = p.send(msg{Op: "quit"})
	}
	p.in.Close()
	grace := workload.WaitTimeout
	if !ok {
		grace = 2 * time.Second
	}
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(workload.WaitTimeout):
			err = errors.Join(err, fmt.Errorf("the peer process (pid %d) did not end after SIGKILL", p.pid))
		}
		if ok {
			err = errors.Join(err, fmt.Errorf("the peer process (pid %d) did not exit within %v: killed", p.pid, grace))
		}
	}
	if p.dev != nil {
		p.dev.Close()
	}
	if ok && err == nil && !p.cmd.ProcessState.Success() {
		err = p.endErr
	}
	return err
}

// twoProcs measures each workload against the peer process.
type twoProcs struct{ p *peerProc }

// rdma measures s's RDMA side: this process's end measures, the peer's
// serves.
func (t twoProcs) rdma(s *scenario, b workload.Budget) (workload.Result, error) {
	p := t.p
	x, err := workload.NewEnd(p.dev, s.config())
	if err != nil {
		return workload.Result{}, err
	}
	defer x.Close()
	info := x.Info()
	if err := p.send(msg{Op: "rdma", Scenario: s.name, Info: &info}); err != nil {
		return workload.Result{}, err
	}
	m, err := p.await("ready", workload.WaitTimeout)
	if err != nil {
		return workload.Result{}, err
	}
	if m.Info == nil {
		return workload.Result{}, errors.New("the peer process sent no connection information")
	}
	if err := x.Connect(*m.Info); err != nil {
		return workload.Result{}, fmt.Errorf("connect to the peer process: %w", err)
	}
	w, err := s.active(p.ctx, x, s.warmup())
	if err != nil {
		return workload.Result{}, p.explain(fmt.Errorf("warm-up: %w", err))
	}
	r, err := s.active(p.ctx, x, b)
	if err != nil {
		return workload.Result{}, p.explain(err)
	}
	if err := p.send(msg{Op: "stop"}); err != nil {
		return workload.Result{}, err
	}
	if m, err = p.await("done", workload.WaitTimeout); err != nil {
		return workload.Result{}, err
	}
	if s.answers() && m.Ops != w.Ops+r.Ops {
		return workload.Result{}, fmt.Errorf("the peer process answered %d messages, %d were sent", m.Ops, w.Ops+r.Ops)
	}
	return r, nil
}

// tcp measures s's TCP side over connections to the peer process.
func (t twoProcs) tcp(s *scenario, b workload.Budget) (workload.Result, error) {
	p := t.p
	if err := p.send(msg{Op: "tcp", Scenario: s.name}); err != nil {
		return workload.Result{}, err
	}
	m, err := p.await("ready", workload.WaitTimeout)
	if err != nil {
		return workload.Result{}, err
	}
	conns := make([]net.Conn, 0, s.tcpConns())
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range s.tcpConns() {
		c, err := net.DialTimeout("tcp4", m.Addr, workload.WaitTimeout)
		if err != nil {
			return workload.Result{}, p.explain(fmt.Errorf("connect to the peer process: %w", err))
		}
		conns = append(conns, c)
	}
	r, err := s.tcpActive(p.ctx, conns, b)
	if err != nil {
		return workload.Result{}, p.explain(err)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	if _, err := p.await("done", workload.WaitTimeout); err != nil {
		return workload.Result{}, err
	}
	return r, nil
}

// floor measures the UDP floor under s between a link of this process and
// one of the peer's, each on its device's address.
func (t twoProcs) floor(s *scenario, b workload.Budget) (workload.Result, error) {
	p := t.p
	if err := p.send(msg{Op: "floor", Scenario: s.name}); err != nil {
		return workload.Result{}, err
	}
	m, err := p.await("ready", workload.WaitTimeout)
	if err != nil {
		return workload.Result{}, err
	}
	dst, err := netip.ParseAddrPort(m.Addr)
	if err != nil {
		return workload.Result{}, fmt.Errorf("the peer process's UDP floor address: %w", err)
	}
	l, err := udpfloor.Listen(p.dev.Device().Addr())
	if err != nil {
		return workload.Result{}, fmt.Errorf("UDP floor: %w", err)
	}
	defer l.Close()
	r, err := runFloor(p.ctx, l, dst, s, b)
	if err != nil {
		return workload.Result{}, p.explain(err)
	}
	if err := p.send(msg{Op: "stop"}); err != nil {
		return workload.Result{}, err
	}
	if _, err := p.await("done", workload.WaitTimeout); err != nil {
		return workload.Result{}, err
	}
	return r, nil
}

// peer is the peer process's state.
type peer struct {
	mu  sync.Mutex // serializes writes to out
	enc *json.Encoder
	dev *verbs.Context
	job *job           // the workload being served, until "stop"
	wg  sync.WaitGroup // every goroutine serving a workload
}

// job is the peer's end of one RDMA workload or UDP floor.
type job struct {
	release func() // frees the end once it stopped
	cancel  context.CancelFunc
	done    chan struct{}
	ops     int
	err     error
}

// peerMain is the peer process: it serves the parent's requests from in,
// answering on out, until "quit" or the end of in. It returns the exit
// status.
func peerMain(in io.Reader, out, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	pe := &peer{enc: json.NewEncoder(out)}
	defer func() {
		cancel()
		pe.finish()
		if pe.dev != nil {
			pe.dev.Close()
		}
	}()
	dec := json.NewDecoder(in)
	for {
		var m msg
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return 0 // the parent is done, or gone
			}
			fmt.Fprintln(stderr, "rdma-bench peer:", err)
			return 1
		}
		var err error
		switch m.Op {
		case "hello":
			if pe.dev, err = openDevice(m.Device, "rbp"); err == nil {
				pe.reply(msg{Op: "ok", Version: version.String(), Addr: pe.dev.Device().Addr().String()})
			}
		case "rdma":
			err = pe.rdma(ctx, m)
		case "stop":
			err = pe.stop()
		case "tcp":
			err = pe.tcp(ctx, m)
		case "floor":
			err = pe.floor(ctx, m)
		case "quit":
			return 0
		default:
			err = fmt.Errorf("unknown request %q", m.Op)
		}
		if err != nil {
			pe.reply(msg{Op: "error", Err: fmt.Sprintf("%s: %v", m.Op, err)})
		}
	}
}

// reply sends m to the parent.
func (pe *peer) reply(m msg) {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	pe.enc.Encode(m) // a parent that is gone is noticed on stdin
}

// begin returns the scenario of a new job m asks for: one needs the device
// open and no other job running.
func (pe *peer) begin(m msg) (*scenario, error) {
	s, err := lookup(m.Scenario)
	if err != nil {
		return nil, err
	}
	switch {
	case pe.dev == nil:
		return nil, errors.New("no device: hello first")
	case pe.job != nil:
		return nil, errors.New("a workload is running")
	}
	return s, nil
}

// rdma creates and connects the peer's end of an RDMA workload, readies
// it, answers with its connection information, and serves it until
// "stop".
func (pe *peer) rdma(ctx context.Context, m msg) (err error) {
	s, err := pe.begin(m)
	if err != nil {
		return err
	}
	if m.Info == nil {
		return errors.New("no connection information")
	}
	y, err := workload.NewEnd(pe.dev, s.config())
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			y.Close()
		}
	}()
	if err := y.Connect(*m.Info); err != nil {
		return err
	}
	serve, err := s.passive(y)
	if err != nil {
		return err
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &job{release: func() { y.Close() }, cancel: cancel, done: make(chan struct{})}
	pe.job = j
	info := y.Info()
	pe.reply(msg{Op: "ready", Info: &info})
	pe.wg.Add(1)
	go func() {
		defer pe.wg.Done()
		defer close(j.done)
		j.ops, j.err = serve(jctx)
		if jctx.Err() != nil {
			j.err = nil // stopped, as asked
			return
		}
		// Failed on its own: tell the parent now, which stops measuring.
		pe.reply(msg{Op: "error", Err: fmt.Sprintf("%s: %v", s.name, j.err)})
	}()
	return nil
}

// floor opens a UDP link on the device's address for the UDP floor under
// a WRITE workload, answers with its address, and serves it until "stop".
func (pe *peer) floor(ctx context.Context, m msg) error {
	s, err := pe.begin(m)
	if err != nil {
		return err
	}
	l, err := udpfloor.Listen(pe.dev.Device().Addr())
	if err != nil {
		return err
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &job{release: func() { l.Close() }, cancel: cancel, done: make(chan struct{})}
	pe.job = j
	pe.reply(msg{Op: "ready", Addr: l.LocalAddr().String()})
	pe.wg.Add(1)
	go func() {
		defer pe.wg.Done()
		defer close(j.done)
		if _, j.err = udpfloor.Serve(jctx, l); j.err != nil {
			pe.reply(msg{Op: "error", Err: fmt.Sprintf("UDP floor %s: %v", s.name, j.err)})
		}
	}()
	return nil
}

// stop ends the workload being served and answers with its count.
func (pe *peer) stop() error {
	j := pe.job
	if j == nil {
		return errors.New("no workload is running")
	}
	pe.job = nil
	j.cancel()
	defer j.release()
	select {
	case <-j.done:
	case <-time.After(workload.WaitTimeout):
		return fmt.Errorf("the workload did not stop within %v", workload.WaitTimeout)
	}
	if j.err != nil {
		return j.err
	}
	pe.reply(msg{Op: "done", Ops: j.ops})
	return nil
}

// tcp listens on 127.0.0.1 for the TCP side of a workload, answers with
// the address, and serves the parent's connections until it closes them;
// then it says "done".
func (pe *peer) tcp(ctx context.Context, m msg) error {
	s, err := lookup(m.Scenario)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	pe.reply(msg{Op: "ready", Addr: ln.Addr().String()})
	pe.wg.Add(1)
	go func() {
		defer pe.wg.Done()
		if err := serveTCP(ctx, s, ln); err != nil {
			pe.reply(msg{Op: "error", Err: fmt.Sprintf("tcp %s: %v", s.name, err)})
			return
		}
		pe.reply(msg{Op: "done"})
	}()
	return nil
}

// serveTCP accepts s's connections on ln, within WaitTimeout, and serves
// each until the parent closes it; ctx's end closes them all.
func serveTCP(ctx context.Context, s *scenario, ln net.Listener) error {
	defer ln.Close()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(workload.WaitTimeout))
	n := s.tcpConns()
	errs := make(chan error, n)
	for range n {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		go func() {
			defer stop()
			defer c.Close()
			errs <- s.tcpPassive(c)
		}()
	}
	var err error
	for range n {
		err = errors.Join(err, <-errs) // each read waits at most WaitTimeout
	}
	return err
}

// finish stops what still runs and waits, a bounded time, for it to end.
func (pe *peer) finish() {
	if pe.job != nil {
		pe.job.cancel()
	}
	done := make(chan struct{})
	go func() {
		pe.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(workload.WaitTimeout):
	}
	if pe.job != nil {
		pe.job.release()
	}
}
