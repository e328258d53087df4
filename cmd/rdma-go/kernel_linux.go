//go:build linux

package main

import "github.com/vishvananda/netlink"

// kernelIndex returns a kernel RDMA device's index (RDMA netlink's
// RDMA_NLDEV_ATTR_DEV_INDEX, iproute2's ifindex).
func kernelIndex(name string) (int, bool) {
	l, err := netlink.RdmaLinkByName(name)
	if err != nil {
		return 0, false
	}
	return int(l.Attrs.Index), true
}

// kernelLinkAdd adds a kernel RDMA link (rdma link add NAME type TYPE
// netdev NETDEV): rxe or siw on a netdev.
func kernelLinkAdd(name, typ, netdev string) error { return netlink.RdmaLinkAdd(name, typ, netdev) }

// kernelLinkDel deletes a kernel RDMA link that was added (rxe, siw).
func kernelLinkDel(name string) error { return netlink.RdmaLinkDel(name) }

// resourceSummary is one device's line of "rdma resource show".
type resourceSummary struct {
	index   int
	name    string
	entries map[string]uint64
}

// kernelResources returns the kernel's resource tracking summary, per
// device.
func kernelResources() ([]resourceSummary, error) {
	rs, err := netlink.RdmaResourceList()
	if err != nil {
		return nil, err
	}
	out := make([]resourceSummary, len(rs))
	for i, r := range rs {
		out[i] = resourceSummary{index: int(r.Index), name: r.Name, entries: r.RdmaResourceSummaryEntries}
	}
	return out, nil
}
