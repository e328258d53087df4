package mad

import (
	"fmt"
	"net/netip"
)

// CM attribute IDs: the message types (docs/spec/cm-mad.md §3.1).
const (
	AttrREQ     = 0x0010
	AttrMRA     = 0x0011
	AttrREJ     = 0x0012
	AttrREP     = 0x0013
	AttrRTU     = 0x0014
	AttrDREQ    = 0x0015
	AttrDREP    = 0x0016
	AttrSIDRREQ = 0x0017
	AttrSIDRREP = 0x0018
	AttrLAP     = 0x0019
	AttrAPR     = 0x001A
)

// CMAttrName names a CM message type ("REQ", "SIDR_REQ", ...), or gives
// its attribute ID in hex.
func CMAttrName(id uint16) string {
	switch id {
	case AttrREQ:
		return "REQ"
	case AttrMRA:
		return "MRA"
	case AttrREJ:
		return "REJ"
	case AttrREP:
		return "REP"
	case AttrRTU:
		return "RTU"
	case AttrDREQ:
		return "DREQ"
	case AttrDREP:
		return "DREP"
	case AttrSIDRREQ:
		return "SIDR_REQ"
	case AttrSIDRREP:
		return "SIDR_REP"
	case AttrLAP:
		return "LAP"
	case AttrAPR:
		return "APR"
	}
	return fmt.Sprintf("attr %#04x", id)
}

// Private data sizes of the CM messages (§3.1, §4.3).
const (
	REQPrivateDataLen     = 92
	MRAPrivateDataLen     = 222
	REJPrivateDataLen     = 148
	REPPrivateDataLen     = 196
	RTUPrivateDataLen     = 224
	DREQPrivateDataLen    = 220
	DREPPrivateDataLen    = 224
	SIDRREQPrivateDataLen = 216
	SIDRREPPrivateDataLen = 136
	REJARILen             = 72
	SIDRREPInfoLen        = 72
)

// MessageRejected and MessageMRAed values (§3.4).
const (
	MsgREQ   = 0
	MsgREP   = 1
	MsgOther = 2
)

// Transport service types of a REQ (§3.3).
const (
	TransportRC  = 0
	TransportUC  = 1
	TransportXRC = 3
)

// REJ reasons (§3.4, include/rdma/ib_cm.h).
const (
	RejNoQP                 = 1
	RejNoEEC                = 2
	RejNoResources          = 3
	RejTimeout              = 4
	RejUnsupported          = 5
	RejInvalidCommID        = 6
	RejInvalidCommInstance  = 7
	RejInvalidServiceID     = 8
	RejInvalidTransportType = 9
	RejStaleConn            = 10
	RejRDCNotExist          = 11
	RejInvalidGID           = 12
	RejInvalidLID           = 13
	RejInvalidSL            = 14
	RejInvalidTrafficClass  = 15
	RejInvalidHopLimit      = 16
	RejInvalidPacketRate    = 17
	RejInvalidAltGID        = 18
	RejInvalidAltLID        = 19
	RejInvalidAltSL         = 20
	RejInvalidAltTC         = 21
	RejInvalidAltHopLimit   = 22
	RejInvalidAltPacketRate = 23
	RejPortCMRedirect       = 24
	RejPortRedirect         = 25
	RejInvalidMTU           = 26
	RejInsufficientRespRes  = 27
	RejConsumerDefined      = 28
	RejInvalidRNRRetry      = 29
	RejDuplicateLocalCommID = 30
	RejInvalidClassVersion  = 31
	RejInvalidFlowLabel     = 32
	RejInvalidAltFlowLabel  = 33
	RejVendorOptionNotSupp  = 35
)

var rejReasons = map[uint16]string{
	1: "no QP", 2: "no EEC", 3: "no resources", 4: "timeout", 5: "unsupported request",
	6: "invalid comm ID", 7: "invalid comm instance", 8: "invalid service ID",
	9: "invalid transport type", 10: "stale connection", 11: "RDC does not exist",
	12: "invalid GID", 13: "invalid LID", 14: "invalid SL", 15: "invalid traffic class",
	16: "invalid hop limit", 17: "invalid packet rate", 18: "invalid alternate GID",
	19: "invalid alternate LID", 20: "invalid alternate SL", 21: "invalid alternate traffic class",
	22: "invalid alternate hop limit", 23: "invalid alternate packet rate", 24: "port CM redirect",
	25: "port redirect", 26: "invalid MTU", 27: "insufficient responder resources",
	28: "consumer defined", 29: "invalid RNR retry", 30: "duplicate local comm ID",
	31: "invalid class version", 32: "invalid flow label", 33: "invalid alternate flow label",
	35: "vendor option not supported",
}

