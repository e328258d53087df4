package cmtools

import (
	"fmt"
	"strings"
	"testing"
)

// pingLines are the lines rping -v prints for count pings of size bytes,
// with prefix ("ping data: " on the client, "server ping data: " on the
// server).
func pingLines(prefix string, count, size int) []string {
	var out []string
	for i := range count {
		out = append(out, prefix+rpingPing(i, size))
	}
	return out
}

// TestRpingPing: the ping data of rping.c: "rdma-ping-N: ", then ASCII
// from 'A' + N mod 58 cycling through 'A'…'z', NUL-terminated at size.
func TestRpingPing(t *testing.T) {
	want := "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
	if got := rpingPing(0, 64); got != want {
		t.Errorf("ping 0:\n%s\nwant\n%s", got, want)
	}
	if got := rpingPing(57, 64); !strings.HasPrefix(got, "rdma-ping-57: zABC") {
		t.Errorf("ping 57: %s", got)
	}
	if got := rpingPing(58, 64); !strings.HasPrefix(got, "rdma-ping-58: ABC") {
		t.Errorf("ping 58: %s", got)
	}
}

// TestRpingProcesses: server and client as two processes, each with its
// own loopback device, as the tool is used: -v output on both sides, -V
// validation, the disconnect lines, exit 0.
func TestRpingProcesses(t *testing.T) {
	s, srv := startServer(t, "rping", "-s", "-v", "-C", "5", "-S", "1000")
	code, out, errOut := run(t, "rping", true, "-c", "-a", srv.String(), "-v", "-V", "-C", "5", "-S", "1000")
	if code != 0 {
		t.Fatalf("client exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "client stdout", out, pingLines("ping data: ", 5, 1000)...)
	wantLines(t, "client stderr", errOut, "client DISCONNECT EVENT...")
	code, out, errOut = s.wait(t)
	if code != 0 {
		t.Fatalf("server exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "server stdout", out, pingLines("server ping data: ", 5, 1000)...)
	wantLines(t, "server stderr", errOut, "server DISCONNECT EVENT...", "wait for RDMA_READ_ADV state 10")
}

// TestRping: server and client in this process on two devices (race
// detector coverage): sizes up to rping's maximum, -q on either side.
func TestRping(t *testing.T) {
	for _, c := range []struct {
		name       string
		size, cnt  int
		srvQ, cliQ bool
	}{
		{"default", 64, 20, false, false},
		{"max size", 65535, 10, false, false},
		{"-q both", 4096, 10, true, true},
		{"-q server", 100, 10, true, false},
		{"-q client", 100, 10, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli := openDevice(t), openDevice(t)
			port := fmt.Sprint(7200 + portSeq.Add(1))
			sargs := []string{"-s", "-a", srv.String(), "-p", port, "-v", "-S", fmt.Sprint(c.size)}
			cargs := []string{"-c", "-I", cli.String(), "-a", srv.String(), "-p", port, "-v", "-V",
				"-S", fmt.Sprint(c.size), "-C", fmt.Sprint(c.cnt)}
			if c.srvQ {
				sargs = append(sargs, "-q")
			}
			if c.cliQ {
				cargs = append(cargs, "-q")
			}
			s := goTool(t, "rping", sargs...)
			s.waitListen(t)
			code, out, errOut := goTool(t, "rping", cargs...).wait(t)
			if code != 0 {
				t.Fatalf("client exit %d\n%s%s", code, out, errOut)
			}
			wantLines(t, "client stdout", out, pingLines("ping data: ", c.cnt, c.size)...)
			wantLines(t, "client stderr", errOut, "client DISCONNECT EVENT...")
			code, out, errOut = s.wait(t)
			if code != 0 {
				t.Fatalf("server exit %d\n%s%s", code, out, errOut)
			}
			wantLines(t, "server stdout", out, pingLines("server ping data: ", c.cnt, c.size)...)
			wantLines(t, "server stderr", errOut, "server DISCONNECT EVENT...", "wait for RDMA_READ_ADV state 10")
		})
	}
}

// TestRpingPersistent: -P serves clients one after another and at the
// same time, and keeps running.
func TestRpingPersistent(t *testing.T) {
	srv := openDevice(t)
	port := "7300"
	s := goTool(t, "rping", "-s", "-P", "-a", srv.String(), "-p", port, "-v")
	s.waitListen(t)
	client := func() *inproc {
		return goTool(t, "rping", "-c", "-I", openDevice(t).String(), "-a", srv.String(), "-p", port, "-V", "-C", "10")
	}
	for round, n := range []int{1, 3} {
		var cs []*inproc
		for range n {
			cs = append(cs, client())
		}
		for i, c := range cs {
			if code, out, errOut := c.wait(t); code != 0 {
				t.Fatalf("round %d client %d: exit %d\n%s%s", round, i, code, out, errOut)
			}
		}
	}
	select {
	case <-s.done:
		t.Fatalf("persistent server exited: %d\n%s%s", s.code, s.stdout.String(), s.stderr.String())
	default:
	}
	s.cancel()
	_, out, errOut := s.wait(t)
	if n := strings.Count(out, "server ping data: "); n != 40 {
		t.Errorf("%d server ping data lines, want 40:\n%s", n, out)
	}
	if n := strings.Count(errOut, "server DISCONNECT EVENT..."); n != 4 {
		t.Errorf("%d disconnects, want 4:\n%s", n, errOut)
	}
}

// TestRpingRejected: no listener: the REQ is rejected with reason 8 and
// rping prints what rping.c prints and exits 255.
func TestRpingRejected(t *testing.T) {
	srv, cli := openDevice(t), openDevice(t)
	code, out, errOut := goTool(t, "rping", "-c", "-I", cli.String(), "-a", srv.String(), "-C", "1").wait(t)
	if code != 255 {
		t.Errorf("exit %d, want 255", code)
	}
	wantLines(t, "stdout", out)
	wantLines(t, "stderr", errOut, "cma event RDMA_CM_EVENT_REJECTED, error 8", "wait for CONNECTED state 4",
		"connect error -1")
}

var rpingUsageText = []string{
	"rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]",
	"rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]",
	"\t-c\t\tclient side",
	"\t-I\t\tSource address to bind to for client.",
	"\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0",
	"\t-v\t\tdisplay ping data to stdout",
	"\t-V\t\tvalidate ping data",
	"\t-d\t\tdebug printfs",
	"\t-S size \tping data size",
	"\t-C count\tping count times",
	"\t-a addr\t\taddress",
	"\t-p port\t\tport",
	"\t-P\t\tpersistent server mode allowing multiple connections",
	"\t-q\t\tuse self-created, self-modified QP",
}

// TestRpingArgs: usage and argument errors, with rping's opterr = 0 (no
// getopt messages) and EINVAL (22) as the exit status.
func TestRpingArgs(t *testing.T) {
	for _, c := range []struct {
		args    []string
		code    int
		out     []string
		errOut  []string
		comment string
	}{
		{nil, 22, rpingUsageText, nil, "neither -s nor -c"},
		{[]string{"-x"}, 22, rpingUsageText, nil, "unknown option, silently"},
		{[]string{"-s", "-t", "5"}, 22, rpingUsageText, nil, "-t has no handler"},
		{[]string{"-s", "-S"}, 22, rpingUsageText, nil, "missing argument"},
		{[]string{"-c", "-S", "25"}, 22, nil, []string{"Invalid size 25 (valid range is 26 to 65536)"}, ""},
		{[]string{"-c", "-S", "65536"}, 22, nil, []string{"Invalid size 65536 (valid range is 26 to 65536)"}, ""},
		{[]string{"-s", "-C", "-1"}, 22, nil, []string{"Invalid count -1"}, ""},
		{[]string{"-S", "10", "-x"}, 22, rpingUsageText, []string{"Invalid size 10 (valid range is 26 to 65536)"},
			"options before the bad one are processed"},
	} {
		code, out, errOut := goTool(t, "rping", c.args...).wait(t)
		if code != c.code {
			t.Errorf("rping %v (%s): exit %d, want %d", c.args, c.comment, code, c.code)
		}
		wantLines(t, fmt.Sprintf("rping %v stdout", c.args), out, c.out...)
		wantLines(t, fmt.Sprintf("rping %v stderr", c.args), errOut, c.errOut...)
	}
}

// TestNoDevice: with no RDMA device at all, each tool fails as the C tool
// does (docs/spec/tools.md §0.4).
func TestNoDevice(t *testing.T) {
	for _, c := range []struct {
		tool   string
		args   []string
		code   int
		out    []string
		errOut []string
	}{
		{"rping", []string{"-s"}, 19, nil, []string{"No RDMA devices were detected"}},
		{"rping", []string{"-c", "-a", "127.0.0.1"}, 19, nil, []string{"No RDMA devices were detected"}},
		{"ucmatose", nil, 1, nil, []string{"No RDMA devices were detected"}},
		{"ucmatose", []string{"-s", "127.0.0.1"}, 1, nil, []string{"No RDMA devices were detected"}},
		{"udaddy", nil, 1, nil, []string{"No RDMA devices were detected"}},
		{"rdma_server", nil, 255, []string{"rdma_server: start", "rdma_getaddrinfo: Bad value for ai_flags", "rdma_server: end -1"}, nil},
		{"rdma_client", nil, 255, []string{"rdma_client: start", "rdma_getaddrinfo: Bad value for ai_flags", "rdma_client: end -1"}, nil},
	} {
		code, out, errOut := run(t, c.tool, false, c.args...)
		if code != c.code {
			t.Errorf("%s %v: exit %d, want %d", c.tool, c.args, code, c.code)
		}
		wantLines(t, c.tool+" stdout", out, c.out...)
		wantLines(t, c.tool+" stderr", errOut, c.errOut...)
	}
}
