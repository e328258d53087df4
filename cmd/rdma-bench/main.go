// Command rdma-bench compares rdma-go's soft RoCE data path with Go's own
// TCP on loopback, workload by workload, in one command:
//
//   - WRITE, SEND and READ 64 KiB bandwidth (RC, 16 outstanding) against a
//     stream of 64 KiB TCP writes;
//   - 8-byte ping-pong latency, with SENDs and with RDMA WRITEs polled in
//     memory (as ib_write_lat), against an 8-byte TCP echo;
//   - 8-byte message rate (RC RDMA WRITE, post lists of 32, 8 lists
//     outstanding per QP) over 1, 2, 4 and 8 QPs, against 8-byte messages
//     written 32 at a time on as many TCP connections.
//
// With -procs 1 (the default) both ends of every workload run in this
// process: two loopback soft devices (verbs.AddLoopbackDevice), real UDP
// on 127.0.0.x, and a TCP connection to itself. With -procs 2 the other
// end runs in a second process, which is what applications do: rdma-bench
// starts itself again as its peer, each process on a soft device of its
// own at a random 127.x.y.z, and the TCP side is a connection between the
// two. The process that measures runs the same loops either way.
//
// -runs N interleaves N rounds (each round: every workload, RDMA then
// TCP) and reports, per workload, the median of the per-round ratios
// RDMA/TCP and their range. A progress line goes to stderr. The result is
// a table, or one JSON object with -json.
//
// With -d DEVICE the RDMA side runs on that device instead (both ends on
// it, over its own address: a kernel device such as rxe0 works).
//
// -curve measures, instead of the workloads, the WRITE bandwidth at every
// power-of-two size from 64 B to 8 MiB (ib_write_bw -a's sweep) against a
// TCP stream of writes of the same size, and says whether the RDMA curve
// lies at or above TCP's at every size and how far it falls below its
// peak at a larger size; -png FILE draws both curves on one chart. With
// -floor it measures a third curve, the UDP floor (package udpfloor): the
// same WRITEs' packets through the soft device's UDP link with their ICRCs
// and the receive copy and nothing else, the most any RoCEv2 device over
// UDP sockets could reach on the machine, and says where that floor itself
// lies below TCP and how close RDMA comes to it.
//
// Usage: rdma-bench [-procs 1|2] [-runs N] [-d DEVICE] [-duration 2s | -iters N] [-only LIST | -curve [-floor] [-png FILE]] [-json] | -version
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rdma-go/rdma-go/internal/perftest"
	"github.com/rdma-go/rdma-go/internal/perftest/udpfloor"
	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/internal/version"
	"github.com/rdma-go/rdma-go/link"
)

// Scenario is one workload's figures over all rounds, in the JSON report.
type Scenario struct {
	Name   string `json:"name"`
	Title  string `json:"title"`
	TCP    string `json:"tcp_baseline"`
	Unit   string `json:"unit"`
	Better string `json:"better"` // which direction is better for this unit
	// One entry per round.
	RDMA    []float64 `json:"rdma"`
	TCPs    []float64 `json:"tcp"`
	Ratios  []float64 `json:"ratio_rdma_over_tcp"`
	RDMAOps []int     `json:"rdma_ops"`
	TCPOps  []int     `json:"tcp_ops"`
	// Floors (with -floor) are the UDP floor's figure, one per round, and
	// OfFloor the ratios RDMA/floor (package udpfloor).
	Floors  []float64 `json:"udp_floor,omitempty"`
	OfFloor []float64 `json:"ratio_rdma_over_udp_floor,omitempty"`
	// Over the rounds: medians, and the range of the ratios.
	Median   Medians `json:"median"`
	RatioMin float64 `json:"ratio_min"`
	RatioMax float64 `json:"ratio_max"`
}

// Medians are a scenario's medians over the rounds. Ratio is the median
// of the per-round ratios, not the ratio of the medians.
type Medians struct {
	RDMA    float64 `json:"rdma"`
	TCP     float64 `json:"tcp"`
	Ratio   float64 `json:"ratio_rdma_over_tcp"`
	Floor   float64 `json:"udp_floor,omitempty"`
	OfFloor float64 `json:"ratio_rdma_over_udp_floor,omitempty"`
}

