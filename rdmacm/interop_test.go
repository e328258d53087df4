package rdmacm_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// Interoperability with Linux's kernel rdma_cm and rdma-core's tools in the
// interop lab (interop/README.md): a VM with rdma_rxe at 198.51.100.2, this
// process inside the lab's network namespace with a soft device at
// 198.51.100.1. Run it as
//
//	go test -c -o /tmp/rdmacm.test ./rdmacm
//	RDMA_GO_INTEROP=/path/to/interop RDMA_GO_DEVICES=rgo1=198.51.100.1 RDMA_GO_LOOPBACK=off \
//	    ip netns exec rxe-lab /tmp/rdmacm.test -test.run Interop -test.v

var (
	labHost = netip.MustParseAddr("198.51.100.1")
	labVM   = netip.MustParseAddr("198.51.100.2")
)

func lab(t *testing.T) string {
	dir := os.Getenv("RDMA_GO_INTEROP")
	if dir == "" {
		t.Skip("RDMA_GO_INTEROP not set: no interop lab")
	}
	return dir
}

// vmRun runs a shell command in the VM and returns its output.
func vmRun(t *testing.T, dir string, seconds int, cmd string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+10)*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(dir, "vm-run.sh"), "-t", fmt.Sprint(seconds), cmd)
	out, err := c.CombinedOutput()
	return string(out), err
}

// rpingInfo is struct rping_rdma_info: buffer address, rkey, size, all
// big-endian.
func rpingInfo(b []byte, mr *verbs.MR, size int) []byte {
	info := make([]byte, 16)
	binary.BigEndian.PutUint64(info[0:], uint64(uintptr(unsafe.Pointer(&b[0]))))
	binary.BigEndian.PutUint32(info[8:], mr.RKey())
	binary.BigEndian.PutUint32(info[12:], uint32(size))
	return info
}

// TestInteropRpingClient: this process is rping's client (-c -v -C 3)
// against the VM's `rping -s -a 198.51.100.2 -v -C 3`: connect through the
// kernel's rdma_cm, advertise buffers, let the server RDMA READ and WRITE
// them, check the echoed data, disconnect.
func TestInteropRpingClient(t *testing.T) {
	dir := lab(t)
	vmRun(t, dir, 5, "pkill -x rping; rm -f /tmp/rping-go.log")
	if out, err := vmRun(t, dir, 5, "setsid rping -s -a 198.51.100.2 -v -C 3 >/tmp/rping-go.log 2>&1 </dev/null & sleep 1"); err != nil {
		t.Fatalf("starting rping: %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := rdmacm.Dial(ctx, netip.AddrPortFrom(labVM, 7174).String(), &rdmacm.Options{Source: labHost,
		ResponderResources: 1, InitiatorDepth: 1, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 2}})
	if err != nil {
		out, _ := vmRun(t, dir, 5, "cat /tmp/rping-go.log")
		t.Fatalf("dial: %v\nrping: %s", err, out)
	}
	const size = 64
	start, sink, recv := make([]byte, size), make([]byte, size), make([]byte, 16)
	send := make([]byte, 16)
	pd := c.PD()
	startMR, err := pd.RegMR(start, verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	must(t, err)
	sinkMR, err := pd.RegMR(sink, verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	must(t, err)
	recvMR, err := pd.RegMR(recv, verbs.AccessLocalWrite)
	must(t, err)
	sendMR, err := pd.RegMR(send, 0)
	must(t, err)
	postRecv := func() { must(t, c.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{recvMR.SGE(0, 16)}})) }
	sendInfo := func(b []byte, mr *verbs.MR) {
		copy(send, rpingInfo(b, mr, size))
		must(t, c.QP().PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{sendMR.SGE(0, 16)}}))
		if wc := waitWC(t, c.SendCQ()); wc.Status != verbs.WCSuccess {
			t.Fatalf("send: %v", wc.Status)
		}
	}
	waitRecv := func() {
		wc := waitWC(t, c.RecvCQ())
		if wc.Status != verbs.WCSuccess || wc.ByteLen != 16 {
			t.Fatalf("receive: %v, %d bytes", wc.Status, wc.ByteLen)
		}
		postRecv()
	}
	postRecv()
	ch := byte(65)
	for ping := range 3 {
		n := copy(start, fmt.Sprintf("rdma-ping-%d: ", ping))
		for i, x := n, ch; i < size; i++ {
			start[i] = x
			if x++; x > 122 {
				x = 65
			}
		}
		if ch++; ch > 122 {
			ch = 65
		}
		start[size-1] = 0
		sendInfo(start, startMR)
		waitRecv() // the server read our start buffer
		sendInfo(sink, sinkMR)
		waitRecv() // the server wrote our sink buffer
		if !bytes.Equal(start, sink) {
			t.Fatalf("ping %d: sent %q, got %q back", ping, start, sink)
		}
		t.Logf("ping data: %s", sink[:size-1])
	}
	for _, mr := range []*verbs.MR{startMR, sinkMR, recvMR, sendMR} {
		mr.Dereg()
	}
	must(t, c.Close())
	time.Sleep(time.Second)
	out, _ := vmRun(t, dir, 5, "cat /tmp/rping-go.log; pgrep -x rping && echo STILL RUNNING")
	t.Logf("VM rping server:\n%s", out)
	if strings.Count(out, "server ping data: rdma-ping-") != 3 || strings.Contains(out, "STILL RUNNING") {
		t.Fatalf("rping server did not complete 3 pings and exit")
	}
}

