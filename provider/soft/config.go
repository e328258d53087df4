package soft

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/link/capture"
	"github.com/rdma-go/rdma-go/provider"
	"github.com/rdma-go/rdma-go/provider/soft/internal/debuglog"
	"github.com/rdma-go/rdma-go/provider/soft/internal/softdev"
	"github.com/rdma-go/rdma-go/provider/soft/service"
	"github.com/rdma-go/rdma-go/wire"
)

// DefaultDeviceName is the name of the loopback soft device every machine has.
const DefaultDeviceName = "rgo0"

// Environment and configuration used by Devices.
const (
	// DevicesEnv lists extra soft devices: "name=addr[,name=addr...]",
	// e.g. "rgo1=198.51.100.1,rgo2=::1". An addr of "auto" on a loopback
	// device picks a free 127.0.0.x address.
	DevicesEnv = "RDMA_GO_DEVICES"
	// LoopbackEnv overrides the loopback device's address ("127.0.0.5"),
	// or disables it ("off").
	LoopbackEnv = "RDMA_GO_LOOPBACK"
	// PortEnv sets the UDP port soft devices listen on and send to,
	// instead of RoCEv2's 4791. Only soft devices using the same port
	// talk to each other; it exists for hosts where the kernel's
	// rdma_rxe owns 4791 on every address.
	PortEnv = "RDMA_GO_PORT"
	// ICRCEnv set to "verify" makes soft devices check the ICRC of every
	// packet, also of those from loopback addresses, which they otherwise
	// trust as the kernel trusts loopback for UDP checksums
	// (softdev.Options.TrustLoopback).
	ICRCEnv = "RDMA_GO_ICRC"
	// ConfigFileEnv names a config file to read instead of the default
	// $XDG_CONFIG_HOME/rdma-go/devices (or ~/.config/rdma-go/devices),
	// then /etc/rdma-go/devices. Each line is "name addr"; # starts a
	// comment.
	ConfigFileEnv = "RDMA_GO_CONFIG"
)

// Device is a soft RoCEv2 device bound to one IP address. Its runtime (the
// UDP link, the transport engine, QP1) starts on the first Open and stops
// when the last context closes.
type Device struct {
	name string
	addr netip.Addr // zero: loopback, auto-selected at open
	auto bool
	guid uint64

	mu   sync.Mutex
	refs int
	run  *softdev.Device
	ctxs map[*Context]struct{} // open contexts, for port events
	down bool                  // the running device's link failed
}

// portDown marks the port down and gives every open context a PORT_ERR
// event.
func (d *Device) portDown() {
	d.setPort(true, func(r *softdev.Device) { r.Host().LinkDowned() }, provider.EventPortErr)
}

// portUp brings the port back after the host service came back, with the
// slot it gave this process, and gives every open context a PORT_ACTIVE
// event.
func (d *Device) portUp(slot uint8) {
	d.setPort(false, func(r *softdev.Device) { r.SetSlot(slot) }, provider.EventPortActive)
}

// setPort sets the port's state, calls f with the running device, and
// gives every open context the event ev.
func (d *Device) setPort(down bool, f func(*softdev.Device), ev provider.EventType) {
	d.mu.Lock()
	d.down = down
	if d.run != nil {
		f(d.run)
	}
	ctxs := make([]*Context, 0, len(d.ctxs))
	for c := range d.ctxs {
		ctxs = append(ctxs, c)
	}
	d.mu.Unlock()
	for _, c := range ctxs {
		c.event(provider.AsyncEvent{Type: ev, Port: 1})
	}
}

// portState is the port's state: ACTIVE, or DOWN once the link failed.
func (d *Device) portState() provider.PortState {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return provider.PortDown
	}
	return provider.PortActive
}

// Name returns the device name (as ibv_get_device_name).
func (d *Device) Name() string { return d.name }

