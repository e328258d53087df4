//go:build !unix

package kernel

import "errors"

// Alloc is unavailable where there is no mmap.
func Alloc(n int) ([]byte, error) { return nil, errors.ErrUnsupported }

// Free is unavailable where there is no mmap.
func Free(b []byte) error { return errors.ErrUnsupported }
