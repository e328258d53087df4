//go:build !rdmago_nokernel

package doctor

import "github.com/rdma-go/rdma-go/provider/kernel"

// probeKernel asks the kernel provider.
func probeKernel() KernelProbe {
	p := kernel.ProbeDevices()
	return KernelProbe{Sysfs: p.Sysfs, SysfsErr: p.SysfsErr, LibErr: p.LibErr, Listed: p.Listed}
}
