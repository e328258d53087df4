// Package getopt parses command lines exactly like GNU getopt and getopt_long
// (glibc 2.36), so that the Go ports of the C RDMA tools accept the same
// arguments and print the same diagnostics.
//
// It reproduces: clustered short options (-eg1), attached or separate values
// (-s4096, -s 4096, -d -x gives d="-x"), long options with "=value" or a
// separate value, unambiguous prefixes of long names (--ib-d), argv permutation
// (options and operands interleaved), "--" ending the options, "-" as an
// operand, POSIX order ('+' / POSIXLY_CORRECT) and glibc's error messages.
// Parsing stops at the first error, as every tool exits on it.
//
// Numeric option values are converted with [Strtol], [Strtoul] and [Atoi],
// which follow the C library functions of the same names.
package getopt

import (
	"io"
	"os"
	"strings"
)

// ArgKind says whether an option takes a value.
type ArgKind int

const (
	// NoArg: the option takes no value ("e" in an optstring, has_arg 0).
	NoArg ArgKind = iota
	// RequiredArg: the option needs a value, attached (-s4096,
	// --size=4096) or in the next argument, whatever it looks like
	// ("s:" in an optstring, has_arg 1).
	RequiredArg
	// OptionalArg: the value may only be attached (-s4096, --size=4096)
	// ("s::" in an optstring, has_arg 2).
	OptionalArg
)

// Option declares one option. Short and Long may both be set (-s and
// --size are the same option) or either alone; Arg applies to both forms.
//
// As in glibc, two long options matched by the same prefix are not ambiguous
// when they are aliases: the same non-zero Short and the same Arg.
type Option struct {
	Short rune    // the option character (-s); 0 for a long-only option
	Long  string  // the long name without "--" (size); "" for a short-only option
	Arg   ArgKind // whether the option takes a value
}

// Parsed is one option found on the command line.
type Parsed struct {
	Option   *Option // the matching element of Parser.Options
	Name     string  // the option as the user wrote it: "-s", or "--" plus the full long name
	Value    string  // the value (optarg); "" when there is none
	HasValue bool    // a value was given; always true for RequiredArg
}

// Result is what Parse found.
type Result struct {
	Opts []Parsed // the options in command-line order
	Args []string // the operands in order, as argv holds them after getopt's permutation
}

// Parser describes a program's options. The zero value of each field is a
// usable default except Opterr, which must be set to print messages like C's
// default opterr = 1; [New] sets everything from a C optstring.
type Parser struct {
	// Prog prefixes every message, like argv[0] in C (normally os.Args[0]).
	Prog string
	// Options are the options in the order of the C long option table:
	// that order decides which of several exact or prefix matches wins and
	// the order in which an ambiguity message lists the candidates. When no
	// option has a Long name the parser behaves like plain getopt, which
	// reads "--foo" as the short options '-', 'f', 'o', 'o'.
	Options []Option
	// Posix stops option parsing at the first operand (glibc's REQUIRE_ORDER:
	// an optstring starting with '+', or POSIXLY_CORRECT in the environment).
	// Otherwise options and operands may be interleaved (PERMUTE).
	Posix bool
	// Opterr prints each error message, followed by a newline, to Stderr
	// (C's opterr). The error is returned either way.
	Opterr bool
	// Stderr receives the messages; nil means os.Stderr.
	Stderr io.Writer
}

// New returns a parser for getopt_long(argc, argv, optstring, longs): the
// options are FromOptstring(optstring, longs); a leading '+' or a
// POSIXLY_CORRECT environment variable (even empty) selects Posix; messages
// go to os.Stderr unless the optstring (after any '+') starts with ':'.
// Pass nil longs for plain getopt(argc, argv, optstring). A leading '-'
// (RETURN_IN_ORDER, used by none of the tools) is not supported: it is
// skipped and the operands are collected as in the default mode.
func New(prog, optstring string, longs []Option) *Parser {
	_, posix := os.LookupEnv("POSIXLY_CORRECT")
	s := optstring
	if strings.HasPrefix(s, "+") {
		posix = true
		s = s[1:]
	} else if strings.HasPrefix(s, "-") {
		posix = false
		s = s[1:]
	}
	return &Parser{
		Prog:    prog,
		Options: FromOptstring(optstring, longs),
		Posix:   posix,
		Opterr:  !strings.HasPrefix(s, ":"),
		Stderr:  os.Stderr,
	}
}

