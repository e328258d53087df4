package prefetch

import "unsafe"

// lines issues PREFETCHT0 for n lines from p on, one line apart.
//
//go:noescape
func lines(p unsafe.Pointer, n int)
