// Command rc-write walks through the first things an RDMA program does, one
// step at a time, and explains each: memory regions and their access flags,
// a reliable connection (RC) made by the connection manager, telling the
// peer where its memory is, an RDMA WRITE with immediate data, an RDMA
// READ, an atomic — and, on purpose, an RDMA WRITE into memory that does
// not allow it, which breaks the connection.
//
// Both ends run in this process on one device, connected to itself through
// its own IP address:
//
//	go run ./examples/rc-write            # a new soft RoCEv2 device
//	go run ./examples/rc-write -d rxe0    # a kernel device
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

const (
	// imm travels with the WRITE and shows up in the receiver's completion.
	imm = 0xC0FFEE42
	// message is what the client writes into the server's memory.
	message = "written by RDMA WRITE WITH IMMEDIATE: no CPU on the server copied this"
	// secret is what the server lets its peer read.
	secret = "readable by RDMA READ, but not writable by anyone remote"
	// timeout bounds the whole program: every wait below ends by then.
	timeout = 30 * time.Second
)

// main parses -d and runs the program; errors go to stderr, exit status 1.
func main() {
	o := exdev.Flags()
	flag.Parse()
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "rc-write:", err)
		os.Exit(1)
	}
}

// run is the program: it prints each step to w and fails if anything does
// not turn out as explained, the refused WRITE included.
func run(w io.Writer, o *exdev.Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	// 1. The device, and the IP address the connection manager finds it by.
	dev, err := o.Open("rcwrite")
	if err != nil {
		return fmt.Errorf("opening the device: %w", err)
	}
	defer dev.Close()
	ip, gid, err := exdev.Addr(dev)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "1. device %s, IP address %s (GID index %d)\n", dev.Device().Name(), ip, gid)

	// 2. Connect. rdmacm does what ibv_rc_pingpong does by hand: it
	// creates an RC QP for each end and moves it RESET → INIT → RTR →
	// RTS with the peer's QP number and starting PSN, exchanged in the
	// IB CM's REQ/REP/RTU.
	server, client, err := connect(ctx, ip)
	if err != nil {
		return err
	}
	defer server.Close() // deferred calls run last-in first-out:
	defer client.Close() // the MRs registered below go before their PDs
	fmt.Fprintf(w, "2. connected through rdmacm (Listen + Dial on %s): server QP 0x%06x, client QP 0x%06x, both %s\n",
		server.LocalAddr(), server.QP().QPN(), client.QP().QPN(), client.QP().State())
	fmt.Fprintln(w, "   rdmacm made an RC QP for each end and took it RESET → INIT → RTR → RTS with the peer's QP number and PSN")

	// 3. Memory. A protection domain (PD) groups a QP with the memory
	// regions it may use; rdmacm gave each connection one of its own.
	// Registering memory (ibv_reg_mr) pins it and returns two keys: the
	// lkey for our own work requests, the rkey for the peer's.
	fmt.Fprintln(w, "3. memory regions: each in the PD of the QP that uses it; the access flags say who may do what")
	mrs := newRegions(w)
	defer mrs.close()
	inbox := mrs.reg("server inbox", server.PD(), make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite,
		"the peer may RDMA WRITE into it (REMOTE_WRITE needs LOCAL_WRITE too)")
	readonly := mrs.reg("server readonly", server.PD(), []byte(secret), verbs.AccessRemoteRead,
		"the peer may RDMA READ it; nobody may write it, not even our own device")
	counter := mrs.reg("server counter", server.PD(), make([]byte, 64), verbs.AccessLocalWrite|verbs.AccessRemoteAtomic,
		"the peer may run atomics on its 8-byte words (8-byte aligned)")
	adv := mrs.reg("server adv", server.PD(), make([]byte, advLen), 0,
		"no flag: our device only reads it (the source of a SEND); no remote access")
	src := mrs.reg("client src", client.PD(), []byte(message), 0,
		"no flag: the source of our RDMA WRITE, our device only reads it")
	dst := mrs.reg("client dst", client.PD(), make([]byte, 4096), verbs.AccessLocalWrite,
		"our device writes into it: received messages, READ data, atomic results")
	if mrs.err != nil {
		return mrs.err
	}
	// libibverbs' rule: remote writes and atomics change memory, so the
	// local device must be allowed to write it as well.
	if bad, err := server.PD().RegMR(make([]byte, 64), verbs.AccessRemoteWrite); err == nil {
		bad.Dereg()
		return errors.New("REMOTE_WRITE without LOCAL_WRITE was accepted")
	} else {
		fmt.Fprintf(w, "   REMOTE_WRITE without LOCAL_WRITE is refused: %v\n", err)
	}
	if addr := counter.Addr(); addr%8 != 0 {
		return fmt.Errorf("the counter at 0x%x is not 8-byte aligned: atomics need that", addr)
	}

	// 4. Tell the peer where the memory is. RDMA needs the remote
	// address and rkey; they travel in an ordinary SEND, which consumes
	// a receive the client posted first (into memory with LOCAL_WRITE).
	if err := client.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{dst.SGE(0, advLen)}}); err != nil {
		return fmt.Errorf("client: post receive: %w", err)
	}
	putAdv(adv.Bytes(), inbox, readonly, counter)
	if err := server.QP().PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{adv.SGE(0, advLen)}}); err != nil {
		return fmt.Errorf("server: post SEND: %w", err)
	}
	if _, err := want(ctx, server.SendCQ(), "server SEND", verbs.WCSuccess); err != nil {
		return err
	}
	wc, err := want(ctx, client.RecvCQ(), "client receive", verbs.WCSuccess)
	if err != nil {
		return err
	}
	peer := getAdv(dst.Bytes()[:wc.ByteLen])
	fmt.Fprintf(w, "4. server SENT its buffers' addresses and rkeys (%d bytes); client received: inbox 0x%x rkey 0x%x, readonly 0x%x rkey 0x%x\n",
		wc.ByteLen, peer[0].addr, peer[0].rkey, peer[1].addr, peer[1].rkey)
	fmt.Fprintln(w, "   RDMA names remote memory by address and rkey: the peer must be told them (SEND, or the CM's private data)")

	// 5. RDMA WRITE with immediate. The data goes straight into the
	// server's inbox; the immediate value makes it consume a receive and
	// produce a completion there, so the server learns that data arrived
	// (a plain WRITE is invisible to the server's CPU). That receive
	// needs no buffer: the data goes where the writer said.
	if err := server.QP().PostRecv(verbs.RecvWR{ID: 3}); err != nil {
		return fmt.Errorf("server: post receive: %w", err)
	}
	if err := client.QP().PostSend(verbs.SendWR{ID: 4, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled,
		ImmData: imm, SGL: []verbs.SGE{src.SGE(0, len(message))}, RemoteAddr: peer[0].addr, RKey: peer[0].rkey}); err != nil {
		return fmt.Errorf("client: post WRITE: %w", err)
	}
	if _, err := want(ctx, client.SendCQ(), "client WRITE", verbs.WCSuccess); err != nil {
		return err
	}
	if wc, err = want(ctx, server.RecvCQ(), "server receive", verbs.WCSuccess); err != nil {
		return err
	}
	got := inbox.Bytes()[:len(message)]
	if wc.Opcode != verbs.WCRecvRDMAWithImm || wc.Flags&verbs.WCFlagWithImm == 0 || wc.ImmData != imm || !bytes.Equal(got, []byte(message)) {
		return fmt.Errorf("server: completion %s flags %s imm 0x%x, inbox %q: want RECV_RDMA_WITH_IMM, imm 0x%x, %q",
			wc.Opcode, wc.Flags, wc.ImmData, got, uint32(imm), message)
	}
	fmt.Fprintf(w, "5. client RDMA WRITE WITH IMM: %s; server completion %s, %d bytes, imm 0x%08x; inbox holds %q\n",
		name(verbs.WCSuccess), wc.Opcode, wc.ByteLen, wc.ImmData, got)
	fmt.Fprintln(w, "   the immediate consumed the receive the server posted; a plain WRITE leaves no completion on the server")

	// 6. RDMA READ: the server's readonly region allows it.
	if err := client.QP().PostSend(verbs.SendWR{ID: 5, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{dst.SGE(0, len(secret))}, RemoteAddr: peer[1].addr, RKey: peer[1].rkey}); err != nil {
		return fmt.Errorf("client: post READ: %w", err)
	}
	if _, err := want(ctx, client.SendCQ(), "client READ", verbs.WCSuccess); err != nil {
		return err
	}
	if got := dst.Bytes()[:len(secret)]; !bytes.Equal(got, []byte(secret)) {
		return fmt.Errorf("client: READ returned %q, want %q", got, secret)
	}
	fmt.Fprintf(w, "6. client RDMA READ of server readonly (REMOTE_READ): %s, %q\n", name(verbs.WCSuccess), secret)
	fmt.Fprintln(w, "   the server's device answered from its memory; its CPU did nothing and sees no completion")

	// 7. An atomic FETCH_AND_ADD on the counter (REMOTE_ATOMIC): the old
	// value comes back into the client's memory, 8 bytes.
	binary.NativeEndian.PutUint64(counter.Bytes(), 40)
	if err := client.QP().PostSend(verbs.SendWR{ID: 6, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{dst.SGE(0, 8)}, RemoteAddr: peer[2].addr, RKey: peer[2].rkey, CompareAdd: 2}); err != nil {
		return fmt.Errorf("client: post FETCH_AND_ADD: %w", err)
	}
	if _, err := want(ctx, client.SendCQ(), "client FETCH_AND_ADD", verbs.WCSuccess); err != nil {
		return err
	}
	old, now := binary.NativeEndian.Uint64(dst.Bytes()), binary.NativeEndian.Uint64(counter.Bytes())
	if old != 40 || now != 42 {
		return fmt.Errorf("FETCH_AND_ADD(+2) of 40 returned %d and left %d, want 40 and 42", old, now)
	}
	fmt.Fprintf(w, "7. client FETCH_AND_ADD(+2) on server counter (REMOTE_ATOMIC): %s, old value %d, now %d\n", name(verbs.WCSuccess), old, now)
	fmt.Fprintln(w, "   the old value came back into the client's LOCAL_WRITE memory; examples/atomics goes further")

	// 8. On purpose: WRITE into the readonly region, which lacks
	// REMOTE_WRITE. The server's device checks the rkey's rights,
	// refuses, and answers with a NAK (Remote Access Error); the
	// client's WRITE completes in error. RC treats this as fatal: the
	// requester's QP and the responder's go to the ERR state.
	if err := client.QP().PostSend(verbs.SendWR{ID: 7, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(0, 8)}, RemoteAddr: peer[1].addr, RKey: peer[1].rkey}); err != nil {
		return fmt.Errorf("client: post WRITE: %w", err)
	}
	if wc, err = want(ctx, client.SendCQ(), "client WRITE into readonly", verbs.WCRemAccessErr); err != nil {
		return err
	}
	fmt.Fprintf(w, "8. on purpose, client RDMA WRITE into server readonly (no REMOTE_WRITE): status %s (%s)\n", name(wc.Status), wc.Status)
	fmt.Fprintln(w, "   the server's device checked the rkey's rights, refused, and NAKed: a fatal error for an RC connection")
	fmt.Fprintf(w, "   client QP is now %s\n", client.QP().State())
	// Everything posted to a QP in ERR is flushed, not executed.
	if err := client.QP().PostSend(verbs.SendWR{ID: 8, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{dst.SGE(0, 8)}, RemoteAddr: peer[1].addr, RKey: peer[1].rkey}); err != nil {
		return fmt.Errorf("client: post READ: %w", err)
	}
	if wc, err = want(ctx, client.SendCQ(), "client READ after the error", verbs.WCWRFlushErr); err != nil {
		return err
	}
	fmt.Fprintf(w, "   a READ posted after it, allowed as it is: status %s (%s)\n", name(wc.Status), wc.Status)
	// The server's device reports its side as an asynchronous event.
	if err := serverEvent(ctx, w, server); err != nil {
		return err
	}
	if st := server.QP().State(); st != verbs.QPStateErr {
		return fmt.Errorf("server QP is %s after refusing the WRITE, want ERR", st)
	}
	fmt.Fprintf(w, "   server QP is now %s\n", server.QP().State())
	fmt.Fprintln(w, "   A QP in ERR stays there: to use it again, move it to RESET and through INIT, RTR, RTS")
	fmt.Fprintln(w, "   (new PSNs, on both ends), or, as rdmacm programs do, close the connection and connect anew.")
	return nil
}

