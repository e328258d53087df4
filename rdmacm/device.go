package rdmacm

import (
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/verbs"
)

// The connection manager's seam. rdmacm runs a device's connections
// through one of two backends, chosen by what the device's provider
// offers:
//
//   - in-band: the device has its own IB CM on QP1 (the provider's context
//     implements inBandCM, as the soft provider's does); rdmacm drives it
//     directly, speaking the IB CM protocol on the wire, as the kernel's
//     rdma_cm does for its devices.
//   - an outside CM at the rdma_cm_id level, for devices whose provider
//     offers one (provider.CMDevice): the kernel's rdma_cm through
//     librdmacm for the kernel provider's devices (kernelcm.go).
//
// Devices are reached only through verbs: the device list, Device.Open and
// Context.Provider.

// inBandCM is the capability of a provider context that has an in-band
// connection manager on its QP1.
type inBandCM interface {
	CM() *ibcm.Manager
}

// cmBackend is what rdmacm needs of a device's connection manager: the
// calls it makes on the in-band IB CM. *ibcm.Manager implements it.
type cmBackend interface {
	Connect(p *ibcm.ConnectParams, h ibcm.Handler) (*ibcm.Conn, error)
	SIDRRequest(p *ibcm.SIDRParams, h ibcm.Handler) (*ibcm.Conn, error)
	Listen(serviceID uint64, h ibcm.Handler) (*ibcm.Listener, error)
}

// cmOf returns the connection manager backend of an open context, or nil.
func cmOf(ctx *verbs.Context) cmBackend {
	if p, ok := ctx.Provider().(inBandCM); ok {
		if m := p.CM(); m != nil {
			return m
		}
	}
	return nil
}

// device is an RDMA device as the connection manager uses it: an open
// verbs context shared by every id on the device, the device's CM, and the
// service IDs listened on there. It stays open while ids use it.
type device struct {
	vdev *verbs.Device
	ctx  *verbs.Context
	cm   cmBackend
	addr netip.Addr
	mtu  verbs.MTU
	refs int

	pdOnce sync.Once
	pd     *verbs.PD
	pdErr  error

	// services is guarded by devices.mu.
	services map[uint64]*service
}

// service is a service ID listened on on one device, and the listening
// ids behind it (one bound to the device's address and/or a wildcard).
type service struct {
	l   *ibcm.Listener
	ids []*ID
}

var devices struct {
	mu sync.Mutex
	m  map[*verbs.Device]*device
}

// haveDevices reports ErrNoDevice when there is no RDMA device at all. A
// device rdmacm holds open exists: then it does not list them (a listing
// reads sysfs and every provider's devices, once per id created).
func haveDevices() error {
	devices.mu.Lock()
	open := len(devices.m) > 0
	devices.mu.Unlock()
	if open {
		return nil
	}
	ds, err := listDevices()
	if err != nil {
		return fmt.Errorf("rdmacm: %w", err)
	}
	if len(ds) == 0 {
		return ErrNoDevice
	}
	return nil
}

