// Package engine is the transport engine of the soft RoCEv2 device: the RC
// requester, responder and completer state machines (and the per-device
// receive path that feeds them), written as plain code driven by events —
// a work request posted, a packet received, a timer fired — that emits
// packets, completions and timer deadlines.
//
// The engine never reads a wall clock and never touches a socket: every entry
// point takes the current time, packets leave through a Sender, and a QP's
// next deadline is reported through Deadline and a notification hook. That is
// what lets tests run many QPs over a lossy in-memory network with a fake
// clock, deterministically from a seed.
//
// Wire behaviour follows the project's docs/spec/roce-wire.md §6 (RC as Linux
// rdma_rxe implements it).
package engine
