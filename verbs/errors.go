package verbs

import (
	"errors"
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

// Sentinel errors. Every error returned by this package wraps one of them
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

// verrorf returns an error that wraps base (one of the sentinels) and reads
// "verbs: <formatted detail>: <base text>".
func verrorf(base error, format string, args ...any) error {
	return &detailError{detail: fmt.Sprintf(format, args...), base: base}
}

// ErrnoOf returns the errno that libibverbs would report for err: 0 for nil,
// the first syscall.Errno found in err's chain, or EIO when there is none.
func ErrnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// PostError reports which work request of a posted chain failed, like the
// bad_wr output of ibv_post_send and ibv_post_recv. Work requests before
// Index were queued; the one at Index and those after it were not.
type PostError struct {
	// Index is the position of the failing work request in the posted slice.
	Index int
	// Err is the reason, usually wrapping ErrInvalidArgument or ErrNoMemory.
	Err error
}

// Error implements the error interface.
func (e *PostError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("verbs: work request %d failed", e.Index)
	}
	return fmt.Sprintf("verbs: work request %d: %s", e.Index,
		strings.TrimPrefix(e.Err.Error(), "verbs: "))
}

// Unwrap returns the underlying error, so errors.Is sees through a PostError.
func (e *PostError) Unwrap() error { return e.Err }
