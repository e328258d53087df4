// Command ibv_devices lists the RDMA devices and their node GUIDs, like
// rdma-core 44.0's ibv_devices (libibverbs/examples/device_list.c). It takes
// no options and ignores its arguments. It exits 0, even when there is no
// device, and 1 (after "Failed to get IB devices list: <strerror>") when the
// list cannot be read.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rdma-go/rdma-go/internal/cli"
	"github.com/rdma-go/rdma-go/verbs"
)

func main() {
	os.Exit(run(os.Stdout, os.Stderr))
}

// entry is one line of the list.
type entry struct {
	Name string
	GUID uint64 // node GUID in host order
}

// run is the whole program; it returns the exit status.
func run(stdout, stderr io.Writer) int {
	devs, err := verbs.Devices()
	if err != nil {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %s\n", cli.Strerror(err))
		return 1
	}
	list := make([]entry, len(devs))
	for i, d := range devs {
		list[i] = entry{Name: d.Name(), GUID: d.GUID()}
	}
	out := bufio.NewWriter(stdout)
	writeDevices(out, list)
	out.Flush()
	return 0
}

// writeDevices writes the two header lines and one line per device.
func writeDevices(w io.Writer, list []entry) {
	fmt.Fprintf(w, "    %s\t   node GUID\n", pad16("device"))
	fmt.Fprintf(w, "    %s\t----------------\n", pad16("------"))
	for _, e := range list {
		fmt.Fprintf(w, "    %s\t%016x\n", pad16(e.Name), e.GUID)
	}
}

// pad16 is C's "%-16s": s padded with spaces to 16 bytes (Go's %-16s
// counts runes).
func pad16(s string) string {
	if len(s) >= 16 {
		return s
	}
	return s + strings.Repeat(" ", 16-len(s))
}
