package perftest

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/internal/version"
)

// Verb is the operation a test measures (perftest's VerbType).
type Verb int

// The verbs, in perftest's order (it indexes tables with them).
const (
	Send Verb = iota
	Write
	Read
	Atomic
)

// Kind is bandwidth or latency (perftest's TestType).
type Kind int

// The kinds.
const (
	LAT Kind = iota
	BW
)

// Test identifies one of the eight tools.
type Test struct {
	Verb Verb
	Kind Kind
}

// Name returns the tool's name, e.g. "ib_write_bw".
func (t Test) Name() string {
	v := [...]string{"send", "write", "read", "atomic"}[t.Verb]
	if t.Kind == BW {
		return "ib_" + v + "_bw"
	}
	return "ib_" + v + "_lat"
}

// ConnType is the transport (perftest's connection_type values).
type ConnType int

// Connection types, numbered as in perftest.
const (
	RC ConnType = iota
	UC
	UD
	RawEth
	XRC
	DC
	SRD
)

var connStr = [...]string{"RC", "UC", "UD", "RawEth", "XRC", "DC", "SRD"}

// String returns the name the banner prints.
func (c ConnType) String() string { return connStr[c] }

// AtomicType selects the atomic operation.
type AtomicType int

// The atomic operations, in perftest's order.
const (
	CmpAndSwap AtomicType = iota
	FetchAndAdd
)

var atomicTypesStr = [...]string{"CMP_AND_SWAP", "FETCH_AND_ADD"}

// String returns CMP_AND_SWAP or FETCH_AND_ADD.
func (a AtomicType) String() string { return atomicTypesStr[a] }

// Output selects what is printed: everything, or one number.
type Output int

// Output levels.
const (
	OutputFull Output = iota
	OutputBW
	OutputMR
	OutputLat
)

// Defaults and limits of perftest 6.06.
const (
	DefPort        = 18515
	DefSizeBW      = 65536
	DefSizeLat     = 2
	DefIters       = 1000
	DefItersWriteB = 5000
	DefTxBW        = 128
	DefRxSend      = 512
	DefCQMod       = 100
	DefQPTimeout   = 14
	DefHopLimit    = 64
	DefDuration    = 5
	MaxSize        = 8388608
	minIter        = 5
	maxIter        = 100000000
	maxTx          = 15000
	maxRx          = 16384
	ucMaxRx        = 16000
	maxQPNum       = 16384
	maxInline      = 912
	maxInlineUD    = 884
	cqModLimit     = 8192
	defMarginInit  = -1
	defTOS         = -1
	defInline      = -1
	// ResultLine is perftest's RESULT_LINE: 87 dashes and a newline.
	ResultLine = "---------------------------------------------------------------------------------------\n"
)

// Config is one run's parameters (perftest's struct perftest_parameters,
// the parts rdma-go implements).
type Config struct {
	Test Test
	Prog string

	Port        int
	Device      string
	IBPort      int
	MTU         int // requested MTU in bytes; 0: the port's
	Size        uint64
	ReqSize     bool
	Iters       int
	All         bool // -a
	Conn        ConnType
	NumQPs      int
	TxDepth     int
	RxDepth     int
	GIDIndex    int // -1: none
	UseGIDUser  bool
	SL          int
	QPTimeout   int
	CQMod       int
	ReqCQMod    bool
	Inline      int // -1: default
	OutReads    int // 0: the device's maximum
	AtomicType  AtomicType
	Duplex      bool
	Duration    int
	TestDur     bool // -D given: duration mode
	Margin      int
	CPUFreqF    bool
	NoPeak      bool
	Cycles      bool // -C
	Histogram   bool // -H
	Unsorted    bool // -U
	HopLimit    int
	TOS         int
	PostList    int
	RecvPost    int
	Gbits       bool
	Output      Output
	OldPost     bool
	NoXchgVer   bool
	Events      bool
	EQNum       int
	UseEQNum    bool
	IPv6        bool
	SourceIP    string
	DLID        int
	TClass      int
	PKeyIndex   int
	Reversed    bool
	ReportBoth  bool
	LimitBW     float64
	IsLimitBW   bool
	LimitMR     float64
	IsLimitMR   bool
	WaitDestroy int
	WarmUp      bool
	MRPerQP     bool
	NoPCIeRO    bool
	LatencyGap  int
	ForceLink   string
	FlowLabel   int
	RetryCount  int

	// Host is the server to connect to; empty for the server.
	Host string
	// Client is the data-path role: the TCP client, unless --reversed.
	Client bool

	// Extras of rdma-go.
	JSON bool   // --json: one JSON object instead of the text report
	PNG  string // --png=FILE: a chart of an -a sweep
}

