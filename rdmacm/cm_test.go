package rdmacm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// pair is a listener on one device and a client id on another, both
// asynchronous, with channels.
type pair struct {
	t        *testing.T
	srv, cli netip.Addr
	sch, cch *rdmacm.EventChannel
	lid      *rdmacm.ID
	port     uint16
}

func newPair(t *testing.T, backlog int) *pair {
	p := &pair{t: t, srv: newDevice(t), cli: newDevice(t)}
	var err error
	p.sch, err = rdmacm.CreateEventChannel()
	must(t, err)
	p.cch, err = rdmacm.CreateEventChannel()
	must(t, err)
	p.lid, err = rdmacm.CreateID(p.sch, nil, rdmacm.PSTCP)
	must(t, err)
	must(t, p.lid.BindAddr(netip.AddrPortFrom(p.srv, 0)))
	must(t, p.lid.Listen(backlog))
	p.port = p.lid.SrcPort()
	t.Cleanup(func() {
		p.lid.Destroy()
		p.sch.Destroy()
		p.cch.Destroy()
	})
	return p
}

// dial creates a client id with a QP, resolved and connecting to the
// listener; fast makes its CM retransmit every ~80 ms, 3 times.
func (p *pair) dial(pdata []byte, fast bool) *rdmacm.ID {
	t := p.t
	t.Helper()
	ctx := tctx(t)
	id, err := rdmacm.CreateID(p.cch, nil, rdmacm.PSTCP)
	must(t, err)
	if fast {
		id.SetAckTimeout(12)
		id.SetCMTimeouts(14, 3)
	}
	must(t, id.ResolveAddr(ctx, netip.AddrPortFrom(p.cli, 0), netip.AddrPortFrom(p.srv, p.port), time.Second))
	next(t, p.cch, rdmacm.EventAddrResolved)
	must(t, id.ResolveRoute(ctx, time.Second))
	next(t, p.cch, rdmacm.EventRouteResolved)
	must(t, id.CreateQP(nil, nil))
	t.Cleanup(func() { id.DestroyQP(); id.Destroy() })
	must(t, id.Connect(ctx, &rdmacm.ConnParam{PrivateData: pdata, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}))
	return id
}

// TestReject: the server refuses with private data: REJECTED, status 28
// (consumer defined), the 148 bytes of private data.
func TestReject(t *testing.T) {
	p := newPair(t, 0)
	p.dial([]byte("let me in"), false)
	req := next(t, p.sch, rdmacm.EventConnectRequest)
	must(t, req.ID.Reject([]byte("not today")))
	ev := next(t, p.cch, rdmacm.EventRejected)
	if ev.Status != mad.RejConsumerDefined || len(ev.Conn.PrivateData) != 148 || !bytes.HasPrefix(ev.Conn.PrivateData, []byte("not today")) {
		t.Fatalf("REJECTED %d %q", ev.Status, ev.Conn.PrivateData[:12])
	}
	if err := req.ID.Reject(make([]byte, 149)); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("149 bytes of REJ private data: %v", err)
	}
	req.ID.Destroy()
}

// TestPrivateDataLimits: 56 bytes of REQ private data (180 for UD), 196
// for REP.
func TestPrivateDataLimits(t *testing.T) {
	p := newPair(t, 0)
	ctx := tctx(t)
	id, err := rdmacm.CreateID(p.cch, nil, rdmacm.PSTCP)
	must(t, err)
	defer id.Destroy()
	must(t, id.ResolveAddr(ctx, netip.AddrPortFrom(p.cli, 0), netip.AddrPortFrom(p.srv, p.port), time.Second))
	must(t, id.ResolveRoute(ctx, time.Second))
	if err := id.Connect(ctx, &rdmacm.ConnParam{PrivateData: make([]byte, 57)}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("57 bytes: %v", err)
	}
	full := bytes.Repeat([]byte{0xAB}, 56)
	must(t, id.Connect(ctx, &rdmacm.ConnParam{PrivateData: full}))
	req := next(t, p.sch, rdmacm.EventConnectRequest)
	if !bytes.Equal(req.Conn.PrivateData, full) {
		t.Fatalf("CONNECT_REQUEST private data % x", req.Conn.PrivateData)
	}
	must(t, req.ID.CreateQP(nil, nil))
	if err := req.ID.Accept(ctx, &rdmacm.ConnParam{PrivateData: make([]byte, 197)}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("197 bytes of REP private data: %v", err)
	}
	req.ID.DestroyQP()
	req.ID.Destroy()
}

