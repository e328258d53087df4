package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// perfquery runs the tool with args and returns its status and outputs.
func perfquery(args ...string) (rc int, stdout, stderr string) {
	var out, errb bytes.Buffer
	rc = run(append([]string{"perfquery"}, args...), &out, &errb)
	return rc, out.String(), errb.String()
}

// counterNames are the lines of a PortCounters dump, in order.
var counterNames = []string{
	"PortSelect", "CounterSelect", "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter",
	"PortRcvErrors", "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards",
	"PortXmitConstraintErrors", "PortRcvConstraintErrors", "CounterSelect2", "LocalLinkIntegrityErrors",
	"ExcessiveBufferOverrunErrors", "QP1Dropped", "VL15Dropped", "PortXmitData", "PortRcvData",
	"PortXmitPkts", "PortRcvPkts", "PortXmitWait",
}

// extLines are the lines of a PortCountersExtended dump from a PMA with
// CapabilityMask 0x200 and CapabilityMask2 0.
var extLines = []string{
	"PortSelect", "CounterSelect", "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts",
	"PortUnicastXmitPkts", "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts",
}

var lineRE = regexp.MustCompile(`^([A-Za-z0-9]+):(\.+)(0x[0-9a-f]+|[0-9]+)$`)

// parseDump checks one dump: the header, then each name in order in
// libibmad's format (the value in column 34), and returns the values.
func parseDump(t *testing.T, out, header string, names []string) map[string]uint64 {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(names)+1 || lines[0] != header {
		t.Fatalf("want %q and %d counter lines, got:\n%s", header, len(names), out)
	}
	vals := map[string]uint64{}
	for i, l := range lines[1:] {
		m := lineRE.FindStringSubmatch(l)
		if m == nil || m[1] != names[i] || len(m[1])+1+len(m[2]) != 33 {
			t.Fatalf("line %d: %q, want %s:<dots to column 33><value>", i+2, l, names[i])
		}
		v, err := strconv.ParseUint(m[3], 0, 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		vals[m[1]] = v
	}
	return vals
}

// counters reads a device's port counters through verbs.
func counters(t *testing.T, c *verbs.Context) verbs.Counters {
	t.Helper()
	n, err := c.QueryPortCounters(1)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// between fails unless lo <= v <= hi.
func between(t *testing.T, what string, v, lo, hi uint64) {
	t.Helper()
	if v < lo || v > hi {
		t.Fatalf("%s = %d, want %d…%d", what, v, lo, hi)
	}
}

// ip returns the device's address as the tool's destination argument.
func ip(c *verbs.Context) string { return c.Device().Addr().String() }

// sendUD moves known traffic: from sends n UD messages of size bytes to a
// UD QP on to, and the test waits until to has received them all.
func sendUD(t *testing.T, from, to *verbs.Context, n, size int) {
	t.Helper()
	const qkey = 0x1234
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type end struct {
		pd *verbs.PD
		cq *verbs.CQ
		qp *verbs.QP
		mr *verbs.MR
	}
	mk := func(c *verbs.Context, buf []byte) *end {
		e := &end{}
		var err error
		if e.pd, err = c.AllocPD(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.pd.Dealloc() })
		if e.cq, err = c.CreateCQ(n, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.cq.Destroy() })
		if e.mr, err = e.pd.RegMR(buf, verbs.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.mr.Dereg() })
		if e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: e.cq, RecvCQ: e.cq,
			Cap: verbs.QPCap{MaxSendWR: uint32(n), MaxRecvWR: uint32(n), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.qp.Destroy() })
		for _, a := range []struct {
			attr verbs.QPAttr
			mask verbs.QPAttrMask
		}{
			{verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1, QKey: qkey},
				verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrQKey},
			{verbs.QPAttr{State: verbs.QPStateRTR}, verbs.QPAttrState},
			{verbs.QPAttr{State: verbs.QPStateRTS}, verbs.QPAttrState | verbs.QPAttrSQPSN},
		} {
			if err := e.qp.Modify(&a.attr, a.mask); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	slot := verbs.GRHLen + size
	rx := mk(to, make([]byte, n*slot))
	tx := mk(from, make([]byte, size))
	for i := range n {
		if err := rx.qp.PostRecv(verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{rx.mr.SGE(i*slot, slot)}}); err != nil {
			t.Fatal(err)
		}
	}
	sidx, err := testdev.GIDIndex(from)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := tx.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{
		DGID: verbs.GIDFromIP(to.Device().Addr()), SGIDIndex: uint8(sidx), HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ah.Destroy() })
	for i := range n {
		if err := tx.qp.PostSend(verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{tx.mr.SGE(0, size)}, AH: ah, RemoteQPN: rx.qp.QPN(), RemoteQKey: qkey}); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(e *end, what string) {
		wc := make([]verbs.WC, n)
		for got := 0; got < n; {
			k, err := e.cq.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wc[:k] {
				if w.Status != verbs.WCSuccess {
					t.Fatalf("%s completion: %v", what, w.Status)
				}
			}
			got += k
			if k == 0 {
				if err := e.cq.Wait(ctx); err != nil {
					t.Fatalf("%s: %d of %d completions: %v", what, got, n, err)
				}
			}
		}
	}
	wait(tx, "send")
	wait(rx, "receive")
}

