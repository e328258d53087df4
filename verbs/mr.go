package verbs

import (
	"sync"

	"github.com/rdma-go/rdma-go/provider"
)

// PD is a protection domain (ibv_pd).
type PD struct {
	ctx *Context
	p   provider.PD

	mu        sync.Mutex
	mrs, qps  int // MRs, MWs and AHs; QPs and SRQs
	destroyed bool
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	p, err := c.p.AllocPD()
	if err != nil {
		return nil, err
	}
	c.res[resPD].Add(1)
	return &PD{ctx: c, p: p}, nil
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
	if err := pd.p.Dealloc(); err != nil {
		return err
	}
	pd.destroyed = true
	pd.ctx.res[resPD].Add(-1)
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
	p    provider.MR
	addr uint64
	lkey uint32
	buf  []byte
	mu   sync.Mutex // serialises Dereg
	dead bool
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
	if uint64(len(buf)) > pd.ctx.attr.MaxMRSize {
		return nil, verrorf(ErrInvalidArgument, "MR of %d bytes too large", len(buf))
	}
	if err := pd.use(1, 0); err != nil {
		return nil, err
	}
	p, err := pd.p.RegMR(buf, access)
	if err != nil {
		pd.use(-1, 0)
		return nil, err
	}
	pd.ctx.res[resMR].Add(1)
	return &MR{pd: pd, p: p, addr: p.Addr(), lkey: p.LKey(), buf: buf}, nil
}

// Addr returns the MR's start address (ibv_mr.addr), which is also its iova.
func (m *MR) Addr() uint64 { return m.addr }

// Len returns the MR's length in bytes.
func (m *MR) Len() int { return len(m.buf) }

// LKey returns the local key.
func (m *MR) LKey() uint32 { return m.lkey }

// RKey returns the remote key (0 when the MR grants no remote access, as rxe).
func (m *MR) RKey() uint32 { return m.p.RKey() }

// Bytes returns the registered memory.
func (m *MR) Bytes() []byte { return m.buf }

// SGE returns a scatter/gather element for buf[off:off+n] of this MR.
func (m *MR) SGE(off, n int) SGE {
	return SGE{Addr: m.addr + uint64(off), Length: uint32(n), LKey: m.lkey}
}

// PD returns the MR's protection domain.
func (m *MR) PD() *PD { return m.pd }

// ProviderMR returns the provider's MR (provider.MRHandle): how a work
// request that names this MR reaches the device.
func (m *MR) ProviderMR() provider.MR { return m.p }

// Dereg deregisters the MR (ibv_dereg_mr); its keys stop working at once.
// It fails with ErrBusy while memory windows are bound to it.
func (m *MR) Dereg() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return verrorf(ErrClosed, "MR already deregistered")
	}
	if err := m.p.Dereg(); err != nil {
		return err
	}
	m.dead = true
	m.pd.use(-1, 0)
	m.pd.ctx.res[resMR].Add(-1)
	return nil
}
