package cmtools

import (
	"context"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

const cmatoseOptstring = "s:b:f:P:c:C:S:t:p:a:m"

// Indexes of a node's two CQs (enum CQ_INDEX).
const (
	sendCQIndex = 0
	recvCQIndex = 1
)

// cmatoseNode is struct cmatest_node: one connection.
type cmatoseNode struct {
	id        int
	cmaID     *rdmacm.ID
	connected bool
	pd        *verbs.PD
	cq        [2]*verbs.CQ
	mr        *verbs.MR
	mem       []byte
}

// cmatose is one run of ucmatose: struct cmatest and cmatose.c's globals.
type cmatose struct {
	o   *out
	ctx context.Context

	channel         *rdmacm.EventChannel
	nodes           []cmatoseNode
	connIndex       int
	connectsLeft    int
	disconnectsLeft int
	rai             *rdmacm.AddrInfo

	connections  int
	messageSize  int
	messageCount int
	port         string
	setTOS       bool
	tos          uint8
	migrate      bool
	dstAddr      *string
	srcAddr      *string
	hints        rdmacm.AddrInfo
	setTimeout   bool
	timeout      uint8
}

// Ucmatose is rdma-core 44's ucmatose (cmatose.c): args is the command
// line without the program name; the result is the exit status.
func Ucmatose(e *Env, args []string) int {
	t := &cmatose{o: newOut(e), ctx: e.ctxOf(), connections: 1, messageSize: 100, messageCount: 10, port: "7471"}
	t.hints.PortSpace = rdmacm.PSTCP
	o := t.o
	p := getopt.New(e.Prog, cmatoseOptstring, nil)
	p.Opterr = false // printed below, after the options before the bad one
	res, perr := p.Parse(args)
	for _, opt := range res.Opts {
		v := opt.Value
		switch opt.Option.Short {
		case 's':
			t.dstAddr = &v
		case 'b':
			t.srcAddr = &v
		case 'f':
			if !parseAddrFormat(v, &t.hints) {
				o.eprintf("Warning: unknown address format\n")
			}
		case 'P':
			if hasPrefixFold(v, "ib") {
				t.hints.PortSpace = rdmacm.PSIB
			} else if !hasPrefixFold(v, "tcp") {
				o.eprintf("Warning: unknown port space format\n")
			}
		case 'c':
			t.connections = getopt.Atoi(v)
		case 'C':
			t.messageCount = getopt.Atoi(v)
		case 'S':
			t.messageSize = getopt.Atoi(v)
		case 't':
			n, _, _ := getopt.Strtoul(v, 0)
			t.setTOS, t.tos = true, uint8(n)
		case 'p':
			t.port = v
		case 'm':
			t.migrate = true
		case 'a':
			n, _, _ := getopt.Strtoul(v, 0)
			t.setTimeout, t.timeout = true, uint8(n)
		}
	}
	if perr != nil {
		o.eprintf("%s\n", perr)
		cmatoseUsage(o, e.Prog)
		return 1
	}

	t.connectsLeft = t.connections
	ch, err := createFirstEventChannel(o)
	if err != nil {
		return 1
	}
	t.channel = ch
	if t.allocNodes() != 0 {
		ch.Destroy()
		return 1
	}
	var ret int
	if t.dstAddr != nil {
		ret = t.runClient()
	} else {
		t.hints.Flags |= rdmacm.RAIPassive
		ret = t.runServer()
	}
	o.printf("test complete\n")
	t.destroyNodes()
	t.channel.Destroy()
	o.printf("return status %d\n", ret)
	return exitStatus(ret)
}

func cmatoseUsage(o *out, prog string) {
	o.printf("usage: %s\n", prog)
	o.printf("\t[-s server_address]\n")
	o.printf("\t[-b bind_address]\n")
	o.printf("\t[-f address_format]\n")
	o.printf("\t    name, ip, ipv6, or gid\n")
	o.printf("\t[-P port_space]\n")
	o.printf("\t    tcp or ib\n")
	o.printf("\t[-c connections]\n")
	o.printf("\t[-C message_count]\n")
	o.printf("\t[-S message_size]\n")
	o.printf("\t[-t type_of_service]\n")
	o.printf("\t[-p port_number]\n")
	o.printf("\t[-m(igrate)]\n")
	o.printf("\t[-a ack_timeout]\n")
}

// negErrno returns the negative errno of err, as the C tools' ret values.
func negErrno(err error) int { return -int(verbs.ErrnoOf(err)) }

// createMessage is create_message: the node's message buffer.
func (t *cmatose) createMessage(n *cmatoseNode) int {
	if t.messageSize == 0 {
		t.messageCount = 0
	}
	if t.messageCount == 0 {
		return 0
	}
	if t.messageSize < 0 {
		t.o.printf("failed message allocation\n")
		return -1
	}
	n.mem = make([]byte, t.messageSize)
	mr, err := n.pd.RegMR(n.mem, verbs.AccessLocalWrite)
	if err != nil {
		t.o.printf("failed to reg MR\n")
		n.mem = nil
		return -1
	}
	n.mr = mr
	return 0
}

// initNode is init_node: PD, two CQs of C entries, an RC QP with every
// send signaled, and the message buffer.
func (t *cmatose) initNode(n *cmatoseNode) int {
	o := t.o
	vctx := n.cmaID.Verbs()
	var err error
	if vctx == nil {
		o.printf("cmatose: unable to allocate PD\n")
		return -int(syscall.ENOMEM)
	}
	if n.pd, err = vctx.AllocPD(); err != nil {
		o.printf("cmatose: unable to allocate PD\n")
		return -int(syscall.ENOMEM)
	}
	cqe := t.messageCount
	if cqe == 0 {
		cqe = 1
	}
	n.cq[sendCQIndex], err = vctx.CreateCQ(cqe, nil)
	var err2 error
	n.cq[recvCQIndex], err2 = vctx.CreateCQ(cqe, nil)
	if err != nil || err2 != nil {
		o.printf("cmatose: unable to create CQ\n")
		return -int(syscall.ENOMEM)
	}
	init := verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: n.cq[sendCQIndex], RecvCQ: n.cq[recvCQIndex], SigAll: true,
		Cap: verbs.QPCap{MaxSendWR: uint32(cqe), MaxRecvWR: uint32(cqe), MaxSendSGE: 1, MaxRecvSGE: 1}}
	if err := n.cmaID.CreateQP(n.pd, &init); err != nil {
		o.perror("cmatose: unable to create QP", err)
		return negErrno(err)
	}
	if ret := t.createMessage(n); ret != 0 {
		o.printf("cmatose: failed to create messages: %d\n", ret)
		return ret
	}
	return 0
}

