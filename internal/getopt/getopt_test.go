package getopt

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The option tables of the real tools (docs/spec/tools.md §3.1, §4.1, §6.1).
const (
	rcOptstring    = "p:d:i:s:m:r:n:l:eg:oOPtcjN"
	ucOptstring    = "p:d:i:s:m:r:n:l:eg:c"
	rpingOptstring = "a:I:Pp:C:S:t:scvVdq"
)

var rcLongs = []Option{
	{'p', "port", RequiredArg},
	{'d', "ib-dev", RequiredArg},
	{'i', "ib-port", RequiredArg},
	{'s', "size", RequiredArg},
	{'m', "mtu", RequiredArg},
	{'r', "rx-depth", RequiredArg},
	{'n', "iters", RequiredArg},
	{'l', "sl", RequiredArg},
	{'e', "events", NoArg},
	{'g', "gid-idx", RequiredArg},
	{'o', "odp", NoArg},
	{'O', "iodp", NoArg},
	{'P', "prefetch", NoArg},
	{'t', "ts", NoArg},
	{'c', "chk", NoArg},
	{'j', "dm", NoArg},
	{'N', "new_send", NoArg},
}

var ucLongs = []Option{
	{'p', "port", RequiredArg},
	{'d', "ib-dev", RequiredArg},
	{'i', "ib-port", RequiredArg},
	{'s', "size", RequiredArg},
	{'m', "mtu", RequiredArg},
	{'r', "rx-depth", RequiredArg},
	{'n', "iters", RequiredArg},
	{'l', "sl", RequiredArg},
	{'e', "events", NoArg},
	{'g', "gid-idx", RequiredArg},
	{'c', "chk", NoArg},
}

// A slice of perftest's table (6.x), in its order.
var perfOptstring = "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"
var perfLongs = []Option{
	{'p', "port", RequiredArg},
	{'d', "ib-dev", RequiredArg},
	{'s', "size", RequiredArg},
	{'n', "iters", RequiredArg},
	{'t', "tx-depth", RequiredArg},
	{'u', "qp-timeout", RequiredArg},
	{'c', "connection", RequiredArg},
	{'q', "qp", RequiredArg},
	{'C', "report-cycles", NoArg},
	{'H', "report-histogrm", NoArg},
	{'H', "report-histogram", NoArg}, // an alias: same Short and Arg
	{'U', "report-unsorted", NoArg},
	{'Y', "ethertype", RequiredArg}, // 'Y' is not in the optstring
	{0, "report_gbits", NoArg},
	{0, "report-both", NoArg},
	{0, "output", RequiredArg},
	{0, "out_json", NoArg},
	{0, "out_json_file", RequiredArg},
	{0, "mmap", RequiredArg},
	{0, "mmap-offset", RequiredArg},
}

// parser builds a parser like New would with opterr on, printing into a buffer.
func parser(prog, optstring string, longs []Option, posix bool) (*Parser, *bytes.Buffer) {
	var buf bytes.Buffer
	return &Parser{Prog: prog, Options: FromOptstring(optstring, longs), Posix: posix, Opterr: true, Stderr: &buf}, &buf
}

// show renders parsed options compactly: "-e", "-g=1", "--size=4096";
// "=" appears exactly when HasValue.
func show(opts []Parsed) []string {
	out := []string{}
	for _, o := range opts {
		s := o.Name
		if o.HasValue {
			s += "=" + o.Value
		}
		out = append(out, s)
	}
	return out
}

type parseCase struct {
	name     string
	prog     string
	optstr   string
	longs    []Option
	posix    bool
	args     []string
	wantOpts []string
	wantArgs []string  // checked on success only
	wantKind ErrorKind // 0: success
	wantOpt  string    // Error.Option
	wantMsg  string    // Error.Msg, also what goes to Stderr
}

func rc(name string, args []string, opts, operands []string) parseCase {
	return parseCase{name: name, prog: "ibv_rc_pingpong", optstr: rcOptstring, longs: rcLongs,
		args: args, wantOpts: opts, wantArgs: operands}
}

func rcErr(name string, args []string, opts []string, kind ErrorKind, opt, msg string) parseCase {
	return parseCase{name: name, prog: "ibv_rc_pingpong", optstr: rcOptstring, longs: rcLongs,
		args: args, wantOpts: opts, wantKind: kind, wantOpt: opt, wantMsg: "ibv_rc_pingpong: " + msg}
}

