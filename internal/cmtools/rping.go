package cmtools

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// rping's states (enum test_state): the CM and CQ goroutines set them and
// post the semaphore; the main flow waits and checks them.
const (
	rpIdle = 1 + iota
	rpConnectRequest
	rpAddrResolved
	rpRouteResolved
	rpConnected
	rpReadAdv
	rpReadComplete
	rpWriteAdv
	rpWriteComplete
	rpDisconnected
	rpError
)

const (
	rpingBufSize = 64 * 1024 // RPING_BUFSIZE: -S is below it
	rpingSQDepth = 16        // RPING_SQ_DEPTH
	// rpingMinBufSize is RPING_MIN_BUFSIZE: sizeof("2147483647") +
	// sizeof("rdma-ping-%d: ").
	rpingMinBufSize = 26
	rpingPort       = 7174
	rpingInfoLen    = 16 // struct rping_rdma_info
	rpingOptstring  = "a:I:Pp:C:S:t:scvVdq"
)

// errDead is returned by waits once the tool is exiting (C: another
// thread called exit).
var errDead = errors.New("rping: exiting")

// rping is one run of the tool: what every connection shares.
type rping struct {
	o    *out
	ctx  context.Context
	dead chan struct{}
	once sync.Once
	code int

	ch   *rdmacm.EventChannel
	conn sync.WaitGroup // persistent server connections
}

// exit makes the tool exit with status code (C: exit(code) from a
// thread): every wait returns errDead and Rping returns code.
func (r *rping) exit(code int) {
	r.once.Do(func() {
		r.code = exitStatus(code)
		close(r.dead)
	})
}

func (r *rping) exiting() bool {
	select {
	case <-r.dead:
		return true
	default:
		return false
	}
}

// rpingCB is struct rping_cb: one connection (or the listener) and its
// resources.
type rpingCB struct {
	r          *rping
	server     bool
	persistent bool

	state atomic.Int32
	sem   chan struct{}

	sin        netip.AddrPort
	ssource    netip.Addr
	verbose    bool
	validate   bool
	selfCreate bool
	count      int
	size       int

	cmID    *rdmacm.ID // the connection (client) or the listener (server)
	childID *rdmacm.ID // the connection on the server side
	// requests carries the clones a persistent listener made for its
	// connection requests.
	requests chan *rpingCB

	pd       *verbs.PD
	channel  *verbs.CompChannel
	cq       *verbs.CQ
	qp       *verbs.QP
	recvBuf  []byte
	recvMR   *verbs.MR
	sendBuf  []byte
	sendMR   *verbs.MR
	rdmaBuf  []byte
	rdmaMR   *verbs.MR
	startBuf []byte
	startMR  *verbs.MR

	remoteRKey uint32
	remoteAddr uint64
	remoteLen  uint32

	cqCancel context.CancelFunc
	cqDone   chan struct{}

	// disconnected is closed at the connection's DISCONNECTED event.
	disconnected chan struct{}
	discOnce     sync.Once
}

func (cb *rpingCB) post() {
	select {
	case cb.sem <- struct{}{}:
	default: // more posts than anyone waits for: they would not matter
	}
}

// wait is sem_wait: it returns errDead when the tool is exiting and
// nothing was posted.
func (cb *rpingCB) wait() error {
	select {
	case <-cb.sem:
		return nil
	default:
	}
	select {
	case <-cb.sem:
		return nil
	case <-cb.r.dead:
		return errDead
	}
}

