// Package rdmacm is the RDMA connection manager: librdmacm's API in Go,
// over the IB CM that the soft device runs on QP1, interoperable with the
// Linux kernel's rdma_cm (spec/cm-mad.md §4–§5, spec/rdma-core-surface.md
// §2).
//
// The librdmacm surface maps one to one: event channels (CreateEventChannel,
// GetCMEvent, Event.Ack), identifiers (CreateID with RDMA_PS_TCP,
// RDMA_PS_UDP or RDMA_PS_IB), BindAddr, ResolveAddr, ResolveRoute,
// CreateQP, Connect, Listen, GetRequest, Accept, Reject, Disconnect,
// Destroy, the events ADDR_RESOLVED … TIMEWAIT_EXIT with their status and
// private data, UD ids resolved with SIDR, GetAddrInfo, and the
// synchronous helpers of rdma_verbs.h (CreateEP, PostSend, PostRecv,
// GetSendComp, GetRecvComp, …). An id created without a channel is
// synchronous: its calls block (with a context.Context) until their event
// arrives, as in librdmacm.
//
// On RoCE there is no Subnet Administrator: an address resolves to the
// soft device that owns (or routes to) it, and the route is built locally
// from the two IP addresses as GIDs (§4.4). Connect sends a REQ whose
// private data starts with the 36-byte rdma_cm header; the listener side
// checks it, applies its backlog (a full backlog drops the REQ unanswered,
// as Linux does) and reports CONNECT_REQUEST; CreateQP'd QPs are moved
// through INIT, RTR and RTS with the attributes the exchange fixes (§3.7).
//
// On top, Dial and Listen give connected, ready-to-use RC queue pairs the
// Go way.
//
// Deviation from Linux, on purpose: the passive side accepts loopback
// addresses in the rdma_cm header (Linux refuses them, §4.5), because soft
// devices live on 127.0.0.0/8.
package rdmacm
