package provider

import "unsafe"

// prefetchLines issues PREFETCHT0 for n lines from p on, one line apart.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n int)