// Rping is rdma-core 44's rping: args is the command line without the
// program name; the result is the exit status.
func Rping(e *Env, args []string) int {
	o := newOut(e)
	r := &rping{o: o, ctx: e.ctxOf(), dead: make(chan struct{})}
	cb := &rpingCB{r: r, sem: make(chan struct{}, 64), size: 64, disconnected: make(chan struct{}),
		sin: netip.AddrPortFrom(netip.IPv4Unspecified(), rpingPort)}
	cb.state.Store(rpIdle)
	serverSet := -1
	persistent := false
	port := uint16(rpingPort)

	p := getopt.New("rping", rpingOptstring, nil)
	p.Opterr = false // rping sets opterr = 0
	res, perr := p.Parse(args)
	ret := 0
	for _, opt := range res.Opts {
		v := opt.Value
		switch opt.Option.Short {
		case 'a':
			var a netip.Addr
			a, ret = rpingGetAddr(r.ctx, o, v)
			if ret == 0 {
				cb.sin = netip.AddrPortFrom(a, 0)
			}
		case 'I':
			var a netip.Addr
			a, ret = rpingGetAddr(r.ctx, o, v)
			if ret == 0 {
				cb.ssource = a
			}
		case 'P':
			persistent = true
		case 'p':
			port = uint16(getopt.Atoi(v))
			o.debugf("port %d\n", getopt.Atoi(v))
		case 's':
			serverSet = 1
			o.debugf("server\n")
		case 'c':
			serverSet = 0
			o.debugf("client\n")
		case 'S':
			cb.size = getopt.Atoi(v)
			if cb.size < rpingMinBufSize || cb.size > rpingBufSize-1 {
				o.eprintf("Invalid size %d (valid range is %d to %d)\n", cb.size, rpingMinBufSize, rpingBufSize)
				ret = int(syscall.EINVAL)
			} else {
				o.debugf("size %d\n", getopt.Atoi(v))
			}
		case 'C':
			cb.count = getopt.Atoi(v)
			if cb.count < 0 {
				o.eprintf("Invalid count %d\n", cb.count)
				ret = int(syscall.EINVAL)
			} else {
				o.debugf("count %d\n", cb.count)
			}
		case 'v':
			cb.verbose = true
			o.debugf("verbose\n")
		case 'V':
			cb.validate = true
			o.debugf("validate data\n")
		case 'd':
			o.debugOut = true
		case 'q':
			cb.selfCreate = true
		default: // -t: accepted by the optstring, handled by nobody
			rpingUsage(o)
			return int(syscall.EINVAL)
		}
	}
	if perr != nil {
		rpingUsage(o)
		return int(syscall.EINVAL)
	}
	if ret != 0 {
		return exitStatus(ret)
	}
	if serverSet == -1 {
		rpingUsage(o)
		return int(syscall.EINVAL)
	}
	cb.server = serverSet == 1
	cb.sin = netip.AddrPortFrom(cb.sin.Addr(), port)

	ch, err := createFirstEventChannel(o)
	if err != nil {
		return exitStatus(int(verbs.ErrnoOf(err)))
	}
	r.ch = ch
	stop := context.AfterFunc(r.ctx, func() { r.exit(int(syscall.EINTR)) })
	defer stop()

	cb.cmID, err = rdmacm.CreateID(ch, cb, rdmacm.PSTCP)
	if err != nil {
		o.perror("rdma_create_id", err)
		ch.Destroy()
		return exitStatus(int(verbs.ErrnoOf(err)))
	}
	o.debugf("created cm_id %p\n", cb.cmID)
	cmDone := make(chan struct{})
	go func() {
		defer close(cmDone)
		r.cmThread()
	}()

	switch {
	case cb.server && persistent:
		cb.persistent = true
		cb.requests = make(chan *rpingCB, 64)
		ret = cb.runPersistentServer()
	case cb.server:
		ret = cb.runServer()
	default:
		ret = cb.runClient()
	}

	o.debugf("destroy cm_id %p\n", cb.cmID)
	if r.exiting() {
		// Another goroutine "exited": end the connections of a
		// persistent server, whose goroutines notice the same.
		r.conn.Wait()
	}
	cb.cmID.Destroy()
	ch.Destroy()
	<-cmDone
	if r.exiting() {
		return r.code
	}
	return exitStatus(ret)
}

// rpingGetAddr is rping's get_addr: getaddrinfo with no hints, the first
// result; on failure a message on stdout and the EAI_* code.
func rpingGetAddr(ctx context.Context, o *out, s string) (netip.Addr, int) {
	a, code := lookupHost(ctx, s)
	if code != 0 {
		o.printf("getaddrinfo failed (%s) - invalid hostname or IP address\n", gaiStrerror(code))
	}
	return a, code
}

func rpingUsage(o *out) {
	o.printf("%s -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n", "rping")
	o.printf("%s -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n", "rping")
	o.printf("\t-c\t\tclient side\n")
	o.printf("\t-I\t\tSource address to bind to for client.\n")
	o.printf("\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n")
	o.printf("\t-v\t\tdisplay ping data to stdout\n")
	o.printf("\t-V\t\tvalidate ping data\n")
	o.printf("\t-d\t\tdebug printfs\n")
	o.printf("\t-S size \tping data size\n")
	o.printf("\t-C count\tping count times\n")
	o.printf("\t-a addr\t\taddress\n")
	o.printf("\t-p port\t\tport\n")
	o.printf("\t-P\t\tpersistent server mode allowing multiple connections\n")
	o.printf("\t-q\t\tuse self-created, self-modified QP\n")
}

// cmThread is rping's cm_thread: it handles every CM event; a handler
// failure exits the tool with status 255 (exit(-1)).
func (r *rping) cmThread() {
	for {
		ev, err := r.ch.GetCMEvent(context.Background())
		if err != nil {
			if errors.Is(err, rdmacm.ErrClosed) {
				return
			}
			r.o.perror("rdma_get_cm_event", err)
			r.exit(-1)
			return
		}
		cb, _ := ev.ID.Context().(*rpingCB)
		if cb == nil {
			continue
		}
		if cb.cmaEventHandler(ev) != 0 {
			r.exit(-1)
			return
		}
	}
}

