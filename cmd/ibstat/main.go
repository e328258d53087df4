// Command ibstat shows the RDMA devices and their ports as infiniband-diags'
// ibstat (rdma-core 44.0) does: the same options, output, messages and exit
// codes, for soft devices and kernel devices alike.
//
// Usage:
//
//	ibstat [options] <ca_name> [portnum]
//
// -l/--list_of_cas lists the device names, -s/--short leaves the ports out,
// -p/--port_list prints the port GUIDs; -h/--help prints the usage (exit 2),
// -V/--version the version. -z/--config, -v/--verbose and -d/--debug are
// accepted and change nothing. A device that cannot be found ends the
// program with an ibpanic message and status 255.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/rdma-go/rdma-go/internal/diags"
	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/internal/version"
	"github.com/rdma-go/rdma-go/verbs"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

const usage = `
Usage: ibstat [options] <ca_name> [portnum]

Options:
  --list_of_cas, -l       list all IB devices
  --short, -s             short output
  --port_list, -p         show port list
  --config, -z <config>   use config file, default: /etc/infiniband-diags/ibdiag.conf
  --verbose, -v           increase verbosity level
  --debug, -d             raise debug level
  --help, -h              help message
  --version, -V           show version

Examples:
  ibstat -l       # list all IB devices
  ibstat mthca0 2 # stat port 2 of 'mthca0'

`

// run is the whole program: args is the command line with argv[0] first.
func run(args []string, stdout, stderr io.Writer) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	pid := os.Getpid()
	p := getopt.New("ibstat", "lspz:vdhV", []getopt.Option{
		{Short: 'l', Long: "list_of_cas", Arg: getopt.NoArg},
		{Short: 's', Long: "short", Arg: getopt.NoArg},
		{Short: 'p', Long: "port_list", Arg: getopt.NoArg},
		{Short: 'z', Long: "config", Arg: getopt.RequiredArg},
		{Short: 'v', Long: "verbose", Arg: getopt.NoArg},
		{Short: 'd', Long: "debug", Arg: getopt.NoArg},
		{Short: 'h', Long: "help", Arg: getopt.NoArg},
		{Short: 'V', Long: "version", Arg: getopt.NoArg},
	})
	p.Opterr = false
	r, err := p.Parse(args[1:])
	if err != nil {
		fmt.Fprintf(stderr, "%s\n%s", err, usage)
		return 2
	}
	var list, short, ports bool
	for _, o := range r.Opts {
		switch o.Option.Short {
		case 'l':
			list = true
		case 's':
			short = true
		case 'p':
			ports = true
		case 'h':
			fmt.Fprint(stderr, usage)
			return 2
		case 'V':
			fmt.Fprintf(stderr, "ibstat BUILD VERSION: %s\n", version.String())
			return 0
		}
	}
	devs, err := verbs.Devices()
	if err != nil {
		fmt.Fprintf(stderr, "ibpanic: [%d] main: can't list IB device names: %v\n", pid, err)
		return 255
	}
	if list {
		for _, d := range devs {
			fmt.Fprintln(out, d.Name())
		}
		return 0
	}
	if len(r.Args) == 0 {
		for _, d := range devs {
			ca, err := diags.Read(d)
			if err != nil {
				out.Flush()
				fmt.Fprintf(stderr, "ibwarn: [%d] main: stat of IB device '%s' failed\n", pid, d.Name())
				continue
			}
			if ports {
				diags.PortGUIDs(out, ca)
			} else {
				diags.WriteIbstat(out, ca, short, 0)
			}
		}
		return 0
	}
	name := r.Args[0]
	port := 0
	if len(r.Args) > 1 {
		n, _, _ := getopt.Strtol(r.Args[1], 0)
		port = int(int32(n))
	}
	var dev *verbs.Device
	for _, d := range devs {
		if d.Name() == name {
			dev = d
		}
	}
	if dev == nil {
		fmt.Fprintf(stderr, "ibpanic: [%d] main: '%s' IB device can't be found: Success\n", pid, name)
		return 255
	}
	ca, err := diags.Read(dev)
	if err == nil && port > len(ca.Ports) {
		fmt.Fprintf(stderr, "ibwarn: [%d] ca_stat: CA: '%s' has no port number %d - max (%d)\n", pid, name, port, len(ca.Ports))
		err = os.ErrNotExist
	}
	if err != nil {
		fmt.Fprintf(stderr, "ibpanic: [%d] main: stat of IB device '%s' failed: No such file or directory\n", pid, name)
		return 255
	}
	if ports {
		diags.PortGUIDs(out, ca)
		return 0
	}
	diags.WriteIbstat(out, ca, short, max(port, 0))
	return 0
}