// RejReasonString names a REJ reason code ("invalid service ID").
func RejReasonString(r uint16) string {
	if s, ok := rejReasons[r]; ok {
		return s
	}
	return "reason " + itoa(uint64(r))
}

// SIDR_REP status values (§3.4).
const (
	SIDRAccept             = 0
	SIDRUnsupported        = 1 // service ID not supported: no listener
	SIDRReject             = 2
	SIDRNoQP               = 3
	SIDRRedirect           = 4
	SIDRUnsupportedVersion = 5
)

// InitCM zeroes m and fills in a CM header: class 0x07, version 2, method
// Send, the given attribute (message type) and TID.
func InitCM(m MAD, attr uint16, tid uint64) { m.Init(ClassCM, CMClassVersion, MethodSend, attr, tid) }

// NewCM returns a new zeroed CM MAD of the given message type and TID.
func NewCM(attr uint16, tid uint64) MAD { return New(ClassCM, CMClassVersion, MethodSend, attr, tid) }

// GID helpers: a RoCEv2 GID is an IPv6 address, IPv4-mapped for IPv4.

func getGID(b []byte, off int) [16]byte { return [16]byte(b[off : off+16]) }

// GIDAddr returns the IP address of a RoCEv2 GID (IPv4-mapped GIDs give the
// IPv4 address).
func GIDAddr(g [16]byte) netip.Addr { return netip.AddrFrom16(g).Unmap() }

// AddrGID returns the RoCEv2 GID of an IP address (::ffff:a.b.c.d for IPv4).
func AddrGID(a netip.Addr) [16]byte {
	if !a.IsValid() {
		return [16]byte{}
	}
	return a.As16()
}

// REQ is a connection request (attribute 0x0010, §3.3): a view of its MAD.
type REQ []byte

// MAD returns the MAD holding the REQ.
func (r REQ) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r REQ) LocalCommID() uint32 { return get32(r, 24) }

// VendorID returns the ECE vendor ID (24 bits).
func (r REQ) VendorID() uint32 { return get24(r, 29) }

// ServiceID returns the service ID.
func (r REQ) ServiceID() uint64 { return get64(r, 32) }

// LocalCAGUID returns the sender's node GUID.
func (r REQ) LocalCAGUID() uint64 { return get64(r, 40) }

// LocalQKey returns the sender's Q_Key (UD/RD only).
func (r REQ) LocalQKey() uint32 { return get32(r, 52) }

// LocalQPN returns the sender's QPN.
func (r REQ) LocalQPN() uint32 { return get24(r, 56) }

// ResponderResources returns the sender's responder resources.
func (r REQ) ResponderResources() uint8 { return r[59] }

// LocalEECN returns the local EE context number (RD only).
func (r REQ) LocalEECN() uint32 { return get24(r, 60) }

// InitiatorDepth returns the sender's initiator depth.
func (r REQ) InitiatorDepth() uint8 { return r[63] }

// RemoteEECN returns the remote EE context number (RD only).
func (r REQ) RemoteEECN() uint32 { return get24(r, 64) }

// RemoteCMResponseTimeout returns the time the sender expects the receiver
// to take to answer (4.096 µs × 2^N).
func (r REQ) RemoteCMResponseTimeout() uint8 { return get8(r, 67, 0xF8, 3) }

// TransportServiceType returns 0 RC, 1 UC or 3 XRC.
func (r REQ) TransportServiceType() uint8 { return get8(r, 67, 0x06, 1) }

// EndToEndFlowControl returns the flow control bit.
func (r REQ) EndToEndFlowControl() bool { return getBool(r, 67, 0x01) }

// StartingPSN returns the first PSN the sender will receive.
func (r REQ) StartingPSN() uint32 { return get24(r, 68) }

// LocalCMResponseTimeout returns the time the sender needs to answer.
func (r REQ) LocalCMResponseTimeout() uint8 { return get8(r, 71, 0xF8, 3) }