// a lists strings; a() is empty, not nil, to compare with DeepEqual.
func a(s ...string) []string { return append([]string{}, s...) }

var parseCases = []parseCase{
	// Short options: clusters, attached and separate values.
	rc("cluster", a("-eg1"), a("-e", "-g=1"), a()),
	rc("separate value", a("-g", "1"), a("-g=1"), a()),
	rc("attached value", a("-g1"), a("-g=1"), a()),
	rc("attached size", a("-s4096"), a("-s=4096"), a()),
	rc("cluster of flags", a("-ecoOPtjN"), a("-e", "-c", "-o", "-O", "-P", "-t", "-j", "-N"), a()),
	rc("cluster ending in value", a("-ecg", "2"), a("-e", "-c", "-g=2"), a()),
	rc("value starting with dash", a("-d", "-x"), a("-d=-x"), a()),
	rc("value is --", a("-d", "--", "host"), a("-d=--"), a("host")),
	rc("value is -", a("-d", "-"), a("-d=-"), a()),
	rc("empty value", a("-d", ""), a("-d="), a()),
	rc("repeated option", a("-n", "5", "-n10"), a("-n=5", "-n=10"), a()),
	rc("hex value kept as text", a("-p0x10"), a("-p=0x10"), a()),

	// Long options.
	rc("long =", a("--size=4096"), a("--size=4096"), a()),
	rc("long separate", a("--size", "4096"), a("--size=4096"), a()),
	rc("long empty =", a("--size="), a("--size="), a()),
	rc("long value with =", a("--ib-dev=a=b"), a("--ib-dev=a=b"), a()),
	rc("long value starting with dash", a("--ib-dev", "--chk"), a("--ib-dev=--chk"), a()),
	rc("prefix ib-d", a("--ib-d", "rxe0"), a("--ib-dev=rxe0"), a()),
	rc("prefix iter", a("--iter", "10"), a("--iters=10"), a()),
	rc("prefix with =", a("--gid=1"), a("--gid-idx=1"), a()),
	rc("prefix of flag", a("--ev", "--pre"), a("--events", "--prefetch"), a()),
	rc("exact sl beats size", a("--sl", "3"), a("--sl=3"), a()),
	rc("all long", a("--port", "18515", "--ib-port=1", "--mtu", "1024", "--rx-depth=500", "--new_send", "--dm", "--ts", "--odp", "--iodp", "--chk"),
		a("--port=18515", "--ib-port=1", "--mtu=1024", "--rx-depth=500", "--new_send", "--dm", "--ts", "--odp", "--iodp", "--chk"), a()),

	// Permutation, "--" and "-".
	rc("operand first", a("host", "-g", "1"), a("-g=1"), a("host")),
	rc("interleaved", a("a", "-e", "b", "-s", "8", "c"), a("-e", "-s=8"), a("a", "b", "c")),
	rc("double dash", a("-e", "--", "-g", "1"), a("-e"), a("-g", "1")),
	rc("operands around --", a("a", "-e", "b", "--", "-g", "c"), a("-e"), a("a", "b", "-g", "c")),
	rc("second -- is an operand", a("--", "--"), a(), a("--")),
	rc("lone dash", a("-", "-e"), a("-e"), a("-")),
	rc("empty operand", a("", "-e", ""), a("-e"), a("", "")),
	rc("no args", a(), a(), a()),
	rc("client", a("-g", "1", "-n", "10", "192.0.2.1"), a("-g=1", "-n=10"), a("192.0.2.1")),
	rc("client operand first", a("192.0.2.1", "--gid-idx", "1", "--size=1024", "extra"), a("--gid-idx=1", "--size=1024"), a("192.0.2.1", "extra")),

	// Errors.
	rcErr("invalid short", a("-x"), a(), InvalidOption, "-x", "invalid option -- 'x'"),
	rcErr("invalid short in cluster", a("-ex", "-g1"), a("-e"), InvalidOption, "-x", "invalid option -- 'x'"),
	rcErr("colon is never an option", a("-:"), a(), InvalidOption, "-:", "invalid option -- ':'"),
	rcErr("semicolon is never an option", a("-;"), a(), InvalidOption, "-;", "invalid option -- ';'"),
	rcErr("non-ASCII byte", a("-é"), a(), InvalidOption, "-\xc3", "invalid option -- '\xc3'"),
	rcErr("short missing argument", a("-e", "-s"), a("-e"), MissingArgument, "-s", "option requires an argument -- 's'"),
	rcErr("short missing argument in cluster", a("-es"), a("-e"), MissingArgument, "-s", "option requires an argument -- 's'"),
	rcErr("long missing argument", a("--size"), a(), MissingArgument, "--size", "option '--size' requires an argument"),
	rcErr("prefix missing argument names the option", a("--si"), a(), MissingArgument, "--size", "option '--size' requires an argument"),
	rcErr("unrecognized", a("--xyz"), a(), UnrecognizedOption, "--xyz", "unrecognized option '--xyz'"),
	rcErr("unrecognized with value", a("-e", "--xyz=1"), a("-e"), UnrecognizedOption, "--xyz=1", "unrecognized option '--xyz=1'"),
	rcErr("longer than any name", a("--sizes"), a(), UnrecognizedOption, "--sizes", "unrecognized option '--sizes'"),
	rcErr("long names are case-sensitive", a("--SIZE=1"), a(), UnrecognizedOption, "--SIZE=1", "unrecognized option '--SIZE=1'"),
	rcErr("no argument allowed", a("--events=1"), a(), UnexpectedArgument, "--events", "option '--events' doesn't allow an argument"),
	rcErr("no argument allowed, prefix", a("--ev="), a(), UnexpectedArgument, "--events", "option '--events' doesn't allow an argument"),
	rcErr("ambiguous --i", a("--i", "1"), a(), AmbiguousOption, "--i",
		"option '--i' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--iodp'"),
	rcErr("ambiguous with value", a("--i=5"), a(), AmbiguousOption, "--i=5",
		"option '--i=5' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--iodp'"),
	rcErr("ambiguous --s", a("--s", "1"), a(), AmbiguousOption, "--s",
		"option '--s' is ambiguous; possibilities: '--size' '--sl'"),
	rcErr("ambiguous --ib", a("--ib", "1"), a(), AmbiguousOption, "--ib",
		"option '--ib' is ambiguous; possibilities: '--ib-dev' '--ib-port'"),
	rcErr("empty name matches every option", a("--=x"), a(), AmbiguousOption, "--=x",
		"option '--=x' is ambiguous; possibilities: '--port' '--ib-dev' '--ib-port' '--size' '--mtu' '--rx-depth' '--iters' '--sl' '--events' '--gid-idx' '--odp' '--iodp' '--prefetch' '--ts' '--chk' '--dm' '--new_send'"),
	rcErr("error after operands", a("host", "-x"), a(), InvalidOption, "-x", "invalid option -- 'x'"),
	rcErr("value consumed before error", a("-d", "-x", "-x"), a("-d=-x"), InvalidOption, "-x", "invalid option -- 'x'"),
	{name: "uc ambiguous --i (glibc 2.36 wording)", prog: "ibv_uc_pingpong", optstr: ucOptstring, longs: ucLongs,
		args: a("--i", "x"), wantOpts: a(), wantKind: AmbiguousOption, wantOpt: "--i",
		wantMsg: "ibv_uc_pingpong: option '--i' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters'"},

	// POSIX order: stop at the first operand.
	{name: "posix stops at operand", prog: "p", optstr: rcOptstring, longs: rcLongs, posix: true,
		args: a("host", "-g", "1"), wantOpts: a(), wantArgs: a("host", "-g", "1")},
	{name: "posix options then operands", prog: "p", optstr: rcOptstring, longs: rcLongs, posix: true,
		args: a("-e", "--size", "8", "host", "--", "-g"), wantOpts: a("-e", "--size=8"), wantArgs: a("host", "--", "-g")},
	{name: "posix leading --", prog: "p", optstr: rcOptstring, longs: rcLongs, posix: true,
		args: a("--", "--", "x"), wantOpts: a(), wantArgs: a("--", "x")},
	{name: "posix lone dash stops", prog: "p", optstr: rcOptstring, longs: rcLongs, posix: true,
		args: a("-", "-e"), wantOpts: a(), wantArgs: a("-", "-e")},
	{name: "posix value is not an operand", prog: "p", optstr: rcOptstring, longs: rcLongs, posix: true,
		args: a("-d", "rxe0", "-e", "host"), wantOpts: a("-d=rxe0", "-e"), wantArgs: a("host")},

	// Plain getopt (rping): no long options, so "--x" is a cluster.
	{name: "rping", prog: "rping", optstr: rpingOptstring,
		args:     a("-c", "-a", "192.0.2.1", "-C10", "-S", "64", "-vVd", "-p", "7174"),
		wantOpts: a("-c", "-a=192.0.2.1", "-C=10", "-S=64", "-v", "-V", "-d", "-p=7174"), wantArgs: a()},
	{name: "rping permutes", prog: "rping", optstr: rpingOptstring,
		args: a("extra", "-s"), wantOpts: a("-s"), wantArgs: a("extra")},
	{name: "rping --", prog: "rping", optstr: rpingOptstring,
		args: a("-s", "--", "-v"), wantOpts: a("-s"), wantArgs: a("-v")},
	{name: "rping long option", prog: "rping", optstr: rpingOptstring,
		args: a("-sv", "--verbose"), wantOpts: a("-s", "-v"), wantKind: InvalidOption, wantOpt: "--",
		wantMsg: "rping: invalid option -- '-'"},
	{name: "rping missing argument", prog: "rping", optstr: rpingOptstring,
		args: a("-s", "-a"), wantOpts: a("-s"), wantKind: MissingArgument, wantOpt: "-a",
		wantMsg: "rping: option requires an argument -- 'a'"},

	// Optional arguments.
	{name: "optional", prog: "p", optstr: "o::e", longs: []Option{{'o', "opt", OptionalArg}},
		args:     a("-ofoo", "-o", "bar", "-eo", "--opt", "--opt=", "--o=v", "--opt", "baz"),
		wantOpts: a("-o=foo", "-o", "-e", "-o", "--opt", "--opt=", "--opt=v", "--opt"), wantArgs: a("bar", "baz")},

	// perftest-like tables: long-only options, exact beats prefix, aliases.
	{name: "perftest long-only", prog: "ib_write_bw", optstr: perfOptstring, longs: perfLongs,
		args:     a("--report_gbits", "--output=bandwidth", "-s", "65536", "server", "--output", "latency", "-a"),
		wantOpts: a("--report_gbits", "--output=bandwidth", "-s=65536", "--output=latency", "-a"), wantArgs: a("server")},
	{name: "perftest exact qp beats qp-timeout", prog: "ib_write_bw", optstr: perfOptstring, longs: perfLongs,
		args:     a("--qp", "2", "--qp-t", "14", "--mmap", "f", "--mmap-", "0", "--out_json", "--out_json_f=x"),
		wantOpts: a("--qp=2", "--qp-timeout=14", "--mmap=f", "--mmap-offset=0", "--out_json", "--out_json_file=x"), wantArgs: a()},
	{name: "perftest alias is not ambiguous", prog: "ib_write_lat", optstr: perfOptstring, longs: perfLongs,
		args: a("--report-h", "-H"), wantOpts: a("--report-histogrm", "-H"), wantArgs: a()},
	{name: "perftest long whose char is not in optstring", prog: "ib_send_bw", optstr: perfOptstring, longs: perfLongs,
		args: a("--ether", "0x800", "-Y"), wantOpts: a("--ethertype=0x800"), wantKind: InvalidOption, wantOpt: "-Y",
		wantMsg: "ib_send_bw: invalid option -- 'Y'"},
	{name: "perftest ambiguous report", prog: "ib_write_bw", optstr: perfOptstring, longs: perfLongs,
		args: a("--report"), wantOpts: a(), wantKind: AmbiguousOption, wantOpt: "--report",
		wantMsg: "ib_write_bw: option '--report' is ambiguous; possibilities: '--report-cycles' '--report-histogrm' '--report-histogram' '--report-unsorted' '--report_gbits' '--report-both'"},
	{name: "perftest ambiguous out", prog: "ib_write_bw", optstr: perfOptstring, longs: perfLongs,
		args: a("--out=x"), wantOpts: a(), wantKind: AmbiguousOption, wantOpt: "--out=x",
		wantMsg: "ib_write_bw: option '--out=x' is ambiguous; possibilities: '--output' '--out_json' '--out_json_file'"},
	{name: "perftest output missing", prog: "ib_write_bw", optstr: perfOptstring, longs: perfLongs,
		args: a("--outp"), wantOpts: a(), wantKind: MissingArgument, wantOpt: "--output",
		wantMsg: "ib_write_bw: option '--output' requires an argument"},

	// A single long option matches any prefix, even an empty one.
	{name: "single long option, empty prefix", prog: "p", longs: []Option{{0, "size", RequiredArg}},
		args: a("--=1", "--s", "2"), wantOpts: a("--size=1", "--size=2"), wantArgs: a()},
}