// TestInteropRpingServer: the VM's `rping -c -a 198.51.100.1 -v -C 3`
// connects to this process, which plays rping's server: it RDMA READs the
// client's buffer, then RDMA WRITEs it back into the client's sink.
func TestInteropRpingServer(t *testing.T) {
	dir := lab(t)
	vmRun(t, dir, 5, "pkill -x rping")
	l, err := rdmacm.Listen(netip.AddrPortFrom(labHost, 7174).String(), &rdmacm.Options{Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 2}})
	must(t, err)
	defer l.Close()
	type res struct {
		out string
		err error
	}
	vm := make(chan res, 1)
	go func() {
		out, err := vmRun(t, dir, 60, "rping -c -a 198.51.100.1 -v -C 3")
		vm <- res{out, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer c.Close()
	buf, recv, send := make([]byte, 64*1024), make([]byte, 16), make([]byte, 16)
	pd := c.PD()
	bufMR, err := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	must(t, err)
	defer bufMR.Dereg()
	recvMR, err := pd.RegMR(recv, verbs.AccessLocalWrite)
	must(t, err)
	defer recvMR.Dereg()
	sendMR, err := pd.RegMR(send, 0)
	must(t, err)
	defer sendMR.Dereg()
	postRecv := func() { must(t, c.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{recvMR.SGE(0, 16)}})) }
	postRecv()
	// next waits for a completion of either CQ; a flush means the client left.
	waitRecv := func() (uint64, uint32, uint32, bool) {
		select {
		case <-c.Done():
			return 0, 0, 0, false
		default:
		}
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		for {
			var wc [1]verbs.WC
			n, _ := c.RecvCQ().Poll(wc[:])
			if n == 1 {
				if wc[0].Status != verbs.WCSuccess {
					return 0, 0, 0, false
				}
				postRecv()
				return binary.BigEndian.Uint64(recv[0:]), binary.BigEndian.Uint32(recv[8:]), binary.BigEndian.Uint32(recv[12:]), true
			}
			select {
			case <-c.Done():
				return 0, 0, 0, false
			default:
			}
			if err := c.RecvCQ().Wait(rctx); err != nil {
				if rctx.Err() != nil && c.QP().State() == verbs.QPStateErr {
					return 0, 0, 0, false
				}
				t.Fatalf("waiting for a receive: %v", err)
			}
		}
	}
	post := func(wr verbs.SendWR) {
		wr.Flags |= verbs.SendSignaled
		must(t, c.QP().PostSend(wr))
		if wc := waitWC(t, c.SendCQ()); wc.Status != verbs.WCSuccess {
			t.Fatalf("%v: %v", wr.Opcode, wc.Status)
		}
	}
	pings := 0
	for {
		addr, rkey, size, ok := waitRecv()
		if !ok {
			break
		}
		post(verbs.SendWR{Opcode: verbs.WRRDMARead, SGL: []verbs.SGE{bufMR.SGE(0, int(size))}, RemoteAddr: addr, RKey: rkey})
		t.Logf("server ping data: %s", bytes.TrimRight(buf[:size], "\x00"))
		pings++
		post(verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{sendMR.SGE(0, 16)}})
		addr, rkey, _, ok = waitRecv()
		if !ok {
			break
		}
		n := bytes.IndexByte(buf, 0) + 1
		post(verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{bufMR.SGE(0, n)}, RemoteAddr: addr, RKey: rkey})
		post(verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{sendMR.SGE(0, 16)}})
	}
	r := <-vm
	t.Logf("VM rping client (%v):\n%s", r.err, r.out)
	if r.err != nil || pings != 3 || strings.Count(r.out, "ping data: rdma-ping-") != 3 {
		t.Fatalf("rping client: %d pings, %v", pings, r.err)
	}
}