// RetryCount returns the transport retry count.
func (r REQ) RetryCount() uint8 { return get8(r, 71, 0x07, 0) }

// PartitionKey returns the P_Key.
func (r REQ) PartitionKey() uint16 { return get16(r, 72) }

// PathMTU returns the IB MTU enum (1 = 256 … 5 = 4096).
func (r REQ) PathMTU() uint8 { return get8(r, 74, 0xF0, 4) }

// RDCExists returns the RD bit.
func (r REQ) RDCExists() bool { return getBool(r, 74, 0x08) }

// RNRRetryCount returns the RNR retries the receiver should use.
func (r REQ) RNRRetryCount() uint8 { return get8(r, 74, 0x07, 0) }

// MaxCMRetries returns how often CM messages of the connection may be
// re-sent.
func (r REQ) MaxCMRetries() uint8 { return get8(r, 75, 0xF0, 4) }

// SRQ reports whether the sender's QP uses an SRQ.
func (r REQ) SRQ() bool { return getBool(r, 75, 0x08) }

// ExtendedTransportType returns 1 for XRC (with TransportServiceType 3).
func (r REQ) ExtendedTransportType() uint8 { return get8(r, 75, 0x07, 0) }

// Primary returns the primary path (MAD bytes 76–119).
func (r REQ) Primary() Path { return Path(r[76:120:120]) }

// Alternate returns the alternate path (MAD bytes 120–163).
func (r REQ) Alternate() Path { return Path(r[120:164:164]) }

// SAPSupported returns the SAP-supported bit (MAD byte 163, bit 5).
func (r REQ) SAPSupported() bool { return getBool(r, 163, 0x04) }

// PrivateData returns the 92 bytes of private data.
func (r REQ) PrivateData() []byte { return r[164:Size] }

// SetLocalCommID sets the sender's communication ID.
func (r REQ) SetLocalCommID(v uint32) { put32(r, 24, v) }

// SetVendorID sets the ECE vendor ID.
func (r REQ) SetVendorID(v uint32) { put24(r, 29, v) }

// SetServiceID sets the service ID.
func (r REQ) SetServiceID(v uint64) { put64(r, 32, v) }

// SetLocalCAGUID sets the sender's node GUID.
func (r REQ) SetLocalCAGUID(v uint64) { put64(r, 40, v) }

// SetLocalQKey sets the Q_Key.
func (r REQ) SetLocalQKey(v uint32) { put32(r, 52, v) }

// SetLocalQPN sets the sender's QPN.
func (r REQ) SetLocalQPN(v uint32) { put24(r, 56, v) }

// SetResponderResources sets the responder resources.
func (r REQ) SetResponderResources(v uint8) { r[59] = v }

// SetLocalEECN sets the local EE context number.
func (r REQ) SetLocalEECN(v uint32) { put24(r, 60, v) }

// SetInitiatorDepth sets the initiator depth.
func (r REQ) SetInitiatorDepth(v uint8) { r[63] = v }

// SetRemoteEECN sets the remote EE context number.
func (r REQ) SetRemoteEECN(v uint32) { put24(r, 64, v) }

// SetRemoteCMResponseTimeout sets the 5-bit remote CM response timeout.
func (r REQ) SetRemoteCMResponseTimeout(v uint8) { set8(r, 67, 0xF8, 3, v) }

// SetTransportServiceType sets the 2-bit transport service type.
func (r REQ) SetTransportServiceType(v uint8) { set8(r, 67, 0x06, 1, v) }

// SetEndToEndFlowControl sets the flow control bit.
func (r REQ) SetEndToEndFlowControl(v bool) { setBool(r, 67, 0x01, v) }

// SetStartingPSN sets the 24-bit starting PSN.
func (r REQ) SetStartingPSN(v uint32) { put24(r, 68, v) }

// SetLocalCMResponseTimeout sets the 5-bit local CM response timeout.
func (r REQ) SetLocalCMResponseTimeout(v uint8) { set8(r, 71, 0xF8, 3, v) }

// SetRetryCount sets the 3-bit retry count.
func (r REQ) SetRetryCount(v uint8) { set8(r, 71, 0x07, 0, v) }

// SetPartitionKey sets the P_Key.
func (r REQ) SetPartitionKey(v uint16) { put16(r, 72, v) }

// SetPathMTU sets the 4-bit MTU enum.
func (r REQ) SetPathMTU(v uint8) { set8(r, 74, 0xF0, 4, v) }

