// Command batch posts the same RDMA WRITEs three ways on one RC connection
// and prints how fast each way is, so that the lesson of batching and of
// unsignaled work requests is a number:
//
//	(a) one PostSend call per work request, every one signaled;
//	(b) linked lists of 16 work requests per PostSend call, every one signaled;
//	(c) lists of 16 with only the last of each list signaled.
//
// Both ends of the connection live in this process: a listener and a
// dialer of package rdmacm on the device's IP address.
//
//	go run ./examples/batch                 # 10,000 WRITEs of 64 B on a new soft device
//	go run ./examples/batch -n 100000 -s 8  # more, smaller
//	go run ./examples/batch -d rxe0         # on a kernel device, connected to itself
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// config is what the flags choose.
type config struct {
	// N is the number of RDMA WRITEs each way posts.
	N int
	// Size is the bytes each WRITE carries.
	Size int
}

const (
	// sqDepth is the send queue's depth: at most this many work requests
	// may be posted and not yet retired by a completion.
	sqDepth = 128
	// listLen is how many work requests (b) and (c) post per PostSend.
	listLen = 16
	// slots is how many message-sized slots the source and target
	// buffers have. WRITE i uses slot i % slots, so a slot is reused
	// only once the WRITE before it there has been retired (slots ≥
	// sqDepth), and the source bytes never change under the device.
	slots = 256
	// timeout bounds the whole program: nothing waits forever.
	timeout = 2 * time.Minute
)

func main() {
	o := exdev.Flags()
	var cfg config
	flag.IntVar(&cfg.N, "n", 10000, "RDMA WRITEs to post each way")
	flag.IntVar(&cfg.Size, "s", 64, "bytes per RDMA WRITE (8 to 65536)")
	flag.Parse()
	if err := run(os.Stdout, o, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "batch:", err)
		os.Exit(1)
	}
}

// mode is one way of posting the WRITEs.
type mode struct {
	name string
	// list is how many work requests go in one PostSend call.
	list int
	// signalAll signals every work request; otherwise only the last of
	// each list (and the very last WRITE) asks for a completion.
	signalAll bool
}

var modes = []mode{
	{"(a) one PostSend per WR, every WR signaled", 1, true},
	{"(b) lists of 16 per PostSend, every WR signaled", listLen, true},
	{"(c) lists of 16, only every 16th WR signaled", listLen, false},
}

// result is what one mode measured.
type result struct {
	elapsed     time.Duration
	posts       int // PostSend calls
	completions int // work completions polled
}

// run connects two RC QPs on the device o names (or a new soft device),
// runs the three modes and verifies that the data arrived.
func run(w io.Writer, o *exdev.Options, cfg config) (err error) {
	if cfg.N < 1 {
		return fmt.Errorf("-n %d: need at least one WRITE", cfg.N)
	}
	if cfg.Size < 8 || cfg.Size > 64<<10 {
		return fmt.Errorf("-s %d: the size must be 8 to 65536 bytes (each WRITE carries its 8-byte sequence number)", cfg.Size)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	// The device context keeps a new soft device (and its address) alive
	// for the whole run; rdmacm opens the device by that address.
	dev, err := o.Open("batch")
	if err != nil {
		return err
	}
	defer closeWith(&err, "close the device", dev.Close)
	ip, _, err := exdev.Addr(dev)
	if err != nil {
		return err
	}

	// The send queue is sqDepth deep; the CQ (rdmacm sizes it like the
	// queue) can hold a completion for every work request in it.
	client, server, err := exdev.Connect(ctx, ip, &rdmacm.Options{Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: 4}})
	if err != nil {
		return err
	}
	// Closed after the MRs below are deregistered (defers run last in,
	// first out): a PD cannot be freed while it has MRs.
	defer closeWith(&err, "close the server's connection", server.Close)
	defer closeWith(&err, "close the client's connection", client.Close)
	fmt.Fprintf(w, "batch: device %s (%s), RC QP 0x%06x -> QP 0x%06x, send queue %d deep\n",
		dev.Device().Name(), ip, client.QP().QPN(), server.QP().QPN(), client.QP().Cap().MaxSendWR)

	// The target: memory the server exposes for RDMA WRITE. REMOTE_WRITE
	// lets the peer's WRITEs in; LOCAL_WRITE must come with it (the device
	// writes the memory on the remote QP's behalf).
	target, err := server.PD().RegMR(make([]byte, slots*cfg.Size), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		return fmt.Errorf("register the target: %w", err)
	}
	defer closeWith(&err, "deregister the target", target.Dereg)
	// The source: the client's memory the WRITEs read. The device only
	// reads it, so it needs no access flags at all.
	source, err := client.PD().RegMR(make([]byte, slots*cfg.Size), 0)
	if err != nil {
		return fmt.Errorf("register the source: %w", err)
	}
	defer closeWith(&err, "deregister the source", source.Dereg)

	// The client learns where to write (address and R_Key) from a SEND,
	// as real applications do; here both ends happen to share a process.
	raddr, rkey, err := exchange(ctx, server, client, target)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "target: %d slots of %d B at 0x%x, rkey 0x%08x (sent to the client in a SEND)\n",
		slots, cfg.Size, raddr, rkey)
	fmt.Fprintf(w, "posting %d RDMA WRITEs of %d B three ways, at most %d outstanding:\n", cfg.N, cfg.Size, sqDepth)

	var base float64
	for i, m := range modes {
		clear(target.Bytes())
		r, err := post(ctx, client, source, raddr, rkey, cfg, m)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		// Every WRITE has completed (the last one is signaled and its
		// completion retires all before it), so the target holds, in
		// each slot, the last WRITE made to it.
		last, err := verify(target.Bytes(), cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		rate := float64(cfg.N) / r.elapsed.Seconds()
		if i == 0 {
			base = rate
		}
		fmt.Fprintf(w, "%-48s %6d PostSend calls, %6d completions, %9.2f ms, %8.1f k WR/s, %5.2fx vs (a); data verified through WR %d\n",
			m.name+":", r.posts, r.completions, float64(r.elapsed.Microseconds())/1000, rate/1000, rate/base, last)
	}
	fmt.Fprintln(w, "lists cut the per-call cost of PostSend (one doorbell per list on a NIC);")
	fmt.Fprintln(w, "unsignaled WRs cut completions, but a signaled WR must retire them before the send queue fills")
	return nil
}

