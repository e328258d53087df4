// Command perfquery reads and resets a port's performance counters with
// PerfMgt MADs, as infiniband-diags' perfquery (rdma-core 44.0) does: the
// same options, output, messages and exit statuses — and it works on RoCE,
// where infiniband-diags' cannot (umad sends no GRH, and a soft device has
// no umad at all).
//
// Usage:
//
//	perfquery [options]  [<lid|guid> [[port(s)] [reset_mask]]]
//
// It sends each PerfMgt (class 0x04) Get or Set from a UD QP of its own on
// the local device (-C, port -P; default the first device and its first
// active port) to QP1 of the destination, addressed by a GRH, and waits for
// the GetResp on that QP (package internal/madclient). Without a
// destination it queries the local port itself.
//
// RoCE extension: RoCE has no LIDs and no subnet administrator to resolve a
// GUID, so the destination is a GID or an IP address in place of the LID,
// e.g. perfquery -C rgo0 ::ffff:127.0.0.2 1 or perfquery 198.51.100.2 1;
// a LID or GUID is refused ("can't resolve destination port"). Headers
// name the destination "Lid 0", the LID of every RoCE port. Where a GID
// is given without a port, port 1 is queried (perfquery would send
// PortSelect 0, which an InfiniBand CA's PMA ignores but a soft device's
// refuses). -a emulates AllPortSelect over the local device's ports when
// the destination is the local port, and over port 1 elsewhere: RoCE has
// no SMPs to ask a remote node for its port count.
//
// Options (perfquery's): -x/--extended reads PortCountersExtended;
// -r/--reset_after_read resets the counters after reading them;
// -R/--Reset_only only resets them, reset_mask selecting which
// (CounterSelect; default 0xffff, plus PortXmitWait and QP1Dropped where
// the PMA has them); -a/--all_ports aggregates all ports; -l/--loop_ports
// prints each; -C/--Ca and -P/--Port choose the local device and port;
// -t/--timeout the wait per try in ms (default 1000, 3 tries); -e shows
// the MAD errors, -v more, -d debug messages; -h/--help prints the usage
// (exit 2), -V the version. The other attributes (-X, -S, -D, -E, -T, -c,
// --oprcvcounters, …) are asked for as perfquery does; a PMA that has
// none of them (a soft device's) makes them fail the same way, and this
// tool does not decode them. -z/--config reads CA, Port and timeout from
// an ibdiag.conf file (/etc/infiniband-diags/ibdiag.conf first, if it
// exists); -L, -G, -s and -y are accepted.
//
// Errors end the program as perfquery's do: "perfquery: iberror: failed:
// ..." on standard output and status 255. Among them: a destination with no
// PerfMgt agent — a Linux kernel device such as rxe0, whose MAD layer
// answers status 0x000C — and one that never answers (no device there;
// three tries of -t ms). For both, standard error says which GID and
// what happened, which libibmad only does with -e.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/internal/madclient"
	"github.com/rdma-go/rdma-go/internal/version"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/verbs"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// configFile is infiniband-diags' general configuration, read (when it
// exists) before the options.
var configFile = "/etc/infiniband-diags/ibdiag.conf"