// TestCounters queries one soft device from another and checks what the
// counters say against the device's own (verbs.Context.QueryPortCounters):
// PortCounters and PortCountersExtended, after known traffic, and the
// resets -R (with and without a mask), -x -R and -r.
func TestCounters(t *testing.T) {
	a, b := testdev.Device(t, "pqa"), testdev.Device(t, "pqb")
	q := []string{"-C", a.Device().Name(), "-t", "5000", ip(b), "1"}
	const header = "# Port counters: Lid 0 port 1 (CapMask: 0x200)"
	const extHeader = "# Port extended counters: Lid 0 port 1 (CapMask: 0x200 CapMask2: 0x0000000)"

	read := func(args ...string) map[string]uint64 {
		t.Helper()
		rc, out, errs := perfquery(append(args, q...)...)
		if rc != 0 || errs != "" {
			t.Fatalf("perfquery %v: status %d, stderr:\n%s", args, rc, errs)
		}
		if len(args) > 0 && args[0] == "-x" {
			return parseDump(t, out, extHeader, extLines)
		}
		return parseDump(t, out, header, counterNames)
	}

	// B's counters bracket what its PMA reports: it reads them after
	// receiving the ClassPortInfo and PortCounters Gets and sending the
	// ClassPortInfo answer, before sending the PortCounters answer (which
	// B counts just after it leaves, so q1 may or may not include it).
	q0 := counters(t, b)
	v1 := read()
	q1 := counters(t, b)
	if v1["PortSelect"] != 1 || v1["CounterSelect"] != 0 || v1["PortXmitWait"] != 0 {
		t.Fatalf("PortSelect %d, CounterSelect %#x, PortXmitWait %d", v1["PortSelect"], v1["CounterSelect"], v1["PortXmitWait"])
	}
	between(t, "PortXmitPkts", v1["PortXmitPkts"], q0.Sent+1, q1.Sent)
	between(t, "PortRcvPkts", v1["PortRcvPkts"], q0.Received+2, q1.Received)
	// Data counters are in units of 4 octets.
	between(t, "PortXmitData", v1["PortXmitData"], q0.SentBytes/4, q1.SentBytes/4)
	between(t, "PortRcvData", v1["PortRcvData"], q0.ReceivedBytes/4, q1.ReceivedBytes/4)

	// Known traffic: B sends n datagrams of size bytes to A.
	const n, size = 50, 1000
	sendUD(t, b, a, n, size)
	q2 := counters(t, b)
	if q2.Sent-q1.Sent < n {
		t.Fatalf("B sent %d packets for %d datagrams", q2.Sent-q1.Sent, n)
	}
	v2 := read()
	q3 := counters(t, b)
	between(t, "PortXmitPkts after traffic", v2["PortXmitPkts"], q2.Sent+1, q3.Sent)
	if d := v2["PortXmitPkts"] - v1["PortXmitPkts"]; d < n+2 {
		t.Fatalf("PortXmitPkts grew by %d, want at least the %d datagrams and 2 MAD answers", d, n)
	}
	if d := v2["PortXmitData"] - v1["PortXmitData"]; d < n*size/4 {
		t.Fatalf("PortXmitData grew by %d units of 4 octets, want at least %d", d, n*size/4)
	}
	between(t, "PortXmitData after traffic", v2["PortXmitData"], q2.SentBytes/4, q3.SentBytes/4)

	// -x: the same counters, 64-bit, with the unicast ones (every packet
	// of a soft device is unicast).
	q4 := counters(t, b)
	x := read("-x")
	q5 := counters(t, b)
	between(t, "extended PortXmitPkts", x["PortXmitPkts"], q4.Sent+1, q5.Sent)
	between(t, "extended PortXmitData", x["PortXmitData"], q4.SentBytes/4, q5.SentBytes/4)
	if x["PortUnicastXmitPkts"] != x["PortXmitPkts"] || x["PortUnicastRcvPkts"] != x["PortRcvPkts"] ||
		x["PortMulticastXmitPkts"] != 0 || x["PortMulticastRcvPkts"] != 0 {
		t.Fatalf("unicast/multicast counters: %v", x)
	}

	// -R 0x1000 clears PortXmitData only; -R clears everything. After a
	// reset the packets counted are those of the MADs since: the Set's
	// answer and the ClassPortInfo answer (a re-send would add more).
	reset := func(args ...string) {
		t.Helper()
		rc, out, errs := perfquery(append(append([]string{"-R"}, args...), q...)...)
		if rc != 0 || out != "" || errs != "" {
			t.Fatalf("perfquery -R %v: status %d, stdout %q, stderr %q", args, rc, out, errs)
		}
	}
	q = append(q, "0x1000")
	reset()
	q = q[:len(q)-1]
	v3 := read()
	if v3["PortXmitData"] >= v2["PortXmitData"] || v3["PortXmitPkts"] < v2["PortXmitPkts"] {
		t.Fatalf("after -R with mask 0x1000: PortXmitData %d (was %d), PortXmitPkts %d (was %d)",
			v3["PortXmitData"], v2["PortXmitData"], v3["PortXmitPkts"], v2["PortXmitPkts"])
	}
	r0 := counters(t, b)
	reset()
	v4 := read()
	r2 := counters(t, b)
	between(t, "PortXmitPkts after -R", v4["PortXmitPkts"], 2, r2.Sent-r0.Sent-1)
	between(t, "PortRcvPkts after -R", v4["PortRcvPkts"], 2, r2.Received-r0.Received-2)
	if v4["PortXmitData"] >= n*size/4 || v4["PortRcvData"] >= v3["PortRcvData"] {
		t.Fatalf("after -R: %v", v4)
	}

	// -x -R clears the extended counters (the same baseline).
	sendUD(t, b, a, n, size)
	if x := read("-x"); x["PortXmitPkts"] < n {
		t.Fatalf("extended PortXmitPkts %d after %d datagrams", x["PortXmitPkts"], n)
	}
	reset("-x")
	if x := read("-x"); x["PortXmitPkts"] >= n || x["PortXmitData"] >= n*size/4 {
		t.Fatalf("after -x -R: %v", x)
	}

	// -r prints the counters, then clears them.
	sendUD(t, b, a, n, size)
	if v := read("-r"); v["PortXmitPkts"] < n {
		t.Fatalf("-r read PortXmitPkts %d after %d datagrams", v["PortXmitPkts"], n)
	}
	if v := read(); v["PortXmitPkts"] >= n {
		t.Fatalf("after -r: PortXmitPkts %d", v["PortXmitPkts"])
	}
}