// post writes cfg.N messages from source to the peer's memory at raddr
// the way m says, keeping at most sqDepth work requests outstanding, and
// returns when the last one has completed.
//
// Why bound the outstanding work requests: a work request occupies a send
// queue slot from PostSend until its completion is polled, and an
// unsignaled one, which has no completion of its own, until the
// completion of a later signaled one on the same queue retires it (a send
// queue completes in order, so WR j's completion means every WR before j
// is done too). A PostSend beyond the queue's depth fails with ENOMEM, and
// a queue of only unsignaled WRs would never be retired at all: so the
// last WR of every list is signaled, and the queue must hold at least one
// list.
func post(ctx context.Context, c *rdmacm.Conn, source *verbs.MR, raddr uint64, rkey uint32, cfg config, m mode) (result, error) {
	qp, cq := c.QP(), c.SendCQ()
	var (
		r       result
		wrs     = make([]verbs.SendWR, m.list)
		sgl     = make([]verbs.SGE, m.list)
		wcs     = make([]verbs.WC, 32)
		posted  int // WRITEs posted
		retired int // WRITEs known complete: all below the newest completion's WR ID
	)
	src := source.Bytes()
	start := time.Now()
	for posted < cfg.N {
		k := min(m.list, cfg.N-posted)
		// No room for the next list: poll completions to retire WRs.
		for posted+k-retired > sqDepth {
			n, err := reap(ctx, cq, wcs, &retired)
			if err != nil {
				return r, err
			}
			r.completions += n
		}
		for j := range k {
			i := posted + j
			slot := i % slots
			stamp(src[slot*cfg.Size:(slot+1)*cfg.Size], uint64(i))
			sgl[j] = source.SGE(slot*cfg.Size, cfg.Size)
			wrs[j] = verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, SGL: sgl[j : j+1],
				RemoteAddr: raddr + uint64(slot*cfg.Size), RKey: rkey}
			if m.signalAll || j == k-1 {
				wrs[j].Flags = verbs.SendSignaled
			}
		}
		// One call for the whole list: the device is told once about k
		// work requests (on a NIC, one doorbell write instead of k).
		if err := qp.PostSend(wrs[:k]...); err != nil {
			return r, fmt.Errorf("PostSend of WRs %d..%d: %w", posted, posted+k-1, err)
		}
		r.posts++
		posted += k
	}
	for retired < cfg.N {
		n, err := reap(ctx, cq, wcs, &retired)
		if err != nil {
			return r, err
		}
		r.completions += n
	}
	r.elapsed = time.Since(start)
	return r, nil
}

