package engine

import (
	crand "crypto/rand"
	"errors"
	"math/rand/v2"
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

// MemTable maps L_Keys and R_Keys to MRs for one device.
//
// A key is tag<<8 | variant, IBTA's split: the 24-bit tag names the MR or
// window for as long as it lives, and the 8-bit variant is what a memory
// window bind changes (ibv_inc_rkey). Both are drawn at random on every
// registration (ChaCha8, seeded from crypto/rand), so all 32 bits of a key
// are unpredictable: knowing any number of earlier keys says nothing about
// the next. A tag is never 0 (so no key is), never that of a live MR or
// window, and never one of the last quarantineLen freed, so a key that
// packets may still carry does not come back soon. Tags are found in an
// open-addressed table: being random, a tag's low bits are its hash.
type MemTable struct {
	mu    sync.RWMutex
	rng   *rand.ChaCha8
	slots []memSlot // power-of-two size, linear probing; at most half full
	used  int       // slots holding a tag, live or quarantined
	// quarantine is a ring of the tags freed last; their slots keep the
	// tag, with a nil MR, until they leave the ring.
	quarantine []uint32
	qNext      int
}

// memSlot is one entry of the key table: tag 0 is an empty slot, a nil mr a
// quarantined tag.
type memSlot struct {
	tag uint32
	mr  *MR
}

// quarantineLen is how many freed tags stay out of use.
const quarantineLen = 4096

// NewMemTable returns an empty table.
func NewMemTable() *MemTable {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return &MemTable{rng: rand.NewChaCha8(seed), slots: make([]memSlot, 16)}
}

// Register adds buf to the table for protection domain pd with the given
// access flags and returns the new MR.
func (t *MemTable) Register(pd uint32, buf []byte, access uint32) *MR {
	mr := &MR{PD: pd, Buf: buf, Access: access}
	if len(buf) > 0 {
		mr.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}
	t.mu.Lock()
	t.newKeyLocked(mr)
	t.mu.Unlock()
	mr.valid.Store(true)
	return mr
}

// newKeyLocked draws a key with a free tag, gives it to mr (as its R_Key
// too if it grants remote access) and enters mr under it.
func (t *MemTable) newKeyLocked(mr *MR) {
	if 2*(t.used+1) > len(t.slots) {
		t.growLocked()
	}
	for {
		k := t.rng.Uint64()
		for range 2 { // two 32-bit draws per ChaCha8 output
			key := uint32(k)
			k >>= 32
			tag := key >> 8
			if tag == 0 {
				continue
			}
			i, found := t.findLocked(tag)
			if found {
				continue // live, or quarantined
			}
			mr.LKey = key
			if mr.Access&(AccessRemoteRead|AccessRemoteWrite|AccessRemoteAtomic) != 0 {
				mr.RKey = key
			}
			t.slots[i] = memSlot{tag: tag, mr: mr}
			t.used++
			return
		}
	}
}

// findLocked returns the slot holding tag, or the empty slot where it would
// go.
func (t *MemTable) findLocked(tag uint32) (int, bool) {
	mask := len(t.slots) - 1
	for i := int(tag) & mask; ; i = (i + 1) & mask {
		switch t.slots[i].tag {
		case tag:
			return i, true
		case 0:
			return i, false
		}
	}
}

func (t *MemTable) growLocked() {
	old := t.slots
	t.slots = make([]memSlot, 2*len(old))
	for _, s := range old {
		if s.tag != 0 {
			i, _ := t.findLocked(s.tag)
			t.slots[i] = s
		}
	}
}

// deleteLocked empties slot i, moving later entries of its probe run back
// (no tombstones, so a lookup ends at the first empty slot).
func (t *MemTable) deleteLocked(i int) {
	mask := len(t.slots) - 1
	j := i
	for {
		j = (j + 1) & mask
		s := t.slots[j]
		if s.tag == 0 {
			break
		}
		home := int(s.tag) & mask
		// Move s into the hole at i unless its home lies in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = memSlot{}
	t.used--
}

// Deregister removes mr (or a window); its keys stop working at once, and
// its tag stays out of use for the next quarantineLen deregistrations.
func (t *MemTable) Deregister(mr *MR) {
	if !mr.valid.Swap(false) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if mr.mw != 0 {
		t.unbindLocked(mr)
	}
	tag := mr.LKey >> 8
	i, found := t.findLocked(tag)
	if !found || t.slots[i].mr != mr {
		return
	}
	t.slots[i].mr = nil
	if len(t.quarantine) < quarantineLen {
		t.quarantine = append(t.quarantine, tag)
		return
	}
	if j, ok := t.findLocked(t.quarantine[t.qNext]); ok {
		t.deleteLocked(j)
	}
	t.quarantine[t.qNext] = tag
	t.qNext = (t.qNext + 1) % quarantineLen
}

func (t *MemTable) lookup(key uint32) *MR {
	t.mu.RLock()
	mr := t.lookupLocked(key)
	t.mu.RUnlock()
	return mr
}

// lookupLocked returns the MR or window whose tag key has, or nil. The
// caller compares the whole key.
func (t *MemTable) lookupLocked(key uint32) *MR {
	tag := key >> 8
	if tag == 0 {
		return nil
	}
	slots := t.slots
	mask := len(slots) - 1
	for i := int(tag) & mask; ; i = (i + 1) & mask {
		s := &slots[i]
		if s.tag == tag {
			return s.mr
		}
		if s.tag == 0 {
			return nil
		}
	}
}

// KeyCache remembers the last MR its owner (a QP, under the QP's lock)
// resolved each way, so that a stream of work requests and packets naming
// one MR resolves its key without the table's lock: a cached MR is used while
// it is valid and its key is the one asked for. An MR's keys never change
// and a deregistered MR is never valid again (registering anew makes a new
// MR), so the cache can only answer what the table would. Memory windows,
// whose keys and ranges a bind changes, are never cached. A deregistered MR
// stays referenced until the owner's next look-up of another key.
type KeyCache struct{ local, remote *MR }

// Local resolves a local SGE: the key must be the L_Key of a valid MR in pd,
// the range must lie inside it, and LOCAL_WRITE is required when write is set.
func (t *MemTable) Local(pd uint32, sge SGE, write bool) ([]byte, error) {
	return t.LocalCached(nil, pd, sge, write)
}

// LocalCached is Local through the key cache c (nil for none).
func (t *MemTable) LocalCached(c *KeyCache, pd uint32, sge SGE, write bool) ([]byte, error) {
	var mr *MR
	if c != nil && c.local != nil && c.local.LKey == sge.LKey && c.local.valid.Load() {
		mr = c.local
	} else {
		mr = t.lookup(sge.LKey)
		if mr == nil || mr.LKey != sge.LKey || !mr.valid.Load() || mr.mw != 0 {
			return nil, errBadKey
		}
		if c != nil {
			c.local = mr
		}
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
	return t.RemoteCached(nil, pd, qpn, rkey, va, n, access)
}

// RemoteCached is Remote through the key cache c (nil for none).
func (t *MemTable) RemoteCached(c *KeyCache, pd, qpn, rkey uint32, va, n uint64, access uint32) ([]byte, error) {
	if c != nil {
		if mr := c.remote; mr != nil && mr.RKey == rkey && rkey != 0 && mr.valid.Load() && !mr.remoteInvalid.Load() {
			return mr.remote(pd, va, n, access)
		}
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	mr := t.lookupLocked(rkey)
	if mr == nil || mr.RKey != rkey || rkey == 0 || !mr.valid.Load() || mr.remoteInvalid.Load() {
		return nil, errBadKey
	}
	if mr.mw != 0 && (mr.parent == nil || !mr.parent.valid.Load() || (mr.mw == 2 && mr.boundQP != qpn)) {
		return nil, errBadKey
	}
	if c != nil && mr.mw == 0 {
		c.remote = mr
	}
	return mr.remote(pd, va, n, access)
}

// remote checks a remote access to [va, va+n) of mr, whose key was found
// valid, and returns that range.
func (mr *MR) remote(pd uint32, va, n uint64, access uint32) ([]byte, error) {
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
	mw := &MR{PD: pd, mw: typ} // a window from the start, so no look-up sees an MR
	t.mu.Lock()
	t.newKeyLocked(mw)
	mw.RKey = mw.LKey
	t.mu.Unlock()
	mw.valid.Store(true)
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
