//go:build linux

package kernel

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rdma-go/rdma-go/provider"
)

// sysfsDir is where the kernel lists its RDMA devices.
const sysfsDir = "/sys/class/infiniband"

// Provider is the kernel provider: the devices of /sys/class/infiniband,
// driven through the system's libibverbs.so.1.
type Provider struct{}

// Name returns "kernel".
func (Provider) Name() string { return "kernel" }

var state struct {
	once    sync.Once
	lib     *lib
	loadErr error

	mu     sync.Mutex
	devs   map[string]*Device
	logged string
}

// Lib loads libibverbs once; it returns nil and the reason when it cannot.
func getLib() (*lib, error) {
	state.once.Do(func() { state.lib, state.loadErr = load() })
	return state.lib, state.loadErr
}

// debugOnce logs why no kernel device is listed, once per reason.
func debugOnce(reason string, err error) {
	if state.logged == reason {
		return
	}
	state.logged = reason
	args := []any{"reason", reason}
	if err != nil {
		args = append(args, "err", err)
	}
	slog.Debug("rdma-go: no kernel RDMA devices", args...)
}

// Devices lists the kernel's RDMA devices (ibv_get_device_list). Without
// /sys/class/infiniband, or without a loadable libibverbs.so.1, it lists
// none and logs why at debug level.
func (Provider) Devices() ([]provider.Device, error) {
	state.mu.Lock()
	defer state.mu.Unlock()
	ents, err := os.ReadDir(sysfsDir)
	if err != nil || len(ents) == 0 {
		debugOnce("no "+sysfsDir+" devices (no RDMA driver loaded)", err)
		return nil, nil
	}
	l, err := getLib()
	if err != nil {
		debugOnce(libName+" cannot be loaded (install rdma-core's libibverbs1)", err)
		return nil, nil
	}
	n := new(int32)
	list, errno := l.callErrno(l.getDeviceList, uintptr(unsafe.Pointer(n)))
	if list == 0 || *n == 0 {
		if list != 0 {
			call(l.freeDeviceList, list)
			errno = 0
		}
		var err error
		if errno != 0 {
			err = errno
		}
		debugOnce(libName+" lists no device (is the device's provider library installed?)", err)
		return nil, nil
	}
	if state.devs == nil {
		state.devs = make(map[string]*Device)
	}
	// A device stays the same *Device while it exists; the list a new
	// device came from is kept (never freed) so its ibv_device stays
	// valid, and a list with no new device is freed at once.
	keep := false
	out := make([]provider.Device, 0, *n)
	for i := range int(*n) {
		dp := *(*uintptr)(cptr(list + uintptr(i)*8))
		name := gostring(call(l.getDeviceName, dp))
		d := state.devs[name]
		if d == nil {
			d = &Device{lib: l, dev: dp, name: name, guid: be64(call(l.getDeviceGUID, dp))}
			state.devs[name] = d
			keep = true
		}
		out = append(out, d)
	}
	if !keep {
		call(l.freeDeviceList, list)
	}
	state.logged = ""
	return out, nil
}

// ForkInit calls ibv_fork_init: a process that forks and keeps running
// the child (fork without exec) calls it before opening any device, so
// registered memory is not shared copy-on-write with the child. Go
// programs start processes with os/exec (clone + exec), which needs none
// of this; on Linux 5.13 and later with rdma-core 35 and later it is never
// needed.
func ForkInit() error {
	l, err := getLib()
	if err != nil {
		return err
	}
	if rc := int32(call(l.forkInit)); rc != 0 {
		return provider.Errorf(errnoBase(syscall.Errno(rc)), "ibv_fork_init: %v", syscall.Errno(rc))
	}
	return nil
}

// be64 converts a __be64 read as a native (little-endian) integer.
func be64(v uintptr) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], uint64(v))
	return binary.BigEndian.Uint64(b[:])
}

// Device is a kernel RDMA device.
type Device struct {
	lib  *lib
	dev  uintptr // struct ibv_device *
	name string
	guid uint64
}

// Name returns the kernel's device name ("rxe0", "mlx5_0").
func (d *Device) Name() string { return d.name }

// GUID returns the node GUID in host order.
func (d *Device) GUID() uint64 { return d.guid }

// Addr returns the IP address of port 1's first RoCE GID that is one (an
// IPv4-mapped GID first), read from sysfs; the zero Addr on InfiniBand.
func (d *Device) Addr() netip.Addr {
	ents, _ := filepath.Glob(filepath.Join(sysfsDir, d.name, "ports/1/gids/*"))
	var v6 netip.Addr
	for _, e := range ents {
		b, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		g, err := provider.ParseGID(strings.TrimSpace(string(b)))
		if err != nil || g.IsZero() {
			continue
		}
		ip := g.IP()
		if ip.Is4() {
			return ip
		}
		if !v6.IsValid() && !ip.IsLinkLocalUnicast() {
			v6 = ip
		}
	}
	return v6
}