// pointsInto reports whether o is the address of an element of opts.
func pointsInto(o *Option, opts []Option) bool {
	for k := range opts {
		if o == &opts[k] {
			return true
		}
	}
	return false
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			p, stderr := parser(tc.prog, tc.optstr, tc.longs, tc.posix)
			r, err := p.Parse(tc.args)
			if r == nil {
				t.Fatal("nil Result")
			}
			if got := show(r.Opts); !reflect.DeepEqual(got, tc.wantOpts) {
				t.Errorf("opts = %q, want %q", got, tc.wantOpts)
			}
			for _, o := range r.Opts {
				if !pointsInto(o.Option, p.Options) {
					t.Errorf("%s: Option does not point into Parser.Options", o.Name)
				}
			}
			if tc.wantKind == 0 {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if stderr.Len() != 0 {
					t.Errorf("stderr = %q, want nothing", stderr)
				}
				args := r.Args
				if args == nil {
					args = []string{}
				}
				if !reflect.DeepEqual(args, tc.wantArgs) {
					t.Errorf("args = %q, want %q", args, tc.wantArgs)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v (%T), want *Error", err, err)
			}
			if e.Kind != tc.wantKind || e.Option != tc.wantOpt || e.Msg != tc.wantMsg || e.Error() != tc.wantMsg {
				t.Errorf("error = %+v, want kind %d option %q msg %q", e, tc.wantKind, tc.wantOpt, tc.wantMsg)
			}
			if got := stderr.String(); got != tc.wantMsg+"\n" {
				t.Errorf("stderr = %q, want %q", got, tc.wantMsg+"\n")
			}
		})
	}
}

