package rdmacm

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider"
)

// PortSpace is an rdma_cm port space; values equal enum rdma_port_space.
type PortSpace uint16

// Port spaces (docs/spec/cm-mad.md §4.1).
const (
	PSIPoIB PortSpace = 0x0002
	PSTCP   PortSpace = 0x0106
	PSUDP   PortSpace = 0x0111
	PSIB    PortSpace = 0x013F
)

// ServiceID returns the IB service ID of port in the port space:
// (ps << 16) | port.
func (ps PortSpace) ServiceID(port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

func (ps PortSpace) String() string {
	switch ps {
	case PSIPoIB:
		return "RDMA_PS_IPOIB"
	case PSTCP:
		return "RDMA_PS_TCP"
	case PSUDP:
		return "RDMA_PS_UDP"
	case PSIB:
		return "RDMA_PS_IB"
	}
	return fmt.Sprintf("PortSpace(%#x)", uint16(ps))
}

// EventType is an rdma_cm event; values equal enum rdma_cm_event_type.
type EventType int

// Events (docs/spec/rdma-core-surface.md §2.3).
const (
	EventAddrResolved EventType = iota
	EventAddrError
	EventRouteResolved
	EventRouteError
	EventConnectRequest
	EventConnectResponse
	EventConnectError
	EventUnreachable
	EventRejected
	EventEstablished
	EventDisconnected
	EventDeviceRemoval
	EventMulticastJoin
	EventMulticastError
	EventAddrChange
	EventTimewaitExit
	EventAddrInfoResolved
	EventAddrInfoError
	EventUser
	EventInternal
)

var eventNames = [...]string{"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
	"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST",
	"RDMA_CM_EVENT_CONNECT_RESPONSE", "RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
	"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED",
	"RDMA_CM_EVENT_DEVICE_REMOVAL", "RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
	"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT", "RDMA_CM_EVENT_ADDRINFO_RESOLVED",
	"RDMA_CM_EVENT_ADDRINFO_ERROR", "RDMA_CM_EVENT_USER", "RDMA_CM_EVENT_INTERNAL"}

// String returns the name rdma_event_str gives ("RDMA_CM_EVENT_ESTABLISHED").
func (e EventType) String() string {
	if e >= 0 && int(e) < len(eventNames) {
		return eventNames[e]
	}
	return "UNKNOWN EVENT"
}

// Limits and defaults (docs/spec/cm-mad.md §4.3, §5.1).
const (
	// MaxREQPrivateData is the user private data of a REQ after the
	// 36-byte rdma_cm header; a CONNECT_REQUEST always reports this many.
	MaxREQPrivateData = mad.REQPrivateDataLen - mad.CMAHeaderLen // 56
	// MaxREPPrivateData is the private data of rdma_accept.
	MaxREPPrivateData = mad.REPPrivateDataLen // 196
	// MaxREJPrivateData is the private data of rdma_reject.
	MaxREJPrivateData = mad.REJPrivateDataLen // 148
	// MaxSIDRREQPrivateData is the user private data of a UD connect.
	MaxSIDRREQPrivateData = mad.SIDRREQPrivateDataLen - mad.CMAHeaderLen // 180
	// MaxSIDRREPPrivateData is the private data of a UD accept or reject.
	MaxSIDRREPPrivateData = mad.SIDRREPPrivateDataLen // 136
	// UDPQKey is RDMA_UDP_QKEY, the Q_Key of rdma_cm's UD ids.
	UDPQKey = 0x01234567
	// MaxRespRes is RDMA_MAX_RESP_RES (and RDMA_MAX_INIT_DEPTH): "as many
	// as the peer and the device allow".
	MaxRespRes = 0xFF
	// DefaultBacklog is the kernel's limit and the backlog of Listen(0).
	DefaultBacklog = 1024
)

// ConnParam is struct rdma_conn_param: what Connect and Accept send, and
// what CONNECT_REQUEST, CONNECT_RESPONSE, ESTABLISHED and REJECTED report.
// QPNum is the QP to connect when the id has no QP (CreateQP not used);
// in events, the peer's QPN. RetryCount is ignored by Accept.
type ConnParam = provider.ConnParam

// UDParam is struct rdma_ud_param: what a UD id's ESTABLISHED reports.
type UDParam = provider.UDParam

// Event is struct rdma_cm_event.
type Event struct {
	// ID is the id the event is about (for CONNECT_REQUEST, the new one).
	ID *ID
	// ListenID is the listening id of a CONNECT_REQUEST.
	ListenID *ID
	Type     EventType
	// Status is 0, a negative errno (−110 for timeouts), the IB CM reject
	// reason of REJECTED, or the SIDR status of a failed UD connect.
	Status int
	// Conn is set for connection events of RC ids, UD for UD ids.
	Conn ConnParam
	UD   UDParam
}

// Ack acknowledges the event (rdma_ack_cm_event). Go's garbage collector
// frees events, so acknowledging is optional.
func (e *Event) Ack() error { return nil }

// String describes the event.
func (e *Event) String() string {
	return fmt.Sprintf("%s status %d", e.Type, e.Status)
}

// Errors. They wrap the errno librdmacm would set.
var (
	// ErrNoDevice: no RDMA device can reach the address (ENODEV).
	ErrNoDevice = fmt.Errorf("rdmacm: no RDMA device: %w", syscall.ENODEV)
	// ErrInvalid: the call is not valid in the id's state (EINVAL).
	ErrInvalid = fmt.Errorf("rdmacm: invalid state or argument: %w", syscall.EINVAL)
	// ErrAddrInUse: the address and port are taken (EADDRINUSE).
	ErrAddrInUse = fmt.Errorf("rdmacm: address in use: %w", syscall.EADDRINUSE)
	// ErrAddrNotAvail: no device owns the address (EADDRNOTAVAIL).
	ErrAddrNotAvail = fmt.Errorf("rdmacm: address not available: %w", syscall.EADDRNOTAVAIL)
	// ErrTimedOut: the peer did not answer (ETIMEDOUT).
	ErrTimedOut = fmt.Errorf("rdmacm: timed out: %w", syscall.ETIMEDOUT)
	// ErrClosed: the id or channel was destroyed.
	ErrClosed = errors.New("rdmacm: destroyed")
)

// RejectedError is returned by a synchronous Connect that was rejected
// (librdmacm: ECONNREFUSED).
type RejectedError struct {
	// Reason is the IB CM reject reason (8 no listener, 28 refused …), or
	// the SIDR status for a UD id.
	Reason      int
	PrivateData []byte
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("rdmacm: connection rejected: %s (%d)", mad.RejReasonString(uint16(e.Reason)), e.Reason)
}

// Unwrap makes errors.Is(err, syscall.ECONNREFUSED) true.
func (e *RejectedError) Unwrap() error { return syscall.ECONNREFUSED }

// EventError is returned by a synchronous call whose event reported a
// failure other than a rejection.
type EventError struct {
	Event EventType
	// Status is the event's status: a negative errno, or a SIDR status.
	Status int
}

func (e *EventError) Error() string {
	if e.Status < 0 {
		return fmt.Sprintf("rdmacm: %s: %v", e.Event, syscall.Errno(-e.Status))
	}
	return fmt.Sprintf("rdmacm: %s, status %d", e.Event, e.Status)
}

// Unwrap returns the errno of a negative status.
func (e *EventError) Unwrap() error {
	if e.Status < 0 {
		return syscall.Errno(-e.Status)
	}
	return nil
}

const etimedout = -int(syscall.ETIMEDOUT)