// usage is perfquery's usage text (rdma-core 44.0), printed to stderr.
const usage = `
Usage: perfquery [options]  [<lid|guid> [[port(s)] [reset_mask]]]

Options:
  --extended, -x          show extended port counters
  --xmtsl, -X             show Xmt SL port counters
  --rcvsl, -S             show Rcv SL port counters
  --xmtdisc, -D           show Xmt Discard Details
  --rcverr, -E            show Rcv Error Details
  --extended_speeds, -T   show port extended speeds counters
  --oprcvcounters         show Rcv Counters per Op code
  --flowctlcounters       show flow control counters
  --vloppackets           show packets received per Op code per VL
  --vlopdata              show data received per Op code per VL
  --vlxmitflowctlerrors   show flow control update errors per VL
  --vlxmitcounters        show ticks waiting to transmit counters per VL
  --swportvlcong          show sw port VL congestion
  --rcvcc                 show Rcv congestion control counters
  --slrcvfecn             show SL Rcv FECN counters
  --slrcvbecn             show SL Rcv BECN counters
  --xmitcc                show Xmit congestion control counters
  --vlxmittimecc          show VL Xmit Time congestion control counters
  --smplctl, -c           show samples control
  --all_ports, -a         show aggregated counters
  --loop_ports, -l        iterate through each port
  --reset_after_read, -r  reset counters after read
  --Reset_only, -R        only reset counters
  --config, -z <config>   use config file, default: /etc/infiniband-diags/ibdiag.conf
  --Ca, -C <ca>           Ca name to use
  --Port, -P <port>       Ca port number to use
  --Lid, -L               use LID address argument
  --Guid, -G              use GUID address argument
  --timeout, -t <ms>      timeout in ms
  --sm_port, -s <lid>     SM port lid
  --m_key, -y <key>       M_Key to use in request
  --errors, -e            show send and receive errors
  --verbose, -v           increase verbosity level
  --debug, -d             raise debug level
  --help, -h              help message
  --version, -V           show version

Examples:
  perfquery ` + "\t\t# read local port's performance counters\n" +
	"  perfquery 32 1\t\t# read performance counters from lid 32, port 1\n" +
	"  perfquery -x 32 1\t# read extended performance counters from lid 32, port 1\n" +
	"  perfquery -a 32\t\t# read performance counters from lid 32, all ports\n" +
	"  perfquery -r 32 1\t# read performance counters and reset\n" +
	"  perfquery -x -r 32 1\t# read extended performance counters and reset\n" +
	"  perfquery -R 0x20 1\t# reset performance counters of port 1 only\n" +
	"  perfquery -x -R 0x20 1\t# reset extended performance counters of port 1 only\n" +
	"  perfquery -R -a 32\t# reset performance counters of all ports\n" +
	"  perfquery -R 32 2 0x0fff\t# reset only error counters of port 2\n" +
	"  perfquery -R 32 2 0xf000\t# reset only non-error counters of port 2\n" +
	"  perfquery -a 32 1-10\t# read performance counters from lid 32, port 1-10, aggregate output\n" +
	"  perfquery -l 32 1-10\t# read performance counters from lid 32, port 1-10, output each port\n" +
	"  perfquery -a 32 1,4,8\t# read performance counters from lid 32, port 1, 4, and 8, aggregate output\n" +
	"  perfquery -l 32 1,4,8\t# read performance counters from lid 32, port 1, 4, and 8, output each port\n\n"

// extraQuery is one of the other PerfMgt attributes perfquery can show, in
// the order it tries them.
type extraQuery struct {
	opt  string // the long option
	name string // perfquery's name for it
	attr uint16
}

var extraQueries = []extraQuery{
	{"xmtsl", "PortXmitDataSL", 0x36},
	{"rcvsl", "PortRcvDataSL", 0x37},
	{"xmtdisc", "PortXmitDiscardDetails", 0x16},
	{"rcverr", "PortRcvErrorDetails", 0x15},
	{"extended_speeds", "PortExtendedSpeedsCounters", 0x1F},
	{"oprcvcounters", "PortOpRcvCounters", 0x17},
	{"flowctlcounters", "PortFlowCtlCounters", 0x18},
	{"vloppackets", "PortVLOpPackets", 0x19},
	{"vlopdata", "PortVLOpData", 0x1A},
	{"vlxmitflowctlerrors", "PortVLXmitFlowCtlUpdateErrors", 0x1B},
	{"vlxmitcounters", "PortVLXmitWaitCounters", 0x1C},
	{"swportvlcong", "SwPortVLCongestion", 0x30},
	{"rcvcc", "PortRcvConCtrl", 0x31},
	{"slrcvfecn", "PortSLRcvFECN", 0x32},
	{"slrcvbecn", "PortSLRcvBECN", 0x33},
	{"xmitcc", "PortXmitConCtrl", 0x34},
	{"vlxmittimecc", "PortVLXmitTimeCong", 0x35},
	{"smplctl", "PortSamplesControl", mad.AttrPortSamplesControl},
}