// connect listens on ip (any free port), dials that address and returns
// both ends: the server side accepts in a goroutine while Dial runs.
func connect(ctx context.Context, ip netip.Addr) (server, client *rdmacm.Conn, err error) {
	l, err := rdmacm.Listen(netip.AddrPortFrom(ip, 0).String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	defer l.Close() // one connection is all we want
	type accepted struct {
		c   *rdmacm.Conn
		err error
	}
	ch := make(chan accepted, 1)
	actx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		c, err := l.Accept(actx)
		ch <- accepted{c, err}
	}()
	client, err = rdmacm.Dial(ctx, l.Addr().String(), nil)
	if err != nil {
		stop()
		if a := <-ch; a.c != nil {
			a.c.Close()
		}
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	a := <-ch // Accept ends by ctx's deadline at the latest
	if a.err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("accept: %w", a.err)
	}
	return a.c, client, nil
}

// serverEvent waits (a few seconds at most) for the asynchronous event the
// server's QP raised when it refused the WRITE, and prints it. The device
// context is the one rdmacm opened, shared by both ends. The soft device
// raises IBV_EVENT_QP_ACCESS_ERR; not every device raises one.
func serverEvent(ctx context.Context, w io.Writer, server *rdmacm.Conn) error {
	const wait = 5 * time.Second
	ectx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		ev, err := server.Context().GetAsyncEvent(ectx)
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(w, "   server: no asynchronous event within %v (devices differ in reporting one)\n", wait)
				return nil
			}
			return fmt.Errorf("waiting for the server QP's asynchronous event: %w", err)
		}
		server.Context().AckAsyncEvent(ev)
		if ev.QP == server.QP() {
			fmt.Fprintf(w, "   server: asynchronous event %s (%s) on its QP\n", ev.Type.Name(), ev.Type)
			return nil
		}
	}
}

