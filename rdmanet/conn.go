package rdmanet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// Wire protocol constants (see the package documentation).
const (
	helloLen     = 32
	helloMagic   = "RDNT"
	protoVersion = 1

	immBytesMask = 1<<24 - 1
	immMsgShift  = 24
	immMsgMask   = 1<<7 - 1
	immFIN       = 1 << 31

	dataWindow = 32 // DATA messages a peer may have unacknowledged
	maxWindow  = 64 // the largest window the 7-bit acknowledgement allows
	ctrlSlots  = 16 // receives beyond the window, for CTRL messages
	recvSlots  = dataWindow + ctrlSlots
	slotSize   = 64 // bytes of each receive's buffer: a HELLO fits

	sqDepth     = 2 * recvSlots // send work requests
	ctrlReserve = 4             // send queue entries DATA leaves to CTRL
	corkDepth   = 4             // DATA in flight before small writes wait to coalesce
	maxMsgCap   = 1 << 20       // the largest DATA message
	maxBatch    = 8             // work requests per PostSend

	// Work request IDs: DATA carries the stream position it ends at;
	// the others have the top bit set.
	ctrlWR   = 1 << 63
	wrHello  = ctrlWR | 1
	wrCredit = ctrlWR | 2
	wrFIN    = ctrlWR | 3
	wrPing   = ctrlWR | 4

	// rnrTimer is the RNR NAK timer of accepted connections (0.16 ms):
	// a dialer's HELLO may arrive before Accept has posted receives.
	rnrTimer = 8
)

var (
	errPeerClosed  = fmt.Errorf("rdmanet: connection closed by peer: %w", syscall.ECONNRESET)
	errWriteClosed = fmt.Errorf("rdmanet: write after CloseWrite: %w", syscall.EPIPE)
)

// Conn is an RDMA stream connection. It implements net.Conn; all its
// methods may be called concurrently.
type Conn struct {
	rc     *rdmacm.Conn
	qp     *verbs.QP
	rcq    *verbs.CQ
	scq    *verbs.CQ
	cc     *verbs.CompChannel
	cfg    *config
	active bool
	laddr  *Addr
	raddr  *Addr

	readMu  sync.Mutex // one Read at a time
	writeMu sync.Mutex // one Write at a time
	rdl     *deadline
	wdl     *deadline

	pctx     context.Context // the poller's; cancelled by Close
	pcancel  context.CancelFunc
	pollDone chan struct{}
	ka       *time.Timer

	// Fixed after set-up.
	rbuf  []byte // the receive ring, and its MR
	rmr   *verbs.MR
	cbuf  []byte // receive slot buffers, then the HELLO to send
	cmr   *verbs.MR
	rwrs  []verbs.RecvWR
	rsges []verbs.SGE

	repost []verbs.RecvWR // the poller's scratch

	// postMu orders work requests: they are built (under mu) and posted
	// under it, so the stream offsets and acknowledgements they carry
	// reach the wire in order.
	postMu sync.Mutex
	wrs    []verbs.SendWR
	sges   []verbs.SGE

	mu sync.Mutex
	// Receive side: stream positions of the peer's bytes.
	rxTail     uint64 // landed in the ring
	rxHead     uint64 // consumed by Read
	rxMsgs     uint64 // DATA messages processed
	annBytes   uint64 // rxHead last announced to the peer
	annMsgs    uint64 // rxMsgs last announced
	eof        bool   // FIN received
	readClosed bool
	reading    bool // Read is copying from [rxHead, rxTail) unlocked
	// The peer's ring, from its HELLO.
	helloRcvd bool
	peerAddr  uint64
	peerKey   uint32
	peerSize  uint64
	peerWin   uint64
	maxMsg    uint64
	// Send side: stream positions of our bytes.
	sbuf       []byte // staging ring, the size of the peer's ring
	smr        *verbs.MR
	staged     uint64 // copied in by Write
	posted     uint64 // posted as DATA
	completed  uint64 // DATA completions seen
	peerAck    uint64 // consumed by the peer's Read
	dataSent   uint64 // DATA messages posted
	peerMsgAck uint64 // DATA messages the peer has processed
	sqOut      int    // send work requests outstanding
	inflight   int    // DATA work requests outstanding
	// Control state.
	helloWanted, helloSent bool
	writeClosed            bool
	finSent, finDone       bool
	pingWanted, pingOut    bool
	closed                 bool
	qpErr                  bool // a completion failed: receives are not reposted
	qpGone                 bool // the QP is being destroyed
	err                    error
	// Broadcast channels: closed and replaced when state changes, if
	// someone waits on them.
	rdWake, wrWake       chan struct{}
	rdWaiting, wrWaiting bool
	// Keepalive.
	rxCount, txCount uint64
	lastRx, lastTx   uint64
	idle             time.Duration

	stats stats
}

