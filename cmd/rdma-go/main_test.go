package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// rdmago runs the program with args and returns its exit status and
// output.
func rdmago(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestLinkAddShowDelete adds soft devices to a config file of the test's
// own and deletes them again, checking the file after each step and the
// errors of each command.
func TestLinkAddShowDelete(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "devices")
	if err := os.WriteFile(cfg, []byte("# soft devices\nrgo7 127.0.0.7 # kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RDMA_GO_CONFIG", cfg)
	t.Setenv("RDMA_GO_DEVICES", "")
	addr := testdev.Addr().String()
	if code, out, errOut := rdmago(t, "link", "add", "rgo9", "type", "rgo", "addr", addr); code != 0 || !strings.Contains(out, "added rgo9 (addr "+addr+") to "+cfg) {
		t.Fatalf("link add: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := rdmago(t, "link", "add", "rgo8", "type", "rgo", "netdev", "lo"); code != 0 || !strings.Contains(out, "added rgo8 (addr 127.0.0.1)") {
		t.Fatalf("link add netdev lo: %d %q %q", code, out, errOut)
	}
	b, _ := os.ReadFile(cfg)
	if want := "# soft devices\nrgo7 127.0.0.7 # kept\nrgo9 " + addr + "\nrgo8 127.0.0.1\n"; string(b) != want {
		t.Fatalf("config after add:\n%s\nwant:\n%s", b, want)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"link", "add", "rgo7", "type", "rgo", "addr", "127.0.0.8"}, "device rgo7 exists already"},
		// A kernel link goes to RDMA netlink; a netdev that does not
		// exist fails there (or where there is no RDMA netlink).
		{[]string{"link", "add", "x", "type", "rxe", "netdev", "nosuch0"}, "link add x type rxe netdev nosuch0: "},
		{[]string{"link", "add", "x", "type", "rgo", "addr", "300.1.1.1"}, "bad address"},
		{[]string{"link", "add", "x", "type", "rgo", "netdev", "nosuch0"}, "netdev nosuch0"},
		{[]string{"link", "add", "x/y", "type", "rgo", "addr", "auto"}, "bad device name"},
		{[]string{"link", "delete", "nosuch"}, "no soft device nosuch in " + cfg},
		{[]string{"link", "delete", "rgo0"}, "RDMA_GO_LOOPBACK=off"},
		{[]string{"link", "show", "nosuch"}, "Wrong device name"},
		{[]string{"link", "frob"}, `Command "frob" is unknown`},
		{[]string{"frob"}, `Object "frob" is unknown`},
	} {
		if code, _, errOut := rdmago(t, tc.args...); code != 1 || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errOut, tc.msg)
		}
	}
	if code, _, errOut := rdmago(t, "link", "del", "rgo9"); code != 0 {
		t.Fatalf("link del: %d %q", code, errOut)
	}
	b, _ = os.ReadFile(cfg)
	if want := "# soft devices\nrgo7 127.0.0.7 # kept\nrgo8 127.0.0.1\n"; string(b) != want {
		t.Fatalf("config after delete:\n%s\nwant:\n%s", b, want)
	}
}

