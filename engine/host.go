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
	// MaxBatch is the number of datagrams sent per Link.Send (default 32).
	MaxBatch int
	// Logger receives debug logs; nil means slog.Default().
	Logger *slog.Logger
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

	mu      sync.RWMutex
	qps     map[uint32]*QP
	nextQPN uint32

	txPool sync.Pool

	// pending lists QPs owing a coalesced ACK; used only by the goroutine
	// running Receive (and by the QP methods it calls).
	pending []*QP
	rxPkt   wire.Packet
}

// NewHost returns a Host with no QPs.
func NewHost(cfg HostConfig) *Host {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 32
	}
	if cfg.Mem == nil {
		cfg.Mem = NewMemTable()
	}
	h := &Host{cfg: cfg, mem: cfg.Mem, log: cfg.Logger, qps: make(map[uint32]*QP), nextQPN: 0x11}
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
	if cfg.MaxSendWR <= 0 || cfg.MaxRecvWR < 0 {
		return nil, fmt.Errorf("engine: bad queue sizes send=%d recv=%d", cfg.MaxSendWR, cfg.MaxRecvWR)
	}
	qp := &QP{host: h, cfg: cfg, mtu: 1024}
	qp.sq = newSendQueue(cfg.MaxSendWR, cfg.MaxSendSGE, cfg.MaxInline)
	qp.rq = newRecvQueue(max(cfg.MaxRecvWR, 1), cfg.MaxRecvSGE)
	qp.rsp.resizeResources(1)
	qp.attr.PathMTU = 1024
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 0; i < 1<<24; i++ {
		n := h.nextQPN
		h.nextQPN++
		if h.nextQPN > 0xFFFFFF {
			h.nextQPN = 0x11
		}
		if _, used := h.qps[n]; !used && n > 1 {
			qp.qpn = n
			h.qps[n] = qp
			return qp, nil
		}
	}
	return nil, ErrTooManyQPs
}

// DestroyQP removes qp; packets for its QPN are dropped from now on.
func (h *Host) DestroyQP(qp *QP) {
	h.mu.Lock()
	delete(h.qps, qp.qpn)
	h.mu.Unlock()
	qp.mu.Lock()
	qp.st = StateErr
	qp.req.stopTimers()
	qp.mu.Unlock()
}

func (h *Host) qp(qpn uint32) *QP {
	h.mu.RLock()
	qp := h.qps[qpn]
	h.mu.RUnlock()
	return qp
}

func (h *Host) sourcePort(want uint16) uint16 {
	if h.cfg.Link == nil {
		return want
	}
	return h.cfg.Link.SourcePort(want)
}

// Receive processes a batch of received datagrams: it drops (and counts)
// malformed, misaddressed and corrupted packets, hands the rest to their QPs,
// and sends the answers. Only one goroutine may call Receive at a time.
func (h *Host) Receive(now time.Time, batch []link.Datagram) {
	tx := h.getTx()
	for i := range batch {
		h.receiveOne(now, &batch[i], tx)
	}
	for _, qp := range h.pending {
		qp.mu.Lock()
		qp.flushDeferredAck(tx)
		qp.mu.Unlock()
	}
	clear(h.pending)
	h.pending = h.pending[:0]
	h.flush(tx)
	h.putTx(tx)
}

func (h *Host) receiveOne(now time.Time, d *link.Datagram, tx *txBatch) {
	h.count(&h.stats.Received)
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
	if !wire.VerifyICRC(d.Src.Addr(), d.Dst.Addr(), d.Src.Port(), d.Dst.Port(), d.Buf, h.cfg.ICRC) {
		h.count(&h.stats.DropICRC)
		return
	}
	if k := p.BTH.PKey(); k&0x7FFF != 0x7FFF {
		h.count(&h.stats.DropPKey)
		return
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if p.Op.Transport() != transportOf(qp.cfg.Type) {
		h.count(&h.stats.DropWrongTransport)
		return
	}
	if qp.cfg.Type != QPTypeUD && d.Src.Addr().Unmap() != qp.attr.Remote {
		h.count(&h.stats.DropWrongSource)
		return
	}
	if qp.st == StateErr || qp.st == StateReset || qp.st == StateInit {
		h.count(&h.stats.DropState)
		return
	}
	if p.Flags&wire.IsResponse != 0 {
		qp.handleResponse(now, p, tx)
	} else {
		qp.handleRequest(now, p, tx)
	}
	qp.noteDeadline()
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

// Stats counts what the device received, sent and dropped.
type Stats struct {
	Received, Sent, SendErrors                     atomic.Uint64
	DropMalformed, DropNotForUs, DropCNP           atomic.Uint64
	DropUnknownQP, DropICRC, DropPKey              atomic.Uint64
	DropWrongTransport, DropWrongSource, DropState atomic.Uint64
	DropOutOfSequence, Duplicates, DropDuplicate   atomic.Uint64
	DropBadResponse, DropOutOfOrderResponse        atomic.Uint64
	DropStaleNAK, RequestErrors                    atomic.Uint64
	RNRNAKsSent, RNRNAKsReceived, SeqNAKsReceived  atomic.Uint64
	Retransmits, CQOverflow                        atomic.Uint64
}

// Stats returns the device's counters.
func (h *Host) Stats() *Stats { return &h.stats }

func (h *Host) count(c *atomic.Uint64) { c.Add(1) }

// txBatch collects outgoing datagrams and sends them in batches.
type txBatch struct {
	h     *Host
	dg    []link.Datagram
	store [][]byte
}

func newTxBatch(h *Host, n int) *txBatch {
	t := &txBatch{h: h, dg: make([]link.Datagram, 0, n), store: make([][]byte, n)}
	for i := range t.store {
		t.store[i] = make([]byte, maxPacket)
	}
	return t
}

func (h *Host) getTx() *txBatch  { return h.txPool.Get().(*txBatch) }
func (h *Host) putTx(t *txBatch) { h.txPool.Put(t) }

// packet returns a zeroed-header buffer for a packet of opcode op with an
// n-byte payload; fill it and pass it to commit.
func (t *txBatch) packet(qp *QP, op wire.Opcode, n int) []byte {
	if len(t.dg) == cap(t.dg) {
		t.h.flush(t)
	}
	b := t.store[len(t.dg)][:wire.PacketLen(op, n)]
	clear(b[:op.HdrLen()])
	clear(b[len(b)-wire.ICRCLen-wire.Pad(n):])
	return b
}

// commit seals b with its ICRC and queues it for qp's peer.
func (t *txBatch) commit(qp *QP, b []byte) {
	h := t.h
	dst := netip.AddrPortFrom(qp.attr.Remote, link.RoCEPort)
	wire.PutICRC(h.cfg.Addr, qp.attr.Remote, qp.sport, link.RoCEPort, b)
	t.dg = append(t.dg, link.Datagram{Buf: b, Src: netip.AddrPortFrom(h.cfg.Addr, qp.sport), Dst: dst})
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
		}
	}
	clear(t.dg)
	t.dg = t.dg[:0]
}