// GUID returns the node GUID in host order (as ibv_get_device_guid): the
// running device's, which for a device attached to the host service is
// the address's (the same in every process sharing it), and otherwise
// one derived from the device's name and address.
func (d *Device) GUID() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.run != nil {
		return d.run.GUID()
	}
	return d.guid
}

// Addr returns the address the device is bound to, or the zero Addr for an
// automatically chosen loopback address that is not open yet.
func (d *Device) Addr() netip.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.run != nil {
		return d.run.Addr()
	}
	return d.addr
}

var registry struct {
	mu      sync.Mutex
	loaded  bool
	devices []*Device
}

// Devices returns the devices this process can open (ibv_get_device_list):
// the loopback device (unless RDMA_GO_LOOPBACK=off), the devices of the
// config file and of RDMA_GO_DEVICES, and those added with AddDevice.
func Devices() ([]*Device, error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if !registry.loaded {
		if err := loadDevices(); err != nil {
			return nil, err
		}
		registry.loaded = true
	}
	return append([]*Device(nil), registry.devices...), nil
}

// DeviceByName returns the named device, or ErrNoDevice.
func DeviceByName(name string) (*Device, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		if d.name == name {
			return d, nil
		}
	}
	return nil, provider.Errorf(provider.ErrNoDevice, "device %q not found", name)
}

// AddDevice registers a soft device bound to addr (any local IPv4 or IPv6
// address). The device opens its UDP port only when first opened.
func AddDevice(name string, addr netip.Addr) (*Device, error) {
	if _, err := Devices(); err != nil {
		return nil, err
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return addDeviceLocked(name, addr, false)
}

// AddLoopbackDevice registers a soft device that binds, when first opened,
// the first address of 127.0.0.1–127.0.0.254 whose RoCE port is free. Many
// such devices, in one process or in many, can run side by side.
func AddLoopbackDevice(name string) (*Device, error) {
	if _, err := Devices(); err != nil {
		return nil, err
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return addDeviceLocked(name, netip.Addr{}, true)
}

func addDeviceLocked(name string, addr netip.Addr, auto bool) (*Device, error) {
	return appendDevice(&registry.devices, name, addr, auto)
}

// appendDevice adds a new device to *list, refusing a bad or duplicate name.
func appendDevice(list *[]*Device, name string, addr netip.Addr, auto bool) (*Device, error) {
	if name == "" || strings.ContainsAny(name, " \t/=,") {
		return nil, provider.Errorf(provider.ErrInvalidArgument, "bad device name %q", name)
	}
	if !auto && !addr.IsValid() {
		return nil, provider.Errorf(provider.ErrInvalidArgument, "device %s: no address", name)
	}
	for _, d := range *list {
		if d.name == name {
			return nil, provider.Errorf(provider.ErrBusy, "device %s already exists", name)
		}
	}
	addr = addr.Unmap()
	d := &Device{name: name, addr: addr, auto: auto, guid: guidFor(name, addr)}
	*list = append(*list, d)
	return d, nil
}

// guidFor derives a stable GUID from the device name and address (see
// service.DeriveGUID).
func guidFor(name string, addr netip.Addr) uint64 {
	return service.DeriveGUID([]byte(name), addr.AsSlice())
}

func loadDevices() error {
	devs, err := configDevices(os.Getenv)
	if err != nil {
		return err
	}
	for _, d := range devs {
		if _, err := addDeviceLocked(d.name, d.addr, d.auto); err != nil {
			return err
		}
	}
	return nil
}

// configDevices returns the devices that the environment (read through
// getenv) and the config file describe, without registering them: the
// loopback device first, then the config file's, then RDMA_GO_DEVICES'.
func configDevices(getenv func(string) string) ([]*Device, error) {
	var devs []*Device
	switch lo := strings.TrimSpace(getenv(LoopbackEnv)); lo {
	case "off", "none", "0":
	case "":
		if _, err := appendDevice(&devs, DefaultDeviceName, netip.Addr{}, true); err != nil {
			return nil, err
		}
	default:
		a, err := netip.ParseAddr(lo)
		if err != nil {
			return nil, provider.Errorf(provider.ErrInvalidArgument, "%s=%q: %v", LoopbackEnv, lo, err)
		}
		if _, err := appendDevice(&devs, DefaultDeviceName, a, false); err != nil {
			return nil, err
		}
	}
	entries, err := configEntries(getenv)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		auto := e[1] == "auto"
		var a netip.Addr
		if !auto {
			if a, err = netip.ParseAddr(e[1]); err != nil {
				return nil, provider.Errorf(provider.ErrInvalidArgument, "device %s: bad address %q: %v", e[0], e[1], err)
			}
		}
		if _, err := appendDevice(&devs, e[0], a, auto); err != nil {
			return nil, err
		}
	}
	return devs, nil
}

// configPaths returns the config files Devices reads, in order of
// preference (it reads the first that exists), and whether the list is
// ConfigFileEnv's one file, which must exist.
func configPaths(getenv func(string) string) (paths []string, named bool) {
	if path := getenv(ConfigFileEnv); path != "" {
		return []string{path}, true
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		if home != "" {
			dir = filepath.Join(home, ".config")
		}
	}
	if dir != "" {
		paths = append(paths, filepath.Join(dir, "rdma-go", "devices"))
	}
	return append(paths, "/etc/rdma-go/devices"), false
}

// ConfigFile returns the config file that lists this process's soft
// devices: ConfigFileEnv's if set, else the first of
// $XDG_CONFIG_HOME/rdma-go/devices (~/.config/rdma-go/devices) and
// /etc/rdma-go/devices that exists, else the first, where a new one goes.
func ConfigFile() string {
	paths, _ := configPaths(os.Getenv)
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return paths[0]
}

// configEntries returns (name, addr) pairs from the config file and the
// environment (read through getenv), in that order.
func configEntries(getenv func(string) string) ([][2]string, error) {
	var out [][2]string
	paths, named := configPaths(getenv)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			if named {
				return nil, fmt.Errorf("verbs: %s: %w", ConfigFileEnv, err)
			}
			continue
		}
		ents, err := parseConfig(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, ents...)
		break
	}
	ents, err := parseEnv(getenv(DevicesEnv))
	if err != nil {
		return nil, err
	}
	return append(out, ents...), nil
}

