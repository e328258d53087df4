package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/rdma-go/rdma-go/internal/spin"
	"github.com/rdma-go/rdma-go/verbs"
)

// RCWrite streams RDMA WRITEs of size bytes from X to Y, all signaled,
// with up to window outstanding. The pair's memory must hold window×size.
func RCWrite(ctx context.Context, p *Pair, size, window int, b Budget) (Result, error) {
	return WriteStream(ctx, p.X, size, window, b)
}

// WriteStream streams RDMA WRITEs of size bytes from x into its peer's
// memory, all signaled, with up to window outstanding: the peer's CPU
// takes no part. x's memory and its peer's must hold window×size.
func WriteStream(ctx context.Context, x *End, size, window int, b Budget) (Result, error) {
	return stream(ctx, x, verbs.WRRDMAWrite, size, window, b, nil)
}

// RCRead streams RDMA READs of size bytes from Y's memory into X's, with
// up to window outstanding (the pair's RDAtomic bounds them too).
func RCRead(ctx context.Context, p *Pair, size, window int, b Budget) (Result, error) {
	return ReadStream(ctx, p.X, size, window, b)
}

// ReadStream streams RDMA READs of size bytes from x's peer's memory into
// x's, all signaled, with up to window outstanding.
func ReadStream(ctx context.Context, x *End, size, window int, b Budget) (Result, error) {
	return stream(ctx, x, verbs.WRRDMARead, size, window, b, nil)
}

// RCSend streams SENDs of size bytes from X to Y, with up to window
// outstanding; Y's receives (window×4 of them, posted once per pair) are
// re-posted as they complete, between X's polls.
func RCSend(ctx context.Context, p *Pair, size, window int, b Budget) (Result, error) {
	if p.sink == nil {
		s, err := NewSendSink(p.Y, size, window, 4*window)
		if err != nil {
			return Result{}, err
		}
		p.sink = s
	}
	return stream(ctx, p.X, verbs.WRSend, size, window, b, func() error {
		_, err := p.sink.Drain()
		return err
	})
}

// SendStream streams SENDs of size bytes from x to its peer, with up to
// window outstanding; the peer runs a SendSink.
func SendStream(ctx context.Context, x *End, size, window int, b Budget) (Result, error) {
	return stream(ctx, x, verbs.WRSend, size, window, b, nil)
}

// stream posts op work requests of size bytes, each from its own slot of
// x's memory (and, for WRITE and READ, to the same slot of the peer's) or,
// when x's memory holds fewer than window slots, cycling through those it
// has (as perftest's cycle buffer); all signaled, up to window outstanding.
// It polls without pause, as perftest's bandwidth tools do. between, if
// set, runs after every poll: in one process it serves the receiving end.
func stream(ctx context.Context, x *End, op verbs.WROpcode, size, window int, b Budget, between func() error) (Result, error) {
	slots := min(window, x.MR.Len()/max(size, 1))
	if slots < 1 {
		return Result{}, fmt.Errorf("%d bytes do not fit in %d", size, x.MR.Len())
	}
	wrs := make([]verbs.SendWR, window)
	for i := range wrs {
		off := (i % slots) * size
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{x.MR.SGE(off, size)}}
		if op != verbs.WRSend {
			wrs[i].RemoteAddr, wrs[i].RKey = x.Peer.Addr+uint64(off), x.Peer.RKey
		}
	}
	poll := func() (int, error) {
		wc, err := x.PollSpin(ctx)
		if err != nil {
			return 0, err
		}
		if between != nil {
			if err := between(); err != nil {
				return 0, err
			}
		}
		return len(wc), nil
	}
	start := time.Now()
	ops, out := 0, 0
	for !b.done(ops, start) {
		for out >= window {
			n, err := poll()
			if err != nil {
				return Result{}, err
			}
			out -= n
		}
		if err := x.QP.PostSend(wrs[ops%window]); err != nil {
			return Result{}, err
		}
		out++
		ops++
	}
	for out > 0 {
		n, err := poll()
		if err != nil {
			return Result{}, err
		}
		out -= n
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(size), Elapsed: time.Since(start)}, nil
}

// SendSink keeps receives posted on an end that a SendStream sends to.
type SendSink struct {
	e   *End
	wrs []verbs.RecvWR
	n   int // receives completed
}

