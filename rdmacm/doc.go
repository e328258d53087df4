// Package rdmacm is the RDMA connection manager: librdmacm's API in Go,
// over the IB CM that the soft device runs on QP1, interoperable with the
// Linux kernel's rdma_cm (docs/spec/cm-mad.md §4–§5, docs/spec/rdma-core-surface.md
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
//
// # Interoperability with Linux
//
// Checked in the interop lab (interop_test.go) against Debian 12's kernel
// 6.1 with rdma_rxe and rdma-core 44: rping, udaddy and
// rdma_server/rdma_client in both roles, and REJ "invalid service ID" both
// ways. What Linux did that docs/spec/cm-mad.md does not say:
//
//   - Its REQs carry PrimaryLocalACKTimeout 19, i.e. a packet life time of
//     18 (the older CMA_IBOE_PACKET_LIFETIME), so it re-sends REQ and DREQ
//     about every 6.1–6.4 s, not 4.6 s. The CM here derives its timers
//     from the fields it receives, so either value works.
//   - The low 32 bits of its TIDs are the local communication ID in the
//     byte order of an x86 host: REQ LocalCommID 0x71A6E286 came with TID
//     0x0000000286E2A671 (§2 and §8 write hi_tid<<32 | LocalCommID). TIDs
//     are never matched, so this stack keeps §8's form.
//   - rxe sets the BTH AckReq bit on the UD packets of its MADs (§1.1 says
//     0); so does this stack's engine; receivers ignore it.
//   - rdma_connect and rdma_accept with a NULL rdma_conn_param send
//     ResponderResources and InitiatorDepth 128 (rxe's limit) and retry
//     counts 7; Connect and Accept with a nil *ConnParam do the same.
//   - rdma_client's rdma_destroy_ep waits until its DREQ is answered: a
//     passive application must Disconnect (the DREP) after DISCONNECTED,
//     as with Linux. Conn (Dial/Listen) answers a peer's DREQ by itself.
package rdmacm