// Defaults returns perftest's defaults for t (init_perftest_params).
func Defaults(t Test) Config {
	c := Config{Test: t, Prog: t.Name(), Port: DefPort, IBPort: 1, Size: DefSizeBW, Iters: DefIters,
		NumQPs: 1, TxDepth: DefTxBW, RxDepth: 1, GIDIndex: -1, QPTimeout: DefQPTimeout, CQMod: DefCQMod,
		Inline: defInline, AtomicType: FetchAndAdd, Duration: DefDuration, Margin: defMarginInit,
		HopLimit: DefHopLimit, TOS: defTOS, PostList: 1, RecvPost: 1, RetryCount: 7}
	if t.Kind == LAT {
		c.Size, c.TxDepth = DefSizeLat, 1
	}
	if t.Verb == Send {
		c.RxDepth = DefRxSend
	}
	if t.Kind == BW && t.Verb == Write {
		c.Iters = DefItersWriteB
	}
	if t.Verb == Atomic {
		c.Size = 8
	}
	return c
}

// The long options of perftest 6.06 as Debian builds it, in its table's
// order (which decides prefix matches).
var longOptions = []getopt.Option{
	{Short: 'p', Long: "port", Arg: getopt.RequiredArg},
	{Short: 'd', Long: "ib-dev", Arg: getopt.RequiredArg},
	{Short: 'i', Long: "ib-port", Arg: getopt.RequiredArg},
	{Short: 'm', Long: "mtu", Arg: getopt.RequiredArg},
	{Short: 's', Long: "size", Arg: getopt.RequiredArg},
	{Short: 'n', Long: "iters", Arg: getopt.RequiredArg},
	{Short: 't', Long: "tx-depth", Arg: getopt.RequiredArg},
	{Short: 'u', Long: "qp-timeout", Arg: getopt.RequiredArg},
	{Short: 'S', Long: "sl", Arg: getopt.RequiredArg},
	{Short: 'x', Long: "gid-index", Arg: getopt.RequiredArg},
	{Short: 'a', Long: "all", Arg: getopt.NoArg},
	{Short: 'F', Long: "CPU-freq", Arg: getopt.NoArg},
	{Short: 'c', Long: "connection", Arg: getopt.RequiredArg},
	{Short: 'q', Long: "qp", Arg: getopt.RequiredArg},
	{Short: 'e', Long: "events", Arg: getopt.NoArg},
	{Short: 'X', Long: "vector", Arg: getopt.RequiredArg},
	{Short: 'I', Long: "inline_size", Arg: getopt.RequiredArg},
	{Short: 'o', Long: "outs", Arg: getopt.RequiredArg},
	{Short: 'g', Long: "mcg", Arg: getopt.NoArg},
	{Short: 'z', Long: "comm_rdma_cm", Arg: getopt.NoArg},
	{Short: 'R', Long: "rdma_cm", Arg: getopt.NoArg},
	{Short: 'T', Long: "tos", Arg: getopt.RequiredArg},
	{Short: 'L', Long: "hop_limit", Arg: getopt.RequiredArg},
	{Short: 'h', Long: "help", Arg: getopt.NoArg},
	{Short: 'M', Long: "MGID", Arg: getopt.RequiredArg},
	{Short: 'r', Long: "rx-depth", Arg: getopt.RequiredArg},
	{Short: 'b', Long: "bidirectional", Arg: getopt.NoArg},
	{Short: 'Q', Long: "cq-mod", Arg: getopt.RequiredArg},
	{Short: 'N', Long: "noPeak", Arg: getopt.NoArg},
	{Short: 'V', Long: "version", Arg: getopt.NoArg},
	{Short: 'C', Long: "report-cycles", Arg: getopt.NoArg},
	{Short: 'H', Long: "report-histogrm", Arg: getopt.NoArg},
	{Short: 'U', Long: "report-unsorted", Arg: getopt.NoArg},
	{Short: 'A', Long: "atomic_type", Arg: getopt.RequiredArg},
	{Short: 'O', Long: "dualport", Arg: getopt.NoArg},
	{Short: 'l', Long: "post_list", Arg: getopt.RequiredArg},
	{Short: 'D', Long: "duration", Arg: getopt.RequiredArg},
	{Short: 'f', Long: "margin", Arg: getopt.RequiredArg},
	{Short: 'B', Long: "source_mac", Arg: getopt.RequiredArg},
	{Short: 'E', Long: "dest_mac", Arg: getopt.RequiredArg},
	{Short: 'J', Long: "dest_ip", Arg: getopt.RequiredArg},
	{Short: 'j', Long: "source_ip", Arg: getopt.RequiredArg},
	{Short: 'K', Long: "dest_port", Arg: getopt.RequiredArg},
	{Short: 'k', Long: "source_port", Arg: getopt.RequiredArg},
	{Short: 'Y', Long: "ethertype", Arg: getopt.RequiredArg},
	{Short: 'w', Long: "limit_bw", Arg: getopt.RequiredArg},
	{Short: 'y', Long: "limit_msgrate", Arg: getopt.RequiredArg},
	{Short: 'Z', Long: "server", Arg: getopt.NoArg},
	{Short: 'P', Long: "client", Arg: getopt.NoArg},
	{Short: 'v', Long: "mac_fwd", Arg: getopt.NoArg},
	{Short: 'G', Long: "use_rss", Arg: getopt.NoArg},
	{Short: 'W', Long: "report-counters", Arg: getopt.RequiredArg},
	{Long: "force-link", Arg: getopt.RequiredArg},
	{Long: "remote_mac", Arg: getopt.RequiredArg},
	{Long: "local_mac", Arg: getopt.RequiredArg},
	{Long: "remote_ip", Arg: getopt.RequiredArg},
	{Long: "local_ip", Arg: getopt.RequiredArg},
	{Long: "remote_port", Arg: getopt.RequiredArg},
	{Long: "local_port", Arg: getopt.RequiredArg},
	{Long: "run_infinitely", Arg: getopt.NoArg},
	{Long: "report_gbits", Arg: getopt.NoArg},
	{Long: "use-srq", Arg: getopt.NoArg},
	{Long: "report-both", Arg: getopt.NoArg},
	{Long: "reversed", Arg: getopt.NoArg},
	{Long: "pkey_index", Arg: getopt.RequiredArg},
	{Long: "inline_recv", Arg: getopt.RequiredArg},
	{Long: "tcp", Arg: getopt.NoArg},
	{Long: "burst_size", Arg: getopt.RequiredArg},
	{Long: "typical_pkt_size", Arg: getopt.RequiredArg},
	{Long: "rate_limit", Arg: getopt.RequiredArg},
	{Long: "rate_limit_type", Arg: getopt.RequiredArg},
	{Long: "rate_units", Arg: getopt.RequiredArg},
	{Long: "output", Arg: getopt.RequiredArg},
	{Long: "cpu_util", Arg: getopt.NoArg},
	{Long: "out_json", Arg: getopt.NoArg},
	{Long: "out_json_file", Arg: getopt.RequiredArg},
	{Long: "latency_gap", Arg: getopt.RequiredArg},
	{Long: "flow_label", Arg: getopt.RequiredArg},
	{Long: "retry_count", Arg: getopt.RequiredArg},
	{Long: "dont_xchg_versions", Arg: getopt.NoArg},
	{Long: "mmap", Arg: getopt.RequiredArg},
	{Long: "mmap-offset", Arg: getopt.RequiredArg},
	{Long: "ipv6", Arg: getopt.NoArg},
	{Long: "raw_ipv6", Arg: getopt.NoArg},
	{Long: "report-per-port", Arg: getopt.NoArg},
	{Long: "odp", Arg: getopt.NoArg},
	{Long: "use_hugepages", Arg: getopt.NoArg},
	{Long: "use_old_post_send", Arg: getopt.NoArg},
	{Long: "promiscuous", Arg: getopt.NoArg},
	{Long: "raw_mcast", Arg: getopt.NoArg},
	{Long: "mr_per_qp", Arg: getopt.NoArg},
	{Long: "dlid", Arg: getopt.RequiredArg},
	{Long: "tclass", Arg: getopt.RequiredArg},
	{Long: "wait_destroy", Arg: getopt.RequiredArg},
	{Long: "flows", Arg: getopt.RequiredArg},
	{Long: "flows_burst", Arg: getopt.RequiredArg},
	{Long: "reply_every", Arg: getopt.RequiredArg},
	{Long: "perform_warm_up", Arg: getopt.NoArg},
	{Long: "vlan_en", Arg: getopt.NoArg},
	{Long: "vlan_pcp", Arg: getopt.RequiredArg},
	{Long: "recv_post_list", Arg: getopt.RequiredArg},
	{Long: "aes_xts", Arg: getopt.NoArg},
	{Long: "encrypt_on_tx", Arg: getopt.NoArg},
	{Long: "sig_before", Arg: getopt.NoArg},
	{Long: "aes_block_size", Arg: getopt.RequiredArg},
	{Long: "kek_path", Arg: getopt.RequiredArg},
	{Long: "credentials_path", Arg: getopt.RequiredArg},
	{Long: "data_enc_keys_number", Arg: getopt.RequiredArg},
	{Long: "data_enc_key_app_path", Arg: getopt.RequiredArg},
	{Long: "log_dci_streams", Arg: getopt.RequiredArg},
	{Long: "log_active_dci_streams", Arg: getopt.RequiredArg},
	{Long: "disable_pcie_relaxed", Arg: getopt.NoArg},
	{Long: "source_ip", Arg: getopt.RequiredArg},
	// rdma-go's own.
	{Long: "json", Arg: getopt.NoArg},
	{Long: "png", Arg: getopt.RequiredArg},
}

