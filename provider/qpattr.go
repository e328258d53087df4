package provider

import (
	"encoding/binary"
	"net/netip"
	"strconv"
)

// GID is a 128-bit global identifier (union ibv_gid). On RoCEv2 it is an
// IPv6 address, or an IPv4-mapped one (::ffff:a.b.c.d) for IPv4.
type GID [16]byte

// GIDFromIP returns the RoCEv2 GID of an IP address: IPv4 addresses become
// IPv4-mapped GIDs, IPv6 addresses are used as they are (any zone is
// dropped). The zero Addr gives the zero GID.
func GIDFromIP(ip netip.Addr) GID {
	if !ip.IsValid() {
		return GID{}
	}
	return GID(ip.As16())
}

// ParseGID parses the text form of a GID: an IPv6 address as inet_pton
// accepts it, such as "fe80::5054:ff:fe12:3456" or "::ffff:192.0.2.1". A
// plain IPv4 address is accepted too and gives the IPv4-mapped GID. Errors
// wrap ErrInvalidArgument.
func ParseGID(s string) (GID, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return GID{}, Errorf(ErrInvalidArgument, "invalid GID %q", s)
	}
	return GIDFromIP(ip), nil
}

// IP returns the GID as an IP address; IPv4-mapped GIDs give the IPv4
// address.
func (g GID) IP() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsZero reports whether all 16 bytes are zero.
func (g GID) IsZero() bool { return g == GID{} }

// InterfaceIDZero reports whether the low 8 bytes (the interface ID) are
// zero; libibverbs tools treat such a GID table entry as empty, and the
// examples only set is_global for a peer GID that fails this test.
func (g GID) InterfaceIDZero() bool { return binary.BigEndian.Uint64(g[8:]) == 0 }

// SubnetPrefix returns the high 8 bytes as a big-endian number.
func (g GID) SubnetPrefix() uint64 { return binary.BigEndian.Uint64(g[:8]) }

// InterfaceID returns the low 8 bytes as a big-endian number.
func (g GID) InterfaceID() uint64 { return binary.BigEndian.Uint64(g[8:]) }

// String returns the GID as inet_ntop(AF_INET6) writes it: lowercase hex
// groups, the first longest run of two or more zero groups as "::", and a
// dotted-quad tail for IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible
// (::a.b.c.d) addresses.
func (g GID) String() string {
	var w [8]uint16
	for i := range w {
		w[i] = binary.BigEndian.Uint16(g[2*i:])
	}
	best, bestLen := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > bestLen {
			best, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		best, bestLen = -1, 0
	}
	b := make([]byte, 0, 46)
	for i := 0; i < 8; i++ {
		if best >= 0 && i >= best && i < best+bestLen {
			if i == best {
				b = append(b, ':')
			}
			continue
		}
		if i != 0 {
			b = append(b, ':')
		}
		if i == 6 && best == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff)) {
			for k := 12; k < 16; k++ {
				if k > 12 {
					b = append(b, '.')
				}
				b = strconv.AppendUint(b, uint64(g[k]), 10)
			}
			break
		}
		b = strconv.AppendUint(b, uint64(w[i]), 16)
	}
	if best >= 0 && best+bestLen == 8 {
		b = append(b, ':')
	}
	return string(b)
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseGID.
func (g *GID) UnmarshalText(text []byte) error {
	v, err := ParseGID(string(text))
	if err != nil {
		return err
	}
	*g = v
	return nil
}

// GlobalRoute is the GRH part of an address vector (struct ibv_global_route).
type GlobalRoute struct {
	// DGID is the destination GID.
	DGID GID
	// FlowLabel is the 20-bit IPv6 flow label.
	FlowLabel uint32
	// SGIDIndex selects the source GID in the port's GID table.
	SGIDIndex uint8
	// HopLimit is the IP hop limit (TTL).
	HopLimit uint8
	// TrafficClass is the IP traffic class (DSCP and ECN).
	TrafficClass uint8
}