// SetRDCExists sets the RD bit.
func (r REQ) SetRDCExists(v bool) { setBool(r, 74, 0x08, v) }

// SetRNRRetryCount sets the 3-bit RNR retry count.
func (r REQ) SetRNRRetryCount(v uint8) { set8(r, 74, 0x07, 0, v) }

// SetMaxCMRetries sets the 4-bit CM retry count.
func (r REQ) SetMaxCMRetries(v uint8) { set8(r, 75, 0xF0, 4, v) }

// SetSRQ sets the SRQ bit.
func (r REQ) SetSRQ(v bool) { setBool(r, 75, 0x08, v) }

// SetExtendedTransportType sets the 3-bit extended transport type.
func (r REQ) SetExtendedTransportType(v uint8) { set8(r, 75, 0x07, 0, v) }

// SetSAPSupported sets the SAP-supported bit.
func (r REQ) SetSAPSupported(v bool) { setBool(r, 163, 0x04, v) }

// SetPrivateData copies p into the private data and zeroes the rest; it
// reports false, changing nothing, if p is longer than 92 bytes.
func (r REQ) SetPrivateData(p []byte) bool { return putData(r, 164, REQPrivateDataLen, p) }

// Path is the 44-byte path description of a REQ (primary or alternate;
// offsets relative to its start, docs/spec/cm-mad.md §3.3).
type Path []byte

// LocalLID returns the local port LID (0xFFFF on RoCE).
func (p Path) LocalLID() uint16 { return get16(p, 0) }

// RemoteLID returns the remote port LID.
func (p Path) RemoteLID() uint16 { return get16(p, 2) }

// LocalGID returns the REQ sender's GID: the address replies go to.
func (p Path) LocalGID() [16]byte { return getGID(p, 4) }

// RemoteGID returns the REQ receiver's GID.
func (p Path) RemoteGID() [16]byte { return getGID(p, 20) }

// FlowLabel returns the 20-bit flow label.
func (p Path) FlowLabel() uint32 { return get24(p, 36) >> 4 }

// PacketRate returns the 6-bit IB rate enum.
func (p Path) PacketRate() uint8 { return get8(p, 39, 0x3F, 0) }

// TrafficClass returns the traffic class.
func (p Path) TrafficClass() uint8 { return p[40] }

// HopLimit returns the hop limit.
func (p Path) HopLimit() uint8 { return p[41] }

// SL returns the 4-bit service level.
func (p Path) SL() uint8 { return get8(p, 42, 0xF0, 4) }

// SubnetLocal returns the subnet-local bit.
func (p Path) SubnetLocal() bool { return getBool(p, 42, 0x08) }

// LocalACKTimeout returns the 5-bit local ACK timeout.
func (p Path) LocalACKTimeout() uint8 { return get8(p, 43, 0xF8, 3) }

// SetLocalLID sets the local LID.
func (p Path) SetLocalLID(v uint16) { put16(p, 0, v) }

// SetRemoteLID sets the remote LID.
func (p Path) SetRemoteLID(v uint16) { put16(p, 2, v) }

// SetLocalGID sets the local GID.
func (p Path) SetLocalGID(g [16]byte) { copy(p[4:20], g[:]) }

// SetRemoteGID sets the remote GID.
func (p Path) SetRemoteGID(g [16]byte) { copy(p[20:36], g[:]) }

// SetFlowLabel sets the 20-bit flow label, keeping the reserved bits.
func (p Path) SetFlowLabel(v uint32) {
	put24(p, 36, (get24(p, 36)&0xF)|(v&0xFFFFF)<<4)
}

// SetPacketRate sets the 6-bit rate.
func (p Path) SetPacketRate(v uint8) { set8(p, 39, 0x3F, 0, v) }

// SetTrafficClass sets the traffic class.
func (p Path) SetTrafficClass(v uint8) { p[40] = v }

// SetHopLimit sets the hop limit.
func (p Path) SetHopLimit(v uint8) { p[41] = v }

// SetSL sets the 4-bit service level.
func (p Path) SetSL(v uint8) { set8(p, 42, 0xF0, 4, v) }

// SetSubnetLocal sets the subnet-local bit.
func (p Path) SetSubnetLocal(v bool) { setBool(p, 42, 0x08, v) }

