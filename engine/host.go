package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// Sender is the part of a link the engine sends through.
type Sender interface {
	Send(batch []link.Datagram) error
	SourcePort(want uint16) uint16
}

// HostConfig configures a Host.
type HostConfig struct {
	// Addr is the device's IP address: the source of everything it sends
	// and the only destination it accepts.
	Addr netip.Addr
	// Link sends datagrams.
	Link Sender
	// Mem holds the device's memory regions.
	Mem *MemTable
	// ICRC selects how IPv4 ICRCs of received packets are verified.
	ICRC wire.ICRCMode
	// TrustLoopback skips the ICRC check of packets from a loopback
	// address. Such a packet never left this host's memory (the kernel
	// drops loopback sources that arrive from a wire), so, as the kernel
	// trusts loopback for UDP checksums, there is nothing for the CRC to
	// catch; a local sender can forge a right ICRC as easily as a wrong
	// one. It saves one CRC pass over every byte received between
	// devices on one host.
	TrustLoopback bool
	// MaxBatch is the number of datagrams sent per Link.Send (default 32).
	MaxBatch int
	// Logger receives debug logs; nil means slog.Default().
	Logger *slog.Logger
	// Port is the UDP destination port of every packet sent (default
	// 4791, RoCEv2's; another one only makes sense between soft devices,
	// e.g. beside a kernel rdma_rxe that owns 4791).
	Port uint16
	// MTU is the port's active MTU in bytes, the largest UD message
	// (default 1024, at most 4096).
	MTU int
	// OnEvent receives asynchronous events. It is called with engine locks
	// held, so it must only queue the event.
	OnEvent func(Event)
	// ReadBurst is how many READ response packets a QP sends at a time
	// (default 256); the rest of a longer READ goes out from OnTimer, so
	// no READ holds the receive path for longer than one burst.
	ReadBurst int
}

// maxPacket is the largest datagram the engine builds: PMTU 4096 plus the
// largest header set, pad and ICRC.
const maxPacket = 4096 + 64

// Host is the transport engine of one soft device: its QPs, the receive path
// that checks and demultiplexes packets, and the send batching.
type Host struct {
	cfg   HostConfig
	mem   *MemTable
	log   *slog.Logger
	stats Stats

	mu      sync.Mutex // serialises changes to qps and the numbering
	qps     qpTable
	nextQPN uint32
	// qpnFirst and qpnLast bound the numbers CreateQP hands out.
	qpnFirst, qpnLast uint32

	txPool sync.Pool

	// doorbell lists the QPs whose posts PostSendDeferred left for
	// FlushPosts (dbMu guards it); dbFlush serialises FlushPosts, which
	// reuses the list it took as dbSpare.
	dbMu     sync.Mutex
	doorbell []*QP
	dbFlush  sync.Mutex
	dbSpare  []*QP

	// rxBusy is held while a received batch is processed and its answers
	// are sent (Receive, ReceivePolled, FlushAcks). The application may
	// poll a receive completion of the batch before its ACK is on the
	// wire — the ACK is still owed, or already taken into the batch's
	// answers (so is a later response that implies it) — and DestroyQP
	// waits for it to go out.
	rxBusy sync.Mutex
	// pending lists QPs that came to owe a coalesced ACK since the last
	// flush (a QP may be listed twice, or no longer owe it: its next send
	// took the ACK along); used only by the goroutine running Receive
	// (and by the QP methods it calls). acksOwed counts the QPs that owe
	// one now (each QP's rsp.ackPending, changed under its lock).
	pending  []*QP
	acksOwed atomic.Int64
	rxPkt    wire.Packet
	rxTx     *txBatch // Receive's own batch, so it never waits on txPool refills after a GC
}

// NewHost returns a Host with no QPs.
func NewHost(cfg HostConfig) *Host {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 32
	}
	if cfg.Port == 0 {
		cfg.Port = link.RoCEPort
	}
	if cfg.MTU <= 0 {
		cfg.MTU = 1024
	}
	if cfg.ReadBurst <= 0 {
		cfg.ReadBurst = 256
	}
	cfg.MTU = min(cfg.MTU, 4096) // the largest IB MTU, and what a packet buffer holds
	if cfg.Mem == nil {
		cfg.Mem = NewMemTable()
	}
	h := &Host{cfg: cfg, mem: cfg.Mem, log: cfg.Logger}
	h.SetQPNRange(0, 0)
	if h.log == nil {
		h.log = slog.Default()
	}
	h.cfg.Addr = cfg.Addr.Unmap()
	h.txPool.New = func() any { return newTxBatch(h, cfg.MaxBatch) }
	return h
}

