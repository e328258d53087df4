// Package madclient sends management datagrams (MADs) to QP1 of a RoCE port
// and returns the answers, for the diagnostic tools (perfquery).
//
// infiniband-diags reaches QP1 through the kernel's umad interface, which on
// RoCE refuses to send without a GRH and, on a soft device, does not exist.
// This client uses nothing but the public verbs API instead, so it works on
// every device the providers see: it creates an Unreliable Datagram QP of
// its own, sends each request to QPN 1 of the destination's GID with the
// GSI Q_Key 0x80010000 through an address handle with a GRH, and receives
// the response on the same QP. That works because a MAD responder answers
// the QPN the request came from (the DETH source QP; docs/spec/cm-mad.md
// §1.4), not QP1, and with the GSI Q_Key, which is why the QP's own Q_Key
// is set to 0x80010000.
//
// Like libibmad's mad_rpc, a request is sent up to Retries times, waiting
// Timeout for the answer each time; a response is the one with the
// request's transaction ID and class, from the GID it was sent to.
package madclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/verbs"
)

const (
	// recvs is the number of receive buffers kept posted. A client has one
	// request outstanding, so a few cover the response and strays.
	recvs = 16
	// sends is the send queue depth: one request and its re-sends.
	sends = 4
	// slot is one receive buffer: the 40-byte GRH area every UD receive
	// starts with, then the MAD.
	slot = verbs.GRHLen + mad.Size
	// sendWRID marks send completions; receives use their buffer index.
	sendWRID = ^uint64(0)
	// hopLimit is the IP TTL of the requests.
	hopLimit = 64
)

// Defaults of Options, libibmad's (MAD_DEF_TIMEOUT_MS, MAD_DEF_RETRIES).
const (
	DefaultTimeout = time.Second
	DefaultRetries = 3
)

// ErrTimeout is returned when no response came after the last try.
var ErrTimeout = errors.New("madclient: no response")

// Client is a UD QP on one port of an open device that sends MADs and
// receives their responses. It serves one request at a time.
type Client struct {
	ctx  *verbs.Context
	port uint8
	sgid verbs.GID
	sidx int

	pd  *verbs.PD
	cq  *verbs.CQ
	qp  *verbs.QP
	mr  *verbs.MR
	buf []byte // recvs receive slots, then the send MAD
	ahs map[verbs.GID]*verbs.AH

	tidHi   uint32
	tidLo   uint32
	pending int // sends posted whose completion has not been seen
	wc      []verbs.WC
}