// AHAttr is an address vector (struct ibv_ah_attr), used for address
// handles and for a connected QP's primary and alternate paths.
type AHAttr struct {
	// GRH holds the global routing fields, used when IsGlobal is set.
	GRH GlobalRoute
	// DLID is the destination LID (0 on RoCE).
	DLID uint16
	// SL is the service level.
	SL uint8
	// SrcPathBits are the source path bits (0 on RoCE).
	SrcPathBits uint8
	// StaticRate is an enum ibv_rate value limiting the injection rate.
	StaticRate uint8
	// IsGlobal says GRH is valid; RoCE requires it.
	IsGlobal bool
	// PortNum is the local port (1-based); 0 means the QP's port.
	PortNum uint8
}

// QPCap holds the sizes of a QP's queues (struct ibv_qp_cap).
type QPCap struct {
	// MaxSendWR is the number of outstanding send work requests.
	MaxSendWR uint32
	// MaxRecvWR is the number of outstanding receive work requests.
	MaxRecvWR uint32
	// MaxSendSGE is the number of scatter/gather entries per send WR.
	MaxSendSGE uint32
	// MaxRecvSGE is the number of scatter/gather entries per receive WR.
	MaxRecvSGE uint32
	// MaxInlineData is the largest inline send payload in bytes.
	MaxInlineData uint32
}

// QPAttr holds queue pair attributes (struct ibv_qp_attr). A modify uses
// the fields selected by a QPAttrMask; a query fills them in.
type QPAttr struct {
	// State is the state to move to (mask QPAttrState).
	State QPState
	// CurState is the state the caller believes the QP is in
	// (QPAttrCurState).
	CurState QPState
	// PathMTU is the path MTU (QPAttrPathMTU).
	PathMTU MTU
	// QKey is the Q_Key of a UD QP (QPAttrQKey).
	QKey uint32
	// RQPSN is the first PSN expected from the peer (QPAttrRQPSN), 24 bits.
	RQPSN uint32
	// SQPSN is the first PSN sent (QPAttrSQPSN), 24 bits.
	SQPSN uint32
	// DestQPN is the remote QP number (QPAttrDestQPN), 24 bits.
	DestQPN uint32
	// AccessFlags are the remote operations allowed on incoming requests
	// (QPAttrAccessFlags).
	AccessFlags AccessFlags
	// Cap holds the queue sizes (QPAttrCap).
	Cap QPCap
	// AH is the primary path address vector (QPAttrAV).
	AH AHAttr
	// PKeyIndex selects the P_Key (QPAttrPKeyIndex).
	PKeyIndex uint16
	// MaxRDAtomic is the number of RDMA reads and atomics this QP may have
	// outstanding as initiator (QPAttrMaxQPRDAtomic).
	MaxRDAtomic uint8
	// MaxDestRDAtomic is the number of incoming RDMA reads and atomics this
	// QP handles as responder (QPAttrMaxDestRDAtomic).
	MaxDestRDAtomic uint8
	// MinRNRTimer is the RNR NAK timer code this QP sends (QPAttrMinRNRTimer).
	MinRNRTimer uint8
	// PortNum is the port (1-based) the QP uses (QPAttrPort).
	PortNum uint8
	// Timeout is the local ACK timeout code: 4.096 µs × 2^Timeout, 0 for
	// infinite (QPAttrTimeout).
	Timeout uint8
	// RetryCnt is the transport retry count (QPAttrRetryCnt).
	RetryCnt uint8
	// RNRRetry is the RNR retry count, 7 meaning infinite (QPAttrRNRRetry).
	RNRRetry uint8
	// EnSQDAsyncNotify requests an event when SQD is reached
	// (QPAttrEnSQDAsyncNotify).
	EnSQDAsyncNotify bool
	// SQDraining reports, on query, that the send queue is draining.
	SQDraining bool
	// PathMigState is a PathMig* value (QPAttrPathMigState).
	PathMigState uint8
	// AltAH is the alternate path address vector (QPAttrAltPath).
	AltAH AHAttr
	// AltPKeyIndex is the alternate path P_Key index (QPAttrAltPath).
	AltPKeyIndex uint16
	// AltPortNum is the alternate path port (QPAttrAltPath).
	AltPortNum uint8
	// AltTimeout is the alternate path ACK timeout (QPAttrAltPath).
	AltTimeout uint8
	// RateLimit is the packet pacing rate in kbps (QPAttrRateLimit).
	RateLimit uint32
}