// TestLinkShow lists the devices of the environment: rgo0 on an automatic
// loopback address, and a device on a loopback address of the test's.
func TestLinkShow(t *testing.T) {
	code, out, errOut := rdmago(t, "link", "show")
	if code != 0 || !strings.Contains(out, "link rgo0/1 state ACTIVE physical_state LINK_UP netdev lo type rgo addr ") {
		t.Fatalf("link show: %d %q %q", code, out, errOut)
	}
	code, out, errOut = rdmago(t, "-j", "link", "show", "rgo0/1")
	var links []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &links) != nil || len(links) != 1 {
		t.Fatalf("-j link show rgo0/1: %d %q %q", code, out, errOut)
	}
	l := links[0]
	if l["ifname"] != "rgo0" || l["port"] != 1.0 || l["state"] != "ACTIVE" || l["physical_state"] != "LINK_UP" || l["netdev"] != "lo" || l["type"] != "rgo" {
		t.Errorf("-j link show: %v", l)
	}
	// As iproute2: no such port is a wrong device name, after an empty
	// JSON array.
	if code, out, errOut := rdmago(t, "-j", "-p", "link", "show", "rgo0/2"); code != 1 || out != "[]\n" || errOut != "Wrong device name\n" {
		t.Errorf("-j -p link show rgo0/2 (no such port): %d %q %q", code, out, errOut)
	}
	for _, arg := range []string{"rgo0", "rgo0/x", "rgo0/0", "nosuch/1"} {
		if code, _, errOut := rdmago(t, "link", "show", arg); code != 1 || errOut != "Wrong device name\n" {
			t.Errorf("link show %s: %d %q", arg, code, errOut)
		}
	}
}

// TestPretty checks -p's layout against iproute2's, as rdma -j -p link
// show printed it on Linux 6.1 (two ports made of one).
func TestPretty(t *testing.T) {
	in := `[{"ifindex":0,"ifname":"rxe0","port":1,"netdev_index":2},{"ifindex":1,"ifname":"rxe1","port":1,"netdev_index":3}]`
	want := "[ {\n" +
		"        \"ifindex\": 0,\n        \"ifname\": \"rxe0\",\n        \"port\": 1,\n        \"netdev_index\": 2\n" +
		"    },{\n" +
		"        \"ifindex\": 1,\n        \"ifname\": \"rxe1\",\n        \"port\": 1,\n        \"netdev_index\": 3\n" +
		"    } ]"
	got, err := pretty([]byte(in))
	if err != nil || string(got) != want {
		t.Errorf("pretty:\n%s\nwant:\n%s\n(%v)", got, want, err)
	}
}

// TestDoctor runs the doctor on this machine: its soft device works, so
// no finding is an error and the exit status is 0; -j gives the same
// findings as JSON; a device that does not exist is an error, status 1.
func TestDoctor(t *testing.T) {
	code, out, errOut := rdmago(t, "doctor", "--memlock", "unlimited")
	if code != 0 || !strings.Contains(out, "OK    devices") || !strings.Contains(out, "rgo0      soft, port 1 ACTIVE") {
		t.Fatalf("doctor: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = rdmago(t, "-j", "doctor", "-d", "rgo0")
	var fs []struct{ Check, Level, Message, Fix string }
	if code != 0 || json.Unmarshal([]byte(out), &fs) != nil || len(fs) < 3 {
		t.Fatalf("-j doctor: %d %q", code, out)
	}
	if code, out, _ := rdmago(t, "doctor", "-d", "nosuch"); code != 1 || !strings.Contains(out, `ERROR devices   no device "nosuch"`) {
		t.Errorf("doctor -d nosuch: %d %q", code, out)
	}
	for _, bad := range [][]string{{"doctor", "--memlock", "12Q"}, {"doctor", "--peer", "h:p"}, {"doctor", "extra"}} {
		if code, _, _ := rdmago(t, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"4096": 4096, "64K": 64 << 10, "64m": 64 << 20, "1G": 1 << 30, "unlimited": ^uint64(0)} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1T", "99999999999999999999G"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) succeeded", in)
		}
	}
}

// TestMain lets the test binary be the other process of TestProcessStats.
func TestMain(m *testing.M) {
	if os.Getenv("RDMAGO_STATS_CHILD") == "1" {
		statsChild()
		return
	}
	if role := os.Getenv("RDMAGO_STREAM_CHILD"); role != "" {
		streamChild(role, os.Getenv("RDMAGO_STREAM_ADDR"))
		return
	}
	os.Exit(m.Run())
}