// SetLocalACKTimeout sets the 5-bit local ACK timeout.
func (p Path) SetLocalACKTimeout(v uint8) { set8(p, 43, 0xF8, 3, v) }

// MRA is a message receipt acknowledgement (attribute 0x0011).
type MRA []byte

// MAD returns the MAD holding the MRA.
func (m MRA) MAD() MAD { return MAD(m) }

// LocalCommID returns the MRA sender's communication ID.
func (m MRA) LocalCommID() uint32 { return get32(m, 24) }

// RemoteCommID returns the ID of the party whose message is acknowledged.
func (m MRA) RemoteCommID() uint32 { return get32(m, 28) }

// MessageMRAed returns MsgREQ, MsgREP or MsgOther.
func (m MRA) MessageMRAed() uint8 { return get8(m, 32, 0xC0, 6) }

// ServiceTimeout returns the extra time the sender needs (5 bits).
func (m MRA) ServiceTimeout() uint8 { return get8(m, 33, 0xF8, 3) }

// PrivateData returns the 222 bytes of private data.
func (m MRA) PrivateData() []byte { return m[34:Size] }

// SetLocalCommID sets the sender's ID.
func (m MRA) SetLocalCommID(v uint32) { put32(m, 24, v) }

// SetRemoteCommID sets the acknowledged party's ID.
func (m MRA) SetRemoteCommID(v uint32) { put32(m, 28, v) }

// SetMessageMRAed sets the 2-bit message type.
func (m MRA) SetMessageMRAed(v uint8) { set8(m, 32, 0xC0, 6, v) }

// SetServiceTimeout sets the 5-bit service timeout.
func (m MRA) SetServiceTimeout(v uint8) { set8(m, 33, 0xF8, 3, v) }

// SetPrivateData copies p (at most 222 bytes) into the private data.
func (m MRA) SetPrivateData(p []byte) bool { return putData(m, 34, MRAPrivateDataLen, p) }

// REJ is a reject (attribute 0x0012).
type REJ []byte

// MAD returns the MAD holding the REJ.
func (r REJ) MAD() MAD { return MAD(r) }

// LocalCommID returns the rejecter's ID (0 for a REJ without a connection).
func (r REJ) LocalCommID() uint32 { return get32(r, 24) }

// RemoteCommID returns the ID of the rejected party.
func (r REJ) RemoteCommID() uint32 { return get32(r, 28) }

// MessageRejected returns MsgREQ, MsgREP or MsgOther.
func (r REJ) MessageRejected() uint8 { return get8(r, 32, 0xC0, 6) }

// RejectedInfoLength returns the ARI length in bytes (7 bits).
func (r REJ) RejectedInfoLength() uint8 { return get8(r, 33, 0xFE, 1) }

// Reason returns the reject reason.
func (r REJ) Reason() uint16 { return get16(r, 34) }

// ARI returns the 72-byte additional reject information area.
func (r REJ) ARI() []byte { return r[36:108] }

// PrivateData returns the 148 bytes of private data.
func (r REJ) PrivateData() []byte { return r[108:Size] }

// SetLocalCommID sets the rejecter's ID.
func (r REJ) SetLocalCommID(v uint32) { put32(r, 24, v) }

// SetRemoteCommID sets the rejected party's ID.
func (r REJ) SetRemoteCommID(v uint32) { put32(r, 28, v) }

// SetMessageRejected sets the 2-bit message type.
func (r REJ) SetMessageRejected(v uint8) { set8(r, 32, 0xC0, 6, v) }

// SetRejectedInfoLength sets the 7-bit ARI length.
func (r REJ) SetRejectedInfoLength(v uint8) { set8(r, 33, 0xFE, 1, v) }

// SetReason sets the reject reason.
func (r REJ) SetReason(v uint16) { put16(r, 34, v) }

// SetARI copies a (at most 72 bytes) into the ARI area, zeroes the rest and
// sets RejectedInfoLength to len(a).
func (r REJ) SetARI(a []byte) bool {
	if !putData(r, 36, REJARILen, a) {
		return false
	}
	r.SetRejectedInfoLength(uint8(len(a)))
	return true
}

// SetPrivateData copies p (at most 148 bytes) into the private data.
func (r REJ) SetPrivateData(p []byte) bool { return putData(r, 108, REJPrivateDataLen, p) }

// REP is a connection reply (attribute 0x0013).
type REP []byte

