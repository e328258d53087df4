// Package service shares one soft device address among many processes,
// the way processes share a NIC: a host service (Server; `rdma-go service`)
// owns the RoCEv2 UDP port of each address its clients attach to and
// makes the kernel deliver every received packet straight to the process
// that owns its destination. Each process runs its own transport engine
// (QPs, MRs, CQs live in the process, as with a NIC's userspace provider);
// the service is not on the data path.
//
// # Steering
//
// For each address the service binds a SO_REUSEPORT group of UDP sockets
// on the RoCE port: one of its own (index 0) and one per attached process,
// which it hands to the process over its Unix socket (SCM_RIGHTS). A
// classic BPF program attached to the group (SO_ATTACH_REUSEPORT_CBPF, no
// privilege needed) reads each datagram and returns the index of the socket
// it goes to. The service regenerates the program whenever a process
// attaches, detaches, listens or stops listening (steering.program; tested
// against the Go routing of route on every kind of packet and by a
// fuzzer). A process sends from a UDP socket of its own on an ephemeral port,
// since RoCEv2 leaves the source port free (it is only flow entropy).
//
// # Who owns what
//
// On each address the service gives every attached process a slot, 1 to
// 254. The slot is the top byte of everything a peer uses to reach the
// process again, so the program routes by looking at the packet alone:
//   - QP numbers: slot<<16 + 2 … slot<<16 + 0xFFFF (QPNRange);
//   - CM communication IDs (the top byte), which REP, RTU, REJ, MRA,
//     DREQ, DREP, LAP, APR and SIDR_REP carry back as the remote or
//     request ID;
//   - MAD transaction IDs (the top byte), which responses carry back.
//
// A CM REQ or SIDR_REQ goes to the process that claimed its service ID
// (ibcm.ServiceClaims: rdma_listen); other requests to QP1, such as
// PerfMgt's, to the longest-attached process, or to it too when nobody
// listens on the service ID (its CM then sends the reject a peer expects).
// Packets for no process go to the service's socket, which counts and drops
// them.
//
// # Failures
//
// A process that dies closes its control connection; the service frees
// its slot and claims at once and steers its packets to its own socket, so
// the peer's QPs fail with RETRY_EXC_ERR after their retries (with retry
// count 7, rxe and rdma-go retry for ever). The dead process's socket stays
// in the group, held by the service, so that no other socket's index
// moves; it is emptied and given to the next process. The slot is not
// given to another process for Config.Quarantine (default 2 minutes),
// longer than any RC retry sequence with default timeouts, so a late
// packet never reaches a new QP with the old number; slots are handed out
// least recently used first, and the service records them in a state file
// so that the quarantine survives its own restart.
//
// A service that dies closes its sockets, which reorders the group: each
// client sees its control connection end, closes its socket (so that the
// port becomes free), reports the port down (PORT_ERR) and retries
// attaching, asking for its old slot back. A new service waits until the
// old group is gone, then builds a new one; each client gets a new socket
// and its slot, claims its service IDs again, and reports the port up
// (PORT_ACTIVE). New QPs and connections work; QPs that had packets in
// flight fail as their retries run out. A client's sending socket and so
// its QPs' source ports survive the restart.
//
// # Caveat
//
// UDP GRO may coalesce datagrams of one UDP flow (same addresses and
// ports) before the steering program sees them, which then steers the run
// by its first datagram. A peer that sends to two processes on one address
// from two QPs with the same source port can so have a run delivered to
// the wrong process, which drops it; RC retransmits. rxe and rdma-go give
// each QP its own source port, so this takes a collision of their hashes.
package service
