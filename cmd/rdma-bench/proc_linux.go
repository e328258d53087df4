package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerAttr makes the kernel kill the peer process when its parent dies.
func peerAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// loadWarning says so when the machine was busy as the run began: the
// figures are then noisy, the ratios less so.
func loadWarning() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil || l < float64(runtime.NumCPU())/2 {
		return ""
	}
	return fmt.Sprintf("load average %.2f on %d CPUs at the start: other work shares the machine, so the figures are noisy (the per-run ratios less so)", l, runtime.NumCPU())
}