// options is perfquery's option table: its own options, then
// infiniband-diags' common ones less -D (Direct, taken by --xmtdisc) and
// -K.
var options = []getopt.Option{
	{Short: 'x', Long: "extended"}, {Short: 'X', Long: "xmtsl"}, {Short: 'S', Long: "rcvsl"},
	{Short: 'D', Long: "xmtdisc"}, {Short: 'E', Long: "rcverr"}, {Short: 'T', Long: "extended_speeds"},
	{Long: "oprcvcounters"}, {Long: "flowctlcounters"}, {Long: "vloppackets"}, {Long: "vlopdata"},
	{Long: "vlxmitflowctlerrors"}, {Long: "vlxmitcounters"}, {Long: "swportvlcong"}, {Long: "rcvcc"},
	{Long: "slrcvfecn"}, {Long: "slrcvbecn"}, {Long: "xmitcc"}, {Long: "vlxmittimecc"},
	{Short: 'c', Long: "smplctl"}, {Short: 'a', Long: "all_ports"}, {Short: 'l', Long: "loop_ports"},
	{Short: 'r', Long: "reset_after_read"}, {Short: 'R', Long: "Reset_only"},
	{Short: 'z', Long: "config", Arg: getopt.RequiredArg}, {Short: 'C', Long: "Ca", Arg: getopt.RequiredArg},
	{Short: 'P', Long: "Port", Arg: getopt.RequiredArg}, {Short: 'L', Long: "Lid"}, {Short: 'G', Long: "Guid"},
	{Short: 't', Long: "timeout", Arg: getopt.RequiredArg}, {Short: 's', Long: "sm_port", Arg: getopt.RequiredArg},
	{Short: 'y', Long: "m_key", Arg: getopt.RequiredArg}, {Short: 'e', Long: "errors"},
	{Short: 'v', Long: "verbose"}, {Short: 'd', Long: "debug"}, {Short: 'h', Long: "help"},
	{Short: 'V', Long: "version"},
}

// allPorts is PortSelect 0xFF; maxPorts bounds a port list, as perfquery's
// array of 255.
const (
	allPorts = mad.AllPorts
	maxPorts = 255
)

// failure is perfquery's IBEXIT: a message, and the function the C tool
// names in its debug format.
type failure struct{ fn, msg string }

func (f *failure) Error() string { return f.msg }

func fail(fn, format string, a ...any) error {
	return &failure{fn: fn, msg: fmt.Sprintf(format, a...)}
}

// exitStatus ends the program early with a status (usage 2, version 0).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// tool is one run: the options as perfquery keeps them, and the MAD client.
type tool struct {
	out    *bufio.Writer
	stderr io.Writer
	pid    int

	// infiniband-diags' common options.
	ca         string
	caSet      bool
	caPort     int
	timeout    int // ms; 0 is libibmad's default
	debug      int
	verbose    int
	showErrors bool

	// perfquery's.
	extended, all, loop, reset, resetOnly bool
	extra                                 map[string]bool
	port                                  int
	ports                                 []int

	ctx  context.Context
	cl   *madclient.Client
	dev  *verbs.Context
	dst  verbs.GID
	self bool
}

// run is the whole program: args is the command line with argv[0] first.
// It returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	t := &tool{out: bufio.NewWriter(stdout), stderr: stderr, pid: os.Getpid(), extra: map[string]bool{},
		ctx: context.Background()}
	defer t.out.Flush()
	err := t.main(args[1:])
	var f *failure
	var st exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return int(st)
	case errors.As(err, &f):
	default:
		f = &failure{fn: "main", msg: err.Error()}
	}
	// ibexit prints to standard output, and exits with -1.
	if t.debug > 0 {
		fmt.Fprintf(t.out, "perfquery: iberror: [pid %d] %s: failed: %s\n", t.pid, f.fn, f.msg)
	} else {
		fmt.Fprintf(t.out, "perfquery: iberror: failed: %s\n", f.msg)
	}
	return 255
}

