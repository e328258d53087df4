// Package workload holds the data-path loops that rdma-bench (and the
// verbs benchmarks, if they want them) measure: RDMA over two soft
// loopback devices in one process, and the same workloads over Go's TCP on
// loopback, so that the two can be compared in one run.
package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// Budget bounds a workload: Iters operations, or (Iters 0) Duration.
type Budget struct {
	Iters    int
	Duration time.Duration
}

func (b Budget) done(ops int, start time.Time) bool {
	if b.Iters > 0 {
		return ops >= b.Iters
	}
	return ops%64 == 0 && time.Since(start) >= b.Duration
}

// Result is what a workload measured.
type Result struct {
	Ops     int           // operations: messages, or round trips
	Bytes   int64         // payload bytes moved
	Elapsed time.Duration // wall time of the measured loop
}

// MiBps is the payload bandwidth in MiB/s.
func (r Result) MiBps() float64 { return float64(r.Bytes) / r.Elapsed.Seconds() / (1 << 20) }

// Mpps is the operation rate in millions per second.
func (r Result) Mpps() float64 { return float64(r.Ops) / r.Elapsed.Seconds() / 1e6 }

// HalfRTT is half a round trip (the one-way latency of a ping-pong).
func (r Result) HalfRTT() time.Duration { return r.Elapsed / time.Duration(2*max(r.Ops, 1)) }

// WaitTimeout bounds every wait for a completion or a TCP read.
const WaitTimeout = 10 * time.Second

var devSeq atomic.Uint32

// End is one side of a connected RC pair.
type End struct {
	Ctx *verbs.Context
	PD  *verbs.PD
	CQ  *verbs.CQ
	QP  *verbs.QP
	MR  *verbs.MR
	GID verbs.GID
	PSN uint32
	wc  [32]verbs.WC
}

// Pair is two RC QPs connected to each other: over two loopback soft
// devices (each on its own 127.0.0.x), or both on one named device (a
// kernel device such as rxe0: two contexts, over its own address), at
// the port's active MTU.
type Pair struct {
	X, Y *End
	mtu  verbs.MTU
	gid  int
}

// NewRCPair connects an RC QP on each of two new loopback devices, or,
// with device set, two QPs of that device.
func NewRCPair(memSize, sqDepth int, device string) (p *Pair, err error) {
	p = &Pair{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	var named *verbs.Device
	if device != "" {
		if named, err = FindDevice(device); err != nil {
			return p, err
		}
	}
	for _, e := range []**End{&p.X, &p.Y} {
		dev := named
		if dev == nil {
			if dev, err = verbs.AddLoopbackDevice(fmt.Sprintf("wl%d", devSeq.Add(1))); err != nil {
				return p, err
			}
		}
		x := &End{PSN: rand.Uint32() & 0xFFFFFF}
		*e = x
		if x.Ctx, err = dev.Open(); err != nil {
			return p, err
		}
		if x.PD, err = x.Ctx.AllocPD(); err != nil {
			return p, err
		}
		if x.CQ, err = x.Ctx.CreateCQ(4*sqDepth, nil); err != nil {
			return p, err
		}
		if x.MR, err = x.PD.RegMR(make([]byte, memSize), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
			return p, err
		}
		if x.QP, err = x.PD.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: x.CQ, RecvCQ: x.CQ,
			Cap: verbs.QPCap{MaxSendWR: uint32(sqDepth), MaxRecvWR: uint32(sqDepth), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			return p, err
		}
		pa, err := x.Ctx.QueryPort(1)
		if err != nil {
			return p, err
		}
		if p.gid, err = GIDIndex(x.Ctx); err != nil {
			return p, err
		}
		p.mtu = pa.ActiveMTU
		if x.GID, err = x.Ctx.QueryGID(1, p.gid); err != nil {
			return p, err
		}
	}
	if err := p.connect(p.X, p.Y); err != nil {
		return p, err
	}
	return p, p.connect(p.Y, p.X)
}

// FindDevice returns the device called name.
func FindDevice(name string) (*verbs.Device, error) {
	ds, err := verbs.Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Name() == name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no device %q among %d", name, len(ds))
}

// GIDIndex returns the index of port 1's GID that holds the device's IP
// address (the RoCEv2 GID a QP addresses it by).
func GIDIndex(c *verbs.Context) (int, error) {
	want := verbs.GIDFromIP(c.Device().Addr())
	pa, err := c.QueryPort(1)
	if err != nil {
		return 0, err
	}
	for i := range int(pa.GIDTblLen) {
		if g, err := c.QueryGID(1, i); err == nil && g == want {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no GID of %s holds its address %s", c.Device().Name(), c.Device().Addr())
}

func (p *Pair) connect(e, peer *End) error {
	if err := e.QP.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1,
		AccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return err
	}
	if err := e.QP.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: p.mtu, DestQPN: peer.QP.QPN(),
		RQPSN: peer.PSN, MaxDestRDAtomic: 1, MinRNRTimer: 12,
		AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer.GID, SGIDIndex: uint8(p.gid), HopLimit: 64}}},
		verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
			verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return err
	}
	return e.QP.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: e.PSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
		verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|verbs.QPAttrMaxQPRDAtomic)
}