// FromOptstring builds Options from a C optstring such as
// "p:d:i:s:m:r:n:l:eg:oOPtcjN" (a character alone takes no value, "c:"
// requires one, "c::" takes an optional one) and a long option table.
//
// The result lists the long options first, in their order, then the
// characters of the optstring that no long option covers. A long option
// covers its Short character when the optstring has it with the same Arg;
// otherwise its Short is cleared (the optstring alone decides what -c means,
// and the tool recognises that long option by its Long name; two such long
// options are then no longer aliases for the ambiguity test). Leading mode
// characters ('+' or '-', then ':') are skipped (see [New]); ';' is ignored
// (the "W;" extension is not supported).
func FromOptstring(optstring string, longs []Option) []Option {
	s := optstring
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	s = strings.TrimPrefix(s, ":")
	var shorts []Option
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ':' || c == ';' {
			continue
		}
		o := Option{Short: rune(c)}
		if i+1 < len(s) && s[i+1] == ':' {
			o.Arg = RequiredArg
			if i+2 < len(s) && s[i+2] == ':' {
				o.Arg = OptionalArg
			}
		}
		shorts = append(shorts, o)
	}
	covered := make([]bool, len(shorts))
	out := make([]Option, 0, len(longs)+len(shorts))
	for _, l := range longs {
		if l.Short != 0 {
			idx := -1
			for i, o := range shorts {
				if o.Short == l.Short {
					idx = i
					break
				}
			}
			if idx >= 0 && shorts[idx].Arg == l.Arg {
				covered[idx] = true
			} else {
				l.Short = 0
			}
		}
		out = append(out, l)
	}
	for i, o := range shorts {
		if !covered[i] {
			out = append(out, o)
		}
	}
	return out
}

// ErrorKind classifies a command-line error.
type ErrorKind int

const (
	// InvalidOption: an unknown short option ("invalid option -- 'x'").
	InvalidOption ErrorKind = iota + 1
	// UnrecognizedOption: an unknown long option ("unrecognized option '--xyz'").
	UnrecognizedOption
	// AmbiguousOption: a long prefix matching several options
	// ("option '--i' is ambiguous; possibilities: ...").
	AmbiguousOption
	// MissingArgument: a RequiredArg option at the end of argv
	// ("option requires an argument -- 's'", "option '--size' requires an argument").
	MissingArgument
	// UnexpectedArgument: "--name=value" for a NoArg option
	// ("option '--events' doesn't allow an argument").
	UnexpectedArgument
)

// Error is a command-line error. Its text is glibc's message, without the
// trailing newline, whether or not it was printed.
type Error struct {
	Kind ErrorKind
	// Option names the culprit as the message does: "-x" for a short
	// option; for a long one what the user wrote after "--" with that
	// prefix ("--xyz=1", "--i") when unknown or ambiguous, else "--"
	// plus the full long name.
	Option string
	// Possibilities are the candidates of an AmbiguousOption, "--name" each.
	Possibilities []string
	// Msg is the complete message, e.g. "prog: invalid option -- 'x'".
	Msg string
}

// Error returns Msg.
func (e *Error) Error() string { return e.Msg }

// Parse parses args, the command line without the program name
// (os.Args[1:]). On error it returns an *Error together with the options and
// operands found before the failing argument, so a tool can still act on
// options that C processes as soon as they are parsed.
func (p *Parser) Parse(args []string) (*Result, error) {
	r := &Result{}
	hasLong := false
	for i := range p.Options {
		if p.Options[i].Long != "" {
			hasLong = true
			break
		}
	}
	for i := 0; i < len(args); {
		a := args[i]
		if a == "--" {
			r.Args = append(r.Args, args[i+1:]...)
			return r, nil
		}
		if len(a) < 2 || a[0] != '-' { // an operand, "-" included
			if p.Posix {
				r.Args = append(r.Args, args[i:]...)
				return r, nil
			}
			r.Args = append(r.Args, a)
			i++
			continue
		}
		var err *Error
		if hasLong && a[1] == '-' {
			i, err = p.long(r, args, i)
		} else {
			i, err = p.short(r, args, i)
		}
		if err != nil {
			if p.Opterr {
				w := p.Stderr
				if w == nil {
					w = os.Stderr
				}
				io.WriteString(w, err.Msg+"\n")
			}
			return r, err
		}
	}
	return r, nil
}

