// Package provider is the seam between package verbs and the devices it
// drives: the job libibverbs' verbs_context_ops does in rdma-core. A
// provider lists its devices and implements every verb on them; verbs does
// the rest (argument checks against the device's attributes, the QP
// state-transition rules, object lifetimes and their errors, the event
// queues) and then makes one call into the provider.
//
// The data types that cross the seam on the hot path — SGE, SendWR, RecvWR,
// WC — and the attribute and enum types are defined here and are the very
// types verbs exports (verbs.WC is an alias of provider.WC), so PostSend,
// PostRecv and Poll hand the caller's slices to the provider unconverted,
// through one interface call each.
//
// A provider imports this package and whatever runs its devices, never
// verbs or what is built on verbs (rdmacm, rdmanet, the tools). The soft
// RoCE device is provider/soft; a kernel provider drives
// /sys/class/infiniband devices through the system's libibverbs.
//
// Rules every implementation follows:
//   - Methods are called only with arguments verbs has checked against
//     DeviceAttr and PortAttr, and never on an object verbs has destroyed.
//   - verbs serialises a QP's PostSend calls with each other and with its
//     Destroy: a provider needs no lock of its own for them (PostRecv and
//     CQ.Poll may be called concurrently, as in libibverbs).
//   - Errors wrap one of the sentinels below (use Errorf).
//   - Objects that events or completion channels name are created with an
//     owner value (verbs' own object), which the provider hands back.
//   - PostSend, PostRecv and CQ.Poll do not allocate, and never keep the
//     slices they are given, or anything those point to, after they
//     return: verbs hides these slices from escape analysis so that a
//     caller's work requests, SGLs and completions can stay on its stack.
package provider

import (
	"context"
	"net/netip"
)

// Provider is a family of devices: the soft RoCE devices, or the kernel's.
type Provider interface {
	// Name is the provider's name ("soft", "kernel").
	Name() string
	// Devices lists the provider's devices (ibv_get_device_list). A
	// device is the same value in every list while it exists.
	Devices() ([]Device, error)
}

// Device is a device that can be opened.
type Device interface {
	// Name is the device name (ibv_get_device_name).
	Name() string
	// GUID is the node GUID in host order (ibv_get_device_guid).
	GUID() uint64
	// Addr is the IP address the device sends from (the address of its
	// network interface), or the zero Addr when it has none (yet).
	Addr() netip.Addr
	// Open opens a context on the device (ibv_open_device). events
	// receives the context's asynchronous events; it queues them and
	// never blocks.
	Open(events func(AsyncEvent)) (Context, error)
}

// Context is an open device (ibv_context and its ops).
type Context interface {
	QueryDevice() (DeviceAttr, error)
	QueryPort(port uint8) (PortAttr, error)
	QueryGID(port uint8, index int) (GID, error)
	QueryPKey(port uint8, index int) (uint16, error)
	// QueryPortCounters returns the port's counters (rxe's hw counters
	// and the provider's own; zero where a device has no such counter).
	QueryPortCounters(port uint8) (Counters, error)
	AllocPD() (PD, error)
	// CreateCQ creates a CQ of at least cqe entries; ch (nil for none) is
	// a channel of this context, and its GetEvent returns owner.
	CreateCQ(cqe int, ch CompChannel, owner any) (CQ, error)
	CreateCompChannel() (CompChannel, error)
	// Close closes the context; no event is delivered after it returns.
	Close() error
}

// PD is a protection domain and the objects made in it.
type PD interface {
	// RegMR registers buf (ibv_reg_mr). A provider whose device keeps
	// the address after the call may require memory outside the Go heap.
	RegMR(buf []byte, access AccessFlags) (MR, error)
	AllocMW(t MWType) (MW, error)
	// CreateQP creates a QP in RESET; attr.Cap holds sizes already
	// rounded up to at least 1. Events about the QP carry owner.
	CreateQP(attr *QPInitAttr, owner any) (QP, error)
	// CreateSRQ creates a shared receive queue, armed when
	// attr.SRQLimit > 0. Events about it carry owner.
	CreateSRQ(attr SRQAttr, owner any) (SRQ, error)
	// CreateAH creates an address handle; the provider checks the
	// address vector against its GID table.
	CreateAH(attr *AHAttr) (AH, error)
	Dealloc() error
}

