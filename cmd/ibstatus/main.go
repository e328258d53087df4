// Command ibstatus shows the status of RDMA ports as infiniband-diags'
// ibstatus script (rdma-core 44.0) does, for soft devices and kernel
// devices alike: the same lines, which for a kernel device are its sysfs
// values.
//
// Usage:
//
//	ibstatus [-h] [devname[:portnum]] ...
//
// Without arguments it shows every port of every device; devname shows all
// ports of one device, devname:portnum one port. -h prints the usage. A
// device that does not exist, or no device at all, ends it with a
// "Fatal error" line and status 255.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rdma-go/rdma-go/internal/diags"
	"github.com/rdma-go/rdma-go/verbs"
)

func main() { os.Exit(run(os.Args, os.Stdout)) }

const usage = "Usage:  ibstatus  [-h] [devname[:portnum]]\n" +
	"\t-h:\tthis help screen\n" +
	"\tExamples:\n" +
	"\t\tibstatus mthca1\t\t# shows status of all ports of 'mthca1'\n" +
	"\t\tibstatus mthca0:2\t# shows status port number 2 of 'mthca0'\n" +
	"\t\tibstatus\t\t# default: shows status of all 'mthca0' ports\n"

// run is the whole program: args is the command line with argv[0] first.
// The script writes everything, errors too, to standard output.
func run(args []string, stdout io.Writer) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	fatal := func(format string, a ...any) int {
		fmt.Fprintf(out, "Fatal error:  "+format+"\n", a...)
		return 255
	}
	for _, a := range args[1:] {
		if a == "-h" {
			fmt.Fprint(out, usage)
			return 255
		}
	}
	devs, err := verbs.Devices()
	if err != nil || len(devs) == 0 {
		return fatal("No devices")
	}
	targets := args[1:]
	if len(targets) == 0 {
		for _, d := range devs {
			targets = append(targets, d.Name())
		}
	}
	for _, t := range targets {
		name, portStr, onePort := strings.Cut(t, ":")
		var dev *verbs.Device
		for _, d := range devs {
			if d.Name() == name {
				dev = d
			}
		}
		if dev == nil {
			return fatal("device '%s': sys files not found (/sys/class/infiniband/%s/ports)", name, name)
		}
		ca, err := diags.Read(dev)
		if err != nil {
			return fatal("device '%s': %v", name, err)
		}
		for _, p := range ca.Ports {
			if onePort {
				if n, err := strconv.Atoi(portStr); err != nil || n != p.Num {
					continue
				}
			}
			diags.WriteIbstatus(out, ca, p)
		}
	}
	return 0
}