// stats counts what went on the wire (for tests).
type stats struct {
	dataMsgs, ctrlMsgs, writes uint64
}

// newConn wraps a connected rdmacm.Conn: it registers the ring, posts the
// receives and starts the poller; the active side sends its HELLO.
func newConn(rc *rdmacm.Conn, cfg *config, active bool) (*Conn, error) {
	c := &Conn{rc: rc, qp: rc.QP(), rcq: rc.RecvCQ(), scq: rc.SendCQ(), cc: rc.ID().CompChannel(), cfg: cfg,
		active: active, laddr: &Addr{rc.LocalAddr()}, raddr: &Addr{rc.RemoteAddr()},
		rdl: newDeadline(), wdl: newDeadline(), pollDone: make(chan struct{}),
		rdWake: make(chan struct{}), wrWake: make(chan struct{})}
	if c.cc == nil {
		return nil, errors.New("rdmanet: the connection's CQs have no completion channel")
	}
	pd := rc.PD()
	var err error
	c.rbuf = make([]byte, cfg.ring)
	if c.rmr, err = pd.RegMR(c.rbuf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return nil, fmt.Errorf("rdmanet: register the receive ring: %w", err)
	}
	c.cbuf = make([]byte, (recvSlots+1)*slotSize)
	if c.cmr, err = pd.RegMR(c.cbuf, verbs.AccessLocalWrite); err != nil {
		c.rmr.Dereg()
		return nil, fmt.Errorf("rdmanet: register the receive buffers: %w", err)
	}
	h := c.cbuf[recvSlots*slotSize:]
	copy(h, helloMagic)
	binary.LittleEndian.PutUint16(h[4:], protoVersion)
	binary.LittleEndian.PutUint64(h[8:], c.rmr.Addr())
	binary.LittleEndian.PutUint32(h[16:], c.rmr.RKey())
	binary.LittleEndian.PutUint32(h[20:], uint32(len(c.rbuf)))
	binary.LittleEndian.PutUint32(h[24:], dataWindow)
	c.rsges = make([]verbs.SGE, recvSlots)
	c.rwrs = make([]verbs.RecvWR, recvSlots)
	for i := range c.rwrs {
		c.rsges[i] = c.cmr.SGE(i*slotSize, slotSize)
		c.rwrs[i] = verbs.RecvWR{ID: uint64(i), SGL: c.rsges[i : i+1]}
	}
	if err := c.qp.PostRecv(c.rwrs...); err != nil {
		c.cmr.Dereg()
		c.rmr.Dereg()
		return nil, fmt.Errorf("rdmanet: post receives: %w", err)
	}
	c.repost = make([]verbs.RecvWR, 0, recvSlots)
	c.wrs = make([]verbs.SendWR, 0, maxBatch)
	c.sges = make([]verbs.SGE, maxBatch)
	c.pctx, c.pcancel = context.WithCancel(context.Background())
	go c.pollLoop()
	if cfg.kaInterval > 0 {
		c.mu.Lock()
		c.ka = time.AfterFunc(cfg.kaInterval, c.keepalive)
		c.mu.Unlock()
	}
	if active {
		c.mu.Lock()
		c.helloWanted = true
		c.mu.Unlock()
		c.flush()
	}
	return c, nil
}

// waitHello waits for the peer's HELLO.
func (c *Conn) waitHello(ctx context.Context) error {
	for {
		c.mu.Lock()
		if c.helloRcvd {
			c.mu.Unlock()
			return nil
		}
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return err
		}
		ch := c.wrWake
		c.wrWaiting = true
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("rdmanet: waiting for the peer's HELLO: %w", ctx.Err())
		}
	}
}

// LocalAddr returns the local address (an *Addr).
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address (an *Addr).
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// RDMAConn returns the underlying connection manager connection, whose
// queue pair carries the stream. Posting work requests on it breaks the
// stream.
func (c *Conn) RDMAConn() *rdmacm.Conn { return c.rc }

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: Network, Source: c.laddr, Addr: c.raddr, Err: err}
}

