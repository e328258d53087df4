package main

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/rdma-go/rdma-go/internal/perftest/udpfloor"
	"github.com/rdma-go/rdma-go/internal/perftest/workload"
)

// rdmaKind is the RDMA side of a scenario.
type rdmaKind int

const (
	rdmaWrite     rdmaKind = iota // RDMA WRITE stream
	rdmaSend                      // SEND stream, the peer re-posting receives
	rdmaRead                      // RDMA READ stream
	rdmaSendLat                   // SEND ping-pong
	rdmaWriteLat                  // WRITE ping-pong, each side polling its memory
	rdmaWriteRate                 // small WRITEs in post lists, over one or more QPs
)

// tcpKind is the TCP counterpart of a scenario.
type tcpKind int

const (
	tcpStream   tcpKind = iota // size-byte writes on one connection
	tcpPingPong                // size bytes echoed
	tcpBatched                 // rateList messages per write, over conns connections
)

// Workload parameters.
const (
	bwSize     = 64 << 10
	bwWindow   = 16 // outstanding WRITEs, SENDs or READs
	latSize    = 8
	rateSize   = 8
	rateList   = 32 // WRITEs per PostSend
	rateLists  = 8  // post lists outstanding per QP
	warmupIter = 200
)

// scenario is one workload measured over RDMA and over TCP. name is
// stable (the JSON carries it); title is for people.
type scenario struct {
	name, title, unit, better string
	rdma                      rdmaKind
	size                      int
	window                    int // outstanding requests, or post lists per QP
	mem                       int // bytes of memory each end registers, if not window × size
	qps                       int
	tcp                       tcpKind
	tcpTitle                  string
	conns                     int
	// of names the scenario whose runs this one reads instead of
	// measuring its own: the 99th percentile of a ping-pong's latency.
	of string
}

// scenarios is what rdma-bench measures, in this order.
var scenarios = []scenario{
	{name: "write-64k", title: "WRITE 64 KiB bandwidth (16 outstanding)", unit: "MiB/s", better: "higher",
		rdma: rdmaWrite, size: bwSize, window: bwWindow, tcp: tcpStream, tcpTitle: "stream of 64 KiB writes"},
	{name: "send-64k", title: "SEND 64 KiB bandwidth (16 outstanding)", unit: "MiB/s", better: "higher",
		rdma: rdmaSend, size: bwSize, window: bwWindow, tcp: tcpStream, tcpTitle: "stream of 64 KiB writes"},
	{name: "read-64k", title: "READ 64 KiB bandwidth (16 outstanding)", unit: "MiB/s", better: "higher",
		rdma: rdmaRead, size: bwSize, window: bwWindow, tcp: tcpStream, tcpTitle: "stream of 64 KiB writes"},
	{name: "send-lat", title: "SEND 8 B ping-pong latency (one-way)", unit: "usec", better: "lower",
		rdma: rdmaSendLat, size: latSize, tcp: tcpPingPong, tcpTitle: "8 B echo"},
	{name: "send-lat-p99", title: "  the same, 99th percentile", unit: "usec", better: "lower",
		of: "send-lat", tcpTitle: "8 B echo, 99th percentile"},
	{name: "write-lat", title: "WRITE 8 B ping-pong latency (one-way)", unit: "usec", better: "lower",
		rdma: rdmaWriteLat, size: latSize, tcp: tcpPingPong, tcpTitle: "8 B echo"},
	{name: "write-lat-p99", title: "  the same, 99th percentile", unit: "usec", better: "lower",
		of: "write-lat", tcpTitle: "8 B echo, 99th percentile"},
	rateScenario(1), rateScenario(2), rateScenario(4), rateScenario(8),
}

// rateScenario is the message rate over n QPs, against n TCP connections.
func rateScenario(n int) scenario {
	s := "s"
	if n == 1 {
		s = ""
	}
	return scenario{name: fmt.Sprintf("write-rate-%dqp", n), title: fmt.Sprintf("WRITE 8 B message rate (lists of 32, %d QP%s)", n, s),
		unit: "Mpps", better: "higher", rdma: rdmaWriteRate, size: rateSize, window: rateLists, qps: n,
		tcp: tcpBatched, tcpTitle: fmt.Sprintf("32 × 8 B per write, %d connection%s", n, s), conns: n}
}

// The sizes of -curve: every power of two from curveMin to curveMax, as
// ib_write_bw -a sweeps them.
const (
	curveMin = 64
	curveMax = 8 << 20
)