// NewSendSink posts depth receives of size bytes on e's QP, over slots
// slots of its memory (the data is not looked at, so receives may share
// a slot).
func NewSendSink(e *End, size, slots, depth int) (*SendSink, error) {
	if slots*size > e.MR.Len() {
		return nil, fmt.Errorf("%d×%d bytes do not fit in %d", slots, size, e.MR.Len())
	}
	s := &SendSink{e: e, wrs: make([]verbs.RecvWR, depth)}
	for i := range s.wrs {
		s.wrs[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{e.MR.SGE(i%slots*size, size)}}
		if err := e.QP.PostRecv(s.wrs[i]); err != nil {
			return nil, fmt.Errorf("post receive %d: %w", i, err)
		}
	}
	return s, nil
}

// Drain re-posts the receive of every receive completion the CQ holds,
// without waiting, and returns how many there were.
func (s *SendSink) Drain() (int, error) {
	got := 0
	for {
		n, err := s.e.CQ.Poll(s.e.wc[:])
		if err != nil {
			return got, err
		}
		if err := s.repost(s.e.wc[:n]); err != nil {
			return got, err
		}
		got += n
		if n < len(s.e.wc) {
			return got, nil
		}
	}
}

// repost posts again the receive of each of wc, receive completions.
func (s *SendSink) repost(wc []verbs.WC) error {
	for _, w := range wc {
		if w.Status != verbs.WCSuccess {
			return fmt.Errorf("receive %d: %s", w.WRID, w.Status)
		}
		if w.WRID >= uint64(len(s.wrs)) {
			return fmt.Errorf("completion of unknown receive %d", w.WRID)
		}
		if err := s.e.QP.PostRecv(s.wrs[w.WRID]); err != nil {
			return fmt.Errorf("post receive: %w", err)
		}
		s.n++
	}
	return nil
}

// Run waits for receive completions and re-posts their receives until ctx
// is done; it returns how many messages arrived, and ctx's cause once ctx
// is done.
func (s *SendSink) Run(ctx context.Context) (int, error) {
	for {
		wc, err := s.e.Poll(ctx)
		if err != nil {
			return s.n, err
		}
		if err := s.repost(wc); err != nil {
			return s.n, err
		}
	}
}

// RCSendPingPong bounces a size-byte SEND between X and Y; one op is a
// round trip. Sends are unsignaled; the ACKs retire them.
func RCSendPingPong(ctx context.Context, p *Pair, size int, b Budget) (Result, error) {
	type side struct {
		e    *End
		send verbs.SendWR
		recv verbs.RecvWR
	}
	mk := func(e *End) (*side, error) {
		s := &side{e: e, send: verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{e.MR.SGE(0, size)}},
			recv: verbs.RecvWR{ID: 1, SGL: []verbs.SGE{e.MR.SGE(size, size)}}}
		return s, e.QP.PostRecv(s.recv)
	}
	sx, err := mk(p.X)
	if err != nil {
		return Result{}, err
	}
	sy, err := mk(p.Y)
	if err != nil {
		return Result{}, err
	}
	hop := func(from, to *side) error {
		if err := from.e.QP.PostSend(from.send); err != nil {
			return err
		}
		if err := waitRecv(ctx, to.e); err != nil {
			return err
		}
		return to.e.QP.PostRecv(to.recv)
	}
	start := time.Now()
	rtt := newRTTLog(b, start)
	ops := 0
	for !b.done(ops, start) {
		if err := hop(sx, sy); err != nil {
			return Result{}, err
		}
		if err := hop(sy, sx); err != nil {
			return Result{}, err
		}
		rtt.lap()
		ops++
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(2*size), Elapsed: time.Since(start), RTTs: rtt.d}, nil
}

// waitRecv polls e's CQ until a receive completes (without pause: it
// waits for a latency loop's answer).
func waitRecv(ctx context.Context, e *End) error {
	for got := false; !got; {
		wc, err := e.PollSpin(ctx)
		if err != nil {
			return err
		}
		for _, w := range wc {
			got = got || w.Opcode.IsRecv()
		}
	}
	return nil
}

