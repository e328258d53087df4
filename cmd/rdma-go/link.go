package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rdma-go/rdma-go/internal/netdev"
	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/verbs"
)

// link runs "link show|add|delete".
func (c *cli) link(args []string) error {
	if len(args) == 0 {
		return c.linkShow(nil)
	}
	switch cmd, rest := args[0], args[1:]; {
	case matches(cmd, "show"), matches(cmd, "list"):
		return c.linkShow(rest)
	case matches(cmd, "add"):
		return c.linkAdd(rest)
	case matches(cmd, "delete"), cmd == "del":
		return c.linkDelete(rest)
	case matches(cmd, "help"):
		fmt.Fprint(c.stdout, usage)
		return nil
	default:
		return message(fmt.Sprintf("Command \"%s\" is unknown, try \"rdma-go link help\".", cmd))
	}
}

// linkJSON is one port in link show -j: iproute2's keys, and for a soft
// device its type and address.
type linkJSON struct {
	IfIndex     int    `json:"ifindex"`
	IfName      string `json:"ifname"`
	Port        int    `json:"port"`
	State       string `json:"state"`
	PhysState   string `json:"physical_state"`
	Netdev      string `json:"netdev,omitempty"`
	NetdevIndex *int   `json:"netdev_index,omitempty"`
	Type        string `json:"type,omitempty"`
	Addr        string `json:"addr,omitempty"`
}

// linkShow prints each device's ports as "rdma link show" does. ifindex is
// a kernel device's index (RDMA netlink's) and a soft device's position in
// the device list (ibv_get_device_list's order).
// A soft device is not opened (another process may be running it): its
// port is ACTIVE when its address is on an interface of this host.
func (c *cli) linkShow(args []string) error {
	// As iproute2: the one argument is DEV/PORT; anything else, a
	// missing or bad port, or a device without that port is a "Wrong
	// device name".
	var want string
	wantPort := 0
	if len(args) > 0 {
		d, p, ok := strings.Cut(args[0], "/")
		n, err := strconv.Atoi(p)
		if len(args) > 1 || !ok || err != nil || n < 1 {
			return message("Wrong device name")
		}
		want, wantPort = d, n
	}
	devs, err := verbs.Devices()
	if err != nil {
		return err
	}
	var links []linkJSON
	found := false
	for i, d := range devs {
		if want != "" && d.Name() != want {
			continue
		}
		found = true
		l, err := describeLink(i, d)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name(), err)
		}
		for _, p := range l {
			if wantPort == 0 || p.Port == wantPort {
				links = append(links, p)
			}
		}
	}
	if want != "" && (!found || len(links) == 0) {
		return message("Wrong device name")
	}
	if c.json {
		if links == nil {
			links = []linkJSON{}
		}
		return c.printJSON(links)
	}
	for _, l := range links {
		line := fmt.Sprintf("link %s/%d state %s physical_state %s ", l.IfName, l.Port, l.State, l.PhysState)
		if l.Netdev != "" {
			line += "netdev " + l.Netdev + " "
		}
		if l.Type != "" {
			line += "type " + l.Type + " addr " + l.Addr + " "
		}
		fmt.Fprintln(c.stdout, line)
	}
	return nil
}

