package perftest

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/internal/version"
)

// twoDevices opens two soft devices on loopback addresses that no other
// test process uses (testdev), kept open until the test ends, and returns
// their names.
func twoDevices(t *testing.T) (string, string) {
	t.Helper()
	return testdev.Device(t, "pt").Device().Name(), testdev.Device(t, "pt").Device().Name()
}

type pairResult struct {
	srvOut, srvErr, cliOut, cliErr string
	srvCode, cliCode               int
}

// runPair runs a server and a client of test tt in this process over two
// loopback devices, with args on both sides, bounded by a deadline.
func runPair(t *testing.T, tt Test, args ...string) pairResult {
	t.Helper()
	d1, d2 := twoDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ready := make(chan string, 1)
	var r pairResult
	var wg sync.WaitGroup
	var so, se, co, ce bytes.Buffer
	wg.Add(1)
	go func() {
		defer wg.Done()
		sargs := append([]string{"-d", d1, "-p", "0"}, args...)
		r.srvCode = Run(ctx, tt, tt.Name(), sargs, &so, &se, Options{Ready: func(a string) { ready <- a }})
		select {
		case ready <- "":
		default:
		}
	}()
	var addr string
	select {
	case addr = <-ready:
	case <-ctx.Done():
		t.Fatal("server did not listen")
	}
	if addr == "" {
		wg.Wait()
		t.Fatalf("server failed (%d): %s%s", r.srvCode, so.String(), se.String())
	}
	_, port, _ := net.SplitHostPort(addr)
	cargs := append([]string{"-d", d2, "-p", port}, args...)
	cargs = append(cargs, "127.0.0.1")
	r.cliCode = Run(ctx, tt, tt.Name(), cargs, &co, &ce, Options{})
	wg.Wait()
	r.srvOut, r.srvErr, r.cliOut, r.cliErr = so.String(), se.String(), co.String(), ce.String()
	if r.srvCode != 0 || r.cliCode != 0 {
		t.Fatalf("server %d client %d\n--- server stdout\n%s--- server stderr\n%s--- client stdout\n%s--- client stderr\n%s",
			r.srvCode, r.cliCode, r.srvOut, r.srvErr, r.cliOut, r.cliErr)
	}
	return r
}

var (
	bwRow  = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +(\d+\.\d\d) +(\d+\.\d\d) *\t\t   (\d+\.\d{6})$`)
	latRow = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +(\d+\.\d\d) +(\d+\.\d\d) +(\d+\.\d\d) +\t +(\d+\.\d\d) +\t(\d+\.\d\d) *\t\t(\d+\.\d\d) *\t\t(\d+\.\d\d) *$`)
)

func checkRows(t *testing.T, who, out string, re *regexp.Regexp, size, iters string, n int) {
	t.Helper()
	m := re.FindAllStringSubmatch(out, -1)
	if len(m) != n {
		t.Fatalf("%s: %d result rows, want %d:\n%s", who, len(m), n, out)
	}
	for _, row := range m {
		if size != "" && row[1] != size || row[2] != iters {
			t.Fatalf("%s: row %q, want size %s iterations %s", who, row[0], size, iters)
		}
	}
}

func TestPairs(t *testing.T) {
	cases := []struct {
		tt                 Test
		size               string
		srvRows, cliRows   int
		srvIters, cliIters string
	}{
		{Test{Send, BW}, "65536", 1, 1, "200", "200"},
		{Test{Write, BW}, "65536", 1, 1, "200", "200"},
		{Test{Read, BW}, "65536", 1, 1, "200", "200"},
		{Test{Atomic, BW}, "8", 1, 1, "200", "200"},
		{Test{Send, LAT}, "2", 1, 1, "200", "200"},
		{Test{Write, LAT}, "2", 1, 1, "200", "200"},
		{Test{Read, LAT}, "2", 0, 1, "200", "200"},
		{Test{Atomic, LAT}, "8", 0, 1, "200", "200"},
	}
	for _, c := range cases {
		t.Run(c.tt.Name(), func(t *testing.T) {
			r := runPair(t, c.tt, "-n", "200")
			re := bwRow
			if c.tt.Kind == LAT {
				re = latRow
			}
			checkRows(t, "server", r.srvOut, re, c.size, c.srvIters, c.srvRows)
			checkRows(t, "client", r.cliOut, re, c.size, c.cliIters, c.cliRows)
			for _, out := range []string{r.srvOut, r.cliOut} {
				if !strings.Contains(out, " local address: LID 0000 QPN 0x") || !strings.Contains(out, " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:") {
					t.Fatalf("address lines missing:\n%s", out)
				}
			}
			if !strings.Contains(r.srvOut, "\n************************************\n* Waiting for client to connect... *\n") {
				t.Fatalf("server output starts %q", r.srvOut[:min(len(r.srvOut), 60)])
			}
		})
	}
}