// Addr returns the device address.
func (h *Host) Addr() netip.Addr { return h.cfg.Addr }

// Mem returns the device's memory table.
func (h *Host) Mem() *MemTable { return h.mem }

// ErrTooManyQPs is returned when no QP number is free.
var ErrTooManyQPs = errors.New("engine: no free QP number")

// CreateQP creates a QP in RESET.
func (h *Host) CreateQP(cfg QPConfig) (*QP, error) {
	qp := new(QP)
	if err := h.CreateQPIn(qp, cfg); err != nil {
		return nil, err
	}
	return qp, nil
}

// CreateQPIn is CreateQP into qp, a zero QP that the caller allocated,
// typically inside its own per-QP state: a send on a QP that has not been
// used for a while then fetches the caller's state and the QP's from one
// place, instead of following a pointer to another cold object first.
func (h *Host) CreateQPIn(qp *QP, cfg QPConfig) error {
	if err := h.initQP(qp, cfg); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := uint32(0); i <= h.qpnLast-h.qpnFirst; i++ {
		n := h.nextQPN
		h.nextQPN++
		if h.nextQPN > h.qpnLast {
			h.nextQPN = h.qpnFirst
		}
		if n > 1 && h.qps.get(n) == nil {
			qp.qpn = n
			h.qps.set(n, qp)
			return nil
		}
	}
	return ErrTooManyQPs
}

// SetQPNRange makes CreateQP number new QPs from first to last (inclusive),
// the share of the QPN space a device running behind a host service owns.
// first 0 means the whole space (0x11 to 0xFFFFFF), the default. QPs that
// exist keep their numbers.
func (h *Host) SetQPNRange(first, last uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if first == 0 {
		first, last = 0x11, 0xFFFFFF
	}
	first, last = max(first, 2), min(last, 0xFFFFFF)
	if last < first {
		last = first
	}
	h.qpnFirst, h.qpnLast, h.nextQPN = first, last, first
}

// QPNRange returns the QP numbers CreateQP hands out (see SetQPNRange).
func (h *Host) QPNRange() (first, last uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.qpnFirst, h.qpnLast
}

// SetNextQPN makes n the number CreateQP tries next, if n lies in the
// range SetQPNRange gave (else nothing changes). A device that starts its
// numbering at a random point does not hand a restarted program the QPNs
// of its previous run, which a peer may still hold in a connection
// (its CM would reject the new one as stale).
func (h *Host) SetNextQPN(n uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n >= h.qpnFirst && n <= h.qpnLast {
		h.nextQPN = n
	}
}

// initQP makes the zero QP qp a QP in RESET with no number, not yet in
// the QP table.
func (h *Host) initQP(qp *QP, cfg QPConfig) error {
	if cfg.MaxSendWR <= 0 || cfg.MaxRecvWR < 0 {
		return fmt.Errorf("engine: bad queue sizes send=%d recv=%d", cfg.MaxSendWR, cfg.MaxRecvWR)
	}
	qp.host, qp.mtu = h, 1024
	qp.typ, qp.pd, qp.sigAll, qp.srq, qp.owner = cfg.Type, cfg.PD, cfg.SigAll, cfg.SRQ, cfg.Owner
	qp.onDeadline, qp.sendCQ, qp.recvCQ = cfg.OnDeadline, cfg.SendCQ, cfg.RecvCQ
	qp.sq = newSendQueue(cfg.MaxSendWR, cfg.MaxSendSGE, cfg.MaxInline)
	qp.sq.first = &qp.sq1
	qp.rq = newRecvQueue(max(cfg.MaxRecvWR, 1), cfg.MaxRecvSGE)
	qp.rsp.resizeResources(1)
	qp.attr.PathMTU = 1024
	return nil
}

