//go:build !linux && !darwin

package perftest

// cpuModel and kernel are unknown here: --json reports leave them empty.
func cpuModel() string { return "" }
func kernel() string   { return "" }