// TestBacklogFull: with backlog 1, a second REQ is dropped unanswered
// while the first CONNECT_REQUEST is untaken; once it is taken, the second
// client's retransmission gets through.
func TestBacklogFull(t *testing.T) {
	p := newPair(t, 1)
	p.dial([]byte("first"), true)
	srvDev := soft.Lookup(p.srv)
	waitFor(t, "first REQ", func() bool { return srvDev.CM().Conns() == 1 })
	p.dial([]byte("second"), true)
	// Its REQ and first retransmission are dropped: no REJ, no new
	// connection at the server.
	time.Sleep(200 * time.Millisecond)
	if n := srvDev.CM().Conns(); n != 1 {
		t.Fatalf("server tracks %d connections with a full backlog", n)
	}
	if _, ok, _ := p.cch.TryGetCMEvent(); ok {
		t.Fatal("the client of a full backlog heard something")
	}
	first := next(t, p.sch, rdmacm.EventConnectRequest)
	second := next(t, p.sch, rdmacm.EventConnectRequest)
	if !bytes.HasPrefix(first.Conn.PrivateData, []byte("first")) || !bytes.HasPrefix(second.Conn.PrivateData, []byte("second")) {
		t.Fatalf("requests %q %q", first.Conn.PrivateData[:6], second.Conn.PrivateData[:6])
	}
	first.ID.Destroy()
	second.ID.Destroy()
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 3000; i++ {
		if cond() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestServerVanishes: a REQ to a device that died goes unanswered; after
// its retransmissions the client sees UNREACHABLE, status −ETIMEDOUT.
func TestServerVanishes(t *testing.T) {
	p := newPair(t, 0)
	machineDies(t, p.srv) // the server's machine is gone
	p.dial(nil, true)
	ev := next(t, p.cch, rdmacm.EventUnreachable)
	if ev.Status != -int(syscall.ETIMEDOUT) {
		t.Fatalf("UNREACHABLE status %d", ev.Status)
	}
}

// TestClientVanishesMidHandshake: the server accepts, but no RTU ever
// comes (the client sends its REQ and is gone): after the REP's
// retransmissions the server sees UNREACHABLE.
func TestClientVanishesMidHandshake(t *testing.T) {
	p := newPair(t, 0)
	// A raw IB CM client that never answers the REP.
	cm := soft.Lookup(p.cli).CM()
	c, err := cm.Connect(&ibcm.ConnectParams{
		Path:      ibcm.Path{Local: p.cli, Remote: p.srv, HopLimit: 64, MTU: 3, PacketLifeTime: 11},
		ServiceID: rdmacm.PSTCP.ServiceID(p.port), QPN: 0x99, RemoteCMResponseTimeout: 14, LocalCMResponseTimeout: 14,
		RetryCount: 7, RNRRetryCount: 7,
		MaxCMRetries: 2, LocalACKDelay: 15, PrivateData: cmaHeader(p.cli, 5555, p.srv),
	}, func(*ibcm.Conn, *ibcm.Event) error { return nil })
	must(t, err)
	defer c.Destroy()
	req := next(t, p.sch, rdmacm.EventConnectRequest)
	machineDies(t, p.cli) // the client's machine dies
	must(t, req.ID.CreateQP(nil, nil))
	defer req.ID.Destroy()
	defer req.ID.DestroyQP()
	must(t, req.ID.Accept(tctx(t), nil))
	ev := next(t, p.sch, rdmacm.EventUnreachable)
	if ev.Status != -int(syscall.ETIMEDOUT) || ev.ID != req.ID {
		t.Fatalf("UNREACHABLE %+v", ev)
	}
}

// machineDies stops the device on addr and keeps its RoCE port bound by a
// socket that never answers: a dead machine, whose address no device takes
// and answers for — a stateless DREP, a REJ — which is right for such a
// device, and not what these tests are about. (Test devices live outside
// 127.0.0.0/24, where other processes' devices pick their addresses, so
// nobody takes it in between either.)
func machineDies(t *testing.T, addr netip.Addr) {
	t.Helper()
	soft.Lookup(addr).Close()
	// The closed device's socket is gone when Close returns; should the
	// kernel still hold the port for a moment, try again, for 2 s at most.
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, link.RoCEPort)))
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			t.Fatalf("binding the dead machine's address %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func cmaHeader(src netip.Addr, port uint16, dst netip.Addr) []byte {
	b := make([]byte, mad.CMAHeaderLen)
	mad.CMAHeader(b).Encode(port, src, dst)
	return b
}