// TestAllPorts: a soft device's PMA has no AllPortSelect, so -a iterates
// over the ports and prints their sum as port 255; -l -a prints each port;
// -a without a destination is the local port, as in perfquery.
func TestAllPorts(t *testing.T) {
	a, b := testdev.Device(t, "pqa"), testdev.Device(t, "pqb")
	name := a.Device().Name()
	rc, out, errs := perfquery("-C", name, "-a", ip(b))
	if rc != 0 || !regexp.MustCompile(`^ibwarn: \[\d+\] main: Emulating AllPortSelect by iterating through all ports\n$`).MatchString(errs) {
		t.Fatalf("-a: status %d, stderr %q", rc, errs)
	}
	v := parseDump(t, out, "# Port counters: Lid 0 port 255 (CapMask: 0x200)", counterNames)
	if v["PortSelect"] != 255 || v["PortXmitPkts"] == 0 {
		t.Fatalf("-a: %v", v)
	}
	rc, out, errs = perfquery("-C", name, "-l", "-a", ip(a))
	if rc != 0 || errs != "" {
		t.Fatalf("-l -a: status %d, stderr %q", rc, errs)
	}
	if v := parseDump(t, out, "# Port counters: Lid 0 port 1 (CapMask: 0x200)", counterNames); v["PortSelect"] != 1 {
		t.Fatalf("-l -a: %v", v)
	}
	rc, out, errs = perfquery("-C", name, "-a", "-x")
	if rc != 0 || errs != "" {
		t.Fatalf("-a -x on the local port: status %d, stderr %q", rc, errs)
	}
	// The tool's own requests leave from and return to this device.
	if x := parseDump(t, out, "# Port extended counters: Lid 0 port 1 (CapMask: 0x200 CapMask2: 0x0000000)", extLines); x["PortXmitPkts"] < 3 {
		t.Fatalf("local port: %v", x)
	}
}

