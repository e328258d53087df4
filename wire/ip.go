package wire

// IPv4 send rule (docs/spec/roce-wire.md §1.7).
//
// The ICRC covers the IPv4 header's Identification and flags fields, which a
// UDP socket neither shows nor lets the sender set. ICRC and PutICRC assume
// the header this stack's senders produce: IHL 5 (no options), total length
// 20 + UDP length, flags 0x4000 (DF, offset 0) and ID 0. Linux puts ID 0 in
// every datagram of an unconnected UDP socket that has IP_MTU_DISCOVER set to
// IP_PMTUDISC_DO (which also sets DF); a connected socket, or one without DF,
// gets a changing ID and the ICRC would be wrong. So an IPv4 sender MUST:
//
//   - send from an unconnected UDP socket (sendto/sendmsg with an address),
//   - set IP_MTU_DISCOVER = IP_PMTUDISC_DO on it,
//   - not use UDP GSO until the IDs it produces have been measured (§11),
//   - bind it to exactly the IPv4 address carried in its GID.
//
// TOS and TTL are masked in the ICRC, so IP_TOS and IP_TTL may be set freely.
// IPv6 has no ID and its traffic class, flow label and hop limit are masked,
// so IPv6 needs no such rule; its receive socket should set UDP_NO_CHECK6_RX,
// because rxe and NICs send IPv6 UDP with checksum 0.
//
// Receiving, rxe and RoCE NICs send arbitrary IPv4 IDs, and the receiver
// cannot see them. VerifyICRC checks ID-0 packets exactly and, by default
// (ICRCIPv4AnyID), accepts other packets whose ICRC is right for some ID,
// which it finds by linear algebra over GF(2); see its documentation.

// Header lengths of the encapsulation (spec §1.1).
const (
	IPv4HeaderLen = 20 // no options: rxe never sends any, nor do we
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8
)

// RoCEv2Port is the UDP destination port of RoCEv2 (ROCE_V2_UDP_DPORT).
const RoCEv2Port = 4791

// MinSourcePort is the lowest UDP source port of the RoCEv2 range that rxe
// and ib_verbs.h use for flow entropy (0xC000..0xFFFF).
const MinSourcePort = 0xC000

// FlowLabelMask keeps the 20 bits of an IPv6 / GRH flow label.
const FlowLabelMask = 0xFFFFF

// SourcePort returns the UDP source port rxe uses for an RC or UC QP
// (rdma_get_udp_sport in ib_verbs.h): the flow label, or when it is 0 the
// label derived from the local and remote QPNs, folded into 0xC000..0xFFFF.
// The derived label depends on the product lqpn × rqpn, so both ends of a
// connection choose the same port. Receivers never depend on the port.
func SourcePort(lqpn, rqpn uint32, flowLabel uint32) uint16 {
	fl := flowLabel & FlowLabelMask
	if fl == 0 {
		fl = FlowLabel(lqpn, rqpn)
	}
	return uint16(MinSourcePort | (fl&0x3FFF ^ (fl&0xFC000)>>14))
}

// FlowLabel returns the flow label rxe derives from a QPN pair when the
// address vector carries none (rdma_calc_flow_label): the 64-bit product
// lqpn × rqpn folded to 20 bits.
func FlowLabel(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & FlowLabelMask)
}

// UDSourcePort returns the UDP source port rxe uses for a UD QP (and for a
// QP whose address vector has no GRH): 0xC000 + hash_32(qpn, 14), where
// hash_32(x, 14) = (x × 0x61C88647 mod 2^32) >> 18.
func UDSourcePort(qpn uint32) uint16 {
	return uint16(MinSourcePort + (qpn*0x61C88647)>>18)
}
