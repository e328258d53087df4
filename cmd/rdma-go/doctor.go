package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-go/rdma-go/internal/doctor"
)

// doctor runs the checks of package doctor and prints one line a finding
// (or JSON with -j). It returns 1 when a finding is an error, 2 on bad
// arguments.
func (c *cli) doctor(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("rdma-go doctor", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	dev := fs.String("d", "", "check only this device")
	memlock := fs.String("memlock", "0", "memory the program will register (K, M, G suffixes), checked against ulimit -l")
	peer := fs.String("peer", "", "try an rdma_cm connection to HOST[:PORT] (without a port, only whether its CM answers)")
	timeout := fs.Duration("timeout", 3*time.Second, "bound on each step of the peer check")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "rdma-go doctor: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg := doctor.Config{Env: doctor.Default(), Device: *dev, Timeout: *timeout}
	var err error
	if cfg.Memlock, err = parseSize(*memlock); err != nil {
		fmt.Fprintf(c.stderr, "rdma-go doctor: --memlock %q: %v\n", *memlock, err)
		return 2
	}
	if *peer != "" {
		if cfg.Peer, cfg.PeerPortGiven, err = parsePeer(ctx, *peer); err != nil {
			fmt.Fprintf(c.stderr, "rdma-go doctor: --peer %q: %v\n", *peer, err)
			return 2
		}
	}
	findings := doctor.Run(ctx, cfg)
	if c.json {
		if err := c.printJSON(findingsOrEmpty(findings)); err != nil {
			fmt.Fprintln(c.stderr, err)
			return 1
		}
	} else {
		doctor.Write(c.stdout, findings)
	}
	if doctor.Worst(findings) == doctor.Error {
		return 1
	}
	return 0
}

// parseSize reads "4096", "64K", "64M", "1G" or "unlimited".
func parseSize(s string) (uint64, error) {
	if s == "unlimited" {
		return ^uint64(0), nil
	}
	mult := uint64(1)
	if n := len(s); n > 0 {
		switch s[n-1] | 0x20 {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a number with an optional K, M or G suffix")
	}
	if v > ^uint64(0)/mult {
		return 0, fmt.Errorf("too large")
	}
	return v * mult, nil
}

// probePort is the rdma_cm port the peer check connects to when none is
// given: one that nothing is expected to listen on, so that a reject
// proves the peer's connection manager answers.
const probePort = 7175

// parsePeer reads HOST[:PORT], resolving a name.
func parsePeer(ctx context.Context, s string) (ap netip.AddrPort, portGiven bool, err error) {
	host, port := s, uint16(probePort)
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return ap, false, fmt.Errorf("bad port %q", p)
		}
		host, port, portGiven = h, uint16(n), true
	}
	host = strings.Trim(host, "[]")
	a, err := netip.ParseAddr(host)
	if err != nil {
		addrs, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if lerr != nil || len(addrs) == 0 {
			return ap, false, fmt.Errorf("cannot resolve %q: %v", host, lerr)
		}
		a = addrs[0]
	}
	return netip.AddrPortFrom(a.Unmap(), port), portGiven, nil
}

// findingsOrEmpty makes "no findings" print as [] rather than null.
func findingsOrEmpty(fs []doctor.Finding) []doctor.Finding {
	if fs == nil {
		return []doctor.Finding{}
	}
	return fs
}
