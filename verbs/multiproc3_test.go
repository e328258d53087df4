package verbs_test

// Three processes on one host, each on the default device rgo0, which in
// each process takes a free 127.0.0.x of its own. The parent re-executes
// the test binary three times (TestHelper3); each child opens rgo0 and
// creates one RC QP per peer and one UD QP, and prints its connection
// details as a JSON line. The parent hands the whole table to every child
// on its stdin; then every child, to all its peers at once, does an RC
// WRITE, SEND with immediate and READ, and sends UD messages. Each checks
// what it received and reports; a last "bye" from the parent lets them go.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

const (
	helper3Env = "RDMA_GO_VERBS_TEST_HELPER3" // the child's index
	mp3N       = 3
	mp3Limit   = 90 * time.Second
	mp3Chunk   = 16 << 10
	mp3SendLen = 6000 // several packets at MTU 1024
	mp3UDMsgs  = 8    // UD messages to each peer
	mp3UDLen   = 512
	mp3QKey    = 0x3A3A0003
)

// Regions of a child's MR: one chunk per peer for each kind, then the chunk
// every peer READs, the UD source messages and the UD receive slots.
const (
	mp3Src     = iota // what this child WRITEs and SENDs to the peer
	mp3Written        // what the peer WRITEs here
	mp3ReadTo         // where this child's READ of the peer lands
	mp3Recv           // the receive buffer for the peer's SEND
	mp3Kinds
)

func mp3Off(kind, peer int) int { return (kind*mp3N + peer) * mp3Chunk }

var (
	mp3ReadMe  = mp3Off(mp3Kinds, 0)
	mp3UDSrc   = mp3ReadMe + mp3Chunk
	mp3UDRecv  = mp3UDSrc + mp3Chunk
	mp3MRSize  = mp3UDRecv + mp3Chunk
	mp3UDSlot  = verbs.GRHLen + mp3UDLen
	mp3UDSlots = (mp3N - 1) * mp3UDMsgs
)

// mp3Seed is the pattern seed of what from sends to to.
func mp3Seed(from, to int) byte { return byte(0x10*from + to + 1) }

// mp3ReadSeed is the pattern seed of a child's READ region.
func mp3ReadSeed(id int) byte { return byte(0xA0 + id) }

// mp3QP is one RC QP's connection details.
type mp3QP struct {
	QPN uint32 `json:"qpn"`
	PSN uint32 `json:"psn"`
}

// mp3Info is what a child prints about itself.
type mp3Info struct {
	ID    int           `json:"id"`
	Addr  string        `json:"ip"`
	GID   verbs.GID     `json:"gid"`
	MR    uint64        `json:"addr"`
	RKey  uint32        `json:"rkey"`
	UDQPN uint32        `json:"ud_qpn"`
	RC    map[int]mp3QP `json:"rc"` // by peer ID: this child's QP for that peer
}

// mp3Result is a child's verdict.
type mp3Result struct {
	ID  int    `json:"id"`
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
}

// mp3Child is one child's verbs objects.
type mp3Child struct {
	id     int
	ctx    *verbs.Context
	pd     *verbs.PD
	buf    []byte
	mr     *verbs.MR
	rc     map[int]*verbs.QP
	rcSCQ  map[int]*verbs.CQ
	rcRCQ  map[int]*verbs.CQ
	psn    map[int]uint32
	ud     *verbs.QP
	udSCQ  *verbs.CQ
	udRCQ  *verbs.CQ
	closer []func()
}

func (c *mp3Child) close() {
	for i := len(c.closer) - 1; i >= 0; i-- {
		c.closer[i]()
	}
}

