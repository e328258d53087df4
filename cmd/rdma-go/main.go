// Command rdma-go manages and diagnoses RDMA devices, soft and kernel alike.
// Its objects and commands follow iproute2's rdma tool where it has one.
//
// Usage:
//
//	rdma-go [-j] [-p] OBJECT COMMAND [ARGS]
//
//	rdma-go link show [DEV[/PORT]]
//	rdma-go link add NAME type rgo addr IP|auto
//	rdma-go link add NAME type rgo netdev NETDEV
//	rdma-go link add NAME type rxe|siw netdev NETDEV
//	rdma-go link delete NAME
//	rdma-go statistic show [link DEV/PORT]
//	rdma-go resource show
//	rdma-go doctor [-d DEV] [--memlock SIZE] [--peer HOST[:PORT]] [--timeout DUR]
//	rdma-go service [--socket PATH] [--quarantine DUR] [-v]
//
// -j prints JSON, -p pretty-prints it. statistic shows a kernel device's
// port counters and resource the kernel's count of each device's objects,
// as iproute2 does (a soft device's live in the processes that open it:
// see package rdmaprom). doctor checks what stands between
// a program and a working device and says what to do about each finding;
// its exit status is 1 when a finding is an error. service runs the host
// service in the foreground: soft devices of every process that finds its
// socket share their address through it (see package service).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `Usage: rdma-go [ OPTIONS ] OBJECT { COMMAND | help }
where  OBJECT := { link | statistic | resource | doctor | service | help }
       OPTIONS := { -j[son] | -p[retty] | -V[ersion] }

       rdma-go link show [DEV[/PORT]]
       rdma-go link add NAME type rgo { addr IP | addr auto | netdev NETDEV }
       rdma-go link add NAME type { rxe | siw } netdev NETDEV
       rdma-go link delete NAME
       rdma-go statistic show [ link DEV/PORT ]
       rdma-go statistic qp show
       rdma-go resource show
       rdma-go doctor [ -d DEV ] [ --memlock SIZE ] [ --peer HOST[:PORT] ] [ --timeout DURATION ]
       rdma-go service [ --socket PATH ] [ --quarantine DURATION ] [ -v ]
`

// cli is one invocation: its output streams and global options.
type cli struct {
	stdout, stderr io.Writer
	json, pretty   bool
}

// message is an error whose text is printed as it is, in iproute2's
// capitalized style.
type message string

func (m message) Error() string { return string(m) }

// errUsage asks run to print the usage and exit 1.
var errUsage = errors.New("usage")

// run is the program; args are the arguments after the program name. It
// returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch a := strings.TrimLeft(args[0], "-"); {
		case a != "" && strings.HasPrefix("json", a):
			c.json = true
		case a != "" && strings.HasPrefix("pretty", a):
			c.pretty = true
		case a == "V" || a == "version":
			fmt.Fprintln(stdout, "rdma-go utility, rdma-go")
			return 0
		case a == "h" || a == "help":
			fmt.Fprint(stdout, usage)
			return 0
		default:
			fmt.Fprintf(stderr, "Option \"%s\" is unknown, try \"rdma-go help\".\n", args[0])
			return 1
		}
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 1
	}
	var err error
	switch obj, rest := args[0], args[1:]; {
	case matches(obj, "link"):
		err = c.link(rest)
	case matches(obj, "statistic"):
		err = c.statistic(rest)
	case matches(obj, "resource"):
		err = c.resource(rest)
	case matches(obj, "doctor"):
		return c.doctor(ctx, rest)
	case obj == "service":
		return c.service(ctx, rest)
	case matches(obj, "help"):
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "Object \"%s\" is unknown, try \"rdma-go help\".\n", obj)
		return 1
	}
	var m message
	if c.json && errors.As(err, &m) {
		// iproute2 closes its JSON array before the error.
		fmt.Fprintln(stdout, "[]")
	}
	if errors.Is(err, errUsage) {
		fmt.Fprint(stderr, usage)
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// matches reports whether word abbreviates (is a prefix of) the keyword,
// as iproute2 accepts "l" for "link" and "sh" for "show".
func matches(word, keyword string) bool { return word != "" && strings.HasPrefix(keyword, word) }

// printJSON writes v as iproute2 does: on one line, or with -p in its
// json_writer's pretty form ("[ {", members indented by 8, "} ]").
func (c *cli) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if c.pretty {
		b, err = pretty(b)
		if err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	return err
}

// pretty re-indents compact JSON the way iproute2's json_writer does: an
// opening bracket or brace is followed by a space when the next token
// opens another one, and by a newline otherwise; members sit 4 spaces
// deeper than their object's level, and objects of an array share the
// array's line ("},{").
func pretty(compact []byte) ([]byte, error) {
	var out bytes.Buffer
	dec := json.NewDecoder(bytes.NewReader(compact))
	dec.UseNumber()
	depth := 0
	afterOpen, first := false, true
	indent := func() { out.WriteString("\n" + strings.Repeat("    ", depth)) }
	inObject := []bool{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		d, isDelim := tok.(json.Delim)
		switch {
		case isDelim && (d == '[' || d == '{'):
			if !first && !afterOpen {
				out.WriteByte(',')
			}
			if afterOpen {
				out.WriteByte(' ')
			}
			out.WriteByte(byte(d))
			depth++
			inObject = append(inObject, d == '{')
			afterOpen = true
		case isDelim:
			depth--
			if afterOpen {
				// An empty array or object.
			} else if inObject[len(inObject)-1] {
				indent()
			} else {
				out.WriteByte(' ')
			}
			inObject = inObject[:len(inObject)-1]
			out.WriteByte(byte(d))
			afterOpen = false
		default:
			inObj := len(inObject) > 0 && inObject[len(inObject)-1]
			if !afterOpen {
				out.WriteByte(',')
			}
			if inObj {
				indent()
				k, _ := json.Marshal(tok)
				out.Write(k)
				out.WriteString(": ")
				// The value follows as the next token.
				val, err := dec.Token()
				if err != nil {
					return nil, err
				}
				if vd, ok := val.(json.Delim); ok {
					return nil, fmt.Errorf("pretty: nested %c not supported", vd)
				}
				vb, _ := json.Marshal(val)
				out.Write(vb)
			} else {
				if afterOpen {
					out.WriteByte(' ')
				}
				vb, _ := json.Marshal(tok)
				out.Write(vb)
			}
			afterOpen = false
		}
		first = false
	}
	return out.Bytes(), nil
}
