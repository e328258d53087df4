package verbs

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/internal/softdev"
)

// Device limits of the soft device, close to Linux rxe's.
const (
	maxQP         = 1 << 16
	maxQPWR       = 1 << 14
	maxSGE        = 32
	maxCQE        = 1 << 20
	maxMR         = 1 << 20
	maxPD         = 1 << 20
	maxRDAtom     = 128
	maxInline     = 256
	maxMsgSize    = 1 << 31
	gidTableLen   = 2
	portCapFlags  = 1 << 16 // CM_SUP, as rxe
	vendorID      = 0xFFFFFF
	deviceCaps    = DeviceCapFlags(1 | 0x2 | 0x4 | 0x40 | 0x400 | 0x800 | 0x1000 | 1<<13 | 1<<17 | 1<<24) // RESIZE_MAX_WR|BAD_PKEY_CNTR|BAD_QKEY_CNTR|UD_AV_PORT_ENFORCE|PORT_ACTIVE_EVENT|SYS_IMAGE_GUID|RC_RNR_NAK_GEN|SRQ_RESIZE|MEM_WINDOW|MEM_WINDOW_TYPE_2B
	localAckDelay = 15
)

// Context is an open device (ibv_context). Close it when done.
type Context struct {
	dev    *Device
	run    *softdev.Device
	mtu    int
	events *eventQueue

	mu     sync.Mutex
	closed bool
}

// Open opens the device (ibv_open_device). The soft device binds its UDP
// port on the first Open in the process and shares it among contexts.
func (d *Device) Open() (*Context, error) {
	run, err := d.acquire()
	if err != nil {
		return nil, err
	}
	c := &Context{dev: d, run: run, mtu: softdev.ActiveMTU(run.Addr()), events: newEventQueue()}
	d.mu.Lock()
	if d.ctxs == nil {
		d.ctxs = make(map[*Context]struct{})
	}
	d.ctxs[c] = struct{}{}
	d.mu.Unlock()
	return c, nil
}

// Device returns the device this context was opened on.
func (c *Context) Device() *Device { return c.dev }

// Close closes the context (ibv_close_device). The device stops when its
// last context closes.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.events.close()
	c.dev.mu.Lock()
	delete(c.dev.ctxs, c)
	c.dev.mu.Unlock()
	return c.dev.release()
}

func (c *Context) host() *engine.Host { return c.run.Host() }

// DeviceAttr holds device attributes (struct ibv_device_attr).
type DeviceAttr struct {
	FWVer                 string
	NodeGUID              uint64
	SysImageGUID          uint64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 int
	MaxQPWR               int
	DeviceCapFlags        DeviceCapFlags
	MaxSGE                int
	MaxSGERD              int
	MaxCQ                 int
	MaxCQE                int
	MaxMR                 int
	MaxPD                 int
	MaxQPRDAtom           int
	MaxEERDAtom           int
	MaxResRDAtom          int
	MaxQPInitRDAtom       int
	MaxEEInitRDAtom       int
	AtomicCap             AtomicCap
	MaxEE                 int
	MaxRDD                int
	MaxMW                 int
	MaxRawIPv6QP          int
	MaxRawEthyQP          int
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxAH                 int
	MaxFMR                int
	MaxMapPerFMR          int
	MaxSRQ                int
	MaxSRQWR              int
	MaxSRQSGE             int
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
	MaxInlineData         int // largest max_inline_data a QP may ask for
	NumCompVectors        int
}