// want waits for the next completion of cq and checks its status. what
// names the work request in errors.
func want(ctx context.Context, cq *verbs.CQ, what string, status verbs.WCStatus) (verbs.WC, error) {
	var wc [1]verbs.WC
	for ctx.Err() == nil {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return wc[0], fmt.Errorf("%s: poll: %w", what, err)
		}
		if n == 0 {
			// Sleep until the CQ has a completion (or ctx ends).
			if err := cq.Wait(ctx); err != nil {
				return wc[0], fmt.Errorf("%s: waiting for its completion: %w", what, err)
			}
			continue
		}
		if wc[0].Status != status {
			return wc[0], fmt.Errorf("%s completed with %s (%s), want %s", what, name(wc[0].Status), wc[0].Status, name(status))
		}
		return wc[0], nil
	}
	return wc[0], fmt.Errorf("%s: %w", what, ctx.Err())
}

// name is the libibverbs enumerator of a completion status, without
// IBV_WC_: what people search for.
func name(s verbs.WCStatus) string {
	names := map[verbs.WCStatus]string{
		verbs.WCSuccess: "SUCCESS", verbs.WCLocLenErr: "LOC_LEN_ERR", verbs.WCLocQPOpErr: "LOC_QP_OP_ERR",
		verbs.WCLocProtErr: "LOC_PROT_ERR", verbs.WCWRFlushErr: "WR_FLUSH_ERR", verbs.WCLocAccessErr: "LOC_ACCESS_ERR",
		verbs.WCRemInvReqErr: "REM_INV_REQ_ERR", verbs.WCRemAccessErr: "REM_ACCESS_ERR", verbs.WCRemOpErr: "REM_OP_ERR",
		verbs.WCRetryExcErr: "RETRY_EXC_ERR", verbs.WCRNRRetryExcErr: "RNR_RETRY_EXC_ERR", verbs.WCGeneralErr: "GENERAL_ERR",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("status %d", s)
}

// regions registers memory regions, prints each, and deregisters them all
// at the end. The first error stops further registrations.
type regions struct {
	w   io.Writer
	mrs []*verbs.MR
	err error
}

// newRegions starts an empty set of regions that prints to w.
func newRegions(w io.Writer) *regions { return &regions{w: w} }

// reg registers buf in pd with access and prints what the flags allow.
func (r *regions) reg(what string, pd *verbs.PD, buf []byte, access verbs.AccessFlags, why string) *verbs.MR {
	if r.err != nil {
		return nil
	}
	mr, err := pd.RegMR(buf, access)
	if err != nil {
		r.err = fmt.Errorf("register %s: %w", what, err)
		return nil
	}
	r.mrs = append(r.mrs, mr)
	flags := access.String()
	if access == 0 {
		flags = "(none)"
	}
	fmt.Fprintf(r.w, "   %-16s %-26s lkey 0x%08x rkey 0x%08x  %s\n", what, flags, mr.LKey(), mr.RKey(), why)
	return mr
}

// close deregisters the regions, newest first.
func (r *regions) close() {
	for i := len(r.mrs) - 1; i >= 0; i-- {
		r.mrs[i].Dereg()
	}
}

// remote is where a peer's memory is: what RDMA work requests address.
type remote struct {
	addr uint64
	rkey uint32
	len  uint32
}

// advLen is the size of the advertisement: three (addr, rkey, len).
const advLen = 3 * 16

// putAdv encodes the advertisement of mrs into b, in network byte order
// (the format is the application's choice).
func putAdv(b []byte, mrs ...*verbs.MR) {
	for i, mr := range mrs {
		binary.BigEndian.PutUint64(b[16*i:], mr.Addr())
		binary.BigEndian.PutUint32(b[16*i+8:], mr.RKey())
		binary.BigEndian.PutUint32(b[16*i+12:], uint32(mr.Len()))
	}
}

// getAdv decodes an advertisement.
func getAdv(b []byte) (out [3]remote) {
	for i := range out {
		if len(b) >= 16*(i+1) {
			out[i] = remote{binary.BigEndian.Uint64(b[16*i:]), binary.BigEndian.Uint32(b[16*i+8:]), binary.BigEndian.Uint32(b[16*i+12:])}
		}
	}
	return out
}