// TestInteropUdaddyClient: this process is udaddy's client against the
// VM's `udaddy -b 198.51.100.2`: SIDR resolves the server's QPN and Q_Key,
// ten SEND-with-immediate datagrams go out, ten replies come back.
func TestInteropUdaddyClient(t *testing.T) {
	dir := lab(t)
	vmRun(t, dir, 5, "pkill -x udaddy")
	type res struct {
		out string
		err error
	}
	vm := make(chan res, 1)
	go func() {
		out, err := vmRun(t, dir, 60, "udaddy -b 198.51.100.2")
		vm <- res{out, err}
	}()
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer ch.Destroy()
	id, err := rdmacm.CreateID(ch, nil, rdmacm.PSUDP)
	must(t, err)
	defer id.Destroy()
	must(t, id.ResolveAddr(ctx, netip.AddrPortFrom(labHost, 0), netip.AddrPortFrom(labVM, 7174), 2*time.Second))
	next(t, ch, rdmacm.EventAddrResolved)
	must(t, id.ResolveRoute(ctx, 2*time.Second))
	next(t, ch, rdmacm.EventRouteResolved)
	must(t, id.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 10, MaxRecvWR: 10, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	defer id.DestroyQP()
	const size = 100
	mem := make([]byte, size+verbs.GRHLen)
	mr, err := id.RegMsgs(mem)
	must(t, err)
	defer mr.Dereg()
	for range 10 {
		must(t, id.PostRecv(1, mem, mr))
	}
	must(t, id.Connect(ctx, nil))
	var est *rdmacm.Event
	for est == nil {
		ev, err := ch.GetCMEvent(ctx)
		must(t, err)
		if ev.Type != rdmacm.EventEstablished {
			out := <-vm
			t.Fatalf("connect: %v (status %d)\nVM: %s", ev.Type, ev.Status, out.out)
		}
		est = ev
	}
	t.Logf("SIDR: QPN %#x Q_Key %#x", est.UD.QPNum, est.UD.QKey)
	ah, err := id.PD().CreateAH(est.UD.AHAttr)
	must(t, err)
	defer ah.Destroy()
	for range 10 {
		must(t, id.QP().PostSend(verbs.SendWR{Opcode: verbs.WRSendWithImm, ImmData: id.QP().QPN(), Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{mr.SGE(0, size)}, AH: ah, RemoteQPN: est.UD.QPNum, RemoteQKey: est.UD.QKey}))
		if wc, err := id.GetSendComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
			t.Fatalf("send: %+v %v", wc, err)
		}
	}
	for i := range 10 {
		wc, err := id.GetRecvComp(ctx)
		if err != nil || wc.Status != verbs.WCSuccess {
			t.Fatalf("reply %d: %+v %v", i, wc, err)
		}
	}
	r := <-vm
	t.Logf("VM udaddy server (%v):\n%s", r.err, r.out)
	if r.err != nil || !strings.Contains(r.out, "data transfers complete") {
		t.Fatal("udaddy server failed")
	}
}