// Context is an open kernel device (struct ibv_context).
type Context struct {
	lib    *lib
	dev    *Device
	ctx    uintptr
	events func(provider.AsyncEvent)

	// The inline verbs' function pointers, from ctx->ops.
	pollCQ, reqNotifyCQ, postSend, postRecv, postSRQRecv uintptr

	rxe bool // an rdma_rxe device: CQs and QPs use its rings directly (rxe_linux.go)

	mu      sync.Mutex
	closed  bool
	owners  map[uintptr]any // ibv_cq/ibv_qp/ibv_srq → owner, for async events
	cqs     map[uintptr]*cq
	async   *os.File
	asyncWG sync.WaitGroup
}

// Open opens the device (ibv_open_device) and starts reading its
// asynchronous events.
func (d *Device) Open(events func(provider.AsyncEvent)) (provider.Context, error) {
	l := d.lib
	ctx, errno := l.callErrno(l.openDevice, d.dev)
	if ctx == 0 {
		return nil, provider.Errorf(errnoBase(errno), "ibv_open_device(%s): %v", d.name, errno)
	}
	c := &Context{lib: l, dev: d, ctx: ctx, events: events,
		owners: make(map[uintptr]any), cqs: make(map[uintptr]*cq)}
	op := func(off uintptr) uintptr { return *(*uintptr)(cptr(ctx + off)) }
	c.pollCQ, c.reqNotifyCQ = op(ctxOpsPollCQ), op(ctxOpsReqNotifyCQ)
	c.postSend, c.postRecv, c.postSRQRecv = op(ctxOpsPostSend), op(ctxOpsPostRecv), op(ctxOpsPostSRQRecv)
	c.rxe = c.isRXE()
	fd := int(*(*int32)(cptr(ctx + ctxAsyncFD)))
	f, err := pollableDup(fd, "async:"+d.name)
	if err != nil {
		call(l.closeDevice, ctx)
		return nil, provider.Errorf(provider.ErrNoDevice, "%s: async event fd: %v", d.name, err)
	}
	c.async = f
	c.asyncWG.Add(1)
	go c.readAsync()
	return c, nil
}

// pollableDup duplicates fd, makes the open file non-blocking, and wraps
// the duplicate in an *os.File that the Go runtime's poller waits on.
// libibverbs keeps (and closes) the original.
func pollableDup(fd int, name string) (*os.File, error) {
	nfd, err := syscall.Dup(fd)
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(nfd)
	if err := syscall.SetNonblock(nfd, true); err != nil {
		syscall.Close(nfd)
		return nil, err
	}
	return os.NewFile(uintptr(nfd), name), nil
}

// readAsync delivers the context's asynchronous events until Close.
func (c *Context) readAsync() {
	defer c.asyncWG.Done()
	rc, err := c.async.SyscallConn()
	if err != nil {
		return
	}
	ev := new(cAsyncEvent)
	for {
		got := false
		err := rc.Read(func(uintptr) bool {
			got = int32(call(c.lib.getAsyncEvent, c.ctx, uintptr(unsafe.Pointer(ev)))) == 0
			return got // EAGAIN: wait until readable
		})
		if err != nil {
			return // closed
		}
		if !got {
			continue
		}
		t := provider.EventType(ev.EventType)
		a := provider.AsyncEvent{Type: t}
		switch t {
		case provider.EventPortActive, provider.EventPortErr, provider.EventLIDChange, provider.EventPKeyChange,
			provider.EventSMChange, provider.EventClientReregister, provider.EventGIDChange:
			a.Port = uint8(ev.Element)
		case provider.EventDeviceFatal, provider.EventDeviceSpeedChange:
		default:
			c.mu.Lock()
			a.Owner = c.owners[ev.Element]
			if t == provider.EventCQErr {
				if q := c.cqs[ev.Element]; q != nil {
					q.overflow.Store(true)
				}
			}
			c.mu.Unlock()
		}
		call(c.lib.ackAsyncEvent, uintptr(unsafe.Pointer(ev)))
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if !closed && c.events != nil {
			c.events(a)
		}
	}
}

// Close stops the event reader and closes the device (ibv_close_device).
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.async.Close()
	c.asyncWG.Wait()
	if rc := int32(call(c.lib.closeDevice, c.ctx)); rc != 0 {
		return provider.Errorf(provider.ErrBusy, "ibv_close_device(%s): %d", c.dev.name, rc)
	}
	return nil
}

