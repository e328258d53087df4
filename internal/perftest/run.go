package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/internal/spin"
	"github.com/rdma-go/rdma-go/verbs"
)

// Options are hooks of a tool's main.
type Options struct {
	// Plot writes the PNG chart of an -a sweep (--png); nil disables the
	// option. It lives outside this package so that the core does not
	// depend on a plotting library.
	Plot func(path string, r *Result) error
	// Ready, if set, is called with the listening address once a server
	// listens (tests use it to start the client without sleeping).
	Ready func(addr string)
}

// Row is one result line of a run.
type Row struct {
	Bytes      uint64  `json:"bytes"`
	Iterations uint64  `json:"iterations"`
	BWPeak     float64 `json:"bw_peak,omitempty"`
	BWAvg      float64 `json:"bw_average,omitempty"`
	MsgRate    float64 `json:"msg_rate_mpps,omitempty"`
	TMin       float64 `json:"t_min_usec,omitempty"`
	TMax       float64 `json:"t_max_usec,omitempty"`
	TTypical   float64 `json:"t_typical_usec,omitempty"`
	TAvg       float64 `json:"t_avg_usec,omitempty"`
	TStdev     float64 `json:"t_stdev_usec,omitempty"`
	P99        float64 `json:"p99_usec,omitempty"`
	P999       float64 `json:"p99_9_usec,omitempty"`
	TPS        float64 `json:"tps,omitempty"`
	// Remote is the peer's report (bidirectional runs, and the
	// write/read/atomic server, whose row is the client's).
	Remote *BWReport `json:"remote,omitempty"`
}

// Result is what a run measured, for --json and --png.
type Result struct {
	Tool     string `json:"tool"`
	Version  string `json:"version"`
	Role     string `json:"role"`
	BWUnit   string `json:"bw_unit,omitempty"`
	Rows     []Row  `json:"results"`
	Test     Test   `json:"-"`
	Duration bool   `json:"-"`
}

// session is one run of a tool.
type session struct {
	cfg *Config
	ctx context.Context
	// peerCtx ends when the peer closes the side channel (at peerGone,
	// in UnixNano); see watchPeer.
	peerCtx        context.Context
	peerCancel     context.CancelFunc
	peerGone       atomic.Int64
	stdout, stderr io.Writer
	opts           Options

	comm      *Comm
	dev       *verbs.Device
	vctx      *verbs.Context
	port      verbs.PortAttr
	pd        *verbs.PD
	bufs      [][]byte
	mrs       []*verbs.MR
	ch        *verbs.CompChannel
	sendCQ    *verbs.CQ
	recvCQ    *verbs.CQ
	qps       []*verbs.QP
	ahs       []*verbs.AH
	my, rem   []Dest
	linkType  string
	gidIndex  int
	gid       verbs.GID
	mtu       verbs.MTU
	cycle     int
	cacheLine int
	half      uint64
	outReads  int
	inline    int
	size      uint64
	recv      []*recvState
	// spinner paces the polling loops (a copy each).
	spinner spin.Spinner
	// turns paces the data loops as a whole (stopped, once per turn);
	// turnCount counts stopped's calls.
	turns     *spin.Turns
	turnCount uint32
	// ownsProcess: the session is the whole process (Main), and may set
	// the runtime's process-wide settings.
	ownsProcess bool

	peerVersion string
	result      Result
	bwLimitOK   bool
	mrLimitOK   bool
}

