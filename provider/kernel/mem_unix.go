//go:build unix

package kernel

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Alloc returns n bytes (rounded up to whole pages) of zeroed, page-aligned
// memory outside the Go heap, mapped anonymously with mmap. It is the
// memory to register for a kernel device: the NIC reads and writes it by
// DMA after RegMR returns, and the Go runtime never moves, frees or reuses
// it. Release it with Free after deregistering every MR on it.
func Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("kernel.Alloc: size %d", n)
	}
	pg := os.Getpagesize()
	size := (n + pg - 1) &^ (pg - 1)
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("kernel.Alloc: mmap %d bytes: %w", size, err)
	}
	return b[:n:size], nil
}

// Free unmaps memory from Alloc.
func Free(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	return unix.Munmap(b[:cap(b)])
}