func TestPairVariants(t *testing.T) {
	t.Run("write_bw -q 4 -l 4 --report_gbits", func(t *testing.T) {
		r := runPair(t, Test{Write, BW}, "-n", "200", "-q", "4", "-l", "4", "--report_gbits")
		checkRows(t, "client", r.cliOut, regexp.MustCompile(`(?m)^ (\d+) +(\d+) +(\d+\.\d+) +`), "65536", "800", 1)
		if !strings.Contains(r.cliOut, "BW peak[Gb/sec]") || !strings.Contains(r.cliOut, "Post List BW Test") {
			t.Fatalf("output:\n%s", r.cliOut)
		}
	})
	t.Run("send_bw -b", func(t *testing.T) {
		r := runPair(t, Test{Send, BW}, "-n", "200", "-b", "-s", "4096")
		checkRows(t, "server", r.srvOut, bwRow, "4096", "200", 1)
		checkRows(t, "client", r.cliOut, bwRow, "4096", "200", 1)
	})
	t.Run("write_bw -b", func(t *testing.T) {
		r := runPair(t, Test{Write, BW}, "-n", "100", "-b")
		checkRows(t, "server", r.srvOut, bwRow, "65536", "100", 1)
		checkRows(t, "client", r.cliOut, bwRow, "65536", "100", 1)
	})
	t.Run("send_bw -a", func(t *testing.T) {
		r := runPair(t, Test{Send, BW}, "-n", "5", "-a")
		checkRows(t, "client", r.cliOut, bwRow, "", "5", 23)
		checkRows(t, "server", r.srvOut, bwRow, "", "5", 23)
	})
	t.Run("write_lat -a", func(t *testing.T) {
		r := runPair(t, Test{Write, LAT}, "-n", "5", "-a")
		checkRows(t, "client", r.cliOut, latRow, "", "5", 23)
		checkRows(t, "server", r.srvOut, latRow, "", "5", 23)
	})
	t.Run("read_bw -a", func(t *testing.T) {
		r := runPair(t, Test{Read, BW}, "-n", "5", "-a", "-o", "4")
		checkRows(t, "client", r.cliOut, bwRow, "", "5", 23)
		// The server prints the client's last row.
		checkRows(t, "server", r.srvOut, bwRow, "8388608", "5", 1)
		if !strings.Contains(r.cliOut, " OUT 0x04 RKey ") {
			t.Fatalf("-o 4 not advertised:\n%s", r.cliOut)
		}
	})
	t.Run("atomic_bw CMP_AND_SWAP -D 1", func(t *testing.T) {
		r := runPair(t, Test{Atomic, BW}, "-A", "CMP_AND_SWAP", "-D", "1")
		if !strings.Contains(r.cliOut, "Atomic CMP_AND_SWAP BW Test") {
			t.Fatalf("output:\n%s", r.cliOut)
		}
		m := regexp.MustCompile(`(?m)^ 8 +(\d+) +0\.00 +`).FindStringSubmatch(r.cliOut)
		if m == nil || m[1] == "0" {
			t.Fatalf("duration row:\n%s", r.cliOut)
		}
	})
	t.Run("send_lat -D 1", func(t *testing.T) {
		r := runPair(t, Test{Send, LAT}, "-D", "1")
		if !strings.Contains(r.cliOut, ResultFmtLatDur) || !regexp.MustCompile(`(?m)^ 2 +\d+ +\d+\.\d\d +\d+\.\d\d *\n`).MatchString(r.cliOut) {
			t.Fatalf("output:\n%s", r.cliOut)
		}
	})
	t.Run("read_lat --output=latency -H", func(t *testing.T) {
		r := runPair(t, Test{Read, LAT}, "-n", "20", "--output=latency", "-H")
		if !regexp.MustCompile(`(?m)^#, usec\n1, [0-9.e+]+\n`).MatchString(r.cliOut) ||
			!regexp.MustCompile(`(?m)^\d+\.\d{6}\n\z`).MatchString(r.cliOut) {
			t.Fatalf("output:\n%q", r.cliOut)
		}
	})
	t.Run("write_bw --dont_xchg_versions", func(t *testing.T) {
		r := runPair(t, Test{Write, BW}, "-n", "50", "--dont_xchg_versions", "-s", "1K")
		checkRows(t, "client", r.cliOut, bwRow, "1024", "50", 1)
		checkRows(t, "server", r.srvOut, bwRow, "1024", "50", 1)
	})
	t.Run("send_bw -e -Q 10", func(t *testing.T) {
		r := runPair(t, Test{Send, BW}, "-n", "200", "-e", "-s", "64", "-Q", "10")
		checkRows(t, "client", r.cliOut, bwRow, "64", "200", 1)
		if !strings.Contains(r.cliOut, " Test with events. Using pt") || !strings.Contains(r.cliOut, " CQ Moderation   : 10\n") {
			t.Fatalf("output:\n%s", r.cliOut)
		}
	})
	t.Run("send_bw UD", func(t *testing.T) {
		r := runPair(t, Test{Send, BW}, "-n", "200", "-c", "UD")
		checkRows(t, "client", r.cliOut, bwRow, "4096", "200", 1)
	})
	t.Run("send_lat UC", func(t *testing.T) {
		r := runPair(t, Test{Send, LAT}, "-n", "100", "-c", "UC")
		checkRows(t, "client", r.cliOut, latRow, "2", "100", 1)
	})
	t.Run("write_bw --json", func(t *testing.T) {
		r := runPair(t, Test{Write, BW}, "-n", "100", "--json")
		var v map[string]any
		if err := json.Unmarshal([]byte(r.cliOut), &v); err != nil {
			t.Fatalf("client JSON: %v\n%s", err, r.cliOut)
		}
		rows, _ := v["results"].([]any)
		env, _ := v["environment"].(map[string]any)
		if len(rows) != 1 || env["go_version"] == "" || v["tool"] != "ib_write_bw" || v["mtu"] == nil {
			t.Fatalf("client JSON %v", v)
		}
		if err := json.Unmarshal([]byte(r.srvOut), &v); err != nil {
			t.Fatalf("server JSON: %v\n%s", err, r.srvOut)
		}
	})
}