// Read reads up to len(b) bytes of the stream. It blocks until at least
// one byte is available, the peer has ended the stream (io.EOF), the
// connection fails, the read deadline passes (an error wrapping
// os.ErrDeadlineExceeded, with Timeout() true) or Close is called
// (net.ErrClosed).
func (c *Conn) Read(b []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	for {
		dl := c.rdl.wait()
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, c.opErr("read", net.ErrClosed)
		}
		if isClosed(dl) {
			c.mu.Unlock()
			return 0, c.opErr("read", errTimeout)
		}
		if c.readClosed {
			c.mu.Unlock()
			return 0, io.EOF
		}
		if len(b) == 0 {
			c.mu.Unlock()
			return 0, nil
		}
		if avail := c.rxTail - c.rxHead; avail > 0 {
			size := uint64(len(c.rbuf))
			off := c.rxHead % size
			n1 := min(avail, size-off, uint64(len(b)))
			n2 := min(avail-n1, uint64(len(b))-n1) // from the ring's start, if it wraps
			c.reading = true
			c.mu.Unlock()
			// The peer does not write [rxHead, rxTail) until we
			// acknowledge it, so it is copied without the lock.
			copy(b, c.rbuf[off:off+n1])
			copy(b[n1:], c.rbuf[:n2])
			c.mu.Lock()
			c.reading = false
			c.rxHead += n1 + n2
			if c.readClosed {
				c.rxHead = c.rxTail
			}
			credit := c.creditDueLocked() && c.helloRcvd
			c.mu.Unlock()
			if credit {
				c.flush()
			}
			return int(n1 + n2), nil
		}
		if c.eof {
			c.mu.Unlock()
			return 0, io.EOF
		}
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return 0, c.opErr("read", err)
		}
		ch := c.rdWake
		c.rdWaiting = true
		c.mu.Unlock()
		select {
		case <-ch:
		case <-dl:
		}
	}
}

// Write writes b to the stream. It returns once the bytes are staged for
// sending (staged bytes always fit in the peer's ring, so they are
// delivered unless the connection fails); it blocks while the ring is
// full. Writes larger than the ring go out in pieces as the peer reads.
// On a deadline, CloseWrite, Close or failure it returns the bytes staged
// so far with the error.
func (c *Conn) Write(b []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	n := 0
	for {
		dl := c.wdl.wait()
		c.mu.Lock()
		if err := c.writeErrLocked(dl); err != nil {
			c.mu.Unlock()
			return n, err
		}
		if len(b) == 0 {
			c.mu.Unlock()
			return 0, nil
		}
		free := uint64(0)
		if c.helloRcvd {
			free = c.peerSize - (c.staged - min(c.peerAck, c.completed))
		}
		if free == 0 {
			ch := c.wrWake
			c.wrWaiting = true
			c.mu.Unlock()
			select {
			case <-ch:
			case <-dl:
			}
			continue
		}
		off := c.staged % c.peerSize
		k := min(free, c.peerSize-off, uint64(len(b)-n))
		c.mu.Unlock()
		// [staged, staged+k) is ours until it is committed below.
		copy(c.sbuf[off:off+k], b[n:])
		c.mu.Lock()
		if err := c.writeErrLocked(nil); err != nil {
			c.mu.Unlock()
			return n, err
		}
		c.staged += k
		n += int(k)
		post := c.dataReadyLocked()
		if n == len(b) {
			c.stats.writes++
		}
		c.mu.Unlock()
		if post {
			c.flush()
		}
		if n == len(b) {
			return n, nil
		}
	}
}

// writeErrLocked returns why Write cannot go on, if it cannot.
func (c *Conn) writeErrLocked(dl chan struct{}) error {
	switch {
	case c.closed:
		return c.opErr("write", net.ErrClosed)
	case dl != nil && isClosed(dl):
		return c.opErr("write", errTimeout)
	case c.writeClosed:
		return c.opErr("write", errWriteClosed)
	case c.err != nil:
		return c.opErr("write", c.err)
	}
	return nil
}

