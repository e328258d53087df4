//go:build !linux

package main

import (
	"os"
	"syscall"
)

// peerAttr is nil here: the peer process notices its parent's end when its
// stdin reaches EOF.
func peerAttr() *syscall.SysProcAttr { return nil }

// isTerminal reports whether f is a character device (a terminal, most
// likely).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// loadWarning has nothing to say where the load average is not at hand.
func loadWarning() string { return "" }