func (cb *rpingCB) role(id *rdmacm.ID) string {
	if id == cb.cmID {
		return "parent"
	}
	return "child"
}

// cmaEventHandler is rping_cma_event_handler.
func (cb *rpingCB) cmaEventHandler(ev *rdmacm.Event) int {
	o := cb.r.o
	id := ev.ID
	o.debugf("cma_event type %s cma_id %p (%s)\n", ev.Type, id, cb.role(id))
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		cb.state.Store(rpAddrResolved)
		if err := id.ResolveRoute(context.Background(), 2000*time.Millisecond); err != nil {
			cb.state.Store(rpError)
			o.perror("rdma_resolve_route", err)
			cb.post()
		}
	case rdmacm.EventRouteResolved:
		cb.state.Store(rpRouteResolved)
		cb.post()
	case rdmacm.EventConnectRequest:
		cb.state.Store(rpConnectRequest)
		cb.childID = id
		o.debugf("child cma %p\n", id)
		if cb.persistent {
			// Give the connection its own control block before any of
			// its events can arrive (rping.c's clone_cb, done here
			// rather than in the main thread, where it races).
			c := cb.clone()
			id.SetContext(c)
			cb.requests <- c
		}
		cb.post()
	case rdmacm.EventConnectResponse:
		o.debugf("CONNECT_RESPONSE\n")
		cb.state.Store(rpConnected)
		cb.post()
	case rdmacm.EventEstablished:
		o.debugf("ESTABLISHED\n")
		// The server wakes up when the first receive completes.
		if !cb.server {
			cb.state.Store(rpConnected)
		}
		cb.post()
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
		rdmacm.EventUnreachable, rdmacm.EventRejected:
		o.eprintf("cma event %s, error %d\n", ev.Type, ev.Status)
		// The main flow wakes up and reports the failure too ("wait for
		// CONNECTED state 4", "connect error -1") while the CM thread
		// exits the process, as in rping.c.
		cb.post()
		return -1
	case rdmacm.EventDisconnected:
		side := "client"
		if cb.server {
			side = "server"
		}
		o.eprintf("%s DISCONNECT EVENT...\n", side)
		cb.state.Store(rpDisconnected)
		cb.discOnce.Do(func() { close(cb.disconnected) })
		cb.post()
	case rdmacm.EventDeviceRemoval:
		o.eprintf("cma detected device removal!!!!\n")
		cb.state.Store(rpError)
		cb.post()
		return -1
	default:
		o.eprintf("unhandled event: %s, ignoring\n", ev.Type)
	}
	return 0
}

// clone is clone_cb: a persistent server's control block for one
// connection, a copy of the listener's.
func (cb *rpingCB) clone() *rpingCB {
	c := &rpingCB{r: cb.r, server: true, sem: make(chan struct{}, 64), disconnected: make(chan struct{}),
		sin: cb.sin, verbose: cb.verbose,
		validate: cb.validate, selfCreate: cb.selfCreate, count: cb.count, size: cb.size,
		cmID: cb.cmID, childID: cb.childID}
	c.state.Store(rpConnectRequest)
	return c
}

// serverRecv is server_recv: a buffer advertisement from the client.
func (cb *rpingCB) serverRecv(wc *verbs.WC) int {
	if wc.ByteLen != rpingInfoLen {
		cb.r.o.eprintf("Received bogus data, size %d\n", wc.ByteLen)
		return -1
	}
	cb.remoteAddr = binary.BigEndian.Uint64(cb.recvBuf[0:])
	cb.remoteRKey = binary.BigEndian.Uint32(cb.recvBuf[8:])
	cb.remoteLen = binary.BigEndian.Uint32(cb.recvBuf[12:])
	cb.r.o.debugf("Received rkey %x addr %x len %d from peer\n", cb.remoteRKey, cb.remoteAddr, cb.remoteLen)
	if st := cb.state.Load(); st <= rpConnected || st == rpWriteComplete {
		cb.state.Store(rpReadAdv)
	} else {
		cb.state.Store(rpWriteAdv)
	}
	return 0
}

// clientRecv is client_recv: the server's "go ahead".
func (cb *rpingCB) clientRecv(wc *verbs.WC) int {
	if wc.ByteLen != rpingInfoLen {
		cb.r.o.eprintf("Received bogus data, size %d\n", wc.ByteLen)
		return -1
	}
	if cb.state.Load() == rpReadAdv {
		cb.state.Store(rpWriteAdv)
	} else {
		cb.state.Store(rpWriteComplete)
	}
	return 0
}