// TestPeerVanishesEstablished: after ESTABLISHED the server's machine
// dies; the client's Disconnect gets no DREP and, after the DREQ's
// retransmissions, DISCONNECTED with status −ETIMEDOUT, then
// TIMEWAIT_EXIT.
func TestPeerVanishesEstablished(t *testing.T) {
	p := newPair(t, 0)
	id := p.dial(nil, true)
	req := next(t, p.sch, rdmacm.EventConnectRequest)
	must(t, req.ID.CreateQP(nil, nil))
	must(t, req.ID.Accept(tctx(t), nil))
	next(t, p.cch, rdmacm.EventEstablished)
	next(t, p.sch, rdmacm.EventEstablished)
	machineDies(t, p.srv)
	must(t, id.Disconnect())
	ev := next(t, p.cch, rdmacm.EventDisconnected)
	if ev.Status != -int(syscall.ETIMEDOUT) {
		t.Fatalf("DISCONNECTED status %d", ev.Status)
	}
	next(t, p.cch, rdmacm.EventTimewaitExit)
	req.ID.DestroyQP()
	req.ID.Destroy()
}

// TestDisconnectBothSides: the passive side disconnects first; then both
// at once.
func TestDisconnectBothSides(t *testing.T) {
	p := newPair(t, 0)
	for round := range 2 {
		id := p.dial(nil, false)
		req := next(t, p.sch, rdmacm.EventConnectRequest)
		must(t, req.ID.CreateQP(nil, nil))
		must(t, req.ID.Accept(tctx(t), nil))
		next(t, p.cch, rdmacm.EventEstablished)
		next(t, p.sch, rdmacm.EventEstablished)
		if round == 0 {
			must(t, req.ID.Disconnect())
			next(t, p.cch, rdmacm.EventDisconnected)
			must(t, id.Disconnect())
			next(t, p.sch, rdmacm.EventDisconnected)
		} else {
			// DREQs cross: each side takes the other's as the
			// disconnect (DISCONNECTED) and, as with Linux, answers
			// it when the application calls Disconnect again.
			must(t, req.ID.Disconnect())
			must(t, id.Disconnect())
			next(t, p.cch, rdmacm.EventDisconnected)
			next(t, p.sch, rdmacm.EventDisconnected)
			must(t, req.ID.Disconnect())
			must(t, id.Disconnect())
		}
		next(t, p.cch, rdmacm.EventTimewaitExit)
		next(t, p.sch, rdmacm.EventTimewaitExit)
		req.ID.DestroyQP()
		req.ID.Destroy()
	}
}

