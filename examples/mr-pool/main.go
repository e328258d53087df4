// Command mr-pool sends the same messages over an RC connection two ways
// and prints what each costs:
//
//   - per-message MR: each message's buffer is registered (RegMR) before
//     its SEND and deregistered (DeregMR) after its completion, the naive
//     way;
//   - pool: buffers are slices of one MR registered once, borrowed for a
//     message and returned after its completion (type Pool, pool.go).
//
// The receiver always takes its receive buffers from a pool.
//
// Why registration is expensive: RegMR asks the kernel to pin the pages
// (so they cannot be swapped or moved while the NIC may DMA into them)
// and to write the virtual-to-physical translation of every page into the
// NIC's memory translation tables, then hands out keys; DeregMR undoes it
// all, including invalidating the NIC's cached translations. That is
// system calls, page-table walks and commands to the NIC: commonly
// microseconds to tens of microseconds per call, growing with the
// buffer's size, which can be more than sending the message costs. On
// the soft device registration is only bookkeeping in this process, so
// the gap printed here is smaller than on real hardware (try -d rxe0, or
// a ConnectX NIC), but the lesson holds: register once, reuse many times.
// (The per-message way also pays for its fresh buffer: allocating it,
// and on a NIC faulting in and pinning new pages.)
//
// Both ends of the connection live in this process: a listener and a
// dialer of package rdmacm on the device's IP address.
//
//	go run ./examples/mr-pool                  # 2,000 SENDs of 4 KiB on a new soft device
//	go run ./examples/mr-pool -n 10000 -s 65536
//	go run ./examples/mr-pool -d rxe0          # on a kernel device, connected to itself
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
	// N is the number of SENDs each way.
	N int
	// Size is the bytes of each message.
	Size int
	// Window is how many SENDs may be in flight (posted, not completed).
	Window int
}

const (
	// recvBufs is how many receive buffers the receiver keeps posted:
	// many more than the sender's window, so that a SEND rarely finds no
	// receive. The sender's window does not bound how far it runs ahead
	// of the receiving goroutine (the device acknowledges a SEND once it
	// has placed it, before the application looks), so a receiver that
	// is descheduled for a while can run out. Then a SEND is NAKed
	// "receiver not ready" (RNR) and retried after the receiver's RNR
	// timer (minRNRTimer).
	recvBufs = 256
	// minRNRTimer is the receiver's RNR NAK timer: code 12 is 0.64 ms
	// (the table is in the InfiniBand spec; ibv_rc_pingpong uses 12).
	// rdma_cm's default, 0, means 655 ms, which would dwarf everything
	// measured here at the first RNR NAK.
	minRNRTimer = 12
	// timeout bounds the whole program: nothing waits forever.
	timeout = 2 * time.Minute
)

func main() {
	o := exdev.Flags()
	var cfg config
	flag.IntVar(&cfg.N, "n", 2000, "SENDs each way")
	flag.IntVar(&cfg.Size, "s", 4096, "bytes per message (8 to 1048576)")
	flag.IntVar(&cfg.Window, "w", 32, "SENDs in flight at most (1 to 64)")
	flag.Parse()
	if err := run(os.Stdout, o, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "mr-pool:", err)
		os.Exit(1)
	}
}

