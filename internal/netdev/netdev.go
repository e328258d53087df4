// Package netdev finds the network interface behind an IP address, as the
// tools show it for a soft device (which is bound to an address, not to an
// interface).
package netdev

import (
	"net"
	"net/netip"
)

// Holding returns the interface that holds ip: the one with that address,
// else, for a loopback address, the loopback interface (Linux's lo answers
// for all of 127.0.0.0/8). nil when there is none.
func Holding(ip netip.Addr) *net.Interface {
	ifs, err := net.Interfaces()
	if err != nil || !ip.IsValid() {
		return nil
	}
	ip = ip.Unmap()
	var loopback *net.Interface
	for i := range ifs {
		addrs, err := ifs[i].Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if p, ok := netip.AddrFromSlice(n.IP); ok && p.Unmap() == ip {
				return &ifs[i]
			}
			if ifs[i].Flags&net.FlagLoopback != 0 && n.Contains(ip.AsSlice()) && loopback == nil {
				loopback = &ifs[i]
			}
		}
	}
	return loopback
}
