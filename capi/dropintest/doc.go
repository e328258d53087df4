// Package dropintest tests rdma-go's C face (package capi): it builds the
// drop-in libibverbs.so.1 and librdmacm.so.1 with capi/build.sh and runs
// unmodified system programs over it — Debian's ibverbs-utils and
// perftest — checking their results and comparing what they print with
// rdma-go's Go tools. Tests skip where gcc, verbs.h or a program is
// missing.
package dropintest
