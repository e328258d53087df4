//go:build race && !amd64 && !arm64

package perftest

// loadByte reads b[i], which the device writes from another goroutine; on
// this architecture the race detector sees the read.
func loadByte(b []byte, i int) byte { return b[i] }
