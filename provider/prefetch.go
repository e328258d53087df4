package provider

import "unsafe"

// CacheLineSize is the cache line size Prefetch assumes.
const CacheLineSize = 64

// Prefetch asks the CPU to start fetching the cache lines holding the n
// bytes from p on, so that the misses of several lines overlap instead of
// coming one after the other. It reads nothing and never faults, and the
// race detector does not see it. Ask only for memory inside one live
// object.
//
// A QP not used for a while (one of many connections) is out of every
// cache, and the code of a post reaches its lines one at a time — a lock,
// then what the lock guards, then the next layer's lock. verbs' PostSend
// asks for all of them first thing (see the soft provider's
// QPStoragePostBytes); asked for at once, they arrive in about the time of
// one miss.
func Prefetch(p unsafe.Pointer, n uintptr) {
	if k := lineCount(uintptr(p), n); k > 0 {
		prefetchLines(unsafe.Pointer(uintptr(p)&^(CacheLineSize-1)), k)
	}
}

// lineCount returns how many cache lines the n bytes from address a on
// touch.
func lineCount(a, n uintptr) int {
	if n == 0 {
		return 0
	}
	first := a &^ (CacheLineSize - 1)
	last := (a + n - 1) &^ (CacheLineSize - 1)
	return int((last-first)/CacheLineSize) + 1
}