const optstring = "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"

// exitError ends parsing with a status; the message (if any) was printed.
// parser marks a failure of perftest's parser function, after which main
// adds " Parser function exited with Error"; the others are exit() calls.
type exitError struct {
	code   int
	parser bool
}

func (e exitError) Error() string { return "exit " + strconv.Itoa(e.code) }

// parser holds the streams Parse prints to.
type parser struct {
	cfg            *Config
	stdout, stderr io.Writer
}

// cType is the C integer type a perftest CHECK_VALUE converts to.
type cType int

const (
	cInt cType = iota
	cUint8
	cUint16
	cUint32
	cUlong
)

var cTypeName = [...]string{"int", "uint8_t", "uint16_t", "uint32_t", "unsigned long"}

// checkValue is perftest's CHECK_VALUE: strtol(optarg, &end, 0), which must
// consume the whole argument, cast to the type.
func (p *parser) checkValue(arg string, t cType, name string) (int64, error) {
	n, rest, _ := getopt.Strtol(arg, 0)
	if rest != "" {
		fmt.Fprintf(p.stderr, " %s argument %s should be %s\n", name, arg, cTypeName[t])
		return 0, exitError{1, true}
	}
	switch t {
	case cInt:
		n = int64(int32(n))
	case cUint8:
		n = int64(uint8(n))
	case cUint16:
		n = int64(uint16(n))
	case cUint32:
		n = int64(uint32(n))
	}
	return n, nil
}

