//go:build !race

package perftest

import (
	"sync/atomic"
	"unsafe"
)

// loadByte reads b[i], which the device writes from another goroutine
// (an RDMA WRITE landing in registered memory), with an atomic load of the
// aligned word around it so that the compiler re-reads it every time.
func loadByte(b []byte, i int) byte {
	_ = b[i]
	base := unsafe.Pointer(unsafe.SliceData(b))
	mis := int((uintptr(base) + uintptr(i)) & 3)
	if i < mis {
		return b[i] // never for the buffers the tools allocate (8-byte aligned)
	}
	w := atomic.LoadUint32((*uint32)(unsafe.Add(base, i-mis)))
	return byte(w >> (8 * mis))
}