// CloseWrite ends the stream in the write direction: the bytes already
// written are delivered, then the peer's Read returns io.EOF. Reading
// goes on. Later Writes fail with an error wrapping syscall.EPIPE.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	if c.writeClosed {
		c.mu.Unlock()
		return nil
	}
	c.writeClosed = true
	c.wakeLocked(false, true)
	c.mu.Unlock()
	c.flush()
	return nil
}

// CloseRead ends the stream in the read direction: Read returns io.EOF
// from now on, and what the peer sends is acknowledged and dropped.
func (c *Conn) CloseRead() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	c.readClosed = true
	if !c.reading {
		c.rxHead = c.rxTail
	}
	credit := c.creditDueLocked() && c.helloRcvd
	c.wakeLocked(true, false)
	c.mu.Unlock()
	if credit {
		c.flush()
	}
	return nil
}

// Close closes the connection: pending and later Reads and Writes return
// net.ErrClosed. The bytes already written are delivered, then the end of
// the stream (the peer's Read returns io.EOF), waiting up to the linger
// time for the peer to acknowledge them; then the connection is
// disconnected and its resources freed.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	c.closed = true
	c.writeClosed = true
	// Graceful even before the peer's HELLO (an acceptor closing at
	// once): the FIN follows the HELLO answer.
	graceful := c.err == nil
	c.wakeLocked(true, true)
	c.mu.Unlock()
	if graceful {
		c.flush()
		t := time.NewTimer(c.cfg.linger)
	wait:
		for {
			c.mu.Lock()
			done := c.finDone || c.err != nil
			ch := c.wrWake
			c.wrWaiting = true
			c.mu.Unlock()
			if done {
				break
			}
			select {
			case <-ch:
			case <-t.C:
				break wait
			}
		}
		t.Stop()
	}
	c.shutdown()
	return nil
}

// abort closes without delivering what is staged.
func (c *Conn) abort() {
	c.mu.Lock()
	c.closed = true
	c.wakeLocked(true, true)
	c.mu.Unlock()
	c.shutdown()
}

// shutdown disconnects and frees everything.
func (c *Conn) shutdown() {
	c.mu.Lock()
	if c.ka != nil {
		c.ka.Stop()
	}
	c.mu.Unlock()
	c.rdl.stop()
	c.wdl.stop()
	// The QP goes to ERR (nothing lands in the rings any more) and the
	// DREQ, or the DREP to the peer's DREQ, goes out.
	_ = c.rc.ID().Disconnect()
	c.pcancel()
	<-c.pollDone
	c.postMu.Lock()
	c.mu.Lock()
	c.qpGone = true
	smr := c.smr
	c.mu.Unlock()
	c.postMu.Unlock()
	if smr != nil {
		smr.Dereg()
	}
	c.cmr.Dereg()
	c.rmr.Dereg()
	c.rc.Close() // waits for the DREP, frees QP, CQs, PD and id
}

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.checkOpen("set deadline"); err != nil {
		return err
	}
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the deadline for pending and future Reads; the
// zero time means none.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if err := c.checkOpen("set read deadline"); err != nil {
		return err
	}
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the deadline for pending and future Writes; the
// zero time means none. A Write that times out may have staged part of
// its bytes, which it reports.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if err := c.checkOpen("set write deadline"); err != nil {
		return err
	}
	c.wdl.set(t)
	return nil
}

func (c *Conn) checkOpen(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr(op, net.ErrClosed)
	}
	return nil
}

// errTimeout is what Read and Write return past their deadline (inside
// a *net.OpError, as the net package does).
var errTimeout error = os.ErrDeadlineExceeded

// wakeLocked wakes the readers and/or writers waiting.
func (c *Conn) wakeLocked(rd, wr bool) {
	if rd && c.rdWaiting {
		close(c.rdWake)
		c.rdWake, c.rdWaiting = make(chan struct{}), false
	}
	if wr && c.wrWaiting {
		close(c.wrWake)
		c.wrWake, c.wrWaiting = make(chan struct{}), false
	}
}

// failLocked records the connection's first error and wakes everyone.
func (c *Conn) failLocked(err error) {
	if c.err == nil {
		c.err = err
	}
	c.wakeLocked(true, true)
}

// creditDueLocked reports whether enough ring space or window is
// unannounced to be worth a CTRL message of its own.
func (c *Conn) creditDueLocked() bool {
	return c.rxHead-c.annBytes >= uint64(len(c.rbuf))/2 || c.rxMsgs-c.annMsgs >= dataWindow/2
}