// TestTimeout: an address where no device listens never answers; after
// three tries of -t ms the tool fails as perfquery does (-e shows the
// retries).
func TestTimeout(t *testing.T) {
	a := testdev.Device(t, "pqa")
	nobody := testdev.Addr().String()
	rc, out, errs := perfquery("-e", "-C", a.Device().Name(), "-t", "30", nobody, "1")
	want := regexp.MustCompile(`^ibwarn: \[\d+\] _do_madrpc: retry 1 \(timeout 30 ms\)
ibwarn: \[\d+\] _do_madrpc: retry 2 \(timeout 30 ms\)
ibwarn: \[\d+\] _do_madrpc: timeout after 3 retries, 90 ms
ibwarn: \[\d+\] _do_madrpc: no answer from QP1 at ::ffff:` + regexp.QuoteMeta(nobody) + ` \(3 tries of 30 ms\).*
ibwarn: \[\d+\] mad_rpc: _do_madrpc failed; dport \(Lid 0 Gid ::ffff:` + regexp.QuoteMeta(nobody) + `\)
$`)
	if rc != 255 || out != "perfquery: iberror: failed: classportinfo query\n" || !want.MatchString(errs) {
		t.Fatalf("status %d, stdout %q, stderr:\n%s", rc, out, errs)
	}
}

