// Package gsi runs the General Services Interface of a soft device: QP1 on
// its transport engine, a ring of receive buffers, and the MAD agent that
// QP1's receives are delivered to and its sends come from. Every soft
// device has one, as every Linux RoCE port has its GSI QP (docs/spec/cm-mad.md
// §1): it answers PerfMgt queries and unhandled requests, and carries the
// connection manager's messages.
package gsi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/internal/debuglog"
)

// gsiPD is the protection domain handle of QP1's buffers. verbs numbers its
// PDs from 1, so 0 is never a user's.
const gsiPD = 0

// slot is one receive buffer: the 40-byte GRH area and a MAD.
const slot = engine.GRHLen + mad.Size

// Config configures a Port.
type Config struct {
	// Clock is the agent's clock (default: the system clock).
	Clock mad.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Receives is the number of receive buffers (default 256).
	Receives int
	// Sends is the send queue depth (default 256).
	Sends int
	// GUID is the device's node GUID, the connection manager's CA GUID.
	GUID uint64
	// Claims, when set, is where the connection manager claims the
	// service IDs it listens on (see ibcm.Config.Claims).
	Claims ibcm.ServiceClaims
}

// Port is QP1 of one soft device and its MAD agent.
type Port struct {
	host  *engine.Host
	qp    *engine.QP
	agent *mad.Agent
	cm    *ibcm.Manager
	log   *slog.Logger

	rbuf []byte
	rmr  *engine.MR
	rcq  ringCQ

	sendMu sync.Mutex
	sbuf   []byte // sendBatch staging slots of one MAD each
	smr    *engine.MR
	// While Poll delivers a MAD, the MADs sent (the replies it causes,
	// mostly) are queued; Poll posts them together when it ends: one send
	// of the device's for a batch, not one each. A MAD sent from anywhere
	// else goes out at once, with any queued before it, so that what a
	// program sends (a DREQ from Disconnect) is on the wire when the call
	// returns.
	delivering bool
	wrs        []engine.SendWR
	avs        [sendBatch]engine.AV
	sges       [sendBatch]engine.SGE

	pollMu sync.Mutex
	done   []engine.Completion
	closed bool
}