func (p *parser) inRange(arg string, t cType, lo, hi int64, name string) (int64, error) {
	n, err := p.checkValue(arg, t, name)
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		fmt.Fprintf(p.stderr, " %s should be between %d and %d\n", name, lo, hi)
		return 0, exitError{1, true}
	}
	return n, nil
}

func (p *parser) fail(format string, args ...any) error {
	fmt.Fprintf(p.stderr, format, args...)
	return exitError{1, true}
}

// unsupported ends parsing for an option rdma-go does not implement.
func (p *parser) unsupported(name, why string) error {
	fmt.Fprintf(p.stderr, " %s is not supported by %s (rdma-go): %s\n", name, p.cfg.Prog, why)
	return exitError{1, true}
}

// Parse parses args (without the program name) as perftest 6.06's parser
// and force_dependecies do. On -h, -V or an error it has printed what
// perftest prints and returns done with the exit status.
func Parse(t Test, prog string, args []string, stdout, stderr io.Writer) (cfg Config, status int, done bool) {
	cfg = Defaults(t)
	if prog != "" {
		cfg.Prog = prog
	}
	p := &parser{cfg: &cfg, stdout: stdout, stderr: stderr}
	err := p.parse(args)
	if err == nil {
		err = p.forceDependencies()
	}
	if err != nil {
		var ee exitError
		if e, ok := err.(exitError); ok {
			ee = e
		} else {
			fmt.Fprintln(stderr, err)
			ee = exitError{code: 1}
		}
		return cfg, ee.code, true
	}
	return cfg, 0, false
}

