//go:build !amd64

package perftest

// haveTSC: no time-stamp counter is read on this architecture; nowNS uses
// the system clock (clock.go).
const haveTSC = false

func rdtsc() int64 { return 0 }
