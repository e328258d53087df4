package rdmacm

import (
	"context"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/rdma-go/rdma-go/verbs"
)

// CreateEP creates a synchronous id from GetAddrInfo's result
// (rdma_create_ep): a passive one bound to res.SrcAddr (call Listen and
// GetRequest), or an active one with address and route resolved (call
// Connect). With init set, an active id gets its QP now (on pd, or the
// device's PD) and a passive one gives each request's id a QP in
// GetRequest.
func CreateEP(ctx context.Context, res *AddrInfo, pd *verbs.PD, init *verbs.QPInitAttr) (*ID, error) {
	if res == nil {
		return nil, fmt.Errorf("rdmacm: create endpoint without an address: %w", syscall.EINVAL)
	}
	id, err := CreateIDType(nil, nil, res.PortSpace, res.QPType)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*ID, error) {
		id.Destroy()
		return nil, err
	}
	if res.Flags&RAIPassive != 0 {
		if err := id.BindAddr(res.SrcAddr); err != nil {
			return fail(err)
		}
		if init != nil {
			a := *init
			id.mu.Lock()
			id.epInit, id.pd = &a, pd
			id.mu.Unlock()
		}
		return id, nil
	}
	if err := id.ResolveAddr(ctx, res.SrcAddr, res.DstAddr, 0); err != nil {
		return fail(err)
	}
	if err := id.ResolveRoute(ctx, 0); err != nil {
		return fail(err)
	}
	if init != nil {
		if err := id.CreateQP(pd, init); err != nil {
			return fail(err)
		}
	}
	return id, nil
}

// DestroyEP destroys the id's QP and the id (rdma_destroy_ep).
func (id *ID) DestroyEP() error {
	id.DestroyQP()
	return id.Destroy()
}

// RegMsgs registers buf for sends and receives (rdma_reg_msgs).
func (id *ID) RegMsgs(buf []byte) (*verbs.MR, error) { return id.reg(buf, verbs.AccessLocalWrite) }

// RegRead registers buf for the peer to read (rdma_reg_read).
func (id *ID) RegRead(buf []byte) (*verbs.MR, error) {
	return id.reg(buf, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
}

// RegWrite registers buf for the peer to write (rdma_reg_write).
func (id *ID) RegWrite(buf []byte) (*verbs.MR, error) {
	return id.reg(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
}

func (id *ID) reg(buf []byte, access verbs.AccessFlags) (*verbs.MR, error) {
	pd := id.PD()
	if pd == nil {
		return nil, fmt.Errorf("rdmacm: register before CreateQP: %w", ErrInvalid)
	}
	return pd.RegMR(buf, access)
}

// sge returns the SGE of buf inside mr; an empty buf gives none.
func sge(buf []byte, mr *verbs.MR) ([]verbs.SGE, error) {
	if len(buf) == 0 {
		return nil, nil
	}
	if mr == nil {
		return nil, fmt.Errorf("rdmacm: buffer without a memory region: %w", syscall.EINVAL)
	}
	mb := mr.Bytes()
	if len(mb) == 0 {
		return nil, fmt.Errorf("rdmacm: buffer outside its memory region: %w", syscall.EINVAL)
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) - uintptr(unsafe.Pointer(unsafe.SliceData(mb)))
	if off > uintptr(len(mb)) || off+uintptr(len(buf)) > uintptr(len(mb)) {
		return nil, fmt.Errorf("rdmacm: buffer outside its memory region: %w", syscall.EINVAL)
	}
	return []verbs.SGE{mr.SGE(int(off), len(buf))}, nil
}

func (id *ID) postWR(wr verbs.SendWR, buf []byte, mr *verbs.MR) error {
	qp := id.QP()
	if qp == nil {
		return fmt.Errorf("rdmacm: post without a QP: %w", ErrInvalid)
	}
	s, err := sge(buf, mr)
	if err != nil {
		return err
	}
	wr.SGL = s
	return qp.PostSend(wr)
}

// PostRecv posts a receive of buf (inside mr) with work request ID wrID
// (rdma_post_recv).
func (id *ID) PostRecv(wrID uint64, buf []byte, mr *verbs.MR) error {
	qp := id.QP()
	if qp == nil {
		return fmt.Errorf("rdmacm: post without a QP: %w", ErrInvalid)
	}
	s, err := sge(buf, mr)
	if err != nil {
		return err
	}
	return qp.PostRecv(verbs.RecvWR{ID: wrID, SGL: s})
}

// PostSend posts a SEND of buf (rdma_post_send).
func (id *ID) PostSend(wrID uint64, buf []byte, mr *verbs.MR, flags verbs.SendFlags) error {
	return id.postWR(verbs.SendWR{ID: wrID, Opcode: verbs.WRSend, Flags: flags}, buf, mr)
}

// PostRead posts an RDMA READ of the peer's memory at remoteAddr into buf
// (rdma_post_read).
func (id *ID) PostRead(wrID uint64, buf []byte, mr *verbs.MR, flags verbs.SendFlags, remoteAddr uint64, rkey uint32) error {
	return id.postWR(verbs.SendWR{ID: wrID, Opcode: verbs.WRRDMARead, Flags: flags, RemoteAddr: remoteAddr, RKey: rkey}, buf, mr)
}

// PostWrite posts an RDMA WRITE of buf to the peer's memory at remoteAddr
// (rdma_post_write).
func (id *ID) PostWrite(wrID uint64, buf []byte, mr *verbs.MR, flags verbs.SendFlags, remoteAddr uint64, rkey uint32) error {
	return id.postWR(verbs.SendWR{ID: wrID, Opcode: verbs.WRRDMAWrite, Flags: flags, RemoteAddr: remoteAddr, RKey: rkey}, buf, mr)
}

// PostUDSend posts a UD SEND of buf to QP remoteQPN through ah, with the
// id's Q_Key (rdma_post_ud_send).
func (id *ID) PostUDSend(wrID uint64, buf []byte, mr *verbs.MR, flags verbs.SendFlags, ah *verbs.AH, remoteQPN uint32) error {
	id.mu.Lock()
	qkey := id.qkey
	id.mu.Unlock()
	return id.postWR(verbs.SendWR{ID: wrID, Opcode: verbs.WRSend, Flags: flags, AH: ah, RemoteQPN: remoteQPN, RemoteQKey: qkey}, buf, mr)
}

// GetSendComp waits for the next completion on the id's send CQ
// (rdma_get_send_comp). Check the WC's status.
func (id *ID) GetSendComp(ctx context.Context) (verbs.WC, error) { return getComp(ctx, id.SendCQ()) }

// GetRecvComp waits for the next completion on the id's receive CQ
// (rdma_get_recv_comp).
func (id *ID) GetRecvComp(ctx context.Context) (verbs.WC, error) { return getComp(ctx, id.RecvCQ()) }

func getComp(ctx context.Context, cq *verbs.CQ) (verbs.WC, error) {
	if cq == nil {
		return verbs.WC{}, fmt.Errorf("rdmacm: no CQ: %w", ErrInvalid)
	}
	var wc [1]verbs.WC
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return verbs.WC{}, err
		}
		if n == 1 {
			return wc[0], nil
		}
		if err := cq.Wait(ctx); err != nil {
			return verbs.WC{}, fmt.Errorf("rdmacm: waiting for a completion: %w", err)
		}
	}
}
