package pingpong

import (
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"github.com/rdma-go/rdma-go/internal/testdev"
)

// runPair runs a server and a client in this process and returns their
// output. The server accepts on a listener the test holds (bound to port 0
// before either side starts, so the client can dial at once and no other
// process can take the port), and a side that fails cancels the other.
func runPair(t *testing.T, kind Kind, mod func(*Config)) (server, client string) {
	t.Helper()
	outs, errs := runPairErrs(t, kind, mod)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", errs[0], outs[0], errs[1], outs[1])
	}
	return outs[0], outs[1]
}

// runPairErrs is runPair that returns each side's output and error.
func runPairErrs(t *testing.T, kind Kind, mod func(*Config)) (outs [2]string, errs [2]error) {
	t.Helper()
	const limit = 60 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Both sides use one device of their own, on an address no other
	// test process uses; it stays open until the test ends.
	dev := testdev.Device(t, "pp").Device().Name()
	var bufs [2]clitest.Buffer
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 {
		cfg := Defaults(kind)
		cfg.Port, cfg.GIDIndex, cfg.Iters, cfg.Device = ln.Addr().(*net.TCPAddr).Port, 1, 200, dev
		cfg.Stdout, cfg.Stderr = &bufs[i], &bufs[i]
		if i == 0 {
			cfg.Listener = ln
		} else {
			cfg.Host = "127.0.0.1"
		}
		if mod != nil {
			mod(&cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = Run(ctx, cfg); errs[i] != nil {
				cancel() // the other side would wait for it until the deadline
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit + 10*time.Second):
		t.Fatalf("server and client still running %v after their deadline\nserver:\n%s\nclient:\n%s",
			10*time.Second, bufs[0].String(), bufs[1].String())
	}
	return [2]string{bufs[0].String(), bufs[1].String()}, errs
}

var (
	localRE  = regexp.MustCompile(`(?m)^  local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}[,:] GID ::ffff:127\.\d+\.\d+\.\d+$`)
	remoteRE = regexp.MustCompile(`(?m)^  remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:127\.\d+\.\d+\.\d+$`)
	bytesRE  = regexp.MustCompile(`(?m)^\d+ bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`)
	itersRE  = regexp.MustCompile(`(?m)^200 iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`)
)

func TestRCPingpongInProcess(t *testing.T) {
	for _, size := range []int{1, 4096, 65536} {
		s, c := runPair(t, RC, func(cfg *Config) { cfg.Size = size; cfg.Check = true })
		for _, out := range []string{s, c} {
			for _, re := range []*regexp.Regexp{localRE, remoteRE, bytesRE, itersRE} {
				if !re.MatchString(out) {
					t.Fatalf("size %d: output lacks %s:\n%s", size, re, out)
				}
			}
			if strings.Contains(out, "invalid data") {
				t.Fatalf("data check failed:\n%s", out)
			}
		}
	}
}

func TestRCPingpongEvents(t *testing.T) {
	runPair(t, RC, func(cfg *Config) { cfg.Events = true; cfg.Size = 100 })
}

func TestRecordRoundTrip(t *testing.T) {
	d := Dest{QPN: 0x11, PSN: 0x123456}
	copy(d.GID[10:], []byte{0xff, 0xff, 192, 168, 1, 10})
	r := d.Marshal()
	if got := string(r[:]); got != "0000:000011:123456:00000000000000000000ffffc0a8010a\x00" {
		t.Fatalf("record %q", got)
	}
	back, err := ParseDest(r[:])
	if err != nil || back != d {
		t.Fatalf("parse: %+v %v", back, err)
	}
	for _, bad := range []string{"", "0000:000011:123456", "zzzz:000011:123456:00000000000000000000ffffc0a8010a",
		"0000:000011:123456:00000000000000000000ffffc0a8010", "0000:1000000:123456:00000000000000000000ffffc0a8010a",
		"0000:000011:123456:0000000000000000000Xffffc0a8010a"} {
		if _, err := ParseDest([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestUCPingpongInProcess(t *testing.T) {
	for _, size := range []int{1, 4096, 65536} {
		s, c := runPair(t, UC, func(cfg *Config) { cfg.Size = size })
		for _, out := range []string{s, c} {
			if !itersRE.MatchString(out) || !remoteRE.MatchString(out) {
				t.Fatalf("size %d output:\n%s", size, out)
			}
		}
	}
}

func TestUDPingpongInProcess(t *testing.T) {
	for _, size := range []int{1, 1024, 4096} {
		s, c := runPair(t, UD, func(cfg *Config) { cfg.Size = size; cfg.Check = true })
		for _, out := range []string{s, c} {
			if !itersRE.MatchString(out) || !localRE.MatchString(out) || !strings.Contains(out, "PSN 0x") {
				t.Fatalf("size %d output:\n%s", size, out)
			}
		}
		if !regexp.MustCompile(`local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}: GID`).MatchString(c) {
			t.Fatalf("ud local line lacks the colon:\n%s", c)
		}
	}
}

func TestSRQPingpongInProcess(t *testing.T) {
	s, c := runPair(t, SRQ, func(cfg *Config) { cfg.NumQP = 4; cfg.RxDepth = 64; cfg.Size = 2000 })
	for _, out := range []string{s, c} {
		if n := len(localRE.FindAllString(out, -1)); n != 4 {
			t.Fatalf("%d local lines, want 4:\n%s", n, out)
		}
		if n := len(remoteRE.FindAllString(out, -1)); n != 4 {
			t.Fatalf("%d remote lines, want 4:\n%s", n, out)
		}
		if !itersRE.MatchString(out) {
			t.Fatalf("output:\n%s", out)
		}
	}
}

// TestMissingGIDHint: a client started without -g on a RoCE device fails,
// as the C tool does, and both sides say that -g is missing and on which
// side.
func TestMissingGIDHint(t *testing.T) {
	_, errs := runPairErrs(t, RC, func(c *Config) {
		if c.Host != "" {
			c.GIDIndex = -1
		}
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "Failed to modify QP to RTR") ||
		!strings.Contains(errs[0].Error(), "hint: the other side was started without -g") {
		t.Errorf("server: %v; want the RTR failure and a hint about the other side's -g", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "hint: this side was started without -g") {
		t.Errorf("client: %v; want a hint about this side's -g", errs[1])
	}
}