// Open creates QP1 on h, posts its receive buffers, takes it to RTS and
// starts a MAD agent on it.
func Open(h *engine.Host, cfg Config) (*Port, error) {
	if cfg.Receives <= 0 {
		cfg.Receives = 256
	}
	if cfg.Sends <= 0 {
		cfg.Sends = 256
	}
	p := &Port{host: h, log: cfg.Logger}
	if p.log == nil {
		p.log = slog.Default()
	}
	qp, err := h.CreateGSI(engine.QPConfig{Type: engine.QPTypeUD, PD: gsiPD, MaxSendWR: cfg.Sends,
		MaxRecvWR: cfg.Receives, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: mad.Size, RecvCQ: &p.rcq, Owner: p})
	if err != nil {
		return nil, fmt.Errorf("gsi: %w", err)
	}
	p.qp = qp
	p.rbuf = make([]byte, cfg.Receives*slot)
	p.rmr = h.Mem().Register(gsiPD, p.rbuf, engine.AccessLocalWrite)
	p.sbuf = make([]byte, sendBatch*mad.Size)
	p.smr = h.Mem().Register(gsiPD, p.sbuf, 0)
	p.wrs = make([]engine.SendWR, 0, sendBatch)
	now := time.Now()
	for _, st := range []engine.QPState{engine.StateInit, engine.StateRTR, engine.StateRTS} {
		qp.Modify(now, &engine.Attr{State: st}, engine.AttrState)
	}
	for i := range cfg.Receives {
		if err := p.post(i); err != nil {
			p.Close()
			return nil, err
		}
	}
	p.agent = mad.NewAgent(mad.Config{Transport: p, Clock: cfg.Clock, Logger: debuglog.For("mad", cfg.Logger)})
	if p.cm, err = ibcm.New(p.agent, ibcm.Config{GUID: cfg.GUID, Logger: debuglog.For("cm", cfg.Logger), Claims: cfg.Claims}); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// SetPrefix gives the port's transaction IDs and CM communication IDs
// prefix as their top byte (0: none), so that a host service sharing the
// device's address routes the answers to them back to this process.
func (p *Port) SetPrefix(prefix uint8) {
	p.agent.SetTIDPrefix(prefix)
	p.cm.SetCommIDPrefix(prefix)
}

// Agent returns the port's MAD agent.
func (p *Port) Agent() *mad.Agent { return p.agent }

// CM returns the port's connection manager.
func (p *Port) CM() *ibcm.Manager { return p.cm }

// Host returns the engine the port runs on.
func (p *Port) Host() *engine.Host { return p.host }

func (p *Port) post(i int) error {
	sge := engine.SGE{Addr: p.rmr.Addr + uint64(i*slot), Length: slot, LKey: p.rmr.LKey}
	if err := p.qp.PostRecv(&engine.RecvWR{ID: uint64(i), SGL: []engine.SGE{sge}}); err != nil {
		return fmt.Errorf("gsi: post receive: %w", err)
	}
	return nil
}

// ErrClosed is returned by SendMAD after Close.
var ErrClosed = errors.New("gsi: port closed")

// SendMAD implements mad.Transport: one UD SEND-only packet from QP1 with
// the GSI Q_Key (or a.QKey) to a.QPN at a.Remote.
func (p *Port) SendMAD(a mad.Address, m mad.MAD) error {
	if len(m) < mad.Size {
		return fmt.Errorf("gsi: MAD of %d bytes", len(m))
	}
	qkey := a.QKey
	if qkey == 0 {
		qkey = mad.GSIQKey
	}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if p.closed {
		return ErrClosed
	}
	i := len(p.wrs)
	copy(p.sbuf[i*mad.Size:], m[:mad.Size])
	p.avs[i] = engine.AV{Remote: a.Remote, FlowLabel: a.FlowLabel, HopLimit: a.HopLimit, TrafficClass: a.TrafficClass}
	p.sges[i] = engine.SGE{Addr: p.smr.Addr + uint64(i*mad.Size), Length: mad.Size, LKey: p.smr.LKey}
	p.wrs = append(p.wrs, engine.SendWR{Op: engine.WRSend, Flags: engine.SendInline,
		SGL: p.sges[i : i+1], AV: &p.avs[i], RemoteQPN: a.QPN, RemoteQKey: qkey})
	if p.delivering && len(p.wrs) < sendBatch {
		return nil
	}
	return p.flushLocked()
}

// sendBatch is the most MADs Poll queues before it posts them.
const sendBatch = 32

// flushLocked posts the queued MADs as one list (the engine sends a list
// in one batch).
func (p *Port) flushLocked() error {
	n, err := p.qp.PostSendList(time.Now(), p.wrs)
	if err != nil {
		w := &p.wrs[n]
		err = fmt.Errorf("gsi: send to %s QP %d (%d of %d MADs not sent): %w", w.AV.Remote, w.RemoteQPN, len(p.wrs)-n, len(p.wrs), err)
	}
	p.wrs = p.wrs[:0]
	return err
}

// Poll delivers the MADs QP1 has received to the agent and reposts their
// buffers. The device calls it after each batch it hands the engine, with
// the same time.
func (p *Port) Poll(now time.Time) {
	if p.rcq.n.Load() == 0 {
		// Nothing arrived on QP1: the device calls Poll after every
		// batch it receives, and a data batch must not pay QP1's locks.
		// (MADs are queued only while Poll delivers, so none wait.)
		return
	}
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	if p.closed {
		return
	}
	defer func() {
		p.sendMu.Lock()
		var err error
		if len(p.wrs) > 0 && !p.closed {
			err = p.flushLocked()
		}
		p.sendMu.Unlock()
		if err != nil {
			p.log.Debug("gsi: send", "err", err)
		}
	}()
	p.done = p.rcq.drain(p.done[:0])
	for i := range p.done {
		c := &p.done[i]
		idx := int(c.WRID)
		if c.Status != engine.StatusSuccess {
			if c.Status != engine.StatusWRFlushErr {
				_ = p.post(idx)
			}
			continue
		}
		b := p.rbuf[idx*slot : (idx+1)*slot]
		n := int(c.ByteLen) - engine.GRHLen
		if n >= mad.Size {
			from := parseGRH(b[:engine.GRHLen])
			from.QPN, from.QKey = c.SrcQP, mad.GSIQKey
			p.setDelivering(true)
			p.agent.Deliver(now, b[engine.GRHLen:engine.GRHLen+mad.Size], from)
			p.setDelivering(false)
			if testHookDelivered != nil {
				testHookDelivered()
			}
		}
		if err := p.post(idx); err != nil {
			p.log.Error("gsi: cannot repost a QP1 receive", "err", err)
		}
	}
}

// testHookDelivered, set only by tests, runs in Poll after each MAD it
// has delivered: where a program's send may land while Poll runs.
var testHookDelivered func()

func (p *Port) setDelivering(on bool) {
	p.sendMu.Lock()
	p.delivering = on
	p.sendMu.Unlock()
}

// parseGRH reads the addresses, traffic class and flow label out of a GRH
// area (docs/spec/cm-mad.md §1.3).
func parseGRH(g []byte) mad.Address {
	var a mad.Address
	if g[0]>>4 == 6 {
		w := binary.BigEndian.Uint32(g[0:4])
		a.TrafficClass, a.FlowLabel = uint8(w>>20), w&0xFFFFF
		a.HopLimit = g[7]
		a.Remote = netip.AddrFrom16([16]byte(g[8:24]))
		a.Local = netip.AddrFrom16([16]byte(g[24:40]))
		return a
	}
	ip := g[20:40]
	a.TrafficClass, a.HopLimit = ip[1], ip[8]
	a.Remote = netip.AddrFrom4([4]byte(ip[12:16]))
	a.Local = netip.AddrFrom4([4]byte(ip[16:20]))
	return a
}

// Close stops the agent and destroys QP1.
func (p *Port) Close() {
	p.pollMu.Lock()
	p.sendMu.Lock()
	if p.closed {
		p.sendMu.Unlock()
		p.pollMu.Unlock()
		return
	}
	p.closed = true
	p.sendMu.Unlock()
	p.pollMu.Unlock()
	if p.cm != nil {
		p.cm.Close()
	}
	if p.agent != nil {
		p.agent.Close()
	}
	p.host.DestroyQP(p.qp)
	p.host.Mem().Deregister(p.rmr)
	p.host.Mem().Deregister(p.smr)
}

// ringCQ collects QP1's receive completions; Push runs with the QP locked,
// so it only appends.
type ringCQ struct {
	mu sync.Mutex
	q  []engine.Completion
	n  atomic.Int32 // len(q), for a look without the lock
}

func (c *ringCQ) Push(x engine.Completion) bool {
	c.mu.Lock()
	c.q = append(c.q, x)
	c.n.Store(int32(len(c.q)))
	c.mu.Unlock()
	return true
}

func (c *ringCQ) drain(dst []engine.Completion) []engine.Completion {
	c.mu.Lock()
	dst = append(dst, c.q...)
	c.q = c.q[:0]
	c.n.Store(0)
	c.mu.Unlock()
	return dst
}

// Counters returns the device's counters in PerfMgt terms.
func Counters(h *engine.Host) mad.PortCounterValues {
	s := h.Stats()
	return mad.PortCounterValues{
		XmitData: s.SentBytes.Load(), RcvData: s.ReceivedBytes.Load(),
		XmitPkts: s.Sent.Load(), RcvPkts: s.Received.Load(),
		UnicastXmitPkts: s.Sent.Load(), UnicastRcvPkts: s.Received.Load(),
		RcvErrors:           s.DropMalformed.Load() + s.DropICRC.Load(),
		XmitDiscards:        s.SendErrors.Load(),
		RcvConstraintErrors: s.DropPKey.Load() + s.DropQKey.Load(),
	}
}
