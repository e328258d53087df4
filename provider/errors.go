package provider

import (
	"fmt"
	"strings"
	"syscall"
)

// errnoError is a sentinel error that carries the errno libibverbs would
// report for the same condition. Its message is "verbs: <strerror text>".
type errnoError struct {
	errno syscall.Errno
	text  string
}

func (e *errnoError) Error() string { return "verbs: " + e.text }

// Unwrap exposes the errno, so errors.Is(err, syscall.EINVAL) holds.
func (e *errnoError) Unwrap() error { return e.errno }

// Sentinel errors (verbs re-exports them). Every error verbs and the
// providers return wraps one of them
// (directly or through more specific error values), and each sentinel wraps
// the errno libibverbs returns in the same situation, so both
// errors.Is(err, verbs.ErrInvalidArgument) and errors.Is(err, syscall.EINVAL)
// hold for an invalid-argument failure.
var (
	// ErrInvalidArgument reports a bad argument or attribute (EINVAL).
	ErrInvalidArgument error = &errnoError{syscall.EINVAL, "invalid argument"}
	// ErrNoMemory reports an exhausted resource limit, such as posting more
	// work requests than a queue holds (ENOMEM).
	ErrNoMemory error = &errnoError{syscall.ENOMEM, "cannot allocate memory"}
	// ErrNotSupported reports a verb or option the device does not implement
	// (EOPNOTSUPP). It also matches errors.ErrUnsupported.
	ErrNotSupported error = &errnoError{syscall.EOPNOTSUPP, "operation not supported"}
	// ErrBusy reports an object still in use, such as destroying a PD that
	// still has memory regions (EBUSY).
	ErrBusy error = &errnoError{syscall.EBUSY, "device or resource busy"}
	// ErrNoDevice reports a missing or removed device (ENODEV).
	ErrNoDevice error = &errnoError{syscall.ENODEV, "no such device"}
	// ErrClosed reports use of an object that was already destroyed or
	// closed (EBADF).
	ErrClosed error = &errnoError{syscall.EBADF, "object already closed"}
)

// detailError is a sentinel error with a precise explanation in front of it:
// "verbs: <detail>: <sentinel text>".
type detailError struct {
	detail string
	base   error
}

func (e *detailError) Error() string {
	return "verbs: " + e.detail + ": " + strings.TrimPrefix(e.base.Error(), "verbs: ")
}

func (e *detailError) Unwrap() error { return e.base }

// Errorf returns an error that wraps base (one of the sentinels) and reads
// "verbs: <formatted detail>: <base text>". Providers report their errors
// with it, so that what verbs returns reads the same whichever device made it.
func Errorf(base error, format string, args ...any) error {
	return &detailError{detail: fmt.Sprintf(format, args...), base: base}
}
