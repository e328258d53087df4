//go:build cgo && linux && rdmago_capi

// Command capi is rdma-go's C face: built with -buildmode=c-shared into
// librdmago.so.1, it implements libibverbs' and librdmacm's C API over the
// verbs and rdmacm packages, so that unmodified C programs (rdma-core's
// tools, perftest, pyverbs) run over the soft RoCE device.
//
// Programs load it through two thin libraries that carry the sonames and
// symbol versions of rdma-core 44 — libibverbs.so.1 and librdmacm.so.1,
// each a table of jumps into librdmago.so.1 (see symbols.txt and
// build.sh) — so a process that uses both APIs holds one Go runtime.
// Build all three with `make capi` (into build/capi/) and run a program
// with LD_LIBRARY_PATH=build/capi.
//
// Every struct a program sees (struct ibv_context, ibv_qp, ...) is the
// first member of a wrapper (capi.h) that also holds the cgo handle of its
// Go state; the layouts come from the system's verbs.h at build time
// (libibverbs-dev). The inline functions of verbs.h (ibv_post_send,
// ibv_poll_cq, ibv_query_port, ibv_wr_*, ...) call through the op tables
// that ops.c fills with this package's exported functions.
//
// The drop-in serves soft devices only: it is built without the kernel
// provider, which would load the system's libibverbs.so.1 — the drop-in
// itself, inside a program that uses it.
package main

// #cgo CFLAGS: -O2 -Wall
// #include "capi.h"
import "C"

import "os"

// A program's ibv_poll_cq reaches the soft device through a C→Go call
// (~150 ns, against ~60 ns for a Go caller's CQ.Poll), so the device's
// busy-poll path skips fewer calls after an empty attempt here: 4 instead
// of a Go caller's 16 (RDMA_GO_POLL_BACKOFF). Measured with perftest's
// ib_send_lat over the drop-in against our Go ib_send_lat, 7 alternating
// rounds, when Go callers skipped 64: t_typical 1.45x ours with 64, 1.06x
// with 4 (BENCHMARKS.md).
func init() {
	if os.Getenv("RDMA_GO_POLL_BACKOFF") == "" {
		os.Setenv("RDMA_GO_POLL_BACKOFF", "4")
	}
}

func main() {}
