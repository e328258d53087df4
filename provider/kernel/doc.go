// Package kernel is the kernel provider: it drives the RDMA devices the
// Linux kernel exposes (/sys/class/infiniband: mlx5, rxe, efa, …) through
// the system's libibverbs.so.1 (and librdmacm.so.1), loaded at run time with
// github.com/ebitengine/purego. Builds stay cgo-free (CGO_ENABLED=0), and
// on other systems the provider lists nothing and says why.
//
// Without /sys/class/infiniband, without a loadable libibverbs.so.1, or
// when libibverbs lists no device, Devices returns none and logs the
// reason once with slog at debug level; verbs then has the soft devices
// only.
//
// # Calls
//
// Exported libibverbs functions are resolved with dlsym (the default
// symbol version, IBVERBS_1.1, which a program compiled against rdma-core
// 44's verbs.h uses). verbs.h's inline verbs — ibv_post_send,
// ibv_post_recv, ibv_post_srq_recv, ibv_poll_cq, ibv_req_notify_cq,
// ibv_alloc_mw — are called as the header does, through the function
// pointers of the context's ops. ibv_query_port is, in verbs.h 44, an
// inline wrapper; the provider calls the exported symbol with a zeroed
// full struct ibv_port_attr, the wrapper's own fallback. Struct layouts
// and enum values are rdma-core 44's; a test compiles a C program against
// the installed verbs.h and checks every offset, size and enum value the
// provider relies on.
//
// PostSend, PostRecv and Poll build C work requests and read C
// completions in per-QP and per-CQ scratch memory outside the Go heap, so
// C never holds a Go pointer, and they do not allocate. Each still costs
// one purego call (runtime.cgocall: a switch to the system stack and
// entersyscall/exitsyscall), a few hundred nanoseconds more than a C
// program's direct call; BenchmarkHotPath measures both in one run.
//
// # Memory
//
// A device DMAs into a registered buffer after RegMR returns. Use Alloc
// for such buffers: page-aligned memory mapped outside the Go heap, which
// the Go runtime never moves, frees or reuses; Free it after deregistering.
// Go-heap memory ([]byte from make) is accepted too: RegMR pins it with a
// runtime.Pinner until Dereg, so the garbage collector keeps it (Go's
// collector does not move heap objects, and the kernel pins the pages).
// Never register memory on a goroutine stack, and never let the slice's
// backing array be reused while registered.
//
// # fork
//
// Go starts processes with clone and exec (os/exec), which registered
// memory survives unharmed. A process that forks and keeps running the
// child must call ForkInit (ibv_fork_init) before opening any device, so
// that registered pages are not shared copy-on-write with the child; with
// Linux 5.13+ and rdma-core 35+ this is never needed.
//
// # Events
//
// A completion channel's fd and the context's async-event fd are
// duplicated, made non-blocking and waited on in the Go runtime's poller:
// CompChannel.GetEvent honours its context.Context, and a goroutine per
// context delivers asynchronous events (with the owner of the QP, CQ or
// SRQ they name) as the soft device does. A CQ created without a channel
// gets one of its own, on which CQ.Wait sleeps (arm, poll, wait for the
// fd); on a CQ of the application's channel CQ.Wait polls with a backoff
// from 1 µs to 1 ms, since the channel's events are the application's.
// Unlike the soft device, arming a CQ that already holds completions
// raises no event: poll after ReqNotify.
//
// # Busy polling
//
// A goroutine that polls a CQ and posts without ever blocking, as
// perftest's loops do, keeps its P, and the runtime preempts it with a
// signal every 10 ms; with more than one P the preempted goroutine may go
// on on another thread and CPU. On a NIC neither matters much. On rxe,
// which does the transport's work in the doorbell's system call on the
// posting CPU, both do where signals are dear: in the interop lab's
// emulated guest they took about 8 % of ib_write_bw's 64 KiB bandwidth on rxe0.
// The perftest tools therefore run on one P on a kernel device and yield
// the P every few milliseconds themselves (internal/spin: OneP, Turns);
// a program with a loop like theirs can do the same (GOMAXPROCS=1 and
// runtime.Gosched every few milliseconds).
//
// # Connections
//
// Devices implement provider.CMDevice: their connections are managed by
// the kernel's rdma_cm through librdmacm.so.1 (CM, loaded on first use).
// One librdmacm event channel serves the process: its fd waits in the Go
// poller and one goroutine, living as long as the process, takes each
// event, copies it and acknowledges it at once, so rdma_destroy_id never
// waits on the application. QPs are never rdma_create_qp's: package rdmacm
// creates them with verbs and moves them with rdma_init_qp_attr's
// attributes, as librdmacm does for QPs it did not create.
//
// Build with -tags rdmago_nokernel to leave the provider out of verbs: on
// Linux the loader links the binary dynamically against libc.
package kernel
