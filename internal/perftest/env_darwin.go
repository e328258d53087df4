package perftest

import "golang.org/x/sys/unix"

// cpuModel returns the machdep.cpu.brand_string sysctl.
func cpuModel() string {
	s, err := unix.Sysctl("machdep.cpu.brand_string")
	if err != nil {
		return ""
	}
	return s
}

// kernel returns uname's system name, release and version.
func kernel() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " +
		unix.ByteSliceToString(u.Version[:])
}