// run connects two RC QPs on the device o names (or a new soft device)
// and sends cfg.N messages each way, checking every byte received.
func run(w io.Writer, o *exdev.Options, cfg config) (err error) {
	if cfg.N < 1 {
		return fmt.Errorf("-n %d: need at least one message", cfg.N)
	}
	if cfg.Size < 8 || cfg.Size > 1<<20 {
		return fmt.Errorf("-s %d: the size must be 8 to 1048576 bytes (each message carries its 8-byte sequence number)", cfg.Size)
	}
	if cfg.Window < 1 || cfg.Window > 64 {
		return fmt.Errorf("-w %d: the window must be 1 to 64", cfg.Window)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	dev, err := o.Open("mrpool")
	if err != nil {
		return err
	}
	defer closeWith(&err, "close the device", dev.Close)
	ip, _, err := exdev.Addr(dev)
	if err != nil {
		return err
	}
	client, server, err := exdev.Connect(ctx, ip, &rdmacm.Options{MinRNRTimer: minRNRTimer,
		Cap: verbs.QPCap{MaxSendWR: uint32(cfg.Window), MaxRecvWR: recvBufs}})
	if err != nil {
		return err
	}
	// Closed after the MRs below are deregistered (defers run last in,
	// first out): a PD cannot be freed while it has MRs.
	defer closeWith(&err, "close the server's connection", server.Close)
	defer closeWith(&err, "close the client's connection", client.Close)
	fmt.Fprintf(w, "mr-pool: device %s (%s), RC connection %s -> %s\n",
		dev.Device().Name(), ip, client.LocalAddr(), client.RemoteAddr())

	// The receiver's pool: LOCAL_WRITE, because the device writes
	// incoming messages into these buffers.
	rx, err := NewPool(server.PD(), recvBufs, cfg.Size, verbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	defer closeWith(&err, "close the receive pool", rx.Close)
	total := 2 * cfg.N
	if err := postInitialRecvs(ctx, server.QP(), rx, total); err != nil {
		return err
	}
	fmt.Fprintf(w, "sending %d SENDs of %d B two ways, at most %d in flight; the receiver reposts %d buffers of one MR\n",
		cfg.N, cfg.Size, cfg.Window, recvBufs)

	// The receiver runs beside the sender. Whichever fails cancels sctx,
	// so that the other, maybe waiting for a buffer or a completion that
	// will never come, stops at once.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	recvd := make(chan recvResult, 1)
	go func() {
		r := receive(sctx, server, rx, total)
		if r.err != nil {
			scancel()
		}
		recvd <- r
	}()
	serr := send(sctx, w, client, cfg)
	if serr != nil {
		scancel()
	}
	r := <-recvd
	if r.err != nil {
		r.err = fmt.Errorf("receiver, after %d messages: %w", r.n, r.err)
	}
	if serr != nil || r.err != nil {
		return errors.Join(serr, r.err)
	}
	fmt.Fprintf(w, "receiver: %d of %d messages arrived in order, every byte verified\n", r.n, total)
	return nil
}

// send sends cfg.N messages with a new MR for each, then cfg.N from a pool
// registered once, and prints what each way cost.
func send(ctx context.Context, w io.Writer, c *rdmacm.Conn, cfg config) error {
	// 1. A new buffer and MR for every message.
	perMsg, err := sendPerMessageMR(ctx, c, cfg, 0)
	if err != nil {
		return fmt.Errorf("per-message MR: %w", err)
	}
	fmt.Fprintf(w, "per-message MR: %d messages, %8.2f ms, %7.2f µs/msg; RegMR %6.2f µs/call, DeregMR %6.2f µs/call (%d calls each)\n",
		cfg.N, ms(perMsg.elapsed), us(perMsg.elapsed)/float64(cfg.N),
		us(perMsg.reg)/float64(perMsg.regs), us(perMsg.dereg)/float64(perMsg.deregs), perMsg.regs)

	// 2. Buffers from a pool registered once. The pool is as big as the
	// window: Get waits while every buffer is in flight.
	start := time.Now()
	tx, err := NewPool(c.PD(), cfg.Window, cfg.Size, 0)
	if err != nil {
		return err
	}
	regOnce := time.Since(start)
	pooled, err := sendPooled(ctx, c, tx, cfg, cfg.N)
	if cerr := tx.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	fmt.Fprintf(w, "pool:           %d messages, %8.2f ms, %7.2f µs/msg; one RegMR of %d × %d B in %.2f µs, none per message\n",
		cfg.N, ms(pooled.elapsed), us(pooled.elapsed)/float64(cfg.N), cfg.Window, cfg.Size, us(regOnce))
	fmt.Fprintf(w, "pool vs per-message MR: %.2fx the message rate (on a NIC, where each RegMR and DeregMR pins pages and programs the NIC, the gap is wider)\n",
		perMsg.elapsed.Seconds()/pooled.elapsed.Seconds())
	return nil
}

// stats is what one way of sending measured.
type stats struct {
	elapsed      time.Duration // first buffer taken to last completion
	reg, dereg   time.Duration // time inside RegMR and DeregMR
	regs, deregs int           // calls of each
}

// message is one SEND's buffer: its bytes, its scatter/gather element, and
// what to do once the SEND has completed.
type message struct {
	b       []byte
	sge     verbs.SGE
	release func() error
}

// sendPerMessageMR sends cfg.N messages numbered from first, each from a
// new buffer registered for it and deregistered once its SEND completed.
func sendPerMessageMR(ctx context.Context, c *rdmacm.Conn, cfg config, first int) (stats, error) {
	var st stats
	// Bound the messages in flight to the window, as the pool's size does
	// for the pooled way.
	window := make(chan struct{}, cfg.Window)
	acquire := func(ctx context.Context) (message, error) {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return message{}, ctx.Err()
		}
		b := make([]byte, cfg.Size)
		t := time.Now()
		// A buffer only sent from needs no access flags: the device reads
		// local memory with the L_Key alone.
		mr, err := c.PD().RegMR(b, 0)
		st.reg += time.Since(t)
		st.regs++
		if err != nil {
			<-window
			return message{}, fmt.Errorf("RegMR: %w", err)
		}
		// release runs on the completion goroutine once the SEND is
		// done: only then may the MR go (the device reads the buffer
		// while sending, after PostSend has returned).
		release := func() error {
			t := time.Now()
			err := mr.Dereg()
			st.dereg += time.Since(t)
			st.deregs++
			<-window
			return err
		}
		return message{b: b, sge: mr.SGE(0, cfg.Size), release: release}, nil
	}
	err := sendAll(ctx, c, cfg, first, acquire, &st)
	return st, err
}

// sendPooled sends cfg.N messages numbered from first, each from a buffer
// of pool, returned to it once the SEND completed.
func sendPooled(ctx context.Context, c *rdmacm.Conn, pool *Pool, cfg config, first int) (stats, error) {
	var st stats
	acquire := func(ctx context.Context) (message, error) {
		b, err := pool.Get(ctx)
		if err != nil {
			return message{}, err
		}
		return message{b: b.Bytes()[:cfg.Size], sge: b.SGE(cfg.Size), release: func() error { return pool.Put(b) }}, nil
	}
	err := sendAll(ctx, c, cfg, first, acquire, &st)
	return st, err
}

// sendAll posts cfg.N SENDs numbered first, first+1, ..., each from the
// buffer acquire gives, while a second goroutine polls the completions
// and releases each message's buffer. A send queue completes in posting
// order, so the completion goroutine takes the messages from a FIFO.
// st.elapsed (and whatever release adds to st) is complete on return.
func sendAll(ctx context.Context, c *rdmacm.Conn, cfg config, first int, acquire func(context.Context) (message, error), st *stats) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inflight := make(chan message, cfg.Window) // acquire bounds it to the window
	reaped := make(chan error, 1)
	start := time.Now()
	go func() {
		err := reap(ctx, c.SendCQ(), inflight, cfg.N)
		if err != nil {
			cancel() // unblocks the poster, waiting in acquire
		}
		reaped <- err
	}()
	var postErr error
	for i := range cfg.N {
		m, err := acquire(ctx)
		if err != nil {
			postErr = err
			break
		}
		seq := uint64(first + i)
		stamp(m.b, seq)
		if err := c.QP().PostSend(verbs.SendWR{ID: seq, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{m.sge}}); err != nil {
			m.release()
			postErr = fmt.Errorf("PostSend of message %d: %w", seq, err)
			break
		}
		inflight <- m
	}
	if postErr != nil {
		cancel()
	}
	err := <-reaped
	st.elapsed = time.Since(start)
	// After a failure, release what never completed (the connection is
	// going away), so that every MR is deregistered before its PD is freed.
	close(inflight)
	for m := range inflight {
		m.release()
	}
	if postErr != nil {
		return postErr
	}
	return err
}