// TestInteropUdaddyServer: the VM's `udaddy -s 198.51.100.1` resolves this
// process's UD service with SIDR, sends ten datagrams, and gets ten
// replies addressed from its receive completions.
func TestInteropUdaddyServer(t *testing.T) {
	dir := lab(t)
	vmRun(t, dir, 5, "pkill -x udaddy")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer ch.Destroy()
	lid, err := rdmacm.CreateID(ch, nil, rdmacm.PSUDP)
	must(t, err)
	defer lid.Destroy()
	must(t, lid.BindAddr(netip.AddrPortFrom(labHost, 7174)))
	must(t, lid.Listen(0))
	type res struct {
		out string
		err error
	}
	vm := make(chan res, 1)
	go func() {
		out, err := vmRun(t, dir, 60, "udaddy -s 198.51.100.1")
		vm <- res{out, err}
	}()
	req, err := ch.GetCMEvent(ctx)
	if err != nil || req.Type != rdmacm.EventConnectRequest {
		t.Fatalf("waiting for the request: %v %v", req, err)
	}
	id := req.ID
	defer id.Destroy()
	must(t, id.CreateQP(nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 10, MaxRecvWR: 10, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	defer id.DestroyQP()
	const size = 100
	mem := make([]byte, size+verbs.GRHLen)
	mr, err := id.RegMsgs(mem)
	must(t, err)
	defer mr.Dereg()
	for range 10 {
		must(t, id.PostRecv(1, mem, mr))
	}
	must(t, id.Accept(ctx, nil))
	var first verbs.WC
	for i := range 10 {
		wc, err := id.GetRecvComp(ctx)
		if err != nil || wc.Status != verbs.WCSuccess || wc.ByteLen != size+verbs.GRHLen {
			t.Fatalf("datagram %d: %+v %v", i, wc, err)
		}
		if i == 0 {
			first = wc
		}
	}
	ah, err := id.PD().CreateAHFromWC(&first, mem[:verbs.GRHLen], 1)
	must(t, err)
	defer ah.Destroy()
	for range 10 {
		must(t, id.QP().PostSend(verbs.SendWR{Opcode: verbs.WRSendWithImm, ImmData: id.QP().QPN(), Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{mr.SGE(0, size)}, AH: ah, RemoteQPN: first.ImmData, RemoteQKey: rdmacm.UDPQKey}))
		if wc, err := id.GetSendComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
			t.Fatalf("reply: %+v %v", wc, err)
		}
	}
	r := <-vm
	t.Logf("VM udaddy client (%v):\n%s", r.err, r.out)
	if r.err != nil || !strings.Contains(r.out, "data transfers complete") {
		t.Fatal("udaddy client failed")
	}
}

// TestInteropRdmaServer: rdma_client's synchronous flow (GetAddrInfo,
// CreateEP, Connect, PostRecv/PostSend, GetRecvComp/GetSendComp) against
// the VM's rdma_server.
func TestInteropRdmaServer(t *testing.T) {
	dir := lab(t)
	vmRun(t, dir, 5, "pkill -x rdma_server")
	type res struct {
		out string
		err error
	}
	vm := make(chan res, 1)
	go func() {
		out, err := vmRun(t, dir, 60, "rdma_server")
		vm <- res{out, err}
	}()
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ai, err := rdmacm.GetAddrInfo(ctx, labVM.String(), "7471", &rdmacm.AddrInfo{PortSpace: rdmacm.PSTCP})
	must(t, err)
	id, err := rdmacm.CreateEP(ctx, ai[0], nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1,
		MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}, SigAll: true})
	must(t, err)
	defer id.DestroyEP()
	send, recv := []byte("rdma-go client!!"), make([]byte, 16)
	mr, err := id.RegMsgs(recv)
	must(t, err)
	defer mr.Dereg()
	must(t, id.PostRecv(1, recv, mr))
	must(t, id.Connect(ctx, nil))
	smr, err := id.RegMsgs(send)
	must(t, err)
	defer smr.Dereg()
	must(t, id.PostSend(2, send, smr, verbs.SendInline))
	if wc, err := id.GetSendComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
		t.Fatalf("send: %+v %v", wc, err)
	}
	if wc, err := id.GetRecvComp(ctx); err != nil || wc.Status != verbs.WCSuccess || wc.ByteLen != 16 {
		t.Fatalf("receive: %+v %v", wc, err)
	}
	must(t, id.Disconnect())
	r := <-vm
	t.Logf("VM rdma_server (%v):\n%s", r.err, r.out)
	if r.err != nil || !strings.Contains(r.out, "rdma_server: end 0") {
		t.Fatal("rdma_server failed")
	}
}