func (p *parser) parse(args []string) error {
	c := p.cfg
	t := c.Test
	gp := getopt.New(c.Prog, optstring, longOptions)
	gp.Stderr = p.stderr
	res, perr := gp.Parse(args)
	// Like C, act on the options before the failing one, then fail.
	parseFailed := func() error {
		fmt.Fprintf(p.stderr, " Invalid Command or flag.\n")
		fmt.Fprintf(p.stderr, " Please check command line and run again.\n\n")
		Usage(p.stdout, c.Prog, t)
		fmt.Fprintf(p.stderr, " Parser function exited with Error\n")
		return exitError{code: 1}
	}
	for _, o := range res.Opts {
		v := o.Value
		var n int64
		var err error
		short := o.Option.Short
		switch short {
		case 'p':
			if n, err = p.checkValue(v, cInt, "Port"); err == nil {
				c.Port = int(n)
			}
		case 'd':
			c.Device = v
		case 'i':
			if n, err = p.checkValue(v, cUint8, "IB Port"); err == nil {
				c.IBPort = int(n)
				if c.IBPort < 1 {
					err = p.fail("IB Port can't be less than %d\n", 1)
				}
			}
		case 'm':
			if n, err = p.checkValue(v, cInt, "MTU"); err == nil {
				c.MTU = int(n)
			}
		case 'n':
			if n, err = p.inRange(v, cInt, minIter, maxIter, "Iteration num"); err == nil {
				c.Iters = int(n)
			}
		case 't':
			if n, err = p.inRange(v, cInt, 1, maxTx, "Tx depth"); err == nil {
				c.TxDepth = int(n)
			}
		case 'T':
			if n, err = p.inRange(v, cInt, 0, 255, "TOS"); err == nil {
				c.TOS = int(n)
			}
		case 'L':
			if n, err = p.inRange(v, cInt, 0, 255, "Hop Limit"); err == nil {
				c.HopLimit = int(n)
			}
		case 'u':
			if n, err = p.checkValue(v, cUint8, "QP Timeout"); err == nil {
				c.QPTimeout = int(n)
			}
		case 'S':
			if n, err = p.checkValue(v, cUint8, "Service Level"); err == nil {
				c.SL = int(n)
				if c.SL > 15 {
					err = p.fail(" Only %d Service levels\n", 15)
				}
			}
		case 'x':
			if n, err = p.inRange(v, cUint8, 0, 64, "Gid index"); err == nil {
				c.GIDIndex, c.UseGIDUser = int(n), true
			}
		case 'c':
			err = p.changeConnType(v)
		case 'q':
			if t.Kind != BW {
				err = p.fail(" Multiple QPs only available on bw tests\n")
			} else if n, err = p.inRange(v, cInt, 1, maxQPNum, "num of Qps"); err == nil {
				c.NumQPs = int(n)
			}
		case 'I':
			if n, err = p.inRange(v, cInt, 0, maxInline, "Max inline"); err == nil {
				c.Inline = int(n)
				if t.Verb == Read || t.Verb == Atomic {
					err = p.fail(" Inline feature not available on READ/Atomic verbs\n")
				}
			}
		case 'o':
			if n, err = p.checkValue(v, cInt, "Outstanding Reads"); err == nil {
				c.OutReads = int(n)
				if t.Verb != Read && t.Verb != Atomic {
					err = p.fail(" Setting Outstanding reads only available on READ verb\n")
				}
			}
		case 'M':
			err = p.unsupported("-M/--MGID", "multicast needs a subnet manager and UD multicast groups")
		case 'r':
			if n, err = p.inRange(v, cInt, 1, maxRx, " Rx depth"); err == nil {
				c.RxDepth = int(n)
				if t.Verb != Send && c.RxDepth > 1 {
					err = p.fail(" On RDMA verbs rx depth can be only 1\n")
				}
			}
		case 'Q':
			if n, err = p.inRange(v, cInt, 1, 1024, "CQ moderation"); err == nil {
				c.CQMod, c.ReqCQMod = int(n), true
			}
		case 'A':
			if t.Verb != Atomic {
				err = p.fail(" You are not running the atomic_lat/bw test!\n To change the atomic action type, you must run one of the atomic tests\n")
				break
			}
			switch v {
			case "CMP_AND_SWAP":
				c.AtomicType = CmpAndSwap
			case "FETCH_AND_ADD":
				c.AtomicType = FetchAndAdd
			default:
				fmt.Fprintf(p.stderr, " Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}\n")
				return exitError{code: 1}
			}
		case 'l':
			if n, err = p.checkValue(v, cInt, "Send Post List size"); err == nil {
				c.PostList = int(n)
			}
		case 'D':
			if n, err = p.checkValue(v, cInt, "Duration period"); err == nil {
				if n <= 0 {
					err = p.fail(" %s must be positive\n", "Duration period")
				} else {
					c.Duration, c.TestDur = int(n), true
				}
			}
		case 'f':
			if n, err = p.checkValue(v, cInt, "Margin"); err == nil {
				if n < 0 {
					err = p.fail(" %s must be non-negative\n", "Margin")
				} else {
					c.Margin = int(n)
				}
			}
		case 'O':
			err = p.unsupported("-O/--dualport", "the soft device has one port")
		case 'a':
			c.All = true
		case 'F':
			c.CPUFreqF = true
		case 'V':
			// perftest's line as perftest prints it (scripts compare
			// it), then rdma-go's own version.
			fmt.Fprintf(p.stdout, "Version: %s\n%s\n", Version, version.Line())
			return exitError{code: 1}
		case 'h':
			Usage(p.stdout, c.Prog, t)
			return exitError{code: 1}
		case 'z':
			err = p.unsupported("-z/--comm_rdma_cm", "exchanging data over RDMA CM is not supported yet")
		case 'R':
			err = p.unsupported("-R/--rdma_cm", "connecting QPs with RDMA CM is not supported yet (use the default TCP exchange)")
		case 's':
			err = p.size(v)
		case 'e':
			c.Events = true
			if t.Verb == Write {
				err = p.fail(" Events feature not available on WRITE verb\n")
			}
		case 'X':
			if t.Verb == Write {
				err = p.fail(" Events feature not available on WRITE verb\n")
			} else if n, err = p.inRange(v, cInt, 0, 2048, "EQN"); err == nil {
				c.EQNum, c.UseEQNum = int(n), true
			}
		case 'b':
			c.Duplex = true
			if t.Kind == LAT {
				err = p.fail(" Bidirectional is only available in BW test\n")
			}
		case 'N':
			c.NoPeak = true
			if t.Kind == LAT {
				err = p.fail(" NoPeak only valid for BW tests\n")
			}
		case 'C':
			if t.Kind != LAT {
				err = p.fail(" Available only on Latency tests\n")
			} else {
				c.Cycles = true
			}
		case 'g':
			if t.Verb != Send {
				err = p.fail(" MultiCast feature only available on SEND verb\n")
			} else {
				err = p.unsupported("-g/--mcg", "multicast needs a subnet manager and UD multicast groups")
			}
		case 'H':
			if t.Kind == BW {
				err = p.fail(" Available only on Latency tests\n")
			} else {
				c.Histogram = true
			}
		case 'U':
			if t.Kind == BW {
				err = p.fail(" is Available only on Latency tests\n")
			} else {
				c.Unsorted = true
			}
		case 'B', 'E', 'J', 'j', 'K', 'k', 'Y', 'Z', 'P', 'v', 'G':
			if o.Name == "--source_ip" {
				c.SourceIP = v
				break
			}
			err = p.unsupported(o.Name, "raw Ethernet options belong to raw_ethernet_* tests")
		case 'w':
			c.IsLimitBW, c.LimitBW = true, Atof(v)
			if c.LimitBW < 0 {
				err = p.fail(" Invalid Minimum BW Limit\n")
			}
		case 'y':
			c.IsLimitMR, c.LimitMR = true, Atof(v)
			if c.LimitMR < 0 {
				err = p.fail(" Invalid Minimum msgRate Limit\n")
			}
		case 'W':
			err = p.unsupported("-W/--report-counters", "the soft device has no sysfs counters")
		case 0:
			err = p.long(o.Option.Long, v)
		}
		if err != nil {
			if ee, ok := err.(exitError); ok && ee.parser {
				fmt.Fprintf(p.stderr, " Parser function exited with Error\n")
				ee.parser = false
				return ee
			}
			return err
		}
	}
	if perr != nil {
		return parseFailed()
	}
	switch len(res.Args) {
	case 0:
	case 1:
		c.Host = res.Args[0]
	default:
		fmt.Fprintf(p.stderr, " Invalid Command line. Please check command rerun \n")
		fmt.Fprintf(p.stderr, " Parser function exited with Error\n")
		return exitError{code: 1}
	}
	c.Client = c.Host != ""
	if c.Reversed {
		c.Client = !c.Client
	}
	return nil
}