// warn prints libibmad's IBWARN line to stderr.
func (t *tool) warn(fn, format string, a ...any) {
	fmt.Fprintf(t.stderr, "ibwarn: [%d] %s: %s\n", t.pid, fn, fmt.Sprintf(format, a...))
}

// errs reports whether libibmad shows MAD errors (-e, -d).
func (t *tool) errs() bool { return t.showErrors || t.debug > 0 }

// main is perfquery's main: options, ports, the local port, the
// destination, ClassPortInfo, then the queries and resets.
func (t *tool) main(args []string) error {
	t.readConfig(configFile)
	p := &getopt.Parser{Prog: "perfquery", Options: options}
	if _, posix := os.LookupEnv("POSIXLY_CORRECT"); posix {
		p.Posix = true
	}
	r, perr := p.Parse(args)
	if r != nil {
		for _, o := range r.Opts {
			if err := t.option(o); err != nil {
				return err
			}
		}
	}
	if perr != nil {
		fmt.Fprintf(t.stderr, "%s\n%s", perr, usage)
		return exitStatus(2)
	}
	argv := r.Args

	mask := uint32(0xffff)
	extMask := ^uint64(0)
	if len(argv) > 1 {
		if err := t.parsePorts(argv[1]); err != nil {
			return err
		}
	}
	if len(argv) > 2 {
		extMask, _, _ = getopt.Strtoul(argv[2], 0)
		mask = uint32(extMask)
	}

	if err := t.open(); err != nil {
		return err
	}
	defer t.close()

	if len(argv) > 0 {
		a, err := netip.ParseAddr(argv[0])
		if err != nil {
			t.warn("resolve_portid_str", "%s is not a GID or IP address: RoCE has no LIDs, and no SA to resolve a GUID", argv[0])
			return fail("main", "can't resolve destination port %s", argv[0])
		}
		t.dst = verbs.GIDFromIP(a.WithZone(""))
		t.self = t.dst == t.cl.GID()
		if len(argv) == 1 && !t.all {
			t.port = 1 // the port a RoCE GID belongs to; see the package comment
		}
	} else {
		t.dst, t.self = t.cl.GID(), true
		t.port = int(t.cl.Port())
	}

	// PerfMgt ClassPortInfo is a required attribute.
	cpi, err := t.pmaQuery(mad.AttrClassPortInfo, t.port)
	if err != nil {
		return fail("main", "classportinfo query")
	}
	capMask := mad.ClassPortInfo(cpi).CapabilityMask()
	capMask2 := mad.ClassPortInfo(cpi).CapabilityMask2()

	allPortsLoop := false
	if capMask&mad.PerfCapAllPortSelect == 0 {
		if !t.all && t.port == allPorts {
			return fail("main", "AllPortSelect not supported")
		}
		allPortsLoop = t.all && t.port == allPorts
	}

	for _, q := range extraQueries {
		if t.extra[q.opt] {
			return t.extraQuery(q, mask, extMask)
		}
	}

	loop := allPortsLoop || (t.loop && (t.all || t.port == allPorts))
	numPorts := 0
	if loop {
		if numPorts, err = t.numPorts(); err != nil {
			return err
		}
		if allPortsLoop && !t.loop {
			t.warn("main", "Emulating AllPortSelect by iterating through all ports")
		}
	}

	if !t.resetOnly {
		var agg aggregate
		var aggExt aggregateExt
		dump := func(port int, aggr bool) error {
			return t.dumpCounters(capMask, capMask2, port, aggr, &agg, &aggExt)
		}
		aggregated := false
		switch {
		case loop:
			aggregated = allPortsLoop && !t.loop
			for i := 1; i <= numPorts; i++ {
				if err := dump(i, aggregated); err != nil {
					return err
				}
			}
		case len(t.ports) > 1:
			aggregated = t.all && !t.loop
			for _, p := range t.ports {
				if err := dump(p, aggregated); err != nil {
					return err
				}
			}
		default:
			if err := dump(t.port, false); err != nil {
				return err
			}
		}
		if aggregated {
			if t.extended {
				fmt.Fprintf(t.out, "# Port extended counters: %s port %d (CapMask: 0x%02X CapMask2: 0x%07X)\n%s",
					t.portStr(), allPorts, capMask, capMask2, dumpPortCountersExt(aggExt.attr(capMask, capMask2), capMask, capMask2))
			} else {
				fmt.Fprintf(t.out, "# Port counters: %s port %d (CapMask: 0x%02X)\n%s",
					t.portStr(), allPorts, capMask, dumpPortCounters(agg.attr()))
			}
		}
		if !t.reset {
			return nil
		}
	}

	// Reset: CounterSelect is the low 16 bits of mask, CounterSelect2
	// the rest.
	if len(argv) <= 2 && !t.extended {
		if capMask&mad.PerfCapPortXmitWait != 0 {
			mask |= 1 << 16
		}
		if capMask&mad.PerfCapQP1Dropped != 0 {
			mask |= 1 << 17
		}
	}
	if t.extended {
		mask |= 0xfff0000
		if capMask&mad.PerfCapPortXmitWait != 0 {
			mask |= 1 << 28
		}
		if capMask&mad.PerfCapQP1Dropped != 0 {
			mask |= 1 << 29
		}
	}
	switch {
	case loop:
		for i := 1; i <= numPorts; i++ {
			if err := t.resetCounters(mask, i); err != nil {
				return err
			}
		}
	case len(t.ports) > 1:
		for _, p := range t.ports {
			if err := t.resetCounters(mask, p); err != nil {
				return err
			}
		}
	default:
		return t.resetCounters(mask, t.port)
	}
	return nil
}

