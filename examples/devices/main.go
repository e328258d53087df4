// Command devices lists the RDMA devices this process can open and what a
// first RDMA program needs to know about each: its node GUID and transport,
// the limits that size queues and memory regions, its ports (state, MTU,
// link layer, speed) and each port's GID table, with the IP address every
// RoCE GID stands for and the GID index to use as the source GID.
//
//	go run ./examples/devices           # every device (a fresh machine: rgo0)
//	go run ./examples/devices -d rxe0   # only rxe0
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/verbs"
)

// sysfs is where Linux describes its kernel RDMA devices.
const sysfs = "/sys/class/infiniband"

// softName is the soft device devices adds when no device exists at all.
const softName = "devices0"

// main parses -d and runs the program; errors go to stderr, exit status 1.
func main() {
	o := exdev.Flags()
	flag.Parse()
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "devices:", err)
		os.Exit(1)
	}
}

// run prints the device o.Device names, or every device verbs.Devices lists.
// When there is none at all (the default soft device rgo0 turned off with
// RDMA_GO_LOOPBACK=off, none configured, no kernel device), it makes one soft
// device with o.Add, so that there is something to look at.
func run(w io.Writer, o *exdev.Options) error {
	var devs []*verbs.Device
	if o.Device != "" {
		d, err := verbs.DeviceByName(o.Device)
		if err != nil {
			return fmt.Errorf("choosing the device: %w", err)
		}
		devs = append(devs, d)
	} else {
		var err error
		if devs, err = verbs.Devices(); err != nil {
			return fmt.Errorf("listing devices: %w", err)
		}
		if len(devs) == 0 {
			d, err := o.Add(softName)
			if err != nil {
				return fmt.Errorf("no RDMA device, and adding soft device %s failed: %w", softName, err)
			}
			fmt.Fprintf(w, "no RDMA device is configured: added soft device %s for this run\n\n", d.Name())
			devs = append(devs, d)
		}
	}
	var errs []error
	for i, d := range devs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		// One device that cannot be opened (its address taken, a kernel
		// device gone) should not hide the others.
		if err := describe(w, d); err != nil {
			fmt.Fprintf(w, "%s: %v\n", d.Name(), err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// describe opens d (ibv_open_device), queries it and prints what it found.
func describe(w io.Writer, d *verbs.Device) error {
	c, err := d.Open()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer c.Close()
	a, err := c.QueryDevice()
	if err != nil {
		return fmt.Errorf("query device: %w", err)
	}
	_, isSoft := d.Provider().(*soft.Device)
	kind := "kernel device (" + filepath.Join(sysfs, d.Name()) + ")"
	if isSoft {
		kind = "soft RoCEv2 device (rdma-go's, running in this process over UDP)"
	}
	fmt.Fprintf(w, "%s: %s\n", d.Name(), kind)
	// A soft device learns an automatically chosen address when it is
	// opened, so ask the device only now.
	if ip := d.Addr(); ip.IsValid() {
		fmt.Fprintf(w, "  IP address     %s (rdmacm finds the device by it)\n", ip)
	} else {
		fmt.Fprintf(w, "  IP address     none\n")
	}
	fmt.Fprintf(w, "  node GUID      %s\n", guid(d.GUID()))
	var ll verbs.LinkLayer
	if a.PhysPortCnt > 0 {
		if pa, err := c.QueryPort(1); err == nil {
			ll = pa.LinkLayer
		}
	}
	fmt.Fprintf(w, "  transport      %s\n", transport(d.Name(), ll, isSoft))

	// The limits a program runs into first: how many objects it may
	// create, how big a queue and a work request may be, and whether (and
	// how) remote atomics work.
	fmt.Fprintf(w, "  limits         %d QPs, %d CQs of up to %d entries, %d MRs, %d PDs\n",
		a.MaxQP, a.MaxCQ, a.MaxCQE, a.MaxMR, a.MaxPD)
	fmt.Fprintf(w, "                 max MR size %s\n", size(a.MaxMRSize))
	fmt.Fprintf(w, "                 %d work requests per queue, %d SGEs per work request (%d for RDMA READ)\n",
		a.MaxQPWR, a.MaxSGE, a.MaxSGERD)
	fmt.Fprintf(w, "                 RDMA READs/atomics in flight per QP: %d answered (responder resources), %d issued (initiator depth)\n",
		a.MaxQPRDAtom, a.MaxQPInitRDAtom)
	fmt.Fprintf(w, "  atomics        %s: %s\n", a.AtomicCap, atomicMeaning(a.AtomicCap))

	for p := 1; p <= int(a.PhysPortCnt); p++ {
		if err := describePort(w, c, uint8(p), isSoft); err != nil {
			return err
		}
	}
	return nil
}

// describePort prints port p and its GID table.
func describePort(w io.Writer, c *verbs.Context, p uint8, isSoft bool) error {
	pa, err := c.QueryPort(p)
	if err != nil {
		return fmt.Errorf("query port %d: %w", p, err)
	}
	fmt.Fprintf(w, "  port %d         %s, MTU %s active / %s max, link layer %s",
		p, strings.TrimPrefix(pa.State.String(), "PORT_"), pa.ActiveMTU, pa.MaxMTU, pa.LinkLayer)
	if s := speed(pa.ActiveWidth, pa.ActiveSpeed); s != "" {
		fmt.Fprintf(w, ", %s", s)
	}
	fmt.Fprintln(w)

	// The GID table. On RoCE a GID is an IP address (IPv4 as
	// ::ffff:a.b.c.d): the source GID of a QP's address vector chooses
	// the address its packets leave from, so a program needs the index
	// of the GID that holds the device's address (ibv_rc_pingpong -g N).
	devIP := c.Device().Addr()
	empty := 0
	for i := range pa.GIDTblLen {
		g, err := c.QueryGID(p, i)
		if err != nil || g.IsZero() {
			empty++ // rxe has 1024 entries, most of them unused
			continue
		}
		ip := g.IP()
		note := ""
		switch {
		case devIP.IsValid() && ip == devIP:
			note = fmt.Sprintf("  <- the device's address: use GID index %d as the source GID", i)
		case ip.IsLinkLocalUnicast() && isSoft:
			note = "  (link-local, from the node GUID; not a source GID on a soft device)"
		case ip.IsLinkLocalUnicast():
			note = "  (link-local)"
		}
		if !isSoft {
			if nd := sysfsAttr(c.Device().Name(), p, "gid_attrs/ndevs", i); nd != "" {
				note = " on " + nd + note // the network interface it belongs to
			}
		}
		fmt.Fprintf(w, "    GID[%d]  %-40s %-8s IP %s%s\n", i, g, gidType(c.Device().Name(), p, i, isSoft), ip, note)
	}
	if empty > 0 {
		fmt.Fprintf(w, "    (%d empty GID entries not shown)\n", empty)
	}
	return nil
}

// guid formats a node GUID as libibverbs' tools do: four groups of four
// hex digits.
func guid(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// transport names the transport. verbs has no transport query: iWARP
// devices say so in sysfs (node type RNIC); everything else here, the soft
// device included, runs the InfiniBand transport, over an InfiniBand
// fabric or, as RoCE, over Ethernet/IP.
func transport(name string, ll verbs.LinkLayer, isSoft bool) string {
	if !isSoft {
		if nt, err := os.ReadFile(filepath.Join(sysfs, name, "node_type")); err == nil && strings.Contains(string(nt), "RNIC") {
			return "iWARP (RDMA over TCP)"
		}
	}
	if ll == verbs.LinkLayerEthernet {
		return "InfiniBand transport over Ethernet/IP (RoCE)"
	}
	return "InfiniBand"
}

// atomicMeaning says what a device's atomic capability promises.
func atomicMeaning(a verbs.AtomicCap) string {
	switch a {
	case verbs.AtomicNone:
		return "no remote atomics (FETCH_AND_ADD and CMP_AND_SWP fail)"
	case verbs.AtomicHCA:
		return "atomic against the other atomics of this device, not against CPU stores or other devices"
	case verbs.AtomicGlob:
		return "atomic against every access to the memory, the CPU's too"
	}
	return "unknown"
}

// size formats a byte count.
func size(n uint64) string {
	if n == ^uint64(0) {
		return "unlimited (2^64-1 bytes)"
	}
	for _, u := range []struct {
		shift uint
		name  string
	}{{60, "EiB"}, {50, "PiB"}, {40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// speed decodes a port's active width and speed (IB codes, as
// ibv_devinfo prints them) into lanes × Gb/s; "" when the device does not
// report them.
func speed(width, sp uint8) string {
	lanes := map[uint8]int{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}[width]
	gbps := map[uint8]float64{1: 2.5, 2: 5, 4: 10, 8: 10, 16: 14, 32: 25, 64: 50, 128: 100}[sp]
	if lanes == 0 || gbps == 0 {
		return ""
	}
	if lanes == 1 {
		return fmt.Sprintf("1X %.1f Gb/s", gbps)
	}
	return fmt.Sprintf("%dX %.1f Gb/s = %.1f Gb/s", lanes, gbps, float64(lanes)*gbps)
}

// gidType is the type of GID table entry i: a kernel device tells in
// sysfs; a soft device has RoCE v2 GIDs only. verbs has no
// ibv_query_gid_type.
func gidType(name string, port uint8, i int, isSoft bool) string {
	if isSoft {
		return verbs.GIDTypeRoCEv2.String()
	}
	if t := sysfsAttr(name, port, "gid_attrs/types", i); t != "" {
		return t // "RoCE v2", "IB/RoCE v1"
	}
	return "?"
}

// sysfsAttr reads a per-GID attribute of a kernel device ("" if absent).
func sysfsAttr(name string, port uint8, dir string, i int) string {
	b, err := os.ReadFile(filepath.Join(sysfs, name, "ports", fmt.Sprint(port), dir, fmt.Sprint(i)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