// postRecvs is post_recvs: C receives of the message buffer.
func (t *cmatose) postRecvs(n *cmatoseNode) int {
	if t.messageCount == 0 {
		return 0
	}
	for i := 0; i < t.messageCount; i++ {
		err := n.cmaID.QP().PostRecv(verbs.RecvWR{ID: uint64(n.id), SGL: []verbs.SGE{n.mr.SGE(0, t.messageSize)}})
		if err != nil {
			ret := int(verbs.ErrnoOf(err))
			t.o.printf("failed to post receives: %d\n", ret)
			return ret
		}
	}
	return 0
}

// postSends is post_sends: C SENDs of the message buffer.
func (t *cmatose) postSends(n *cmatoseNode) int {
	if !n.connected || t.messageCount == 0 {
		return 0
	}
	for i := 0; i < t.messageCount; i++ {
		err := n.cmaID.QP().PostSend(verbs.SendWR{ID: uint64(n.id), Opcode: verbs.WRSend,
			SGL: []verbs.SGE{n.mr.SGE(0, t.messageSize)}})
		if err != nil {
			ret := int(verbs.ErrnoOf(err))
			t.o.printf("failed to post sends: %d\n", ret)
			return ret
		}
	}
	return 0
}

func (t *cmatose) connectError() { t.connectsLeft-- }

// addrHandler is addr_handler: options, then route resolution.
func (t *cmatose) addrHandler(n *cmatoseNode) int {
	if t.setTOS {
		n.cmaID.SetTOS(t.tos)
	}
	if t.setTimeout {
		n.cmaID.SetAckTimeout(t.timeout)
	}
	if err := n.cmaID.ResolveRoute(t.ctx, 2000*time.Millisecond); err != nil {
		t.o.perror("cmatose: resolve route failed", err)
		t.connectError()
		return -1
	}
	return 0
}

// routeHandler is route_handler: resources, receives, connect.
func (t *cmatose) routeHandler(n *cmatoseNode) int {
	ret := t.initNode(n)
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	if ret == 0 {
		// rdma_getaddrinfo's ai_connect (private data) is empty for IP
		// addresses.
		err := n.cmaID.Connect(t.ctx, &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5})
		if err != nil {
			t.o.perror("cmatose: failure connecting", err)
			ret = -1
		}
	}
	if ret != 0 {
		t.connectError()
	}
	return ret
}