// TestSync: the synchronous API of rdma_server/rdma_client: GetAddrInfo,
// CreateEP, Listen, GetRequest, Accept, Connect, PostRecv/PostSend,
// GetRecvComp/GetSendComp, Disconnect, DestroyEP.
func TestSync(t *testing.T) {
	srv, cli := newDevice(t), newDevice(t)
	ctx := tctx(t)
	res, err := rdmacm.GetAddrInfo(ctx, srv.String(), "0", &rdmacm.AddrInfo{Flags: rdmacm.RAIPassive})
	must(t, err)
	if len(res) != 1 || res[0].SrcAddr.Addr() != srv || res[0].PortSpace != rdmacm.PSTCP || res[0].Family != rdmacm.AFInet {
		t.Fatalf("passive addrinfo %+v", res[0])
	}
	attr := &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}, SigAll: true}
	lid, err := rdmacm.CreateEP(ctx, res[0], nil, attr)
	must(t, err)
	defer lid.DestroyEP()
	must(t, lid.Listen(0))
	port := lid.SrcPort()

	type result struct {
		msg []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		done <- func() result {
			id, err := lid.GetRequest(ctx)
			if err != nil {
				return result{err: err}
			}
			defer id.DestroyEP()
			buf := make([]byte, 16)
			mr, err := id.RegMsgs(buf)
			if err != nil {
				return result{err: err}
			}
			defer mr.Dereg()
			if err := id.PostRecv(1, buf, mr); err != nil {
				return result{err: err}
			}
			if err := id.Accept(ctx, nil); err != nil {
				return result{err: err}
			}
			wc, err := id.GetRecvComp(ctx)
			if err != nil || wc.Status != verbs.WCSuccess {
				return result{err: fmt.Errorf("recv %+v %v", wc, err)}
			}
			msg := append([]byte(nil), buf[:wc.ByteLen]...)
			if err := id.PostSend(2, buf[:wc.ByteLen], mr, verbs.SendInline); err != nil {
				return result{err: err}
			}
			if wc, err := id.GetSendComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
				return result{err: fmt.Errorf("send %+v %v", wc, err)}
			}
			if ev, err := id.Channel().GetCMEvent(ctx); err != nil || ev.Type != rdmacm.EventDisconnected {
				return result{err: fmt.Errorf("server: %v %v", ev, err)}
			}
			id.Disconnect()
			return result{msg: msg}
		}()
	}()

	res, err = rdmacm.GetAddrInfo(ctx, srv.String(), fmt.Sprint(port), &rdmacm.AddrInfo{SrcAddr: netip.AddrPortFrom(cli, 0)})
	must(t, err)
	id, err := rdmacm.CreateEP(ctx, res[0], nil, attr)
	must(t, err)
	defer id.DestroyEP()
	buf := []byte("sync hello")
	rbuf := make([]byte, 16)
	mr, err := id.RegMsgs(buf)
	must(t, err)
	defer mr.Dereg()
	rmr, err := id.RegMsgs(rbuf)
	must(t, err)
	defer rmr.Dereg()
	must(t, id.PostRecv(1, rbuf, rmr))
	must(t, id.Connect(ctx, nil))
	must(t, id.PostSend(2, buf, mr, 0))
	if wc, err := id.GetSendComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
		t.Fatalf("send %+v %v", wc, err)
	}
	if wc, err := id.GetRecvComp(ctx); err != nil || wc.Status != verbs.WCSuccess || string(rbuf[:wc.ByteLen]) != "sync hello" {
		t.Fatalf("recv %+v %v %q", wc, err, rbuf)
	}
	must(t, id.Disconnect())
	r := <-done
	if r.err != nil || string(r.msg) != "sync hello" {
		t.Fatalf("server: %v %q", r.err, r.msg)
	}
}

// TestUD: a UD id resolves the peer's QPN and Q_Key with SIDR, then sends
// it a datagram; a rejection and a missing listener fail the connect with
// UNREACHABLE, status 2 and 1.
func TestUD(t *testing.T) {
	srv, cli := newDevice(t), newDevice(t)
	ctx := tctx(t)
	sch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer sch.Destroy()
	lid, err := rdmacm.CreateID(sch, nil, rdmacm.PSUDP)
	must(t, err)
	defer lid.Destroy()
	must(t, lid.BindAddr(netip.AddrPortFrom(srv, 0)))
	must(t, lid.Listen(0))
	cch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer cch.Destroy()
	connect := func(port uint16, pdata string) (*rdmacm.ID, *rdmacm.Event) {
		id, err := rdmacm.CreateID(cch, nil, rdmacm.PSUDP)
		must(t, err)
		t.Cleanup(func() { id.DestroyQP(); id.Destroy() })
		must(t, id.ResolveAddr(ctx, netip.AddrPortFrom(cli, 0), netip.AddrPortFrom(srv, port), time.Second))
		next(t, cch, rdmacm.EventAddrResolved)
		must(t, id.ResolveRoute(ctx, time.Second))
		next(t, cch, rdmacm.EventRouteResolved)
		must(t, id.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}))
		if id.QP().State() != verbs.QPStateRTS {
			t.Fatalf("UD QP in %v", id.QP().State())
		}
		must(t, id.Connect(ctx, &rdmacm.ConnParam{PrivateData: []byte(pdata)}))
		return id, nil
	}
	// Accepted.
	cid, _ := connect(lid.SrcPort(), "udp hello")
	req := next(t, sch, rdmacm.EventConnectRequest)
	if len(req.UD.PrivateData) != 180 || !bytes.HasPrefix(req.UD.PrivateData, []byte("udp hello")) {
		t.Fatalf("UD CONNECT_REQUEST %q", req.UD.PrivateData[:10])
	}
	sid := req.ID
	defer sid.Destroy()
	must(t, sid.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	defer sid.DestroyQP()
	rbuf := make([]byte, verbs.GRHLen+64)
	rmr, err := sid.RegMsgs(rbuf)
	must(t, err)
	defer rmr.Dereg()
	must(t, sid.PostRecv(7, rbuf, rmr))
	must(t, sid.Accept(ctx, &rdmacm.ConnParam{PrivateData: []byte("udp welcome")}))
	est := next(t, cch, rdmacm.EventEstablished)
	if est.UD.QPNum != sid.QP().QPN() || est.UD.QKey != rdmacm.UDPQKey || est.UD.AHAttr.GRH.DGID.IP() != srv ||
		!bytes.HasPrefix(est.UD.PrivateData, []byte("udp welcome")) {
		t.Fatalf("UD ESTABLISHED %+v", est.UD)
	}
	ah, err := cid.PD().CreateAH(est.UD.AHAttr)
	must(t, err)
	defer ah.Destroy()
	msg := []byte("datagram")
	mr, err := cid.RegMsgs(msg)
	must(t, err)
	defer mr.Dereg()
	must(t, cid.PostUDSend(1, msg, mr, verbs.SendSignaled, ah, est.UD.QPNum))
	if wc, err := sid.GetRecvComp(ctx); err != nil || wc.Status != verbs.WCSuccess || string(rbuf[verbs.GRHLen:wc.ByteLen]) != "datagram" {
		t.Fatalf("UD receive %+v %v", wc, err)
	}
	// Rejected: SIDR status 2.
	connect(lid.SrcPort(), "again")
	req = next(t, sch, rdmacm.EventConnectRequest)
	must(t, req.ID.Reject([]byte("no")))
	if ev := next(t, cch, rdmacm.EventUnreachable); ev.Status != mad.SIDRReject {
		t.Fatalf("rejected UD connect: status %d", ev.Status)
	}
	req.ID.Destroy()
	// No listener: SIDR status 1.
	connect(lid.SrcPort()+1, "nobody")
	if ev := next(t, cch, rdmacm.EventUnreachable); ev.Status != mad.SIDRUnsupported {
		t.Fatalf("UD connect without listener: status %d", ev.Status)
	}
}