// DestroyQP removes qp; packets for its QPN are dropped from now on.
func (h *Host) DestroyQP(qp *QP) {
	h.mu.Lock()
	if h.qps.get(qp.qpn) == qp {
		h.qps.set(qp.qpn, nil)
	}
	h.mu.Unlock()
	qp.mu.Lock()
	if qp.ackPending && qp.st != StateErr {
		// The application may have seen the last receive completion
		// before the receive path sent its coalesced ACK: send it now,
		// or the peer retransmits to a QP that no longer exists and its
		// send never completes.
		tx := h.getTx()
		qp.flushDeferredAck(tx)
		h.flush(tx)
		h.putTx(tx)
	}
	qp.st = StateErr
	qp.req.stopTimers()
	qp.mu.Unlock()
	// A batch being received may have completed the QP's last receive and
	// taken its ACK into its answers, not yet sent: if the application
	// went on to close the device (or exit), the ACK would never leave,
	// and the peer would retransmit its last send forever. Wait for the
	// batch's answers to be sent.
	h.rxBusy.Lock()
	//lint:ignore SA2001 waiting for the holder is the point
	h.rxBusy.Unlock()
}

func (h *Host) qp(qpn uint32) *QP { return h.qps.get(qpn) }

func (h *Host) sourcePort(want uint16) uint16 {
	if h.cfg.Link == nil {
		return want
	}
	return h.cfg.Link.SourcePort(want)
}

// Receive processes a batch of received datagrams, splitting those the link
// coalesced (Datagram.SegSize): it drops (and counts)
// malformed, misaddressed and corrupted packets, hands the rest to their QPs,
// and sends the answers. Only one goroutine may call Receive at a time.
func (h *Host) Receive(now time.Time, batch []link.Datagram) {
	h.receive(now, batch, false)
}

// ReceivePolled is Receive for a caller that polls for completions and
// comes back soon: the coalesced ACKs owed for what it received stay
// pending, to go out in the same send as the next packets of their QP
// (PostSend), or at the next Receive or FlushAcks, whichever comes first. A
// ping-pong thus sends each ACK with the reply instead of on its own. It
// reports whether ACKs are pending. It is called as Receive is.
func (h *Host) ReceivePolled(now time.Time, batch []link.Datagram) (acksPending bool) {
	h.receive(now, batch, true)
	return h.acksOwed.Load() > 0
}

// FlushAcks sends the ACKs ReceivePolled left pending. Only the goroutine
// that may call Receive may call it.
func (h *Host) FlushAcks() {
	if len(h.pending) == 0 {
		return
	}
	if h.acksOwed.Load() == 0 {
		// Every listed QP's ACK went out with its next send (a
		// ping-pong's reply): nothing to lock, nothing to send.
		clear(h.pending)
		h.pending = h.pending[:0]
		return
	}
	h.rxBusy.Lock()
	defer h.rxBusy.Unlock()
	if h.rxTx == nil {
		h.rxTx = newTxBatch(h, h.cfg.MaxBatch)
	}
	h.flushAcks(h.rxTx)
	h.flush(h.rxTx)
}

func (h *Host) flushAcks(tx *txBatch) {
	for _, qp := range h.pending {
		qp.mu.Lock()
		qp.flushDeferredAck(tx)
		qp.mu.Unlock()
	}
	clear(h.pending)
	h.pending = h.pending[:0]
}

