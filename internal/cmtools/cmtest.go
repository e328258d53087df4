package cmtools

import (
	"context"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// cmNode is the part of struct cmatest_node that cmatose.c and udaddy.c
// share; each tool's node embeds it.
type cmNode struct {
	id        int
	cmaID     *rdmacm.ID
	connected bool
	pd        *verbs.PD
	mr        *verbs.MR
	mem       []byte
}

func (n *cmNode) base() *cmNode { return n }

// freeResources releases the QP, the given CQs, the MR and the PD, in
// that order (destroy_node without the id).
func (n *cmNode) freeResources(cqs ...**verbs.CQ) {
	if n.cmaID != nil && n.cmaID.QP() != nil {
		n.cmaID.DestroyQP()
	}
	for _, cq := range cqs {
		if *cq != nil {
			(*cq).Destroy()
			*cq = nil
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

// cmNodePtr is a pointer to a tool's node: its shared part, and free,
// which releases what the tool's init_node and handlers made.
type cmNodePtr[N any] interface {
	*N
	base() *cmNode
	free()
}

// cmTest is the part of struct cmatest and the globals that cmatose.c and
// udaddy.c share; name prefixes the tool's messages.
type cmTest[N any, P cmNodePtr[N]] struct {
	name string
	o    *out
	ctx  context.Context

	channel      *rdmacm.EventChannel
	nodes        []N
	connIndex    int
	connectsLeft int
	rai          *rdmacm.AddrInfo

	connections  int
	messageSize  int
	messageCount int
	port         string
	setTOS       bool
	tos          uint8
	setTimeout   bool // cmatose's -a; udaddy never sets it
	timeout      uint8
	dstAddr      *string
	srcAddr      *string
	hints        rdmacm.AddrInfo
}

func (t *cmTest[N, P]) node(i int) P { return P(&t.nodes[i]) }

// run is main() after the options: the event channel, the nodes, the
// client or the server, and the teardown; the result is the exit status.
func (t *cmTest[N, P]) run(runClient, runServer func() int) int {
	o := t.o
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
		ret = runClient()
	} else {
		t.hints.Flags |= rdmacm.RAIPassive
		ret = runServer()
	}
	o.printf("test complete\n")
	t.destroyNodes()
	t.channel.Destroy()
	o.printf("return status %d\n", ret)
	return exitStatus(ret)
}

// cmUsage prints the usage lines both tools share, up to -t.
func cmUsage(o *out, prog, portSpaces string) {
	o.printf("usage: %s\n", prog)
	o.printf("\t[-s server_address]\n")
	o.printf("\t[-b bind_address]\n")
	o.printf("\t[-f address_format]\n")
	o.printf("\t    name, ip, ipv6, or gid\n")
	o.printf("\t[-P port_space]\n")
	o.printf("\t    %s\n", portSpaces)
	o.printf("\t[-c connections]\n")
	o.printf("\t[-C message_count]\n")
	o.printf("\t[-S message_size]\n")
	o.printf("\t[-t type_of_service]\n")
}

// createMessage is create_message: the node's message buffer of size()
// bytes, registered.
func (t *cmTest[N, P]) createMessage(n *cmNode, size func() int) int {
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
	n.mem = make([]byte, size())
	mr, err := n.pd.RegMR(n.mem, verbs.AccessLocalWrite)
	if err != nil {
		t.o.printf("failed to reg MR\n")
		n.mem = nil
		return -1
	}
	n.mr = mr
	return 0
}

// allocPD is init_node's start: the node's PD, and its device.
func (t *cmTest[N, P]) allocPD(n *cmNode) (*verbs.Context, int) {
	vctx := n.cmaID.Verbs()
	var err error
	if vctx == nil {
		t.o.printf("%s: unable to allocate PD\n", t.name)
		return nil, -int(syscall.ENOMEM)
	}
	if n.pd, err = vctx.AllocPD(); err != nil {
		t.o.printf("%s: unable to allocate PD\n", t.name)
		return nil, -int(syscall.ENOMEM)
	}
	return vctx, 0
}

// createQP is init_node's end: the QP, then the message buffer of size()
// bytes.
func (t *cmTest[N, P]) createQP(n *cmNode, init *verbs.QPInitAttr, size func() int) int {
	if err := n.cmaID.CreateQP(n.pd, init); err != nil {
		t.o.perror(t.name+": unable to create QP", err)
		return negErrno(err)
	}
	if ret := t.createMessage(n, size); ret != 0 {
		t.o.printf("%s: failed to create messages: %d\n", t.name, ret)
		return ret
	}
	return 0
}

// postEach posts message_count work requests; what names them in the
// error line.
func (t *cmTest[N, P]) postEach(what string, post func(i int) error) int {
	for i := 0; i < t.messageCount; i++ {
		if err := post(i); err != nil {
			ret := int(verbs.ErrnoOf(err))
			t.o.printf("failed to post %s: %d\n", what, ret)
			return ret
		}
	}
	return 0
}

func (t *cmTest[N, P]) connectError() { t.connectsLeft-- }

// addrHandler is addr_handler: options, then route resolution.
func (t *cmTest[N, P]) addrHandler(n *cmNode) int {
	if t.setTOS {
		n.cmaID.SetTOS(t.tos)
	}
	if t.setTimeout {
		n.cmaID.SetAckTimeout(t.timeout)
	}
	if err := n.cmaID.ResolveRoute(t.ctx, 2000*time.Millisecond); err != nil {
		t.o.perror(t.name+": resolve route failed", err)
		t.connectError()
		return -1
	}
	return 0
}

// routeHandler is route_handler: prepare (resources, receives), then
// connect with param.
func (t *cmTest[N, P]) routeHandler(n *cmNode, prepare func() int, param *rdmacm.ConnParam) int {
	ret := prepare()
	if ret == 0 {
		if err := n.cmaID.Connect(t.ctx, param); err != nil {
			t.o.perror(t.name+": failure connecting", err)
			ret = -1
		}
	}
	if ret != 0 {
		t.connectError()
	}
	return ret
}

// connectHandler is connect_handler: a node for the request, prepare
// (resources, receives), accept with param(), then accepted; or a reject.
func (t *cmTest[N, P]) connectHandler(id *rdmacm.ID, prepare func(P) int, param func() *rdmacm.ConnParam, accepted func(P)) int {
	var ret int
	if t.connIndex == t.connections {
		ret = -int(syscall.ENOMEM)
	} else {
		n := t.node(t.connIndex)
		t.connIndex++
		b := n.base()
		b.cmaID = id
		id.SetContext(n)
		ret = prepare(n)
		if ret == 0 {
			if err := id.Accept(t.ctx, param()); err != nil {
				t.o.perror(t.name+": failure accepting", err)
				ret = -1
			}
		}
		if ret == 0 {
			if accepted != nil {
				accepted(n)
			}
			return 0
		}
		n.free()
		b.cmaID = nil
		t.connectError()
	}
	t.o.printf("%s: failing connection request\n", t.name)
	id.Reject(nil)
	id.Destroy()
	return ret
}

// eventError is cma_handler's case for the error events.
func (t *cmTest[N, P]) eventError(ev *rdmacm.Event) int {
	t.o.printf("%s: event: %s, error: %d\n", t.name, ev.Type, ev.Status)
	t.connectError()
	return ev.Status
}

// destroyNode is destroy_node.
func (t *cmTest[N, P]) destroyNode(n P) {
	b := n.base()
	if b.cmaID == nil {
		return
	}
	n.free()
	// Destroy the id after all device resources.
	b.cmaID.Destroy()
	b.cmaID = nil
}

// allocNodes is alloc_nodes: the nodes, and on the client an id each.
func (t *cmTest[N, P]) allocNodes() int {
	if t.connections < 0 {
		t.o.printf("%s: unable to allocate memory for test nodes\n", t.name)
		return -int(syscall.ENOMEM)
	}
	t.nodes = make([]N, t.connections)
	for i := range t.nodes {
		n := t.node(i)
		n.base().id = i
		if t.dstAddr != nil {
			id, err := rdmacm.CreateID(t.channel, n, t.hints.PortSpace)
			if err != nil {
				for j := i - 1; j >= 0; j-- {
					t.node(j).base().cmaID.Destroy()
				}
				return negErrno(err)
			}
			n.base().cmaID = id
		}
	}
	return 0
}

func (t *cmTest[N, P]) destroyNodes() {
	for i := range t.nodes {
		t.destroyNode(t.node(i))
	}
}

// events handles CM events with handle while *left > 0; a failed
// rdma_get_cm_event ends it with getErr's result.
func (t *cmTest[N, P]) events(left *int, handle func(*rdmacm.ID, *rdmacm.Event) int, getErr func(error) int) int {
	ret := 0
	for *left > 0 && ret == 0 {
		ev, err := t.channel.GetCMEvent(t.ctx)
		if err != nil {
			return getErr(err)
		}
		ret = handle(ev.ID, ev)
	}
	return ret
}

// listen is run_server's start: the listening id (context ctx), bound and
// listening. The id comes back, for the caller to destroy, whenever it
// was made.
func (t *cmTest[N, P]) listen(ctx any) (*rdmacm.ID, int) {
	o := t.o
	o.printf("%s: starting server\n", t.name)
	listenID, err := rdmacm.CreateID(t.channel, ctx, t.hints.PortSpace)
	if err != nil {
		o.perror(t.name+": listen request failed", err)
		return nil, negErrno(err)
	}
	var code int
	if t.rai, code = getRDMAAddr(t.ctx, t.srcAddr, t.dstAddr, t.port, &t.hints); code != 0 {
		o.printf("%s: getrdmaaddr error: %s\n", t.name, gaiStrerror(code))
		return listenID, code
	}
	if err := listenID.BindAddr(t.rai.SrcAddr); err != nil {
		o.perror(t.name+": bind address failed", err)
		return listenID, -1
	}
	if err := listenID.Listen(0); err != nil {
		o.perror(t.name+": failure trying to listen", err)
		return listenID, -1
	}
	o.listened()
	return listenID, 0
}

// resolveAddrs is run_client's start: the addresses, and address
// resolution for every node.
func (t *cmTest[N, P]) resolveAddrs() int {
	o := t.o
	o.printf("%s: starting client\n", t.name)
	var code int
	if t.rai, code = getRDMAAddr(t.ctx, t.srcAddr, t.dstAddr, t.port, &t.hints); code != 0 {
		o.printf("%s: getaddrinfo error: %s\n", t.name, gaiStrerror(code))
		return code
	}
	o.printf("%s: connecting\n", t.name)
	for i := range t.nodes {
		err := t.node(i).base().cmaID.ResolveAddr(t.ctx, t.rai.SrcAddr, t.rai.DstAddr, 2000*time.Millisecond)
		if err != nil {
			o.perror(t.name+": failure getting addr", err)
			t.connectError()
			return -1
		}
	}
	return 0
}
