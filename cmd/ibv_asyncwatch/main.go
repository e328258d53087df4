// Command ibv_asyncwatch prints the asynchronous events of an RDMA device,
// like rdma-core 44.0's ibv_asyncwatch (libibverbs/examples/asyncwatch.c):
// the same options, output lines, messages and exit codes.
//
// Usage:
//
//	ibv_asyncwatch [-d <dev>] [-h]
//
// -d/--ib-dev watches the named device (default: the first device),
// -h/--help prints the usage on standard output and exits 0; a bad option
// prints getopt's message and the usage and exits 1. So do a missing
// device ("IB device <dev> not found") and one that cannot be opened
// ("Couldn't get context for <dev>").
//
// It prints "<dev>: async event FD <n>", then one line per event, indented
// by two spaces, until it is killed:
//
//	event_type IBV_EVENT_PORT_ERR (10), port 1
//
// As in rdma-core 44.0, only the port and device events have a name (the
// others, and IBV_EVENT_DEVICE_SPEED_CHANGE, which 44.0 predates, show as
// "unexpected"). The C tool prints the port_num member of the event's
// union, which for a QP, CQ or SRQ event is part of a pointer, and never
// sees such events anyway (they go to the context that created the
// object); this one prints the event's port, which the soft device sets
// for QP events and which is otherwise 0. SIGINT and SIGTERM close the
// device and then end the program by that signal, so the parent sees the
// status it sees for the C tool (130, 143); a signal ignored at start
// stays ignored, as it does for C.
//
// The FD number: for a kernel device it is the context's async_fd, the
// descriptor the C tool prints. The verbs API does not expose it, so it is
// found in /proc/self/fd: the lowest descriptor of an "[infinibandevent]"
// file that opening the device added (the kernel provider waits on a
// duplicate of it, made just after). It is this process's number; it
// equals the C tool's when the two have the same descriptors open before
// (the Go runtime opens its poller's only after the device, and in the lab
// guest both print 5), but a program holding more files prints a higher
// one. A soft device has no descriptor at all — its events are queued in
// the process — and prints -1, C's "no file descriptor".
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli"
	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/verbs"
)

func main() {
	sigs := make(chan os.Signal, 1)
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !signal.Ignored(s) { // as for C: a signal ignored at start stays ignored
			signal.Notify(sigs, s)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	caught := make(chan os.Signal, 1)
	go func() {
		s := <-sigs
		caught <- s
		cancel()
	}()
	rc := run(ctx, os.Args, os.Stdout, os.Stderr)
	select {
	case s := <-caught:
		// The device is closed: now die of the signal, as the C tool
		// does at once, so that a shell reports 130 for ^C.
		signal.Reset(s)
		if p, err := os.FindProcess(os.Getpid()); err == nil && p.Signal(s) == nil {
			time.Sleep(time.Second) // the signal ends the process first
		}
	default:
	}
	os.Exit(rc)
}

// usage is asyncwatch.c's help text, with the program name as invoked.
func usage(w io.Writer, prog string) {
	fmt.Fprintf(w, "Usage:\n  %s            start an asyncwatch process\n\n", prog)
	fmt.Fprintf(w, "Options:\n  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n")
	fmt.Fprintf(w, "  -h, --help             print a help text and exit\n")
}

// run is the whole program: args is the command line with argv[0] first.
// It watches until ctx ends (then it returns 0) and returns the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	prog := "ibv_asyncwatch"
	if len(args) > 0 {
		prog, args = args[0], args[1:]
	}
	p := getopt.New(prog, "d:h", []getopt.Option{
		{Short: 'd', Long: "ib-dev", Arg: getopt.RequiredArg},
		{Short: 'h', Long: "help", Arg: getopt.NoArg},
	})
	p.Opterr = false // printed below, in the order C prints it
	r, perr := p.Parse(args)
	name, haveName := "", false
	for _, o := range r.Opts {
		switch o.Option.Short {
		case 'd':
			name, haveName = o.Value, true
		case 'h':
			usage(stdout, prog)
			return 0
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s\n", perr)
		usage(stdout, prog)
		return 1
	}

	devs, err := verbs.Devices()
	if err != nil {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %s\n", cli.Strerror(err))
		return 1
	}
	var dev *verbs.Device
	for _, d := range devs {
		if !haveName || d.Name() == name {
			dev = d
			break
		}
	}
	if dev == nil {
		fmt.Fprintf(stderr, "IB device %s not found\n", name)
		return 1
	}

	before := eventFDs()
	vc, err := dev.Open()
	if err != nil {
		fmt.Fprintf(stderr, "Couldn't get context for %s\n", dev.Name())
		return 1
	}
	defer vc.Close()
	fd := -1 // a soft device has no descriptor
	if _, isSoft := vc.Provider().(*soft.Context); !isSoft {
		fd = newFD(before, eventFDs())
	}
	fmt.Fprintf(stdout, "%s: async event FD %d\n", dev.Name(), fd)

	if err := watch(ctx, vc, stdout); err != nil {
		return 1 // as the C tool, which says nothing when ibv_get_async_event fails
	}
	return 0
}

// watch prints each asynchronous event of vc, one line each (the C tool's
// stdout is line-buffered, so every line is written at once), and
// acknowledges it. It returns nil when ctx ends, or the error that ended
// the event queue.
func watch(ctx context.Context, vc *verbs.Context, w io.Writer) error {
	for {
		ev, err := vc.GetAsyncEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("waiting for an async event of %s: %w", vc.Device().Name(), err)
		}
		fmt.Fprintf(w, "  event_type %s (%d), port %d\n", eventName(ev.Type), uint32(ev.Type), ev.Port)
		vc.AckAsyncEvent(ev)
	}
}

// eventName is asyncwatch.c's name of an event type: the port and device
// events of rdma-core 44.0 by name, any other "unexpected".
func eventName(t verbs.EventType) string {
	switch t {
	case verbs.EventDeviceFatal, verbs.EventPortActive, verbs.EventPortErr, verbs.EventLIDChange,
		verbs.EventPKeyChange, verbs.EventSMChange, verbs.EventClientReregister, verbs.EventGIDChange:
		return t.Name()
	}
	return "unexpected"
}

// eventFDs are this process's descriptors of the kernel's RDMA event files
// (async event queues and completion channels), from /proc/self/fd; none
// where there is no /proc.
func eventFDs() map[int]bool {
	fds := map[int]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fds
	}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == "anon_inode:[infinibandevent]" {
			fds[n] = true
		}
	}
	return fds
}

// newFD is the lowest descriptor in after that is not in before: the
// async_fd libibverbs opened, below the kernel provider's duplicate of it.
// -1 if there is none.
func newFD(before, after map[int]bool) int {
	fd := -1
	for n := range after {
		if !before[n] && (fd < 0 || n < fd) {
			fd = n
		}
	}
	return fd
}