// acquire opens vd (or takes another reference to it).
func acquire(vd *verbs.Device) (*device, error) {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	if devices.m == nil {
		devices.m = make(map[*verbs.Device]*device)
	}
	if d := devices.m[vd]; d != nil {
		d.refs++
		return d, nil
	}
	ctx, err := vd.Open()
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	cm := cmOf(ctx)
	if cm == nil {
		if kcm, _ := kernelCM(vd); kcm == nil {
			ctx.Close()
			return nil, fmt.Errorf("rdmacm: device %s has no connection manager: %w", vd.Name(), ErrNoDevice)
		}
	}
	pa, err := ctx.QueryPort(1)
	if err != nil {
		ctx.Close()
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	d := &device{vdev: vd, ctx: ctx, cm: cm, addr: vd.Addr().Unmap(), mtu: pa.ActiveMTU, refs: 1,
		services: make(map[uint64]*service)}
	devices.m[vd] = d
	return d, nil
}

// acquireLoopback opens the process's loopback device (rgo0, or another
// automatically addressed one) for a bind to the loopback address a when no
// open device has it yet: such a device takes the first free address of
// 127.0.0.1–127.0.0.254 when it opens, which in a process of its own is
// 127.0.0.1. A device that opens elsewhere is closed again, and the error
// says why.
func acquireLoopback(a netip.Addr) (*device, error) {
	ds, err := listDevices()
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	for _, vd := range ds {
		if vd.Addr().IsValid() {
			continue // open already, or bound to an address of its own
		}
		d, err := acquire(vd)
		if err != nil {
			return nil, err
		}
		if d.addr == a {
			return d, nil
		}
		got := d.addr
		d.release()
		return nil, fmt.Errorf("%w: %s: no device of this process has it, and the loopback device %s took %s "+
			"(the first loopback address whose RoCE port was free: another process's device holds %s); "+
			"bind %s, or pin the loopback device with RDMA_GO_LOOPBACK=%s", ErrAddrNotAvail, a, vd.Name(), got, a, got, a)
	}
	return nil, fmt.Errorf("%w: %s", ErrAddrNotAvail, a)
}

// release drops a reference; the last one closes the context.
func (d *device) release() {
	devices.mu.Lock()
	d.refs--
	last := d.refs == 0
	if last {
		delete(devices.m, d.vdev)
	}
	devices.mu.Unlock()
	if last {
		if d.pd != nil {
			d.pd.Dealloc()
		}
		d.ctx.Close()
	}
}

// defaultPD returns the device's PD for ids given none (librdmacm's
// per-device PD).
func (d *device) defaultPD() (*verbs.PD, error) {
	d.pdOnce.Do(func() { d.pd, d.pdErr = d.ctx.AllocPD() })
	return d.pd, d.pdErr
}

// deviceFor returns the verbs device bound to a, or nil. A device rdmacm
// holds open on a is the answer without listing every provider's devices
// (a listing reads sysfs, once per bind).
func deviceFor(a netip.Addr) (*verbs.Device, error) {
	a = a.Unmap()
	if vd := openDeviceOn(a); vd != nil {
		return vd, nil
	}
	ds, err := listDevices()
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	for _, d := range ds {
		if d.Addr().Unmap() == a {
			return d, nil
		}
	}
	return nil, nil
}

// openDeviceOn returns the device rdmacm holds open that is bound to a, or
// nil.
func openDeviceOn(a netip.Addr) *verbs.Device {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	for vd, d := range devices.m {
		if d.addr == a && vd.Addr().Unmap() == a {
			return vd
		}
	}
	return nil
}

// deviceOnInterfaceOf returns a device bound to another address of the
// network interface that holds src (of dst's family), or nil. Linux binds
// an RDMA device to a network interface, not to one of its addresses, so a
// route whose source is the interface's primary address still reaches the
// device bound to a secondary one.
func deviceOnInterfaceOf(src netip.Addr, is4 bool) (*verbs.Device, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, nil
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		var on []netip.Addr
		holds := false
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			ip := p.Addr().Unmap()
			holds = holds || ip == src
			if ip.Is4() == is4 && !ip.IsLoopback() {
				on = append(on, ip)
			}
		}
		if !holds {
			continue
		}
		for _, ip := range on {
			if d, err := deviceFor(ip); d != nil || err != nil {
				return d, err
			}
		}
		return nil, nil
	}
	return nil, nil
}

// deviceToward picks the device to reach dst from, as Linux's address
// resolution does (route lookup, then the device owning the source
// address): the device bound to the kernel's source address for dst; for a
// loopback destination, any loopback device (those already open first);
// for one of our own devices' addresses, that device.
func deviceToward(dst netip.Addr) (*verbs.Device, error) {
	dst = dst.Unmap()
	if c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9))); err == nil {
		src := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		c.Close()
		if d, err := deviceFor(src); d != nil || err != nil {
			return d, err
		}
		if d, err := deviceOnInterfaceOf(src, dst.Is4()); d != nil || err != nil {
			return d, err
		}
	}
	ds, err := listDevices()
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	if dst.IsLoopback() {
		var fallback *verbs.Device
		for _, d := range ds {
			a := d.Addr()
			if a.IsValid() && a.Unmap().IsLoopback() && a.Is4() == dst.Is4() {
				return d, nil
			}
			if !a.IsValid() && dst.Is4() && fallback == nil {
				fallback = d // an automatic loopback device, not open yet
			}
		}
		if fallback != nil {
			return fallback, nil
		}
	}
	if d, err := deviceFor(dst); d != nil || err != nil {
		return d, err
	}
	return nil, fmt.Errorf("%w: no device reaches %s", ErrNoDevice, dst)
}