// MAD returns the MAD holding the REP.
func (r REP) MAD() MAD { return MAD(r) }

// LocalCommID returns the replier's ID.
func (r REP) LocalCommID() uint32 { return get32(r, 24) }

// RemoteCommID returns the REQ sender's ID.
func (r REP) RemoteCommID() uint32 { return get32(r, 28) }

// LocalQKey returns the replier's Q_Key (UD/RD only).
func (r REP) LocalQKey() uint32 { return get32(r, 32) }

// LocalQPN returns the replier's QPN.
func (r REP) LocalQPN() uint32 { return get24(r, 36) }

// VendorIDH returns ECE vendor ID bits 23:16.
func (r REP) VendorIDH() uint8 { return r[39] }

// LocalEECN returns the local EE context number (XRC TGT: the QPN).
func (r REP) LocalEECN() uint32 { return get24(r, 40) }

// VendorIDM returns ECE vendor ID bits 15:8.
func (r REP) VendorIDM() uint8 { return r[43] }

// StartingPSN returns the first PSN the replier will receive.
func (r REP) StartingPSN() uint32 { return get24(r, 44) }

// VendorIDL returns ECE vendor ID bits 7:0.
func (r REP) VendorIDL() uint8 { return r[47] }

// VendorID returns the 24-bit ECE vendor ID from its three parts.
func (r REP) VendorID() uint32 {
	return uint32(r.VendorIDH())<<16 | uint32(r.VendorIDM())<<8 | uint32(r.VendorIDL())
}

// ResponderResources returns the replier's responder resources.
func (r REP) ResponderResources() uint8 { return r[48] }

// InitiatorDepth returns the replier's initiator depth.
func (r REP) InitiatorDepth() uint8 { return r[49] }

// TargetACKDelay returns the replier's local CA ACK delay (5 bits).
func (r REP) TargetACKDelay() uint8 { return get8(r, 50, 0xF8, 3) }

// FailoverAccepted returns the 2-bit failover field.
func (r REP) FailoverAccepted() uint8 { return get8(r, 50, 0x06, 1) }

// EndToEndFlowControl returns the flow control bit.
func (r REP) EndToEndFlowControl() bool { return getBool(r, 50, 0x01) }

// RNRRetryCount returns the RNR retries the REQ sender should use (3 bits).
func (r REP) RNRRetryCount() uint8 { return get8(r, 51, 0xE0, 5) }

// SRQ reports whether the replier's QP uses an SRQ.
func (r REP) SRQ() bool { return getBool(r, 51, 0x10) }

// LocalCAGUID returns the replier's node GUID.
func (r REP) LocalCAGUID() uint64 { return get64(r, 52) }

// PrivateData returns the 196 bytes of private data.
func (r REP) PrivateData() []byte { return r[60:Size] }

// SetLocalCommID sets the replier's ID.
func (r REP) SetLocalCommID(v uint32) { put32(r, 24, v) }

// SetRemoteCommID sets the REQ sender's ID.
func (r REP) SetRemoteCommID(v uint32) { put32(r, 28, v) }

// SetLocalQKey sets the Q_Key.
func (r REP) SetLocalQKey(v uint32) { put32(r, 32, v) }

// SetLocalQPN sets the replier's QPN.
func (r REP) SetLocalQPN(v uint32) { put24(r, 36, v) }

// SetLocalEECN sets the local EE context number.
func (r REP) SetLocalEECN(v uint32) { put24(r, 40, v) }

// SetStartingPSN sets the 24-bit starting PSN.
func (r REP) SetStartingPSN(v uint32) { put24(r, 44, v) }

// SetVendorID sets the 24-bit ECE vendor ID into its three parts.
func (r REP) SetVendorID(v uint32) { r[39], r[43], r[47] = byte(v>>16), byte(v>>8), byte(v) }

// SetResponderResources sets the responder resources.
func (r REP) SetResponderResources(v uint8) { r[48] = v }

// SetInitiatorDepth sets the initiator depth.
func (r REP) SetInitiatorDepth(v uint8) { r[49] = v }

// SetTargetACKDelay sets the 5-bit target ACK delay.
func (r REP) SetTargetACKDelay(v uint8) { set8(r, 50, 0xF8, 3, v) }

// SetFailoverAccepted sets the 2-bit failover field.
func (r REP) SetFailoverAccepted(v uint8) { set8(r, 50, 0x06, 1, v) }

