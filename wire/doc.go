// Package wire holds typed, zero-copy views of the RoCEv2 transport headers
// (BTH, RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH, DETH), the RC/UC/UD
// opcode table, 24-bit PSN arithmetic and the invariant CRC.
//
// A header type is its bytes: BTH is a []byte of at least BTHLen bytes and its
// methods read and write the fields in place, in network byte order. Nothing
// here allocates or performs I/O. The layout follows the project's
// docs/spec/roce-wire.md and Linux rdma_rxe where the two differ.
package wire