// reap polls cq for completions, waiting (up to ctx's deadline) until at
// least one arrives, and advances *retired past the newest WR completed.
// It returns how many completions it took.
func reap(ctx context.Context, cq *verbs.CQ, wcs []verbs.WC, retired *int) (int, error) {
	for {
		n, err := cq.Poll(wcs)
		if err != nil {
			return 0, fmt.Errorf("poll: %w", err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				return 0, fmt.Errorf("WR %d completed with %s", wc.WRID, wc.Status)
			}
			*retired = int(wc.WRID) + 1
		}
		if n > 0 {
			return n, nil
		}
		// Nothing yet: sleep until the CQ holds a completion rather
		// than spin, leaving the processor to the device.
		if err := cq.Wait(ctx); err != nil {
			return 0, fmt.Errorf("waiting for completions (%d retired): %w", *retired, err)
		}
	}
}

// stamp fills a message with its sequence number and a pattern derived
// from it, so that the receiver can tell which WRITE it holds.
func stamp(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
}

// verify checks that every slot of the target holds the last WRITE made to
// it, and returns the number of the very last WRITE.
func verify(target []byte, cfg config) (int, error) {
	want := make([]byte, cfg.Size)
	for slot := range min(slots, cfg.N) {
		// The last WRITE to slot: the largest i < N with i % slots == slot.
		i := slot + (cfg.N-1-slot)/slots*slots
		stamp(want, uint64(i))
		got := target[slot*cfg.Size : (slot+1)*cfg.Size]
		if string(got) != string(want) {
			return 0, fmt.Errorf("target slot %d holds WR %d's bytes %x…, want WR %d's", slot,
				binary.LittleEndian.Uint64(got), got[:min(16, len(got))], i)
		}
	}
	return cfg.N - 1, nil
}

// exchange tells the client where the server's target memory is: the
// server SENDs its address and R_Key, the client receives them. This is
// all a peer needs to WRITE into that memory without the server's CPU.
func exchange(ctx context.Context, server, client *rdmacm.Conn, target *verbs.MR) (uint64, uint32, error) {
	// The receive buffer is registered with LOCAL_WRITE: the device writes
	// the incoming message into it.
	in := make([]byte, 12)
	inMR, err := client.PD().RegMR(in, verbs.AccessLocalWrite)
	if err != nil {
		return 0, 0, fmt.Errorf("register the receive buffer: %w", err)
	}
	defer inMR.Dereg()
	out := make([]byte, 12)
	binary.LittleEndian.PutUint64(out, target.Addr())
	binary.LittleEndian.PutUint32(out[8:], target.RKey())
	outMR, err := server.PD().RegMR(out, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("register the send buffer: %w", err)
	}
	defer outMR.Dereg()

	// Post the receive before the peer sends (a SEND that finds no receive
	// is NAKed and retried later: slow).
	if err := client.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{inMR.SGE(0, len(in))}}); err != nil {
		return 0, 0, fmt.Errorf("post receive: %w", err)
	}
	if err := server.QP().PostSend(verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{outMR.SGE(0, len(out))}}); err != nil {
		return 0, 0, fmt.Errorf("post send: %w", err)
	}
	if _, err := waitOne(ctx, server.SendCQ()); err != nil {
		return 0, 0, fmt.Errorf("server's SEND: %w", err)
	}
	wc, err := waitOne(ctx, client.RecvCQ())
	if err != nil {
		return 0, 0, fmt.Errorf("client's receive: %w", err)
	}
	if wc.ByteLen != uint32(len(in)) {
		return 0, 0, fmt.Errorf("client received %d bytes, want %d", wc.ByteLen, len(in))
	}
	return binary.LittleEndian.Uint64(in), binary.LittleEndian.Uint32(in[8:]), nil
}

// waitOne waits for one successful completion on cq.
func waitOne(ctx context.Context, cq *verbs.CQ) (verbs.WC, error) {
	var wc [1]verbs.WC
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return wc[0], err
		}
		if n == 1 {
			if wc[0].Status != verbs.WCSuccess {
				return wc[0], fmt.Errorf("WR %d completed with %s", wc[0].WRID, wc[0].Status)
			}
			return wc[0], nil
		}
		if err := cq.Wait(ctx); err != nil {
			return wc[0], err
		}
	}
}

// closeWith calls close, as a deferred clean-up, and adds its error, if
// any, to *err: a leak or a failed teardown is reported, not hidden.
func closeWith(err *error, what string, close func() error) {
	if cerr := close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("%s: %w", what, cerr))
	}
}