// cqEventHandler is rping_cq_event_handler: it drains the CQ; the result
// is 1 when a flushed completion was seen, negative on an error.
func (cb *rpingCB) cqEventHandler() int {
	o := cb.r.o
	var wc [1]verbs.WC
	flushed := 0
	fail := func(ret int) int {
		cb.state.Store(rpError)
		cb.post()
		return ret
	}
	for i := 0; ; i++ {
		n, err := cb.cq.Poll(wc[:])
		if err != nil {
			o.eprintf("poll error %d\n", -int(verbs.ErrnoOf(err)))
			return fail(-int(verbs.ErrnoOf(err)))
		}
		if n == 0 {
			break
		}
		w := &wc[0]
		if w.Status != verbs.WCSuccess {
			if w.Status == verbs.WCWRFlushErr {
				flushed = 1
				continue
			}
			o.eprintf("cq completion failed status %d\n", w.Status)
			return fail(-1)
		}
		switch w.Opcode {
		case verbs.WCSend:
			o.debugf("send completion\n")
		case verbs.WCRDMAWrite:
			o.debugf("rdma write completion\n")
			cb.state.Store(rpWriteComplete)
			cb.post()
		case verbs.WCRDMARead:
			o.debugf("rdma read completion\n")
			cb.state.Store(rpReadComplete)
			cb.post()
		case verbs.WCRecv:
			o.debugf("recv completion\n")
			var ret int
			if cb.server {
				ret = cb.serverRecv(w)
			} else {
				ret = cb.clientRecv(w)
			}
			if ret != 0 {
				o.eprintf("recv wc error: %d\n", ret)
				return fail(ret)
			}
			if err := cb.postRecv(); err != nil {
				o.eprintf("post recv error: %d\n", verbs.ErrnoOf(err))
				return fail(int(verbs.ErrnoOf(err)))
			}
			cb.post()
		default:
			o.debugf("unknown!!!!! completion\n")
			return fail(-1)
		}
	}
	return flushed
}

// cqThread is rping's cq_thread: it waits for completion events and
// handles them until a flush (the QP went to ERR), an error, or cancel.
func (cb *rpingCB) cqThread(ctx context.Context) {
	defer close(cb.cqDone)
	o := cb.r.o
	o.debugf("cq_thread started.\n")
	for {
		evCQ, err := cb.channel.GetEvent(ctx)
		if err != nil {
			if ctx.Err() == nil {
				o.eprintf("Failed to get cq event!\n")
			}
			return
		}
		if evCQ != cb.cq {
			o.eprintf("Unknown CQ!\n")
			return
		}
		if err := cb.cq.ReqNotify(false); err != nil {
			o.eprintf("Failed to set notify!\n")
			return
		}
		ret := cb.cqEventHandler()
		cb.cq.AckEvents(1)
		if ret != 0 {
			return
		}
	}
}

// startCQThread starts cqThread.
func (cb *rpingCB) startCQThread() {
	ctx, cancel := context.WithCancel(context.Background())
	cb.cqCancel, cb.cqDone = cancel, make(chan struct{})
	go cb.cqThread(ctx)
}

// joinCQThread is pthread_join of the CQ thread, which ends at the flush
// of the receive the disconnect caused; bounded, then cancelled.
func (cb *rpingCB) joinCQThread() {
	if cb.cqDone == nil {
		return
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-cb.cqDone:
	case <-t.C:
	case <-cb.r.dead:
	}
	cb.cancelCQThread()
}

// cancelCQThread is pthread_cancel + pthread_join of the CQ thread.
func (cb *rpingCB) cancelCQThread() {
	if cb.cqDone == nil {
		return
	}
	cb.cqCancel()
	<-cb.cqDone
	cb.cqDone = nil
}

func (cb *rpingCB) initConnParam() *rdmacm.ConnParam {
	p := &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	if cb.selfCreate {
		p.QPNum = cb.qp.QPN()
	}
	return p
}

// selfModifyQP is rping_self_modify_qp: INIT, RTR and RTS with the
// attributes rdma_init_qp_attr gives.
func (cb *rpingCB) selfModifyQP(id *rdmacm.ID) error {
	for _, st := range []verbs.QPState{verbs.QPStateInit, verbs.QPStateRTR, verbs.QPStateRTS} {
		attr, mask, err := id.InitQPAttr(st)
		if err != nil {
			return err
		}
		if err := cb.qp.Modify(&attr, mask); err != nil {
			return err
		}
	}
	return nil
}

// accept is rping_accept.
func (cb *rpingCB) accept() int {
	o := cb.r.o
	o.debugf("accepting client connection request\n")
	var err error
	if cb.selfCreate {
		if err = cb.selfModifyQP(cb.childID); err != nil {
			return -int(verbs.ErrnoOf(err))
		}
		err = cb.childID.Accept(context.Background(), cb.initConnParam())
	} else {
		err = cb.childID.Accept(context.Background(), nil)
	}
	if err != nil {
		o.perror("rdma_accept", err)
		return -1
	}
	if cb.wait() != nil {
		return -1
	}
	if st := cb.state.Load(); st == rpError {
		o.eprintf("wait for CONNECTED state %d\n", st)
		return -1
	}
	return 0
}

