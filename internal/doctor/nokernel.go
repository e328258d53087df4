//go:build rdmago_nokernel

package doctor

import "errors"

// probeKernel says that this build has no kernel provider (-tags
// rdmago_nokernel: a static, soft-device-only binary).
func probeKernel() KernelProbe {
	return KernelProbe{SysfsErr: errors.New("built with -tags rdmago_nokernel: kernel devices are left out")}
}