// Close releases both ends.
func (p *Pair) Close() {
	for _, e := range []*End{p.X, p.Y} {
		if e == nil {
			continue
		}
		if e.QP != nil {
			e.QP.Destroy()
		}
		if e.MR != nil {
			e.MR.Dereg()
		}
		if e.CQ != nil {
			e.CQ.Destroy()
		}
		if e.PD != nil {
			e.PD.Dealloc()
		}
		if e.Ctx != nil {
			e.Ctx.Close()
		}
	}
}

// Poll returns at least one successful completion: it polls, yielding,
// 64 times, then blocks on the CQ (a goroutine that never blocks starves
// the devices' receive path); it fails on an error completion or after
// WaitTimeout.
func (e *End) Poll() ([]verbs.WC, error) {
	for spins := 0; ; spins++ {
		n, err := e.CQ.Poll(e.wc[:])
		if err != nil {
			return nil, err
		}
		if n > 0 {
			for i := range e.wc[:n] {
				if e.wc[i].Status != verbs.WCSuccess {
					return nil, fmt.Errorf("work request %d: %s", e.wc[i].WRID, e.wc[i].Status)
				}
			}
			return e.wc[:n], nil
		}
		if spins < 64 {
			runtime.Gosched()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
		err = e.CQ.Wait(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("no completion within %v: %w", WaitTimeout, err)
		}
		spins = 0
	}
}

// RCWrite streams RDMA WRITEs of size bytes from X to Y, all signaled,
// with up to window outstanding. The pair's memory must hold window×size.
func RCWrite(p *Pair, size, window int, b Budget) (Result, error) {
	x, y := p.X, p.Y
	wrs := make([]verbs.SendWR, window)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{x.MR.SGE(i*size, size)}, RemoteAddr: y.MR.Addr() + uint64(i*size), RKey: y.MR.RKey()}
	}
	start := time.Now()
	ops, out := 0, 0
	for !b.done(ops, start) {
		for out >= window {
			wc, err := x.Poll()
			if err != nil {
				return Result{}, err
			}
			out -= len(wc)
		}
		if err := x.QP.PostSend(wrs[ops%window]); err != nil {
			return Result{}, err
		}
		out++
		ops++
	}
	for out > 0 {
		wc, err := x.Poll()
		if err != nil {
			return Result{}, err
		}
		out -= len(wc)
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(size), Elapsed: time.Since(start)}, nil
}

// RCSendPingPong bounces a size-byte SEND between X and Y; one op is a
// round trip. Sends are unsignaled; the ACKs retire them.
func RCSendPingPong(p *Pair, size int, b Budget) (Result, error) {
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
		for got := false; !got; {
			wc, err := to.e.Poll()
			if err != nil {
				return err
			}
			for _, w := range wc {
				got = got || w.Opcode.IsRecv()
			}
		}
		return to.e.QP.PostRecv(to.recv)
	}
	start := time.Now()
	ops := 0
	for !b.done(ops, start) {
		if err := hop(sx, sy); err != nil {
			return Result{}, err
		}
		if err := hop(sy, sx); err != nil {
			return Result{}, err
		}
		ops++
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(2*size), Elapsed: time.Since(start)}, nil
}

