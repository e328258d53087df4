// Package cmtools holds rdma-core 44's RDMA connection manager examples
// over rdma-go: rping, ucmatose (cmatose.c), udaddy, rdma_server and
// rdma_client, with the C tools' flags, defaults, output lines and exit
// codes (docs/spec/tools.md §4), speaking the IB CM over QP1 through package
// rdmacm so that each interoperates with its C namesake over a kernel
// rdma_rxe.
//
// Each tool is a function taking the command line and returning the exit
// status; cmd/<tool> only calls it with os.Args. The C tools' threads
// (rping's CM and CQ threads) are goroutines, and where C calls exit() from
// a thread, the Go tool makes its main goroutine return that status.
package cmtools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"

	"github.com/rdma-go/rdma-go/internal/cli"
	"github.com/rdma-go/rdma-go/rdmacm"
)

// Env is what a tool runs with: its program name (argv[0]), output
// streams and a context that ends the run early (tests; the C tools have
// none and run until done).
type Env struct {
	// Prog is argv[0] as the user typed it; tools that print
	// basename(argv[0]) or a fixed name do so themselves.
	Prog string
	// Stdout and Stderr receive the tool's output; writes are serialized.
	Stdout, Stderr io.Writer
	// Ctx bounds every wait of the tool; nil means context.Background().
	Ctx context.Context

	// listening, if set, is called when a server's listen call returned
	// (tests).
	listening func()
}

// out is a tool's pair of output streams, safe for its goroutines.
type out struct {
	mu       sync.Mutex
	stdout   io.Writer
	stderr   io.Writer
	debugOut bool
	// listening is Env.listening.
	listening func()
}

func newOut(e *Env) *out { return &out{stdout: e.Stdout, stderr: e.Stderr, listening: e.listening} }

// listened reports a successful listen to the test hook.
func (o *out) listened() {
	if o.listening != nil {
		o.listening()
	}
}

// printf writes to stdout (C printf).
func (o *out) printf(format string, a ...any) {
	o.mu.Lock()
	fmt.Fprintf(o.stdout, format, a...)
	o.mu.Unlock()
}

// eprintf writes to stderr (C fprintf(stderr, ...)).
func (o *out) eprintf(format string, a ...any) {
	o.mu.Lock()
	fmt.Fprintf(o.stderr, format, a...)
	o.mu.Unlock()
}

// debugf writes to stdout when debugging is on (rping's DEBUG_LOG).
func (o *out) debugf(format string, a ...any) {
	if o.debugOut {
		o.printf(format, a...)
	}
}

// perror prints "s: strerror(errno)" to stderr, as perror(3) does with the
// errno err carries.
func (o *out) perror(s string, err error) {
	o.eprintf("%s: %s\n", s, cli.Strerror(err))
}

// ctxOf returns e.Ctx or context.Background().
func (e *Env) ctxOf() context.Context {
	if e.Ctx != nil {
		return e.Ctx
	}
	return context.Background()
}

// createFirstEventChannel is common.c's create_first_event_channel: the
// first event channel of a tool, with its message when there is no RDMA
// device at all.
func createFirstEventChannel(o *out) (*rdmacm.EventChannel, error) {
	ch, err := rdmacm.CreateEventChannel()
	if err != nil {
		if errors.Is(err, rdmacm.ErrNoDevice) {
			o.eprintf("No RDMA devices were detected\n")
		} else {
			o.perror("failed to create RDMA CM event channel", err)
		}
	}
	return ch, err
}

// getaddrinfo error codes (glibc's EAI_*) and their gai_strerror texts.
const (
	eaiBadFlags   = -1
	eaiNoName     = -2
	eaiFamily     = -6
	eaiAddrFamily = -9
)

func gaiStrerror(code int) string {
	switch code {
	case eaiBadFlags:
		return "Bad value for ai_flags"
	case eaiNoName:
		return "Name or service not known"
	case -3:
		return "Temporary failure in name resolution"
	case -4:
		return "Non-recoverable failure in name resolution"
	case -5:
		return "No address associated with hostname"
	case eaiFamily:
		return "ai_family not supported"
	case -7:
		return "ai_socktype not supported"
	case -8:
		return "Servname not supported for ai_socktype"
	case eaiAddrFamily:
		return "Address family for hostname not supported"
	case -10:
		return "Memory allocation failure"
	case -11:
		return "System error"
	}
	return "Unknown error"
}

// lookupHost resolves a host name or literal address as getaddrinfo(3)
// with no hints does, returning the first address, or an EAI_* code.
func lookupHost(ctx context.Context, host string) (netip.Addr, int) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.WithZone(""), 0
	}
	if ip := net.ParseIP(host); ip != nil { // forms netip refuses
		if a, ok := netip.AddrFromSlice(ip); ok {
			return a.Unmap(), 0
		}
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, eaiNoName
	}
	return ips[0].Unmap(), 0
}

// gaiCode turns a GetAddrInfo failure into the value librdmacm's
// rdma_getaddrinfo returns: a getaddrinfo EAI_* code for a name that does
// not resolve, otherwise -1 (EAI_BADFLAGS when printed with gai_strerror).
func gaiCode(err error) int {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return eaiNoName
	}
	return -1
}

// exitStatus is what a C main's "return ret" leaves as the process's
// exit status: the low 8 bits.
func exitStatus(ret int) int { return ret & 0xFF }