// TestDialListen: the Go API: Listen, Dial, private data both ways, a SEND
// each way, Close from the dialer, Done on the acceptor.
func TestDialListen(t *testing.T) {
	srv, cli := newDevice(t), newDevice(t)
	l, err := rdmacm.Listen(netip.AddrPortFrom(srv, 0).String(), &rdmacm.Options{PrivateData: []byte("server says hi")})
	must(t, err)
	defer l.Close()
	c, s := dialAccept(t, l, &rdmacm.Options{Source: cli, PrivateData: []byte("client says hi")})
	if !bytes.HasPrefix(c.PeerPrivateData(), []byte("server says hi")) || !bytes.HasPrefix(s.PeerPrivateData(), []byte("client says hi")) {
		t.Fatal("private data")
	}
	if c.RemoteAddr() != l.Addr() || s.RemoteAddr() != c.LocalAddr() || c.QP().State() != verbs.QPStateRTS {
		t.Fatalf("addresses %v %v %v", c.RemoteAddr(), s.RemoteAddr(), c.LocalAddr())
	}
	exchangeAndClose(t, c, s)
}

// exchangeAndClose sends a message each way between the dialer c and the
// acceptor s, closes c and waits for s to see it.
func exchangeAndClose(t *testing.T, c, s *rdmacm.Conn) {
	t.Helper()
	exchange(t, c, s, "one way")
	exchange(t, s, c, "and back")
	must(t, c.Close())
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("acceptor did not see the disconnect")
	}
	must(t, s.Close())
}

// dialAccept dials l with opts while l accepts, and returns both ends.
func dialAccept(t *testing.T, l *rdmacm.Listener, opts *rdmacm.Options) (c, s *rdmacm.Conn) {
	t.Helper()
	ctx := tctx(t)
	acc := make(chan *rdmacm.Conn, 1)
	errc := make(chan error, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			errc <- err
			return
		}
		acc <- c
	}()
	c, err := rdmacm.Dial(ctx, l.Addr().String(), opts)
	must(t, err)
	select {
	case s = <-acc:
	case err := <-errc:
		t.Fatal(err)
	}
	return c, s
}

// exchange sends msg from a to b.
func exchange(t *testing.T, a, b *rdmacm.Conn, msg string) {
	t.Helper()
	rbuf := make([]byte, 64)
	rmr, err := b.PD().RegMR(rbuf, verbs.AccessLocalWrite)
	must(t, err)
	defer rmr.Dereg()
	must(t, b.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{rmr.SGE(0, 64)}}))
	sbuf := []byte(msg)
	smr, err := a.PD().RegMR(sbuf, 0)
	must(t, err)
	defer smr.Dereg()
	must(t, a.QP().PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{smr.SGE(0, len(sbuf))}}))
	if wc := waitWC(t, b.RecvCQ()); wc.Status != verbs.WCSuccess || string(rbuf[:wc.ByteLen]) != msg {
		t.Fatalf("receive %+v %q", wc, rbuf)
	}
	if wc := waitWC(t, a.SendCQ()); wc.Status != verbs.WCSuccess {
		t.Fatalf("send %+v", wc)
	}
}