func TestAmbiguousPossibilities(t *testing.T) {
	p, _ := parser("p", ucOptstring, ucLongs, false)
	_, err := p.Parse(a("--i"))
	var e *Error
	if !errors.As(err, &e) || !reflect.DeepEqual(e.Possibilities, a("--ib-dev", "--ib-port", "--iters")) {
		t.Fatalf("err = %#v", err)
	}
}

// With Opterr false (rping's opterr = 0) nothing is printed, but the
// error is still returned.
func TestOpterrOff(t *testing.T) {
	for _, args := range [][]string{a("-x"), a("--xyz"), a("--i"), a("-s"), a("--size"), a("--events=1")} {
		var buf bytes.Buffer
		p := &Parser{Prog: "p", Options: FromOptstring(rcOptstring, rcLongs), Stderr: &buf}
		_, err := p.Parse(args)
		var e *Error
		if !errors.As(err, &e) || e.Msg == "" {
			t.Errorf("%q: err = %v, want *Error", args, err)
		}
		if buf.Len() != 0 {
			t.Errorf("%q: printed %q with Opterr off", args, buf.String())
		}
	}
}

func TestNew(t *testing.T) {
	t.Setenv("POSIXLY_CORRECT", "x")
	t.Run("env", func(t *testing.T) {
		t.Setenv("POSIXLY_CORRECT", "") // set, even empty, counts
		p := New("p", rcOptstring, rcLongs)
		if !p.Posix || !p.Opterr || p.Stderr == nil {
			t.Fatalf("%+v", p)
		}
		r, err := p.Parse(a("-e", "host", "-g", "1"))
		if err != nil || !reflect.DeepEqual(show(r.Opts), a("-e")) || !reflect.DeepEqual(r.Args, a("host", "-g", "1")) {
			t.Fatalf("%v %q %q", err, show(r.Opts), r.Args)
		}
	})
	// Unset it for the rest.
	t.Setenv("POSIXLY_CORRECT", "")
	if err := os.Unsetenv("POSIXLY_CORRECT"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		optstring     string
		posix, opterr bool
	}{
		{rcOptstring, false, true},
		{"+" + rcOptstring, true, true},
		{":" + rcOptstring, false, false},
		{"+:" + rcOptstring, true, false},
		{"-" + rcOptstring, false, true},
	} {
		p := New("prog", tc.optstring, rcLongs)
		if p.Posix != tc.posix || p.Opterr != tc.opterr || p.Prog != "prog" {
			t.Errorf("New(%q): posix %v opterr %v", tc.optstring, p.Posix, p.Opterr)
		}
		if !reflect.DeepEqual(p.Options, FromOptstring(rcOptstring, rcLongs)) {
			t.Errorf("New(%q): options differ from FromOptstring", tc.optstring)
		}
	}
	// Plain getopt.
	p := New("rping", rpingOptstring, nil)
	r, err := p.Parse(a("-s", "-S", "100", "-C", "3"))
	if err != nil || !reflect.DeepEqual(show(r.Opts), a("-s", "-S=100", "-C=3")) {
		t.Fatalf("%v %q", err, show(r.Opts))
	}
}

