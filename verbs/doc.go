// Package verbs is rdma-go's verbs API, the Go counterpart of libibverbs:
// devices and contexts, protection domains, memory regions, completion
// queues and channels, and queue pairs with PostSend and PostRecv.
//
// The default device is the embedded soft RoCEv2 device: no RDMA NIC, kernel
// module or root needed, yet the real RoCEv2 wire protocol on UDP port 4791,
// so it talks to Linux rdma_rxe and RoCE NICs.
//
// A fresh machine lists one device, "rgo0", bound to a loopback address.
// More devices, bound to any local address, come from AddDevice, from the
// RDMA_GO_DEVICES environment variable, or from a config file; see Devices.
//
// Memory is the caller's: RegMR registers a Go byte slice, and the virtual
// addresses in SGEs and in remote_addr are the slice's real addresses
// (iova = VA, as with rxe), so MR.Addr() plus an offset is what goes on the
// wire.
package verbs