// MR is a registered memory region.
type MR interface {
	Addr() uint64
	LKey() uint32
	RKey() uint32
	// Dereg fails with ErrBusy while memory windows are bound to it.
	Dereg() error
}

// MW is a memory window.
type MW interface {
	RKey() uint32
	Dealloc() error
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(wc) completions into wc (ibv_poll_cq). It
	// never blocks and does not allocate.
	Poll(wc []WC) (int, error)
	// Wait blocks until the CQ holds a completion, ctx is done, or the
	// CQ is destroyed (an error wrapping ErrClosed).
	Wait(ctx context.Context) error
	// ReqNotify arms the CQ for one event on its channel, raised by the
	// next completion added (with solicitedOnly, the next solicited or
	// error one); completions already queued raise none.
	ReqNotify(solicitedOnly bool) error
	AckEvents(n int)
	Resize(cqe int) error
	Cap() int
	Overflowed() bool
	Destroy() error
}

// CompChannel is a completion event channel.
type CompChannel interface {
	// GetEvent blocks until a CQ of the channel has an event and returns
	// the owner it was created with; ErrClosed once destroyed.
	GetEvent(ctx context.Context) (owner any, err error)
	Destroy() error
}

// QPInitAttr describes a QP to create, with the provider's objects.
type QPInitAttr struct {
	Type   QPType
	SendCQ CQ
	RecvCQ CQ
	SRQ    SRQ // nil: the QP has its own receive queue
	Cap    QPCap
	SigAll bool
}

// QP is a queue pair.
type QP interface {
	QPN() uint32
	// State is the current state, which the device may have moved to ERR.
	State() QPState
	// Modify applies the attributes mask selects; verbs has checked them
	// against the transition table and the device's limits.
	Modify(attr *QPAttr, mask QPAttrMask) error
	// Query returns the live State, RQPSN (next expected) and SQPSN
	// (next sent); verbs fills in the rest from what it set.
	Query() (QPAttr, error)
	// PostSend posts wrs, which verbs has checked, and returns how many
	// were queued; on error, wrs[n] is the one refused.
	PostSend(wrs []SendWR) (n int, err error)
	// PostRecv is PostSend's counterpart for receives.
	PostRecv(wrs []RecvWR) (n int, err error)
	// Counters are the QP's counters; readable after Destroy.
	Counters() Counters
	// Destroy destroys the QP: outstanding work is dropped without
	// completions.
	Destroy() error
}

// SRQ is a shared receive queue.
type SRQ interface {
	PostRecv(wrs []RecvWR) (n int, err error)
	Modify(attr SRQAttr, mask SRQAttrMask) error
	Query() (SRQAttr, error)
	// Len is the number of receives posted and not yet consumed.
	Len() int
	Destroy() error
}

// AH is an address handle.
type AH interface {
	Destroy() error
}

// AHHandle is what SendWR.AH holds: verbs' *AH, through which the
// provider reaches its own address handle.
type AHHandle interface{ ProviderAH() AH }

// MWHandle is what SendWR.BindMW holds: verbs' *MW.
type MWHandle interface{ ProviderMW() MW }

// MRHandle is what MWBindInfo.MR holds: verbs' *MR.
type MRHandle interface{ ProviderMR() MR }

// AsyncEvent is an asynchronous event as a provider reports it: Owner is
// the owner value the QP, SRQ or CQ it is about was created with (nil for
// port and device events).
type AsyncEvent struct {
	Type  EventType
	Owner any
	Port  uint8
}