func (p *parser) size(v string) error {
	c := p.cfg
	factor := int64(1)
	if strings.HasSuffix(v, "K") {
		v, factor = v[:len(v)-1], 1024
	}
	if strings.HasSuffix(v, "M") {
		v, factor = v[:len(v)-1], 1024*1024
	}
	n, _, _ := getopt.Strtol(v, 0)
	size := uint64(n) * uint64(factor)
	c.Size, c.ReqSize = size, true
	if size < 1 || size > math.MaxUint32/2 {
		return p.fail(" Message Size should be between %d and %d\n", 1, uint32(math.MaxUint32/2))
	}
	return nil
}

func (p *parser) changeConnType(v string) error {
	c := p.cfg
	switch v {
	case "RC":
		c.Conn = RC
	case "UC":
		c.Conn = UC
		if c.Test.Verb == Read || c.Test.Verb == Atomic {
			fmt.Fprintf(p.stderr, " UC connection not possible in READ/ATOMIC verbs\n")
			return exitError{code: 1}
		}
	case "UD":
		c.Conn = UD
		if c.Test.Verb != Send {
			fmt.Fprintf(p.stderr, " UD connection only possible in SEND verb\n")
			return exitError{code: 1}
		}
	case "RawEth":
		fmt.Fprintf(p.stderr, " This test cannot run Raw Ethernet QPs (you have chosen RawEth as connection type\n")
		return exitError{code: 1}
	case "XRC":
		fmt.Fprintf(p.stderr, " XRC not detected in libibverbs\n")
		return exitError{code: 1}
	case "DC":
		fmt.Fprintf(p.stderr, " DC not supported, mlx5dv.h is needed\n")
		return exitError{code: 1}
	case "SRD":
		fmt.Fprintf(p.stderr, " SRD not detected in libibverbs\n")
		return exitError{code: 1}
	default:
		fmt.Fprintf(p.stderr, " Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}\n")
		return exitError{code: 1}
	}
	return nil
}