// open sets up the child on rgo0: RC QPs in INIT with their receive posted,
// the UD QP in RTS with all its receives posted.
func (c *mp3Child) open() (info mp3Info, err error) {
	dev, err := verbs.DeviceByName(verbs.DefaultDeviceName)
	if err != nil {
		return info, err
	}
	if c.ctx, err = dev.Open(); err != nil {
		return info, err
	}
	c.closer = append(c.closer, func() { c.ctx.Close() })
	if c.pd, err = c.ctx.AllocPD(); err != nil {
		return info, err
	}
	c.closer = append(c.closer, func() { c.pd.Dealloc() })
	c.buf = make([]byte, mp3MRSize)
	if c.mr, err = c.pd.RegMR(c.buf, allAccess); err != nil {
		return info, err
	}
	c.closer = append(c.closer, func() { c.mr.Dereg() })
	newCQ := func(n int) (*verbs.CQ, error) {
		cq, err := c.ctx.CreateCQ(n, nil)
		if err == nil {
			c.closer = append(c.closer, func() { cq.Destroy() })
		}
		return cq, err
	}
	gid, err := c.ctx.QueryGID(1, 1)
	if err != nil {
		return info, err
	}
	info = mp3Info{ID: c.id, Addr: c.ctx.Device().Addr().String(), GID: gid, MR: c.mr.Addr(), RKey: c.mr.RKey(), RC: map[int]mp3QP{}}
	cfg := mp3Config()
	c.rc, c.rcSCQ, c.rcRCQ, c.psn = map[int]*verbs.QP{}, map[int]*verbs.CQ{}, map[int]*verbs.CQ{}, map[int]uint32{}
	for j := range mp3N {
		if j == c.id {
			continue
		}
		fill(c.buf[mp3Off(mp3Src, j):mp3Off(mp3Src, j)+mp3Chunk], mp3Seed(c.id, j))
		scq, err := newCQ(8)
		if err != nil {
			return info, err
		}
		rcq, err := newCQ(4)
		if err != nil {
			return info, err
		}
		qp, err := c.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: scq, RecvCQ: rcq, Cap: cfg.Cap})
		if err != nil {
			return info, err
		}
		c.closer = append(c.closer, func() { qp.Destroy() })
		if err := qpToInit(qp, &cfg); err != nil {
			return info, err
		}
		if err := qp.PostRecv(verbs.RecvWR{ID: uint64(j), SGL: []verbs.SGE{c.mr.SGE(mp3Off(mp3Recv, j), mp3Chunk)}}); err != nil {
			return info, err
		}
		c.rc[j], c.rcSCQ[j], c.rcRCQ[j] = qp, scq, rcq
		c.psn[j] = uint32(0x10000*c.id + 0x100*j + 1)
		info.RC[j] = mp3QP{QPN: qp.QPN(), PSN: c.psn[j]}
	}
	fill(c.buf[mp3ReadMe:mp3ReadMe+mp3Chunk], mp3ReadSeed(c.id))
	if c.udSCQ, err = newCQ(mp3UDSlots); err != nil {
		return info, err
	}
	if c.udRCQ, err = newCQ(mp3UDSlots); err != nil {
		return info, err
	}
	if c.ud, err = c.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: c.udSCQ, RecvCQ: c.udRCQ,
		Cap: verbs.QPCap{MaxSendWR: uint32(mp3UDSlots), MaxRecvWR: uint32(mp3UDSlots), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return info, err
	}
	c.closer = append(c.closer, func() { c.ud.Destroy() })
	if err := udToRTS(c.ud, mp3QKey, uint32(c.id)); err != nil {
		return info, err
	}
	for s := range mp3UDSlots {
		if err := c.ud.PostRecv(verbs.RecvWR{ID: uint64(s), SGL: []verbs.SGE{c.mr.SGE(mp3UDRecv+s*mp3UDSlot, mp3UDSlot)}}); err != nil {
			return info, err
		}
	}
	info.UDQPN = c.ud.QPN()
	return info, nil
}

func mp3Config() pairConfig {
	cfg := defaultPairConfig()
	cfg.MTU = verbs.MTU1024
	cfg.Cap = verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	return cfg
}

// connect moves every RC QP to RTS aimed at its peer's QP for this child.
func (c *mp3Child) connect(table []mp3Info) error {
	cfg := mp3Config()
	for j, qp := range c.rc {
		peer := table[j]
		p, ok := peer.RC[c.id]
		if !ok {
			return fmt.Errorf("child %d has no QP for child %d", j, c.id)
		}
		if err := qpToRTS(qp, c.psn[j], peerInfo{QPN: p.QPN, PSN: p.PSN, GID: peer.GID}, &cfg); err != nil {
			return fmt.Errorf("QP for child %d: %w", j, err)
		}
	}
	return nil
}

// exchange does the traffic, all peers at once, and checks what arrived.
func (c *mp3Child) exchange(ctx context.Context, table []mp3Info) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for j := range c.rc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.rcPeer(ctx, j, table[j]); err != nil {
				fail(fmt.Errorf("RC with child %d: %w", j, err))
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := c.udSend(ctx, table); err != nil {
			fail(fmt.Errorf("UD send: %w", err))
		}
	}()
	go func() {
		defer wg.Done()
		if err := c.udRecv(ctx, table); err != nil {
			fail(fmt.Errorf("UD receive: %w", err))
		}
	}()
	wg.Wait()
	return errors.Join(errs...)
}

