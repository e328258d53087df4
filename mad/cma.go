package mad

import (
	"errors"
	"net/netip"
)

// CMAHeaderLen is the size of the rdma_cm header at the start of the private
// data of a REQ or SIDR_REQ sent for an AF_INET or AF_INET6 id
// (docs/spec/cm-mad.md §4.2).
const CMAHeaderLen = 36

// CMAVersion is the only header version Linux accepts.
const CMAVersion = 0

// ErrCMAHeader is returned by CMAHeader.Validate for a header Linux would
// refuse.
var ErrCMAHeader = errors.New("mad: invalid rdma_cm header")

// CMAHeader is the rdma_cm header (struct cma_hdr): version, IP version, the
// active side's port and both IP addresses. It is a view of the first 36
// bytes of the private data.
type CMAHeader []byte

// Version returns byte 0 (0 for Linux).
func (h CMAHeader) Version() uint8 { return h[0] }

// IPVersion returns the IP version nibble (4 or 6).
func (h CMAHeader) IPVersion() uint8 { return h[1] >> 4 }

// Port returns the active side's source port.
func (h CMAHeader) Port() uint16 { return get16(h, 2) }

// SrcAddr returns the active side's address (IPv4 in bytes 16–19).
func (h CMAHeader) SrcAddr() netip.Addr { return h.addr(4) }

// DstAddr returns the passive side's address.
func (h CMAHeader) DstAddr() netip.Addr { return h.addr(20) }

func (h CMAHeader) addr(off int) netip.Addr {
	if h.IPVersion() == 4 {
		return netip.AddrFrom4([4]byte(h[off+12 : off+16]))
	}
	return netip.AddrFrom16([16]byte(h[off : off+16]))
}

// Validate reports ErrCMAHeader unless the version is 0 and the IP version
// 4 or 6 — the checks after which Linux treats the REQ as an IP one.
func (h CMAHeader) Validate() error {
	if len(h) < CMAHeaderLen || h.Version() != CMAVersion {
		return ErrCMAHeader
	}
	if v := h.IPVersion(); v != 4 && v != 6 {
		return ErrCMAHeader
	}
	return nil
}

// Encode fills in the header: version 0, the IP version of src, the active
// side's port, and the two addresses (IPv4 in the last four bytes of each
// 16-byte field, not v4-mapped). src and dst must be of the same family.
func (h CMAHeader) Encode(srcPort uint16, src, dst netip.Addr) {
	clear(h[:CMAHeaderLen])
	src, dst = src.Unmap(), dst.Unmap()
	if src.Is4() {
		h[1] = 0x40
		s, d := src.As4(), dst.As4()
		copy(h[16:20], s[:])
		copy(h[32:36], d[:])
	} else {
		h[1] = 0x60
		s, d := src.As16(), dst.As16()
		copy(h[4:20], s[:])
		copy(h[20:36], d[:])
	}
	put16(h, 2, srcPort)
}