// disconnect is rping_disconnect.
func (cb *rpingCB) disconnect(id *rdmacm.ID) {
	if cb.selfCreate && cb.qp != nil {
		if err := cb.qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
			return
		}
	}
	id.Disconnect()
}

// postRecv posts the control message receive (rq_wr).
func (cb *rpingCB) postRecv() error {
	return cb.qp.PostRecv(verbs.RecvWR{SGL: []verbs.SGE{cb.recvMR.SGE(0, rpingInfoLen)}})
}

// postSend posts the control message SEND (sq_wr).
func (cb *rpingCB) postSend() error {
	return cb.qp.PostSend(verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{cb.sendMR.SGE(0, rpingInfoLen)}})
}

// postRDMA posts rdma_sq_wr: n bytes of the RDMA buffer read from or
// written to the peer's advertised buffer.
func (cb *rpingCB) postRDMA(op verbs.WROpcode, n uint32) error {
	return cb.qp.PostSend(verbs.SendWR{Opcode: op, Flags: verbs.SendSignaled, RemoteAddr: cb.remoteAddr,
		RKey: cb.remoteRKey, SGL: []verbs.SGE{{Addr: cb.rdmaMR.Addr(), Length: n, LKey: cb.rdmaMR.LKey()}}})
}

// setupBuffers is rping_setup_buffers.
func (cb *rpingCB) setupBuffers() int {
	o := cb.r.o
	o.debugf("rping_setup_buffers called on cb %p\n", cb)
	var err error
	cb.recvBuf = make([]byte, rpingInfoLen)
	if cb.recvMR, err = cb.pd.RegMR(cb.recvBuf, verbs.AccessLocalWrite); err != nil {
		o.eprintf("recv_buf reg_mr failed\n")
		return int(verbs.ErrnoOf(err))
	}
	cb.sendBuf = make([]byte, rpingInfoLen)
	if cb.sendMR, err = cb.pd.RegMR(cb.sendBuf, 0); err != nil {
		o.eprintf("send_buf reg_mr failed\n")
		cb.freeBuffers()
		return int(verbs.ErrnoOf(err))
	}
	access := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	cb.rdmaBuf = make([]byte, cb.size)
	if cb.rdmaMR, err = cb.pd.RegMR(cb.rdmaBuf, access); err != nil {
		o.eprintf("rdma_buf reg_mr failed\n")
		cb.freeBuffers()
		return int(verbs.ErrnoOf(err))
	}
	if !cb.server {
		cb.startBuf = make([]byte, cb.size)
		if cb.startMR, err = cb.pd.RegMR(cb.startBuf, access); err != nil {
			o.eprintf("start_buf reg_mr failed\n")
			cb.freeBuffers()
			return int(verbs.ErrnoOf(err))
		}
	}
	o.debugf("allocated & registered buffers...\n")
	return 0
}

// freeBuffers is rping_free_buffers.
func (cb *rpingCB) freeBuffers() {
	cb.r.o.debugf("rping_free_buffers called on cb %p\n", cb)
	for _, mr := range []**verbs.MR{&cb.recvMR, &cb.sendMR, &cb.rdmaMR, &cb.startMR} {
		if *mr != nil {
			(*mr).Dereg()
			*mr = nil
		}
	}
}

// setupQP is rping_setup_qp: PD, completion channel, a CQ of 32 entries
// armed for events, and the QP (rping_create_qp).
func (cb *rpingCB) setupQP(id *rdmacm.ID) int {
	o := cb.r.o
	vctx := id.Verbs()
	if vctx == nil {
		o.eprintf("ibv_alloc_pd failed\n")
		return int(syscall.ENODEV)
	}
	var err error
	if cb.pd, err = vctx.AllocPD(); err != nil {
		o.eprintf("ibv_alloc_pd failed\n")
		return int(verbs.ErrnoOf(err))
	}
	o.debugf("created pd %p\n", cb.pd)
	if cb.channel, err = vctx.CreateCompChannel(); err != nil {
		o.eprintf("ibv_create_comp_channel failed\n")
		cb.freeQP()
		return int(verbs.ErrnoOf(err))
	}
	o.debugf("created channel %p\n", cb.channel)
	if cb.cq, err = vctx.CreateCQ(rpingSQDepth*2, cb.channel); err != nil {
		o.eprintf("ibv_create_cq failed\n")
		cb.freeQP()
		return int(verbs.ErrnoOf(err))
	}
	o.debugf("created cq %p\n", cb.cq)
	if err = cb.cq.ReqNotify(false); err != nil {
		o.eprintf("ibv_create_cq failed\n")
		cb.freeQP()
		return int(verbs.ErrnoOf(err))
	}
	if ret := cb.createQP(id); ret != 0 {
		cb.freeQP()
		return ret
	}
	o.debugf("created qp %p\n", cb.qp)
	return 0
}