func (c *Context) setOwner(p uintptr, owner any) {
	c.mu.Lock()
	c.owners[p] = owner
	c.mu.Unlock()
}

func (c *Context) dropOwner(p uintptr) {
	c.mu.Lock()
	delete(c.owners, p)
	delete(c.cqs, p)
	c.mu.Unlock()
}

// errnoBase maps an errno to the sentinel error that wraps it.
func errnoBase(e syscall.Errno) error {
	switch e {
	case syscall.EINVAL:
		return provider.ErrInvalidArgument
	case syscall.ENOMEM, syscall.ENOSPC, syscall.EAGAIN:
		return provider.ErrNoMemory
	case syscall.EOPNOTSUPP, syscall.ENOSYS:
		return provider.ErrNotSupported
	case syscall.EBUSY:
		return provider.ErrBusy
	case syscall.ENODEV, syscall.ENXIO, syscall.EIO:
		return provider.ErrNoDevice
	case syscall.EBADF:
		return provider.ErrClosed
	}
	return provider.ErrInvalidArgument
}

// rcErr turns a libibverbs return value that is an errno (0 for success)
// into an error.
func rcErr(rc uintptr, what string) error {
	v := int32(rc) // some calls return -errno
	if v < 0 {
		v = -v
	}
	e := syscall.Errno(v)
	if e == 0 {
		return nil
	}
	return provider.Errorf(errnoBase(e), "%s: %v", what, e)
}

// QueryDevice returns the device attributes (ibv_query_device).
func (c *Context) QueryDevice() (provider.DeviceAttr, error) {
	a := new(cDeviceAttr)
	if err := rcErr(call(c.lib.queryDevice, c.ctx, uintptr(unsafe.Pointer(a))), "ibv_query_device"); err != nil {
		return provider.DeviceAttr{}, err
	}
	fw := a.FWVer[:]
	if i := strings.IndexByte(string(fw), 0); i >= 0 {
		fw = fw[:i]
	}
	return provider.DeviceAttr{
		FWVer: string(fw), NodeGUID: be64(uintptr(a.NodeGUID)), SysImageGUID: be64(uintptr(a.SysImageGUID)),
		MaxMRSize: a.MaxMRSize, PageSizeCap: a.PageSizeCap, VendorID: a.VendorID, VendorPartID: a.VendorPartID,
		HWVer: a.HWVer, MaxQP: int(a.MaxQP), MaxQPWR: int(a.MaxQPWR),
		DeviceCapFlags: provider.DeviceCapFlags(a.DeviceCapFlags), MaxSGE: int(a.MaxSGE), MaxSGERD: int(a.MaxSGERD),
		MaxCQ: int(a.MaxCQ), MaxCQE: int(a.MaxCQE), MaxMR: int(a.MaxMR), MaxPD: int(a.MaxPD),
		MaxQPRDAtom: int(a.MaxQPRDAtom), MaxEERDAtom: int(a.MaxEERDAtom), MaxResRDAtom: int(a.MaxResRDAtom),
		MaxQPInitRDAtom: int(a.MaxQPInitRDAtom), MaxEEInitRDAtom: int(a.MaxEEInitRDAtom),
		AtomicCap: provider.AtomicCap(a.AtomicCap), MaxEE: int(a.MaxEE), MaxRDD: int(a.MaxRDD), MaxMW: int(a.MaxMW),
		MaxRawIPv6QP: int(a.MaxRawIPv6QP), MaxRawEthyQP: int(a.MaxRawEthyQP), MaxMcastGrp: int(a.MaxMcastGrp),
		MaxMcastQPAttach: int(a.MaxMcastQPAttach), MaxTotalMcastQPAttach: int(a.MaxTotalMcastQPAttach),
		MaxAH: int(a.MaxAH), MaxFMR: int(a.MaxFMR), MaxMapPerFMR: int(a.MaxMapPerFMR), MaxSRQ: int(a.MaxSRQ),
		MaxSRQWR: int(a.MaxSRQWR), MaxSRQSGE: int(a.MaxSRQSGE), MaxPKeys: a.MaxPKeys,
		LocalCAAckDelay: a.LocalCAAckDelay, PhysPortCnt: a.PhysPortCnt,
		// ibv_device_attr has no inline limit; the device's ibv_create_qp
		// refuses (EINVAL) what it cannot do.
		MaxInlineData:  maxInlineData,
		NumCompVectors: int(*(*int32)(cptr(c.ctx + ctxNumCompVectors))),
	}, nil
}