// TestInteropRdmaClient: rdma_server's synchronous flow (CreateEP passive,
// Listen, GetRequest, Accept) for the VM's `rdma_client -s 198.51.100.1`.
func TestInteropRdmaClient(t *testing.T) {
	dir := lab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ai, err := rdmacm.GetAddrInfo(ctx, labHost.String(), "7471", &rdmacm.AddrInfo{Flags: rdmacm.RAIPassive})
	must(t, err)
	lid, err := rdmacm.CreateEP(ctx, ai[0], nil, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1,
		MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}, SigAll: true})
	must(t, err)
	defer lid.DestroyEP()
	must(t, lid.Listen(0))
	type res struct {
		out string
		err error
	}
	vm := make(chan res, 1)
	go func() {
		out, err := vmRun(t, dir, 60, "rdma_client -s 198.51.100.1")
		vm <- res{out, err}
	}()
	id, err := lid.GetRequest(ctx)
	must(t, err)
	defer id.DestroyEP()
	msg := make([]byte, 16)
	mr, err := id.RegMsgs(msg)
	must(t, err)
	defer mr.Dereg()
	must(t, id.PostRecv(1, msg, mr))
	must(t, id.Accept(ctx, nil))
	if wc, err := id.GetRecvComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
		t.Fatalf("receive: %+v %v", wc, err)
	}
	must(t, id.PostSend(2, msg, mr, 0))
	if wc, err := id.GetSendComp(ctx); err != nil || wc.Status != verbs.WCSuccess {
		t.Fatalf("send: %+v %v", wc, err)
	}
	// As rdma_server: disconnect (the client waits for the DREP of its
	// own DREQ, or for ours, before rdma_destroy_ep returns).
	id.Disconnect()
	r := <-vm
	t.Logf("VM rdma_client (%v):\n%s", r.err, r.out)
	if r.err != nil || !strings.Contains(r.out, "rdma_client: end 0") {
		t.Fatal("rdma_client failed")
	}
}

// TestInteropRejected: no listener on either side → REJ reason 8
// ("invalid service ID"), reported as REJECTED / error 8.
func TestInteropRejected(t *testing.T) {
	dir := lab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := rdmacm.Dial(ctx, netip.AddrPortFrom(labVM, 7999).String(), &rdmacm.Options{Source: labHost})
	var rej *rdmacm.RejectedError
	if !errors.As(err, &rej) || rej.Reason != 8 {
		t.Fatalf("Dial to a port Linux does not listen on: %v", err)
	}
	// Keep a device reference so ours is up for the VM's REQ.
	ch, err := rdmacm.CreateEventChannel()
	must(t, err)
	defer ch.Destroy()
	id, err := rdmacm.CreateID(ch, nil, rdmacm.PSTCP)
	must(t, err)
	defer id.Destroy()
	must(t, id.BindAddr(netip.AddrPortFrom(labHost, 0)))
	out, _ := vmRun(t, dir, 30, "rping -c -a 198.51.100.1 -p 7999 -C 1")
	t.Logf("VM rping client:\n%s", out)
	if !strings.Contains(out, "RDMA_CM_EVENT_REJECTED, error 8") {
		t.Fatal("the VM's rping was not rejected with reason 8")
	}
}

// ucmatoseNode is one connection's buffers for the cmatose exchange:
// message_count (10) SENDs of message_size (100) bytes each way.
type ucmatoseNode struct {
	c   *rdmacm.Conn
	mem []byte
	mr  *verbs.MR
}

