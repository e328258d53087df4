package getopt

import (
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary command lines (arguments separated by '\n') to
// the real tool tables in both orderings and checks that Parse never panics
// and that its results are consistent.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(strings.Join(tc.args, "\n"), uint8(0))
	}
	f.Add("-eg1\nhost\n--ib-d\nrxe0\n--\n-x", uint8(1))
	f.Add("--i=5\n--=\n-:\n-\n", uint8(2))
	f.Add("--out\n--report_g\n--output=bandwidth", uint8(3))
	f.Fuzz(func(t *testing.T, line string, sel uint8) {
		tables := []struct {
			optstring string
			longs     []Option
		}{
			{rcOptstring, rcLongs},
			{rpingOptstring, nil},
			{"o::e", []Option{{'o', "opt", OptionalArg}, {0, "o", NoArg}}},
			{perfOptstring, perfLongs},
		}
		tb := tables[int(sel)%len(tables)]
		p := &Parser{Prog: "prog", Options: FromOptstring(tb.optstring, tb.longs),
			Posix: sel&0x10 != 0, Opterr: sel&0x20 != 0, Stderr: io.Discard}
		args := strings.Split(line, "\n")
		r, err := p.Parse(args)
		if r == nil {
			t.Fatal("nil Result")
		}
		r2, err2 := p.Parse(args)
		if !reflect.DeepEqual(r, r2) || !reflect.DeepEqual(err, err2) {
			t.Fatal("Parse is not deterministic")
		}
		for _, o := range r.Opts {
			if !pointsInto(o.Option, p.Options) {
				t.Fatalf("%s: Option does not point into Parser.Options", o.Name)
			}
			if (o.Option.Arg == NoArg && o.HasValue) || (o.Option.Arg == RequiredArg && !o.HasValue) || (!o.HasValue && o.Value != "") {
				t.Fatalf("%+v: value inconsistent with %+v", o, *o.Option)
			}
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Kind < InvalidOption || e.Kind > UnexpectedArgument ||
				!strings.HasPrefix(e.Msg, "prog: ") || e.Option == "" {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		if len(r.Args) > len(args) {
			t.Fatalf("%d operands from %d arguments", len(r.Args), len(args))
		}
		if p.Posix && len(r.Args) > 0 {
			// The operands are a suffix of the arguments.
			tail := args[len(args)-len(r.Args):]
			if !reflect.DeepEqual(tail, r.Args) {
				t.Fatalf("posix operands %q are not the tail of %q", r.Args, args)
			}
		}
	})
}

// FuzzStrtol checks that the number conversions never panic, that rest is a
// suffix of the input and that clean decimal input agrees with strconv.
func FuzzStrtol(f *testing.F) {
	for _, tc := range strtolCases {
		f.Add(tc.s, int8(tc.base))
	}
	f.Fuzz(func(t *testing.T, s string, base int8) {
		n, rest, ok := Strtol(s, int(base))
		u, urest, uok := Strtoul(s, int(base))
		_ = Atoi(s)
		if !strings.HasSuffix(s, rest) || !strings.HasSuffix(s, urest) || rest != urest {
			t.Fatalf("rest %q / %q not a common suffix of %q", rest, urest, s)
		}
		if base == 10 || base == 0 {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil && (base == 10 || !strings.HasPrefix(strings.TrimLeft(s, "+-"), "0")) {
				if n != v || rest != "" || !ok {
					t.Fatalf("Strtol(%q, %d) = %d, %q, %v; strconv says %d", s, base, n, rest, ok, v)
				}
				if v >= 0 && (u != uint64(v) || !uok) {
					t.Fatalf("Strtoul(%q, %d) = %d, %v", s, base, u, uok)
				}
			}
		}
	})
}