// TestErrors: bad options and arguments, attributes and ports the PMA
// does not have, each with perfquery's message and status.
func TestErrors(t *testing.T) {
	a, b := testdev.Device(t, "pqa"), testdev.Device(t, "pqb")
	name := a.Device().Name()
	for _, c := range []struct {
		args   []string
		rc     int
		stdout string // exact, or a regexp when it starts with ^
		stderr string // a regexp
	}{
		{[]string{"--bogus"}, 2, "", `^perfquery: unrecognized option '--bogus'\n\nUsage: perfquery \[options\]`},
		{[]string{"--ext"}, 2, "", `^perfquery: option '--ext' is ambiguous; possibilities: '--extended' '--extended_speeds'\n\n`},
		{[]string{"-t", "abc"}, 255,
			"perfquery: iberror: failed: Invalid timeout \"abc\".  Timeout requires a positive integer value < 2147483647.\n", `^$`},
		{[]string{"-d", "-t", "0"}, 255,
			`^perfquery: iberror: \[pid \d+\] process_opt: failed: Invalid timeout "0"\.`, `^$`},
		{[]string{"-s", "0"}, 255, "perfquery: iberror: failed: cannot resolve SM destination port 0\n", `^$`},
		{[]string{"-C", name, ip(b), "3-1"}, 255, "perfquery: iberror: failed: max port must be greater than min port in range\n", `^$`},
		{[]string{"-C", "nosuchdev"}, 255, "perfquery: iberror: failed: Failed to open 'nosuchdev' port '0'\n",
			`^ibwarn: \[\d+\] mad_rpc_open_port: can't open UMAD port \(nosuchdev:0\)\n$`},
		{[]string{"-C", name, "-P", "2"}, 255, "perfquery: iberror: failed: Failed to open '" + name + "' port '2'\n",
			`^ibwarn: \[\d+\] mad_rpc_open_port: `},
		// RoCE has no LIDs.
		{[]string{"-C", name, "32", "1"}, 255, "perfquery: iberror: failed: can't resolve destination port 32\n",
			`^ibwarn: \[\d+\] resolve_portid_str: 32 is not a GID or IP address`},
		// The device has port 1 only: its PMA answers 0x001C.
		{[]string{"-C", name, ip(b), "2"}, 255, "perfquery: iberror: failed: perfquery\n",
			`^ibwarn: \[\d+\] mad_rpc: ::ffff:[0-9.]+ answered status 0x1c: invalid attribute`},
		{[]string{"-C", name, "-x", ip(b), "2"}, 255, "perfquery: iberror: failed: perfextquery\n", `status 0x1c`},
		{[]string{"-C", name, "-R", ip(b), "2"}, 255, "perfquery: iberror: failed: perf reset\n", `status 0x1c`},
		{[]string{"-C", name, ip(b), "255"}, 255, "perfquery: iberror: failed: AllPortSelect not supported\n", `^$`},
		// Attributes a soft device's PMA does not serve: 0x000C.
		{[]string{"-C", name, "-X", ip(b), "1"}, 255, "perfquery: iberror: failed: cannot query PortXmitDataSL\n",
			`answered status 0xc: method/attribute not supported`},
		{[]string{"-C", name, "-R", "--rcvcc", ip(b), "1"}, 255, "perfquery: iberror: failed: cannot reset PortRcvConCtrl\n", `status 0xc`},
		{[]string{"-d", "-C", name, "-c", ip(b), "1"}, 255,
			`^perfquery: iberror: \[pid \d+\] dump_portsamples_control: failed: sampctlquery\n$`,
			`(?m)^ibwarn: \[\d+\] pma_query_via: lid 0 port 1$`},
	} {
		rc, out, errs := perfquery(c.args...)
		okOut := out == c.stdout
		if strings.HasPrefix(c.stdout, "^") {
			okOut = regexp.MustCompile(c.stdout).MatchString(out)
		}
		if rc != c.rc || !okOut || !regexp.MustCompile(c.stderr).MatchString(errs) {
			t.Errorf("perfquery %s: status %d, stdout %q, stderr %q", strings.Join(c.args, " "), rc, out, errs)
		}
	}
}

// TestUsage: -h prints perfquery's usage (recorded from rdma-core 44.0's
// perfquery -h) on stderr with status 2; -V the version with status 0.
func TestUsage(t *testing.T) {
	want, err := os.ReadFile("testdata/usage.golden")
	if err != nil {
		t.Fatal(err)
	}
	if rc, out, errs := perfquery("-h"); rc != 2 || out != "" || errs != string(want) {
		t.Fatalf("perfquery -h: status %d, stdout %q, stderr:\n%s", rc, out, errs)
	}
	if rc, out, errs := perfquery("-V"); rc != 0 || out != "" || !strings.HasPrefix(errs, "perfquery BUILD VERSION: ") {
		t.Fatalf("perfquery -V: status %d, stdout %q, stderr %q", rc, out, errs)
	}
}

// TestGIDForms: the destination may be an IPv4 address or its GID.
func TestGIDForms(t *testing.T) {
	a, b := testdev.Device(t, "pqa"), testdev.Device(t, "pqb")
	gid := netip.AddrFrom16(b.Device().Addr().As16()).String()
	for _, dst := range []string{ip(b), gid} {
		rc, out, errs := perfquery("-v", "-C", a.Device().Name(), dst, "1")
		prefix := fmt.Sprintf("[%d] dump_perfcounters: PortXmitWait not indicated so ignore this counter\n", os.Getpid())
		if rc != 0 || errs != "" || !strings.HasPrefix(out, prefix) {
			t.Fatalf("perfquery -v %s: status %d, stderr %q, stdout:\n%s", dst, rc, errs, out)
		}
		parseDump(t, strings.TrimPrefix(out, prefix), "# Port counters: Lid 0 port 1 (CapMask: 0x200)", counterNames)
	}
}
