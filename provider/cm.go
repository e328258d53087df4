package provider

import (
	"net/netip"
	"time"
)

// The connection manager's seam (package rdmacm uses it). A device either
// has an in-band CM of its own on QP1 (the soft devices: rdmacm drives it
// message by message), or is served by a connection manager outside the
// device that works at the level of librdmacm's rdma_cm_id: the kernel's
// rdma_cm, reached through librdmacm. A Device offering the second kind
// implements CMDevice.

// CMDevice is a Device whose connections a CM outside it manages.
type CMDevice interface {
	Device
	// ConnectionManager returns the CM serving the device. Devices
	// served by the same CM return the same value.
	ConnectionManager() (CM, error)
}

// CM is a connection manager at the rdma_cm_id level (librdmacm): it
// resolves IP addresses to its devices and runs connections for them.
type CM interface {
	// CreateID creates an id (rdma_create_id) in port space ps (enum
	// rdma_port_space) for QPs of type t. events receives the id's
	// events in order, on one goroutine; it must not block for long
	// nor call Destroy on the id.
	CreateID(ps uint16, t QPType, events func(CMEvent)) (CMID, error)
}

// CMOption is an option of SetOption (RDMA_OPTION_ID_*).
type CMOption int

// Options of level RDMA_OPTION_ID.
const (
	CMOptionTOS        CMOption = 0 // uint8: the IP type of service
	CMOptionReuseAddr  CMOption = 1 // bool
	CMOptionAFOnly     CMOption = 2 // bool: an IPv6 wildcard takes IPv6 only
	CMOptionAckTimeout CMOption = 3 // uint8: the QP's local ACK timeout
)

// CMID is an rdma_cm_id of a CM. Its calls are those of librdmacm, with
// librdmacm's meaning; every call that completes later reports through
// the id's events.
type CMID interface {
	// SetEvents replaces the function the id's events go to (an id made
	// by a CONNECT_REQUEST starts with its listener's).
	SetEvents(events func(CMEvent))
	SetOption(opt CMOption, value int) error
	BindAddr(a netip.AddrPort) error
	// ResolveAddr: src may be invalid (the route's source is taken).
	ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error
	ResolveRoute(timeout time.Duration) error
	Listen(backlog int) error
	// Connect sends the REQ (SIDR_REQ for UD) for the QP p.QPNum.
	Connect(p *ConnParam) error
	// Accept sends the REP (SIDR_REP) for the QP p.QPNum; on the active
	// side it is Establish.
	Accept(p *ConnParam) error
	Reject(pdata []byte) error
	// Establish sends the RTU after CONNECT_RESPONSE (rdma_establish).
	Establish() error
	// Notify passes a QP's COMM_EST on (rdma_notify).
	Notify(ev EventType) error
	Disconnect() error
	// InitQPAttr returns the attributes for moving the connection's QP
	// to state (rdma_init_qp_attr).
	InitQPAttr(state QPState) (QPAttr, QPAttrMask, error)
	// DeviceName is the name of the device the id is bound to, "" while
	// it has none.
	DeviceName() string
	// PortNum is the device port the id is bound to.
	PortNum() uint8
	// Addrs returns the id's local and remote addresses.
	Addrs() (src, dst netip.AddrPort)
	// Route returns the id's path once its route is resolved.
	Route() CMPath
	// Destroy destroys the id (rdma_destroy_id); its events stop.
	Destroy() error
}

// CMPath is what an id's route says of its path (struct ibv_sa_path_rec).
type CMPath struct {
	SGID, DGID     GID
	FlowLabel      uint32
	HopLimit       uint8
	TrafficClass   uint8
	SL             uint8
	MTU            MTU
	PacketLifeTime uint8
	PKey           uint16
}

// CMEvent is an event of an id (struct rdma_cm_event).
type CMEvent struct {
	// Type is the event (enum rdma_cm_event_type).
	Type int
	// Status is 0, a negative errno, the IB CM reject reason of
	// REJECTED, or the SIDR status of a failed UD connect.
	Status int
	// NewID is the id a CONNECT_REQUEST made; nil for other events.
	NewID CMID
	// Conn is set for connection events of RC ids, UD for UD ids.
	Conn ConnParam
	UD   UDParam
}

// ConnParam is struct rdma_conn_param: what Connect and Accept send, and
// what CONNECT_REQUEST, CONNECT_RESPONSE, ESTABLISHED and REJECTED report.
type ConnParam struct {
	PrivateData        []byte
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        bool
	RetryCount         uint8 // ignored by Accept
	RNRRetryCount      uint8
	SRQ                bool
	// QPNum is the QP to connect when the id has no QP (CreateQP not
	// used); in events, the peer's QPN.
	QPNum uint32
}

// UDParam is struct rdma_ud_param: what a UD id's ESTABLISHED reports.
type UDParam struct {
	PrivateData []byte
	AHAttr      AHAttr
	QPNum       uint32
	QKey        uint32
}