func TestArgumentErrors(t *testing.T) {
	cases := []struct {
		tt     Test
		args   []string
		stdout string
		stderr string
	}{
		{Test{Write, BW}, []string{"-V"}, "Version: 6.06\n" + version.Line() + "\n", ""},
		{Test{Write, BW}, []string{"-n", "3"}, "", " Iteration num should be between 5 and 100000000\n Parser function exited with Error\n"},
		{Test{Write, BW}, []string{"-n", "12x"}, "", " Iteration num argument 12x should be int\n Parser function exited with Error\n"},
		{Test{Write, BW}, []string{"-x", "65"}, "", " Gid index should be between 0 and 64\n Parser function exited with Error\n"},
		{Test{Write, BW}, []string{"-Q", "0"}, "", " CQ moderation should be between 1 and 1024\n Parser function exited with Error\n"},
		{Test{Write, LAT}, []string{"-q", "2"}, "", " Multiple QPs only available on bw tests\n Parser function exited with Error\n"},
		{Test{Write, BW}, []string{"-e"}, "", " Events feature not available on WRITE verb\n Parser function exited with Error\n"},
		{Test{Send, LAT}, []string{"-b"}, "", " Bidirectional is only available in BW test\n Parser function exited with Error\n"},
		{Test{Read, BW}, []string{"-c", "UC"}, "", " UC connection not possible in READ/ATOMIC verbs\n"},
		{Test{Write, BW}, []string{"-c", "UD"}, "", " UD connection only possible in SEND verb\n"},
		{Test{Write, BW}, []string{"-c", "FOO"}, "", " Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}\n"},
		{Test{Atomic, BW}, []string{"-s", "16"}, ResultLine + "Message size cannot be changed for Atomic tests \n", ""},
		{Test{Atomic, LAT}, []string{"-A", "SWAP"}, "", " Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}\n"},
		{Test{Write, BW}, []string{"-L", "3"}, " Hop limit only valid for RawEth QP \n", ""},
		{Test{Write, BW}, []string{"-T", "3"}, " TOS only valid for rdma_cm based QP and RawEth QP \n", ""},
		{Test{Write, BW}, []string{"--output=foo"}, "", " Invalid verbosity level output flag. Please use bandwidth, latency, message_rate\n Parser function exited with Error\n"},
		{Test{Write, LAT}, []string{"--output=bandwidth"}, ResultLine, " Output verbosity level for LAT can be: latency\n"},
		{Test{Write, BW}, []string{"-n", "10", "-l", "3"}, ResultLine, "Number of iterations must be a multiple of post list size\n"},
		{Test{Write, BW}, []string{"-D", "4", "-f", "2"}, ResultLine, "please check that DURATION > 2*MARGIN\n"},
		{Test{Write, BW}, []string{"a", "b"}, "", " Invalid Command line. Please check command rerun \n Parser function exited with Error\n"},
		{Test{Write, BW}, []string{"-R"}, "", " -R/--rdma_cm is not supported by ib_write_bw (rdma-go): connecting QPs with RDMA CM is not supported yet (use the default TCP exchange)\n Parser function exited with Error\n"},
		{Test{Send, BW}, []string{"--use-srq"}, "", " --use-srq is not supported by ib_send_bw (rdma-go): shared receive queues are not wired into the perftest tools yet\n Parser function exited with Error\n"},
		{Test{Write, BW}, []string{"--png=x.png"}, "", " --png needs -a (a chart of the size sweep)\n"},
	}
	for _, c := range cases {
		var o, e bytes.Buffer
		code := Run(context.Background(), c.tt, c.tt.Name(), c.args, &o, &e, Options{Plot: func(string, *Result) error { return nil }})
		if code != 1 || o.String() != c.stdout || e.String() != c.stderr {
			t.Errorf("%s %v: status %d\nstdout %q\nwant   %q\nstderr %q\nwant   %q", c.tt.Name(), c.args, code, o.String(), c.stdout, e.String(), c.stderr)
		}
	}
	// Unknown options: getopt's message, perftest's, then the usage.
	var o, e bytes.Buffer
	if code := Run(context.Background(), Test{Send, BW}, "ib_send_bw", []string{"--bogus"}, &o, &e, Options{}); code != 1 ||
		e.String() != "ib_send_bw: unrecognized option '--bogus'\n Invalid Command or flag.\n Please check command line and run again.\n\n Parser function exited with Error\n" ||
		!strings.HasPrefix(o.String(), "Usage:\n  ib_send_bw            start a server") {
		t.Errorf("--bogus: %d %q %q", code, e.String(), o.String()[:min(60, o.Len())])
	}
	o.Reset()
	e.Reset()
	if code := Run(context.Background(), Test{Read, LAT}, "ib_read_lat", []string{"-h"}, &o, &e, Options{}); code != 1 || e.Len() != 0 ||
		!strings.Contains(o.String(), "  -o, --outs=<num>  num of outstanding read/atom(default max of device)\n") {
		t.Errorf("-h: %d %q", code, e.String())
	}
	o.Reset()
	e.Reset()
	if code := Run(context.Background(), Test{Write, BW}, "ib_write_bw", []string{"-d", "nosuchdev"}, &o, &e, Options{}); code != 1 ||
		e.String() != "IB device nosuchdev not found\n Unable to find the Infiniband/RoCE device\n" {
		t.Errorf("bad device: %d %q", code, e.String())
	}
}

