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

// Deregister removes mr; its keys stop working at once.
func (t *MemTable) Deregister(mr *MR) {
	if !mr.valid.Swap(false) {
		return
	}
	idx := mr.LKey>>8 - t.base
	t.mu.Lock()
	if int(idx) < len(t.slots) && t.slots[idx] == mr {
		t.slots[idx] = nil
		t.free = append(t.free, idx)
	}
	t.mu.Unlock()
}

func (t *MemTable) lookup(key uint32) *MR {
	idx := key>>8 - t.base
	t.mu.RLock()
	var mr *MR
	if int(idx) < len(t.slots) {
		mr = t.slots[idx]
	}
	t.mu.RUnlock()
	return mr
}

// Local resolves a local SGE: the key must be the L_Key of a valid MR in pd,
// the range must lie inside it, and LOCAL_WRITE is required when write is set.
func (t *MemTable) Local(pd uint32, sge SGE, write bool) ([]byte, error) {
	mr := t.lookup(sge.LKey)
	if mr == nil || mr.LKey != sge.LKey || !mr.valid.Load() {
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

// Remote resolves a remote access: the key must be the R_Key of a valid MR in
// pd that grants access, and [va, va+n) must lie inside it.
func (t *MemTable) Remote(pd uint32, rkey uint32, va, n uint64, access uint32) ([]byte, error) {
	mr := t.lookup(rkey)
	if mr == nil || mr.RKey != rkey || rkey == 0 || !mr.valid.Load() || mr.remoteInvalid.Load() {
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

func (mr *MR) slice(va, n uint64) ([]byte, error) {
	if va < mr.Addr || n > uint64(len(mr.Buf)) || va-mr.Addr > uint64(len(mr.Buf))-n {
		return nil, errBadRange
	}
	off := va - mr.Addr
	return mr.Buf[off : off+n : off+n], nil
}

// Invalidate disables remote access through rkey (SEND with invalidate). It
// reports false when rkey names no valid MR of pd.
func (t *MemTable) Invalidate(pd uint32, rkey uint32) bool {
	mr := t.lookup(rkey)
	if mr == nil || mr.RKey != rkey || rkey == 0 || mr.PD != pd || !mr.valid.Load() {
		return false
	}
	return !mr.remoteInvalid.Swap(true)
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
