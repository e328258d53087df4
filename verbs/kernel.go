//go:build !rdmago_nokernel

package verbs

import "github.com/rdma-go/rdma-go/provider/kernel"

// The kernel provider lists the kernel's RDMA devices (/sys/class/infiniband)
// after the soft ones, through the system's libibverbs.so.1 loaded at run
// time. Build with -tags rdmago_nokernel to leave it out: on Linux the
// loader makes a binary dynamically linked against libc, which a fully
// static binary (FROM scratch) cannot be.
func init() { providers = append(providers, kernel.Provider{}) }