func (c *mp3Child) rcPeer(ctx context.Context, j int, peer mp3Info) error {
	qp := c.rc[j]
	src := mp3Off(mp3Src, j)
	err := qp.PostSend(
		verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{c.mr.SGE(src, mp3Chunk)},
			RemoteAddr: peer.MR + uint64(mp3Off(mp3Written, c.id)), RKey: peer.RKey},
		verbs.SendWR{ID: 2, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled, ImmData: uint32(0xC0DE0000 | c.id<<8 | j),
			SGL: []verbs.SGE{c.mr.SGE(src, mp3SendLen)}},
		verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{c.mr.SGE(mp3Off(mp3ReadTo, j), mp3Chunk)},
			RemoteAddr: peer.MR + uint64(mp3ReadMe), RKey: peer.RKey})
	if err != nil {
		return err
	}
	wcs, err := pollN(ctx, c.rcSCQ[j], 3)
	if err != nil {
		return err
	}
	for i, wc := range wcs {
		if wc.WRID != uint64(i+1) || wc.Status != verbs.WCSuccess {
			return fmt.Errorf("send completion %d: wr_id %d status %s", i, wc.WRID, wc.Status)
		}
	}
	if i := firstDiff(c.buf[mp3Off(mp3ReadTo, j):mp3Off(mp3ReadTo, j)+mp3Chunk], pattern(mp3Chunk, mp3ReadSeed(j))); i >= 0 {
		return fmt.Errorf("READ data differs from byte %d", i)
	}
	// The peer's SEND came after its WRITE on the same QP: both are here.
	rwcs, err := pollN(ctx, c.rcRCQ[j], 1)
	if err != nil {
		return err
	}
	r := rwcs[0]
	if r.Status != verbs.WCSuccess || r.WRID != uint64(j) || r.ByteLen != mp3SendLen || r.Flags&verbs.WCFlagWithImm == 0 ||
		r.ImmData != uint32(0xC0DE0000|j<<8|c.id) {
		return fmt.Errorf("receive completion %+v", r)
	}
	want := pattern(mp3Chunk, mp3Seed(j, c.id))
	if i := firstDiff(c.buf[mp3Off(mp3Recv, j):mp3Off(mp3Recv, j)+mp3SendLen], want[:mp3SendLen]); i >= 0 {
		return fmt.Errorf("SEND data differs from byte %d", i)
	}
	if i := firstDiff(c.buf[mp3Off(mp3Written, j):mp3Off(mp3Written, j)+mp3Chunk], want); i >= 0 {
		return fmt.Errorf("WRITE data differs from byte %d", i)
	}
	return nil
}

// udMessage writes UD message k from child from into b.
func udMessage(b []byte, from, k int) {
	fill(b, byte(0x55+from*mp3UDMsgs+k))
	binary.BigEndian.PutUint32(b, uint32(from))
	binary.BigEndian.PutUint32(b[4:], uint32(k))
}

func (c *mp3Child) udSend(ctx context.Context, table []mp3Info) error {
	var wrs []verbs.SendWR
	for j, peer := range table {
		if j == c.id {
			continue
		}
		ah, err := c.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer.GID, SGIDIndex: 1, HopLimit: 64}})
		if err != nil {
			return err
		}
		defer ah.Destroy()
		for k := range mp3UDMsgs {
			off := mp3UDSrc + (j*mp3UDMsgs+k)*mp3UDLen
			udMessage(c.buf[off:off+mp3UDLen], c.id, k)
			wrs = append(wrs, verbs.SendWR{ID: uint64(j<<8 | k), Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled,
				ImmData: uint32(c.id<<16 | k), SGL: []verbs.SGE{c.mr.SGE(off, mp3UDLen)},
				AH: ah, RemoteQPN: peer.UDQPN, RemoteQKey: mp3QKey})
		}
	}
	if err := c.ud.PostSend(wrs...); err != nil {
		return err
	}
	wcs, err := pollN(ctx, c.udSCQ, len(wrs))
	if err != nil {
		return err
	}
	for i, wc := range wcs {
		if wc.WRID != wrs[i].ID || wc.Status != verbs.WCSuccess {
			return fmt.Errorf("UD send completion %d: %+v", i, wc)
		}
	}
	return nil
}