func TestDefaults(t *testing.T) {
	for _, tt := range allTests {
		c, _, done := Parse(tt, "", nil, &bytes.Buffer{}, &bytes.Buffer{})
		if done {
			t.Fatalf("%s: defaults do not parse", tt.Name())
		}
		wantIters, wantSize, wantTx := 1000, uint64(65536), 128
		if tt == (Test{Write, BW}) {
			wantIters = 5000
		}
		if tt.Kind == LAT {
			wantSize, wantTx = 2, 1
		}
		if tt.Verb == Atomic {
			wantSize = 8
		}
		if c.Iters != wantIters || c.Size != wantSize || c.TxDepth != wantTx || c.Port != 18515 || c.GIDIndex != -1 {
			t.Errorf("%s: %+v", tt.Name(), c)
		}
		if tt.Kind == BW && tt.Verb != Atomic && c.CQMod != 1 { // 65536 > 8192 forces CQ moderation off
			t.Errorf("%s: cq_mod %d", tt.Name(), c.CQMod)
		}
	}
	// Prefixes of long options and clustered short ones work as in C.
	c, _, done := Parse(Test{Write, BW}, "", []string{"--iter", "10", "-bN", "--report_g", "--size=4K", "host"}, &bytes.Buffer{}, &bytes.Buffer{})
	if done || c.Iters != 10 || !c.Duplex || !c.NoPeak || !c.Gbits || c.Size != 4096 || c.Host != "host" || c.CQMod != 10 {
		t.Fatalf("parsed %+v", c)
	}
}
