package ibcm

import (
	"net/netip"

	"github.com/rdma-go/rdma-go/mad"
)

// Path is the primary path of a connection as it goes into a REQ: on RoCE
// both ends' IP addresses (as GIDs) and the IP header fields, built locally
// without any Subnet Administrator (docs/spec/cm-mad.md §4.4).
type Path struct {
	Local, Remote  netip.Addr // the REQ sender's and receiver's addresses
	FlowLabel      uint32
	TrafficClass   uint8
	HopLimit       uint8 // 0 means 64
	SL             uint8
	MTU            uint8 // IB MTU enum (3 = 1024)
	PacketLifeTime uint8 // 4.096 µs × 2^N; Linux uses 16 on RoCE
	PKey           uint16
}

// ConnectParams are the contents of a REQ (Linux's ib_cm_req_param).
type ConnectParams struct {
	Path      Path
	ServiceID uint64
	QPN       uint32
	// Transport is mad.TransportRC or mad.TransportUC.
	Transport          uint8
	StartingPSN        uint32
	ResponderResources uint8
	InitiatorDepth     uint8
	// RemoteCMResponseTimeout and LocalCMResponseTimeout are 4.096 µs ×
	// 2^N (rdma_cm: 20).
	RemoteCMResponseTimeout uint8
	LocalCMResponseTimeout  uint8
	RetryCount              uint8
	RNRRetryCount           uint8
	// MaxCMRetries is how often the REQ (and later the DREQ) is re-sent
	// (rdma_cm: 15).
	MaxCMRetries uint8
	FlowControl  bool
	SRQ          bool
	// LocalACKDelay is the device's local CA ACK delay (rxe: 15).
	LocalACKDelay uint8
	// PrivateData is at most 92 bytes.
	PrivateData []byte
}

// AcceptParams are the contents of a REP (Linux's ib_cm_rep_param).
type AcceptParams struct {
	QPN                uint32
	StartingPSN        uint32
	ResponderResources uint8
	InitiatorDepth     uint8
	// TargetACKDelay is the device's local CA ACK delay.
	TargetACKDelay   uint8
	FailoverAccepted uint8
	FlowControl      bool
	RNRRetryCount    uint8
	SRQ              bool
	// PrivateData is at most 196 bytes.
	PrivateData []byte
}

// SIDRParams are the contents of a SIDR_REQ and its timer.
type SIDRParams struct {
	// To is the responder's address (its QP1).
	To        netip.Addr
	ServiceID uint64
	// Timeout is the wait for the SIDR_REP (4.096 µs × 2^N; rdma_cm 20).
	Timeout      uint8
	MaxCMRetries uint8
	TrafficClass uint8
	FlowLabel    uint32
	HopLimit     uint8
	// PrivateData is at most 216 bytes.
	PrivateData []byte
}

// SIDRReply is the contents of a SIDR_REP.
type SIDRReply struct {
	Status uint8 // mad.SIDRAccept, mad.SIDRReject, …
	QPN    uint32
	QKey   uint32
	// Info is the additional information (at most 72 bytes).
	Info []byte
	// PrivateData is at most 136 bytes.
	PrivateData []byte
}

// buildREQ encodes p as a REQ from localID with the given TID.
func buildREQ(p *ConnectParams, guid uint64, localID uint32, tid uint64) (mad.MAD, error) {
	m := mad.NewCM(mad.AttrREQ, tid)
	r := mad.REQ(m)
	if !r.SetPrivateData(p.PrivateData) {
		return nil, ErrPrivateData
	}
	r.SetLocalCommID(localID)
	r.SetServiceID(p.ServiceID)
	r.SetLocalCAGUID(guid)
	r.SetLocalQPN(p.QPN)
	r.SetResponderResources(p.ResponderResources)
	r.SetInitiatorDepth(p.InitiatorDepth)
	r.SetRemoteCMResponseTimeout(p.RemoteCMResponseTimeout)
	r.SetTransportServiceType(p.Transport)
	r.SetEndToEndFlowControl(p.FlowControl)
	r.SetStartingPSN(p.StartingPSN)
	r.SetLocalCMResponseTimeout(p.LocalCMResponseTimeout)
	r.SetRetryCount(min(p.RetryCount, 7))
	pkey := p.Path.PKey
	if pkey == 0 {
		pkey = mad.GSIPKey
	}
	r.SetPartitionKey(pkey)
	r.SetPathMTU(p.Path.MTU)
	r.SetRNRRetryCount(min(p.RNRRetryCount, 7))
	r.SetMaxCMRetries(min(p.MaxCMRetries, 15))
	r.SetSRQ(p.SRQ)
	pp := r.Primary()
	hop := p.Path.HopLimit
	if hop == 0 {
		hop = 64
	}
	if hop > 1 {
		pp.SetLocalLID(0xFFFF)
		pp.SetRemoteLID(0xFFFF)
	} else {
		pp.SetSubnetLocal(true)
	}
	pp.SetLocalGID(mad.AddrGID(p.Path.Local))
	pp.SetRemoteGID(mad.AddrGID(p.Path.Remote))
	pp.SetFlowLabel(p.Path.FlowLabel)
	pp.SetTrafficClass(p.Path.TrafficClass)
	pp.SetHopLimit(hop)
	pp.SetSL(p.Path.SL)
	pp.SetLocalACKTimeout(AckTimeout(p.LocalACKDelay, p.Path.PacketLifeTime))
	return m, nil
}

// buildREP encodes p as the REP to a REQ.
func buildREP(p *AcceptParams, guid uint64, localID, remoteID uint32, tid uint64) (mad.MAD, error) {
	m := mad.NewCM(mad.AttrREP, tid)
	r := mad.REP(m)
	if !r.SetPrivateData(p.PrivateData) {
		return nil, ErrPrivateData
	}
	r.SetLocalCommID(localID)
	r.SetRemoteCommID(remoteID)
	r.SetLocalQPN(p.QPN)
	r.SetStartingPSN(p.StartingPSN)
	r.SetResponderResources(p.ResponderResources)
	r.SetInitiatorDepth(p.InitiatorDepth)
	r.SetTargetACKDelay(p.TargetACKDelay)
	r.SetFailoverAccepted(p.FailoverAccepted)
	r.SetEndToEndFlowControl(p.FlowControl)
	r.SetRNRRetryCount(min(p.RNRRetryCount, 7))
	r.SetSRQ(p.SRQ)
	r.SetLocalCAGUID(guid)
	return m, nil
}
