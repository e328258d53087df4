package verbs

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rdma-go/rdma-go/provider/soft/rundir"
)

// StatsEnv turns the process's statistics socket off ("off"); see
// StatsDir.
const StatsEnv = "RDMA_GO_STATS"

// resKind is a kind of object Snapshot counts per context.
type resKind int

const (
	resPD resKind = iota
	resCQ
	resMR
	resSRQ
	resKinds
)

// ProcessSnapshot is what one process has open: the numbers "rdma-go
// statistic show" and "rdma-go resource show" print for soft devices, whose
// counters and objects live in the processes that use them.
type ProcessSnapshot struct {
	PID      int               `json:"pid"`
	Comm     string            `json:"comm"`
	Contexts []ContextSnapshot `json:"contexts"`
}

// ContextSnapshot is one open device context: its device, port 1's
// counters and its objects.
type ContextSnapshot struct {
	Device string     `json:"device"`
	Addr   string     `json:"addr,omitempty"`
	Port   Counters   `json:"port_counters"`
	PDs    int64      `json:"pd"`
	CQs    int64      `json:"cq"`
	MRs    int64      `json:"mr"`
	SRQs   int64      `json:"srq"`
	QPs    []QPStatus `json:"qps"`
}

// QPStatus is one live QP of a context.
type QPStatus struct {
	QPN      uint32   `json:"qpn"`
	Type     string   `json:"type"`
	State    string   `json:"state"`
	DestQPN  uint32   `json:"rqpn"`
	SQPSN    uint32   `json:"sq_psn"`
	RQPSN    uint32   `json:"rq_psn"`
	Counters Counters `json:"counters"`
}

// open is the process's open contexts, for Snapshot and the statistics
// socket, which serves while any is open.
var open struct {
	mu   sync.Mutex
	ctxs map[*Context]struct{}
	srv  net.Listener
}

// Snapshot returns what this process has open, context by context.
func Snapshot() ProcessSnapshot {
	open.mu.Lock()
	ctxs := make([]*Context, 0, len(open.ctxs))
	for c := range open.ctxs {
		ctxs = append(ctxs, c)
	}
	open.mu.Unlock()
	s := ProcessSnapshot{PID: os.Getpid(), Comm: filepath.Base(os.Args[0]), Contexts: []ContextSnapshot{}}
	for _, c := range ctxs {
		cs := ContextSnapshot{Device: c.dev.Name(), PDs: c.res[resPD].Load(), CQs: c.res[resCQ].Load(),
			MRs: c.res[resMR].Load(), SRQs: c.res[resSRQ].Load(), QPs: []QPStatus{}}
		if a := c.dev.Addr(); a.IsValid() {
			cs.Addr = a.String()
		}
		if pc, err := c.QueryPortCounters(1); err == nil {
			cs.Port = pc
		} else {
			continue // closed meanwhile
		}
		for _, qp := range c.QPs() {
			q := QPStatus{QPN: qp.QPN(), Type: qp.Type().String(), State: qp.State().String(), Counters: qp.Counters()}
			if a, _, err := qp.Query(); err == nil {
				q.DestQPN, q.SQPSN, q.RQPSN = a.DestQPN, a.SQPSN, a.RQPSN
			}
			cs.QPs = append(cs.QPs, q)
		}
		s.Contexts = append(s.Contexts, cs)
	}
	return s
}

// StatsDir is where processes serve their Snapshot, one Unix socket each
// named after the process ID, while they have a device open (as a JVM
// leaves hsperfdata for jstat): $XDG_RUNTIME_DIR/rdma-go, or
// /tmp/rdma-go-UID. The directory is the user's alone (0700).
// RDMA_GO_STATS=off serves nothing.
func StatsDir() string { return rundir.Dir() }

// opened records a new context and starts the statistics socket with the
// first.
func opened(c *Context) {
	open.mu.Lock()
	defer open.mu.Unlock()
	if open.ctxs == nil {
		open.ctxs = make(map[*Context]struct{})
	}
	open.ctxs[c] = struct{}{}
	if open.srv == nil && !strings.EqualFold(os.Getenv(StatsEnv), "off") {
		open.srv = serveStats()
	}
}

// closed forgets a context and stops the statistics socket with the last.
func closed(c *Context) {
	open.mu.Lock()
	defer open.mu.Unlock()
	delete(open.ctxs, c)
	if len(open.ctxs) == 0 && open.srv != nil {
		open.srv.Close() // unlinks the socket
		open.srv = nil
	}
}

// serveStats listens on the process's statistics socket and answers each
// connection with a Snapshot in JSON. It returns nil, after a debug log
// line, where it cannot listen: statistics are a convenience, never a
// reason for a device not to open.
func serveStats() net.Listener {
	dir := StatsDir()
	if err := rundir.Make(dir); err != nil {
		slog.Debug("rdma-go: no statistics socket", "dir", dir, "err", err)
		return nil
	}
	path := filepath.Join(dir, fmt.Sprintf("%d.sock", os.Getpid()))
	os.Remove(path) // a dead process's, whose PID this one reuses
	ln, err := net.Listen("unix", path)
	if err != nil {
		slog.Debug("rdma-go: no statistics socket", "path", path, "err", err)
		return nil
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			json.NewEncoder(conn).Encode(Snapshot())
			conn.Close()
		}
	}()
	return ln
}