func (p *parser) long(name, v string) error {
	c := p.cfg
	var n int64
	var err error
	switch name {
	case "report_gbits":
		c.Gbits = true
	case "dont_xchg_versions":
		c.NoXchgVer = true
	case "use_old_post_send":
		c.OldPost = true
	case "output":
		switch v {
		case "bandwidth":
			c.Output = OutputBW
		case "message_rate":
			c.Output = OutputMR
		case "latency":
			c.Output = OutputLat
		default:
			return p.fail(" Invalid verbosity level output flag. Please use bandwidth, latency, message_rate\n")
		}
	case "ipv6":
		c.IPv6 = true
	case "source_ip":
		c.SourceIP = v
	case "report-both":
		c.ReportBoth = true
	case "reversed":
		c.Reversed = true
	case "pkey_index":
		if n, err = p.checkValue(v, cInt, "Pkey index"); err == nil {
			c.PKeyIndex = int(n)
		}
	case "dlid":
		if n, err = p.checkValue(v, cUint16, "dlid"); err == nil {
			c.DLID = int(n)
		}
	case "tclass":
		if n, err = p.checkValue(v, cUint16, "traffic class"); err == nil {
			c.TClass = int(n)
		}
	case "wait_destroy":
		if n, err = p.checkValue(v, cUint32, "wait_destroy"); err == nil {
			c.WaitDestroy = int(n)
		}
	case "flow_label":
		if n, err = p.checkValue(v, cInt, "flow label"); err == nil {
			if n < 0 {
				return p.fail(" %s must be non-negative\n", "flow label")
			}
			c.FlowLabel = int(n)
		}
	case "retry_count":
		if n, err = p.checkValue(v, cInt, "Retry Count"); err == nil {
			if n < 0 {
				return p.fail(" %s must be non-negative\n", "Retry Count")
			}
			c.RetryCount = int(n)
		}
	case "latency_gap":
		if n, err = p.checkValue(v, cInt, "Latency gap time"); err == nil {
			if n < 0 {
				return p.fail(" %s must be non-negative\n", "Latency gap time")
			}
			c.LatencyGap = int(n)
		}
	case "recv_post_list":
		if n, err = p.checkValue(v, cInt, "Receive Post List size"); err == nil {
			c.RecvPost = int(n)
		}
	case "perform_warm_up":
		c.WarmUp = true
	case "mr_per_qp":
		c.MRPerQP = true
	case "disable_pcie_relaxed":
		c.NoPCIeRO = true
	case "force-link":
		switch {
		case len(v) >= 2 && strings.EqualFold(v[:2], "IB"):
			c.ForceLink = "IB"
		case len(v) >= 8 && strings.EqualFold(v[:8], "Ethernet"):
			c.ForceLink = "Ethernet"
		default:
			return p.fail("Invalid link layer value should be IB or ETHERNET.\n")
		}
	case "json":
		c.JSON = true
	case "png":
		c.PNG = v
	case "run_infinitely":
		return p.unsupported("--run_infinitely", "use -D with a long duration")
	case "use-srq":
		return p.unsupported("--use-srq", "shared receive queues are not wired into the perftest tools yet")
	case "out_json", "out_json_file":
		return p.unsupported("--"+name, "use rdma-go's --json, which prints one JSON object on stdout")
	case "cpu_util":
		return p.unsupported("--cpu_util", "CPU utilisation sampling is not implemented")
	case "odp":
		return p.unsupported("--odp", "the soft device registers memory directly; there is no on-demand paging")
	case "use_hugepages", "mmap", "mmap-offset":
		return p.unsupported("--"+name, "buffers are ordinary Go memory")
	case "report-per-port":
		return p.unsupported("--report-per-port", "the soft device has one port")
	case "inline_recv":
		return p.unsupported("--inline_recv", "the soft device has no inline receive")
	case "burst_size", "typical_pkt_size", "rate_limit", "rate_limit_type", "rate_units":
		return p.unsupported("--"+name, "the rate limiter is not implemented")
	case "aes_xts", "encrypt_on_tx", "sig_before", "aes_block_size", "kek_path", "credentials_path",
		"data_enc_keys_number", "data_enc_key_app_path":
		return p.unsupported("--"+name, "AES-XTS needs mlx5 crypto hardware")
	case "log_dci_streams", "log_active_dci_streams":
		return p.unsupported("--"+name, "DC transport needs mlx5 hardware")
	default:
		// Raw Ethernet options: remote_mac, local_mac, remote_ip,
		// local_ip, remote_port, local_port, tcp, raw_ipv6, promiscuous,
		// raw_mcast, flows, flows_burst, reply_every, vlan_en, vlan_pcp.
		return p.unsupported("--"+name, "raw Ethernet options belong to raw_ethernet_* tests")
	}
	return err
}

