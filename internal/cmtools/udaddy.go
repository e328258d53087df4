package cmtools

import (
	"syscall"

	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

const udaddyOptstring = "s:b:c:C:S:t:p:P:f:"

// udaddyNode is udaddy.c's struct cmatest_node: one UD endpoint and its
// peer.
type udaddyNode struct {
	cmNode
	cq         *verbs.CQ
	ah         *verbs.AH
	remoteQPN  uint32
	remoteQKey uint32
}

// free releases what initNode and the handlers made.
func (n *udaddyNode) free() {
	if n.ah != nil {
		n.ah.Destroy()
		n.ah = nil
	}
	n.freeResources(&n.cq)
}

// udaddy is one run of udaddy: struct cmatest and udaddy.c's globals.
type udaddy struct {
	cmTest[udaddyNode, *udaddyNode]
}

// Udaddy is rdma-core 44's udaddy: UD endpoints resolved with SIDR that
// exchange SEND_WITH_IMM messages. args is the command line without the
// program name; the result is the exit status.
func Udaddy(e *Env, args []string) int {
	t := &udaddy{cmTest[udaddyNode, *udaddyNode]{name: "udaddy", o: newOut(e), ctx: e.ctxOf(),
		connections: 1, messageSize: 100, messageCount: 10, port: "7174"}}
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

	return t.run(t.runClient, t.runServer)
}

func udaddyUsage(o *out, prog string) {
	cmUsage(o, prog, "udp or ipoib")
	o.printf("\t[-p port_space - %#x for UDP (default), %#x for IPOIB]\n", int(rdmacm.PSUDP), int(rdmacm.PSIPoIB))
}

// bufLen is create_message's buffer: room for the GRH of a UD receive
// in front of each message.
//
// Unlike udaddy.c, whose receives all land in one buffer, each
// receive gets its own slot (and sends a slot of their own), so a
// message landing never overwrites the GRH being read from another.
// Nothing of this shows on the wire.
func (t *udaddy) bufLen() int { return (t.messageCount + 1) * t.slotLen() }

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
	vctx, ret := t.allocPD(&n.cmNode)
	if ret != 0 {
		return ret
	}
	var err error
	cqe, wr := 2, 1
	if t.messageCount != 0 {
		cqe, wr = t.messageCount*2, t.messageCount
	}
	if n.cq, err = vctx.CreateCQ(cqe, nil); err != nil {
		t.o.printf("udaddy: unable to create CQ\n")
		return -int(syscall.ENOMEM)
	}
	init := verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: verbs.QPCap{MaxSendWR: uint32(wr), MaxRecvWR: uint32(wr), MaxSendSGE: 1, MaxRecvSGE: 1}}
	return t.createQP(&n.cmNode, &init, t.bufLen)
}

// slotLen is the size of one receive: the message and the GRH in front.
func (t *udaddy) slotLen() int { return t.messageSize + verbs.GRHLen }

// postRecvs is post_recvs: C receives of S + 40 bytes.
func (t *udaddy) postRecvs(n *udaddyNode) int {
	if t.messageCount == 0 {
		return 0
	}
	return t.postEach("receives", func(i int) error {
		return n.cmaID.QP().PostRecv(verbs.RecvWR{ID: uint64(n.id)<<32 | uint64(i),
			SGL: []verbs.SGE{n.mr.SGE(i*t.slotLen(), t.slotLen())}})
	})
}

// postSends is post_sends: C SEND_WITH_IMM of S bytes to the peer, the
// immediate data being this QP's number.
func (t *udaddy) postSends(n *udaddyNode, flags verbs.SendFlags) int {
	if !n.connected || t.messageCount == 0 {
		return 0
	}
	qp := n.cmaID.QP()
	return t.postEach("sends", func(int) error {
		return qp.PostSend(verbs.SendWR{ID: uint64(n.id), Opcode: verbs.WRSendWithImm, Flags: flags,
			ImmData: qp.QPN(), AH: n.ah, RemoteQPN: n.remoteQPN, RemoteQKey: n.remoteQKey,
			SGL: []verbs.SGE{n.mr.SGE(t.messageCount*t.slotLen(), t.messageSize)}})
	})
}

// routeHandler is route_handler: checks, resources, receives, then the
// SIDR request.
func (t *udaddy) routeHandler(n *udaddyNode) int {
	return t.cmTest.routeHandler(&n.cmNode, func() int { return t.prepareNode(n) }, &rdmacm.ConnParam{})
}

// prepareNode is the checks, resources and receives of route_handler
// and connect_handler.
func (t *udaddy) prepareNode(n *udaddyNode) int {
	ret := t.verifyTestParams(n)
	if ret == 0 {
		ret = t.initNode(n)
	}
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	return ret
}

// connectHandler is connect_handler: a node, resources, receives, and
// the SIDR reply with its QP number.
func (t *udaddy) connectHandler(id *rdmacm.ID) int {
	return t.cmTest.connectHandler(id, t.prepareNode,
		func() *rdmacm.ConnParam { return &rdmacm.ConnParam{QPNum: id.QP().QPN()} },
		func(n *udaddyNode) {
			n.connected = true
			t.connectsLeft--
		})
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
		ret = t.addrHandler(&id.Context().(*udaddyNode).cmNode)
	case rdmacm.EventRouteResolved:
		ret = t.routeHandler(id.Context().(*udaddyNode))
	case rdmacm.EventConnectRequest:
		ret = t.connectHandler(id)
	case rdmacm.EventEstablished:
		ret = t.resolvedHandler(id.Context().(*udaddyNode), ev)
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
		rdmacm.EventUnreachable, rdmacm.EventRejected:
		ret = t.eventError(ev)
	}
	return ret
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
	return t.events(&t.connectsLeft, t.cmaHandler, func(error) int { return -1 })
}

// runServer is run_server.
func (t *udaddy) runServer() int {
	o := t.o
	listenID, ret := t.listen(t)
	if listenID != nil {
		defer listenID.Destroy()
	}
	if ret != 0 {
		return ret
	}
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
	if ret := t.resolveAddrs(); ret != 0 {
		return ret
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
