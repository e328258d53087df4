package rdmacm_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// loopbackAddr returns a random loopback address for an example's soft
// device: 127.x.y.z outside 127.0.0.0/24, where the automatically addressed
// devices of other processes live (the range of internal/testdev's
// devices). A program of your own would rather use configured devices (see
// verbs.Devices) or verbs.AddLoopbackDevice; rdmacm opens the device that
// holds an address when an id needs it.
func loopbackAddr() netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
}

// Dial returns a connected RC queue pair: post work requests on it at once.
// Here the client SENDs a message into a receive the server posted.
func ExampleDial() {
	srv, err := verbs.AddDevice("dial-server", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	cli, err := verbs.AddDevice("dial-client", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The server, on a port of its own choosing (0), in a goroutine here
	// (in another program normally): it accepts one connection, posts a
	// receive and reports what arrived.
	l, err := rdmacm.Listen(netip.AddrPortFrom(srv.Addr(), 0).String(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	received := make(chan string, 1)
	serverDone := make(chan struct{})
	go func() {
		defer close(serverDone)
		c, err := l.Accept(ctx)
		if err != nil {
			log.Print(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		mr, err := c.PD().RegMR(buf, verbs.AccessLocalWrite) // receives write into it
		if err != nil {
			log.Print(err)
			return
		}
		defer mr.Dereg()
		// A SEND that arrives before this receive is posted is not lost:
		// the server's QP answers "receiver not ready" and the client's
		// QP sends again after the RNR timer (rdma_cm's default: 655 ms),
		// forever with Options.RNRRetryCount 7, the default. Posting
		// receives before the peer can send avoids the wait (see
		// ExampleCreateEventChannel: there the server posts, then accepts).
		if err := c.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{mr.SGE(0, len(buf))}}); err != nil {
			log.Print(err)
			return
		}
		wc, err := c.ID().GetRecvComp(ctx)
		if err != nil {
			log.Print(err)
			return
		}
		received <- fmt.Sprintf("%s %s, %q", wc.Opcode, wc.Status, buf[:wc.ByteLen])
		select {
		case <-c.Done(): // the client disconnected
		case <-ctx.Done():
		}
	}()

	// The client: Dial resolves the address, connects through the CM and
	// returns with its QP in RTS.
	c, err := rdmacm.Dial(ctx, l.Addr().String(), &rdmacm.Options{Source: cli.Addr()})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("client QP:", c.QP().State())
	msg := []byte("hello over rdma_cm")
	mr, err := c.PD().RegMR(msg, 0) // only read locally, by SENDs: no access flag
	if err != nil {
		log.Fatal(err)
	}
	err = c.QP().PostSend(verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{mr.SGE(0, len(msg))}})
	if err != nil {
		log.Fatal(err)
	}
	wc, err := c.ID().GetSendComp(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("client:", wc.Opcode, wc.Status)
	select {
	case msg := <-received:
		fmt.Println("server:", msg)
	case <-serverDone:
		log.Fatal("the server failed")
	}
	// Deregister first: Close frees the connection's PD, which must have
	// no MR left.
	mr.Dereg()
	c.Close() // disconnects: the server's Done closes
	<-serverDone
	// Output:
	// client QP: RTS
	// client: SEND success
	// server: RECV success, "hello over rdma_cm"
}

// A listener accepts connections. Here the server's memory is the target of
// the client's RDMA WRITE: the server registers a buffer for remote writes
// in the connection's PD and SENDs its address and R_Key to the client, as
// rping does. The client's WRITE WITH IMMEDIATE then lands in the buffer and
// completes a receive on the server, telling it that the data is there.
func ExampleListen() {
	srv, err := verbs.AddDevice("listen-server", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	cli, err := verbs.AddDevice("listen-client", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := rdmacm.Listen(netip.AddrPortFrom(srv.Addr(), 0).String(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	// The client, in a goroutine here (in another program normally).
	clientDone := make(chan error, 1)
	go func() {
		clientDone <- func() error {
			c, err := rdmacm.Dial(ctx, l.Addr().String(), &rdmacm.Options{Source: cli.Addr()})
			if err != nil {
				return err
			}
			defer c.Close()
			// Receive the server's buffer address and R_Key.
			info := make([]byte, 12)
			imr, err := c.PD().RegMR(info, verbs.AccessLocalWrite)
			if err != nil {
				return err
			}
			defer imr.Dereg()
			if err := c.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{imr.SGE(0, len(info))}}); err != nil {
				return err
			}
			if wc, err := c.ID().GetRecvComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
				return fmt.Errorf("receiving the buffer's address: %v %v", wc.Status, err)
			}
			addr, rkey := binary.BigEndian.Uint64(info), binary.BigEndian.Uint32(info[8:])

			msg := []byte("written by the client")
			mr, err := c.PD().RegMR(msg, 0) // only read locally: no access flag
			if err != nil {
				return err
			}
			defer mr.Dereg()
			err = c.QP().PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWriteWithImm,
				Flags: verbs.SendSignaled, SGL: []verbs.SGE{mr.SGE(0, len(msg))},
				RemoteAddr: addr, RKey: rkey, ImmData: 42})
			if err != nil {
				return err
			}
			if wc, err := c.ID().GetSendComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
				return fmt.Errorf("WRITE: %v %v", wc.Status, err)
			}
			return nil
		}()
	}()

	c, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4096)
	mr, err := c.PD().RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Dereg()
	// The WRITE WITH IMMEDIATE consumes a receive (no buffer needed: the
	// data goes where the client writes it). Post it before the client
	// can write.
	if err := c.QP().PostRecv(verbs.RecvWR{ID: 1}); err != nil {
		log.Fatal(err)
	}
	info := binary.BigEndian.AppendUint64(nil, mr.Addr())
	info = binary.BigEndian.AppendUint32(info, mr.RKey())
	imr, err := c.PD().RegMR(info, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer imr.Dereg()
	err = c.QP().PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{imr.SGE(0, len(info))}})
	if err != nil {
		log.Fatal(err)
	}
	if wc, err := c.ID().GetSendComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
		log.Fatal("sending the buffer's address: ", wc.Status, err)
	}

	wc, err := c.ID().GetRecvComp(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("server: %s %s, immediate %d, %d bytes: %q\n", wc.Opcode, wc.Status, wc.ImmData, wc.ByteLen, buf[:wc.ByteLen])
	if err := <-clientDone; err != nil {
		log.Fatal(err)
	}
	// Output:
	// server: RECV_RDMA_WITH_IMM success, immediate 42, 21 bytes: "written by the client"
}