// maxInlineData is the MaxInlineData QueryDevice reports.
const maxInlineData = 1024

// QueryPort returns a port's attributes. verbs.h 44's ibv_query_port is
// an inline wrapper; the exported ibv_query_port (IBVERBS_1.1) takes the
// compat struct, a prefix of struct ibv_port_attr, so it is called with a
// zeroed full-size struct as the wrapper's fallback does.
func (c *Context) QueryPort(port uint8) (provider.PortAttr, error) {
	a := new(cPortAttr)
	if err := rcErr(call(c.lib.queryPort, c.ctx, uintptr(port), uintptr(unsafe.Pointer(a))), fmt.Sprintf("ibv_query_port(%d)", port)); err != nil {
		return provider.PortAttr{}, err
	}
	return provider.PortAttr{
		State: provider.PortState(a.State), MaxMTU: provider.MTU(a.MaxMTU), ActiveMTU: provider.MTU(a.ActiveMTU),
		GIDTblLen: int(a.GIDTblLen), PortCapFlags: a.PortCapFlags, MaxMsgSz: a.MaxMsgSz,
		BadPKeyCntr: a.BadPKeyCntr, QKeyViolCntr: a.QKeyViolCntr, PKeyTblLen: a.PKeyTblLen, LID: a.LID,
		SMLID: a.SMLID, LMC: a.LMC, MaxVLNum: a.MaxVLNum, SMSL: a.SMSL, SubnetTimeout: a.SubnetTimeout,
		InitTypeReply: a.InitTypeReply, ActiveWidth: a.ActiveWidth, ActiveSpeed: a.ActiveSpeed,
		PhysState: a.PhysState, LinkLayer: provider.LinkLayer(a.LinkLayer), Flags: a.Flags,
		PortCapFlags2: a.PortCapFlags2,
	}, nil
}

// QueryGID returns a GID table entry (ibv_query_gid).
func (c *Context) QueryGID(port uint8, index int) (provider.GID, error) {
	g := new(provider.GID)
	err := rcErr(call(c.lib.queryGID, c.ctx, uintptr(port), uintptr(index), uintptr(unsafe.Pointer(g))), fmt.Sprintf("ibv_query_gid(port %d, index %d)", port, index))
	return *g, err
}

// QueryPKey returns a P_Key table entry (ibv_query_pkey), in host order.
func (c *Context) QueryPKey(port uint8, index int) (uint16, error) {
	p := new(uint16)
	if err := rcErr(call(c.lib.queryPKey, c.ctx, uintptr(port), uintptr(index), uintptr(unsafe.Pointer(p))), fmt.Sprintf("ibv_query_pkey(port %d, index %d)", port, index)); err != nil {
		return 0, err
	}
	return *p>>8 | *p<<8, nil // __be16
}

// QueryPortCounters reads the port's hw_counters from sysfs by their rxe
// names; counters the device does not have are 0.
func (c *Context) QueryPortCounters(port uint8) (provider.Counters, error) {
	var cs provider.Counters
	dir := filepath.Join(sysfsDir, c.dev.name, "ports", strconv.Itoa(int(port)), "hw_counters")
	v := reflect.ValueOf(&cs).Elem()
	t := v.Type()
	for i := range t.NumField() {
		b, err := os.ReadFile(filepath.Join(dir, t.Field(i).Tag.Get("rxe")))
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err == nil {
			v.Field(i).SetUint(n)
		}
	}
	return cs, nil
}

// Probe is what stands between this process and the kernel's RDMA devices,
// for diagnostics (rdma-go doctor): the devices sysfs lists, whether
// libibverbs.so.1 loads, and the devices it lists.
type Probe struct {
	// Sysfs are the names in /sys/class/infiniband; SysfsErr is why it
	// could not be read (no RDMA driver loaded, or not Linux).
	Sysfs    []string
	SysfsErr error
	// LibErr is why libibverbs.so.1 did not load (nil: it did). It is
	// tried only when sysfs lists a device.
	LibErr error
	// Listed are the devices libibverbs lists.
	Listed []string
}

// ProbeDevices fills a Probe.
func ProbeDevices() Probe {
	var p Probe
	ents, err := os.ReadDir(sysfsDir)
	if err != nil {
		p.SysfsErr = err
		return p
	}
	for _, e := range ents {
		p.Sysfs = append(p.Sysfs, e.Name())
	}
	if len(p.Sysfs) == 0 {
		return p
	}
	if _, p.LibErr = getLib(); p.LibErr != nil {
		return p
	}
	devs, _ := Provider{}.Devices()
	for _, d := range devs {
		p.Listed = append(p.Listed, d.Name())
	}
	return p
}
