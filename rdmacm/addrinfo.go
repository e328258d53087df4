package rdmacm

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"github.com/rdma-go/rdma-go/verbs"
)

// rdma_addrinfo flags (RAI_*).
const (
	RAIPassive     = 1
	RAINumericHost = 2
	RAINoRoute     = 4
	RAIFamily      = 8
)

// Address families of AddrInfo.Family.
const (
	AFInet  = syscall.AF_INET
	AFInet6 = syscall.AF_INET6
)

// AddrInfo is struct rdma_addrinfo: where to connect or listen, and how.
type AddrInfo struct {
	Flags     int
	Family    int
	QPType    verbs.QPType
	PortSpace PortSpace
	SrcAddr   netip.AddrPort
	DstAddr   netip.AddrPort
	// SrcCanonName and DstCanonName are the names given, if any.
	SrcCanonName string
	DstCanonName string
}

// GetAddrInfo resolves node and service to connection parameters
// (rdma_getaddrinfo). With RAIPassive in hints.Flags, node (possibly
// empty: every address) is the local address to listen on; otherwise it
// is the peer, and the source address is filled from the route unless
// RAINoRoute is set. hints may be nil (RC, RDMA_PS_TCP).
func GetAddrInfo(ctx context.Context, node, service string, hints *AddrInfo) ([]*AddrInfo, error) {
	var h AddrInfo
	if hints != nil {
		h = *hints
	}
	if h.QPType == 0 {
		h.QPType = verbs.QPTypeRC
		if h.PortSpace == PSUDP {
			h.QPType = verbs.QPTypeUD
		}
	}
	if h.PortSpace == 0 {
		h.PortSpace = PSTCP
		if h.QPType == verbs.QPTypeUD {
			h.PortSpace = PSUDP
		}
	}
	var port uint16
	if service != "" {
		p, err := strconv.ParseUint(service, 10, 16)
		if err != nil {
			pn, lerr := net.DefaultResolver.LookupPort(ctx, "tcp", service)
			if lerr != nil {
				return nil, fmt.Errorf("rdmacm: service %q: %w", service, lerr)
			}
			p = uint64(pn)
		}
		port = uint16(p)
	}
	var addrs []netip.Addr
	switch {
	case node == "" && h.Flags&RAIPassive != 0:
		if h.Family == AFInet6 {
			addrs = []netip.Addr{netip.IPv6Unspecified()}
		} else {
			addrs = []netip.Addr{netip.IPv4Unspecified()}
		}
	case node == "":
		return nil, fmt.Errorf("rdmacm: getaddrinfo: no node: %w", syscall.EINVAL)
	default:
		if a, err := netip.ParseAddr(node); err == nil {
			addrs = []netip.Addr{a.Unmap()}
		} else if h.Flags&RAINumericHost != 0 {
			return nil, fmt.Errorf("rdmacm: %q is not a numeric address: %w", node, syscall.EINVAL)
		} else {
			ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", node)
			if err != nil {
				return nil, fmt.Errorf("rdmacm: %w", err)
			}
			for _, a := range ips {
				addrs = append(addrs, a.Unmap())
			}
		}
	}
	var out []*AddrInfo
	for _, a := range addrs {
		fam := AFInet
		if !a.Is4() {
			fam = AFInet6
		}
		if h.Flags&RAIFamily != 0 && h.Family != 0 && h.Family != fam {
			continue
		}
		ai := &AddrInfo{Flags: h.Flags, Family: fam, QPType: h.QPType, PortSpace: h.PortSpace}
		if h.Flags&RAIPassive != 0 {
			ai.SrcAddr, ai.SrcCanonName = netip.AddrPortFrom(a, port), node
		} else {
			ai.DstAddr, ai.DstCanonName = netip.AddrPortFrom(a, port), node
			ai.SrcAddr = h.SrcAddr
			if h.Flags&RAINoRoute == 0 && !ai.SrcAddr.Addr().IsValid() {
				if vd, err := deviceToward(a); err == nil && vd.Addr().IsValid() {
					ai.SrcAddr = netip.AddrPortFrom(vd.Addr().Unmap(), 0)
				}
			}
		}
		out = append(out, ai)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("rdmacm: getaddrinfo %q: no address of the family asked for: %w", node, syscall.EADDRNOTAVAIL)
	}
	return out, nil
}
