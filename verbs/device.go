package verbs

import (
	"net/netip"
	"sync"

	"github.com/rdma-go/rdma-go/provider"
	"github.com/rdma-go/rdma-go/provider/soft"
)

// DefaultDeviceName is the name of the loopback soft device every machine has.
const DefaultDeviceName = soft.DefaultDeviceName

// Environment and configuration of the soft devices that Devices lists
// (see package provider/soft).
const (
	// DevicesEnv lists extra soft devices: "name=addr[,name=addr...]",
	// e.g. "rgo1=198.51.100.1,rgo2=::1". An addr of "auto" on a loopback
	// device picks a free 127.0.0.x address.
	DevicesEnv = soft.DevicesEnv
	// LoopbackEnv overrides the loopback device's address ("127.0.0.5"),
	// or disables it ("off").
	LoopbackEnv = soft.LoopbackEnv
	// PortEnv sets the UDP port soft devices listen on and send to,
	// instead of RoCEv2's 4791. Only soft devices using the same port
	// talk to each other; it exists for hosts where the kernel's
	// rdma_rxe owns 4791 on every address.
	PortEnv = soft.PortEnv
	// ConfigFileEnv names a config file to read instead of the default
	// $XDG_CONFIG_HOME/rdma-go/devices (or ~/.config/rdma-go/devices),
	// then /etc/rdma-go/devices. Each line is "name addr"; # starts a
	// comment.
	ConfigFileEnv = soft.ConfigFileEnv
)

// Device is an RDMA device that can be opened, of one of the providers:
// today always a soft RoCEv2 device bound to one IP address.
type Device struct {
	p provider.Device
}

// providers are the providers whose devices Devices lists, in order.
var providers = []provider.Provider{soft.Provider{}}

// registry maps each provider device to its Device, so that a device is
// the same *Device in every list.
var registry struct {
	mu   sync.Mutex
	devs map[provider.Device]*Device
}

func wrapDevice(pd provider.Device) *Device {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.devs == nil {
		registry.devs = make(map[provider.Device]*Device)
	}
	d := registry.devs[pd]
	if d == nil {
		d = &Device{p: pd}
		registry.devs[pd] = d
	}
	return d
}

// Name returns the device name (as ibv_get_device_name).
func (d *Device) Name() string { return d.p.Name() }

// GUID returns the node GUID in host order (as ibv_get_device_guid).
func (d *Device) GUID() uint64 { return d.p.GUID() }

// Provider returns the provider's device, for what only some providers
// offer (package rdmacm finds a device's connection manager through it).
func (d *Device) Provider() provider.Device { return d.p }

// Addr returns the IP address the device sends from, or the zero Addr for
// a device without one yet (an automatically chosen loopback address that
// is not open yet).
func (d *Device) Addr() netip.Addr { return d.p.Addr() }

// Devices returns the devices this process can open (ibv_get_device_list):
// the soft devices — the loopback device (unless RDMA_GO_LOOPBACK=off), the
// devices of the config file and of RDMA_GO_DEVICES, and those added with
// AddDevice; then the kernel's RDMA devices (package provider/kernel),
// when libibverbs.so.1 is installed.
func Devices() ([]*Device, error) {
	var out []*Device
	for _, p := range providers {
		ds, err := p.Devices()
		if err != nil {
			return nil, err
		}
		for _, pd := range ds {
			out = append(out, wrapDevice(pd))
		}
	}
	return out, nil
}

// DeviceByName returns the named device, or ErrNoDevice.
func DeviceByName(name string) (*Device, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		if d.Name() == name {
			return d, nil
		}
	}
	return nil, verrorf(ErrNoDevice, "device %q not found", name)
}

// AddDevice registers a soft device bound to addr (any local IPv4 or IPv6
// address). The device opens its UDP port only when first opened.
func AddDevice(name string, addr netip.Addr) (*Device, error) {
	d, err := soft.AddDevice(name, addr)
	if err != nil {
		return nil, err
	}
	return wrapDevice(d), nil
}

// AddLoopbackDevice registers a soft device that binds, when first opened,
// the first address of 127.0.0.1–127.0.0.254 whose RoCE port is free. Many
// such devices, in one process or in many, can run side by side.
func AddLoopbackDevice(name string) (*Device, error) {
	d, err := soft.AddLoopbackDevice(name)
	if err != nil {
		return nil, err
	}
	return wrapDevice(d), nil
}