// Open creates a client on port (0: the first active port) of c. The
// source GID is the one holding the device's IP address (a soft device
// sends from no other), else the first non-zero GID of the port.
func Open(c *verbs.Context, port uint8) (cl *Client, err error) {
	if port == 0 {
		if port, err = firstActivePort(c); err != nil {
			return nil, err
		}
	}
	if _, err := c.QueryPort(port); err != nil {
		return nil, fmt.Errorf("port %d of %s: %w", port, c.Device().Name(), err)
	}
	cl = &Client{ctx: c, port: port, ahs: make(map[verbs.GID]*verbs.AH), tidHi: rand.Uint32(),
		wc: make([]verbs.WC, recvs+sends)}
	defer func() {
		if err != nil {
			cl.Close()
			cl = nil
		}
	}()
	if cl.sidx, cl.sgid, err = sourceGID(c, port); err != nil {
		return nil, err
	}
	if cl.pd, err = c.AllocPD(); err != nil {
		return nil, fmt.Errorf("allocate PD: %w", err)
	}
	if cl.cq, err = c.CreateCQ(recvs+sends, nil); err != nil {
		return nil, fmt.Errorf("create CQ: %w", err)
	}
	// Receive buffers are written by the device (LOCAL_WRITE); nothing is
	// exposed to remote access.
	cl.buf = make([]byte, recvs*slot+mad.Size)
	if cl.mr, err = cl.pd.RegMR(cl.buf, verbs.AccessLocalWrite); err != nil {
		return nil, fmt.Errorf("register MR: %w", err)
	}
	if cl.qp, err = cl.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: cl.cq, RecvCQ: cl.cq,
		Cap: verbs.QPCap{MaxSendWR: sends, MaxRecvWR: recvs, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, fmt.Errorf("create UD QP: %w", err)
	}
	// The Q_Key is the GSI's: responders answer with 0x80010000, and a UD
	// QP drops datagrams whose Q_Key is not its own.
	if err := cl.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: port, QKey: mad.GSIQKey},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey); err != nil {
		return nil, fmt.Errorf("modify UD QP to INIT: %w", err)
	}
	if err := cl.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR}, verbs.QPAttrState); err != nil {
		return nil, fmt.Errorf("modify UD QP to RTR: %w", err)
	}
	if err := cl.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: rand.Uint32() & 0xFFFFFF},
		verbs.QPAttrState|verbs.QPAttrSQPSN); err != nil {
		return nil, fmt.Errorf("modify UD QP to RTS: %w", err)
	}
	for i := range recvs {
		if err := cl.postRecv(i); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// firstActivePort returns the first port of c that is active, as umad
// picks a port when none is named.
func firstActivePort(c *verbs.Context) (uint8, error) {
	da, err := c.QueryDevice()
	if err != nil {
		return 0, fmt.Errorf("query %s: %w", c.Device().Name(), err)
	}
	for p := uint8(1); p >= 1 && p <= da.PhysPortCnt; p++ {
		if pa, err := c.QueryPort(p); err == nil && pa.State == verbs.PortActive {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%s has no active port", c.Device().Name())
}

// sourceGID picks the GID requests are sent from.
func sourceGID(c *verbs.Context, port uint8) (int, verbs.GID, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return 0, verbs.GID{}, fmt.Errorf("query port %d: %w", port, err)
	}
	own := verbs.GIDFromIP(c.Device().Addr())
	first := -1
	var firstGID verbs.GID
	for i := range pa.GIDTblLen {
		g, err := c.QueryGID(port, i)
		if err != nil || g == (verbs.GID{}) {
			continue
		}
		if c.Device().Addr().IsValid() && g == own {
			return i, g, nil
		}
		if first < 0 {
			first, firstGID = i, g
		}
	}
	if first < 0 {
		return 0, verbs.GID{}, fmt.Errorf("port %d of %s has no GID: RoCE needs one", port, c.Device().Name())
	}
	return first, firstGID, nil
}

// Port returns the port the client sends from.
func (cl *Client) Port() uint8 { return cl.port }

// GID returns the source GID of the requests.
func (cl *Client) GID() verbs.GID { return cl.sgid }

// QPN returns the client's QP number, the source QP of its requests.
func (cl *Client) QPN() uint32 { return cl.qp.QPN() }

func (cl *Client) postRecv(i int) error {
	if err := cl.qp.PostRecv(verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{cl.mr.SGE(i*slot, slot)}}); err != nil {
		return fmt.Errorf("post receive: %w", err)
	}
	return nil
}

// ah returns the address handle of dst, made on first use: RoCE has no
// LIDs, so the address vector is global, its GRH naming the destination
// GID and this client's source GID.
func (cl *Client) ah(dst verbs.GID) (*verbs.AH, error) {
	if ah := cl.ahs[dst]; ah != nil {
		return ah, nil
	}
	ah, err := cl.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: cl.port,
		GRH: verbs.GlobalRoute{DGID: dst, SGIDIndex: uint8(cl.sidx), HopLimit: hopLimit}})
	if err != nil {
		return nil, fmt.Errorf("create address handle to %s: %w", dst, err)
	}
	cl.ahs[dst] = ah
	return ah, nil
}

// Options control Call's retransmission.
type Options struct {
	// Timeout is the wait for each answer (default DefaultTimeout).
	Timeout time.Duration
	// Retries is the number of sends in all (default DefaultRetries), as
	// libibmad counts them.
	Retries int
	// OnRetry, if set, is called before each re-send with its number
	// (1, 2, ...).
	OnRetry func(n int)
}

