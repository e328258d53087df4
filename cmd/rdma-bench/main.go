// Command rdma-bench compares, in one process and one run, rdma-go's soft
// RoCE data path with Go's own TCP on loopback, on three workloads:
//
//   - WRITE 64 KiB bandwidth (RC RDMA WRITE, 16 outstanding) against a
//     stream of 64 KiB TCP writes;
//   - 8-byte ping-pong latency (RC SEND) against an 8-byte TCP echo;
//   - 8-byte message rate (RC RDMA WRITE, post lists of 32, 8 lists
//     outstanding) against 8-byte messages written 32 at a time on TCP.
//
// The RDMA side runs over two loopback soft devices (verbs.AddLoopbackDevice),
// real UDP on 127.0.0.x. It prints a table with each figure and the ratio
// RDMA/TCP, or one JSON object with --json.
//
// With -d DEVICE the RDMA side runs on that device instead (both QPs on
// it, over its own address: a kernel device such as rxe0 works).
//
// Usage: rdma-bench [-d DEVICE] [-duration 2s | -iters N] [--json] | -version
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rdma-go/rdma-go/internal/perftest"
	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/internal/version"
)

// Workload parameters.
const (
	bwSize     = 64 << 10
	bwWindow   = 16
	latSize    = 8
	rateSize   = 8
	rateList   = 32
	rateLists  = 8
	warmupIter = 200
)

// Figure is one measured pair.
type Figure struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	RDMA  float64 `json:"rdma"`
	TCP   float64 `json:"tcp"`
	Ratio float64 `json:"ratio_rdma_over_tcp"`
	// Better says which direction is better for this unit.
	Better  string `json:"better"`
	RDMAOps int    `json:"rdma_ops"`
	TCPOps  int    `json:"tcp_ops"`
}

// Report is the --json output.
type Report struct {
	Env      perftest.Env `json:"environment"`
	Budget   string       `json:"budget"`
	Figures  []Figure     `json:"figures"`
	Warnings []string     `json:"warnings,omitempty"`
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rdma-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dur := fs.Duration("duration", 2*time.Second, "time per workload and transport")
	iters := fs.Int("iters", 0, "operations per workload and transport instead of -duration (messages; round trips for the ping-pong)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	showVersion := fs.Bool("version", false, "print rdma-go's version and exit")
	device := fs.String("d", "", "run the RDMA side on this device (both QPs on it, e.g. rxe0) instead of two loopback soft devices")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Line())
		return 0
	}
	if fs.NArg() > 0 || *dur <= 0 || *iters < 0 {
		fs.Usage()
		return 2
	}
	b := workload.Budget{Iters: *iters, Duration: *dur}
	rep := Report{Env: perftest.Environment(), Budget: b.String()}
	figs, err := measure(b, *device)
	if err != nil {
		fmt.Fprintln(stderr, "rdma-bench:", err)
		return 1
	}
	rep.Figures = figs
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "rdma-bench:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "rdma-bench: %s; %s, %d CPUs, %s, rdma-go %s\n", b, rep.Env.CPU, rep.Env.CPUs, rep.Env.GoVersion, rep.Env.RdmaGo)
	dev := "soft RoCE"
	if *device != "" {
		dev = *device
	}
	fmt.Fprintf(stdout, "%-38s %16s %16s %10s\n", "workload", "RDMA ("+dev+")", "Go TCP loopback", "RDMA/TCP")
	for _, f := range figs {
		fmt.Fprintf(stdout, "%-38s %11.2f %-4s %11.2f %-4s %10.2f  (%s is better)\n", f.Name, f.RDMA, f.Unit, f.TCP, f.Unit, f.Ratio, f.Better)
	}
	return 0
}

func measure(b workload.Budget, device string) ([]Figure, error) {
	warm := workload.Budget{Iters: warmupIter}
	var figs []Figure

	// Bandwidth.
	p, err := workload.NewRCPair(bwWindow*bwSize, 2*bwWindow, device)
	if err != nil {
		return nil, fmt.Errorf("RDMA pair: %w", err)
	}
	if _, err := workload.RCWrite(p, bwSize, bwWindow, warm); err != nil {
		p.Close()
		return nil, fmt.Errorf("RDMA WRITE warm-up: %w", err)
	}
	rw, err := workload.RCWrite(p, bwSize, bwWindow, b)
	p.Close()
	if err != nil {
		return nil, fmt.Errorf("RDMA WRITE: %w", err)
	}
	tw, err := workload.TCPStream(bwSize, b)
	if err != nil {
		return nil, fmt.Errorf("TCP stream: %w", err)
	}
	figs = append(figs, figure("WRITE 64 KiB bandwidth", "MiB/s", "higher", rw.MiBps(), tw.MiBps(), rw, tw))

	// Latency.
	p, err = workload.NewRCPair(4096, 64, device)
	if err != nil {
		return nil, fmt.Errorf("RDMA pair: %w", err)
	}
	if _, err := workload.RCSendPingPong(p, latSize, warm); err != nil {
		p.Close()
		return nil, fmt.Errorf("RDMA SEND warm-up: %w", err)
	}
	rl, err := workload.RCSendPingPong(p, latSize, b)
	p.Close()
	if err != nil {
		return nil, fmt.Errorf("RDMA SEND ping-pong: %w", err)
	}
	tl, err := workload.TCPPingPong(latSize, b)
	if err != nil {
		return nil, fmt.Errorf("TCP ping-pong: %w", err)
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	figs = append(figs, figure("SEND 8 B ping-pong latency (one-way)", "usec", "lower", us(rl.HalfRTT()), us(tl.HalfRTT()), rl, tl))

	// Message rate.
	p, err = workload.NewRCPair(4096, 2*rateList*rateLists, device)
	if err != nil {
		return nil, fmt.Errorf("RDMA pair: %w", err)
	}
	if _, err := workload.RCWritePostList(p, rateSize, rateList, rateLists, workload.Budget{Iters: warmupIter * rateList}); err != nil {
		p.Close()
		return nil, fmt.Errorf("RDMA WRITE post list warm-up: %w", err)
	}
	rr, err := workload.RCWritePostList(p, rateSize, rateList, rateLists, b)
	p.Close()
	if err != nil {
		return nil, fmt.Errorf("RDMA WRITE post list: %w", err)
	}
	tr, err := workload.TCPBatched(rateSize, rateList, b)
	if err != nil {
		return nil, fmt.Errorf("TCP batched: %w", err)
	}
	figs = append(figs, figure("WRITE 8 B message rate (lists of 32)", "Mpps", "higher", rr.Mpps(), tr.Mpps(), rr, tr))
	return figs, nil
}

func figure(name, unit, better string, rdma, tcp float64, r, t workload.Result) Figure {
	ratio := 0.0
	if tcp > 0 {
		ratio = rdma / tcp
	}
	return Figure{Name: name, Unit: unit, RDMA: rdma, TCP: tcp, Ratio: ratio, Better: better, RDMAOps: r.Ops, TCPOps: t.Ops}
}