// SendPing is the measuring half of RCSendPingPong between two processes:
// it sends size bytes to x's peer (a SendPong) and waits for the answer;
// one op is a round trip. Sends are unsignaled; the ACKs retire them.
func SendPing(ctx context.Context, x *End, size int, b Budget) (Result, error) {
	send := verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{x.MR.SGE(0, size)}}
	recv := verbs.RecvWR{ID: 1, SGL: []verbs.SGE{x.MR.SGE(size, size)}}
	if err := x.QP.PostRecv(recv); err != nil {
		return Result{}, err
	}
	start := time.Now()
	rtt := newRTTLog(b, start)
	ops := 0
	for !b.done(ops, start) {
		if err := x.QP.PostSend(send); err != nil {
			return Result{}, err
		}
		if err := waitRecv(ctx, x); err != nil {
			return Result{}, err
		}
		rtt.lap()
		if err := x.QP.PostRecv(recv); err != nil {
			return Result{}, err
		}
		ops++
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(2*size), Elapsed: time.Since(start), RTTs: rtt.d}, nil
}

// SendPong answers each size-byte SEND that arrives on y with one of its
// own, for a SendPing in the peer process.
type SendPong struct {
	y        *End
	send     verbs.SendWR
	recv     verbs.RecvWR
	Answered int
}

// NewSendPong posts the first receive, before the peer may send.
func NewSendPong(y *End, size int) (*SendPong, error) {
	s := &SendPong{y: y, send: verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{y.MR.SGE(0, size)}},
		recv: verbs.RecvWR{ID: 1, SGL: []verbs.SGE{y.MR.SGE(size, size)}}}
	return s, y.QP.PostRecv(s.recv)
}

// Run answers until ctx is done; it returns ctx's cause then. The receive
// is posted again before the answer goes, so that the next ping finds it.
func (s *SendPong) Run(ctx context.Context) error {
	for {
		if err := waitRecv(ctx, s.y); err != nil {
			return err
		}
		if err := s.y.QP.PostRecv(s.recv); err != nil {
			return err
		}
		if err := s.y.QP.PostSend(s.send); err != nil {
			return err
		}
		s.Answered++
	}
}

// A WRITE ping-pong, as ib_write_lat does it: each end writes size bytes
// from the start of its memory (its outbox) into the peer's inbox, right
// after the peer's outbox, and the last byte of each message carries the
// sender's count; each end polls the last byte of its own inbox. Every
// WRITE is signaled, and an end reaps its completion before it touches
// its outbox again.

// RCWriteLat bounces a size-byte RDMA WRITE between X and Y, each side
// polling its memory for the other's; one op is a round trip.
func RCWriteLat(ctx context.Context, p *Pair, size int, b Budget) (Result, error) {
	x, y := p.X, p.Y
	xs, ys := writeSide(x, size), writeSide(y, size)
	start := time.Now()
	rtt := newRTTLog(b, start)
	ops := 0
	for !b.done(ops, start) {
		if err := xs.post(ctx); err != nil {
			return Result{}, err
		}
		if err := ys.wait(ctx); err != nil {
			return Result{}, err
		}
		if err := ys.post(ctx); err != nil {
			return Result{}, err
		}
		if err := xs.wait(ctx); err != nil {
			return Result{}, err
		}
		rtt.lap()
		ops++
	}
	elapsed := time.Since(start)
	if err := xs.reap(ctx); err != nil {
		return Result{}, err
	}
	if err := ys.reap(ctx); err != nil {
		return Result{}, err
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(2*size), Elapsed: elapsed, RTTs: rtt.d}, nil
}

// WritePing is the measuring half of RCWriteLat between two processes:
// it writes to x's peer (a WritePong) and polls its memory for the
// answer; one op is a round trip.
func WritePing(ctx context.Context, x *End, size int, b Budget) (Result, error) {
	xs := writeSide(x, size)
	start := time.Now()
	rtt := newRTTLog(b, start)
	ops := 0
	for !b.done(ops, start) {
		if err := xs.post(ctx); err != nil {
			return Result{}, err
		}
		if err := xs.wait(ctx); err != nil {
			return Result{}, err
		}
		rtt.lap()
		ops++
	}
	elapsed := time.Since(start)
	if err := xs.reap(ctx); err != nil {
		return Result{}, err
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(2*size), Elapsed: elapsed, RTTs: rtt.d}, nil
}

// WritePong answers every WRITE that lands in y's inbox with one of its
// own, until ctx is done; it returns how many it answered, and ctx's
// cause then.
func WritePong(ctx context.Context, y *End, size int) (int, error) {
	ys := writeSide(y, size)
	for n := 0; ; n++ {
		if err := ys.wait(ctx); err != nil {
			return n, err
		}
		if err := ys.post(ctx); err != nil {
			return n, err
		}
	}
}