// short parses the cluster of short options in args[i] and returns the index
// of the next argument.
func (p *Parser) short(r *Result, args []string, i int) (int, *Error) {
	a := args[i]
	for j := 1; j < len(a); j++ {
		c := a[j]
		name := "-" + string([]byte{c})
		o := p.lookupShort(c)
		if o == nil {
			return i, p.errorf(InvalidOption, name, "invalid option -- '"+name[1:]+"'")
		}
		if o.Arg == NoArg {
			r.Opts = append(r.Opts, Parsed{Option: o, Name: name})
			continue
		}
		// The value is the rest of the cluster, else (if required) the
		// next argument whatever it looks like; either way the cluster ends.
		rest := a[j+1:]
		switch {
		case rest != "":
			r.Opts = append(r.Opts, Parsed{Option: o, Name: name, Value: rest, HasValue: true})
		case o.Arg == OptionalArg:
			r.Opts = append(r.Opts, Parsed{Option: o, Name: name})
		case i+1 < len(args):
			r.Opts = append(r.Opts, Parsed{Option: o, Name: name, Value: args[i+1], HasValue: true})
			return i + 2, nil
		default:
			return i, p.errorf(MissingArgument, name, "option requires an argument -- '"+name[1:]+"'")
		}
		return i + 1, nil
	}
	return i + 1, nil
}

// lookupShort returns the first option whose Short is c, nil if none; ':'
// and ';' are never options (glibc rejects them).
func (p *Parser) lookupShort(c byte) *Option {
	if c == ':' || c == ';' {
		return nil
	}
	for k := range p.Options {
		if p.Options[k].Short == rune(c) {
			return &p.Options[k]
		}
	}
	return nil
}

// long parses the long option args[i] ("--name" or "--name=value") and
// returns the index of the next argument.
func (p *Parser) long(r *Result, args []string, i int) (int, *Error) {
	body := args[i][2:]
	name, value, hasEq := strings.Cut(body, "=")

	var found *Option
	for k := range p.Options {
		if o := &p.Options[k]; o.Long != "" && o.Long == name {
			found = o
			break
		}
	}
	if found == nil {
		var ambig []string
		for k := range p.Options {
			o := &p.Options[k]
			if o.Long == "" || !strings.HasPrefix(o.Long, name) {
				continue
			}
			if found == nil {
				found = o
			} else if !alias(found, o) {
				if ambig == nil {
					ambig = []string{"--" + found.Long}
				}
				ambig = append(ambig, "--"+o.Long)
			}
		}
		if ambig != nil {
			e := p.errorf(AmbiguousOption, "--"+body,
				"option '--"+body+"' is ambiguous; possibilities: '"+strings.Join(ambig, "' '")+"'")
			e.Possibilities = ambig
			return i, e
		}
		if found == nil {
			return i, p.errorf(UnrecognizedOption, "--"+body, "unrecognized option '--"+body+"'")
		}
	}

	optName := "--" + found.Long
	switch {
	case hasEq && found.Arg == NoArg:
		return i, p.errorf(UnexpectedArgument, optName, "option '"+optName+"' doesn't allow an argument")
	case hasEq:
		r.Opts = append(r.Opts, Parsed{Option: found, Name: optName, Value: value, HasValue: true})
	case found.Arg != RequiredArg:
		r.Opts = append(r.Opts, Parsed{Option: found, Name: optName})
	case i+1 < len(args):
		r.Opts = append(r.Opts, Parsed{Option: found, Name: optName, Value: args[i+1], HasValue: true})
		return i + 2, nil
	default:
		return i, p.errorf(MissingArgument, optName, "option '"+optName+"' requires an argument")
	}
	return i + 1, nil
}

// alias reports whether two options are the same for glibc's ambiguity test
// (same has_arg, flag and val): the same non-zero Short and Arg.
func alias(a, b *Option) bool {
	return a.Short != 0 && a.Short == b.Short && a.Arg == b.Arg
}

func (p *Parser) errorf(kind ErrorKind, option, msg string) *Error {
	return &Error{Kind: kind, Option: option, Msg: p.Prog + ": " + msg}
}