// TestDialRefused: Dial to a port nobody listens on fails with REJ 8.
func TestDialRefused(t *testing.T) {
	srv, cli := newDevice(t), newDevice(t)
	_, err := rdmacm.Dial(tctx(t), netip.AddrPortFrom(srv, 9).String(), &rdmacm.Options{Source: cli})
	var rej *rdmacm.RejectedError
	if !errors.As(err, &rej) || rej.Reason != mad.RejInvalidServiceID {
		t.Fatalf("Dial: %v", err)
	}
}

// TestThousandConnections opens and closes 1,000 connections; afterwards
// no goroutine and no file descriptor is left over, and the CMs track
// nothing but connections still in TimeWait.
func TestThousandConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	srv, cli := newDevice(t), newDevice(t)
	ctx := tctx(t)
	l, err := rdmacm.Listen(netip.AddrPortFrom(srv, 0).String(), &rdmacm.Options{Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	must(t, err)
	// Warm up once so lazily created state exists before counting.
	cycle := func() {
		acc := make(chan *rdmacm.Conn, 1)
		go func() {
			c, err := l.Accept(ctx)
			if err != nil {
				t.Error(err)
			}
			acc <- c
		}()
		c, err := rdmacm.Dial(ctx, l.Addr().String(), &rdmacm.Options{Source: cli, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		must(t, err)
		s := <-acc
		if s == nil {
			t.FailNow()
		}
		must(t, c.Close())
		<-s.Done()
		must(t, s.Close())
	}
	cycle()
	// The links open send-only sockets for QP source ports, up to a cap;
	// those are not leaks.
	srcPorts := func() int {
		n := 0
		for _, a := range []netip.Addr{srv, cli} {
			if u, ok := soft.Lookup(a).Link().(*link.UDP); ok {
				n += u.Stats().SourcePorts
			}
		}
		return n
	}
	fds, gs, sp := countFDs(t), runtime.NumGoroutine(), srcPorts()
	for range 1000 {
		cycle()
	}
	must(t, l.Close())
	// Timers of the connections' TimeWait (512 ms) finish.
	waitFor(t, "TimeWait to end", func() bool {
		return soft.Lookup(srv).CM().Conns() == 0 && soft.Lookup(cli).CM().Conns() == 0
	})
	if n, extra := countFDs(t), srcPorts()-sp; n > fds+extra {
		t.Fatalf("file descriptors: %d before, %d after (%d source-port sockets opened)", fds, n, extra)
	}
	waitFor(t, "goroutines to finish", func() bool { return runtime.NumGoroutine() <= gs })
}

func countFDs(t testing.TB) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(es)
}

// TestGetAddrInfo: names, services, flags.
func TestGetAddrInfo(t *testing.T) {
	ctx := tctx(t)
	r, err := rdmacm.GetAddrInfo(ctx, "127.0.0.1", "7471", nil)
	must(t, err)
	if r[0].DstAddr != netip.MustParseAddrPort("127.0.0.1:7471") || r[0].QPType != verbs.QPTypeRC || r[0].PortSpace != rdmacm.PSTCP {
		t.Fatalf("%+v", r[0])
	}
	r, err = rdmacm.GetAddrInfo(ctx, "", "7174", &rdmacm.AddrInfo{Flags: rdmacm.RAIPassive, PortSpace: rdmacm.PSUDP})
	must(t, err)
	if !r[0].SrcAddr.Addr().IsUnspecified() || r[0].SrcAddr.Port() != 7174 || r[0].QPType != verbs.QPTypeUD {
		t.Fatalf("%+v", r[0])
	}
	if _, err := rdmacm.GetAddrInfo(ctx, "localhost", "1", &rdmacm.AddrInfo{Flags: rdmacm.RAINumericHost}); err == nil {
		t.Fatal("RAI_NUMERICHOST accepted a name")
	}
	if _, err := rdmacm.GetAddrInfo(ctx, "", "1", nil); err == nil {
		t.Fatal("active getaddrinfo without a node")
	}
	_ = context.Background
}
