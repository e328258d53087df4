//go:build race

package engine

// raceReadPayload reads a payload sent in place, so that the race detector
// sees the device read the application's memory (the kernel's copy and the
// CRC's assembly are invisible to it), as it did when the payload was
// copied into the packet.
func raceReadPayload(p []byte) {
	var buf [512]byte
	for len(p) > 0 {
		p = p[copy(buf[:], p):]
	}
}
