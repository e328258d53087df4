//go:build !amd64

package prefetch

import "unsafe"

// lines is a no-op where no prefetch instruction is wired up.
func lines(unsafe.Pointer, int) {}
