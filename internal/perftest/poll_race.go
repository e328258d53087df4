//go:build race && (amd64 || arm64)

package perftest

import "unsafe"

// rawLoadByte reads *p in assembly, which the race detector does not
// instrument.
//
//go:noescape
func rawLoadByte(p *byte) byte

// loadByte reads b[i], which the device writes from another goroutine (an
// RDMA WRITE landing in registered memory). Nothing but the byte's value
// orders the two, as on real hardware (perftest busy-polls the same way),
// so under the race detector the read is made where it cannot see it.
func loadByte(b []byte, i int) byte {
	if uint(i) >= uint(len(b)) {
		panic("perftest: poll offset out of range")
	}
	return rawLoadByte((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i)))
}