// -curve measures as ib_write_bw -a does: curveWindow WRITEs outstanding
// (its default tx depth), cycling through curveCycle bytes of memory (its
// cycle buffer, a page) or, for larger sizes, all from one buffer of the
// size — as the TCP side writes from one buffer.
const (
	curveWindow = 128
	curveCycle  = 4096
)

// curve is -curve's workloads: WRITE bandwidth at each size against a TCP
// stream of writes of the same size.
var curve = func() []scenario {
	var c []scenario
	for size := curveMin; size <= curveMax; size *= 2 {
		c = append(c, scenario{name: "write-" + sizeName(size),
			title: fmt.Sprintf("WRITE %s bandwidth (%d outstanding)", sizeTitle(size), curveWindow),
			unit:  "MiB/s", better: "higher", rdma: rdmaWrite, size: size, window: curveWindow, mem: max(size, curveCycle),
			tcp: tcpStream, tcpTitle: "stream of " + sizeTitle(size) + " writes"})
	}
	return c
}()

// sizeUnit is size in the largest binary unit that divides it: (1, "MiB"),
// (64, "KiB"), (64, "B").
func sizeUnit(size int) (int, string) {
	switch {
	case size >= 1<<20 && size%(1<<20) == 0:
		return size >> 20, "MiB"
	case size >= 1<<10 && size%(1<<10) == 0:
		return size >> 10, "KiB"
	}
	return size, "B"
}

// sizeName is size for a workload's name: 64, 1k, 8m.
func sizeName(size int) string {
	n, u := sizeUnit(size)
	if u == "B" {
		return fmt.Sprint(n)
	}
	return fmt.Sprint(n) + strings.ToLower(u[:1])
}

// sizeTitle is size for people: 64 B, 1 KiB, 8 MiB.
func sizeTitle(size int) string {
	n, u := sizeUnit(size)
	return fmt.Sprintf("%d %s", n, u)
}