func (h *Host) receive(now time.Time, batch []link.Datagram, deferAcks bool) {
	h.rxBusy.Lock()
	defer h.rxBusy.Unlock()
	if h.rxTx == nil {
		h.rxTx = newTxBatch(h, h.cfg.MaxBatch)
	}
	tx := h.rxTx
	var pkts, bytes int
	for i := range batch {
		d := &batch[i]
		bytes += len(d.Buf)
		if d.SegSize <= 0 || d.SegSize >= len(d.Buf) {
			pkts++
			t0 := stageStart()
			h.receiveOne(now, d, tx)
			rxDone(d.Buf, t0)
			continue
		}
		// Several datagrams coalesced by the link (UDP GRO).
		seg := link.Datagram{Src: d.Src, Dst: d.Dst}
		for b := d.Buf; len(b) > 0; {
			n := min(d.SegSize, len(b))
			seg.Buf = b[:n:n]
			pkts++
			t0 := stageStart()
			h.receiveOne(now, &seg, tx)
			rxDone(seg.Buf, t0)
			b = b[n:]
		}
	}
	// Counted once per batch: an atomic add per packet cost as much as
	// a lock.
	h.stats.Received.Add(uint64(pkts))
	h.stats.ReceivedBytes.Add(uint64(bytes))
	if !deferAcks {
		h.flushAcks(tx)
	} else if len(h.pending) > 0 && h.acksOwed.Load() == 0 {
		// The batch answered or a post took along every ACK it made
		// owed: nothing will call FlushAcks for the list, so it is
		// cleared here, or it would grow batch after batch.
		clear(h.pending)
		h.pending = h.pending[:0]
	}
	t0 := stageStart()
	h.flush(tx)
	stages.rxFlush.done(t0)
}

