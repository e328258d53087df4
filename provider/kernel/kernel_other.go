//go:build !linux

package kernel

import (
	"errors"
	"log/slog"
	"runtime"
	"sync"

	"github.com/rdma-go/rdma-go/provider"
)

// Provider is the kernel provider. Outside Linux there are no kernel RDMA
// devices: it lists none.
type Provider struct{}

// Name returns "kernel".
func (Provider) Name() string { return "kernel" }

var logOnce sync.Once

// Devices lists nothing, and says why at debug level once.
func (Provider) Devices() ([]provider.Device, error) {
	logOnce.Do(func() {
		slog.Debug("rdma-go: no kernel RDMA devices", "reason", "kernel devices need Linux", "goos", runtime.GOOS)
	})
	return nil, nil
}

// ForkInit does nothing outside Linux.
func ForkInit() error { return nil }

// Probe is what stands between this process and the kernel's RDMA devices,
// for diagnostics: outside Linux, the platform.
type Probe struct {
	Sysfs    []string
	SysfsErr error
	LibErr   error
	Listed   []string
}

// ProbeDevices says that kernel devices need Linux.
func ProbeDevices() Probe {
	return Probe{SysfsErr: errors.New("kernel RDMA devices need Linux, not " + runtime.GOOS)}
}
