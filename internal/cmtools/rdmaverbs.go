package cmtools

import (
	"context"

	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// rdmaMsgLen is the size of rdma_server's and rdma_client's messages.
const rdmaMsgLen = 16

// RdmaServer is rdma-core 44's rdma_server: the synchronous rdma_verbs.h
// API, one connection, one 16-byte message each way. args is the command
// line without the program name; the result is the exit status.
func RdmaServer(e *Env, args []string) int {
	return rdmaVerbsMain(e, args, "rdma_server", "0.0.0.0", runRdmaServer)
}

// RdmaClient is rdma-core 44's rdma_client, rdma_server's peer.
func RdmaClient(e *Env, args []string) int {
	return rdmaVerbsMain(e, args, "rdma_client", "127.0.0.1", runRdmaClient)
}

// rdmaVerbs is one run of rdma_server or rdma_client.
type rdmaVerbs struct {
	o      *out
	ctx    context.Context
	name   string
	server string
	port   string
}

func rdmaVerbsMain(e *Env, args []string, name, server string, run func(*rdmaVerbs) int) int {
	r := &rdmaVerbs{o: newOut(e), ctx: e.ctxOf(), name: name, server: server, port: "7471"}
	p := getopt.New(e.Prog, "s:p:", nil)
	p.Opterr = false // printed below, in getopt's order
	res, perr := p.Parse(args)
	for _, opt := range res.Opts {
		switch opt.Option.Short {
		case 's':
			r.server = opt.Value
		case 'p':
			r.port = opt.Value
		}
	}
	if perr != nil {
		r.o.eprintf("%s\n", perr)
		r.o.printf("usage: %s\n", e.Prog)
		r.o.printf("\t[-s server_address]\n")
		r.o.printf("\t[-p port_number]\n")
		return 1
	}
	r.o.printf("%s: start\n", name)
	ret := run(r)
	r.o.printf("%s: end %d\n", name, ret)
	return exitStatus(ret)
}

// initAttr is both tools' QP: one send and one receive of one SGE, 16
// bytes of inline data, every send signaled.
func rdmaVerbsInitAttr() *verbs.QPInitAttr {
	return &verbs.QPInitAttr{Type: verbs.QPTypeRC, SigAll: true,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: rdmaMsgLen}}
}

// sendFlags decides inline sends as the tools do, from the QP's
// capabilities.
func (r *rdmaVerbs) sendFlags(qp *verbs.QP) verbs.SendFlags {
	if _, init, err := qp.Query(); err == nil && init.Cap.MaxInlineData >= rdmaMsgLen {
		return verbs.SendInline
	}
	r.o.printf("%s: device doesn't support IBV_SEND_INLINE, using sge sends\n", r.name)
	return 0
}

// runRdmaServer is rdma_server.c's run.
func runRdmaServer(r *rdmaVerbs) int {
	o := r.o
	res, code := rdmaGetAddrInfo(r.ctx, r.server, r.port, &rdmacm.AddrInfo{Flags: rdmacm.RAIPassive, PortSpace: rdmacm.PSTCP})
	if code != 0 {
		o.printf("rdma_getaddrinfo: %s\n", gaiStrerror(code))
		return code
	}
	listenID, err := rdmacm.CreateEP(r.ctx, res, nil, rdmaVerbsInitAttr())
	if err != nil {
		o.perror("rdma_create_ep", err)
		return -1
	}
	defer listenID.DestroyEP()
	if err := listenID.Listen(0); err != nil {
		o.perror("rdma_listen", err)
		return -1
	}
	o.listened()
	id, err := listenID.GetRequest(r.ctx)
	if err != nil {
		o.perror("rdma_get_request", err)
		return -1
	}
	defer id.DestroyEP()
	flags := r.sendFlags(id.QP())
	recvMsg, sendMsg := make([]byte, rdmaMsgLen), make([]byte, rdmaMsgLen)
	mr, err := id.RegMsgs(recvMsg)
	if err != nil {
		o.perror("rdma_reg_msgs for recv_msg", err)
		return -1
	}
	defer mr.Dereg()
	// The send buffer is registered even for inline sends: the soft
	// device reads inline data through its memory region.
	sendMR, err := id.RegMsgs(sendMsg)
	if err != nil {
		o.perror("rdma_reg_msgs for send_msg", err)
		return -1
	}
	defer sendMR.Dereg()
	if err := id.PostRecv(0, recvMsg, mr); err != nil {
		o.perror("rdma_post_recv", err)
		return -1
	}
	if err := id.Accept(r.ctx, nil); err != nil {
		o.perror("rdma_accept", err)
		return -1
	}
	defer id.Disconnect()
	if _, err := id.GetRecvComp(r.ctx); err != nil {
		o.perror("rdma_get_recv_comp", err)
		return -1
	}
	if err := id.PostSend(0, sendMsg, sendMR, flags); err != nil {
		o.perror("rdma_post_send", err)
		return -1
	}
	if _, err := id.GetSendComp(r.ctx); err != nil {
		o.perror("rdma_get_send_comp", err)
		return -1
	}
	return 0
}

// runRdmaClient is rdma_client.c's run.
func runRdmaClient(r *rdmaVerbs) int {
	o := r.o
	res, code := rdmaGetAddrInfo(r.ctx, r.server, r.port, &rdmacm.AddrInfo{PortSpace: rdmacm.PSTCP})
	if code != 0 {
		o.printf("rdma_getaddrinfo: %s\n", gaiStrerror(code))
		return code
	}
	id, err := rdmacm.CreateEP(r.ctx, res, nil, rdmaVerbsInitAttr())
	if err != nil {
		o.perror("rdma_create_ep", err)
		return -1
	}
	defer id.DestroyEP()
	flags := r.sendFlags(id.QP())
	recvMsg, sendMsg := make([]byte, rdmaMsgLen), make([]byte, rdmaMsgLen)
	mr, err := id.RegMsgs(recvMsg)
	if err != nil {
		o.perror("rdma_reg_msgs for recv_msg", err)
		return -1
	}
	defer mr.Dereg()
	sendMR, err := id.RegMsgs(sendMsg)
	if err != nil {
		o.perror("rdma_reg_msgs for send_msg", err)
		return -1
	}
	defer sendMR.Dereg()
	if err := id.PostRecv(0, recvMsg, mr); err != nil {
		o.perror("rdma_post_recv", err)
		return -1
	}
	if err := id.Connect(r.ctx, nil); err != nil {
		o.perror("rdma_connect", err)
		return -1
	}
	defer id.Disconnect()
	if err := id.PostSend(0, sendMsg, sendMR, flags); err != nil {
		o.perror("rdma_post_send", err)
		return -1
	}
	if _, err := id.GetSendComp(r.ctx); err != nil {
		o.perror("rdma_get_send_comp", err)
		return -1
	}
	if _, err := id.GetRecvComp(r.ctx); err != nil {
		o.perror("rdma_get_recv_comp", err)
		return -1
	}
	return 0
}
