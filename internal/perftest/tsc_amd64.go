package perftest

// haveTSC: the CPU has a time-stamp counter (clock.go).
const haveTSC = true

// rdtsc reads the time-stamp counter.
func rdtsc() int64
