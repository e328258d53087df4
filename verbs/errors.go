package verbs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/rdma-go/rdma-go/provider"
)

// Sentinel errors. Every error returned by this package wraps one of them
// (directly or through more specific error values), and each sentinel wraps
// the errno libibverbs returns in the same situation, so both
// errors.Is(err, verbs.ErrInvalidArgument) and errors.Is(err, syscall.EINVAL)
// hold for an invalid-argument failure. They are the provider package's
// sentinels, so errors a device's provider returns match them too.
var (
	// ErrInvalidArgument reports a bad argument or attribute (EINVAL).
	ErrInvalidArgument = provider.ErrInvalidArgument
	// ErrNoMemory reports an exhausted resource limit, such as posting more
	// work requests than a queue holds (ENOMEM).
	ErrNoMemory = provider.ErrNoMemory
	// ErrNotSupported reports a verb or option the device does not implement
	// (EOPNOTSUPP). It also matches errors.ErrUnsupported.
	ErrNotSupported = provider.ErrNotSupported
	// ErrBusy reports an object still in use, such as destroying a PD that
	// still has memory regions (EBUSY).
	ErrBusy = provider.ErrBusy
	// ErrNoDevice reports a missing or removed device (ENODEV).
	ErrNoDevice = provider.ErrNoDevice
	// ErrClosed reports use of an object that was already destroyed or
	// closed (EBADF).
	ErrClosed = provider.ErrClosed
)

// verrorf returns an error that wraps base (one of the sentinels) and reads
// "verbs: <formatted detail>: <base text>".
func verrorf(base error, format string, args ...any) error {
	return provider.Errorf(base, format, args...)
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
