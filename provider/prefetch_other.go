//go:build !amd64

package provider

import "unsafe"

// prefetchLines is a no-op where no prefetch instruction is wired up.
func prefetchLines(unsafe.Pointer, int) {}