// option handles one option as perfquery's and infiniband-diags' option
// handlers do, in command-line order.
func (t *tool) option(o getopt.Parsed) error {
	switch o.Option.Short {
	case 'x':
		t.extended = true
	case 'a':
		t.all = true
		t.port = allPorts
	case 'l':
		t.loop = true
	case 'r':
		t.reset = true
	case 'R':
		t.resetOnly = true
	case 'z':
		t.readConfig(o.Value)
	case 'h':
		fmt.Fprint(t.stderr, usage)
		return exitStatus(2)
	case 'V':
		fmt.Fprintf(t.stderr, "perfquery BUILD VERSION: %s\n", version.String())
		return exitStatus(0)
	case 'e':
		t.showErrors = true
	case 'v':
		t.verbose++
	case 'd':
		t.debug++
		t.showErrors = true
	case 'C':
		t.ca, t.caSet = o.Value, true
	case 'P':
		n, _, _ := getopt.Strtoul(o.Value, 0)
		t.caPort = int(int32(n))
	case 't':
		n, rest, ok := getopt.Strtol(o.Value, 0)
		if !ok || rest != "" || n <= 0 || n > 1<<31-1 {
			return fail("process_opt", "Invalid timeout \"%s\".  Timeout requires a positive integer value < %d.",
				o.Value, 1<<31-1)
		}
		t.timeout = int(n)
	case 's':
		// The SM's LID: nothing on RoCE uses it, but it is checked as
		// infiniband-diags checks a LID.
		if n, _, _ := getopt.Strtol(o.Value, 0); n < 1 || n > 0xBFFF {
			return fail("process_opt", "cannot resolve SM destination port %s", o.Value)
		}
	case 'y':
		if _, rest, ok := getopt.Strtoul(o.Value, 0); !ok || rest != "" {
			return fail("process_opt", "Bad M_Key")
		}
	case 'L', 'G':
		// LID and GUID destinations do not exist on RoCE; see main.
	default:
		for _, q := range extraQueries {
			if o.Option.Long == q.opt {
				t.extra[q.opt] = true
			}
		}
	}
	return nil
}

// readConfig reads an ibdiag.conf file: CA=, Port= and timeout= lines
// (the rest are for other tools). A missing file is silently ignored.
func (t *tool) readConfig(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "CA"):
			t.ca, t.caSet = val, true
		case strings.HasPrefix(name, "Port"):
			n, _, _ := getopt.Strtoul(val, 0)
			t.caPort = int(int32(n))
		case strings.HasPrefix(name, "timeout"):
			n, _, _ := getopt.Strtoul(val, 0)
			t.timeout = int(int32(n))
		}
	}
}