// Report is the -json output.
type Report struct {
	RdmaGo    string       `json:"rdma_go_version"`
	Env       perftest.Env `json:"environment"`
	Procs     int          `json:"procs"`
	Runs      int          `json:"runs"`
	Budget    string       `json:"budget"`
	Floor     bool         `json:"udp_floor,omitempty"` // -floor
	Device    string       `json:"device"`
	Addresses []string     `json:"device_addresses,omitempty"` // with -procs 2: this process's, the peer's
	Scenarios []Scenario   `json:"scenarios"`
	Curve     *Curve       `json:"curve,omitempty"` // with -curve
	Warnings  []string     `json:"warnings,omitempty"`
}

// hooks let tests watch a run.
type hooks struct {
	child     func(pid int)           // the peer process started
	measuring func(name, side string) // a measurement begins
}

// transport runs the sides of a scenario once.
type transport interface {
	rdma(s *scenario, b workload.Budget) (workload.Result, error)
	tcp(s *scenario, b workload.Budget) (workload.Result, error)
	// floor runs the UDP floor under a WRITE stream (package udpfloor).
	floor(s *scenario, b workload.Budget) (workload.Result, error)
}

// main runs rdma-bench, or its peer process when started as one.
func main() {
	if isPeer() {
		os.Exit(peerMain(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is rdma-bench with its arguments; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int { return runWith(args, stdout, stderr, hooks{}) }

// runWith is run, with hooks for tests.
func runWith(args []string, stdout, stderr io.Writer, h hooks) int {
	fs := flag.NewFlagSet("rdma-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dur := fs.Duration("duration", 2*time.Second, "time per workload and transport")
	iters := fs.Int("iters", 0, "operations per workload and transport instead of -duration (messages; round trips for the ping-pongs)")
	procs := fs.Int("procs", 1, "1: both ends of each workload in this process; 2: the other end in a second process")
	runs := fs.Int("runs", 1, "interleaved rounds: the ratios' median and range are reported")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	showVersion := fs.Bool("version", false, "print rdma-go's version and exit")
	device := fs.String("d", "", "run the RDMA side on this device (both ends on it, e.g. rxe0) instead of soft devices")
	only := fs.String("only", "", "run only these workloads (names, comma-separated: "+names()+")")
	curveRun := fs.Bool("curve", false, fmt.Sprintf("measure WRITE bandwidth at every size from %s to %s (as ib_write_bw -a) against TCP streams of writes of the same size, instead of the workloads", sizeTitle(curveMin), sizeTitle(curveMax)))
	png := fs.String("png", "", "with -curve: draw the curves into this PNG file")
	floor := fs.Bool("floor", false, "with -curve: measure the UDP floor at every size too, the most any RoCEv2 device over UDP sockets could reach here (the same packets, their ICRCs and the receive copy, nothing else)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Line())
		return 0
	}
	if fs.NArg() > 0 || *dur <= 0 || *iters < 0 || *runs < 1 || (*procs != 1 && *procs != 2) ||
		(*curveRun && *only != "") || ((*png != "" || *floor) && !*curveRun) {
		fs.Usage()
		return 2
	}
	sel, err := selectScenarios(*only)
	if err != nil {
		fmt.Fprintln(stderr, "rdma-bench:", err)
		return 2
	}
	if *curveRun {
		sel = sel[:0]
		for i := range curve {
			sel = append(sel, &curve[i])
		}
	}
	term := false
	if f, ok := stderr.(*os.File); ok {
		term = isTerminal(f)
	}
	// The peer process writes to a file stderr itself; to anything else
	// through a goroutine of exec's, beside this one's writes.
	peerErr := stderr
	stderr = &syncWriter{w: stderr}
	if _, ok := peerErr.(*os.File); !ok {
		peerErr = stderr
	}
	b := workload.Budget{Iters: *iters, Duration: *dur}
	rep := Report{RdmaGo: version.String(), Env: perftest.Environment(), Procs: *procs, Runs: *runs, Budget: b.String(), Device: "soft RoCE", Floor: *floor}
	if *device != "" {
		rep.Device = *device
	}
	if w := loadWarning(); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	var tr transport = inProcess{ctx: context.Background(), device: *device}
	if *procs == 2 {
		p, err := startPeer(*device, peerErr, h)
		if err != nil {
			fmt.Fprintln(stderr, "rdma-bench:", err)
			return 1
		}
		rep.Addresses = []string{p.dev.Device().Addr().String(), p.addr}
		tr = twoProcs{p}
		err = measure(tr, sel, b, *runs, &rep, &progress{w: stderr, term: term}, h)
		if cerr := p.close(err == nil); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintln(stderr, "rdma-bench:", err)
			return 1
		}
	} else if err := measure(tr, sel, b, *runs, &rep, &progress{w: stderr, term: term}, h); err != nil {
		fmt.Fprintln(stderr, "rdma-bench:", err)
		return 1
	}
	if *curveRun {
		rep.Curve = judgeCurve(rep.Scenarios)
		if *png != "" {
			if err := writeCurvePNG(*png, &rep, rep.Curve); err != nil {
				fmt.Fprintln(stderr, "rdma-bench: -png:", err)
				return 1
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "rdma-bench:", err)
			return 1
		}
		return 0
	}
	printTable(stdout, &rep)
	if rep.Curve != nil {
		printCurve(stdout, rep.Curve)
	}
	return 0
}

// measure runs the rounds: in each, every scenario, RDMA then TCP (then
// the UDP floor, with rep.Floor), so that each ratio compares runs made
// seconds apart.
func measure(tr transport, sel []*scenario, b workload.Budget, runs int, rep *Report, pr *progress, h hooks) error {
	rep.Scenarios = make([]Scenario, len(sel))
	for i, s := range sel {
		rep.Scenarios[i] = Scenario{Name: s.name, Title: s.title, TCP: "Go TCP: " + s.tcpTitle, Unit: s.unit, Better: s.better}
	}
	where := "1 process"
	if _, ok := tr.(twoProcs); ok {
		where = "2 processes"
	}
	defer pr.clear()
	total := 0 // workloads measured per round (percentile rows are read, not run)
	for _, s := range sel {
		if s.of == "" {
			total++
		}
	}
	for r := range runs {
		nth := 0
		got := map[string][3]workload.Result{} // this round's runs
		for i, s := range sel {
			f := &rep.Scenarios[i]
			var res [3]workload.Result
			if s.of != "" {
				res = got[s.of] // measured just before (selectScenarios)
			}
			if s.of == "" {
				nth++
			}
			sides := []string{"RDMA", "TCP"}
			if rep.Floor {
				sides = append(sides, "UDP floor")
			}
			for k, side := range sides {
				if s.of != "" {
					break
				}
				pr.show(fmt.Sprintf("rdma-bench: round %d/%d, %s (%d/%d), %s, %s", r+1, runs, s.name, nth, total, side, where))
				if h.measuring != nil {
					h.measuring(s.name, side)
				}
				var err error
				switch k {
				case 0:
					res[k], err = tr.rdma(s, b)
				case 1:
					res[k], err = tr.tcp(s, b)
				default:
					res[k], err = tr.floor(s, b)
				}
				if err != nil {
					return fmt.Errorf("%s, round %d, %s: %w", s.name, r+1, side, err)
				}
			}
			got[s.name] = res
			rv, tv := s.value(res[0]), s.value(res[1])
			ratio := 0.0
			if tv > 0 {
				ratio = rv / tv
			}
			f.RDMA, f.TCPs, f.Ratios = append(f.RDMA, rv), append(f.TCPs, tv), append(f.Ratios, ratio)
			f.RDMAOps, f.TCPOps = append(f.RDMAOps, res[0].Ops), append(f.TCPOps, res[1].Ops)
			if rep.Floor {
				fv := s.value(res[2])
				f.Floors = append(f.Floors, fv)
				f.OfFloor = append(f.OfFloor, rv/max(fv, 1e-9))
			}
		}
	}
	for i := range rep.Scenarios {
		f := &rep.Scenarios[i]
		f.Median = Medians{RDMA: workload.Median(f.RDMA), TCP: workload.Median(f.TCPs), Ratio: workload.Median(f.Ratios)}
		if len(f.Floors) > 0 {
			f.Median.Floor, f.Median.OfFloor = workload.Median(f.Floors), workload.Median(f.OfFloor)
		}
		f.RatioMin, f.RatioMax = slices.Min(f.Ratios), slices.Max(f.Ratios)
	}
	return nil
}

// printTable prints the report as a table: medians, and the ratios'
// range when there is more than one round.
func printTable(w io.Writer, rep *Report) {
	where := "in one process"
	if rep.Procs == 2 {
		where = "between two processes (" + strings.Join(rep.Addresses, " and ") + ")"
	}
	rounds := "1 run"
	if rep.Runs > 1 {
		rounds = fmt.Sprintf("%d interleaved runs, medians", rep.Runs)
	}
	fmt.Fprintf(w, "rdma-bench: %s, %s; %s, %d CPUs, %s, rdma-go %s\n", where, rounds, rep.Budget, rep.Env.CPUs, rep.Env.GoVersion, rep.RdmaGo)
	if rep.Env.CPU != "" {
		fmt.Fprintf(w, "cpu: %s\n", rep.Env.CPU)
	}
	for _, x := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
	fmt.Fprintf(w, "%-15s %-46s %16s %16s %9s", "name", "workload", "RDMA ("+rep.Device+")", "Go TCP loopback", "RDMA/TCP")
	if rep.Runs > 1 {
		fmt.Fprint(w, " [range]      ")
	}
	if rep.Floor {
		fmt.Fprintf(w, " %16s %11s", "UDP floor", "RDMA/floor")
	}
	fmt.Fprintln(w)
	for _, f := range rep.Scenarios {
		fmt.Fprintf(w, "%-15s %-46s %10.2f %-5s %10.2f %-5s %9.2f", f.Name, f.Title, f.Median.RDMA, f.Unit, f.Median.TCP, f.Unit, f.Median.Ratio)
		if rep.Runs > 1 {
			r := fmt.Sprintf("[%.2f–%.2f]", f.RatioMin, f.RatioMax)
			fmt.Fprintf(w, " %s%*s", r, 13-utf8.RuneCountInString(r), "")
		}
		if rep.Floor {
			fmt.Fprintf(w, " %10.2f %-5s %11.2f", f.Median.Floor, f.Unit, f.Median.OfFloor)
		}
		fmt.Fprintf(w, "  (%s is better)\n", f.Better)
	}
}

// inProcess measures both ends in this process.
type inProcess struct {
	ctx    context.Context
	device string
}

// rdma measures s's RDMA side over a new pair, after a warm-up on it.
func (t inProcess) rdma(s *scenario, b workload.Budget) (workload.Result, error) {
	p, err := workload.NewPair(s.config(), t.device)
	if err != nil {
		return workload.Result{}, fmt.Errorf("RDMA pair: %w", err)
	}
	defer p.Close()
	if _, err := s.inProcess(t.ctx, p, s.warmup()); err != nil {
		return workload.Result{}, fmt.Errorf("warm-up: %w", err)
	}
	return s.inProcess(t.ctx, p, b)
}

// tcp measures s's TCP side on loopback connections to this process.
func (t inProcess) tcp(s *scenario, b workload.Budget) (workload.Result, error) {
	return s.tcpInProcess(t.ctx, b)
}

// floor measures the UDP floor under s between two links of this process
// on 127.0.0.1, after a warm-up.
func (t inProcess) floor(s *scenario, b workload.Budget) (workload.Result, error) {
	var ls [2]*link.UDP
	for i := range ls {
		l, err := udpfloor.Listen(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
		if err != nil {
			return workload.Result{}, fmt.Errorf("UDP floor: %w", err)
		}
		defer l.Close()
		ls[i] = l
	}
	ctx, cancel := context.WithCancel(t.ctx)
	served := make(chan error, 1)
	go func() {
		_, err := udpfloor.Serve(ctx, ls[1])
		served <- err
	}()
	r, err := runFloor(ctx, ls[0], ls[1].LocalAddr(), s, b)
	cancel()
	return r, errors.Join(err, <-served)
}

// runFloor runs the UDP floor's sender toward dst: a warm-up, then the
// measured run.
func runFloor(ctx context.Context, l *link.UDP, dst netip.AddrPort, s *scenario, b workload.Budget) (workload.Result, error) {
	if _, err := udpfloor.Run(ctx, l, dst, s.floorStream(), s.warmup()); err != nil {
		return workload.Result{}, fmt.Errorf("UDP floor warm-up: %w", err)
	}
	r, err := udpfloor.Run(ctx, l, dst, s.floorStream(), b)
	if err != nil {
		return workload.Result{}, fmt.Errorf("UDP floor: %w", err)
	}
	return r, nil
}

// progress shows which workload runs: one line rewritten in place on a
// terminal, a line each otherwise.
type progress struct {
	w     io.Writer
	term  bool
	width int
}

// show puts s on the progress line.
func (p *progress) show(s string) {
	if !p.term {
		fmt.Fprintln(p.w, s)
		return
	}
	fmt.Fprintf(p.w, "\r%-*s", p.width, s)
	p.width = max(p.width, len(s))
}

// clear erases the line on a terminal.
func (p *progress) clear() {
	if p.term && p.width > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.width, "")
	}
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes b to the underlying writer, alone.
func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
