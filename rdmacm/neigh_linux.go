//go:build linux

package rdmacm

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// nudValid are the neighbour states in which the link-layer address of a
// next hop is known (the kernel's NUD_VALID).
const nudValid = unix.NUD_PERMANENT | unix.NUD_NOARP | unix.NUD_REACHABLE | unix.NUD_PROBE | unix.NUD_STALE | unix.NUD_DELAY

// neighbourPoll is how often resolveNeighbour looks at the neighbour
// table while the kernel resolves.
const neighbourPoll = 10 * time.Millisecond

// nextHop returns the link and next hop through which the kernel routes
// to dst, or ok false when dst needs no neighbour resolution (a local
// address, a loopback or NOARP link).
func nextHop(dst netip.Addr) (link int, hop netip.Addr, ok bool, err error) {
	routes, err := netlink.RouteGet(dst.AsSlice())
	if err != nil {
		return 0, hop, false, fmt.Errorf("no route to %s: %w", dst, syscall.ENETUNREACH)
	}
	if len(routes) == 0 || routes[0].Type == unix.RTN_LOCAL {
		return 0, hop, false, nil
	}
	r := routes[0]
	l, err := netlink.LinkByIndex(r.LinkIndex)
	if err != nil {
		return 0, hop, false, nil
	}
	if a := l.Attrs(); a.Flags&net.FlagLoopback != 0 || a.RawFlags&unix.IFF_NOARP != 0 {
		return 0, hop, false, nil
	}
	hop = dst
	if gw, ok := netip.AddrFromSlice(r.Gw); ok && r.Gw != nil {
		hop = gw.Unmap()
	}
	return r.LinkIndex, hop, true, nil
}

// neighbourValid reports whether the neighbour table holds a usable
// link-layer address for hop on link.
func neighbourValid(link int, hop netip.Addr) bool {
	family := netlink.FAMILY_V4
	if !hop.Is4() {
		family = netlink.FAMILY_V6
	}
	ns, err := netlink.NeighList(link, family)
	if err != nil {
		return false
	}
	for _, n := range ns {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == hop && n.State&nudValid != 0 {
			return true
		}
	}
	return false
}

// resolveNeighbour does for a soft device what rdma_resolve_addr does on
// RoCE before ADDR_RESOLVED: it makes sure the next hop toward dst answers
// at the link layer (ARP or neighbour discovery), within timeout. A
// datagram to dst's discard port starts the kernel's resolution; the
// neighbour table says when it is done. A next hop that does not answer
// gives ETIMEDOUT, as on Linux (RDMA_CM_EVENT_ADDR_ERROR, -110).
func resolveNeighbour(dst netip.Addr, timeout time.Duration) error {
	link, hop, ok, err := nextHop(dst)
	if err != nil || !ok {
		return err
	}
	deadline := time.Now().Add(timeout)
	for probed := false; ; probed = true {
		if neighbourValid(link, hop) {
			return nil
		}
		if !probed {
			if c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9))); err == nil {
				c.Write(nil)
				c.Close()
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("resolving %s: next hop %s did not answer within %v: %w", dst, hop, timeout, syscall.ETIMEDOUT)
		}
		time.Sleep(min(neighbourPoll, left))
	}
}
