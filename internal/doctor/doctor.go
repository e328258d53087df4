// Package doctor checks what stands between a program and a working RDMA
// device, and says for each finding what to do: the kernel's RDMA drivers
// and /dev/infiniband, rdma-core's libraries, the soft devices and their
// UDP port, the locked-memory limit, the GID tables, and, given a peer,
// each step of an rdma_cm connection to it (address, route, connect) with
// its timeout. It is the engine of `rdma-go doctor`.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/provider/soft/service"
	"github.com/rdma-go/rdma-go/verbs"
)

// Level grades a finding.
type Level int

// The levels, from fine to broken.
const (
	OK Level = iota
	Info
	Warn
	Error
)

var levelNames = [...]string{"ok", "info", "warn", "error"}

// String returns "ok", "info", "warn" or "error".
func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// MarshalText writes the level's name (for -j).
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// Finding is one line of the report: what was checked, what was found,
// and what to do about it.
type Finding struct {
	Check   string `json:"check"`
	Level   Level  `json:"level"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// KernelProbe is what stands between this process and the kernel's RDMA
// devices: the devices sysfs lists (or why it could not be read), why
// libibverbs.so.1 did not load (nil: it did), and the devices it lists.
type KernelProbe struct {
	Sysfs    []string
	SysfsErr error
	LibErr   error
	Listed   []string
}

// Env is the machine as the checks see it. Tests replace its parts to
// simulate what they diagnose; Default is the real machine.
type Env struct {
	// Kernel probes sysfs and libibverbs (provider/kernel's
	// ProbeDevices, where the kernel provider is built in).
	Kernel func() KernelProbe
	// DevDir is where the uverbs character devices are (/dev/infiniband).
	DevDir string
	// Access reports whether the process may read and write path.
	Access func(path string) error
	// Memlock returns RLIMIT_MEMLOCK's soft and hard limits in bytes
	// (RLIM_INFINITY as ^uint64(0)).
	Memlock func() (cur, max uint64, err error)
	// Devices lists the devices (verbs.Devices).
	Devices func() ([]*verbs.Device, error)
	// Service returns where processes look for the host service ("" when
	// RDMA_GO_SERVICE=off) and whether one answers there (service.Probe).
	Service func() (path string, err error)
}

// Default returns the real machine.
func Default() Env {
	return Env{
		Kernel:  probeKernel,
		DevDir:  "/dev/infiniband",
		Access:  access,
		Memlock: memlock,
		Devices: verbs.Devices,
		Service: probeService,
	}
}

func probeService() (string, error) {
	path := service.SocketPath()
	if path == "" {
		return "", nil
	}
	return path, service.Probe(path)
}

// Config says what to check.
type Config struct {
	Env
	// Device limits the device checks to one device ("" for all).
	Device string
	// Memlock is how much memory the program means to register; the
	// locked-memory limit is checked against it. Zero only reports the
	// limit.
	Memlock uint64
	// Peer, if valid, is an rdma_cm peer to try a connection to.
	Peer netip.AddrPort
	// PeerPortGiven says the user named Peer's port: then nothing
	// listening there is an error; otherwise the port is a probe, and a
	// reject only proves that the peer's connection manager answers.
	PeerPortGiven bool
	// Timeout bounds each step of the peer check.
	Timeout time.Duration
}

// Run runs the checks and returns their findings, in order.
func Run(ctx context.Context, c Config) []Finding {
	var r report
	probe := c.Kernel()
	r.kernel(probe, c.Env)
	devs := r.devices(c)
	if c.Service != nil {
		r.service(c.Service())
	}
	r.memlock(c, len(probe.Listed) > 0)
	for _, d := range devs {
		r.device(d)
	}
	if c.Peer.IsValid() {
		r.peer(ctx, c)
	}
	return r.out
}

// Worst returns the highest level among the findings.
func Worst(fs []Finding) Level {
	w := OK
	for _, f := range fs {
		w = max(w, f.Level)
	}
	return w
}

// Write prints the findings one a line: level, check, what was found and,
// after " — ", what to do.
func Write(w io.Writer, fs []Finding) {
	for _, f := range fs {
		line := fmt.Sprintf("%-5s %-9s %s", strings.ToUpper(f.Level.String()), f.Check, f.Message)
		if f.Fix != "" {
			line += " — " + f.Fix
		}
		fmt.Fprintln(w, line)
	}
}

type report struct{ out []Finding }

func (r *report) add(check string, l Level, fix, format string, args ...any) {
	r.out = append(r.out, Finding{Check: check, Level: l, Message: fmt.Sprintf(format, args...), Fix: fix})
}

// service reports whether soft devices run behind the host service.
func (r *report) service(path string, err error) {
	const check = "host service"
	switch _, statErr := os.Stat(path); {
	case path == "":
		r.add(check, Info, "", "%s=off: each process runs its soft devices itself", service.SocketEnv)
	case err == nil:
		r.add(check, OK, "", "answers on %s: soft devices of this user's processes share their addresses through it", path)
	case errors.Is(err, service.ErrNoService) && statErr == nil:
		r.add(check, Warn, "start it again (rdma-go service), or remove the file",
			"%s is left by a service that is gone: processes run their soft devices themselves, and those that used it have their ports down until one answers", path)
	case errors.Is(err, service.ErrNoService):
		r.add(check, Info, "run rdma-go service to let many processes share one address",
			"none (%s): each process runs its soft devices itself, one process per address", path)
	default:
		r.add(check, Error, "", "%s: %v", path, err)
	}
}

// kernel reports the kernel's RDMA devices, /dev/infiniband and
// libibverbs. No kernel device is fine (the soft devices need none), so
// its absence is information; a device the kernel has but this process
// cannot use is an error.
func (r *report) kernel(p KernelProbe, env Env) {
	switch {
	case p.SysfsErr != nil || len(p.Sysfs) == 0:
		r.add("kernel", Info, "for a kernel device load its driver (e.g. modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0); soft devices need none",
			"no kernel RDMA devices in /sys/class/infiniband")
		return
	default:
		r.add("kernel", OK, "", "kernel RDMA devices: %s", strings.Join(p.Sysfs, ", "))
	}
	ents, err := os.ReadDir(env.DevDir)
	var uverbs []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "uverbs") {
			uverbs = append(uverbs, filepath.Join(env.DevDir, e.Name()))
		}
	}
	switch {
	case err != nil || len(uverbs) == 0:
		r.add("devfs", Error, "load the user-verbs module: modprobe ib_uverbs (and check that udev created "+env.DevDir+")",
			"%s has no uverbs devices: programs cannot open the kernel's devices", env.DevDir)
	default:
		var denied []string
		for _, u := range uverbs {
			if err := env.Access(u); err != nil {
				denied = append(denied, u)
			}
		}
		if len(denied) > 0 {
			r.add("devfs", Error, "give this user read and write access (the rdma group or a udev rule, as rdma-core's 90-rdma-umad/ucm rules do) or run as a user that has it",
				"no read/write access to %s", strings.Join(denied, ", "))
		} else {
			r.add("devfs", OK, "", "%s readable and writable", strings.Join(uverbs, ", "))
		}
	}
	switch {
	case p.LibErr != nil:
		r.add("rdma-core", Error, "install rdma-core's libraries (Debian: apt install libibverbs1 librdmacm1 ibverbs-providers) or point LD_LIBRARY_PATH at them",
			"libibverbs.so.1 does not load (%v): the kernel's devices stay invisible to this program", p.LibErr)
	case len(p.Listed) == 0:
		r.add("rdma-core", Error, "install the provider library of the device (Debian: apt install ibverbs-providers)",
			"libibverbs.so.1 loads but lists none of %s", strings.Join(p.Sysfs, ", "))
	default:
		r.add("rdma-core", OK, "", "libibverbs.so.1 lists %s", strings.Join(p.Listed, ", "))
	}
}

// devices reports the device list (and a config that does not parse) and
// returns the devices to check.
func (r *report) devices(c Config) []*verbs.Device {
	ds, err := c.Devices()
	if err != nil {
		r.add("devices", Error, "fix the soft-device configuration ("+soft.DevicesEnv+", "+soft.ConfigFileEnv+" or ~/.config/rdma-go/devices)",
			"the device list failed: %v", err)
		return nil
	}
	if c.Device != "" {
		for _, d := range ds {
			if d.Name() == c.Device {
				return []*verbs.Device{d}
			}
		}
		names := make([]string, len(ds))
		for i, d := range ds {
			names[i] = d.Name()
		}
		r.add("devices", Error, "pick one of the devices listed (ibv_devices)",
			"no device %q among %d: %s", c.Device, len(ds), strings.Join(names, ", "))
		return nil
	}
	if len(ds) == 0 {
		r.add("devices", Error, "unset "+soft.LoopbackEnv+"=off, or add a soft device (rdma-go link add NAME type rgo addr IP), or load a kernel driver",
			"no RDMA devices at all")
		return nil
	}
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.Name()+" ("+kind(d)+")")
	}
	r.add("devices", OK, "", "%d device(s): %s", len(ds), strings.Join(parts, ", "))
	return ds
}

// kind names a device's provider: "soft" or "kernel".
func kind(d *verbs.Device) string {
	if _, ok := d.Provider().(*soft.Device); ok {
		return "soft"
	}
	return "kernel"
}

// memlock checks RLIMIT_MEMLOCK against the memory the program wants to
// register. Only kernel devices pin registered memory (pins: the kernel
// lists some); soft devices do not, so for them a low limit is only
// information.
func (r *report) memlock(c Config, pins bool) {
	cur, _, err := c.Env.Memlock()
	if err != nil {
		r.add("memlock", Warn, "", "cannot read RLIMIT_MEMLOCK: %v", err)
		return
	}
	const fix = "raise it: ulimit -l unlimited (shell), LimitMEMLOCK=infinity (systemd unit), --ulimit memlock=-1 (docker), or a memlock line in /etc/security/limits.conf"
	switch {
	case cur == ^uint64(0):
		r.add("memlock", OK, "", "locked-memory limit (ulimit -l): unlimited")
	case c.Memlock == 0:
		r.add("memlock", OK, "", "locked-memory limit (ulimit -l) %s: the most a program may register on a kernel device (--memlock SIZE checks a size)", bytesString(cur))
	case cur >= c.Memlock:
		r.add("memlock", OK, "", "locked-memory limit (ulimit -l) %s covers the %s to register", bytesString(cur), bytesString(c.Memlock))
	case pins:
		r.add("memlock", Error, fix,
			"locked-memory limit (ulimit -l) %s is below the %s to register: ibv_reg_mr on a kernel device fails with ENOMEM past it", bytesString(cur), bytesString(c.Memlock))
	default:
		r.add("memlock", Info, "only if you use a kernel device: "+fix,
			"locked-memory limit (ulimit -l) %s is below %s; soft devices pin no memory, kernel devices would", bytesString(cur), bytesString(c.Memlock))
	}
}

// device opens a device and checks its port and GID table.
func (r *report) device(d *verbs.Device) {
	name := d.Name()
	ctx, err := d.Open()
	if err != nil {
		r.add(name, Error, openFix(d, err), "cannot open: %v", err)
		return
	}
	defer ctx.Close()
	pa, err := ctx.QueryPort(1)
	if err != nil {
		r.add(name, Error, "", "port 1 query failed: %v", err)
		return
	}
	var gids []verbs.GID
	for i := range pa.GIDTblLen {
		g, err := ctx.QueryGID(1, i)
		if err != nil {
			break
		}
		gids = append(gids, g)
	}
	r.out = append(r.out, PortFinding(name, kind(d), pa, gids))
}

// PortFinding grades port 1 of a device of kind "soft" or "kernel": it
// must be ACTIVE, and its GID table is graded by GIDFinding.
func PortFinding(dev, kind string, pa verbs.PortAttr, gids []verbs.GID) Finding {
	if pa.State != verbs.PortActive {
		fix := "bring the link up: ip link set NETDEV up (the device's netdev), and check the cable or the peer switch port"
		if kind == "soft" {
			fix = "the soft device's socket failed; reopen the device (restart the program) and check its address is still configured"
		}
		return Finding{Check: dev, Level: Error, Message: fmt.Sprintf("port 1 is %s, not ACTIVE", pa.State), Fix: fix}
	}
	f := GIDFinding(dev, gids)
	f.Message = fmt.Sprintf("%s, port 1 ACTIVE, MTU %s; %s", kind, pa.ActiveMTU, f.Message)
	return f
}

// openFix says what to do about a device that does not open.
func openFix(d *verbs.Device, err error) string {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "another process (or the kernel's rdma_rxe, which takes the RoCE port on every address) holds UDP port 4791 on " +
			d.Addr().String() + ": give this device another address, or move all soft devices to another port with " + soft.PortEnv + "=PORT"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "the address is not on any interface of this host: ip addr add ADDR dev NETDEV, or configure the device with a local address"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "no permission for the device: see the devfs check"
	}
	return ""
}

// GIDFinding grades a port's GID table: RoCEv2 needs a GID that holds a
// routable IP address (an IPv4-mapped one or a global IPv6 one); a table
// with only the link-local fe80:: GID cannot reach another subnet, and
// where GID 0 is link-local the tools need -g with the index of the
// routable one.
func GIDFinding(dev string, gids []verbs.GID) Finding {
	routable, linkLocal0 := -1, false
	var ips []string
	for i, g := range gids {
		if g == (verbs.GID{}) {
			continue
		}
		ip := netip.AddrFrom16(g).Unmap()
		if i == 0 && ip.IsLinkLocalUnicast() {
			linkLocal0 = true
		}
		if ip.IsLinkLocalUnicast() {
			continue
		}
		if routable < 0 {
			routable = i
		}
		ips = append(ips, fmt.Sprintf("[%d] %s", i, ip))
	}
	switch {
	case routable < 0:
		return Finding{Check: dev, Level: Error,
			Message: fmt.Sprintf("no GID holds a routable address (%d entries, link-local at most)", len(gids)),
			Fix:     "give the device's netdev an IPv4 or global IPv6 address (ip addr add ADDR/PREFIX dev NETDEV); the GID table follows it"}
	case linkLocal0:
		return Finding{Check: dev, Level: Info,
			Message: "GIDs " + strings.Join(ips, ", ") + "; GID 0 is link-local",
			Fix:     fmt.Sprintf("pass -g %d to the tools (ibv_rc_pingpong, perftest -x %d) so they use the routable GID", routable, routable)}
	}
	return Finding{Check: dev, Level: OK, Message: "GIDs " + strings.Join(ips, ", ")}
}

func bytesString(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d %s", n, units[i])
}