// dataReadyLocked reports whether staged bytes can be posted now.
func (c *Conn) dataReadyLocked() bool {
	return c.helloRcvd && c.posted < c.staged && c.sqOut < sqDepth-ctrlReserve &&
		c.dataSent-c.peerMsgAck < c.peerWin &&
		(c.inflight < corkDepth || c.staged-c.posted >= c.maxMsg || c.writeClosed)
}

// flushWantedLocked reports whether flush would post something.
func (c *Conn) flushWantedLocked() bool {
	if c.helloWanted && !c.helloSent {
		return true
	}
	return c.helloRcvd && (c.dataReadyLocked() || (c.writeClosed && !c.finSent) || c.creditDueLocked() ||
		(c.pingWanted && !c.pingOut))
}

// immLocked returns the acknowledgements to send, now announced.
func (c *Conn) immLocked() uint32 {
	c.annBytes, c.annMsgs = c.rxHead, c.rxMsgs
	return uint32(c.rxHead&immBytesMask) | uint32(c.rxMsgs&immMsgMask)<<immMsgShift
}

// flush posts what the state calls for: HELLO, DATA for the staged
// bytes, FIN, a credit update or a keepalive.
func (c *Conn) flush() {
	c.postMu.Lock()
	defer c.postMu.Unlock()
	for range 1 << 10 { // each round posts up to maxBatch; bounded for safety
		c.mu.Lock()
		wrs, more := c.buildLocked()
		c.mu.Unlock()
		if len(wrs) == 0 {
			return
		}
		if err := c.qp.PostSend(wrs...); err != nil {
			c.mu.Lock()
			c.failLocked(fmt.Errorf("rdmanet: post send: %w", err))
			c.mu.Unlock()
			return
		}
		if !more {
			return
		}
	}
}

// buildLocked builds the next work requests into c.wrs and advances the
// state as if they were posted; more is set if it stopped at maxBatch.
// Callers hold postMu.
func (c *Conn) buildLocked() (wrs []verbs.SendWR, more bool) {
	wrs = c.wrs[:0]
	if c.qpGone || c.qpErr || c.err != nil {
		return nil, false
	}
	room := sqDepth - c.sqOut
	if c.helloWanted && !c.helloSent && room > 0 {
		c.sges[len(wrs)] = c.cmr.SGE(recvSlots*slotSize, helloLen)
		wrs = append(wrs, verbs.SendWR{ID: wrHello, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: c.sges[len(wrs) : len(wrs)+1]})
		c.helloSent = true
		room--
	}
	if c.helloRcvd {
		for c.dataReadyLocked() && room > ctrlReserve && len(wrs) < maxBatch-1 {
			off := c.posted % c.peerSize
			n := min(c.staged-c.posted, c.peerSize-off, c.maxMsg)
			c.sges[len(wrs)] = c.smr.SGE(int(off), int(n))
			wrs = append(wrs, verbs.SendWR{ID: c.posted + n, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled,
				SGL: c.sges[len(wrs) : len(wrs)+1], RemoteAddr: c.peerAddr + off, RKey: c.peerKey, ImmData: c.immLocked()})
			c.posted += n
			c.dataSent++
			c.inflight++
			c.stats.dataMsgs++
			room--
		}
		more = len(wrs) >= maxBatch-1 && c.dataReadyLocked()
		if c.writeClosed && !c.finSent && c.posted == c.staged && room > 0 {
			wrs = append(wrs, verbs.SendWR{ID: wrFIN, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled,
				ImmData: c.immLocked() | immFIN})
			c.finSent = true
			c.stats.ctrlMsgs++
			room--
		}
		if len(wrs) > 0 {
			c.pingWanted = false // anything sent does a keepalive's job
		} else if room > 0 && (c.creditDueLocked() || (c.pingWanted && !c.pingOut)) {
			id := uint64(wrCredit)
			if c.pingWanted {
				id, c.pingOut, c.pingWanted = wrPing, true, false
			}
			wrs = append(wrs, verbs.SendWR{ID: id, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled,
				ImmData: c.immLocked()})
			c.stats.ctrlMsgs++
		}
	}
	c.sqOut += len(wrs)
	c.txCount += uint64(len(wrs))
	return wrs, more
}

