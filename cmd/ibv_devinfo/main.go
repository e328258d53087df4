// Command ibv_devinfo prints the attributes of the RDMA devices and their
// ports, like rdma-core 44.0's ibv_devinfo (libibverbs/examples/devinfo.c):
// same options, same output byte for byte, same messages and exit codes.
//
// Usage:
//
//	ibv_devinfo [-d <dev>] [-i <port>] [-l] [-v]
//
// -d/--ib-dev shows only the named device, -i/--ib-port only that port,
// -l/--list prints the device names, -v/--verbose adds every attribute.
// The exit status is the OR of the per-device codes: 1 the device cannot be
// opened, 2 it cannot be queried, 3 it cannot be closed, 4 no such port; 255
// (C's -1) when the device list cannot be read, is empty, or lacks the
// device named by -d, and after a bad option.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/rdma-go/rdma-go/internal/cli"
	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/verbs"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// tool carries the output streams. Standard output is buffered like C's
// stdio and flushed before each message to standard error, so that the two
// keep their order on a terminal.
type tool struct {
	out    *bufio.Writer
	stderr io.Writer
}

func (t *tool) errorf(format string, args ...any) {
	t.out.Flush()
	fmt.Fprintf(t.stderr, format, args...)
}

// run is the whole program: args is the command line with argv[0] first.
// It returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	t := &tool{out: bufio.NewWriter(stdout), stderr: stderr}
	defer t.out.Flush()
	return t.main(args) & 0xff
}

func (t *tool) main(args []string) int {
	prog := "ibv_devinfo"
	if len(args) > 0 {
		prog = args[0]
		args = args[1:]
	}
	p := getopt.New(prog, "d:i:lv", []getopt.Option{
		{Short: 'd', Long: "ib-dev", Arg: getopt.RequiredArg},
		{Short: 'i', Long: "ib-port", Arg: getopt.RequiredArg},
		{Short: 'l', Long: "list", Arg: getopt.NoArg},
		{Short: 'v', Long: "verbose", Arg: getopt.NoArg},
	})
	// C's getopt_long reports an error only when it reaches the bad
	// argument, after the options before it have taken effect (-l or a bad
	// -i ends the program first): print the message ourselves, in order.
	p.Opterr = false
	r, perr := p.Parse(args)

	var (
		devName  string
		haveName bool
		ibPort   int
		verbose  bool
	)
	for _, o := range r.Opts {
		switch o.Option.Short {
		case 'd':
			devName, haveName = o.Value, true
		case 'i':
			n, _, _ := getopt.Strtol(o.Value, 0)
			ibPort = int(int32(n)) // int ib_port = strtol(...)
			if ibPort <= 0 {
				writeUsage(t.out, prog)
				return 1
			}
		case 'v':
			verbose = true
		case 'l':
			devs, err := verbs.Devices()
			if err != nil {
				t.errorf("Failed to get IB devices list: %s\n", cli.Strerror(err))
				return -1
			}
			names := make([]string, len(devs))
			for i, d := range devs {
				names[i] = d.Name()
			}
			writeList(t.out, names)
			return 0
		}
	}
	if perr != nil {
		t.errorf("%s\n", perr.Error())
		writeUsage(t.out, prog)
		return -1
	}

	devs, err := verbs.Devices()
	if err != nil {
		t.errorf("Failed to get IB devices list: %s\n", cli.Strerror(err))
		return -1
	}
	// print_hca_cap takes the port as a uint8_t: -i 256 means all ports.
	port := uint8(ibPort)
	ret := 0
	if haveName {
		var dev *verbs.Device
		for _, d := range devs {
			if d.Name() == devName {
				dev = d
				break
			}
		}
		if dev == nil {
			t.errorf("IB device '%s' wasn't found\n", devName)
			return -1
		}
		ret |= t.printHCA(dev, port, verbose)
	} else {
		if len(devs) == 0 {
			t.errorf("No IB devices found\n")
			return -1
		}
		for _, d := range devs {
			ret |= t.printHCA(d, port, verbose)
		}
	}
	return ret
}

// printHCA prints one device (all ports, or only ibPort when non-zero) and
// returns devinfo.c's print_hca_cap code.
func (t *tool) printHCA(dev *verbs.Device, ibPort uint8, verbose bool) (rc int) {
	ctx, err := dev.Open()
	if err != nil {
		t.errorf("Failed to open device\n")
		return 1
	}
	defer func() {
		if ctx.Close() != nil {
			t.errorf("Failed to close device")
			rc = 3
		}
	}()
	attr, err := ctx.QueryDevice()
	if err != nil {
		t.errorf("Failed to query device props\n")
		return 2
	}
	if ibPort != 0 && ibPort > attr.PhysPortCnt {
		t.errorf("Invalid port requested for device\n")
		return 4
	}
	// The soft device, like rxe, is an InfiniBand-transport device; the
	// verbs API has no transport query (ib_dev->transport_type).
	tr := verbs.TransportIB
	// The verbs API has no ibv_query_device_ex: the extended attributes
	// are printed as the zeros rxe reports (see extAttr).
	var ext extAttr
	writeDevice(t.out, dev.Name(), tr, &attr, &ext, verbose)
	for p := uint32(1); p <= uint32(attr.PhysPortCnt); p++ {
		if ibPort != 0 && p != uint32(ibPort) {
			continue
		}
		pa, err := ctx.QueryPort(uint8(p))
		if err != nil {
			t.errorf("Failed to query port %d props\n", p)
			return int(verbs.ErrnoOf(err)) // ibv_query_port returns the errno
		}
		writePort(t.out, p, &pa, tr, verbose)
		if verbose {
			for i := 0; i < pa.GIDTblLen; i++ {
				g, err := ctx.QueryGID(uint8(p), i)
				if err != nil {
					t.errorf("Failed to query gid to port %d, index %d\n", p, i)
					return -1 // ibv_query_gid returns -1
				}
				// Every GID of the soft device is a RoCE v2 GID; the
				// verbs API has no ibv_query_gid_type.
				writeGID(t.out, i, gidEntry{GID: g, Type: verbs.GIDTypeRoCEv2}, pa.LinkLayer)
			}
		}
		io.WriteString(t.out, "\n")
	}
	return 0
}
