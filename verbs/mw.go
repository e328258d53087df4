package verbs

import (
	"sync"
	"sync/atomic"

	"github.com/rdma-go/rdma-go/provider"
)

// MW is a memory window (ibv_mw): a remotely accessible part of an MR with
// its own R_Key and access rights, that can be moved or revoked without
// re-registering memory.
type MW struct {
	pd   *PD
	typ  MWType
	p    provider.MW
	dead atomic.Bool

	// bindMu serialises BindMW; posted is the R_Key the last BindMW post
	// handed out (rxe's ibv_mw.rkey), valid when havePosted is set: the
	// next bind increments it even if that bind has not run yet.
	bindMu     sync.Mutex
	posted     uint32
	havePosted bool
}

// MWBind is a type 1 window bind (struct ibv_mw_bind).
type MWBind struct {
	WRID  uint64
	Flags SendFlags
	Info  MWBindInfo
}

// AllocMW allocates a memory window of type t (ibv_alloc_mw).
func (pd *PD) AllocMW(t MWType) (*MW, error) {
	if err := pd.ctx.check(); err != nil {
		return nil, err
	}
	if t != MWType1 && t != MWType2 {
		return nil, verrorf(ErrInvalidArgument, "memory window type %d", t)
	}
	if err := pd.use(1, 0); err != nil {
		return nil, err
	}
	p, err := pd.p.AllocMW(t)
	if err != nil {
		pd.use(-1, 0)
		return nil, err
	}
	return &MW{pd: pd, typ: t, p: p}, nil
}

// ProviderMW returns the provider's window (provider.MWHandle): how a
// WRBindMW work request reaches the device.
func (mw *MW) ProviderMW() provider.MW { return mw.p }

// Type returns the window type.
func (mw *MW) Type() MWType { return mw.typ }

// RKey returns the window's current R_Key (ibv_mw.rkey).
func (mw *MW) RKey() uint32 { return mw.p.RKey() }

// Dealloc frees the window (ibv_dealloc_mw); its R_Key stops working.
func (mw *MW) Dealloc() error {
	if mw.dead.Swap(true) {
		return verrorf(ErrClosed, "MW already deallocated")
	}
	if err := mw.p.Dealloc(); err != nil {
		return err
	}
	mw.pd.use(-1, 0)
	return nil
}

// IncRKey returns rkey with its low 8 bits (the key variant) incremented, the
// new R_Key for a type 2 bind (ibv_inc_rkey).
func IncRKey(rkey uint32) uint32 { return rkey&^0xFF | (rkey+1)&0xFF }

// BindMW binds a type 1 window through qp (ibv_bind_mw): it posts a bind
// work request and returns the window's new R_Key, valid once the bind
// completes (a WCBindMW completion when signaled). As with rxe, the new key
// follows the one the previous BindMW returned, even if that bind is still
// queued, so binds posted back to back get different keys.
func (qp *QP) BindMW(mw *MW, b MWBind) (uint32, error) {
	if mw.typ != MWType1 {
		return 0, verrorf(ErrInvalidArgument, "BindMW is for type 1 windows; bind type 2 with a WRBindMW work request")
	}
	mw.bindMu.Lock()
	defer mw.bindMu.Unlock()
	base := mw.posted
	if !mw.havePosted {
		base = mw.RKey()
	}
	rkey := IncRKey(base)
	err := qp.PostSend(SendWR{ID: b.WRID, Opcode: WRBindMW, Flags: b.Flags, BindMW: mw, BindRKey: rkey, BindInfo: b.Info})
	if err != nil {
		return 0, err
	}
	mw.posted, mw.havePosted = rkey, true
	return rkey, nil
}