// parsePorts reads the port(s) argument: one port, a list "1,4,8" or a
// range "1-10".
func (t *tool) parsePorts(s string) error {
	num := func(s string) int {
		n, _, _ := getopt.Strtoul(s, 0)
		return int(int32(n))
	}
	switch {
	case strings.Contains(s, ","):
		for tok := range strings.SplitSeq(s, ",") {
			if tok != "" {
				t.ports = append(t.ports, num(tok))
			}
		}
		if len(t.ports) > 0 {
			t.port = t.ports[0]
		}
	case strings.Contains(s, "-"):
		lo, hi, _ := strings.Cut(s, "-")
		pmin, pmax := num(lo), num(hi)
		if pmin >= pmax {
			return fail("main", "max port must be greater than min port in range")
		}
		for p := pmin; p <= pmax; p++ {
			t.ports = append(t.ports, p)
		}
		t.port = t.ports[0]
	default:
		t.port = num(s)
	}
	if len(t.ports) > maxPorts {
		return fail("main", "too many ports (at most %d)", maxPorts)
	}
	return nil
}

// open opens the local device and the MAD client on its port, where
// perfquery opens its umad port.
func (t *tool) open() error {
	name := "(null)"
	if t.caSet {
		name = t.ca
	}
	failed := func(format string, a ...any) error {
		t.warn("mad_rpc_open_port", format, a...)
		return fail("main", "Failed to open '%s' port '%d'", name, t.caPort)
	}
	var dev *verbs.Device
	if t.caSet {
		d, err := verbs.DeviceByName(t.ca)
		if err != nil {
			return failed("can't open UMAD port (%s:%d)", name, t.caPort)
		}
		dev = d
	} else {
		devs, err := verbs.Devices()
		if err != nil || len(devs) == 0 {
			return failed("can't open UMAD port (%s:%d)", name, t.caPort)
		}
		dev = devs[0]
	}
	if t.caPort < 0 || t.caPort > 255 {
		return failed("%s has no port %d", dev.Name(), t.caPort)
	}
	c, err := dev.Open()
	if err != nil {
		return failed("open %s: %v", dev.Name(), err)
	}
	cl, err := madclient.Open(c, uint8(t.caPort))
	if err != nil {
		c.Close()
		return failed("%v", err)
	}
	t.dev, t.cl = c, cl
	return nil
}

// close releases the MAD client and the device.
func (t *tool) close() {
	if err := t.cl.Close(); err != nil {
		t.warn("mad_rpc_close_port", "%v", err)
	}
	if err := t.dev.Close(); err != nil {
		t.warn("mad_rpc_close_port", "%v", err)
	}
}

// numPorts is the number of ports -a iterates over, where perfquery asks
// the node with an SMP NodeInfo: the local device's port count for the
// local port, 1 elsewhere (RoCE has no SMPs).
func (t *tool) numPorts() (int, error) {
	if !t.self {
		return 1, nil
	}
	da, err := t.dev.QueryDevice()
	if err != nil {
		return 0, fail("main", "smp query nodeinfo failed")
	}
	if da.PhysPortCnt == 0 {
		return 0, fail("main", "smp query nodeinfo: num ports invalid")
	}
	return int(da.PhysPortCnt), nil
}

// portStr names the destination in headers as libibmad's portid2str
// names a LID-routed port: RoCE ports have LID 0.
func (t *tool) portStr() string { return "Lid 0" }

// dportStr names the destination in warnings, with its GID.
func (t *tool) dportStr() string {
	return fmt.Sprintf("Lid 0 Gid %s", netip.AddrFrom16(t.dst))
}