// forceDependencies applies perftest's force_dependecies to the parts
// rdma-go implements.
func (p *parser) forceDependencies() error {
	c := p.cfg
	t := c.Test
	out := p.stdout
	if !c.TestDur {
		if c.TxDepth > c.Iters {
			c.TxDepth = c.Iters
		}
		if t.Verb == Send && c.RxDepth > c.Iters {
			c.RxDepth = c.Iters
		}
		if c.Conn == UD || c.Conn == UC {
			if c.RxDepth == DefRxSend {
				c.RxDepth = min(c.Iters, ucMaxRx)
			}
		}
	}
	if c.Size > cqModLimit && c.Conn != UD && !c.All && !c.Events {
		if !c.ReqCQMod {
			c.CQMod = 1
		} else if c.CQMod > 1 {
			fmt.Fprint(out, ResultLine)
			fmt.Fprintf(out, "Warning: Large message requested and CQ moderation enabled\n")
			fmt.Fprintf(out, "Warning: It can lead to inaccurate results\n")
		}
	}
	if c.CQMod > c.TxDepth {
		c.CQMod = c.TxDepth
	}
	if t.Verb == Read || t.Verb == Atomic {
		c.Inline = 0
	}
	if c.All {
		c.Size = MaxSize
	}
	if t.Verb == Atomic && c.Size != 8 {
		fmt.Fprint(out, ResultLine)
		fmt.Fprintf(out, "Message size cannot be changed for Atomic tests \n")
		return exitError{code: 1}
	}
	if c.PostList > 1 {
		if t.Kind == BW {
			if !c.TestDur && c.Iters%c.PostList != 0 {
				fmt.Fprint(out, ResultLine)
				fmt.Fprintf(p.stderr, "Number of iterations must be a multiple of post list size\n")
				return exitError{code: 1}
			}
			if !c.ReqCQMod {
				c.CQMod = c.PostList
				fmt.Fprint(out, ResultLine)
				fmt.Fprintf(out, "Post List requested - CQ moderation will be the size of the post list\n")
			} else if c.PostList%c.CQMod != 0 {
				fmt.Fprint(out, ResultLine)
				fmt.Fprintf(p.stderr, "Post list size must be a multiple of CQ moderation\n")
				return exitError{code: 1}
			}
		} else {
			fmt.Fprint(out, ResultLine)
			fmt.Fprintf(p.stderr, "Post list is supported in BW tests only\n")
			return exitError{code: 1}
		}
	}
	if c.RecvPost > 1 {
		if t.Kind == BW {
			if !c.TestDur && c.Iters%c.RecvPost != 0 {
				fmt.Fprint(out, ResultLine)
				fmt.Fprintf(p.stderr, "Number of iterations must be a multiple of receive post list size\n")
				return exitError{code: 1}
			}
		} else {
			fmt.Fprint(out, ResultLine)
			fmt.Fprintf(p.stderr, "Receive post list is supported in BW tests only\n")
			return exitError{code: 1}
		}
	}
	if c.TestDur {
		c.Iters = 0
		c.NoPeak = true
		if c.Events {
			fmt.Fprint(out, ResultLine)
			fmt.Fprintf(p.stderr, "Duration mode doesn't work with events.\n")
			return exitError{code: 1}
		}
		if c.All {
			fmt.Fprint(out, ResultLine)
			fmt.Fprintf(p.stderr, "Duration mode currently doesn't support running on all sizes.\n")
			return exitError{code: 1}
		}
	}
	if c.TOS != defTOS {
		fmt.Fprintf(out, " TOS only valid for rdma_cm based QP and RawEth QP \n")
		return exitError{code: 1}
	}
	if c.HopLimit != DefHopLimit {
		fmt.Fprintf(out, " Hop limit only valid for RawEth QP \n")
		return exitError{code: 1}
	}
	if t.Verb == Send && t.Kind == BW && !c.Client && !c.Duplex {
		c.NoPeak = true
	}
	if c.Output != OutputFull {
		if t.Kind == BW && c.Output != OutputBW && c.Output != OutputMR {
			fmt.Fprint(out, ResultLine)
			fmt.Fprintf(p.stderr, " Output verbosity level for BW can be: bandwidth, message_rate\n")
			return exitError{code: 1}
		}
		if t.Kind == LAT && c.Output != OutputLat {
			fmt.Fprint(out, ResultLine)
			fmt.Fprintf(p.stderr, " Output verbosity level for LAT can be: latency\n")
			return exitError{code: 1}
		}
	}
	if c.LatencyGap > 0 && t.Kind != LAT {
		fmt.Fprint(out, ResultLine)
		fmt.Fprintf(p.stderr, " Latency gap feature is only for latency tests\n")
		return exitError{code: 1}
	}
	if c.TestDur && c.Margin == defMarginInit {
		c.Margin = c.Duration / 4
	}
	if c.Conn == UD && c.Inline > maxInlineUD {
		fmt.Fprint(out, ResultLine)
		fmt.Fprintf(p.stderr, "Setting inline size to %d (Max inline size in UD)\n", maxInlineUD)
		c.Inline = maxInlineUD
	}
	if t.Verb == Send && c.RxDepth%2 == 1 && !c.All {
		c.RxDepth++
	}
	if !c.TestDur && c.Iters > 20000 && !c.NoPeak && t.Kind == BW {
		c.NoPeak = true
	}
	if !(c.Duration > 2*c.Margin) {
		fmt.Fprint(out, ResultLine)
		fmt.Fprintf(p.stderr, "please check that DURATION > 2*MARGIN\n")
		return exitError{code: 1}
	}
	if !c.Events && c.UseEQNum {
		fmt.Fprintf(p.stderr, " Events must be enabled to select a completion vector\n")
		return exitError{code: 1}
	}
	if c.PNG != "" && !c.All {
		fmt.Fprintf(p.stderr, " --png needs -a (a chart of the size sweep)\n")
		return exitError{code: 1}
	}
	return nil
}