// pollLoop processes the completions of both CQs until Close.
// beforeArm, when set (by a test), runs between a poller's last empty
// poll and its arming of the CQs: the window in which a completion raises
// no event.
var beforeArm atomic.Pointer[func()]

func (c *Conn) pollLoop() {
	defer close(c.pollDone)
	wcs := make([]verbs.WC, 32)
	for armed := false; ; {
		nr, err := c.rcq.Poll(wcs)
		if err != nil {
			return
		}
		if nr > 0 {
			c.onRecv(wcs[:nr])
		}
		ns, err := c.scq.Poll(wcs)
		if err != nil {
			return
		}
		if ns > 0 {
			c.onSend(wcs[:ns])
		}
		if nr+ns > 0 {
			c.mu.Lock()
			post := c.flushWantedLocked()
			c.mu.Unlock()
			if post {
				c.flush()
			}
			continue
		}
		if c.pctx.Err() != nil {
			return
		}
		// Arm both CQs, then poll both once more: a completion that
		// came after the Polls above but before arming raises no event.
		if !armed {
			if h := beforeArm.Load(); h != nil {
				(*h)()
			}
			if c.rcq.ReqNotify(false) != nil || c.scq.ReqNotify(false) != nil {
				return
			}
			armed = true
			continue
		}
		cq, err := c.cc.GetEvent(c.pctx)
		if err != nil {
			return
		}
		cq.AckEvents(1)
		armed = false
	}
}

// onRecv handles receive completions and reposts the receives.
func (c *Conn) onRecv(wcs []verbs.WC) {
	c.repost = c.repost[:0]
	c.mu.Lock()
	tail, eof, ack, msgAck, hello := c.rxTail, c.eof, c.peerAck, c.peerMsgAck, c.helloRcvd
	for i := range wcs {
		wc := &wcs[i]
		c.rxCount++
		if wc.Status != verbs.WCSuccess {
			c.qpErr = true
			c.failLocked(c.completionErr("receive", wc))
			continue
		}
		if wc.WRID >= recvSlots {
			c.qpErr = true
			c.failLocked(fmt.Errorf("rdmanet: receive completion for unknown work request %d", wc.WRID))
			continue
		}
		if err := c.handleLocked(wc); err != nil {
			c.qpErr = true
			c.failLocked(err)
			continue
		}
		if !c.qpErr {
			c.repost = append(c.repost, c.rwrs[wc.WRID])
		}
	}
	if c.qpErr {
		c.repost = c.repost[:0]
	}
	c.wakeLocked(c.rxTail != tail || c.eof != eof, c.peerAck != ack || c.peerMsgAck != msgAck || c.helloRcvd != hello)
	c.mu.Unlock()
	if len(c.repost) > 0 {
		if err := c.qp.PostRecv(c.repost...); err != nil {
			c.mu.Lock()
			c.qpErr = true
			c.failLocked(fmt.Errorf("rdmanet: repost receives: %w", err))
			c.mu.Unlock()
		}
	}
}

// handleLocked handles one successful receive.
func (c *Conn) handleLocked(wc *verbs.WC) error {
	switch {
	case wc.Opcode == verbs.WCRecvRDMAWithImm: // DATA
		if !c.helloRcvd {
			return errors.New("rdmanet: protocol error: DATA before HELLO")
		}
		size := uint64(len(c.rbuf))
		n, off := uint64(wc.ByteLen), c.rxTail%size
		if off+n > size || c.rxTail+n-c.rxHead > size {
			return fmt.Errorf("rdmanet: protocol error: DATA of %d bytes at ring offset %d overruns the ring", n, off)
		}
		if err := c.ackLocked(wc.ImmData); err != nil {
			return err
		}
		c.rxTail += n
		c.rxMsgs++
		if c.readClosed && !c.reading {
			c.rxHead = c.rxTail
		}
	case wc.Opcode == verbs.WCRecv && wc.Flags&verbs.WCFlagWithImm != 0: // CTRL
		if !c.helloRcvd {
			return errors.New("rdmanet: protocol error: CTRL before HELLO")
		}
		if err := c.ackLocked(wc.ImmData); err != nil {
			return err
		}
		if wc.ImmData&immFIN != 0 {
			c.eof = true
		}
	case wc.Opcode == verbs.WCRecv && !c.helloRcvd: // HELLO
		off := int(wc.WRID) * slotSize
		return c.helloLocked(c.cbuf[off : off+int(min(wc.ByteLen, slotSize))])
	default:
		return fmt.Errorf("rdmanet: protocol error: unexpected %v of %d bytes", wc.Opcode, wc.ByteLen)
	}
	return nil
}