// lookup returns the scenario called name, of the table's or the curve's.
func lookup(name string) (*scenario, error) {
	for _, list := range [][]scenario{scenarios, curve} {
		for i := range list {
			if list[i].name == name {
				return &list[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no scenario %q", name)
}

// names lists the scenarios' names.
func names() string {
	n := make([]string, len(scenarios))
	for i := range scenarios {
		n[i] = scenarios[i].name
	}
	return strings.Join(n, ",")
}

// selectScenarios returns the scenarios a comma-separated list names, in
// the table's order, or all of them for an empty list.
func selectScenarios(list string) ([]*scenario, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if _, err := lookup(n); err != nil {
			return nil, fmt.Errorf("-only: %w (there are %s)", err, names())
		}
		want[n] = true
	}
	// A percentile row comes with its ping-pong, and the ping-pong with
	// its percentile row.
	for i := range scenarios {
		if o := scenarios[i].of; o != "" && (want[o] || want[scenarios[i].name]) {
			want[o], want[scenarios[i].name] = true, true
		}
	}
	var sel []*scenario
	for i := range scenarios {
		if len(want) == 0 || want[scenarios[i].name] {
			sel = append(sel, &scenarios[i])
		}
	}
	return sel, nil
}

// config shapes each end of the scenario's RDMA connection.
func (s *scenario) config() workload.Config {
	switch s.rdma {
	case rdmaSend:
		// The receiver keeps 4 windows of receives posted: a peer process
		// busy elsewhere for a moment must not make the sender wait on RNR.
		return workload.Config{MemSize: s.window * s.size, SQDepth: 4 * s.window}
	case rdmaRead:
		return workload.Config{MemSize: s.window * s.size, SQDepth: 2 * s.window, RDAtomic: s.window}
	case rdmaSendLat, rdmaWriteLat:
		return workload.Config{MemSize: 4096, SQDepth: 64}
	case rdmaWriteRate:
		return workload.Config{MemSize: 4096, SQDepth: 2 * rateList * s.window, QPs: s.qps}
	default:
		mem := s.mem
		if mem == 0 {
			mem = s.window * s.size
		}
		return workload.Config{MemSize: mem, SQDepth: 2 * s.window}
	}
}

// floorStream is the UDP floor's stream under a WRITE scenario: its size
// over the same memory.
func (s *scenario) floorStream() udpfloor.Stream {
	return udpfloor.Stream{Size: s.size, Mem: s.config().MemSize}
}

// warmup is the budget of the untimed run before each measured one.
func (s *scenario) warmup() workload.Budget {
	if s.rdma == rdmaWriteRate {
		return workload.Budget{Iters: warmupIter * rateList}
	}
	return workload.Budget{Iters: warmupIter}
}

// value is the figure the scenario reports of r, in s.unit.
func (s *scenario) value(r workload.Result) float64 {
	switch {
	case s.of != "":
		return float64(r.HalfRTTQuantile(0.99)) / 1e3
	case s.unit == "usec":
		return float64(r.HalfRTT()) / 1e3
	case s.unit == "Mpps":
		return r.Mpps()
	default:
		return r.MiBps()
	}
}

// inProcess runs the RDMA side with both ends in this process.
func (s *scenario) inProcess(ctx context.Context, p *workload.Pair, b workload.Budget) (workload.Result, error) {
	switch s.rdma {
	case rdmaSend:
		return workload.RCSend(ctx, p, s.size, s.window, b)
	case rdmaRead:
		return workload.RCRead(ctx, p, s.size, s.window, b)
	case rdmaSendLat:
		return workload.RCSendPingPong(ctx, p, s.size, b)
	case rdmaWriteLat:
		return workload.RCWriteLat(ctx, p, s.size, b)
	case rdmaWriteRate:
		return workload.RCWritePostList(ctx, p, s.size, rateList, s.window, b)
	default:
		return workload.RCWrite(ctx, p, s.size, s.window, b)
	}
}

// active runs the measuring half of the RDMA side on x, whose peer is in
// the other process.
func (s *scenario) active(ctx context.Context, x *workload.End, b workload.Budget) (workload.Result, error) {
	switch s.rdma {
	case rdmaSend:
		return workload.SendStream(ctx, x, s.size, s.window, b)
	case rdmaRead:
		return workload.ReadStream(ctx, x, s.size, s.window, b)
	case rdmaSendLat:
		return workload.SendPing(ctx, x, s.size, b)
	case rdmaWriteLat:
		return workload.WritePing(ctx, x, s.size, b)
	case rdmaWriteRate:
		return workload.WriteRate(ctx, x, s.size, rateList, s.window, b)
	default:
		return workload.WriteStream(ctx, x, s.size, s.window, b)
	}
}

// passive readies the peer process's half of the RDMA side on y (posting
// its receives before the measuring side may send) and returns the loop
// that serves it until its context is done; the loop returns how many
// messages it answered or received, and the context's cause. WRITE and
// READ need no loop: the device answers alone.
func (s *scenario) passive(y *workload.End) (func(context.Context) (int, error), error) {
	switch s.rdma {
	case rdmaSend:
		sink, err := workload.NewSendSink(y, s.size, s.window, 4*s.window)
		if err != nil {
			return nil, err
		}
		return sink.Run, nil
	case rdmaSendLat:
		pong, err := workload.NewSendPong(y, s.size)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (int, error) {
			err := pong.Run(ctx)
			return pong.Answered, err
		}, nil
	case rdmaWriteLat:
		return func(ctx context.Context) (int, error) { return workload.WritePong(ctx, y, s.size) }, nil
	default:
		return func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, context.Cause(ctx)
		}, nil
	}
}

// answers reports whether the peer's loop answers every operation, so
// that its count must equal the measuring side's.
func (s *scenario) answers() bool { return s.rdma == rdmaSendLat || s.rdma == rdmaWriteLat }

// tcpConns is how many TCP connections the TCP side uses.
func (s *scenario) tcpConns() int { return max(s.conns, 1) }

// tcpInProcess runs the TCP side with both ends in this process.
func (s *scenario) tcpInProcess(ctx context.Context, b workload.Budget) (workload.Result, error) {
	switch s.tcp {
	case tcpPingPong:
		return workload.TCPPingPong(ctx, s.size, b)
	case tcpBatched:
		return workload.TCPWrites(ctx, s.size, rateList, s.tcpConns(), b)
	default:
		return workload.TCPStream(ctx, s.size, b)
	}
}

// tcpActive runs the measuring half of the TCP side on conns, whose other
// ends are in the peer process.
func (s *scenario) tcpActive(ctx context.Context, conns []net.Conn, b workload.Budget) (workload.Result, error) {
	switch s.tcp {
	case tcpPingPong:
		return workload.PingTCP(ctx, conns[0], s.size, b)
	case tcpBatched:
		return workload.WriteConns(ctx, conns, s.size, rateList, b)
	default:
		return workload.WriteConns(ctx, conns, s.size, 1, b)
	}
}

// tcpPassive serves one connection of the TCP side in the peer process,
// until the measuring side closes it.
func (s *scenario) tcpPassive(c net.Conn) error {
	if s.tcp == tcpPingPong {
		return workload.EchoTCP(c, s.size)
	}
	_, err := workload.SinkTCP(c)
	return err
}