// dumpCounters is perfquery's dump_perfcounters: one port's PortCounters
// (or, with -x, PortCountersExtended), printed or added to the aggregate.
func (t *tool) dumpCounters(capMask uint16, capMask2 uint32, port int, aggr bool, agg *aggregate, aggExt *aggregateExt) error {
	var buf string
	if !t.extended {
		a, err := t.pmaQuery(mad.AttrPortCounters, port)
		if err != nil {
			return fail("dump_perfcounters", "perfquery")
		}
		if capMask&mad.PerfCapPortXmitWait == 0 {
			if t.verbose > 0 {
				fmt.Fprintf(t.out, "[%d] dump_perfcounters: PortXmitWait not indicated so ignore this counter\n", t.pid)
			}
			mad.PortCounters(a).SetPortXmitWait(0)
		}
		if aggr {
			agg.add(a)
		} else {
			buf = dumpPortCounters(a)
		}
	} else {
		if capMask&(mad.PerfCapExtendedWidth|mad.PerfCapExtendedWidthNoIETF) == 0 {
			t.warn("dump_perfcounters", "PerfMgt ClassPortInfo CapMask 0x%02X; No extended counter support indicated\n", capMask)
		}
		a, err := t.pmaQuery(mad.AttrPortCountersExtended, port)
		if err != nil {
			return fail("dump_perfcounters", "perfextquery")
		}
		if aggr {
			aggExt.add(a, capMask, capMask2)
		} else {
			buf = dumpPortCountersExt(a, capMask, capMask2)
		}
	}
	if aggr {
		return nil
	}
	if t.extended {
		fmt.Fprintf(t.out, "# Port extended counters: %s port %d (CapMask: 0x%02X CapMask2: 0x%07X)\n%s",
			t.portStr(), port, capMask, capMask2, buf)
	} else {
		fmt.Fprintf(t.out, "# Port counters: %s port %d (CapMask: 0x%02X)\n%s", t.portStr(), port, capMask, buf)
	}
	return nil
}

// resetCounters is perfquery's reset_counters.
func (t *tool) resetCounters(mask uint32, port int) error {
	if !t.extended {
		if _, err := t.pmaReset(mad.AttrPortCounters, port, mask); err != nil {
			return fail("reset_counters", "perf reset")
		}
		return nil
	}
	if _, err := t.pmaReset(mad.AttrPortCountersExtended, port, mask); err != nil {
		return fail("reset_counters", "perf ext reset")
	}
	return nil
}

// extraQuery is perfquery's common_func (and dump_portsamples_control,
// extended_speeds_query) for the attributes this tool asks for but does
// not decode.
func (t *tool) extraQuery(q extraQuery, mask uint32, extMask uint64) error {
	if q.attr == mad.AttrPortSamplesControl {
		if _, err := t.pmaQuery(q.attr, t.port); err != nil {
			return fail("dump_portsamples_control", "sampctlquery")
		}
		return fail("dump_portsamples_control", "cannot show %s: this tool does not decode it", q.name)
	}
	if !t.resetOnly {
		if _, err := t.pmaQuery(q.attr, t.port); err != nil {
			return fail("common_func", "cannot query %s", q.name)
		}
		return fail("common_func", "cannot show %s: this tool does not decode it", q.name)
	}
	if q.attr == 0x1F { // PortExtendedSpeedsCounters: a 64-bit CounterSelect at byte 8
		a := make([]byte, mad.PerfAttrLen)
		if extMask == 0 {
			extMask = ^uint64(0)
		}
		a[1] = byte(t.port)
		for i := range 8 {
			a[8+i] = byte(extMask >> (56 - 8*i))
		}
		if _, err := t.rpc(mad.MethodSet, q.attr, a); err != nil {
			return fail("extended_speeds_query", "cannot reset %s", q.name)
		}
		return nil
	}
	if _, err := t.pmaReset(q.attr, t.port, mask); err != nil {
		return fail("common_func", "cannot reset %s", q.name)
	}
	return nil
}

// pmaQuery is libibmad's pma_query_via: a Get of attr with PortSelect port;
// it returns the response's attribute (MAD bytes 64–255).
func (t *tool) pmaQuery(attr uint16, port int) ([]byte, error) {
	if t.debug > 0 {
		t.warn("pma_query_via", "lid %d port %d", 0, port)
	}
	a := make([]byte, mad.PerfAttrLen)
	a[1] = byte(port)
	return t.rpc(mad.MethodGet, attr, a)
}