// writer is one end of a WRITE ping-pong.
type writer struct {
	e       *End
	wr      verbs.SendWR
	buf     []byte
	last    int  // offset of the outbox's last byte
	inLast  int  // offset of the inbox's last byte
	pending bool // a WRITE whose completion is not reaped yet
}

// writeSide readies e for a WRITE ping-pong of size-byte messages.
func writeSide(e *End, size int) *writer {
	return &writer{e: e, buf: e.MR.Bytes(), last: size - 1, inLast: 2*size - 1,
		wr: verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{e.MR.SGE(0, size)},
			RemoteAddr: e.Peer.Addr + uint64(size), RKey: e.Peer.RKey}}
}

// post writes the next count into the outbox and sends it, once the
// previous WRITE has completed (the device may read the outbox until then).
func (w *writer) post(ctx context.Context) error {
	if err := w.reap(ctx); err != nil {
		return err
	}
	w.e.seq++
	w.buf[w.last] = byte(w.e.seq)
	if err := w.e.QP.PostSend(w.wr); err != nil {
		return err
	}
	w.pending = true
	return nil
}

// wait polls the inbox for the peer's next count, and the CQ between
// reads, as ib_write_lat does: that reaps the last WRITE's completion, and
// on a soft device a poll of the CQ receives what the device's socket
// holds on this goroutine (the device's receive goroutine leaves the
// socket to a goroutine that polls), the peer's WRITE among it.
func (w *writer) wait(ctx context.Context) error {
	w.e.got++
	return waitByte(ctx, spin.For(w.e.Ctx), w.buf, w.inLast, byte(w.e.got), func() error {
		n, err := w.e.CQ.Poll(w.e.wc[:])
		if err != nil {
			return err
		}
		for _, c := range w.e.wc[:n] {
			if c.Status != verbs.WCSuccess {
				return fmt.Errorf("RDMA WRITE: %s", c.Status)
			}
			w.pending = false
		}
		return nil
	})
}

// reap waits for the completion of the last WRITE, if it is pending.
func (w *writer) reap(ctx context.Context) error {
	if !w.pending {
		return nil
	}
	if _, err := w.e.Poll(ctx); err != nil {
		return err
	}
	w.pending = false
	return nil
}

// RCWritePostList posts size-byte RDMA WRITEs list at a time (one
// PostSend call, the last signaled), with up to lists lists outstanding,
// on each of X's QPs in turn. One op is one message.
func RCWritePostList(ctx context.Context, p *Pair, size, list, lists int, b Budget) (Result, error) {
	return WriteRate(ctx, p.X, size, list, lists, b)
}

// WriteRate posts size-byte RDMA WRITEs from x to its peer, list at a time
// (one PostSend call, the last signaled: one completion per list), with up
// to lists lists outstanding on each of x's QPs, which take turns. One op
// is one message.
func WriteRate(ctx context.Context, x *End, size, list, lists int, b Budget) (Result, error) {
	if size*list > x.MR.Len() {
		return Result{}, fmt.Errorf("%d×%d bytes do not fit in %d", list, size, x.MR.Len())
	}
	nq := len(x.QPs)
	wrs := make([][]verbs.SendWR, nq)
	for q := range wrs {
		wrs[q] = make([]verbs.SendWR, list)
		for i := range wrs[q] {
			wrs[q][i] = verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{x.MR.SGE(size*i, size)},
				RemoteAddr: x.Peer.Addr + uint64(size*i), RKey: x.Peer.RKey}
		}
		// The ID of the signaled request says whose list completed.
		wrs[q][list-1].ID, wrs[q][list-1].Flags = uint64(q), verbs.SendSignaled
	}
	out := make([]int, nq)
	total := 0
	poll := func() error {
		wc, err := x.PollSpin(ctx)
		if err != nil {
			return err
		}
		for _, w := range wc {
			if w.WRID >= uint64(nq) {
				return fmt.Errorf("completion of unknown work request %d", w.WRID)
			}
			out[w.WRID]--
		}
		total -= len(wc)
		return nil
	}
	start := time.Now()
	ops := 0
	for q := 0; !b.done(ops, start); q = (q + 1) % nq {
		for out[q] >= lists {
			if err := poll(); err != nil {
				return Result{}, err
			}
		}
		if err := x.QPs[q].PostSend(wrs[q]...); err != nil {
			return Result{}, err
		}
		out[q]++
		total++
		ops += list
	}
	for total > 0 {
		if err := poll(); err != nil {
			return Result{}, err
		}
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(size), Elapsed: time.Since(start)}, nil
}
