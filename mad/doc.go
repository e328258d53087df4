// Package mad is the management datagram layer: typed views of MADs (the
// common header, the IB CM messages that rdma_cm uses on RoCE, and the
// PerfMgt attributes) and a GSI agent that sends and receives them over
// QP1.
//
// A view is its bytes, in the style of gVisor's pkg/tcpip/header: a REQ is
// the 256-byte MAD that holds it, and its accessors read and write the
// fields in place at the offsets of docs/spec/cm-mad.md §2–§6 (MAD byte offsets,
// big-endian, IBTA bit numbering). Views never allocate and never check
// lengths: obtain a MAD from Parse (or New), which guarantees the 256
// bytes every view needs.
//
// The Agent is the receive dispatcher and transaction layer of QP1, as the
// Linux MAD layer (drivers/infiniband/core/mad.c) is: registrations per
// management class, version and method; responses routed to the requester
// by transaction ID; requests nobody registered for answered the way Linux
// answers them (§7). It reads time only through an injected Clock, so tests
// drive it deterministically.
package mad