// SetEndToEndFlowControl sets the flow control bit.
func (r REP) SetEndToEndFlowControl(v bool) { setBool(r, 50, 0x01, v) }

// SetRNRRetryCount sets the 3-bit RNR retry count.
func (r REP) SetRNRRetryCount(v uint8) { set8(r, 51, 0xE0, 5, v) }

// SetSRQ sets the SRQ bit.
func (r REP) SetSRQ(v bool) { setBool(r, 51, 0x10, v) }

// SetLocalCAGUID sets the replier's node GUID.
func (r REP) SetLocalCAGUID(v uint64) { put64(r, 52, v) }

// SetPrivateData copies p (at most 196 bytes) into the private data.
func (r REP) SetPrivateData(p []byte) bool { return putData(r, 60, REPPrivateDataLen, p) }

// RTU is ready-to-use (attribute 0x0014).
type RTU []byte

// MAD returns the MAD holding the RTU.
func (r RTU) MAD() MAD { return MAD(r) }

// LocalCommID returns the active side's ID.
func (r RTU) LocalCommID() uint32 { return get32(r, 24) }

// RemoteCommID returns the passive side's ID.
func (r RTU) RemoteCommID() uint32 { return get32(r, 28) }

// PrivateData returns the 224 bytes of private data.
func (r RTU) PrivateData() []byte { return r[32:Size] }

// SetLocalCommID sets the active side's ID.
func (r RTU) SetLocalCommID(v uint32) { put32(r, 24, v) }

// SetRemoteCommID sets the passive side's ID.
func (r RTU) SetRemoteCommID(v uint32) { put32(r, 28, v) }

// SetPrivateData copies p (at most 224 bytes) into the private data.
func (r RTU) SetPrivateData(p []byte) bool { return putData(r, 32, RTUPrivateDataLen, p) }

// DREQ is a disconnect request (attribute 0x0015).
type DREQ []byte

// MAD returns the MAD holding the DREQ.
func (d DREQ) MAD() MAD { return MAD(d) }

// LocalCommID returns the disconnect requester's ID.
func (d DREQ) LocalCommID() uint32 { return get32(d, 24) }

// RemoteCommID returns the peer's ID.
func (d DREQ) RemoteCommID() uint32 { return get32(d, 28) }

// RemoteQPN returns the peer's QPN (24 bits).
func (d DREQ) RemoteQPN() uint32 { return get24(d, 32) }

// PrivateData returns the 220 bytes of private data.
func (d DREQ) PrivateData() []byte { return d[36:Size] }

// SetLocalCommID sets the requester's ID.
func (d DREQ) SetLocalCommID(v uint32) { put32(d, 24, v) }

// SetRemoteCommID sets the peer's ID.
func (d DREQ) SetRemoteCommID(v uint32) { put32(d, 28, v) }

// SetRemoteQPN sets the peer's QPN.
func (d DREQ) SetRemoteQPN(v uint32) { put24(d, 32, v) }

// SetPrivateData copies p (at most 220 bytes) into the private data.
func (d DREQ) SetPrivateData(p []byte) bool { return putData(d, 36, DREQPrivateDataLen, p) }

// DREP is a disconnect reply (attribute 0x0016).
type DREP []byte

// MAD returns the MAD holding the DREP.
func (d DREP) MAD() MAD { return MAD(d) }

// LocalCommID returns the replier's ID.
func (d DREP) LocalCommID() uint32 { return get32(d, 24) }

// RemoteCommID returns the DREQ sender's ID.
func (d DREP) RemoteCommID() uint32 { return get32(d, 28) }

// PrivateData returns the 224 bytes of private data.
func (d DREP) PrivateData() []byte { return d[32:Size] }

// SetLocalCommID sets the replier's ID.
func (d DREP) SetLocalCommID(v uint32) { put32(d, 24, v) }

// SetRemoteCommID sets the DREQ sender's ID.
func (d DREP) SetRemoteCommID(v uint32) { put32(d, 28, v) }

// SetPrivateData copies p (at most 224 bytes) into the private data.
func (d DREP) SetPrivateData(p []byte) bool { return putData(d, 32, DREPPrivateDataLen, p) }

// SIDRREQ is a service ID resolution request (attribute 0x0017).
type SIDRREQ []byte

