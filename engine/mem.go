package engine

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MR is a registered memory region: a Go byte slice whose virtual address is
// the iova that work requests and remote peers use (iova = VA, as rxe).
type MR struct {
	PD     uint32
	Addr   uint64
	Buf    []byte
	Access uint32
	LKey   uint32
	RKey   uint32 // 0 when the MR grants no remote access
	valid  atomic.Bool
	// remoteInvalid is set when a SEND with invalidate names the R_Key:
	// remote access through it stops until the MR is registered again.
	remoteInvalid atomic.Bool

	// Memory windows are table entries too. A bound window's Addr and Buf
	// are the part of parent it exposes, with its own Access and RKey.
	mw      uint8        // 0 for an MR, else the window type (1 or 2)
	parent  *MR          // the MR a bound window covers; nil when unbound
	boundQP uint32       // type 2: the QP the window was bound through
	windows atomic.Int32 // on an MR: windows bound to it
}

// Errors from memory key checks. Each maps to a completion status.
var (
	errBadKey    = errors.New("engine: invalid memory key")
	errBadPD     = errors.New("engine: memory key belongs to another protection domain")
	errBadAccess = errors.New("engine: memory region does not allow this access")
	errBadRange  = errors.New("engine: range outside the memory region")
)

// MemTable maps L_Keys and R_Keys to MRs for one device. Keys are
// index<<8 | variant, with a random 8-bit variant and a random index offset,
// so keys are not predictable from one registration to the next.
type MemTable struct {
	mu      sync.RWMutex
	slots   []*MR
	free    []uint32
	variant uint8
	base    uint32
}

// NewMemTable returns an empty table.
func NewMemTable() *MemTable {
	var b [4]byte
	_, _ = rand.Read(b[:])
	r := binary.LittleEndian.Uint32(b[:])
	return &MemTable{variant: uint8(r), base: (r >> 8) & 0xFFF}
}

// Register adds buf to the table for protection domain pd with the given
// access flags and returns the new MR.
func (t *MemTable) Register(pd uint32, buf []byte, access uint32) *MR {
	mr := &MR{PD: pd, Buf: buf, Access: access}
	if len(buf) > 0 {
		mr.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}
	t.mu.Lock()
	var idx uint32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		idx = uint32(len(t.slots))
		t.slots = append(t.slots, nil)
	}
	t.slots[idx] = mr
	t.variant += 0x5B // a new variant on every registration
	key := (idx+t.base)<<8 | uint32(t.variant)
	t.mu.Unlock()
	mr.LKey = key
	if access&(AccessRemoteRead|AccessRemoteWrite|AccessRemoteAtomic) != 0 {
		mr.RKey = key
	}
	mr.valid.Store(true)
	return mr
}

// Deregister removes mr (or a window); its keys stop working at once.
func (t *MemTable) Deregister(mr *MR) {
	if !mr.valid.Swap(false) {
		return
	}
	idx := mr.LKey>>8 - t.base
	t.mu.Lock()
	if mr.mw != 0 {
		t.unbindLocked(mr)
	}
	if int(idx) < len(t.slots) && t.slots[idx] == mr {
		t.slots[idx] = nil
		t.free = append(t.free, idx)
	}
	t.mu.Unlock()
}

func (t *MemTable) lookup(key uint32) *MR {
	t.mu.RLock()
	mr := t.lookupLocked(key)
	t.mu.RUnlock()
	return mr
}

func (t *MemTable) lookupLocked(key uint32) *MR {
	idx := key>>8 - t.base
	if int(idx) < len(t.slots) {
		return t.slots[idx]
	}
	return nil
}

// Local resolves a local SGE: the key must be the L_Key of a valid MR in pd,
// the range must lie inside it, and LOCAL_WRITE is required when write is set.
func (t *MemTable) Local(pd uint32, sge SGE, write bool) ([]byte, error) {
	mr := t.lookup(sge.LKey)
	if mr == nil || mr.LKey != sge.LKey || !mr.valid.Load() || mr.mw != 0 {
		return nil, errBadKey
	}
	if mr.PD != pd {
		return nil, errBadPD
	}
	if write && mr.Access&AccessLocalWrite == 0 {
		return nil, errBadAccess
	}
	return mr.slice(sge.Addr, uint64(sge.Length))
}

// Remote resolves a remote access arriving on QP qpn: the key must be the
// R_Key of a valid MR, or of a bound memory window (a type 2 window only
// through the QP it was bound to), in pd, that grants access, and
// [va, va+n) must lie inside it.
func (t *MemTable) Remote(pd, qpn, rkey uint32, va, n uint64, access uint32) ([]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	mr := t.lookupLocked(rkey)
	if mr == nil || mr.RKey != rkey || rkey == 0 || !mr.valid.Load() || mr.remoteInvalid.Load() {
		return nil, errBadKey
	}
	if mr.mw != 0 && (mr.parent == nil || !mr.parent.valid.Load() || (mr.mw == 2 && mr.boundQP != qpn)) {
		return nil, errBadKey
	}
	if mr.PD != pd {
		return nil, errBadPD
	}
	if mr.Access&access != access {
		return nil, errBadAccess
	}
	return mr.slice(va, n)
}

