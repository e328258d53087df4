// Package rdmanet is a byte stream over RDMA reliable connections with the
// standard library's interfaces: Dial returns a net.Conn and Listen a
// net.Listener, so that code written for TCP (bufio, io.Copy, net/http,
// crypto/tls, gRPC dialers) runs unchanged over RDMA. It does the job of
// librdmacm's rsockets (docs/spec/rdma-core-surface.md §2.7) the Go way: the Go
// runtime bypasses libc, so rsockets' LD_PRELOAD trick cannot help Go
// programs, and rsockets' own wire protocol is not reproduced.
//
// # Addressing
//
// Addresses are "host:port" as for TCP, e.g. "127.0.0.5:7471". The host
// is the IP address of a soft RDMA device (see package verbs; a name is
// resolved with the system resolver), and the port is an rdma_cm port in
// the RDMA_PS_TCP port space, not a kernel TCP port: Listen on port 7471
// does not open a TCP socket. The network is "rdma" (or "rdma4",
// "rdma6"); "tcp", "tcp4" and "tcp6" are accepted as synonyms so that an
// address and network pair meant for net.Dial can be passed unchanged.
// Connections are set up by package rdmacm (Dial and Listen there), over
// the soft device's IB CM.
//
// # Wire protocol
//
// Each end registers a receive ring (Options: WithRingSize, 1 MiB by
// default, at most 8 MiB) and exposes it to the peer for RDMA WRITE. The
// stream position p (bytes written so far in one direction) lives at ring
// offset p mod size on the receiver and, because the sender stages its
// bytes in a local ring of the same size, at the same offset there.
//
// Messages, in the order they appear on the queue pair:
//
//   - HELLO: a SEND of 32 bytes, the first message of each end (the
//     dialer sends first; the acceptor answers when the dialer's HELLO
//     arrives, so no HELLO meets a receive queue that is not posted yet).
//     Layout, little endian: magic "RDNT" (4), version 1 (2), flags (2),
//     ring address (8), ring R_Key (4), ring size (4), data window (4),
//     reserved (4). The data window is how many DATA messages the sender
//     may have unacknowledged.
//   - DATA: an RDMA WRITE WITH IMMEDIATE of n > 0 bytes to the peer's ring
//     at offset p mod size; it never wraps (a write crossing the ring's
//     end is split in two messages). The receiver learns n from the
//     completion's byte length and p from its own count, so the immediate
//     is free to carry acknowledgements.
//   - CTRL: a SEND WITH IMMEDIATE of 0 bytes, carrying acknowledgements
//     when no DATA goes the other way (a credit update), a keepalive, or,
//     with the FIN bit, the end of the stream (CloseWrite or Close).
//
// The immediate of DATA and CTRL is the same 32-bit word: bits 0–23 are
// the bytes of the peer's stream consumed by Read so far (mod 2^24: ring
// space returned), bits 24–30 the DATA messages of the peer processed so
// far (mod 2^7: window returned), bit 31 FIN. Counters are absolute, so
// acknowledgements are idempotent and every message carries the newest.
//
// Flow control is by credits: a writer stages bytes only while
// staged − acknowledged ≤ ring size, so staged bytes always fit in the
// peer's ring (Write blocks, and its deadline applies, when the ring is
// full; memory use is fixed at two rings per connection whatever the
// traffic). A receiver reposts each receive as soon as its completion is
// processed, acknowledges DATA messages from there, and returns ring space
// as Read consumes it; it sends a CTRL credit update only when half the
// ring or half the window is unannounced and no DATA is going out to carry
// it. CTRL messages do not count against the window: each end posts 16
// receives beyond the window for them, more than the credit updates,
// keepalive and FIN that can be outstanding at once.
//
// Small writes are coalesced: Write copies into the staging ring and
// returns; a DATA message is posted at once while fewer than four are in
// flight, otherwise bytes accumulate and go out as one message (up to a
// quarter of the peer's ring, at most 1 MiB) when a completion comes back.
//
// # Connection lifetime
//
// CloseWrite sends FIN after the staged bytes; the peer's Read then
// returns io.EOF once it has read everything. Close does the same, waits
// (up to the linger time, WithLinger) for the FIN to be acknowledged, then
// disconnects through the CM and frees the queue pair. A peer that
// disconnects, or a transport error (retries exhausted), fails pending and
// later Reads (after the bytes already received) and Writes. A peer that
// vanishes silently is caught by keepalives: each end sends a CTRL when it
// has sent nothing for an interval, and gives up when it has received
// nothing for the timeout (WithKeepAlive; 1 s and 5 s by default).
package rdmanet
