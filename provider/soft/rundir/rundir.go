// Package rundir is where the processes using soft devices meet on one host: the
// per-user directory that holds each process's statistics socket and the
// host service's socket.
package rundir

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir returns $XDG_RUNTIME_DIR/rdma-go, or /tmp/rdma-go-UID.
func Dir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "rdma-go")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("rdma-go-%d", os.Getuid()))
}

// Make creates dir (0700) if needed and checks that it is a directory of
// this user's own: not a symlink, nor one another user made in /tmp
// beforehand.
func Make(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || !ownedByMe(fi) {
		return fmt.Errorf("%s is not a directory of this user's own", dir)
	}
	return nil
}
