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
//	rdma-go link delete NAME
//	rdma-go doctor [-d DEV] [--memlock SIZE] [--peer HOST[:PORT]] [--timeout DUR]
//
// -j prints JSON, -p pretty-prints it. doctor checks what stands between
// a program and a working device and says what to do about each finding;
// its exit status is 1 when a finding is an error.
package main

import (
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
where  OBJECT := { link | doctor | help }
       OPTIONS := { -j[son] | -p[retty] | -V[ersion] }

       rdma-go link show [DEV[/PORT]]
       rdma-go link add NAME type rgo { addr IP | addr auto | netdev NETDEV }
       rdma-go link delete NAME
       rdma-go doctor [ -d DEV ] [ --memlock SIZE ] [ --peer HOST[:PORT] ] [ --timeout DURATION ]
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
	case matches(obj, "doctor"):
		return c.doctor(ctx, rest)
	case matches(obj, "help"):
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "Object \"%s\" is unknown, try \"rdma-go help\".\n", obj)
		return 1
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

// printJSON writes v as iproute2 does: one line, or indented with -p.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	if c.pretty {
		enc.SetIndent("", "    ")
	}
	return enc.Encode(v)
}
