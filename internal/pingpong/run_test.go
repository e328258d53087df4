package pingpong

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// runPair runs a server and a client in this process and returns their output.
func runPair(t *testing.T, kind Kind, mod func(*Config)) (server, client string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := freePort(t)
	var outs [2]bytes.Buffer
	var errs [2]error
	var wg sync.WaitGroup
	for i := range 2 {
		cfg := Defaults(kind)
		cfg.Port, cfg.GIDIndex, cfg.Iters = port, 1, 200
		cfg.Stdout, cfg.Stderr = &outs[i], &outs[i]
		if i == 1 {
			cfg.Host = "127.0.0.1"
		}
		if mod != nil {
			mod(&cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				time.Sleep(100 * time.Millisecond) // let the server listen
			}
			errs[i] = Run(ctx, cfg)
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			t.Fatalf("side %d: %v\n%s", i, e, outs[i].String())
		}
	}
	return outs[0].String(), outs[1].String()
}

var (
	localRE  = regexp.MustCompile(`(?m)^  local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}[,:] GID ::ffff:127\.0\.0\.\d+$`)
	remoteRE = regexp.MustCompile(`(?m)^  remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:127\.0\.0\.\d+$`)
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