// reap polls cq until n SENDs have completed, releasing each one's buffer.
func reap(ctx context.Context, cq *verbs.CQ, inflight <-chan message, n int) error {
	wcs := make([]verbs.WC, 16)
	for done := 0; done < n; {
		k, err := cq.Poll(wcs)
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if k == 0 {
			if err := cq.Wait(ctx); err != nil {
				return fmt.Errorf("waiting for SEND completions (%d of %d done): %w", done, n, err)
			}
			continue
		}
		for _, wc := range wcs[:k] {
			if wc.Status != verbs.WCSuccess {
				return fmt.Errorf("SEND %d completed with %s", wc.WRID, wc.Status)
			}
			var m message
			select { // posted just before; its FIFO entry may trail the completion
			case m = <-inflight:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := m.release(); err != nil {
				return fmt.Errorf("release the buffer of SEND %d: %w", wc.WRID, err)
			}
			done++
		}
	}
	return nil
}

// recvResult is what the receiver found.
type recvResult struct {
	n   int // messages received and verified
	err error
}

// postInitialRecvs posts a receive for each buffer of pool, or for the
// total expected if fewer.
func postInitialRecvs(ctx context.Context, qp *verbs.QP, pool *Pool, total int) error {
	for range min(recvBufs, total) {
		if err := postRecv(ctx, qp, pool); err != nil {
			return err
		}
	}
	return nil
}

// postRecv posts a receive into a buffer of pool, whose index is the work
// request ID, so that the completion names the buffer.
func postRecv(ctx context.Context, qp *verbs.QP, pool *Pool) error {
	b, err := pool.Get(ctx)
	if err != nil {
		return err
	}
	if err := qp.PostRecv(verbs.RecvWR{ID: b.Index(), SGL: []verbs.SGE{b.SGE(pool.Size())}}); err != nil {
		pool.Put(b)
		return fmt.Errorf("PostRecv: %w", err)
	}
	return nil
}

// receive takes total messages on c, checks that they arrive in order
// with the right bytes, and reposts each buffer (back to the pool, and a
// buffer out of it) while more messages are due.
func receive(ctx context.Context, c *rdmacm.Conn, pool *Pool, total int) recvResult {
	var (
		wcs    = make([]verbs.WC, 16)
		want   = make([]byte, pool.Size())
		n      int
		posted = min(recvBufs, total)
	)
	for n < total {
		k, err := c.RecvCQ().Poll(wcs)
		if err != nil {
			return recvResult{n, fmt.Errorf("poll: %w", err)}
		}
		if k == 0 {
			if err := c.RecvCQ().Wait(ctx); err != nil {
				return recvResult{n, fmt.Errorf("waiting for message %d: %w", n, err)}
			}
			continue
		}
		for _, wc := range wcs[:k] {
			if wc.Status != verbs.WCSuccess {
				return recvResult{n, fmt.Errorf("receive completed with %s", wc.Status)}
			}
			b, err := pool.Buf(wc.WRID)
			if err != nil {
				return recvResult{n, err}
			}
			got := b.Bytes()[:wc.ByteLen]
			stamp(want, uint64(n))
			if string(got) != string(want) {
				return recvResult{n, fmt.Errorf("message %d: got %d bytes starting %x, want %d bytes starting %x",
					n, len(got), got[:min(16, len(got))], len(want), want[:16])}
			}
			n++
			if err := pool.Put(b); err != nil {
				return recvResult{n, err}
			}
			if posted < total {
				if err := postRecv(ctx, c.QP(), pool); err != nil {
					return recvResult{n, err}
				}
				posted++
			}
		}
	}
	return recvResult{n, nil}
}

// stamp fills a message with its sequence number and a pattern derived
// from it, so that the receiver can check every byte.
func stamp(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq) ^ byte(i)
	}
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// us returns d in microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// closeWith calls close, as a deferred clean-up, and adds its error, if
// any, to *err: a leak or a failed teardown is reported, not hidden.
func closeWith(err *error, what string, close func() error) {
	if cerr := close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("%s: %w", what, cerr))
	}
}