func (c *mp3Child) udRecv(ctx context.Context, table []mp3Info) error {
	wcs, err := pollN(ctx, c.udRCQ, mp3UDSlots)
	if err != nil {
		return err
	}
	var seen [mp3N][mp3UDMsgs]int
	msg := make([]byte, mp3UDLen)
	for _, wc := range wcs {
		if wc.Status != verbs.WCSuccess || wc.Flags&verbs.WCFlagGRH == 0 || wc.ByteLen != uint32(mp3UDSlot) || wc.WRID >= uint64(mp3UDSlots) {
			return fmt.Errorf("UD receive completion %+v", wc)
		}
		slot := c.buf[mp3UDRecv+int(wc.WRID)*mp3UDSlot:][:mp3UDSlot]
		from, k := int(binary.BigEndian.Uint32(slot[verbs.GRHLen:])), int(binary.BigEndian.Uint32(slot[verbs.GRHLen+4:]))
		if from < 0 || from >= mp3N || from == c.id || k < 0 || k >= mp3UDMsgs {
			return fmt.Errorf("UD message with header %d/%d", from, k)
		}
		if wc.SrcQP != table[from].UDQPN || wc.ImmData != uint32(from<<16|k) {
			return fmt.Errorf("UD message %d from %d: src_qp 0x%x imm 0x%x, want 0x%x and 0x%x",
				k, from, wc.SrcQP, wc.ImmData, table[from].UDQPN, from<<16|k)
		}
		if src := netip.AddrFrom4([4]byte(slot[32:36])); src.String() != table[from].Addr {
			return fmt.Errorf("UD message %d from %d: GRH source %s, want %s", k, from, src, table[from].Addr)
		}
		udMessage(msg, from, k)
		if i := firstDiff(slot[verbs.GRHLen:], msg); i >= 0 {
			return fmt.Errorf("UD message %d from %d differs from byte %d", k, from, i)
		}
		seen[from][k]++
	}
	for from := range seen {
		for k, n := range seen[from] {
			if from != c.id && n != 1 {
				return fmt.Errorf("UD message %d from %d received %d times", k, from, n)
			}
		}
	}
	return nil
}

// TestHelper3 is a child of TestThreeProcesses; it does nothing in a
// normal run.
func TestHelper3(t *testing.T) {
	idStr := os.Getenv(helper3Env)
	if idStr == "" {
		t.Skip("a child process of TestThreeProcesses")
	}
	id, err := strconv.Atoi(idStr)
	if err != nil || id < 0 || id >= mp3N {
		t.Fatalf("%s=%q", helper3Env, idStr)
	}
	if v, ok := os.LookupEnv(verbs.LoopbackEnv); ok {
		t.Fatalf("%s=%q is set: the child must take rgo0's automatic address", verbs.LoopbackEnv, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), mp3Limit)
	defer cancel()
	stop := make(chan struct{})
	lines, done := readLines(os.Stdin, os.Stderr, stop, func() {})
	defer func() {
		close(stop)
		select { // the parent closes our stdin after "bye", or kills us
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("stdin not closed")
		}
	}()
	pc := &procConn{lines: lines, w: os.Stdout}
	c := &mp3Child{id: id}
	defer c.close()
	res := mp3Result{ID: id, OK: true}
	if err := c.run(ctx, pc); err != nil {
		res = mp3Result{ID: id, Err: err.Error()}
		t.Error(err)
	}
	if err := pc.send("result", res); err != nil {
		t.Fatal(err)
	}
	var bye mp3Result
	if err := pc.recv(ctx, "bye", &bye); err != nil {
		t.Fatal(err)
	}
}

func (c *mp3Child) run(ctx context.Context, pc *procConn) error {
	info, err := c.open()
	if err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	if err := pc.send("info", info); err != nil {
		return err
	}
	var table []mp3Info
	if err := pc.recv(ctx, "table", &table); err != nil {
		return err
	}
	if len(table) != mp3N {
		return fmt.Errorf("table of %d children", len(table))
	}
	if err := c.connect(table); err != nil {
		return err
	}
	if err := pc.send("ready", mp3Result{ID: c.id, OK: true}); err != nil {
		return err
	}
	var start mp3Result
	if err := pc.recv(ctx, "go", &start); err != nil {
		return err
	}
	return c.exchange(ctx, table)
}

// mp3Env is the environment of the children: this one, without anything
// that would pin rgo0's address or make a child act as another helper.
func mp3Env(id int) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == verbs.LoopbackEnv || k == helperEnv || k == helper3Env {
			continue
		}
		env = append(env, kv)
	}
	return append(env, fmt.Sprintf("%s=%d", helper3Env, id))
}