// Main runs tool t with the command-line arguments args (without the
// program name) and returns the exit status, as perftest's main does.
func Main(t Test, args []string, stdout, stderr io.Writer, opts Options) int {
	prog := t.Name()
	if len(os.Args) > 0 {
		if b := filepath.Base(os.Args[0]); b != "" && b != "." && !isTestBinary(b) {
			prog = b
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if path := os.Getenv("RDMA_GO_CPUPROFILE"); path != "" {
		if stopProfile, err := startCPUProfile(path); err != nil {
			fmt.Fprintf(stderr, " RDMA_GO_CPUPROFILE: %v\n", err)
		} else {
			defer stopProfile()
		}
	}
	return run(ctx, t, prog, args, stdout, stderr, opts, true)
}

// startCPUProfile writes a pprof CPU profile of the process to path, with
// "%p" in it replaced by the process ID (so that a server and a client
// started alike write two files), until the returned function is called.
func startCPUProfile(path string) (func(), error) {
	path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func isTestBinary(name string) bool {
	return filepath.Ext(name) == ".test"
}

// Run is Main with a context and an explicit program name, for a run
// that shares its process (Run leaves process-wide settings alone).
func Run(ctx context.Context, t Test, prog string, args []string, stdout, stderr io.Writer, opts Options) int {
	return run(ctx, t, prog, args, stdout, stderr, opts, false)
}

// run is Run; ownsProcess says the run is the whole process (Main).
func run(ctx context.Context, t Test, prog string, args []string, stdout, stderr io.Writer, opts Options, ownsProcess bool) int {
	cfg, status, done := Parse(t, prog, args, stdout, stderr)
	if done {
		return status
	}
	if cfg.PNG != "" && opts.Plot == nil {
		fmt.Fprintf(stderr, " --png is not available in this build\n")
		return 1
	}
	text := stdout
	if cfg.JSON {
		text = io.Discard
	}
	s := &session{cfg: &cfg, ctx: ctx, stdout: text, stderr: stderr, opts: opts, bwLimitOK: true, mrLimitOK: true,
		ownsProcess: ownsProcess}
	s.result = Result{Tool: t.Name(), Version: Version, Test: t, Duration: cfg.TestDur}
	s.result.Role = "server"
	if cfg.Client {
		s.result.Role = "client"
	}
	if t.Kind == BW {
		s.result.BWUnit = "MiB/s"
		if cfg.Gbits {
			s.result.BWUnit = "Gb/s"
		}
	}
	err := s.run()
	if s.peerCancel != nil {
		s.peerCancel()
	}
	s.destroy()
	if err == nil && cfg.JSON {
		if jerr := s.writeJSON(stdout); jerr != nil {
			fmt.Fprintln(stderr, jerr)
			return 1
		}
	}
	if err == nil && cfg.PNG != "" {
		if perr := opts.Plot(cfg.PNG, &s.result); perr != nil {
			fmt.Fprintf(stderr, " Couldn't write %s: %v\n", cfg.PNG, perr)
			return 1
		}
	}
	if err != nil {
		code := 1
		var ec exitCodeError
		if errors.As(err, &ec) {
			code = ec.code
		}
		printErr(stderr, err)
		return code
	}
	if cfg.IsLimitBW && !s.bwLimitOK {
		fmt.Fprintf(stderr, "Error: BW result is below bw limit\n")
		return 1
	}
	if cfg.IsLimitBW && !s.mrLimitOK {
		fmt.Fprintf(stderr, "Error: Msg rate  is below msg_rate limit\n")
		return 1
	}
	return 0
}

// printErr prints what ended a run: each error of a join on its own line,
// perftest's own messages as they are, nothing for an interrupt.
func printErr(w io.Writer, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			printErr(w, e)
		}
		return
	}
	var q quietError
	switch {
	case errors.As(err, &q):
		if q.msg != "" {
			fmt.Fprintln(w, q.msg)
		}
	case errors.Is(err, context.Canceled):
	default:
		fmt.Fprintln(w, err)
	}
}

func (s *session) out(str string) { io.WriteString(s.stdout, str) }

// peerRole names the other side of the test.
func (s *session) peerRole() string {
	if s.cfg.Client {
		return "server"
	}
	return "client"
}

// stopped, called at every turn of a data loop, paces the loop (s.turns)
// and returns ctx's error once the run must stop (an interrupt). It looks
// at ctx every stopCheckEvery turns (a turn is a few microseconds at most
// where it matters; the loops' waits watch ctx themselves), and inlines
// into the loops.
func (s *session) stopped() error {
	s.turns.Turn()
	if s.turnCount++; s.turnCount%stopCheckEvery != 0 {
		return nil
	}
	return s.ctx.Err()
}

// stopCheckEvery is how often, in turns, stopped looks at the context.
const stopCheckEvery = 64

// watchPeer, called when a data loop is about to wait, watches the side
// channel: when the peer closes it (the peer exited or was killed), waits
// end after peerGrace without progress, with an error that says so,
// instead of after stallTimeout. The grace lets what the peer sent before
// it exited (its last messages, its ACKs) still complete the run: some
// tests (write_lat) end with no exchange, so a peer that finished may
// close first. The next side-channel exchange ends the watch.
func (s *session) watchPeer() {
	if s.comm == nil {
		return
	}
	if s.peerCtx == nil {
		s.peerCtx, s.peerCancel = context.WithCancel(s.ctx)
	}
	s.comm.Watch(func() {
		s.peerGone.CompareAndSwap(0, time.Now().UnixNano())
		s.peerCancel()
	})
}

// peerGrace is how long a run goes on without progress once the peer has
// closed the side channel.
const peerGrace = 2 * time.Second

// peerLeft reports whether the peer closed the side channel and, if so,
// how much of peerGrace is left.
func (s *session) peerLeft() (time.Duration, bool) {
	at := s.peerGone.Load()
	if at == 0 {
		return 0, false
	}
	return time.Duration(at + int64(peerGrace) - time.Now().UnixNano()), true
}

// errPeerGone is the error of a wait that outlived peerGrace.
func (s *session) errPeerGone() error {
	return fmt.Errorf(" The %s exited during the test: its side channel closed", s.peerRole())
}

func (s *session) run() error {
	c := s.cfg
	t := c.Test
	if err := s.openDevice(); err != nil {
		return err
	}
	if err := s.checkLink(); err != nil {
		return err
	}
	s.cycle = os.Getpagesize()
	s.cacheLine = cacheLineSize()
	if !c.Client && c.Output == OutputFull {
		s.out("\n************************************\n")
		s.out("* Waiting for client to connect... *\n")
		s.out("************************************\n")
	}
	if err := s.establish(); err != nil {
		return err
	}
	defer s.comm.Close()
	if err := s.prologue(); err != nil {
		return err
	}
	s.size = c.Size
	if c.Conn == UD && s.size > uint64(s.mtu.Bytes()) {
		if c.All || !c.ReqSize {
			fmt.Fprintf(s.stderr, " Max msg size in UD is MTU %d\n", s.mtu.Bytes())
			fmt.Fprintf(s.stderr, " Changing to this MTU\n")
			s.size = uint64(s.mtu.Bytes())
			c.Size = s.size
		} else {
			fmt.Fprintf(s.stderr, " Max message size in UD cannot be greater than MTU \n")
			return errQuiet(" Couldn't get context for the device")
		}
	}
	if err := s.createResources(); err != nil {
		return fmt.Errorf(" Couldn't create IB resources: %w", err)
	}
	if err := s.pickGID(); err != nil {
		return err
	}
	s.setUpConnection()
	s.printBanner()
	switch {
	case t.Verb == Send:
		return s.runSend()
	case t.Kind == BW:
		return s.runRDMABW()
	case t.Verb == Write:
		return s.runWriteLat()
	default:
		return s.runReadAtomicLat()
	}
}

// establish opens the TCP side channel.
func (s *session) establish() error {
	c := s.cfg
	var err error
	if c.Host != "" {
		s.comm, err = Dial(s.ctx, c.Host, c.Port, c.SourceIP)
		if err != nil {
			fmt.Fprintln(s.stderr, err)
			return errQuiet("Unable to open file descriptor for socket connection Unable to init the socket connection")
		}
		return nil
	}
	ln, err := Listen(s.ctx, c.Port, c.SourceIP)
	if err != nil {
		fmt.Fprintln(s.stderr, err)
		return errQuiet("Unable to open file descriptor for socket connection Unable to init the socket connection")
	}
	if s.opts.Ready != nil {
		s.opts.Ready(ln.Addr().String())
	}
	s.comm, err = Accept(s.ctx, ln)
	return err
}

// prologue is exchange_versions, check_version_compatibility,
// check_sys_data and check_mtu.
func (s *session) prologue() error {
	c := s.cfg
	s.mtu = s.setMTU()
	if c.NoXchgVer {
		// perftest then reads an empty peer version and refuses it (even
		// 6.29 does); rdma-go skips the whole prologue instead, which
		// only another rdma-go tool matches.
		s.peerVersion = ""
		return nil
	}
	peer, err := s.comm.Exchange(VersionMsg(Version), 0)
	if err != nil {
		return fmt.Errorf(" Failed to exchange data between server and clients: %w", err)
	}
	var pv float64
	s.peerVersion, pv = ParseVersion(peer)
	if pv < 5.70 {
		return errQuiet("Current implementation is not compatible with versions older than 5.70")
	}
	if pv >= 5.32 {
		b, err := s.comm.Exchange(Int32Msg(int32(s.cycleOrPage())), 0)
		if err != nil {
			return fmt.Errorf(" Failed to exchange Page Size data between server and client: %w", err)
		}
		if rc := int(int32(beUint32(b))); rc > s.cycle {
			s.cycle = rc
		}
		b, err = s.comm.Exchange(Int32Msg(int32(s.cacheLine)), 0)
		if err != nil {
			return fmt.Errorf(" Failed to exchange Cache Line Size data between server and client: %w", err)
		}
		if rc := int(int32(beUint32(b))); rc > s.cacheLine {
			s.cacheLine = rc
		}
	}
	if pv >= 5.1 {
		n := 2
		if pv < 5.31 {
			n = 4
		}
		b, err := s.comm.Exchange(MTUMsg(s.mtu, n), 0)
		if err != nil {
			return fmt.Errorf(" Failed to exchange data between server and clients: %w", err)
		}
		rm := verbs.MTU(ParseMTUMsg(b))
		if rm.Valid() && s.mtu > rm {
			s.mtu = rm
		}
	}
	return nil
}

func (s *session) cycleOrPage() int { return s.cycle }

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func (s *session) printBanner() {
	c := s.cfg
	if c.Output != OutputFull {
		return
	}
	WriteBanner(s.stdout, &Banner{Test: c.Test, AtomicType: c.AtomicType, Duplex: c.Duplex, PostList: c.PostList,
		RecvPost: c.RecvPost, Events: c.Events, EQNum: c.EQNum, Device: c.Device, NumQPs: c.NumQPs, Conn: c.Conn,
		NoPCIeRO: c.NoPCIeRO, OldPost: true, Client: c.Client, TxDepth: c.TxDepth, RxDepth: c.RxDepth,
		CQMod: c.CQMod, MTU: s.mtu.Bytes(), LinkType: s.linkType, GIDIndex: s.gidIndex, Inline: s.inline,
		OutReads: s.outReads})
}

// printAddr is ctx_print_pingpong_data.
func (s *session) printAddr(side string, d *Dest) {
	if s.cfg.Output != OutputFull {
		return
	}
	dd := *d
	if side == "remote" && s.cfg.DLID != 0 {
		dd.LID = uint16(s.cfg.DLID)
	}
	s.out(AddrLine(side, &dd, s.cfg.Test.Verb, s.gidIndex > -1))
}

// handShakeAll exchanges every QP's record (K×q).
func (s *session) handShakeAll(print string) error {
	if s.rem == nil {
		s.rem = make([]Dest, len(s.my))
	}
	for i := range s.my {
		d, err := s.handShake(i, 0)
		if err != nil {
			return err
		}
		s.rem[i] = d
		if print != "" {
			s.printAddr(print, &d)
		}
	}
	return nil
}

func (s *session) handShake(i int, timeout time.Duration) (Dest, error) {
	d, err := s.comm.HandShake(&s.my[i], timeout)
	if err != nil {
		return Dest{}, fmt.Errorf(" Failed to exchange data between server and clients: %w", err)
	}
	return d, nil
}

// sync is a K exchange on QP 0 used as a barrier.
func (s *session) sync(timeout time.Duration) error {
	_, err := s.handShake(0, timeout)
	return err
}

func (s *session) checkGIDCompat() error {
	if isV4Mapped(s.my[0].GID) != isV4Mapped(s.rem[0].GID) {
		fmt.Fprintf(s.stderr, "\n Found Incompatibility issue with GID types.\n")
		fmt.Fprintf(s.stderr, " Please Try to use a different IP version.\n\n")
		return errQuiet("")
	}
	return nil
}

func (s *session) runTimeout() time.Duration {
	if s.cfg.TestDur {
		return time.Duration(s.cfg.Duration)*time.Second + DefaultRunTimeout
	}
	return DefaultRunTimeout
}

// sizes returns the message sizes of the run: 2…2^23 with -a (up to the
// MTU for UD), else the one size.
func (s *session) sizes() []uint64 {
	if !s.cfg.All {
		return []uint64{s.size}
	}
	maxPow := 24
	if s.cfg.Conn == UD {
		maxPow = 0
		for 1<<maxPow <= s.mtu.Bytes() {
			maxPow++
		}
	}
	var out []uint64
	for i := 1; i < maxPow; i++ {
		out = append(out, 1<<i)
	}
	return out
}

// ---- send_bw / send_lat ----

func (s *session) runSend() error {
	c := s.cfg
	if err := s.handShakeAll(""); err != nil {
		return err
	}
	if err := s.checkGIDCompat(); err != nil {
		return err
	}
	if err := s.connectQPs(); err != nil {
		return errors.Join(errQuiet(err.Error()), errQuiet(" Unable to Connect the HCA's through the link"))
	}
	if err := s.sync(0); err != nil {
		return err
	}
	for i := range s.my {
		s.printAddr("local", &s.my[i])
	}
	if err := s.handShakeAll("remote"); err != nil {
		return err
	}
	if c.Output == OutputFull {
		if c.Test.Kind == BW {
			s.out(BWHeader(c.Gbits))
		} else {
			s.out(LatHeader(c.TestDur))
		}
	}
	if c.Test.Kind == LAT {
		for _, size := range s.sizes() {
			s.size = size
			if err := s.postRecvs(); err != nil {
				return err
			}
			if err := s.sync(0); err != nil {
				return err
			}
			posted, dur, err := s.runLatSend()
			if err != nil {
				return withCode(err, 17)
			}
			s.reportLat(posted, dur, 2)
		}
		if c.Output == OutputFull {
			s.out(ResultLine)
		}
		return s.closeConn()
	}
	for _, size := range s.sizes() {
		s.size = size
		if !c.Client || c.Duplex {
			if err := s.postRecvs(); err != nil {
				return err
			}
		}
		if err := s.sync(0); err != nil {
			return err
		}
		var tm *BWTiming
		var err error
		switch {
		case c.Duplex:
			tm, err = s.runBI()
		case c.Client:
			tm, err = s.runBWClient()
		default:
			tm, err = s.runBWServer()
		}
		if err != nil {
			return withCode(err, 17)
		}
		rep := s.reportBW(tm)
		if c.Duplex && !c.TestDur {
			if err := s.exchangeReports(rep); err != nil {
				return err
			}
		}
		if c.All {
			if err := s.sync(s.runTimeout()); err != nil {
				return err
			}
		}
	}
	if c.Output == OutputFull {
		s.out(ResultLine)
	}
	return s.closeConn()
}

// exchangeReports is xchg_bw_reports followed by the summed row.
func (s *session) exchangeReports(rep BWReport) error {
	rem, err := s.comm.Reports(rep, s.runTimeout())
	if err != nil {
		return err
	}
	s.printBWRow(rep, &rem)
	if n := len(s.result.Rows); n > 0 {
		s.result.Rows[n-1].Remote = &rem
	}
	if s.cfg.ReportBoth {
		s.out(ResultLine)
		s.out("\n Local results: \n")
		s.out(BWHeader(s.cfg.Gbits))
		s.printBWRow(rep, nil)
		s.out(ResultLine)
		s.out("\n Remote results: \n")
		s.out(BWHeader(s.cfg.Gbits))
		s.printBWRow(rem, nil)
	}
	return nil
}

func (s *session) closeConn() error {
	if err := s.comm.CloseConnection(&s.my[0], s.runTimeout()); err != nil {
		return fmt.Errorf("Failed to close connection between server and client: %w", err)
	}
	s.waitDestroy()
	return nil
}

func (s *session) waitDestroy() {
	if s.cfg.WaitDestroy > 0 {
		select {
		case <-time.After(time.Duration(s.cfg.WaitDestroy) * time.Second):
		case <-s.ctx.Done():
		}
	}
}

// ---- write/read/atomic bw ----

func (s *session) runRDMABW() error {
	c := s.cfg
	if err := s.handShakeAll(""); err != nil {
		return err
	}
	if err := s.checkGIDCompat(); err != nil {
		return err
	}
	if err := s.connectQPs(); err != nil {
		return errors.Join(errQuiet(err.Error()), errQuiet(" Unable to Connect the HCA's through the link"))
	}
	for i := range s.my {
		s.printAddr("local", &s.my[i])
	}
	if err := s.handShakeAll("remote"); err != nil {
		return err
	}
	if err := s.sync(0); err != nil {
		return err
	}
	if c.Output == OutputFull {
		s.out(BWHeader(c.Gbits))
	}
	if !c.Client && !c.Duplex {
		if err := s.sync(s.runTimeout()); err != nil {
			return err
		}
		rem, err := s.comm.Reports(BWReport{}, s.runTimeout())
		if err != nil {
			return err
		}
		s.printBWRow(rem, nil)
		s.result.Rows = append(s.result.Rows, Row{Bytes: rem.Size, Iterations: rem.Iters, BWPeak: rem.BWPeak,
			BWAvg: rem.BWAvg, MsgRate: rem.MsgRate, Remote: &rem})
		if err := s.closeConn(); err != nil {
			return err
		}
		if c.Output == OutputFull {
			s.out(ResultLine)
		}
		return nil
	}
	var last BWReport
	for _, size := range s.sizes() {
		s.size = size
		if c.WarmUp {
			if err := s.warmUp(); err != nil {
				return err
			}
		}
		if c.Duplex {
			if err := s.sync(s.runTimeout()); err != nil {
				return err
			}
		}
		tm, err := s.runBWClient()
		if err != nil {
			if c.Test.Verb == Read && c.All {
				return withCode(err, 17)
			}
			return err
		}
		if c.Duplex && c.All {
			if err := s.sync(s.runTimeout()); err != nil {
				return err
			}
		}
		last = s.reportBW(tm)
		if c.Duplex {
			if err := s.exchangeReports(last); err != nil {
				return err
			}
		}
	}
	if c.Output == OutputFull {
		s.out(ResultLine)
	}
	if c.Client && !c.Duplex {
		if err := s.sync(s.runTimeout()); err != nil {
			return err
		}
		if _, err := s.comm.Reports(last, s.runTimeout()); err != nil {
			return err
		}
	}
	return s.closeConn()
}

// ---- write_lat ----

func (s *session) runWriteLat() error {
	c := s.cfg
	if err := s.sync(0); err != nil {
		return err
	}
	if err := s.handShakeAll(""); err != nil {
		return err
	}
	if err := s.checkGIDCompat(); err != nil {
		return err
	}
	if err := s.connectQPs(); err != nil {
		return errors.Join(errQuiet(err.Error()), errQuiet(" Unable to Connect the HCA's through the link"))
	}
	for i := range s.my {
		s.printAddr("local", &s.my[i])
	}
	if err := s.handShakeAll("remote"); err != nil {
		return err
	}
	if err := s.sync(0); err != nil {
		return err
	}
	if c.Output == OutputFull {
		s.out(LatHeader(c.TestDur))
	}
	for _, size := range s.sizes() {
		s.size = size
		posted, dur, err := s.runLatWrite()
		if err != nil {
			return errors.Join(err, errQuiet("Test exited with Error"))
		}
		s.reportLat(posted, dur, 2)
	}
	if c.Output == OutputFull {
		s.out(ResultLine)
	}
	s.waitDestroy()
	return nil
}

// ---- read_lat / atomic_lat ----

func (s *session) runReadAtomicLat() error {
	c := s.cfg
	if err := s.sync(0); err != nil {
		return err
	}
	if err := s.handShakeAll(""); err != nil {
		return err
	}
	if err := s.checkGIDCompat(); err != nil {
		return err
	}
	if err := s.connectQPs(); err != nil {
		return errors.Join(errQuiet(err.Error()), errQuiet(" Unable to Connect the HCA's through the link"))
	}
	for i := range s.my {
		s.printAddr("local", &s.my[i])
	}
	if err := s.handShakeAll("remote"); err != nil {
		return err
	}
	if err := s.sync(0); err != nil {
		return err
	}
	if !c.Client {
		if err := s.closeConnTimeout(s.runTimeout()); err != nil {
			return err
		}
		if c.Output == OutputFull {
			s.out(ResultLine)
		}
		return nil
	}
	if c.Output == OutputFull {
		s.out(LatHeader(c.TestDur))
	}
	sizes := s.sizes()
	if c.Test.Verb == Atomic {
		sizes = []uint64{8}
	}
	for _, size := range sizes {
		s.size = size
		posted, dur, err := s.runLatRead()
		if err != nil {
			return withCode(err, 17)
		}
		s.reportLat(posted, dur, 1)
	}
	if err := s.closeConn(); err != nil {
		return err
	}
	if c.Output == OutputFull {
		s.out(ResultLine)
	}
	return nil
}

func (s *session) closeConnTimeout(timeout time.Duration) error {
	if err := s.comm.CloseConnection(&s.my[0], timeout); err != nil {
		return fmt.Errorf("Failed to close connection between server and client: %w", err)
	}
	s.waitDestroy()
	return nil
}

// ---- reports ----

func (s *session) reportBW(tm *BWTiming) BWReport {
	c := s.cfg
	rep := ComputeBW(s.size, tm, c.NoPeak, c.PostList, c.CQMod, c.Gbits)
	if !c.Duplex || (c.Test.Verb == Send && c.TestDur) {
		s.printBWRow(rep, nil)
	}
	s.result.Rows = append(s.result.Rows, Row{Bytes: rep.Size, Iterations: rep.Iters, BWPeak: rep.BWPeak,
		BWAvg: rep.BWAvg, MsgRate: rep.MsgRate})
	return rep
}

// printBWRow is print_full_bw_report: the limits are checked on the
// number printed as the run's result.
func (s *session) printBWRow(rep BWReport, rem *BWReport) {
	c := s.cfg
	avg, rate := rep.BWAvg, rep.MsgRate
	if rem != nil {
		avg += rem.BWAvg
		rate += rem.MsgRate
	}
	if (c.Duplex && rem != nil) || (!c.Duplex && rem == nil) {
		if c.IsLimitBW && c.LimitBW > avg {
			s.bwLimitOK = false
		}
		if c.IsLimitMR && c.LimitMR > rate {
			s.mrLimitOK = false
		}
	}
	s.out(BWRow(rep, rem, c.Gbits, c.Output))
}

// reportLat prints a latency row from post times (iterations mode) or
// from a duration run's sample window.
func (s *session) reportLat(posted []int64, dur *durResult, rtt int) {
	c := s.cfg
	if c.TestDur {
		line, lat, tps := LatDurRow(s.size, dur.iters, dur.elapsed, rtt, c.Output)
		s.out(line)
		s.result.Rows = append(s.result.Rows, Row{Bytes: s.size, Iterations: dur.iters, TAvg: lat, TPS: tps})
		return
	}
	unit := 1000.0
	units := "usec"
	if c.Cycles {
		unit, units = 1, "cycles"
	}
	n := len(posted) - 1
	if c.Unsorted {
		s.out(fmt.Sprintf("#, %s\n", units))
		for i := 0; i < n; i++ {
			s.out(fmt.Sprintf("%d, %s\n", i+1, CG(float64(posted[i+1]-posted[i])/(unit*float64(rtt)))))
		}
	}
	st := ComputeLat(posted, rtt, unit)
	if c.Histogram {
		s.out(fmt.Sprintf("#, %s\n", units))
		for i := 0; i < n-2; i++ {
			s.out(fmt.Sprintf("%d, %s\n", i+1, CG(st.Sorted[i])))
		}
	}
	if (c.Unsorted || c.Histogram) && c.Output == OutputFull {
		s.out(LatHeader(false))
	}
	s.out(LatRow(s.size, uint64(c.Iters), &st, c.Output))
	s.result.Rows = append(s.result.Rows, Row{Bytes: s.size, Iterations: uint64(c.Iters), TMin: st.Min, TMax: st.Max,
		TTypical: st.Typical, TAvg: st.Avg, TStdev: st.Stdev, P99: st.P99, P999: st.P999})
}