// The librdmacm API as C programs use it: ids report what happens to them
// as events on an event channel, and the program takes each step when the
// previous one's event arrives (rping, ucmatose). Both ends run here in one
// goroutine, each with a channel of its own.
func ExampleCreateEventChannel() {
	srv, err := verbs.AddDevice("events-server", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	cli, err := verbs.AddDevice("events-client", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// expect takes the next event of ch, which should be of type want.
	expect := func(who string, ch *rdmacm.EventChannel, want rdmacm.EventType) *rdmacm.Event {
		ev, err := ch.GetCMEvent(ctx) // rdma_get_cm_event
		if err != nil {
			log.Fatal(err)
		}
		if ev.Type != want {
			log.Fatalf("%s: %v, want %v", who, ev, want)
		}
		fmt.Println(who+":", ev.Type)
		ev.Ack()
		return ev
	}
	qpInit := &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}

	// Server: an id bound to its address listens.
	sch, err := rdmacm.CreateEventChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer sch.Destroy()
	lid, err := rdmacm.CreateID(sch, nil, rdmacm.PSTCP)
	if err != nil {
		log.Fatal(err)
	}
	defer lid.Destroy()
	if err := lid.BindAddr(netip.AddrPortFrom(srv.Addr(), 0)); err != nil { // port 0: any free port
		log.Fatal(err)
	}
	if err := lid.Listen(8); err != nil {
		log.Fatal(err)
	}

	// Client: resolve the address (which device, which local address),
	// then the route, create the QP, connect.
	cch, err := rdmacm.CreateEventChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer cch.Destroy()
	cid, err := rdmacm.CreateID(cch, nil, rdmacm.PSTCP)
	if err != nil {
		log.Fatal(err)
	}
	defer cid.Destroy()
	err = cid.ResolveAddr(ctx, netip.AddrPortFrom(cli.Addr(), 0), lid.SrcAddr(), 2*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	expect("client", cch, rdmacm.EventAddrResolved)
	if err := cid.ResolveRoute(ctx, 2*time.Second); err != nil {
		log.Fatal(err)
	}
	expect("client", cch, rdmacm.EventRouteResolved)
	if err := cid.CreateQP(nil, qpInit); err != nil { // on the device's PD, with CQs of its own
		log.Fatal(err)
	}
	defer cid.DestroyQP()
	if err := cid.Connect(ctx, nil); err != nil { // nil: librdmacm's defaults
		log.Fatal(err)
	}

	// Server: the request comes with a new id for the connection; give it
	// a QP, post a receive, accept.
	sid := expect("server", sch, rdmacm.EventConnectRequest).ID
	defer sid.Destroy()
	if err := sid.CreateQP(nil, qpInit); err != nil {
		log.Fatal(err)
	}
	defer sid.DestroyQP()
	rbuf := make([]byte, 64)
	rmr, err := sid.RegMsgs(rbuf)
	if err != nil {
		log.Fatal(err)
	}
	defer rmr.Dereg()
	if err := sid.PostRecv(1, rbuf, rmr); err != nil {
		log.Fatal(err)
	}
	if err := sid.Accept(ctx, nil); err != nil {
		log.Fatal(err)
	}
	expect("client", cch, rdmacm.EventEstablished)
	expect("server", sch, rdmacm.EventEstablished)

	// A SEND with rdma_verbs.h's helpers.
	sbuf := []byte("hello, server")
	smr, err := cid.RegMsgs(sbuf)
	if err != nil {
		log.Fatal(err)
	}
	defer smr.Dereg()
	if err := cid.PostSend(1, sbuf, smr, verbs.SendSignaled); err != nil {
		log.Fatal(err)
	}
	wc, err := sid.GetRecvComp(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("server: %s %s, %q\n", wc.Opcode, wc.Status, rbuf[:wc.ByteLen])
	if wc, err = cid.GetSendComp(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("client:", wc.Opcode, wc.Status)

	// The client hangs up (DREQ); the server answers (DREP).
	if err := cid.Disconnect(); err != nil {
		log.Fatal(err)
	}
	expect("server", sch, rdmacm.EventDisconnected)
	if err := sid.Disconnect(); err != nil {
		log.Fatal(err)
	}
	expect("client", cch, rdmacm.EventDisconnected)
	// Output:
	// client: RDMA_CM_EVENT_ADDR_RESOLVED
	// client: RDMA_CM_EVENT_ROUTE_RESOLVED
	// server: RDMA_CM_EVENT_CONNECT_REQUEST
	// client: RDMA_CM_EVENT_ESTABLISHED
	// server: RDMA_CM_EVENT_ESTABLISHED
	// server: RECV success, "hello, server"
	// client: SEND success
	// server: RDMA_CM_EVENT_DISCONNECTED
	// client: RDMA_CM_EVENT_DISCONNECTED
}
