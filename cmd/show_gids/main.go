// Command show_gids prints the GID tables of the RDMA devices as the
// show_gids script of Mellanox/NVIDIA OFED does: one line per GID that is
// set, with its device, port, index, the IPv4 address of an IPv4-mapped
// GID, its RoCE version and its network interface, then n_gids_found=N.
// rdma-core (44.0) does not ship show_gids; this is the table that RoCE
// users know from OFED and from the guides that tell them to pick a GID
// index with it (ib_write_bw -x, ibv_rc_pingpong -g).
//
// Usage:
//
//	show_gids [DEV]
//
// With no argument it shows every device; DEV names one (or, as in the
// script, several separated by spaces in the one argument). It takes no
// options and exits 0, even for a device that does not exist, which it
// reports on standard error.
//
// A kernel device is read from sysfs, the files the script reads:
// /sys/class/infiniband/DEV/ports/N/gids/I for the GID, gid_attrs/types/I
// for its type ("RoCE v2" shows as v2, "IB/RoCE v1" as v1) and
// gid_attrs/ndevs/I for its interface; so its output is the script's byte
// for byte. Entries whose GID is all zeros (unused) or fe80:: with a zero
// interface ID are left out, as the script does. Ports and indexes are
// listed in the order ls lists the files: by name, so index 10 comes
// before index 2.
//
// A soft device has no sysfs entry: its GIDs come from the verbs API
// (QueryGID on an open context), every one of type v2 (the soft device
// speaks RoCE v2 only), and its interface is the one that holds the
// device's IP address (lo for a loopback address).
package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-go/rdma-go/internal/netdev"
	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/verbs"
)

// sysfsDir is where the kernel lists its RDMA devices, and listDevices
// lists the verbs devices (the soft ones are taken from it); tests replace
// both.
var (
	sysfsDir    = "/sys/class/infiniband"
	listDevices = verbs.Devices
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// entry is one line of the table.
type entry struct {
	Dev         string
	Port, Index string // as the sysfs file names spell them
	GID         string // sysfs form: eight groups of four hex digits
	Ver         string // "v2", "v1", or "" when the type is unknown
	Netdev      string
}

// The two header lines of the script, tabs and trailing spaces included.
const header = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV\n" +
	"---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---\n"

// run is the whole program: args is the command line with argv[0] first.
// It returns the exit status, always 0 as the script's.
func run(args []string, stdout, stderr io.Writer) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	warn := func(format string, a ...any) {
		out.Flush() // keep stdout and stderr in order on a terminal
		fmt.Fprintf(stderr, "show_gids: "+format+"\n", a...)
	}
	io.WriteString(out, header)

	softDevs := map[string]*verbs.Device{}
	devs, err := listDevices()
	if err != nil {
		warn("cannot list the soft devices: %v", err)
	}
	for _, d := range devs {
		if _, ok := d.Provider().(*soft.Device); ok {
			softDevs[d.Name()] = d
		}
	}

	// The script's DEVS=$1, unquoted in "for d in $DEVS": the first
	// argument, split at white space; every device when it is empty.
	var names []string
	if len(args) > 1 && args[1] != "" {
		names = strings.Fields(args[1])
	} else {
		names = allNames(softDevs)
	}

	n := 0
	for _, name := range names {
		var ents []entry
		var err error
		if _, serr := os.Stat(filepath.Join(sysfsDir, name, "ports")); serr == nil {
			ents, err = kernelGIDs(name)
		} else if d := softDevs[name]; d != nil {
			ents, err = softGIDs(d)
		} else {
			err = fmt.Errorf("cannot access '%s': No such file or directory", filepath.Join(sysfsDir, name, "ports")+"/")
		}
		if err != nil {
			warn("%v", err)
		}
		for _, e := range ents {
			writeEntry(out, e)
		}
		n += len(ents)
	}
	fmt.Fprintf(out, "n_gids_found=%d\n", n)
	return 0
}

// allNames are the kernel's devices (the entries of sysfsDir) and the soft
// devices, sorted by name as ls sorts the kernel's.
func allNames(softDevs map[string]*verbs.Device) []string {
	var names []string
	if ents, err := os.ReadDir(sysfsDir); err == nil {
		for _, e := range ents {
			names = append(names, e.Name())
		}
	}
	for name := range softDevs {
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names) // a soft device never hides a kernel one
}

