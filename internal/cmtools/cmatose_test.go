package cmtools

import (
	"fmt"
	"testing"
)

var (
	cmatoseServerLines = []string{"cmatose: starting server", "initiating data transfers", "completing sends",
		"receiving data transfers", "data transfers complete", "cmatose: disconnecting", "disconnected",
		"test complete", "return status 0"}
	cmatoseClientLines = []string{"cmatose: starting client", "cmatose: connecting", "receiving data transfers",
		"sending replies", "data transfers complete", "test complete", "return status 0"}
	udaddyServerLines = []string{"udaddy: starting server", "receiving data transfers", "sending replies",
		"data transfers complete", "test complete", "return status 0"}
	udaddyClientLines = []string{"udaddy: starting client", "udaddy: connecting", "initiating data transfers",
		"receiving data transfers", "data transfers complete", "test complete", "return status 0"}
)

// TestCmatoseProcesses: ucmatose server and client as two processes,
// four connections of 100 messages of 1 KiB (the interop checklist's
// second run).
func TestCmatoseProcesses(t *testing.T) {
	s, srv := startServer(t, "ucmatose", "-c", "4", "-C", "100", "-S", "1024")
	code, out, errOut := run(t, "ucmatose", true, "-s", srv.String(), "-c", "4", "-C", "100", "-S", "1024")
	if code != 0 {
		t.Fatalf("client exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "client stdout", out, cmatoseClientLines...)
	wantLines(t, "client stderr", errOut)
	code, out, errOut = s.wait(t)
	if code != 0 {
		t.Fatalf("server exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "server stdout", out, cmatoseServerLines...)
	wantLines(t, "server stderr", errOut)
}

// TestCmatose: in this process, on two devices: defaults, several
// connections, no messages, -m (migration to a new event channel), the IB
// port space.
func TestCmatose(t *testing.T) {
	withMigrate := func(l []string, before string) []string {
		var out []string
		for _, s := range l {
			if s == before {
				out = append(out, "migrating to new event channel")
			}
			out = append(out, s)
		}
		return out
	}
	for _, c := range []struct {
		name     string
		args     []string
		srv, cli []string
	}{
		{"defaults", nil, cmatoseServerLines, cmatoseClientLines},
		{"8 connections", []string{"-c", "8", "-C", "50", "-S", "4096"}, cmatoseServerLines, cmatoseClientLines},
		{"no messages", []string{"-C", "0"},
			[]string{"cmatose: starting server", "cmatose: disconnecting", "disconnected", "test complete", "return status 0"},
			[]string{"cmatose: starting client", "cmatose: connecting", "test complete", "return status 0"}},
		{"migrate", []string{"-m", "-c", "2"}, withMigrate(cmatoseServerLines, "cmatose: disconnecting"),
			withMigrate(cmatoseClientLines, "test complete")},
		{"IB port space", []string{"-P", "ib"}, cmatoseServerLines, cmatoseClientLines},
		{"TOS and ACK timeout", []string{"-t", "0x20", "-a", "18"}, cmatoseServerLines, cmatoseClientLines},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli := openDevice(t), openDevice(t)
			port := fmt.Sprint(7400 + portSeq.Add(1))
			s := goTool(t, "ucmatose", append([]string{"-b", srv.String(), "-p", port}, c.args...)...)
			s.waitListen(t)
			code, out, errOut := goTool(t, "ucmatose", append([]string{"-s", srv.String(), "-b", cli.String(), "-p", port}, c.args...)...).wait(t)
			if code != 0 {
				t.Fatalf("client exit %d\n%s%s", code, out, errOut)
			}
			wantLines(t, "client stdout", out, c.cli...)
			wantLines(t, "client stderr", errOut)
			code, out, errOut = s.wait(t)
			if code != 0 {
				t.Fatalf("server exit %d\n%s%s", code, out, errOut)
			}
			wantLines(t, "server stdout", out, c.srv...)
			wantLines(t, "server stderr", errOut)
		})
	}
}

// TestCmatoseRejected: no listener: REJECTED with reason 8, and that is
// the exit status.
func TestCmatoseRejected(t *testing.T) {
	srv, cli := openDevice(t), openDevice(t)
	code, out, errOut := goTool(t, "ucmatose", "-s", srv.String(), "-b", cli.String()).wait(t)
	if code != 8 {
		t.Errorf("exit %d, want 8", code)
	}
	wantLines(t, "stdout", out, "cmatose: starting client", "cmatose: connecting",
		"cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8", "test complete", "return status 8")
	wantLines(t, "stderr", errOut)
}

// TestUdaddyProcesses: udaddy server and client as two processes.
func TestUdaddyProcesses(t *testing.T) {
	s, srv := startServer(t, "udaddy")
	code, out, errOut := run(t, "udaddy", true, "-s", srv.String())
	if code != 0 {
		t.Fatalf("client exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "client stdout", out, udaddyClientLines...)
	wantLines(t, "client stderr", errOut)
	code, out, errOut = s.wait(t)
	if code != 0 {
		t.Fatalf("server exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "server stdout", out, udaddyServerLines...)
	wantLines(t, "server stderr", errOut)
}

// TestUdaddy: in this process, on two devices.
func TestUdaddy(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		srv, cli []string
	}{
		{"defaults", nil, udaddyServerLines, udaddyClientLines},
		{"MTU-sized messages", []string{"-C", "50", "-S", "4096"}, udaddyServerLines, udaddyClientLines},
		{"4 endpoints", []string{"-c", "4", "-C", "20"}, udaddyServerLines, udaddyClientLines},
		{"no messages", []string{"-C", "0"}, []string{"udaddy: starting server", "test complete", "return status 0"},
			[]string{"udaddy: starting client", "udaddy: connecting", "test complete", "return status 0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli := openDevice(t), openDevice(t)
			s := goTool(t, "udaddy", append([]string{"-b", srv.String()}, c.args...)...)
			s.waitListen(t)
			code, out, errOut := goTool(t, "udaddy", append([]string{"-s", srv.String(), "-b", cli.String()}, c.args...)...).wait(t)
			if code != 0 {
				t.Fatalf("client exit %d\n%s%s", code, out, errOut)
			}
			wantLines(t, "client stdout", out, c.cli...)
			wantLines(t, "client stderr", errOut)
			code, out, errOut = s.wait(t)
			if code != 0 {
				t.Fatalf("server exit %d\n%s%s", code, out, errOut)
			}
			wantLines(t, "server stdout", out, c.srv...)
			wantLines(t, "server stderr", errOut)
		})
	}
}

// TestUdaddyErrors: no listener (the SIDR reply says so: UNREACHABLE with
// status 1, as Linux) and a message larger than the MTU.
func TestUdaddyErrors(t *testing.T) {
	srv, cli := openDevice(t), openDevice(t)
	code, out, errOut := goTool(t, "udaddy", "-s", srv.String(), "-b", cli.String()).wait(t)
	if code != 1 {
		t.Errorf("no listener: exit %d, want 1", code)
	}
	wantLines(t, "no listener stdout", out, "udaddy: starting client", "udaddy: connecting",
		"udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1", "test complete", "return status 1")
	wantLines(t, "no listener stderr", errOut)

	code, out, errOut = goTool(t, "udaddy", "-s", srv.String(), "-b", cli.String(), "-S", "5000").wait(t)
	if code != 256-22 {
		t.Errorf("-S 5000: exit %d, want %d", code, 256-22)
	}
	wantLines(t, "-S 5000 stdout", out, "udaddy: starting client", "udaddy: connecting",
		"udaddy: message_size 5000 is larger than active mtu 4096", "test complete", "return status -22")
	wantLines(t, "-S 5000 stderr", errOut)
}

var (
	cmatoseUsageText = []string{"usage: ucmatose", "\t[-s server_address]", "\t[-b bind_address]",
		"\t[-f address_format]", "\t    name, ip, ipv6, or gid", "\t[-P port_space]", "\t    tcp or ib",
		"\t[-c connections]", "\t[-C message_count]", "\t[-S message_size]", "\t[-t type_of_service]",
		"\t[-p port_number]", "\t[-m(igrate)]", "\t[-a ack_timeout]"}
	udaddyUsageText = []string{"usage: udaddy", "\t[-s server_address]", "\t[-b bind_address]",
		"\t[-f address_format]", "\t    name, ip, ipv6, or gid", "\t[-P port_space]", "\t    udp or ipoib",
		"\t[-c connections]", "\t[-C message_count]", "\t[-S message_size]", "\t[-t type_of_service]",
		"\t[-p port_space - 0x111 for UDP (default), 0x2 for IPOIB]"}
	rdmaServerUsageText = []string{"usage: rdma_server", "\t[-s server_address]", "\t[-p port_number]"}
	rdmaClientUsageText = []string{"usage: rdma_client", "\t[-s server_address]", "\t[-p port_number]"}
)

// TestArgs: getopt's messages (opterr = 1) on stderr, the usage on stdout,
// exit 1.
func TestArgs(t *testing.T) {
	for _, c := range []struct {
		tool   string
		args   []string
		out    []string
		errOut []string
	}{
		{"ucmatose", []string{"-x"}, cmatoseUsageText, []string{"ucmatose: invalid option -- 'x'"}},
		{"ucmatose", []string{"-s"}, cmatoseUsageText, []string{"ucmatose: option requires an argument -- 's'"}},
		{"ucmatose", []string{"-f", "hex", "-P", "udp", "-q"}, cmatoseUsageText,
			[]string{"Warning: unknown address format", "Warning: unknown port space format", "ucmatose: invalid option -- 'q'"}},
		{"udaddy", []string{"-m"}, udaddyUsageText, []string{"udaddy: invalid option -- 'm'"}},
		{"udaddy", []string{"-P", "tcp", "-p"}, udaddyUsageText,
			[]string{"Warning: unknown port space format", "udaddy: option requires an argument -- 'p'"}},
		{"rdma_server", []string{"-x"}, rdmaServerUsageText, []string{"rdma_server: invalid option -- 'x'"}},
		{"rdma_client", []string{"-p"}, rdmaClientUsageText, []string{"rdma_client: option requires an argument -- 'p'"}},
	} {
		code, out, errOut := goTool(t, c.tool, c.args...).wait(t)
		if code != 1 {
			t.Errorf("%s %v: exit %d, want 1", c.tool, c.args, code)
		}
		wantLines(t, fmt.Sprintf("%s %v stdout", c.tool, c.args), out, c.out...)
		wantLines(t, fmt.Sprintf("%s %v stderr", c.tool, c.args), errOut, c.errOut...)
	}
}

// TestRdmaServerClientProcesses: rdma_server and rdma_client as two
// processes.
func TestRdmaServerClientProcesses(t *testing.T) {
	s, srv := startServer(t, "rdma_server", "-p", "7472")
	code, out, errOut := run(t, "rdma_client", true, "-s", srv.String(), "-p", "7472")
	if code != 0 {
		t.Fatalf("client exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "client stdout", out, "rdma_client: start", "rdma_client: end 0")
	wantLines(t, "client stderr", errOut)
	code, out, errOut = s.wait(t)
	if code != 0 {
		t.Fatalf("server exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "server stdout", out, "rdma_server: start", "rdma_server: end 0")
	wantLines(t, "server stderr", errOut)
}

// TestRdmaServerClient: in this process (the client has no bind option:
// it reaches the server's device from whichever loopback device the
// route picks), then a client without a server: rdma_connect fails with
// ECONNREFUSED.
func TestRdmaServerClient(t *testing.T) {
	srv := openDevice(t)
	s := goTool(t, "rdma_server", "-s", srv.String(), "-p", "7473")
	s.waitListen(t)
	code, out, errOut := goTool(t, "rdma_client", "-s", srv.String(), "-p", "7473").wait(t)
	if code != 0 {
		t.Fatalf("client exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "client stdout", out, "rdma_client: start", "rdma_client: end 0")
	code, out, errOut = s.wait(t)
	if code != 0 {
		t.Fatalf("server exit %d\n%s%s", code, out, errOut)
	}
	wantLines(t, "server stdout", out, "rdma_server: start", "rdma_server: end 0")

	code, out, errOut = goTool(t, "rdma_client", "-s", srv.String(), "-p", "7474").wait(t)
	if code != 255 {
		t.Errorf("no server: exit %d, want 255", code)
	}
	wantLines(t, "no server stdout", out, "rdma_client: start", "rdma_client: end -1")
	wantLines(t, "no server stderr", errOut, "rdma_connect: Connection refused")
}
