//go:build unix

package rundir

import (
	"os"
	"syscall"
)

// ownedByMe reports whether a file belongs to this process's user.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