// receiveOne processes one datagram; receive counts it.
func (h *Host) receiveOne(now time.Time, d *link.Datagram, tx *txBatch) {
	p := &h.rxPkt
	if err := p.Parse(d.Buf); err != nil {
		h.count(&h.stats.DropMalformed)
		return
	}
	if d.Dst.Addr().Unmap() != h.cfg.Addr {
		h.count(&h.stats.DropNotForUs)
		return
	}
	if p.Op == wire.CNP {
		h.count(&h.stats.DropCNP)
		return
	}
	qp := h.qp(p.BTH.DestQP())
	if qp == nil {
		h.count(&h.stats.DropUnknownQP)
		return
	}
	if !(h.cfg.TrustLoopback && d.Src.Addr().IsLoopback()) &&
		!wire.VerifyICRC(d.Src.Addr(), d.Dst.Addr(), d.Src.Port(), d.Dst.Port(), d.Buf, h.cfg.ICRC) {
		h.count(&h.stats.DropICRC)
		return
	}
	if k := p.BTH.PKey(); k&0x7FFF != 0x7FFF {
		qp.count(&h.stats.DropPKey)
		return
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if p.Op.Transport() != transportOf(qp.typ) {
		qp.count(&h.stats.DropWrongTransport)
		return
	}
	if qp.typ != QPTypeUD && (d.Src.Addr().Unmap() != qp.attr.Remote || p.Op.Transport() == wire.TransportUD) {
		qp.count(&h.stats.DropWrongSource)
		return
	}
	if qp.st == StateErr || qp.st == StateReset || qp.st == StateInit {
		qp.count(&h.stats.DropState)
		return
	}
	qp.received++
	qp.commEstablished()
	switch {
	case qp.typ == QPTypeUD:
		qp.handleUD(now, p, d)
	case qp.typ == QPTypeUC:
		qp.handleUCRequest(now, p)
	case p.Flags&wire.IsResponse != 0:
		qp.handleResponse(now, p, tx)
	default:
		qp.handleRequest(now, p, tx)
	}
	qp.settle(now, tx)
	qp.noteDeadline(now)
}

func transportOf(t QPType) wire.Opcode {
	switch t {
	case QPTypeUC:
		return wire.TransportUC
	case QPTypeUD:
		return wire.TransportUD
	}
	return wire.TransportRC
}

// Stats counts what the device received, sent and dropped. Every QP keeps a
// set of its own (QP.Counters) with the counters of what concerned it; the
// device's are the sums, plus what no QP could be named for (malformed
// packets, unknown QPNs, ICRC errors, link failures).
//
// The first fifteen fields are Linux rxe's hw counters, in rxe's order; the
// Counters snapshot and its List give their rxe names. Stats holds only
// atomic.Uint64 fields, in the order of Counters' fields.
type Stats struct {
	// Sent is rxe's sent_pkts: datagrams handed to the link (on a QP:
	// packets it built).
	Sent atomic.Uint64
	// Received is rxe's rcvd_pkts: datagrams received (on a QP: packets
	// that passed the receive checks and reached it).
	Received          atomic.Uint64
	Duplicates        atomic.Uint64 // duplicate_request: request PSN before the expected one
	DropOutOfSequence atomic.Uint64 // out_of_seq_request: request PSN after the expected one (UC: a gap)
	RNRNAKsReceived   atomic.Uint64 // rcvd_rnr_err
	RNRNAKsSent       atomic.Uint64 // send_rnr_err: RC SEND or WRITE with immediate, receive queue empty
	SeqNAKsReceived   atomic.Uint64 // rcvd_seq_err
	AckDeferred       atomic.Uint64 // ack_deferred: ACKs owed and coalesced into one per batch
	RetryExceeded     atomic.Uint64 // retry_exceeded_err: a WQE failed with RETRY_EXC_ERR
	RNRRetryExceeded  atomic.Uint64 // retry_rnr_exceeded_err: a WQE failed with RNR_RETRY_EXC_ERR
	Retries           atomic.Uint64 // completer_retry_err: go-back-N retries (timeout, sequence NAK, lost response)
	SendErrors        atomic.Uint64 // send_err: datagrams the link refused
	LinkDowned        atomic.Uint64 // link_downed: the device's link failed
	RDMASends         atomic.Uint64 // rdma_sends: SENDs completed successfully
	RDMARecvs         atomic.Uint64 // rdma_recvs: receives completed successfully

	// ReceivedBytes and SentBytes count the UDP payloads (BTH through
	// ICRC) of Received and Sent (device only).
	ReceivedBytes atomic.Uint64
	SentBytes     atomic.Uint64

	DropMalformed      atomic.Uint64 // not a well-formed RoCEv2 packet
	DropNotForUs       atomic.Uint64 // destination IP is not the device's
	DropCNP            atomic.Uint64 // congestion notification packets (ignored)
	DropUnknownQP      atomic.Uint64 // no QP with the destination QPN
	DropICRC           atomic.Uint64 // invariant CRC mismatch
	DropPKey           atomic.Uint64 // P_Key does not match
	DropWrongTransport atomic.Uint64 // opcode class does not match the QP type
	DropWrongSource    atomic.Uint64 // RC/UC packet not from the QP's peer
	DropState          atomic.Uint64 // QP state does not accept the packet

	DropDuplicate          atomic.Uint64 // duplicate READ/atomic with no responder resource
	DropBadResponse        atomic.Uint64 // response that matches no outstanding request
	DropOutOfOrderResponse atomic.Uint64 // READ response or atomic ACK out of order
	DropStaleNAK           atomic.Uint64 // NAK for an already acknowledged PSN

	// The responder's errors. RequestErrors counts the requests answered
	// with a fatal NAK (the QP goes to ERR), the three after it the same
	// NAKs by syndrome; SeqNAKsSent counts PSN sequence NAKs.
	RequestErrors          atomic.Uint64
	InvalidRequestNAKsSent atomic.Uint64 // NAK invalid request: bad opcode sequence, length, QP access, ...
	RemoteAccessNAKsSent   atomic.Uint64 // NAK remote access error: R_Key, range or MR access
	RemoteOpNAKsSent       atomic.Uint64 // NAK remote operational error: the responder failed (its CQ overflowed)
	SeqNAKsSent            atomic.Uint64
	// DropResponding counts requests dropped while a READ's responses were
	// still going out (they are asked for again with a sequence NAK).
	DropResponding atomic.Uint64

	// The requester's side of the same: fatal NAKs received, by syndrome.
	InvalidRequestNAKsReceived atomic.Uint64
	RemoteAccessNAKsReceived   atomic.Uint64
	RemoteOpNAKsReceived       atomic.Uint64

	Retransmits atomic.Uint64 // retransmission timeouts acted on
	CQOverflow  atomic.Uint64 // completions lost to a full CQ

	DropQKey      atomic.Uint64 // UD Q_Key violations
	DropNoRecv    atomic.Uint64 // UC/UD message with no receive posted (receive queue empty)
	DropUDTooLong atomic.Uint64 // UD sends larger than the MTU (not sent)
	DropUCMessage atomic.Uint64 // UC messages abandoned (gap, bad length or key)
}

// Stats returns the device's counters.
func (h *Host) Stats() *Stats { return &h.stats }

// Counters returns a snapshot of the device's counters.
func (h *Host) Counters() Counters { return h.stats.Snapshot() }

// LinkDowned counts a failure of the device's link (rxe's link_downed).
func (h *Host) LinkDowned() { h.stats.LinkDowned.Add(1) }

func (h *Host) count(c *atomic.Uint64) { c.Add(1) }

// txBatch collects outgoing datagrams and sends them in batches.
type txBatch struct {
	h     *Host
	dg    []link.Datagram
	store [][]byte // a buffer per datagram, for packets longer than smallPacket
	// arena holds the batch's short packets back to back, so that a run of
	// them sent as one GSO message is one iovec: the kernel's copy per
	// iovec cost more than the copy of a short packet itself.
	arena []byte
	used  int             // bytes of arena taken
	seal  wire.ICRCSealer // the pseudo header's CRC for UD packets, kept while their flow stays one
}

// smallPacket is the longest packet a txBatch places in its arena.
const smallPacket = 256

func newTxBatch(h *Host, n int) *txBatch {
	t := &txBatch{h: h, dg: make([]link.Datagram, 0, n), store: make([][]byte, n), arena: make([]byte, n*smallPacket)}
	for i := range t.store {
		t.store[i] = make([]byte, maxPacket)
	}
	return t
}

// buf returns the buffer for the next datagram, n bytes long. (Every
// packet taken is committed before the next is, so the arena has room for
// one of each datagram's; a full arena falls back to the store all the
// same.)
func (t *txBatch) buf(n int) []byte {
	if n <= smallPacket && t.used+n <= len(t.arena) {
		b := t.arena[t.used : t.used+n : t.used+n]
		t.used += n
		return b
	}
	return t.store[len(t.dg)][:n]
}

func (h *Host) getTx() *txBatch  { return h.txPool.Get().(*txBatch) }
func (h *Host) putTx(t *txBatch) { h.txPool.Put(t) }

// packet returns a zeroed-header buffer for a packet of opcode op with an
// n-byte payload; fill it and pass it to commit.
func (t *txBatch) packet(qp *QP, op wire.Opcode, n int) []byte {
	if len(t.dg) == cap(t.dg) {
		t.h.flush(t)
	}
	b := t.buf(wire.PacketLen(op, n))
	clear(b[:op.HdrLen()])
	clear(b[len(b)-wire.ICRCLen-wire.Pad(n):])
	return b
}

// commit seals b with its ICRC and queues it for qp's peer.
func (t *txBatch) commit(qp *QP, b []byte) {
	h := t.h
	dst := netip.AddrPortFrom(qp.attr.Remote, h.cfg.Port)
	qp.icrc.Put(b)
	qp.sent++
	t.dg = append(t.dg, link.Datagram{Buf: b, Src: netip.AddrPortFrom(h.cfg.Addr, qp.sport), Dst: dst})
}

// commitTo seals b and queues it for dst (UD: each WR names its destination).
func (t *txBatch) commitTo(qp *QP, b []byte, dst netip.Addr) {
	h := t.h
	dst = dst.Unmap()
	t.seal.Put(h.cfg.Addr, dst, qp.sport, h.cfg.Port, b)
	qp.sent++
	t.dg = append(t.dg, link.Datagram{Buf: b, Src: netip.AddrPortFrom(h.cfg.Addr, qp.sport),
		Dst: netip.AddrPortFrom(dst, h.cfg.Port)})
}

// flush sends everything queued in t.
func (h *Host) flush(t *txBatch) {
	if len(t.dg) == 0 {
		return
	}
	if h.cfg.Link != nil {
		if err := h.cfg.Link.Send(t.dg); err != nil {
			h.stats.SendErrors.Add(uint64(len(t.dg)))
			h.log.Debug("engine: send failed", "err", err, "datagrams", len(t.dg))
		} else {
			h.stats.Sent.Add(uint64(len(t.dg)))
			n := 0
			for i := range t.dg {
				n += t.dg[i].Len()
			}
			h.stats.SentBytes.Add(uint64(n))
		}
	}
	// Drop the references to payloads (the applications' memory) that
	// the batch holds; headers live in t's own buffers, so clearing every
	// field (a pointer-aware clear of the whole batch) is not needed.
	for i := range t.dg {
		t.dg[i].Payload = nil
	}
	t.dg = t.dg[:0]
	t.used = 0
}