// connectHandler is connect_handler: a node for the request, resources,
// receives, accept; or a reject.
func (t *cmatose) connectHandler(id *rdmacm.ID) int {
	var ret int
	if t.connIndex == t.connections {
		ret = -int(syscall.ENOMEM)
	} else {
		n := &t.nodes[t.connIndex]
		t.connIndex++
		n.cmaID = id
		id.SetContext(n)
		ret = t.initNode(n)
		if ret == 0 && t.setTimeout {
			id.SetAckTimeout(t.timeout)
		}
		if ret == 0 {
			ret = t.postRecvs(n)
		}
		if ret == 0 {
			if err := id.Accept(t.ctx, nil); err != nil {
				t.o.perror("cmatose: failure accepting", err)
				ret = -1
			}
		}
		if ret == 0 {
			return 0
		}
		t.freeNodeResources(n)
		n.cmaID = nil
		t.connectError()
	}
	t.o.printf("cmatose: failing connection request\n")
	id.Reject(nil)
	id.Destroy()
	return ret
}

// cmaHandler is cma_handler.
func (t *cmatose) cmaHandler(id *rdmacm.ID, ev *rdmacm.Event) int {
	ret := 0
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		ret = t.addrHandler(id.Context().(*cmatoseNode))
	case rdmacm.EventRouteResolved:
		ret = t.routeHandler(id.Context().(*cmatoseNode))
	case rdmacm.EventConnectRequest:
		ret = t.connectHandler(id)
	case rdmacm.EventEstablished:
		if n, ok := id.Context().(*cmatoseNode); ok {
			n.connected = true
		}
		t.connectsLeft--
		t.disconnectsLeft++
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
		rdmacm.EventUnreachable, rdmacm.EventRejected:
		t.o.printf("cmatose: event: %s, error: %d\n", ev.Type, ev.Status)
		t.connectError()
		ret = ev.Status
	case rdmacm.EventDisconnected:
		id.Disconnect()
		t.disconnectsLeft--
	}
	return ret
}

// freeNodeResources releases what initNode made (destroy_node without the
// id).
func (t *cmatose) freeNodeResources(n *cmatoseNode) {
	if n.cmaID != nil && n.cmaID.QP() != nil {
		n.cmaID.DestroyQP()
	}
	for i, cq := range n.cq {
		if cq != nil {
			cq.Destroy()
			n.cq[i] = nil
		}
	}
	if n.mr != nil {
		n.mr.Dereg()
		n.mr, n.mem = nil, nil
	}
	if n.pd != nil {
		n.pd.Dealloc()
		n.pd = nil
	}
}

// destroyNode is destroy_node.
func (t *cmatose) destroyNode(n *cmatoseNode) {
	if n.cmaID == nil {
		return
	}
	t.freeNodeResources(n)
	// Destroy the id after all device resources.
	n.cmaID.Destroy()
	n.cmaID = nil
}

// allocNodes is alloc_nodes: the nodes, and on the client an id each.
func (t *cmatose) allocNodes() int {
	if t.connections < 0 {
		t.o.printf("cmatose: unable to allocate memory for test nodes\n")
		return -int(syscall.ENOMEM)
	}
	t.nodes = make([]cmatoseNode, t.connections)
	for i := range t.nodes {
		t.nodes[i].id = i
		if t.dstAddr != nil {
			id, err := rdmacm.CreateID(t.channel, &t.nodes[i], t.hints.PortSpace)
			if err != nil {
				for j := i - 1; j >= 0; j-- {
					t.nodes[j].cmaID.Destroy()
				}
				return negErrno(err)
			}
			t.nodes[i].cmaID = id
		}
	}
	return 0
}

func (t *cmatose) destroyNodes() {
	for i := range t.nodes {
		t.destroyNode(&t.nodes[i])
	}
}

// pollCQs is poll_cqs: message_count completions on every connected
// node's send or receive CQ.
func (t *cmatose) pollCQs(index int) int {
	for i := range t.nodes {
		n := &t.nodes[i]
		if !n.connected {
			continue
		}
		if err := pollCount(t.ctx, n.cq[index], t.messageCount, nil); err != nil {
			ret := negErrno(err)
			t.o.printf("cmatose: failed polling CQ: %d\n", ret)
			return ret
		}
	}
	return 0
}

// events handles CM events while *left > 0 (connect_events,
// disconnect_events).
func (t *cmatose) events(left *int, what string) int {
	ret := 0
	for *left > 0 && ret == 0 {
		ev, err := t.channel.GetCMEvent(t.ctx)
		if err != nil {
			t.o.perror("cmatose: failure in rdma_get_cm_event in "+what+" events", err)
			return int(verbs.ErrnoOf(err))
		}
		ret = t.cmaHandler(ev.ID, ev)
	}
	return ret
}