func newUcmatoseNode(t *testing.T, c *rdmacm.Conn) *ucmatoseNode {
	n := &ucmatoseNode{c: c, mem: make([]byte, 100)}
	var err error
	n.mr, err = c.PD().RegMR(n.mem, verbs.AccessLocalWrite)
	must(t, err)
	return n
}

func (n *ucmatoseNode) recvs(t *testing.T) {
	for range 10 {
		must(t, n.c.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{n.mr.SGE(0, 100)}}))
	}
}

func (n *ucmatoseNode) sends(t *testing.T) {
	for range 10 {
		must(t, n.c.QP().PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{n.mr.SGE(0, 100)}}))
	}
	for range 10 {
		if wc := waitWC(t, n.c.SendCQ()); wc.Status != verbs.WCSuccess {
			t.Fatalf("send: %v", wc.Status)
		}
	}
}

func (n *ucmatoseNode) received(t *testing.T) {
	for range 10 {
		if wc := waitWC(t, n.c.RecvCQ()); wc.Status != verbs.WCSuccess || wc.ByteLen != 100 {
			t.Fatalf("receive: %v %d", wc.Status, wc.ByteLen)
		}
	}
}

// TestInteropUcmatoseClient: five connections at once from this process to
// the VM's `ucmatose -b 198.51.100.2 -c 5`, ten messages each way on each,
// then the server disconnects them all.
func TestInteropUcmatoseClient(t *testing.T) {
	dir := lab(t)
	vmRun(t, dir, 5, "pkill -x ucmatose")
	type res struct {
		out string
		err error
	}
	vm := make(chan res, 1)
	go func() {
		out, err := vmRun(t, dir, 60, "ucmatose -b 198.51.100.2 -c 5")
		vm <- res{out, err}
	}()
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var nodes []*ucmatoseNode
	for range 5 {
		c, err := rdmacm.Dial(ctx, netip.AddrPortFrom(labVM, 7471).String(), &rdmacm.Options{Source: labHost,
			ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5, Cap: verbs.QPCap{MaxSendWR: 10, MaxRecvWR: 10}})
		must(t, err)
		defer c.Close()
		n := newUcmatoseNode(t, c)
		n.recvs(t) // the server retries on RNR until these are up
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.received(t)
		n.sends(t)
	}
	for _, n := range nodes {
		select {
		case <-n.c.Done():
		case <-ctx.Done():
			t.Fatal("the server did not disconnect")
		}
	}
	r := <-vm
	t.Logf("VM ucmatose server (%v):\n%s", r.err, r.out)
	if r.err != nil || !strings.Contains(r.out, "return status 0") {
		t.Fatal("ucmatose server failed")
	}
}

// TestInteropUcmatoseServer: the VM's `ucmatose -s 198.51.100.1 -c 5`
// opens five connections to this process, which sends ten messages on
// each, takes ten replies, and disconnects them.
func TestInteropUcmatoseServer(t *testing.T) {
	dir := lab(t)
	l, err := rdmacm.Listen(netip.AddrPortFrom(labHost, 7471).String(), &rdmacm.Options{Cap: verbs.QPCap{MaxSendWR: 10, MaxRecvWR: 10}})
	must(t, err)
	defer l.Close()
	type res struct {
		out string
		err error
	}
	vm := make(chan res, 1)
	go func() {
		out, err := vmRun(t, dir, 60, "ucmatose -s 198.51.100.1 -c 5")
		vm <- res{out, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var nodes []*ucmatoseNode
	for range 5 {
		c, err := l.Accept(ctx)
		must(t, err)
		n := newUcmatoseNode(t, c)
		n.recvs(t)
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.sends(t)
	}
	for _, n := range nodes {
		n.received(t)
	}
	for _, n := range nodes {
		must(t, n.c.Close())
	}
	r := <-vm
	t.Logf("VM ucmatose client (%v):\n%s", r.err, r.out)
	if r.err != nil || !strings.Contains(r.out, "return status 0") {
		t.Fatal("ucmatose client failed")
	}
}