// RCWritePostList posts size-byte RDMA WRITEs list at a time (one
// PostSend call, the last signaled), with up to lists lists outstanding.
// One op is one message.
func RCWritePostList(p *Pair, size, list, lists int, b Budget) (Result, error) {
	x, y := p.X, p.Y
	wrs := make([]verbs.SendWR, list)
	for i := range wrs {
		wrs[i] = verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{x.MR.SGE(size*i, size)},
			RemoteAddr: y.MR.Addr() + uint64(size*i), RKey: y.MR.RKey()}
	}
	wrs[list-1].Flags = verbs.SendSignaled
	start := time.Now()
	ops, out := 0, 0
	for !b.done(ops, start) {
		for out >= lists {
			wc, err := x.Poll()
			if err != nil {
				return Result{}, err
			}
			out -= len(wc)
		}
		if err := x.QP.PostSend(wrs...); err != nil {
			return Result{}, err
		}
		out++
		ops += list
	}
	for out > 0 {
		wc, err := x.Poll()
		if err != nil {
			return Result{}, err
		}
		out -= len(wc)
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(size), Elapsed: time.Since(start)}, nil
}

// TCPPair returns a connected TCP pair on 127.0.0.1.
func TCPPair() (client, server net.Conn, err error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	client, err = net.DialTimeout("tcp4", ln.Addr().String(), WaitTimeout)
	if err != nil {
		return nil, nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			client.Close()
			return nil, nil, r.err
		}
		return client, r.c, nil
	case <-time.After(WaitTimeout):
		client.Close()
		return nil, nil, errors.New("accept timed out")
	}
}

// drain reads s to EOF in a goroutine and reports the result.
func drain(s net.Conn) chan error {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 256<<10)
		for {
			s.SetReadDeadline(time.Now().Add(WaitTimeout))
			if _, err := s.Read(buf); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- err
				return
			}
		}
	}()
	return done
}

// TCPStream writes size-byte buffers on a TCP loopback connection,
// drained by a reader goroutine: the baseline of RCWrite.
func TCPStream(size int, b Budget) (Result, error) {
	return tcpWrites(size, 1, b)
}

// TCPBatched writes size-byte messages batch at a time (one write call
// per batch): the baseline of RCWritePostList. One op is one message.
func TCPBatched(size, batch int, b Budget) (Result, error) {
	return tcpWrites(size, batch, b)
}

func tcpWrites(size, batch int, b Budget) (Result, error) {
	c, s, err := TCPPair()
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	defer s.Close()
	done := drain(s)
	buf := make([]byte, size*batch)
	start := time.Now()
	ops := 0
	for !b.done(ops, start) {
		c.SetWriteDeadline(time.Now().Add(WaitTimeout))
		if _, err := c.Write(buf); err != nil {
			return Result{}, err
		}
		ops += batch
	}
	c.(*net.TCPConn).CloseWrite()
	select {
	case err := <-done:
		if err != nil {
			return Result{}, err
		}
	case <-time.After(WaitTimeout):
		return Result{}, errors.New("reader did not finish")
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(size), Elapsed: time.Since(start)}, nil
}

// TCPPingPong echoes size bytes on a TCP loopback connection (Nagle off,
// blocking reads): the baseline of RCSendPingPong. One op is a round trip.
func TCPPingPong(size int, b Budget) (Result, error) {
	c, s, err := TCPPair()
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	defer s.Close()
	go func() {
		buf := make([]byte, size)
		for {
			s.SetDeadline(time.Now().Add(WaitTimeout))
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, size)
	start := time.Now()
	ops := 0
	for !b.done(ops, start) {
		c.SetDeadline(time.Now().Add(WaitTimeout))
		if _, err := c.Write(buf); err != nil {
			return Result{}, err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return Result{}, err
		}
		ops++
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(2*size), Elapsed: time.Since(start)}, nil
}

// String describes the budget.
func (b Budget) String() string {
	if b.Iters > 0 {
		return fmt.Sprintf("%d operations per workload", b.Iters)
	}
	return fmt.Sprintf("%v per workload", b.Duration)
}