// QueryDevice returns the device attributes (ibv_query_device). The values
// describe what the soft device implements.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	if err := c.check(); err != nil {
		return DeviceAttr{}, err
	}
	return DeviceAttr{
		// rdma-core's rxe provider always formats the kernel's (zero)
		// fw_ver as "%d.%d.%d", so ibv_devinfo on rxe shows 0.0.0.
		FWVer:    "0.0.0",
		NodeGUID: c.dev.guid, SysImageGUID: c.dev.guid,
		MaxMRSize: ^uint64(0), PageSizeCap: 0xFFFFF000, VendorID: vendorID,
		MaxQP: maxQP, MaxQPWR: maxQPWR, DeviceCapFlags: deviceCaps,
		MaxSGE: maxSGE, MaxSGERD: maxSGE, MaxCQ: maxQP, MaxCQE: maxCQE,
		MaxMR: maxMR, MaxPD: maxPD, MaxQPRDAtom: maxRDAtom, MaxResRDAtom: maxRDAtom * maxQP,
		MaxQPInitRDAtom: maxRDAtom, AtomicCap: AtomicHCA, MaxPKeys: 1,
		MaxMW: maxMR, MaxAH: maxQP, MaxSRQ: maxSRQ, MaxSRQWR: maxSRQWR, MaxSRQSGE: maxSRQSGE,
		LocalCAAckDelay: localAckDelay, PhysPortCnt: 1, MaxInlineData: maxInline,
		NumCompVectors: 1,
	}, nil
}

// PortAttr holds port attributes (struct ibv_port_attr).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTblLen     int
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     LinkLayer
	Flags         uint8
	PortCapFlags2 uint16
}

// QueryPort returns the attributes of port (ibv_query_port); the soft device
// has one port, number 1.
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	if err := c.check(); err != nil {
		return PortAttr{}, err
	}
	if port != 1 {
		return PortAttr{}, verrorf(ErrInvalidArgument, "port %d does not exist (the device has port 1)", port)
	}
	active, _ := MTUFromBytes(c.mtu)
	return PortAttr{
		State: c.dev.portState(), MaxMTU: MTU4096, ActiveMTU: active, GIDTblLen: gidTableLen,
		PortCapFlags: portCapFlags, MaxMsgSz: maxMsgSize, PKeyTblLen: 1, MaxVLNum: 1,
		ActiveWidth: 1, ActiveSpeed: 8, PhysState: 5, LinkLayer: LinkLayerEthernet,
		QKeyViolCntr: uint32(c.host().Stats().DropQKey.Load()),
	}, nil
}

// QueryGID returns entry index of port's GID table (ibv_query_gid). As on
// rxe, entry 0 is the link-local GID derived from the node GUID and entry 1
// is the device's IP address (IPv4-mapped for IPv4). Only entry 1 can be a
// source GID: it is the address the device sends from.
func (c *Context) QueryGID(port uint8, index int) (GID, error) {
	if err := c.check(); err != nil {
		return GID{}, err
	}
	if port != 1 || index < 0 || index >= gidTableLen {
		return GID{}, verrorf(ErrInvalidArgument, "GID index %d of port %d does not exist (port 1 has %d)", index, port, gidTableLen)
	}
	if index == 0 {
		var g GID
		g[0], g[1] = 0xfe, 0x80
		for i := range 8 {
			g[8+i] = byte(c.dev.guid >> (56 - 8*i))
		}
		return g, nil
	}
	return GIDFromIP(c.run.Addr()), nil
}

// QueryPKey returns entry index of the P_Key table: 0xFFFF, the only one.
func (c *Context) QueryPKey(port uint8, index int) (uint16, error) {
	if port != 1 || index != 0 {
		return 0, verrorf(ErrInvalidArgument, "P_Key index %d of port %d does not exist", index, port)
	}
	return 0xFFFF, nil
}

// Addr returns the IP address the device sends from.
func (c *Context) Addr() netip.Addr { return c.run.Addr() }

// sourceGIDAddr returns the IP address for a source GID index, or why the
// index cannot be a source.
func (c *Context) sourceGIDAddr(index uint8) (netip.Addr, string) {
	if index != 1 {
		g, _ := c.QueryGID(1, int(index))
		return netip.Addr{}, fmt.Sprintf(
			"source GID index %d (%s) is not an address this soft device sends from; use GID index 1 (%s)",
			index, g, GIDFromIP(c.run.Addr()))
	}
	return c.run.Addr(), ""
}

func (c *Context) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verrorf(ErrClosed, "device context closed")
	}
	return nil
}

// Stats returns the soft device's live counters (QueryPortCounters returns
// a snapshot of the same counters in verbs' own type).
func (c *Context) Stats() *engine.Stats { return c.host().Stats() }

// String describes the context.
func (c *Context) String() string { return fmt.Sprintf("%s (%s)", c.dev.name, c.run.Addr()) }
