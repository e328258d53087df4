package cmtools

import (
	"context"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

const udaddyOptstring = "s:b:c:C:S:t:p:P:f:"

// udaddyNode is udaddy.c's struct cmatest_node: one UD endpoint and its
// peer.
type udaddyNode struct {
	id         int
	cmaID      *rdmacm.ID
	connected  bool
	pd         *verbs.PD
	cq         *verbs.CQ
	mr         *verbs.MR
	ah         *verbs.AH
	remoteQPN  uint32
	remoteQKey uint32
	mem        []byte
}

// udaddy is one run of udaddy: struct cmatest and udaddy.c's globals.
type udaddy struct {
	o   *out
	ctx context.Context

	channel      *rdmacm.EventChannel
	nodes        []udaddyNode
	connIndex    int
	connectsLeft int
	rai          *rdmacm.AddrInfo

	connections  int
	messageSize  int
	messageCount int
	port         string
	setTOS       bool
	tos          uint8
	dstAddr      *string
	srcAddr      *string
	hints        rdmacm.AddrInfo
}

// Udaddy is rdma-core 44's udaddy: UD endpoints resolved with SIDR that
// exchange SEND_WITH_IMM messages. args is the command line without the
// program name; the result is the exit status.
func Udaddy(e *Env, args []string) int {
	t := &udaddy{o: newOut(e), ctx: e.ctxOf(), connections: 1, messageSize: 100, messageCount: 10, port: "7174"}
	t.hints.PortSpace = rdmacm.PSUDP
	o := t.o
	p := getopt.New(e.Prog, udaddyOptstring, nil)
	p.Opterr = false // printed below, after the options before the bad one
	res, perr := p.Parse(args)
	for _, opt := range res.Opts {
		v := opt.Value
		switch opt.Option.Short {
		case 's':
			t.dstAddr = &v
		case 'b':
			t.srcAddr = &v
		case 'c':
			t.connections = getopt.Atoi(v)
		case 'C':
			t.messageCount = getopt.Atoi(v)
		case 'S':
			t.messageSize = getopt.Atoi(v)
		case 't':
			n, _, _ := getopt.Strtoul(v, 0)
			t.setTOS, t.tos = true, uint8(n)
		case 'p': // for backwards compatibility - use -P
			n, _, _ := getopt.Strtol(v, 0)
			t.hints.PortSpace = rdmacm.PortSpace(n)
		case 'f':
			if !parseAddrFormat(v, &t.hints) {
				o.eprintf("Warning: unknown address format\n")
			}
		case 'P':
			if hasPrefixFold(v, "ipoib") {
				t.hints.PortSpace = rdmacm.PSIPoIB
			} else if !hasPrefixFold(v, "udp") {
				o.eprintf("Warning: unknown port space format\n")
			}
		}
	}
	if perr != nil {
		o.eprintf("%s\n", perr)
		udaddyUsage(o, e.Prog)
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

func udaddyUsage(o *out, prog string) {
	o.printf("usage: %s\n", prog)
	o.printf("\t[-s server_address]\n")
	o.printf("\t[-b bind_address]\n")
	o.printf("\t[-f address_format]\n")
	o.printf("\t    name, ip, ipv6, or gid\n")
	o.printf("\t[-P port_space]\n")
	o.printf("\t    udp or ipoib\n")
	o.printf("\t[-c connections]\n")
	o.printf("\t[-C message_count]\n")
	o.printf("\t[-S message_size]\n")
	o.printf("\t[-t type_of_service]\n")
	o.printf("\t[-p port_space - %#x for UDP (default), %#x for IPOIB]\n", int(rdmacm.PSUDP), int(rdmacm.PSIPoIB))
}

// createMessage is create_message: the message buffer, with room for the
// GRH of a UD receive in front.
func (t *udaddy) createMessage(n *udaddyNode) int {
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
	// Unlike udaddy.c, whose receives all land in one buffer, each
	// receive gets its own slot (and sends a slot of their own), so a
	// message landing never overwrites the GRH being read from another.
	// Nothing of this shows on the wire.
	n.mem = make([]byte, (t.messageCount+1)*t.slotLen())
	mr, err := n.pd.RegMR(n.mem, verbs.AccessLocalWrite)
	if err != nil {
		t.o.printf("failed to reg MR\n")
		n.mem = nil
		return -1
	}
	n.mr = mr
	return 0
}

// verifyTestParams is verify_test_params: a message must fit the port's
// active MTU.
func (t *udaddy) verifyTestParams(n *udaddyNode) int {
	vctx := n.cmaID.Verbs()
	if vctx == nil {
		return -int(syscall.ENODEV)
	}
	pa, err := vctx.QueryPort(1)
	if err != nil {
		return int(verbs.ErrnoOf(err))
	}
	mtu := 1 << (pa.ActiveMTU + 7)
	if t.messageCount != 0 && t.messageSize > mtu {
		t.o.printf("udaddy: message_size %d is larger than active mtu %d\n", t.messageSize, mtu)
		return -int(syscall.EINVAL)
	}
	return 0
}

// initNode is init_node: PD, one CQ of 2·C entries, a UD QP of C sends and
// C receives, and the message buffer.
func (t *udaddy) initNode(n *udaddyNode) int {
	o := t.o
	vctx := n.cmaID.Verbs()
	var err error
	if vctx == nil {
		o.printf("udaddy: unable to allocate PD\n")
		return -int(syscall.ENOMEM)
	}
	if n.pd, err = vctx.AllocPD(); err != nil {
		o.printf("udaddy: unable to allocate PD\n")
		return -int(syscall.ENOMEM)
	}
	cqe, wr := 2, 1
	if t.messageCount != 0 {
		cqe, wr = t.messageCount*2, t.messageCount
	}
	if n.cq, err = vctx.CreateCQ(cqe, nil); err != nil {
		o.printf("udaddy: unable to create CQ\n")
		return -int(syscall.ENOMEM)
	}
	init := verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: verbs.QPCap{MaxSendWR: uint32(wr), MaxRecvWR: uint32(wr), MaxSendSGE: 1, MaxRecvSGE: 1}}
	if err := n.cmaID.CreateQP(n.pd, &init); err != nil {
		o.perror("udaddy: unable to create QP", err)
		return negErrno(err)
	}
	if ret := t.createMessage(n); ret != 0 {
		o.printf("udaddy: failed to create messages: %d\n", ret)
		return ret
	}
	return 0
}

// slotLen is the size of one receive: the message and the GRH in front.
func (t *udaddy) slotLen() int { return t.messageSize + verbs.GRHLen }

// postRecvs is post_recvs: C receives of S + 40 bytes.
func (t *udaddy) postRecvs(n *udaddyNode) int {
	if t.messageCount == 0 {
		return 0
	}
	for i := 0; i < t.messageCount; i++ {
		err := n.cmaID.QP().PostRecv(verbs.RecvWR{ID: uint64(n.id)<<32 | uint64(i),
			SGL: []verbs.SGE{n.mr.SGE(i*t.slotLen(), t.slotLen())}})
		if err != nil {
			ret := int(verbs.ErrnoOf(err))
			t.o.printf("failed to post receives: %d\n", ret)
			return ret
		}
	}
	return 0
}

// postSends is post_sends: C SEND_WITH_IMM of S bytes to the peer, the
// immediate data being this QP's number.
func (t *udaddy) postSends(n *udaddyNode, flags verbs.SendFlags) int {
	if !n.connected || t.messageCount == 0 {
		return 0
	}
	qp := n.cmaID.QP()
	for i := 0; i < t.messageCount; i++ {
		err := qp.PostSend(verbs.SendWR{ID: uint64(n.id), Opcode: verbs.WRSendWithImm, Flags: flags,
			ImmData: qp.QPN(), AH: n.ah, RemoteQPN: n.remoteQPN, RemoteQKey: n.remoteQKey,
			SGL: []verbs.SGE{n.mr.SGE(t.messageCount*t.slotLen(), t.messageSize)}})
		if err != nil {
			ret := int(verbs.ErrnoOf(err))
			t.o.printf("failed to post sends: %d\n", ret)
			return ret
		}
	}
	return 0
}

func (t *udaddy) connectError() { t.connectsLeft-- }

// addrHandler is addr_handler.
func (t *udaddy) addrHandler(n *udaddyNode) int {
	if t.setTOS {
		n.cmaID.SetTOS(t.tos)
	}
	if err := n.cmaID.ResolveRoute(t.ctx, 2000*time.Millisecond); err != nil {
		t.o.perror("udaddy: resolve route failed", err)
		t.connectError()
		return -1
	}
	return 0
}

// routeHandler is route_handler: checks, resources, receives, then the
// SIDR request.
func (t *udaddy) routeHandler(n *udaddyNode) int {
	ret := t.verifyTestParams(n)
	if ret == 0 {
		ret = t.initNode(n)
	}
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	if ret == 0 {
		if err := n.cmaID.Connect(t.ctx, &rdmacm.ConnParam{}); err != nil {
			t.o.perror("udaddy: failure connecting", err)
			ret = -1
		}
	}
	if ret != 0 {
		t.connectError()
	}
	return ret
}

// connectHandler is connect_handler: a node, resources, receives, and
// the SIDR reply with its QP number.
func (t *udaddy) connectHandler(id *rdmacm.ID) int {
	var ret int
	if t.connIndex == t.connections {
		ret = -int(syscall.ENOMEM)
	} else {
		n := &t.nodes[t.connIndex]
		t.connIndex++
		n.cmaID = id
		id.SetContext(n)
		ret = t.verifyTestParams(n)
		if ret == 0 {
			ret = t.initNode(n)
		}
		if ret == 0 {
			ret = t.postRecvs(n)
		}
		if ret == 0 {
			if err := id.Accept(t.ctx, &rdmacm.ConnParam{QPNum: id.QP().QPN()}); err != nil {
				t.o.perror("udaddy: failure accepting", err)
				ret = -1
			}
		}
		if ret == 0 {
			n.connected = true
			t.connectsLeft--
			return 0
		}
		t.freeNodeResources(n)
		n.cmaID = nil
		t.connectError()
	}
	t.o.printf("udaddy: failing connection request\n")
	id.Reject(nil)
	id.Destroy()
	return ret
}

// resolvedHandler is resolved_handler: the server's QPN, Q_Key and
// address from the SIDR reply.
func (t *udaddy) resolvedHandler(n *udaddyNode, ev *rdmacm.Event) int {
	n.remoteQPN = ev.UD.QPNum
	n.remoteQKey = ev.UD.QKey
	ah, err := n.pd.CreateAH(ev.UD.AHAttr)
	if err != nil {
		t.o.printf("udaddy: failure creating address handle\n")
		t.connectError()
		return -1
	}
	n.ah = ah
	n.connected = true
	t.connectsLeft--
	return 0
}

// cmaHandler is cma_handler.
func (t *udaddy) cmaHandler(id *rdmacm.ID, ev *rdmacm.Event) int {
	ret := 0
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		ret = t.addrHandler(id.Context().(*udaddyNode))
	case rdmacm.EventRouteResolved:
		ret = t.routeHandler(id.Context().(*udaddyNode))
	case rdmacm.EventConnectRequest:
		ret = t.connectHandler(id)
	case rdmacm.EventEstablished:
		ret = t.resolvedHandler(id.Context().(*udaddyNode), ev)
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
		rdmacm.EventUnreachable, rdmacm.EventRejected:
		t.o.printf("udaddy: event: %s, error: %d\n", ev.Type, ev.Status)
		t.connectError()
		ret = ev.Status
	}
	return ret
}

// freeNodeResources releases what initNode and the handlers made.
func (t *udaddy) freeNodeResources(n *udaddyNode) {
	if n.ah != nil {
		n.ah.Destroy()
		n.ah = nil
	}
	if n.cmaID != nil && n.cmaID.QP() != nil {
		n.cmaID.DestroyQP()
	}
	if n.cq != nil {
		n.cq.Destroy()
		n.cq = nil
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
func (t *udaddy) destroyNode(n *udaddyNode) {
	if n.cmaID == nil {
		return
	}
	t.freeNodeResources(n)
	n.cmaID.Destroy()
	n.cmaID = nil
}

// allocNodes is alloc_nodes.
func (t *udaddy) allocNodes() int {
	if t.connections < 0 {
		t.o.printf("udaddy: unable to allocate memory for test nodes\n")
		return -int(syscall.ENOMEM)
	}
	t.nodes = make([]udaddyNode, t.connections)
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

func (t *udaddy) destroyNodes() {
	for i := range t.nodes {
		t.destroyNode(&t.nodes[i])
	}
}

// createReplyAH is create_reply_ah: the address of the client from the
// first completion and the GRH in front of its message; its QPN from the
// immediate data; the Q_Key of this node's own QP.
func (t *udaddy) createReplyAH(n *udaddyNode, wc *verbs.WC) error {
	slot := int(uint32(wc.WRID)) * t.slotLen()
	ah, err := n.pd.CreateAHFromWC(wc, n.mem[slot:slot+verbs.GRHLen], 1)
	if err != nil {
		return err
	}
	n.ah = ah
	n.remoteQPN = wc.ImmData
	attr, _, err := n.cmaID.QP().Query()
	if err != nil {
		return err
	}
	n.remoteQKey = attr.QKey
	return nil
}

// pollCQs is poll_cqs: message_count completions on every connected
// node's CQ; the first one gives a node without an address handle its
// reply address.
func (t *udaddy) pollCQs() int {
	for i := range t.nodes {
		n := &t.nodes[i]
		if !n.connected {
			continue
		}
		var ahErr error
		first := func(wc *verbs.WC) error {
			if n.ah != nil {
				return nil
			}
			if err := t.createReplyAH(n, wc); err != nil {
				ahErr = err
				return err
			}
			return nil
		}
		if err := pollCount(t.ctx, n.cq, t.messageCount, first); err != nil {
			if ahErr != nil {
				t.o.printf("udaddy: failed to create reply AH\n")
				return -1
			}
			ret := negErrno(err)
			t.o.printf("udaddy: failed polling CQ: %d\n", ret)
			return ret
		}
	}
	return 0
}

// connectEvents is connect_events.
func (t *udaddy) connectEvents() int {
	ret := 0
	for t.connectsLeft > 0 && ret == 0 {
		ev, err := t.channel.GetCMEvent(t.ctx)
		if err != nil {
			return -1
		}
		ret = t.cmaHandler(ev.ID, ev)
	}
	return ret
}

// runServer is run_server.
func (t *udaddy) runServer() int {
	o := t.o
	o.printf("udaddy: starting server\n")
	listenID, err := rdmacm.CreateID(t.channel, t, t.hints.PortSpace)
	if err != nil {
		o.perror("udaddy: listen request failed", err)
		return negErrno(err)
	}
	defer listenID.Destroy()
	var code int
	if t.rai, code = getRDMAAddr(t.ctx, t.srcAddr, t.dstAddr, t.port, &t.hints); code != 0 {
		o.printf("udaddy: getrdmaaddr error: %s\n", gaiStrerror(code))
		return code
	}
	if err := listenID.BindAddr(t.rai.SrcAddr); err != nil {
		o.perror("udaddy: bind address failed", err)
		return -1
	}
	if err := listenID.Listen(0); err != nil {
		o.perror("udaddy: failure trying to listen", err)
		return -1
	}
	o.listened()
	t.connectEvents()
	if t.messageCount != 0 {
		o.printf("receiving data transfers\n")
		if ret := t.pollCQs(); ret != 0 {
			return ret
		}
		o.printf("sending replies\n")
		for i := range t.nodes {
			if ret := t.postSends(&t.nodes[i], verbs.SendSignaled); ret != 0 {
				return ret
			}
		}
		if ret := t.pollCQs(); ret != 0 {
			return ret
		}
		o.printf("data transfers complete\n")
	}
	return 0
}

// runClient is run_client.
func (t *udaddy) runClient() int {
	o := t.o
	o.printf("udaddy: starting client\n")
	var code int
	if t.rai, code = getRDMAAddr(t.ctx, t.srcAddr, t.dstAddr, t.port, &t.hints); code != 0 {
		o.printf("udaddy: getaddrinfo error: %s\n", gaiStrerror(code))
		return code
	}
	o.printf("udaddy: connecting\n")
	for i := range t.nodes {
		err := t.nodes[i].cmaID.ResolveAddr(t.ctx, t.rai.SrcAddr, t.rai.DstAddr, 2000*time.Millisecond)
		if err != nil {
			o.perror("udaddy: failure getting addr", err)
			t.connectError()
			return -1
		}
	}
	if ret := t.connectEvents(); ret != 0 {
		return ret
	}
	if t.messageCount != 0 {
		o.printf("initiating data transfers\n")
		for i := range t.nodes {
			if ret := t.postSends(&t.nodes[i], 0); ret != 0 {
				return ret
			}
		}
		o.printf("receiving data transfers\n")
		if ret := t.pollCQs(); ret != 0 {
			return ret
		}
		o.printf("data transfers complete\n")
	}
	return 0
}
