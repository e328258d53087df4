// Package service shares one soft device address among many processes,
// the way processes share a NIC: a host service (Server; `rdma-go service`)
// owns the RoCEv2 UDP port of each address its clients attach to, and
// hands every received packet to the process that owns its destination.
// Each process still runs its own transport engine (QPs, MRs, CQs live in
// the process, as with a NIC's userspace provider); only the receive side
// passes through the service. A process sends straight from a UDP socket
// of its own on the same address, since RoCEv2 leaves the source port
// free (it is only flow entropy).
//
// # Who owns what
//
// On each address the service gives every attached process a slot, 1 to
// 254. The slot is the top byte of everything a peer uses to reach the
// process again, so the service routes by looking at the packet alone:
//   - QP numbers: slot<<16 + 2 … slot<<16 + 0xFFFF (QPNRange);
//   - CM communication IDs (the top byte), which REP, RTU, REJ, MRA,
//     DREQ, DREP, LAP, APR and SIDR_REP carry back as the remote or
//     request ID;
//   - MAD transaction IDs (the top byte), which responses carry back.
//
// A CM REQ or SIDR_REQ goes to the process that claimed its service ID
// (ibcm.ServiceClaims: rdma_listen); other requests to QP1, such as
// PerfMgt's, to the longest-attached process, or to any process when none
// listens (its CM then sends the reject a peer expects).
//
// # Failures
//
// A process that dies closes its sockets; the service frees its slot and
// claims at once, and its packets are dropped from then on (counted), so
// the peer's QPs fail with RETRY_EXC_ERR after their retries. The slot is
// not given to another process for Config.Quarantine (default 2 minutes),
// longer than any RC retry sequence with default timeouts, so a late
// packet never reaches a new QP with the old number; slots are handed out
// least recently used first, and the service records them in a state file
// so that the quarantine survives its own restart.
//
// A service that dies leaves its clients' ports down (PORT_ERR); each
// client retries attaching, asking for its old slot back, and when a new
// service answers, the port comes back up (PORT_ACTIVE), the client claims
// its service IDs again, and new QPs and connections work. QPs that had
// packets in flight fail as their retries run out.
//
// # Sockets
//
// The service listens on a Unix SOCK_SEQPACKET socket (SocketPath). A
// client opens two connections per device: control (attach, claims; one
// request and its reply at a time) and data (after the service's first
// reply, packets from the service, each one message: a 24-byte header and
// the UDP payload). A client that reads
// too slowly loses packets (counted), as a NIC's full receive queue would;
// the service never waits for one client.
package service
