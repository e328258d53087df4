// Package perftest implements perftest 6.06's eight RDMA benchmarks
// (ib_send_bw, ib_send_lat, ib_write_bw, ib_write_lat, ib_read_bw,
// ib_read_lat, ib_atomic_bw, ib_atomic_lat) over rdma-go's verbs, so that
// the Go tools interoperate with the C tools across a network:
//
//   - the command line (GNU getopt_long, perftest's option table, defaults,
//     validation messages and exit codes; options that make no sense on a
//     soft device fail with a clear message);
//   - the TCP side channel byte for byte: the version prologue (rdma-go
//     advertises 6.06, so no peer expects 6.28's parameter negotiation),
//     the 59/108-byte key records, the big-endian report exchange and each
//     test's sequence of exchanges, every read under a deadline;
//   - QP set-up as perftest does it, and the data phases: windowed
//     SEND/WRITE/READ/atomic streams with CQ moderation and post lists,
//     SEND and RDMA WRITE ping-pongs (the latter polling the last byte of
//     the peer-written memory), one-at-a-time READ/atomic latency, -a
//     sweeps, -D duration mode and several QPs;
//   - the output: banner, address lines, result rows and latency
//     statistics computed as perftest computes them (its truncations
//     included).
//
// rdma-go adds --json (one JSON object with every figure and the
// environment) and, with -a, --png (a chart, drawn by package
// perftest/plot so that this package needs no plotting library).
//
// Timing uses a monotonic nanosecond clock where perftest reads the CPU's
// cycle counter: a "cycle" (-C) is one nanosecond here.
package perftest