// pmaReset is libibmad's performance_reset_via: a Set of attr with
// PortSelect port, CounterSelect the low 16 bits of mask (0: all) and
// CounterSelect2 the rest.
func (t *tool) pmaReset(attr uint16, port int, mask uint32) ([]byte, error) {
	if t.debug > 0 {
		t.warn("performance_reset_via", "lid %d port %d mask 0x%x", 0, port, mask)
	}
	if mask == 0 {
		mask = ^uint32(0)
	}
	a := make([]byte, mad.PerfAttrLen)
	pc := mad.PortCounters(a)
	pc.SetPortSelect(uint8(port))
	pc.SetCounterSelect(uint16(mask))
	if attr == mad.AttrPortCountersExtended {
		mad.PortCountersExtended(a).SetCounterSelect2(mask >> 16)
	} else {
		pc.SetCounterSelect2(uint8(mask >> 16))
	}
	return t.rpc(mad.MethodSet, attr, a)
}

// rpc is libibmad's mad_rpc: one PerfMgt request and its response, with
// libibmad's retries and messages. It returns the response's attribute.
func (t *tool) rpc(method uint8, attr uint16, data []byte) ([]byte, error) {
	req := mad.New(mad.ClassPerfMgt, mad.PerfMgtVersion, method, attr, 0)
	copy(req.PerfAttr(), data)
	ms := t.timeout
	if ms <= 0 {
		ms = int(madclient.DefaultTimeout / time.Millisecond)
	}
	opt := madclient.Options{Timeout: time.Duration(ms) * time.Millisecond, Retries: madclient.DefaultRetries,
		OnRetry: func(n int) {
			if t.errs() {
				t.warn("_do_madrpc", "retry %d (timeout %d ms)", n, ms)
			}
		}}
	resp, err := t.cl.Call(t.ctx, t.dst, req, opt)
	if err != nil {
		if errors.Is(err, madclient.ErrTimeout) {
			if t.errs() {
				t.warn("_do_madrpc", "timeout after %d retries, %d ms", opt.Retries, ms*opt.Retries)
			}
			// Not in libibmad: say who did not answer.
			t.warn("_do_madrpc", "no answer from QP1 at %s (%d tries of %d ms): no RoCE port there, or it does not answer MADs",
				netip.AddrFrom16(t.dst), opt.Retries, ms)
		} else {
			t.warn("_do_madrpc", "send failed; %v", err)
		}
		t.warn("mad_rpc", "_do_madrpc failed; dport (%s)", t.dportStr())
		return nil, err
	}
	if st := resp.Status(); st != 0 {
		if t.errs() {
			t.warn("mad_rpc", "MAD completed with error status 0x%x; dport (%s)", st, t.dportStr())
		}
		// Not in libibmad (which says nothing without -e): what the
		// status means.
		t.warn("mad_rpc", "%s answered status 0x%x: %s", netip.AddrFrom16(t.dst), st, statusMeaning(st))
		return nil, fmt.Errorf("MAD status %#x", st)
	}
	return resp.PerfAttr(), nil
}

// statusMeaning explains a MAD status (docs/spec/cm-mad.md §2).
func statusMeaning(st uint16) string {
	switch {
	case st == mad.StatusBusy:
		return "busy"
	case st == mad.StatusRedirect:
		return "redirect (not followed)"
	case st&mad.StatusInvalidFieldMask == mad.StatusBadVersion:
		return "bad base or class version"
	case st&mad.StatusInvalidFieldMask == mad.StatusMethodUnsupported:
		return "method not supported"
	case st&mad.StatusInvalidFieldMask == mad.StatusMethodAttrUnsupported:
		return "method/attribute not supported: no agent there serves it " +
			"(a Linux kernel RoCE device such as rxe has no PerfMgt agent, and its MAD layer answers this)"
	case st&mad.StatusInvalidFieldMask == mad.StatusInvalidAttrValue:
		return "invalid attribute or modifier value (a port the device does not have?)"
	}
	return "error"
}