// statsChild opens a soft device with a PD, a CQ, an MR and an RC QP,
// says "ready", and keeps them until its stdin closes.
func statsChild() {
	ctx, err := testdev.Open("stat")
	if err != nil {
		fmt.Println("child:", err)
		os.Exit(1)
	}
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(16, nil)
	pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite)
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		fmt.Println("child:", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s %d\n", ctx.Device().Name(), qp.QPN())
	io.Copy(io.Discard, os.Stdin)
	ctx.Close()
}

// TestProcessStats runs a second process with a soft device open: the
// statistic and resource commands show its counters, objects and QP from
// its statistics socket, and nothing once it has exited.
func TestProcessStats(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RDMAGO_STATS_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var dev string
	var qpn uint32
	if _, err2 := fmt.Sscanf(line, "ready %s %d", &dev, &qpn); err != nil || err2 != nil {
		t.Fatalf("child: %q %v %v", line, err, err2)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	code, out, errOut := rdmago(t, "statistic", "show")
	if code != 0 || !strings.Contains(out, "link "+dev+"/1 sent_pkts 0 rcvd_pkts 0 ") || !strings.Contains(out, " pid "+pid+" comm ") {
		t.Errorf("statistic show: %d %q %q", code, out, errOut)
	}
	code, out, errOut = rdmago(t, "statistic", "qp", "show")
	if want := fmt.Sprintf("link %s/1 lqpn %d qp-type RC pid %s comm ", dev, qpn, pid); code != 0 || !strings.Contains(out, want) || !strings.Contains(out, " sent_pkts 0 ") {
		t.Errorf("statistic qp show: %d %q %q; want %q", code, out, errOut, want)
	}
	code, out, errOut = rdmago(t, "resource", "show")
	if code != 0 || !regexp.MustCompile(`: `+dev+`: pd 1 cq 1 qp 1 mr 1 ctx 1 srq 0 pid `+pid+` comm `).MatchString(out) {
		t.Errorf("resource show: %d %q %q", code, out, errOut)
	}
	code, out, errOut = rdmago(t, "resource", "show", "qp")
	if want := fmt.Sprintf("link %s/1 lqpn %d rqpn 0 type RC state RESET rq-psn 0 sq-psn 0 pid %s comm ", dev, qpn, pid); code != 0 || !strings.Contains(out, want) {
		t.Errorf("resource show qp: %d %q %q; want %q", code, out, errOut, want)
	}
	code, out, _ = rdmago(t, "-j", "resource", "show", "qp")
	var qps []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &qps) != nil || len(qps) != 1 || qps[0]["lqpn"] != float64(qpn) || qps[0]["pid"] != float64(cmd.Process.Pid) {
		t.Errorf("-j resource show qp: %d %q", code, out)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if code, out, _ := rdmago(t, "resource", "show", "qp"); code != 0 || strings.Contains(out, "pid "+pid) {
		t.Errorf("resource show qp after the process exited: %d %q", code, out)
	}
	ents, _ := os.ReadDir(filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "rdma-go"))
	for _, e := range ents {
		if e.Name() == pid+".sock" {
			t.Errorf("the exited process's socket %s is still there", e.Name())
		}
	}

	// A killed process leaves its socket; the next command removes it.
	kill := exec.Command(os.Args[0], "-test.run=^$")
	kill.Env = cmd.Env
	kin, _ := kill.StdinPipe()
	kout, _ := kill.StdoutPipe()
	if err := kill.Start(); err != nil {
		t.Fatal(err)
	}
	defer kin.Close()
	if l, err := bufio.NewReader(kout).ReadString('\n'); err != nil || !strings.HasPrefix(l, "ready ") {
		t.Fatalf("second child: %q %v", l, err)
	}
	kill.Process.Kill()
	kill.Wait()
	sock := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "rdma-go", strconv.Itoa(kill.Process.Pid)+".sock")
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("a killed process's socket: %v (expected it left behind)", err)
	}
	rdmago(t, "resource", "show")
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed process's socket is still there after resource show: %v", err)
	}
}
