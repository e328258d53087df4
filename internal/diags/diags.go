// Package diags gathers and prints what infiniband-diags' ibstat and
// ibstatus show about RDMA devices and their ports: the same lines, from
// the verbs attributes of any device and, for a kernel device, from the
// sysfs files those tools read (/sys/class/infiniband/<dev>), so that on a
// kernel device the output is theirs byte for byte.
package diags

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/verbs"
)

// sysfsDir is where the kernel lists its RDMA devices.
var sysfsDir = "/sys/class/infiniband"

// CA is one device as ibstat shows it.
type CA struct {
	Name string
	// Type, FW and HW are the kernel's hca_type, fw_ver and hw_rev files
	// (empty for rxe, and so for the soft device, which shows what rxe
	// shows).
	Type, FW, HW           string
	NodeGUID, SysImageGUID uint64
	Ports                  []Port
}

// Port is one port as ibstat and ibstatus show it.
type Port struct {
	Num       int
	State     verbs.PortState
	PhysState uint8
	// Rate is the kernel's rate file: "2.5 Gb/sec (1X SDR)".
	Rate       string
	LID, SMLID uint16
	LMC        uint8
	CapMask    uint32
	GID0       verbs.GID
	LinkLayer  verbs.LinkLayer
}

// Read opens d and gathers its attributes.
func Read(d *verbs.Device) (CA, error) {
	ctx, err := d.Open()
	if err != nil {
		return CA{}, err
	}
	defer ctx.Close()
	da, err := ctx.QueryDevice()
	if err != nil {
		return CA{}, err
	}
	ca := CA{Name: d.Name(), NodeGUID: da.NodeGUID, SysImageGUID: da.SysImageGUID}
	_, isSoft := ctx.Provider().(*soft.Context)
	dir := filepath.Join(sysfsDir, d.Name())
	if !isSoft {
		ca.Type, ca.FW, ca.HW = sysfs(dir, "hca_type"), sysfs(dir, "fw_ver"), sysfs(dir, "hw_rev")
	}
	for n := 1; n <= int(da.PhysPortCnt); n++ {
		pa, err := ctx.QueryPort(uint8(n))
		if err != nil {
			return CA{}, err
		}
		p := Port{Num: n, State: pa.State, PhysState: pa.PhysState, Rate: RateString(pa.ActiveSpeed, pa.ActiveWidth),
			LID: pa.LID, SMLID: pa.SMLID, LMC: pa.LMC, CapMask: pa.PortCapFlags, LinkLayer: pa.LinkLayer}
		if g, err := ctx.QueryGID(uint8(n), 0); err == nil {
			p.GID0 = g
		}
		if !isSoft {
			if r := sysfs(dir, "ports", fmt.Sprint(n), "rate"); r != "" {
				p.Rate = r
			}
		}
		ca.Ports = append(ca.Ports, p)
	}
	return ca, nil
}

// sysfs reads one sysfs file, without its newline; "" when it is absent.
func sysfs(parts ...string) string {
	b, err := os.ReadFile(filepath.Join(parts...))
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\n")
}

// RateString is the kernel's rate file for an active speed and width
// (ibv_port_attr's encodings): "<Gb/s> Gb/sec (<width>X <speed>)".
func RateString(speed, width uint8) string {
	var tenths int // of a Gb/s per lane
	name := ""
	switch speed {
	case 2:
		tenths, name = 50, "DDR"
	case 4:
		tenths, name = 100, "QDR"
	case 8:
		tenths, name = 100, "FDR10"
	case 16:
		tenths, name = 140, "FDR"
	case 32:
		tenths, name = 250, "EDR"
	case 64:
		tenths, name = 500, "HDR"
	case 128:
		tenths, name = 1000, "NDR"
	default:
		tenths, name = 25, "SDR"
	}
	lanes := map[uint8]int{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}[width]
	if lanes == 0 {
		lanes = 1
	}
	r := tenths * lanes
	half := ""
	if r%10 != 0 {
		half = ".5"
	}
	return fmt.Sprintf("%d%s Gb/sec (%dX %s)", r/10, half, lanes, name)
}

// ibstat's names of the port states and physical states.
var (
	stateNames     = []string{"???", "Down", "Initializing", "Armed", "Active"}
	physStateNames = []string{"No state change", "Sleep", "Polling", "Disabled", "PortConfigurationTraining",
		"LinkUp", "LinkErrorRecovery", "PhyTest"}
)