// migrateChannel is migrate_channel: every id onto a new event channel.
func (t *cmatose) migrateChannel(listenID *rdmacm.ID) int {
	t.o.printf("migrating to new event channel\n")
	ch, err := rdmacm.CreateEventChannel()
	if err != nil {
		t.o.perror("cmatose: failed to create event channel", err)
		return -1
	}
	if listenID != nil {
		err = listenID.Migrate(ch)
	}
	for i := 0; i < len(t.nodes) && err == nil; i++ {
		if id := t.nodes[i].cmaID; id != nil {
			err = id.Migrate(ch)
		} else {
			err = rdmacm.ErrInvalid
		}
	}
	if err != nil {
		t.o.perror("cmatose: failure migrating to channel", err)
		ch.Destroy()
		return -1
	}
	t.channel.Destroy()
	t.channel = ch
	return 0
}

// runServer is run_server.
func (t *cmatose) runServer() int {
	o := t.o
	o.printf("cmatose: starting server\n")
	listenID, err := rdmacm.CreateID(t.channel, t, t.hints.PortSpace)
	if err != nil {
		o.perror("cmatose: listen request failed", err)
		return negErrno(err)
	}
	defer listenID.Destroy()
	var code int
	if t.rai, code = getRDMAAddr(t.ctx, t.srcAddr, t.dstAddr, t.port, &t.hints); code != 0 {
		o.printf("cmatose: getrdmaaddr error: %s\n", gaiStrerror(code))
		return code
	}
	if err := listenID.BindAddr(t.rai.SrcAddr); err != nil {
		o.perror("cmatose: bind address failed", err)
		return -1
	}
	if err := listenID.Listen(0); err != nil {
		o.perror("cmatose: failure trying to listen", err)
		return -1
	}
	o.listened()
	if ret := t.events(&t.connectsLeft, "connect"); ret != 0 {
		return ret
	}
	if t.messageCount != 0 {
		o.printf("initiating data transfers\n")
		for i := range t.nodes {
			if ret := t.postSends(&t.nodes[i]); ret != 0 {
				return ret
			}
		}
		o.printf("completing sends\n")
		if ret := t.pollCQs(sendCQIndex); ret != 0 {
			return ret
		}
		o.printf("receiving data transfers\n")
		if ret := t.pollCQs(recvCQIndex); ret != 0 {
			return ret
		}
		o.printf("data transfers complete\n")
	}
	if t.migrate {
		if ret := t.migrateChannel(listenID); ret != 0 {
			return ret
		}
	}
	o.printf("cmatose: disconnecting\n")
	for i := range t.nodes {
		n := &t.nodes[i]
		if !n.connected {
			continue
		}
		n.connected = false
		n.cmaID.Disconnect()
	}
	ret := t.events(&t.disconnectsLeft, "disconnect")
	o.printf("disconnected\n")
	return ret
}

// runClient is run_client.
func (t *cmatose) runClient() int {
	o := t.o
	o.printf("cmatose: starting client\n")
	var code int
	if t.rai, code = getRDMAAddr(t.ctx, t.srcAddr, t.dstAddr, t.port, &t.hints); code != 0 {
		o.printf("cmatose: getaddrinfo error: %s\n", gaiStrerror(code))
		return code
	}
	o.printf("cmatose: connecting\n")
	for i := range t.nodes {
		err := t.nodes[i].cmaID.ResolveAddr(t.ctx, t.rai.SrcAddr, t.rai.DstAddr, 2000*time.Millisecond)
		if err != nil {
			o.perror("cmatose: failure getting addr", err)
			t.connectError()
			return -1
		}
	}
	ret := t.events(&t.connectsLeft, "connect")
	if ret == 0 {
		ret = t.clientTransfers()
		if ret == 0 && t.migrate {
			if ret = t.migrateChannel(nil); ret != 0 {
				return ret
			}
		}
	}
	if ret2 := t.events(&t.disconnectsLeft, "disconnect"); ret2 != 0 {
		ret = ret2
	}
	return ret
}

// clientTransfers receives the server's messages and sends the replies.
func (t *cmatose) clientTransfers() int {
	if t.messageCount == 0 {
		return 0
	}
	t.o.printf("receiving data transfers\n")
	if ret := t.pollCQs(recvCQIndex); ret != 0 {
		return ret
	}
	t.o.printf("sending replies\n")
	for i := range t.nodes {
		if ret := t.postSends(&t.nodes[i]); ret != 0 {
			return ret
		}
	}
	t.o.printf("data transfers complete\n")
	return 0
}