// describeLink returns the ports of device number i.
func describeLink(i int, d *verbs.Device) ([]linkJSON, error) {
	if sd, ok := d.Provider().(*soft.Device); ok {
		return []linkJSON{softLink(i, sd)}, nil
	}
	ctx, err := d.Open()
	if err != nil {
		return nil, err
	}
	defer ctx.Close()
	da, err := ctx.QueryDevice()
	if err != nil {
		return nil, err
	}
	var out []linkJSON
	for p := 1; p <= int(da.PhysPortCnt); p++ {
		pa, err := ctx.QueryPort(uint8(p))
		if err != nil {
			return nil, err
		}
		l := linkJSON{IfIndex: i, IfName: d.Name(), Port: p, State: portState(pa.State), PhysState: physState(pa.PhysState)}
		if k, ok := kernelIndex(d.Name()); ok {
			l.IfIndex = k
		}
		dir := filepath.Join("/sys/class/infiniband", d.Name(), "ports", strconv.Itoa(p), "gid_attrs", "ndevs", "0")
		if b, err := os.ReadFile(dir); err == nil {
			l.Netdev = strings.TrimSpace(string(b))
			if ifi, err := net.InterfaceByName(l.Netdev); err == nil {
				l.NetdevIndex = &ifi.Index
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// softLink describes a soft device's one port without opening it.
func softLink(i int, d *soft.Device) linkJSON {
	l := linkJSON{IfIndex: i, IfName: d.Name(), Port: 1, Type: "rgo", State: "DOWN", PhysState: "DISABLED"}
	addr := d.Addr()
	if !addr.IsValid() {
		l.Addr = "auto"
		addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	} else {
		l.Addr = addr.String()
	}
	if ifi := netdev.Holding(addr); ifi != nil {
		l.Netdev, l.NetdevIndex = ifi.Name, &ifi.Index
		if ifi.Flags&net.FlagUp != 0 {
			l.State, l.PhysState = "ACTIVE", "LINK_UP"
		}
	}
	return l
}

// portState and physState name port states as iproute2's rdma does.
func portState(s verbs.PortState) string {
	names := map[verbs.PortState]string{verbs.PortNOP: "NOP", verbs.PortDown: "DOWN", verbs.PortInit: "INIT",
		verbs.PortArmed: "ARMED", verbs.PortActive: "ACTIVE", verbs.PortActiveDefer: "ACTIVE_DEFER"}
	if n, ok := names[s]; ok {
		return n
	}
	return "UNKNOWN"
}

func physState(s uint8) string {
	names := []string{"NOP", "SLEEP", "POLLING", "DISABLED", "PORT_CONFIGURATION_TRAINING", "LINK_UP", "LINK_ERROR_RECOVERY", "PHY_TEST"}
	if int(s) < len(names) {
		return names[s]
	}
	return "UNKNOWN"
}

// linkAdd adds a soft device to the config file:
// NAME type rgo { addr IP | addr auto | netdev NETDEV }. A netdev gives
// its first address (IPv4 first, then a global IPv6 one), resolved now.
// Another type (rxe, siw) adds a kernel link through RDMA netlink, as
// iproute2 does (it needs CAP_NET_ADMIN).
func (c *cli) linkAdd(args []string) error {
	if len(args) == 0 {
		return message("Please provide a link name to add.")
	}
	if len(args) != 5 || !matches(args[1], "type") {
		return errUsage
	}
	name, typ, key, val := args[0], args[2], args[3], args[4]
	if typ != "rgo" {
		// A kernel link (rxe, siw), as iproute2 adds it.
		if !matches(key, "netdev") {
			return errUsage
		}
		if err := kernelLinkAdd(name, typ, val); err != nil {
			return fmt.Errorf("link add %s type %s netdev %s: %w", name, typ, val, err)
		}
		return nil
	}
	if strings.ContainsAny(name, " \t/=,#") || name == "" {
		return fmt.Errorf("bad device name %q", name)
	}
	path := soft.ConfigFile()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if _, ok := configLine(old, name); ok {
		return fmt.Errorf("device %s exists already (%s)", name, path)
	}
	if _, err := verbs.DeviceByName(name); err == nil {
		return fmt.Errorf("device %s exists already", name)
	}
	var addr string
	switch {
	case matches(key, "addr"):
		if val != "auto" {
			a, err := netip.ParseAddr(val)
			if err != nil {
				return fmt.Errorf("bad address %q: %v", val, err)
			}
			val = a.String()
		}
		addr = val
	case matches(key, "netdev"):
		a, err := netdevAddr(val)
		if err != nil {
			return err
		}
		addr = a.String()
	default:
		return errUsage
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	if err := writeFileAtomic(path, append(old, fmt.Sprintf("%s %s\n", name, addr)...)); err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(c.stdout, "added %s (addr %s) to %s\n", name, addr, path)
	}
	return nil
}

// netdevAddr returns the address a soft device on netdev uses: its first
// IPv4 address, or else its first global IPv6 one.
func netdevAddr(netdev string) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(netdev)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("netdev %s: %w", netdev, err)
	}
	as, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("netdev %s: %w", netdev, err)
	}
	var v6 netip.Addr
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		p, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		p = p.Unmap()
		if p.Is4() {
			return p, nil
		}
		if !v6.IsValid() && !p.IsLinkLocalUnicast() {
			v6 = p
		}
	}
	if v6.IsValid() {
		return v6, nil
	}
	return netip.Addr{}, fmt.Errorf("netdev %s has no IPv4 or global IPv6 address: add one (ip addr add ADDR/PREFIX dev %s)", netdev, netdev)
}

// linkDelete removes a soft device from the config file.
func (c *cli) linkDelete(args []string) error {
	if len(args) == 0 {
		return message("Please provide device name.")
	}
	if len(args) != 1 {
		return errUsage
	}
	name := args[0]
	path := soft.ConfigFile()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	rest, removed := configLine(old, name)
	if !removed {
		switch {
		case name == soft.DefaultDeviceName:
			return fmt.Errorf("%s is the loopback device every process has: %s=off leaves it out", name, soft.LoopbackEnv)
		case strings.Contains(","+os.Getenv(soft.DevicesEnv), ","+name+"="):
			return fmt.Errorf("%s comes from the environment (%s), not from %s", name, soft.DevicesEnv, path)
		}
		if d, err := verbs.DeviceByName(name); err == nil {
			if _, ok := d.Provider().(*soft.Device); !ok {
				if err := kernelLinkDel(name); err != nil {
					return fmt.Errorf("link delete %s: %w", name, err)
				}
				return nil
			}
		}
		return fmt.Errorf("no soft device %s in %s", name, path)
	}
	if err := writeFileAtomic(path, rest); err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(c.stdout, "deleted %s from %s\n", name, path)
	}
	return nil
}

// configLine looks for device name in a config file's contents: it
// returns the contents without name's lines, and whether there were any.
func configLine(conf []byte, name string) (rest []byte, found bool) {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(conf))
	for sc.Scan() {
		line := sc.Text()
		body, _, _ := strings.Cut(line, "#")
		if fs := strings.Fields(body); len(fs) > 0 && fs[0] == name {
			found = true
			continue
		}
		out.WriteString(line + "\n")
	}
	return out.Bytes(), found
}

// writeFileAtomic replaces path's contents through a temporary file and a
// rename, so that a process reading the config never sees half of it.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".devices-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
