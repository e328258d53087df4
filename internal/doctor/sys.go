package doctor

import "golang.org/x/sys/unix"

// access reports whether the process may read and write path.
func access(path string) error { return unix.Access(path, unix.R_OK|unix.W_OK) }

// memlock returns RLIMIT_MEMLOCK.
func memlock() (cur, max uint64, err error) {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &l); err != nil {
		return 0, 0, err
	}
	return uint64(l.Cur), uint64(l.Max), nil
}