// MAD returns the MAD holding the SIDR_REQ.
func (s SIDRREQ) MAD() MAD { return MAD(s) }

// RequestID returns the requester's ID.
func (s SIDRREQ) RequestID() uint32 { return get32(s, 24) }

// PartitionKey returns the P_Key.
func (s SIDRREQ) PartitionKey() uint16 { return get16(s, 28) }

// ServiceID returns the service ID.
func (s SIDRREQ) ServiceID() uint64 { return get64(s, 32) }

// PrivateData returns the 216 bytes of private data.
func (s SIDRREQ) PrivateData() []byte { return s[40:Size] }

// SetRequestID sets the requester's ID.
func (s SIDRREQ) SetRequestID(v uint32) { put32(s, 24, v) }

// SetPartitionKey sets the P_Key.
func (s SIDRREQ) SetPartitionKey(v uint16) { put16(s, 28, v) }

// SetServiceID sets the service ID.
func (s SIDRREQ) SetServiceID(v uint64) { put64(s, 32, v) }

// SetPrivateData copies p (at most 216 bytes) into the private data.
func (s SIDRREQ) SetPrivateData(p []byte) bool { return putData(s, 40, SIDRREQPrivateDataLen, p) }

// SIDRREP is a service ID resolution reply (attribute 0x0018).
type SIDRREP []byte

// MAD returns the MAD holding the SIDR_REP.
func (s SIDRREP) MAD() MAD { return MAD(s) }

// RequestID returns the echoed request ID.
func (s SIDRREP) RequestID() uint32 { return get32(s, 24) }

// Status returns the SIDR status (SIDRAccept …).
func (s SIDRREP) Status() uint8 { return s[28] }

// AdditionalInfoLength returns the length of the additional information.
func (s SIDRREP) AdditionalInfoLength() uint8 { return s[29] }

// VendorIDH returns the 16-bit high ECE vendor ID slot.
func (s SIDRREP) VendorIDH() uint16 { return get16(s, 30) }

// QPN returns the responder's UD QPN.
func (s SIDRREP) QPN() uint32 { return get24(s, 32) }

// VendorIDL returns the low ECE vendor ID byte.
func (s SIDRREP) VendorIDL() uint8 { return s[35] }

// ServiceID returns the echoed service ID.
func (s SIDRREP) ServiceID() uint64 { return get64(s, 36) }

// QKey returns the responder's Q_Key.
func (s SIDRREP) QKey() uint32 { return get32(s, 44) }

// AdditionalInfo returns the 72-byte additional information area.
func (s SIDRREP) AdditionalInfo() []byte { return s[48:120] }

// PrivateData returns the 136 bytes of private data.
func (s SIDRREP) PrivateData() []byte { return s[120:Size] }

// SetRequestID sets the request ID.
func (s SIDRREP) SetRequestID(v uint32) { put32(s, 24, v) }

// SetStatus sets the SIDR status.
func (s SIDRREP) SetStatus(v uint8) { s[28] = v }

// SetAdditionalInfoLength sets the additional information length.
func (s SIDRREP) SetAdditionalInfoLength(v uint8) { s[29] = v }

// SetVendorIDH sets the high vendor ID slot.
func (s SIDRREP) SetVendorIDH(v uint16) { put16(s, 30, v) }

// SetQPN sets the responder's QPN.
func (s SIDRREP) SetQPN(v uint32) { put24(s, 32, v) }

// SetVendorIDL sets the low vendor ID byte.
func (s SIDRREP) SetVendorIDL(v uint8) { s[35] = v }

// SetServiceID sets the service ID.
func (s SIDRREP) SetServiceID(v uint64) { put64(s, 36, v) }

// SetQKey sets the Q_Key.
func (s SIDRREP) SetQKey(v uint32) { put32(s, 44, v) }

// SetAdditionalInfo copies a (at most 72 bytes) into the additional
// information and sets its length.
func (s SIDRREP) SetAdditionalInfo(a []byte) bool {
	if !putData(s, 48, SIDRREPInfoLen, a) {
		return false
	}
	s.SetAdditionalInfoLength(uint8(len(a)))
	return true
}

// SetPrivateData copies p (at most 136 bytes) into the private data.
func (s SIDRREP) SetPrivateData(p []byte) bool { return putData(s, 120, SIDRREPPrivateDataLen, p) }

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