// mp3Proc is the parent's handle on one child.
type mp3Proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	conn   *procConn
	ctx    context.Context // ends when the child's stdout closes
	stop   chan struct{}
	done   <-chan struct{}
	out    *lockedBuffer
	stderr *lockedBuffer
}

func TestThreeProcesses(t *testing.T) {
	if os.Getenv(helper3Env) != "" || os.Getenv(helperEnv) != "" {
		t.Skip("in a child")
	}
	t.Parallel()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), mp3Limit)
	defer cancel()
	procs := make([]*mp3Proc, mp3N)
	defer func() {
		cancel() // kills the children still running
		for _, p := range procs {
			if p == nil {
				continue
			}
			p.stdin.Close()
			close(p.stop)
			<-p.done
			p.cmd.Wait()
		}
		if t.Failed() {
			for i, p := range procs {
				if p != nil {
					t.Logf("child %d stdout:\n%s\nchild %d stderr:\n%s", i, p.out.String(), i, p.stderr.String())
				}
			}
		}
	}()
	for i := range procs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelper3$", "-test.count=1",
			fmt.Sprintf("-test.timeout=%v", mp3Limit+10*time.Second))
		cmd.Env = mp3Env(i)
		cmd.WaitDelay = 5 * time.Second
		p := &mp3Proc{cmd: cmd, stop: make(chan struct{}), out: &lockedBuffer{}, stderr: &lockedBuffer{}}
		cmd.Stderr = p.stderr
		var err error
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pctx, gone := context.WithCancel(ctx)
		t.Cleanup(gone)
		lines, done := readLines(stdout, p.out, p.stop, gone)
		p.conn, p.ctx, p.done = &procConn{lines: lines, w: p.stdin}, pctx, done
		procs[i] = p
	}

	table := make([]mp3Info, mp3N)
	addrs := map[string]int{}
	for i, p := range procs {
		if err := p.conn.recv(p.ctx, "info", &table[i]); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		in := table[i]
		a, err := netip.ParseAddr(in.Addr)
		if err != nil || !a.Is4() || !a.IsLoopback() || verbs.GIDFromIP(a) != in.GID {
			t.Fatalf("child %d: address %q, GID %s: want a 127.0.0.x address and its GID", i, in.Addr, in.GID)
		}
		if j, dup := addrs[in.Addr]; dup {
			t.Fatalf("children %d and %d both on %s", j, i, in.Addr)
		}
		addrs[in.Addr] = i
		if in.ID != i || len(in.RC) != mp3N-1 || in.UDQPN == 0 {
			t.Fatalf("child %d: info %+v", i, in)
		}
	}
	for i, p := range procs {
		if err := p.conn.send("table", table); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	// Everyone connected before anyone sends.
	for i, p := range procs {
		var r mp3Result
		if err := p.conn.recv(p.ctx, "ready", &r); err != nil {
			// A child that failed reports a result instead.
			t.Fatalf("child %d not ready: %v", i, err)
		}
	}
	for i, p := range procs {
		if err := p.conn.send("go", mp3Result{}); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	// Results as they come: the first failure ends the test (and kills
	// the children, which may be waiting for the failed one).
	type result struct {
		i   int
		r   mp3Result
		err error
	}
	results := make(chan result, mp3N)
	for i, p := range procs {
		go func() {
			var r mp3Result
			err := p.conn.recv(p.ctx, "result", &r)
			results <- result{i, r, err}
		}()
	}
	for range procs {
		res := <-results
		if res.err != nil {
			t.Fatalf("child %d: %v", res.i, res.err)
		}
		if !res.r.OK || res.r.ID != res.i {
			t.Fatalf("child %d failed: %s", res.i, res.r.Err)
		}
	}
	for i, p := range procs {
		if err := p.conn.send("bye", mp3Result{}); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		p.stdin.Close()
	}
	for i, p := range procs {
		close(p.stop)
		<-p.done
		err := p.cmd.Wait()
		procs[i] = nil
		if err != nil {
			t.Fatalf("child %d exited with %v\nstdout:\n%s\nstderr:\n%s", i, err, p.out.String(), p.stderr.String())
		}
	}
	t.Logf("%d processes on rgo0 (%v): RC WRITE, SEND and READ and %d UD messages between every pair in %v",
		mp3N, addrs, mp3UDMsgs, time.Since(start))
}
