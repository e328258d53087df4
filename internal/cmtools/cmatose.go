package cmtools

import (
	"syscall"

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
	cmNode
	cq [2]*verbs.CQ
}

// free releases what initNode made (destroy_node without the id).
func (n *cmatoseNode) free() { n.freeResources(&n.cq[0], &n.cq[1]) }

// cmatose is one run of ucmatose: struct cmatest and cmatose.c's globals.
type cmatose struct {
	cmTest[cmatoseNode, *cmatoseNode]

	disconnectsLeft int
	migrate         bool
}

// Ucmatose is rdma-core 44's ucmatose (cmatose.c): args is the command
// line without the program name; the result is the exit status.
func Ucmatose(e *Env, args []string) int {
	t := &cmatose{cmTest: cmTest[cmatoseNode, *cmatoseNode]{name: "cmatose", o: newOut(e), ctx: e.ctxOf(),
		connections: 1, messageSize: 100, messageCount: 10, port: "7471"}}
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

	return t.run(t.runClient, t.runServer)
}

func cmatoseUsage(o *out, prog string) {
	cmUsage(o, prog, "tcp or ib")
	o.printf("\t[-p port_number]\n")
	o.printf("\t[-m(igrate)]\n")
	o.printf("\t[-a ack_timeout]\n")
}

// negErrno returns the negative errno of err, as the C tools' ret values.
func negErrno(err error) int { return -int(verbs.ErrnoOf(err)) }

// initNode is init_node: PD, two CQs of C entries, an RC QP with every
// send signaled, and the message buffer.
func (t *cmatose) initNode(n *cmatoseNode) int {
	vctx, ret := t.allocPD(&n.cmNode)
	if ret != 0 {
		return ret
	}
	cqe := t.messageCount
	if cqe == 0 {
		cqe = 1
	}
	var err, err2 error
	n.cq[sendCQIndex], err = vctx.CreateCQ(cqe, nil)
	n.cq[recvCQIndex], err2 = vctx.CreateCQ(cqe, nil)
	if err != nil || err2 != nil {
		t.o.printf("cmatose: unable to create CQ\n")
		return -int(syscall.ENOMEM)
	}
	init := verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: n.cq[sendCQIndex], RecvCQ: n.cq[recvCQIndex], SigAll: true,
		Cap: verbs.QPCap{MaxSendWR: uint32(cqe), MaxRecvWR: uint32(cqe), MaxSendSGE: 1, MaxRecvSGE: 1}}
	return t.createQP(&n.cmNode, &init, func() int { return t.messageSize })
}

// postRecvs is post_recvs: C receives of the message buffer.
func (t *cmatose) postRecvs(n *cmatoseNode) int {
	if t.messageCount == 0 {
		return 0
	}
	return t.postEach("receives", func(int) error {
		return n.cmaID.QP().PostRecv(verbs.RecvWR{ID: uint64(n.id), SGL: []verbs.SGE{n.mr.SGE(0, t.messageSize)}})
	})
}

// postSends is post_sends: C SENDs of the message buffer.
func (t *cmatose) postSends(n *cmatoseNode) int {
	if !n.connected || t.messageCount == 0 {
		return 0
	}
	return t.postEach("sends", func(int) error {
		return n.cmaID.QP().PostSend(verbs.SendWR{ID: uint64(n.id), Opcode: verbs.WRSend,
			SGL: []verbs.SGE{n.mr.SGE(0, t.messageSize)}})
	})
}

// routeHandler is route_handler: resources, receives, connect.
// rdma_getaddrinfo's ai_connect (private data) is empty for IP addresses.
func (t *cmatose) routeHandler(n *cmatoseNode) int {
	return t.cmTest.routeHandler(&n.cmNode, func() int {
		ret := t.initNode(n)
		if ret == 0 {
			ret = t.postRecvs(n)
		}
		return ret
	}, &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5})
}

// connectHandler is connect_handler: a node for the request, resources,
// receives, accept; or a reject.
func (t *cmatose) connectHandler(id *rdmacm.ID) int {
	return t.cmTest.connectHandler(id, func(n *cmatoseNode) int {
		ret := t.initNode(n)
		if ret == 0 && t.setTimeout {
			id.SetAckTimeout(t.timeout)
		}
		if ret == 0 {
			ret = t.postRecvs(n)
		}
		return ret
	}, func() *rdmacm.ConnParam { return nil }, nil)
}

// cmaHandler is cma_handler.
func (t *cmatose) cmaHandler(id *rdmacm.ID, ev *rdmacm.Event) int {
	ret := 0
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		ret = t.addrHandler(&id.Context().(*cmatoseNode).cmNode)
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
		ret = t.eventError(ev)
	case rdmacm.EventDisconnected:
		id.Disconnect()
		t.disconnectsLeft--
	}
	return ret
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
	return t.cmTest.events(left, t.cmaHandler, func(err error) int {
		t.o.perror("cmatose: failure in rdma_get_cm_event in "+what+" events", err)
		return int(verbs.ErrnoOf(err))
	})
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
	listenID, ret := t.listen(t)
	if listenID != nil {
		defer listenID.Destroy()
	}
	if ret != 0 {
		return ret
	}
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
	ret = t.events(&t.disconnectsLeft, "disconnect")
	o.printf("disconnected\n")
	return ret
}

// runClient is run_client.
func (t *cmatose) runClient() int {
	if ret := t.resolveAddrs(); ret != 0 {
		return ret
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