// createQP is rping_create_qp.
func (cb *rpingCB) createQP(id *rdmacm.ID) int {
	o := cb.r.o
	init := verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cb.cq, RecvCQ: cb.cq,
		Cap: verbs.QPCap{MaxSendWR: rpingSQDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if cb.selfCreate {
		qp, err := cb.pd.CreateQP(init)
		if err != nil {
			o.perror("ibv_create_qp", err)
			return -1
		}
		err = qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PKeyIndex: 0, PortNum: 1},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags)
		if err != nil {
			o.perror("ibv_modify_qp", err)
			qp.Destroy()
			return -1
		}
		cb.qp = qp
		return 0
	}
	if err := id.CreateQP(cb.pd, &init); err != nil {
		o.perror("rdma_create_qp", err)
		return -1
	}
	cb.qp = id.QP()
	return 0
}

// freeQP is rping_free_qp.
func (cb *rpingCB) freeQP() {
	if cb.qp != nil {
		id := cb.cmID
		if cb.server {
			id = cb.childID
		}
		if !cb.selfCreate && id != nil && id.QP() == cb.qp {
			id.DestroyQP()
		} else {
			cb.qp.Destroy()
		}
		cb.qp = nil
	}
	if cb.cq != nil {
		cb.cq.Destroy()
		cb.cq = nil
	}
	if cb.channel != nil {
		cb.channel.Destroy()
		cb.channel = nil
	}
	if cb.pd != nil {
		cb.pd.Dealloc()
		cb.pd = nil
	}
}

// formatSend is rping_format_send: the 16-byte advertisement of buf.
func (cb *rpingCB) formatSend(mr *verbs.MR) {
	binary.BigEndian.PutUint64(cb.sendBuf[0:], mr.Addr())
	binary.BigEndian.PutUint32(cb.sendBuf[8:], mr.RKey())
	binary.BigEndian.PutUint32(cb.sendBuf[12:], uint32(cb.size))
	cb.r.o.debugf("RDMA addr %x rkey %x len %d\n", mr.Addr(), mr.RKey(), cb.size)
}

// Results of await other than 0.
const (
	awaitFailed   = 1 // the wait itself failed: the caller gives up with -1
	awaitBadState = 2 // another state came: rping prints it and stops the loop
)

// await is the C code's sem_wait followed by a state test: it waits for
// the next event and checks the state is want, printing rping's "wait for
// NAME state N" otherwise.
func (cb *rpingCB) await(want int32, name string) int {
	if cb.wait() != nil {
		return awaitFailed
	}
	if st := cb.state.Load(); st != want {
		cb.r.o.eprintf("wait for %s state %d\n", name, st)
		return awaitBadState
	}
	return 0
}

// posted reports a failed post as rping does and returns its errno (0
// when err is nil).
func (cb *rpingCB) posted(err error) int {
	if err == nil {
		return 0
	}
	cb.r.o.eprintf("post send error %d\n", verbs.ErrnoOf(err))
	return int(verbs.ErrnoOf(err))
}

