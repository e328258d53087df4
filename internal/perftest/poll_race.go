//go:build race

package perftest

import "runtime"

// loadByte reads b[i], which the device writes from another goroutine (an
// RDMA WRITE landing in registered memory). Nothing but the byte's value
// orders the two, as on real hardware, so the race detector is told to
// ignore this read.
func loadByte(b []byte, i int) byte {
	runtime.RaceDisable()
	v := b[i]
	runtime.RaceEnable()
	return v
}