// parseConfig parses a config file: one "name address" pair a line, with #
// starting a comment and blank lines ignored. source names the file in
// errors.
func parseConfig(r io.Reader, source string) ([][2]string, error) {
	var out [][2]string
	sc := bufio.NewScanner(r)
	for ln := 1; sc.Scan(); ln++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(line)
		if len(fs) == 0 {
			continue
		}
		if len(fs) != 2 {
			return nil, provider.Errorf(provider.ErrInvalidArgument, "%s:%d: want \"name address\", got %q", source, ln, strings.TrimSpace(line))
		}
		out = append(out, [2]string{fs[0], fs[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("verbs: %s: %w", source, err)
	}
	return out, nil
}

// parseEnv parses the value of RDMA_GO_DEVICES: "name=addr[,name=addr...]".
func parseEnv(env string) ([][2]string, error) {
	var out [][2]string
	if env = strings.TrimSpace(env); env == "" {
		return nil, nil
	}
	for _, item := range strings.Split(env, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, provider.Errorf(provider.ErrInvalidArgument, "%s: want name=address, got %q", DevicesEnv, item)
		}
		out = append(out, [2]string{strings.TrimSpace(name), strings.TrimSpace(addr)})
	}
	return out, nil
}

// acquire starts the device's runtime on first use.
func (d *Device) acquire() (*softdev.Device, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.run != nil {
		d.refs++
		return d.run, nil
	}
	var (
		run *softdev.Device
		err error
	)
	if err := capture.StartFromEnv(); err != nil {
		return nil, provider.Errorf(provider.ErrInvalidArgument, "%v", err)
	}
	opts := softdev.Options{ICRC: wire.ICRCIPv4AnyID, OnEvent: routeEvent, GUID: d.guid, OnPortDown: d.portDown}
	switch v := os.Getenv(ICRCEnv); v {
	case "", "auto":
		opts.TrustLoopback = true
	case "verify":
	default:
		return nil, provider.Errorf(provider.ErrInvalidArgument, "%s=%q: want verify or auto", ICRCEnv, v)
	}
	if p := os.Getenv(PortEnv); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return nil, provider.Errorf(provider.ErrInvalidArgument, "%s=%q: want a UDP port number", PortEnv, p)
		}
		opts.Port = uint16(n)
	}
	shared, err := d.attach(opts)
	switch {
	case err != nil:
		return nil, err
	case shared != nil:
		run = shared
	case d.auto:
		// Every 127/8 address is local: take the first one whose RoCE
		// port is free, so several processes share the loopback device.
		for i := 1; i < 255; i++ {
			a := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)})
			opts.GUID = guidFor(d.name, a)
			run, err = softdev.Open(a, opts)
			if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
				break
			}
		}
	default:
		run, err = softdev.Open(d.addr, opts)
	}
	if err != nil {
		if d.auto && errors.Is(err, syscall.EADDRNOTAVAIL) && runtime.GOOS != "linux" {
			// Only Linux answers on all of 127.0.0.0/8 out of the box.
			return nil, fmt.Errorf("verbs: open %s: %w (on %s only the loopback addresses configured on the "+
				"loopback interface can be bound, and 127.0.0.1 is taken: add aliases, e.g. ifconfig lo0 alias "+
				"127.0.0.2, or pick an address with %s or %s)", d.name, err, runtime.GOOS, LoopbackEnv, DevicesEnv)
		}
		if d.auto && errors.Is(err, syscall.EADDRINUSE) {
			// All of 127.0.0.1–254 taken: most likely the kernel's
			// rdma_rxe, which owns the RoCE port on every address.
			return nil, fmt.Errorf("verbs: open %s: the RoCE port of every address 127.0.0.1–127.0.0.254 is taken "+
				"(the kernel's rdma_rxe holds it on all addresses when loaded): move the soft devices to another "+
				"UDP port with %s=PORT, or leave the loopback device out with %s=off and use the kernel's devices: %w",
				d.name, PortEnv, LoopbackEnv, err)
		}
		return nil, fmt.Errorf("verbs: open %s: %w", d.name, err)
	}
	d.run, d.refs, d.down = run, 1, false
	return run, nil
}

// attach runs the device behind the host service when one answers (see
// package service): the service owns the address's RoCE port and this
// process its slot of it. It returns nil, nil when there is no service:
// the device then runs in the process, as it does by default. A loopback
// device attaches to 127.0.0.1, which every process then shares. d.mu is
// held.
func (d *Device) attach(opts softdev.Options) (*softdev.Device, error) {
	path := service.SocketPath()
	if path == "" {
		return nil, nil
	}
	addr := d.addr
	if d.auto {
		addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := service.Attach(ctx, path, addr, service.AttachOptions{
		Port: opts.Port, Logger: debuglog.For("service", nil), OnDown: d.portDown, OnUp: d.portUp})
	if errors.Is(err, service.ErrNoService) {
		debuglog.For("service", nil).Debug("soft: no host service; the device runs in this process", "device", d.name, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verbs: open %s through the host service (%s=off runs it in this process): %w", d.name, service.SocketEnv, err)
	}
	opts.GUID, opts.Slot, opts.Claims = cl.GUID(), cl.Slot(), cl
	return softdev.Start(cl, opts), nil
}

func (d *Device) release() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refs--
	if d.refs > 0 || d.run == nil {
		return nil
	}
	err := d.run.Close()
	d.run = nil
	return err
}