func TestFromOptstring(t *testing.T) {
	got := FromOptstring(rcOptstring, rcLongs)
	if !reflect.DeepEqual(got, rcLongs) {
		t.Errorf("rc: got %v, want the long table (every character covered)", got)
	}
	got = FromOptstring("+:ab:c::d", []Option{
		{'b', "bee", RequiredArg},
		{'a', "aye", RequiredArg}, // 'a' takes no value in the optstring
		{'z', "zed", NoArg},       // 'z' is not in the optstring
		{0, "long", OptionalArg},
		{'c', "see", OptionalArg},
	})
	want := []Option{
		{'b', "bee", RequiredArg},
		{0, "aye", RequiredArg},
		{0, "zed", NoArg},
		{0, "long", OptionalArg},
		{'c', "see", OptionalArg},
		{'a', "", NoArg},
		{'d', "", NoArg},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if got := FromOptstring("", nil); len(got) != 0 {
		t.Errorf("empty: %v", got)
	}
	if got := FromOptstring("-x;y", nil); !reflect.DeepEqual(got, []Option{{'x', "", NoArg}, {'y', "", NoArg}}) {
		t.Errorf("-x;y: %v", got)
	}
}

// Options declared directly, without an optstring.
func TestDeclarative(t *testing.T) {
	var buf bytes.Buffer
	p := &Parser{Prog: "ibv_devinfo", Opterr: true, Stderr: &buf, Options: []Option{
		{'d', "ib-dev", RequiredArg},
		{'i', "ib-port", RequiredArg},
		{'l', "list", NoArg},
		{'v', "verbose", NoArg},
	}}
	r, err := p.Parse(a("-v", "--ib-d=rxe0", "-i", "1", "--l"))
	if err != nil {
		t.Fatal(err)
	}
	if got := show(r.Opts); !reflect.DeepEqual(got, a("-v", "--ib-dev=rxe0", "-i=1", "--list")) {
		t.Errorf("got %q", got)
	}
	if r.Opts[1].Option.Short != 'd' || r.Opts[3].Option.Short != 'l' {
		t.Errorf("long options do not point at their entries")
	}
	// -l acts as soon as it is parsed: the partial result carries it.
	r, err = p.Parse(a("-l", "--bogus"))
	if err == nil || len(r.Opts) != 1 || r.Opts[0].Option.Short != 'l' {
		t.Errorf("partial result: %v %+v", err, r)
	}
	if !strings.HasPrefix(buf.String(), "ibv_devinfo: unrecognized option '--bogus'\n") {
		t.Errorf("stderr %q", buf.String())
	}
}

// The parser neither modifies args nor keeps state between calls.
func TestParseDoesNotModifyArgs(t *testing.T) {
	p, _ := parser("p", rcOptstring, rcLongs, false)
	args := a("host", "-eg1", "--", "x")
	orig := append([]string(nil), args...)
	for i := 0; i < 2; i++ {
		r, err := p.Parse(args)
		if err != nil || !reflect.DeepEqual(r.Args, a("host", "x")) {
			t.Fatalf("%v %q", err, r.Args)
		}
	}
	if !reflect.DeepEqual(args, orig) {
		t.Errorf("args modified: %q", args)
	}
}