// Call sends req (256 bytes, its header filled in; the transaction ID is
// replaced with one of the client's) to QP1 at dst and returns the response:
// the first MAD from dst with the response bit, req's class and the
// transaction ID. It returns ErrTimeout (wrapped) when none came after the
// last try, or ctx's error. The status of the response is the caller's to
// read.
func (cl *Client) Call(ctx context.Context, dst verbs.GID, req mad.MAD, opt Options) (mad.MAD, error) {
	if len(req) < mad.Size {
		return nil, fmt.Errorf("madclient: request of %d bytes", len(req))
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.Retries <= 0 {
		opt.Retries = DefaultRetries
	}
	ah, err := cl.ah(dst)
	if err != nil {
		return nil, err
	}
	// The send buffer is reused: wait until the device is done with the
	// previous request's sends.
	if err := cl.drainSends(ctx); err != nil {
		return nil, err
	}
	cl.tidLo++
	tid := uint64(cl.tidHi)<<32 | uint64(cl.tidLo)
	sbuf := mad.MAD(cl.buf[recvs*slot:])
	copy(sbuf, req[:mad.Size])
	sbuf.SetTID(tid)
	// RemoteQKey with bit 31 set means "the QP's own Q_Key", 0x80010000.
	wr := verbs.SendWR{ID: sendWRID, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{cl.mr.SGE(recvs*slot, mad.Size)}, AH: ah, RemoteQPN: mad.GSIQPN, RemoteQKey: mad.GSIQKey}
	for try := range opt.Retries {
		if try > 0 && opt.OnRetry != nil {
			opt.OnRetry(try)
		}
		if err := cl.qp.PostSend(wr); err != nil {
			return nil, fmt.Errorf("send MAD to %s: %w", dst, err)
		}
		cl.pending++
		resp, err := cl.wait(ctx, time.Now().Add(opt.Timeout), dst, tid, req.MgmtClass())
		if err != nil || resp != nil {
			return resp, err
		}
	}
	return nil, fmt.Errorf("%w from %s after %d tries of %v", ErrTimeout, dst, opt.Retries, opt.Timeout)
}

// drainSends waits for the completions of the sends still posted.
func (cl *Client) drainSends(ctx context.Context) error {
	if cl.pending == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	for cl.pending > 0 {
		if _, err := cl.poll(ctx, nil, 0, 0); err != nil {
			return fmt.Errorf("wait for send completions: %w", err)
		}
	}
	return nil
}

// wait polls until the response arrives (returned), the deadline passes
// (nil, nil) or ctx ends.
func (cl *Client) wait(ctx context.Context, deadline time.Time, dst verbs.GID, tid uint64, class uint8) (mad.MAD, error) {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		resp, err := cl.poll(wctx, &dst, tid, class)
		if resp != nil {
			return resp, nil
		}
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return nil, nil // this try's time is up
			}
			return nil, err
		}
	}
}

// poll handles one batch of completions, blocking until there is one or
// ctx ends: send completions are counted off, receives are matched against
// the request (when dst is not nil) and their buffers reposted.
func (cl *Client) poll(ctx context.Context, dst *verbs.GID, tid uint64, class uint8) (mad.MAD, error) {
	n, err := cl.cq.Poll(cl.wc)
	if err != nil {
		return nil, fmt.Errorf("poll CQ: %w", err)
	}
	if n == 0 {
		return nil, cl.cq.Wait(ctx)
	}
	var resp mad.MAD
	for i := range cl.wc[:n] {
		wc := &cl.wc[i]
		if wc.WRID == sendWRID {
			cl.pending--
			if wc.Status != verbs.WCSuccess {
				err = fmt.Errorf("send MAD: completion status %v", wc.Status)
			}
			continue
		}
		idx := int(wc.WRID)
		if wc.Status == verbs.WCSuccess && resp == nil && dst != nil {
			resp = cl.match(wc, idx, *dst, tid, class)
		}
		if wc.Status != verbs.WCWRFlushErr {
			if perr := cl.postRecv(idx); perr != nil && err == nil {
				err = perr
			}
		}
	}
	if resp != nil {
		return resp, nil
	}
	return nil, err
}

// match returns a copy of the MAD in receive slot idx if it answers the
// request, else nil.
func (cl *Client) match(wc *verbs.WC, idx int, dst verbs.GID, tid uint64, class uint8) mad.MAD {
	if int(wc.ByteLen) < slot {
		return nil
	}
	b := cl.buf[idx*slot : (idx+1)*slot]
	m, err := mad.Parse(b[verbs.GRHLen:])
	if err != nil || !m.IsResponse() || m.TID() != tid || m.MgmtClass() != class {
		return nil
	}
	// The sender's GID is the source address in the GRH area.
	ah, err := cl.ctx.InitAHFromWC(cl.port, wc, b[:verbs.GRHLen])
	if err != nil || ah.GRH.DGID != dst {
		return nil
	}
	return m.Clone()
}

// Close destroys the client's verbs objects. It does not close the
// device context.
func (cl *Client) Close() error {
	var errs []error
	if cl.qp != nil {
		errs = append(errs, cl.qp.Destroy())
	}
	for _, ah := range cl.ahs {
		errs = append(errs, ah.Destroy())
	}
	if cl.mr != nil {
		errs = append(errs, cl.mr.Dereg())
	}
	if cl.cq != nil {
		errs = append(errs, cl.cq.Destroy())
	}
	if cl.pd != nil {
		errs = append(errs, cl.pd.Dealloc())
	}
	return errors.Join(errs...)
}