// kernelGIDs reads a kernel device's GID tables from sysfs, as the script
// does with ls and cat.
func kernelGIDs(dev string) ([]entry, error) {
	dir := filepath.Join(sysfsDir, dev, "ports")
	ports, err := os.ReadDir(dir) // sorted by name, as ls sorts
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dev, err)
	}
	var ents []entry
	for _, p := range ports {
		pdir := filepath.Join(dir, p.Name())
		gids, err := os.ReadDir(filepath.Join(pdir, "gids"))
		if err != nil {
			return ents, fmt.Errorf("%s port %s: %w", dev, p.Name(), err)
		}
		for _, g := range gids {
			gid := catFile(filepath.Join(pdir, "gids", g.Name()))
			if !shown(gid) {
				continue
			}
			ents = append(ents, entry{Dev: dev, Port: p.Name(), Index: g.Name(), GID: gid,
				Ver:    version(catFile(filepath.Join(pdir, "gid_attrs", "types", g.Name()))),
				Netdev: catFile(filepath.Join(pdir, "gid_attrs", "ndevs", g.Name()))})
		}
	}
	return ents, nil
}

// catFile is the shell's $(cat FILE 2>/dev/null): the file without its
// trailing newlines, "" when it cannot be read (the kernel answers EINVAL
// for the type and interface of an unused entry).
func catFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\n")
}

// shown tells whether the script prints a GID: not an empty entry (all
// zeros), and not the bare link-local prefix fe80:: that some devices
// list with a zero interface ID.
func shown(gid string) bool {
	return gid != "" && gid != "0000:0000:0000:0000:0000:0000:0000:0000" &&
		gid != "fe80:0000:0000:0000:0000:0000:0000:0000"
}

// version is the script's $(echo $type | grep -o "[Vv].*"): the type from
// its first v on, "v2" for "RoCE v2" and "v1" for "IB/RoCE v1".
func version(typ string) string {
	typ = strings.Join(strings.Fields(typ), " ")
	if i := strings.IndexAny(typ, "Vv"); i >= 0 {
		return typ[i:]
	}
	return ""
}

// softGIDs reads a soft device's GID tables through the verbs API: it
// opens the device (starting it, if no one else has it open) and queries
// every entry of every port.
func softGIDs(d *verbs.Device) ([]entry, error) {
	ctx, err := d.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: opening the device: %w", d.Name(), err)
	}
	defer ctx.Close()
	da, err := ctx.QueryDevice()
	if err != nil {
		return nil, fmt.Errorf("%s: querying the device: %w", d.Name(), err)
	}
	// An automatically addressed loopback device has its address once
	// open, which is why this is read here.
	ndev := ""
	if ifi := netdev.Holding(d.Addr()); ifi != nil {
		ndev = ifi.Name
	}
	var ents []entry
	for port := 1; port <= int(da.PhysPortCnt); port++ {
		pa, err := ctx.QueryPort(uint8(port))
		if err != nil {
			return ents, fmt.Errorf("%s: querying port %d: %w", d.Name(), port, err)
		}
		for i := 0; i < pa.GIDTblLen; i++ {
			g, err := ctx.QueryGID(uint8(port), i)
			if err != nil {
				return ents, fmt.Errorf("%s: querying GID %d of port %d: %w", d.Name(), i, port, err)
			}
			gid := sysfsGID(g)
			if !shown(gid) {
				continue
			}
			ents = append(ents, entry{Dev: d.Name(), Port: strconv.Itoa(port), Index: strconv.Itoa(i),
				GID: gid, Ver: "v2", Netdev: ndev})
		}
	}
	// Indexes in ls order, as for a kernel device.
	slices.SortStableFunc(ents, func(a, b entry) int {
		return cmp.Or(strings.Compare(a.Port, b.Port), strings.Compare(a.Index, b.Index))
	})
	return ents, nil
}

// sysfsGID formats a GID as the kernel's gids files do (%pI6): eight
// groups of four lower-case hex digits.
func sysfsGID(g verbs.GID) string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// writeEntry prints one line as the script does: an IPv4-mapped GID (its
// first group 0000) with its address in the IPv4 column, any other with
// that column empty.
func writeEntry(w io.Writer, e entry) {
	if ip, err := ipv4(e.GID); err == nil {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s \t%s\t%s\n", e.Dev, e.Port, e.Index, e.GID, ip, e.Ver, e.Netdev)
		return
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\t\t%s\t%s\n", e.Dev, e.Port, e.Index, e.GID, e.Ver, e.Netdev)
}

// ipv4 is the dotted address in the last two groups of a GID whose first
// group is 0000 (the script's test for an IPv4-mapped GID).
func ipv4(gid string) (string, error) {
	if len(gid) != 39 || !strings.HasPrefix(gid, "0000:") {
		return "", errors.New("not an IPv4-mapped GID")
	}
	var b [4]uint64
	for i, off := range []int{30, 32, 35, 37} {
		v, err := strconv.ParseUint(gid[off:off+2], 16, 8)
		if err != nil {
			return "", fmt.Errorf("GID %s: %w", gid, err)
		}
		b[i] = v
	}
	return fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3]), nil
}