// AllocMW allocates an unbound memory window of type 1 or 2 in pd.
func (t *MemTable) AllocMW(pd uint32, typ uint8) *MR {
	mw := t.Register(pd, nil, 0)
	mw.mw = typ
	t.mu.Lock()
	mw.RKey = mw.LKey
	t.mu.Unlock()
	return mw
}

// IsWindow reports whether m is a memory window.
func (m *MR) IsWindow() bool { return m.mw != 0 }

// CurrentRKey returns the window's or MR's R_Key as of now.
func (t *MemTable) CurrentRKey(m *MR) uint32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return m.RKey
}

// Windows returns how many memory windows are bound to the MR.
func (m *MR) Windows() int { return int(m.windows.Load()) }

// Errors of memory window operations (completion status MW_BIND_ERR).
var (
	errMWKey    = errors.New("engine: new window R_Key must keep the window's index")
	errMWBound  = errors.New("engine: type 2 window is already bound")
	errMWParent = errors.New("engine: MR does not allow binding windows, or is in another PD")
	errMWAccess = errors.New("engine: window access needs LOCAL_WRITE on the MR")
	errMWRange  = errors.New("engine: window range outside its MR")
	errMWType   = errors.New("engine: type 1 windows cannot be invalidated")
)

// BindMW binds (or, with a nil MR or zero length, unbinds) a window on
// behalf of QP qpn in pd, giving it the new R_Key b.RKey.
func (t *MemTable) BindMW(pd, qpn uint32, b *Bind) error {
	mw := b.MW
	t.mu.Lock()
	defer t.mu.Unlock()
	if mw == nil || mw.mw == 0 || !mw.valid.Load() || mw.PD != pd {
		return errBadKey
	}
	if b.RKey>>8 != mw.LKey>>8 {
		return errMWKey
	}
	if mw.mw == 2 && mw.parent != nil {
		return errMWBound
	}
	if b.MR == nil || b.Length == 0 {
		t.unbindLocked(mw)
		mw.RKey = b.RKey
		return nil
	}
	p := b.MR
	if !p.valid.Load() || p.mw != 0 || p.PD != pd || p.Access&AccessMWBind == 0 {
		return errMWParent
	}
	if b.Access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && p.Access&AccessLocalWrite == 0 {
		return errMWAccess
	}
	buf, err := p.slice(b.Addr, b.Length)
	if err != nil {
		return errMWRange
	}
	t.unbindLocked(mw)
	mw.parent, mw.Buf, mw.Addr, mw.Access, mw.RKey = p, buf, b.Addr, b.Access, b.RKey
	mw.boundQP = qpn
	mw.remoteInvalid.Store(false)
	p.windows.Add(1)
	return nil
}

func (t *MemTable) unbindLocked(mw *MR) {
	if mw.parent != nil {
		mw.parent.windows.Add(-1)
	}
	mw.parent, mw.Buf, mw.Addr, mw.Access = nil, nil, 0, 0
}

func (mr *MR) slice(va, n uint64) ([]byte, error) {
	if va < mr.Addr || n > uint64(len(mr.Buf)) || va-mr.Addr > uint64(len(mr.Buf))-n {
		return nil, errBadRange
	}
	off := va - mr.Addr
	return mr.Buf[off : off+n : off+n], nil
}

// Invalidate disables remote access through rkey (SEND with invalidate,
// LOCAL_INV): a type 2 window is unbound, an MR's R_Key stops working. It
// fails when rkey names no valid MR or window of pd, or a type 1 window.
func (t *MemTable) Invalidate(pd uint32, rkey uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	mr := t.lookupLocked(rkey)
	if mr == nil || mr.RKey != rkey || rkey == 0 || mr.PD != pd || !mr.valid.Load() {
		return errBadKey
	}
	switch mr.mw {
	case 1:
		return errMWType
	case 2:
		if mr.parent == nil {
			return errBadKey
		}
		t.unbindLocked(mr)
		return nil
	}
	if mr.remoteInvalid.Swap(true) {
		return errBadKey
	}
	return nil
}

// atomicLock serialises atomics device-wide, as rxe does, so that a
// compare-and-swap and a fetch-and-add on the same word never interleave.
var atomicLock sync.Mutex

// doAtomic performs a CmpSwap or FetchAdd on the 8-byte word w (aligned,
// native byte order) and returns the original value.
func doAtomic(w []byte, op WROp, compareAdd, swap uint64) uint64 {
	p := (*uint64)(unsafe.Pointer(unsafe.SliceData(w)))
	atomicLock.Lock()
	defer atomicLock.Unlock()
	if op == WRFetchAdd {
		return atomic.AddUint64(p, compareAdd) - compareAdd
	}
	old := atomic.LoadUint64(p)
	if old == compareAdd {
		atomic.StoreUint64(p, swap)
	}
	return old
}
