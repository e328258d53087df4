package verbs

import (
	"sync"
	"sync/atomic"

	"github.com/rdma-go/rdma-go/engine"
)

var pdHandles atomic.Uint32

// PD is a protection domain (ibv_pd).
type PD struct {
	ctx    *Context
	handle uint32

	mu        sync.Mutex
	mrs, qps  int // MRs, MWs and AHs; QPs and SRQs
	destroyed bool
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return &PD{ctx: c, handle: pdHandles.Add(1)}, nil
}

// Context returns the PD's device context.
func (pd *PD) Context() *Context { return pd.ctx }

// Dealloc frees the PD (ibv_dealloc_pd). It fails with ErrBusy while MRs,
// MWs, AHs, QPs or SRQs still use it.
func (pd *PD) Dealloc() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.destroyed {
		return verrorf(ErrClosed, "PD already deallocated")
	}
	if pd.mrs > 0 || pd.qps > 0 {
		return verrorf(ErrBusy, "PD still has %d MR(s), MW(s) or AH(s) and %d QP(s) or SRQ(s)", pd.mrs, pd.qps)
	}
	pd.destroyed = true
	return nil
}

func (pd *PD) use(mrs, qps int) error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.destroyed {
		return verrorf(ErrClosed, "PD deallocated")
	}
	pd.mrs += mrs
	pd.qps += qps
	return nil
}

// MR is a registered memory region (ibv_mr). It aliases the caller's slice:
// the device reads and writes that memory directly.
type MR struct {
	pd   *PD
	mr   *engine.MR
	buf  []byte
	dead atomic.Bool
}

// RegMR registers buf with the given access flags (ibv_reg_mr). The MR's
// address is buf's virtual address. REMOTE_WRITE or REMOTE_ATOMIC without
// LOCAL_WRITE is invalid, as in libibverbs.
func (pd *PD) RegMR(buf []byte, access AccessFlags) (*MR, error) {
	if err := pd.ctx.check(); err != nil {
		return nil, err
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return nil, verrorf(ErrInvalidArgument, "access %s: remote write or atomic needs LOCAL_WRITE", access)
	}
	known := AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessMWBind | AccessRelaxedOrdering
	if access&^known != 0 {
		return nil, verrorf(ErrNotSupported, "access flags %s not supported", access&^known)
	}
	if uint64(len(buf)) > maxMsgSize*2 {
		return nil, verrorf(ErrInvalidArgument, "MR of %d bytes too large", len(buf))
	}
	if err := pd.use(1, 0); err != nil {
		return nil, err
	}
	m := pd.ctx.host().Mem().Register(pd.handle, buf, uint32(access&0x1F))
	return &MR{pd: pd, mr: m, buf: buf}, nil
}

// Addr returns the MR's start address (ibv_mr.addr), which is also its iova.
func (m *MR) Addr() uint64 { return m.mr.Addr }

// Len returns the MR's length in bytes.
func (m *MR) Len() int { return len(m.buf) }

// LKey returns the local key.
func (m *MR) LKey() uint32 { return m.mr.LKey }

// RKey returns the remote key (0 when the MR grants no remote access, as rxe).
func (m *MR) RKey() uint32 { return m.mr.RKey }

// Bytes returns the registered memory.
func (m *MR) Bytes() []byte { return m.buf }

// SGE returns a scatter/gather element for buf[off:off+n] of this MR.
func (m *MR) SGE(off, n int) SGE {
	return SGE{Addr: m.mr.Addr + uint64(off), Length: uint32(n), LKey: m.mr.LKey}
}

// PD returns the MR's protection domain.
func (m *MR) PD() *PD { return m.pd }

// Dereg deregisters the MR (ibv_dereg_mr); its keys stop working at once.
func (m *MR) Dereg() error {
	if n := m.mr.Windows(); n > 0 {
		return verrorf(ErrBusy, "MR has %d memory window(s) bound", n)
	}
	if m.dead.Swap(true) {
		return verrorf(ErrClosed, "MR already deregistered")
	}
	m.pd.ctx.host().Mem().Deregister(m.mr)
	m.pd.use(-1, 0)
	return nil
}