// helloLocked takes in the peer's HELLO.
func (c *Conn) helloLocked(b []byte) error {
	if len(b) != helloLen || string(b[:4]) != helloMagic {
		return errors.New("rdmanet: protocol error: the peer's first message is not a HELLO (is it an rdmanet peer?)")
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != protoVersion {
		return fmt.Errorf("rdmanet: protocol version %d, want %d", v, protoVersion)
	}
	addr, key := binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint32(b[16:])
	size, win := binary.LittleEndian.Uint32(b[20:]), binary.LittleEndian.Uint32(b[24:])
	if size < MinRingSize || size > MaxRingSize || win == 0 || win > maxWindow {
		return fmt.Errorf("rdmanet: protocol error: HELLO with ring size %d, window %d", size, win)
	}
	sbuf := make([]byte, size)
	smr, err := c.rc.PD().RegMR(sbuf, 0)
	if err != nil {
		return fmt.Errorf("rdmanet: register the staging ring: %w", err)
	}
	c.sbuf, c.smr = sbuf, smr
	c.peerAddr, c.peerKey, c.peerSize, c.peerWin = addr, key, uint64(size), uint64(win)
	c.maxMsg = min(c.peerSize/4, maxMsgCap)
	c.helloRcvd = true
	if !c.active {
		c.helloWanted = true // answer
	}
	return nil
}

// ackLocked takes in the acknowledgements of an immediate.
func (c *Conn) ackLocked(imm uint32) error {
	db := (uint64(imm)&immBytesMask - c.peerAck) & immBytesMask
	dm := (uint64(imm>>immMsgShift)&immMsgMask - c.peerMsgAck) & immMsgMask
	if db > c.posted-c.peerAck || dm > c.dataSent-c.peerMsgAck {
		return fmt.Errorf("rdmanet: protocol error: acknowledgement 0x%08x beyond what was sent", imm)
	}
	c.peerAck += db
	c.peerMsgAck += dm
	return nil
}

// onSend handles send completions.
func (c *Conn) onSend(wcs []verbs.WC) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range wcs {
		wc := &wcs[i]
		c.sqOut--
		if wc.WRID&ctrlWR == 0 {
			c.inflight--
		}
		if wc.Status != verbs.WCSuccess {
			c.qpErr = true
			c.failLocked(c.completionErr("send", wc))
			continue
		}
		switch wc.WRID {
		case wrFIN:
			c.finDone = true
		case wrPing:
			c.pingOut = false
		case wrHello, wrCredit:
		default:
			c.completed = wc.WRID
		}
	}
	c.wakeLocked(false, true)
}

// completionErr describes a failed completion.
func (c *Conn) completionErr(what string, wc *verbs.WC) error {
	if wc.Status == verbs.WCWRFlushErr {
		if c.eof {
			return fmt.Errorf("rdmanet: connection closed by peer: %w", syscall.EPIPE)
		}
		return errPeerClosed
	}
	return fmt.Errorf("rdmanet: %s completion: %v: %w", what, wc.Status, syscall.ECONNRESET)
}

// keepalive runs every interval: it fails a connection that has heard
// nothing from its peer for the timeout, and sends a CTRL when nothing
// was sent during the last interval.
func (c *Conn) keepalive() {
	c.mu.Lock()
	if c.closed || c.err != nil {
		c.mu.Unlock()
		return
	}
	if c.rxCount == c.lastRx {
		c.idle += c.cfg.kaInterval
	} else {
		c.idle, c.lastRx = 0, c.rxCount
	}
	if c.idle >= c.cfg.kaTimeout {
		c.failLocked(fmt.Errorf("rdmanet: nothing from the peer for %v: %w", c.idle, syscall.ETIMEDOUT))
		c.mu.Unlock()
		return
	}
	ping := c.helloRcvd && c.txCount == c.lastTx && !c.pingOut
	c.lastTx = c.txCount
	if ping {
		c.pingWanted = true
	}
	c.mu.Unlock()
	if ping {
		c.flush()
	}
	c.mu.Lock()
	if !c.closed {
		c.ka.Reset(c.cfg.kaInterval)
	}
	c.mu.Unlock()
}
