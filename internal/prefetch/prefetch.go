// Package prefetch asks the CPU to start fetching memory that code is
// about to read, so that the cache misses of several lines overlap
// instead of coming one after the other.
//
// A QP not used for a while (one of many connections) is out of every
// cache, and the code of a post reaches its lines one at a time: a lock,
// then what the lock guards, then the next object's lock. Asked for at
// once, the lines come back in about the time of one miss.
package prefetch

import "unsafe"

// LineSize is the cache line size the hints assume.
const LineSize = 64

// Range asks for the cache lines holding the n bytes from p on to be
// brought into the cache. It reads nothing and never faults, and the race
// detector does not see it. Ask only for memory inside one live object.
func Range(p unsafe.Pointer, n uintptr) {
	if k := lineCount(uintptr(p), n); k > 0 {
		lines(unsafe.Pointer(uintptr(p)&^(LineSize-1)), k)
	}
}

// lineCount returns how many cache lines the n bytes from address a on
// touch.
func lineCount(a, n uintptr) int {
	if n == 0 {
		return 0
	}
	first := a &^ (LineSize - 1)
	last := (a + n - 1) &^ (LineSize - 1)
	return int((last-first)/LineSize) + 1
}