// cstr is the C string at the start of b.
func cstr(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// testServer is rping_test_server: READ the client's buffer, say go
// ahead, WRITE it back to the client's second buffer, say go ahead, until
// the client goes away.
func (cb *rpingCB) testServer() int {
	o := cb.r.o
	ret := 0
	for {
		// Wait for the client's start buffer advertisement.
		if w := cb.await(rpReadAdv, "RDMA_READ_ADV"); w != 0 {
			if w == awaitFailed {
				return -1
			}
			ret = -1
			break
		}
		o.debugf("server received sink adv\n")
		if ret = cb.posted(cb.postRDMA(verbs.WRRDMARead, cb.remoteLen)); ret != 0 {
			break
		}
		o.debugf("server posted rdma read req \n")
		if w := cb.await(rpReadComplete, "RDMA_READ_COMPLETE"); w != 0 {
			if w == awaitFailed {
				return -1
			}
			ret = -1
			break
		}
		o.debugf("server received read complete\n")
		if cb.verbose {
			o.printf("server ping data: %s\n", cstr(cb.rdmaBuf))
		}
		if ret = cb.posted(cb.postSend()); ret != 0 {
			break
		}
		o.debugf("server posted go ahead\n")
		if w := cb.await(rpWriteAdv, "RDMA_WRITE_ADV"); w != 0 {
			if w == awaitFailed {
				return -1
			}
			ret = -1
			break
		}
		o.debugf("server received sink adv\n")
		n := uint32(len(cstr(cb.rdmaBuf)) + 1)
		o.debugf("rdma write from lkey %x laddr %x len %d\n", cb.rdmaMR.LKey(), cb.rdmaMR.Addr(), n)
		if ret = cb.posted(cb.postRDMA(verbs.WRRDMAWrite, n)); ret != 0 {
			break
		}
		if w := cb.await(rpWriteComplete, "RDMA_WRITE_COMPLETE"); w != 0 {
			if w == awaitFailed {
				return -1
			}
			ret = -1
			break
		}
		o.debugf("server rdma write complete \n")
		if ret = cb.posted(cb.postSend()); ret != 0 {
			break
		}
		o.debugf("server posted go ahead\n")
	}
	if cb.state.Load() == rpDisconnected {
		return 0
	}
	return ret
}

// bindServer is rping_bind_server: bind to -a (any address by default)
// and listen with a backlog of 3.
func (cb *rpingCB) bindServer() int {
	o := cb.r.o
	if err := cb.cmID.BindAddr(cb.sin); err != nil {
		o.perror("rdma_bind_addr", err)
		return -1
	}
	o.debugf("rdma_bind_addr successful\n")
	o.debugf("rdma_listen\n")
	if err := cb.cmID.Listen(3); err != nil {
		o.perror("rdma_listen", err)
		return -1
	}
	o.listened()
	return 0
}

// serveConnection sets up, accepts and serves the connection of
// cb.childID, then tears it down (rping_run_server after the request;
// rping_persistent_server_thread).
func (cb *rpingCB) serveConnection(persistent bool) int {
	o := cb.r.o
	if ret := cb.setupQP(cb.childID); ret != 0 {
		o.eprintf("setup_qp failed: %d\n", ret)
		if persistent {
			cb.childID.Reject(nil)
			cb.childID.Destroy()
		}
		return ret
	}
	cleanup := func() {
		cb.freeBuffers()
		cb.freeQP()
		cb.childID.Destroy()
	}
	if ret := cb.setupBuffers(); ret != 0 {
		o.eprintf("rping_setup_buffers failed: %d\n", ret)
		cleanup()
		return ret
	}
	if err := cb.postRecv(); err != nil {
		o.eprintf("ibv_post_recv failed: %d\n", verbs.ErrnoOf(err))
		cleanup()
		return int(verbs.ErrnoOf(err))
	}
	cb.startCQThread()
	if ret := cb.accept(); ret != 0 {
		o.eprintf("connect error %d\n", ret)
		cb.cancelCQThread()
		cleanup()
		return ret
	}
	ret := cb.testServer()
	if ret != 0 && !persistent {
		o.eprintf("rping server failed: %d\n", ret)
	}
	if persistent {
		ret = 0
	}
	cb.disconnect(cb.childID)
	cb.joinCQThread()
	cleanup()
	return ret
}

// runServer is rping_run_server: one connection, then exit.
func (cb *rpingCB) runServer() int {
	if ret := cb.bindServer(); ret != 0 {
		return ret
	}
	if cb.wait() != nil {
		return -1
	}
	if st := cb.state.Load(); st != rpConnectRequest {
		cb.r.o.eprintf("wait for CONNECT_REQUEST state %d\n", st)
		return -1
	}
	return cb.serveConnection(false)
}

// runPersistentServer is rping_run_persistent_server: a goroutine per
// connection, forever (until the tool exits).
func (cb *rpingCB) runPersistentServer() int {
	if ret := cb.bindServer(); ret != 0 {
		return ret
	}
	for {
		if cb.wait() != nil {
			return -1
		}
		if st := cb.state.Load(); st != rpConnectRequest {
			cb.r.o.eprintf("wait for CONNECT_REQUEST state %d\n", st)
			return -1
		}
		c := <-cb.requests
		cb.r.conn.Add(1)
		go func() {
			defer cb.r.conn.Done()
			c.serveConnection(true)
		}()
	}
}

// testClient is rping_test_client: count pings (0: forever).
func (cb *rpingCB) testClient() int {
	o := cb.r.o
	ret := 0
	start := byte(65)
	for ping := 0; cb.count == 0 || ping < cb.count; ping++ {
		cb.state.Store(rpReadAdv)
		// Some ASCII text in the buffer.
		cc := copy(cb.startBuf, fmt.Sprintf("rdma-ping-%d: ", ping))
		c := start
		for i := cc; i < cb.size; i++ {
			cb.startBuf[i] = c
			c++
			if c > 122 {
				c = 65
			}
		}
		start++
		if start > 122 {
			start = 65
		}
		cb.startBuf[cb.size-1] = 0

		cb.formatSend(cb.startMR)
		if ret = cb.posted(cb.postSend()); ret != 0 {
			break
		}
		// Wait for the server to ACK.
		if w := cb.await(rpWriteAdv, "RDMA_WRITE_ADV"); w != 0 {
			if w == awaitFailed {
				return -1
			}
			ret = -1
			break
		}
		cb.formatSend(cb.rdmaMR)
		if ret = cb.posted(cb.postSend()); ret != 0 {
			break
		}
		// Wait for the server to say the RDMA WRITE is complete.
		if w := cb.await(rpWriteComplete, "RDMA_WRITE_COMPLETE"); w != 0 {
			if w == awaitFailed {
				return -1
			}
			ret = -1
			break
		}
		if cb.validate && !bytes.Equal(cb.startBuf, cb.rdmaBuf) {
			o.eprintf("data mismatch!\n")
			ret = -1
			break
		}
		if cb.verbose {
			o.printf("ping data: %s\n", cstr(cb.rdmaBuf))
		}
	}
	if cb.state.Load() == rpDisconnected {
		return 0
	}
	return ret
}

// connectClient is rping_connect_client.
func (cb *rpingCB) connectClient() int {
	o := cb.r.o
	if err := cb.cmID.Connect(context.Background(), cb.initConnParam()); err != nil {
		o.perror("rdma_connect", err)
		return -1
	}
	if cb.wait() != nil {
		return -1
	}
	if st := cb.state.Load(); st != rpConnected {
		o.eprintf("wait for CONNECTED state %d\n", st)
		return -1
	}
	if cb.selfCreate {
		if err := cb.selfModifyQP(cb.cmID); err != nil {
			o.perror("rping_modify_qp", err)
			return -int(verbs.ErrnoOf(err))
		}
		if err := cb.cmID.Establish(); err != nil {
			o.perror("rdma_establish", err)
			return -int(verbs.ErrnoOf(err))
		}
	}
	o.debugf("rdma_connect successful\n")
	return 0
}

// bindClient is rping_bind_client: resolve the address (and, from the
// CM thread, the route), 2000 ms each.
func (cb *rpingCB) bindClient() int {
	o := cb.r.o
	var src netip.AddrPort
	if cb.ssource.IsValid() {
		src = netip.AddrPortFrom(cb.ssource, 0)
	}
	if err := cb.cmID.ResolveAddr(context.Background(), src, cb.sin, 2000*time.Millisecond); err != nil {
		o.perror("rdma_resolve_addr", err)
		return -1
	}
	if cb.wait() != nil {
		return -1
	}
	if st := cb.state.Load(); st != rpRouteResolved {
		o.eprintf("waiting for addr/route resolution state %d\n", st)
		return -1
	}
	o.debugf("rdma_resolve_addr - rdma_resolve_route successful\n")
	return 0
}

// runClient is rping_run_client.
func (cb *rpingCB) runClient() int {
	o := cb.r.o
	if ret := cb.bindClient(); ret != 0 {
		return ret
	}
	if ret := cb.setupQP(cb.cmID); ret != 0 {
		o.eprintf("setup_qp failed: %d\n", ret)
		return ret
	}
	defer cb.freeQP()
	if ret := cb.setupBuffers(); ret != 0 {
		o.eprintf("rping_setup_buffers failed: %d\n", ret)
		return ret
	}
	defer cb.freeBuffers()
	if err := cb.postRecv(); err != nil {
		o.eprintf("ibv_post_recv failed: %d\n", verbs.ErrnoOf(err))
		return int(verbs.ErrnoOf(err))
	}
	cb.startCQThread()
	if ret := cb.connectClient(); ret != 0 {
		o.eprintf("connect error %d\n", ret)
		cb.cancelCQThread()
		return ret
	}
	ret := cb.testClient()
	if ret != 0 {
		o.eprintf("rping client failed: %d\n", ret)
	} else {
		ret = 0
	}
	cb.disconnect(cb.cmID)
	cb.joinCQThread()
	cb.awaitDisconnected()
	return ret
}

// awaitDisconnected gives the peer's DREP a moment to arrive, so that the
// client prints "client DISCONNECT EVENT..." as the C rping does, whose
// rdma_destroy_id waits for the events already delivered.
func (cb *rpingCB) awaitDisconnected() {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-cb.disconnected:
	case <-t.C:
	case <-cb.r.dead:
	}
}

// rpingPing returns what the client's start buffer holds for ping number
// ping at size bytes (tests).
func rpingPing(ping, size int) string {
	b := make([]byte, size)
	cc := copy(b, "rdma-ping-"+strconv.Itoa(ping)+": ")
	c := byte(65 + ping%58)
	for i := cc; i < size; i++ {
		b[i] = c
		c++
		if c > 122 {
			c = 65
		}
	}
	return string(b[:size-1])
}