func name(names []string, i int) string {
	if i < 0 || i >= len(names) {
		return "???"
	}
	return names[i]
}

// statRate is ibstat's Rate: the whole Gb/s of the rate file ("2.5" for
// the 1X SDR rate), and " (FDR10)" for an FDR10 link.
func statRate(rate string) string {
	f := strings.Fields(rate)
	if len(f) == 0 {
		return "0"
	}
	v := f[0]
	if v != "2.5" {
		v, _, _ = strings.Cut(v, ".")
	}
	if strings.HasSuffix(rate, "FDR10)") {
		v += " (FDR10)"
	}
	return v
}

func linkLayer(l verbs.LinkLayer) string {
	if l == verbs.LinkLayerEthernet {
		return "Ethernet"
	}
	return "InfiniBand"
}

// portGUID is the port GUID ibstat shows: the interface ID of GID 0.
func portGUID(g verbs.GID) uint64 {
	var v uint64
	for _, b := range g[8:] {
		v = v<<8 | uint64(b)
	}
	return v
}

// WriteIbstat prints ca as ibstat does: the CA header and, unless short,
// every port; port > 0 prints that port alone in ibstat's unindented form.
func WriteIbstat(w io.Writer, ca CA, short bool, port int) {
	if port > 0 {
		fmt.Fprintf(w, "CA: '%s'\n", ca.Name)
		writePort(w, ca.Ports[port-1], "", "")
		return
	}
	fmt.Fprintf(w, "CA '%s'\n", ca.Name)
	fmt.Fprintf(w, "\tCA type: %s\n\tNumber of ports: %d\n\tFirmware version: %s\n\tHardware version: %s\n",
		ca.Type, len(ca.Ports), ca.FW, ca.HW)
	fmt.Fprintf(w, "\tNode GUID: 0x%016x\n\tSystem image GUID: 0x%016x\n", ca.NodeGUID, ca.SysImageGUID)
	if short {
		return
	}
	for _, p := range ca.Ports {
		writePort(w, p, "\t", "\t\t")
	}
}

// writePort prints a port's block: its header indented by head, its
// lines by in.
func writePort(w io.Writer, p Port, head, in string) {
	fmt.Fprintf(w, "%sPort %d:\n", head, p.Num)
	fmt.Fprintf(w, "%sState: %s\n%sPhysical state: %s\n%sRate: %s\n", in, name(stateNames, int(p.State)),
		in, name(physStateNames, int(p.PhysState)), in, statRate(p.Rate))
	fmt.Fprintf(w, "%sBase lid: %d\n%sLMC: %d\n%sSM lid: %d\n%sCapability mask: 0x%08x\n", in, p.LID, in, p.LMC, in, p.SMLID, in, p.CapMask)
	fmt.Fprintf(w, "%sPort GUID: 0x%016x\n%sLink layer: %s\n", in, portGUID(p.GID0), in, linkLayer(p.LinkLayer))
}

// PortGUIDs are ibstat -p's lines: the port GUIDs that are not zero.
func PortGUIDs(w io.Writer, ca CA) {
	for _, p := range ca.Ports {
		if g := portGUID(p.GID0); g != 0 {
			fmt.Fprintf(w, "0x%016x\n", g)
		}
	}
}

// the kernel's state and phys_state strings, which ibstatus prints.
var (
	kernelStates     = []string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}
	kernelPhysStates = []string{"<unknown>", "Sleep", "Polling", "Disabled", "PortConfigurationTraining",
		"LinkUp", "LinkErrorRecovery", "Phy Test"}
)

// WriteIbstatus prints one port as the ibstatus script does.
func WriteIbstatus(w io.Writer, ca CA, p Port) {
	g := p.GID0
	fmt.Fprintf(w, "Infiniband device '%s' port %d status:\n", ca.Name, p.Num)
	fmt.Fprintf(w, "\tdefault gid:\t %02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x\n",
		g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15])
	fmt.Fprintf(w, "\tbase lid:\t 0x%x\n\tsm lid:\t\t 0x%x\n", p.LID, p.SMLID)
	fmt.Fprintf(w, "\tstate:\t\t %d: %s\n", p.State, name(kernelStates, int(p.State)))
	fmt.Fprintf(w, "\tphys state:\t %d: %s\n", p.PhysState, name(kernelPhysStates, int(p.PhysState)))
	fmt.Fprintf(w, "\trate:\t\t %s\n\tlink_layer:\t %s\n\n", p.Rate, linkLayer(p.LinkLayer))
}
