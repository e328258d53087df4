package mad

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes and well-known values of MADs on QP1 (docs/spec/cm-mad.md §1–§2).
const (
	// Size is the size of every MAD on the wire: header and class data.
	Size = 256
	// HeaderLen is the size of the common MAD header.
	HeaderLen = 24
	// BaseVersion is the only base version Linux accepts on RoCE.
	BaseVersion = 1
	// GSIQPN is the QP number of the General Services Interface.
	GSIQPN = 1
	// GSIQKey is the Q_Key of QP1.
	GSIQKey = 0x80010000
	// GSIPKey is the P_Key MADs carry on RoCE.
	GSIPKey = 0xFFFF
)

// Management classes (MAD byte 1).
const (
	ClassSubnLID       = 0x01 // subnet management, LID routed (QP0 only)
	ClassSubnAdm       = 0x03 // subnet administration
	ClassPerfMgt       = 0x04 // performance management
	ClassBM            = 0x05 // baseboard management
	ClassDevMgt        = 0x06 // device management
	ClassCM            = 0x07 // communication management
	ClassSNMP          = 0x08 // SNMP tunneling
	ClassCongestion    = 0x21 // congestion control
	ClassSubnDirected  = 0x81 // subnet management, directed route (QP0 only)
	CMClassVersion     = 2    // class version of every CM MAD Linux sends and accepts
	PerfMgtVersion     = 1    // class version of PerfMgt
	maxMatchingVersion = 0x83 // Linux never dispatches class versions from here on
)

// Methods (MAD byte 3: the response bit 0x80 and a 7-bit method).
const (
	MethodGet          = 0x01
	MethodSet          = 0x02
	MethodSend         = 0x03
	MethodTrap         = 0x05
	MethodReport       = 0x06
	MethodTrapRepress  = 0x07
	MethodGetResp      = 0x81
	MethodReportResp   = 0x86
	MethodResponseFlag = 0x80
)

// Status values of responses (MAD bytes 4–5).
const (
	StatusBusy                  = 0x0001
	StatusRedirect              = 0x0002
	StatusBadVersion            = 0x0004 // bad base or class version
	StatusMethodUnsupported     = 0x0008
	StatusMethodAttrUnsupported = 0x000C // what Linux answers when no agent handles a Get or Set
	StatusInvalidAttrValue      = 0x001C // invalid attribute or modifier value
	StatusInvalidFieldMask      = 0x001C // the invalid-field code bits
	StatusClassSpecificMask     = 0xFF00
)

// AttrClassPortInfo is the ClassPortInfo attribute ID, the same in every
// class.
const AttrClassPortInfo = 0x0001

// Errors returned by Parse.
var (
	ErrShort       = errors.New("mad: shorter than 256 bytes")
	ErrBaseVersion = errors.New("mad: base version is not 1")
)

// MAD is a 256-byte management datagram. Its accessors read and write the
// common header (docs/spec/cm-mad.md §2); the class views (REQ, PortCounters, …)
// give the rest.
type MAD []byte

// Parse checks that b holds a MAD this stack handles: at least 256 bytes
// (more are ignored, as by the Linux receive buffer) and base version 1. It
// returns the first 256 bytes of b, not a copy.
func Parse(b []byte) (MAD, error) {
	if len(b) < Size {
		return nil, fmt.Errorf("%w (%d bytes)", ErrShort, len(b))
	}
	m := MAD(b[:Size:Size])
	if m.BaseVersion() != BaseVersion {
		return nil, fmt.Errorf("%w (%d)", ErrBaseVersion, m.BaseVersion())
	}
	return m, nil
}

// New returns a zeroed MAD with the header filled in: base version 1, the
// class, class version, method, attribute ID and transaction ID given,
// status and attribute modifier 0.
func New(class, version, method uint8, attr uint16, tid uint64) MAD {
	m := make(MAD, Size)
	m.Init(class, version, method, attr, tid)
	return m
}

// Init zeroes m (256 bytes) and fills in the header as New does.
func (m MAD) Init(class, version, method uint8, attr uint16, tid uint64) {
	clear(m[:Size])
	m[0], m[1], m[2], m[3] = BaseVersion, class, version, method
	m.SetTID(tid)
	m.SetAttrID(attr)
}

// BaseVersion returns MAD byte 0.
func (m MAD) BaseVersion() uint8 { return m[0] }

// MgmtClass returns the management class (byte 1).
func (m MAD) MgmtClass() uint8 { return m[1] }

// ClassVersion returns the class version (byte 2).
func (m MAD) ClassVersion() uint8 { return m[2] }

// Method returns byte 3: the method with the response bit (GetResp is 0x81).
func (m MAD) Method() uint8 { return m[3] }

// IsResponse reports whether m answers a request: the response bit is set,
// or the method is TrapRepress (as Linux's ib_response_mad).
func (m MAD) IsResponse() bool {
	return m[3]&MethodResponseFlag != 0 || m[3] == MethodTrapRepress
}

// Status returns the status word (bytes 4–5).
func (m MAD) Status() uint16 { return binary.BigEndian.Uint16(m[4:]) }

// ClassSpecific returns bytes 6–7 (0 outside directed-route SMPs).
func (m MAD) ClassSpecific() uint16 { return binary.BigEndian.Uint16(m[6:]) }

// TID returns the transaction ID (bytes 8–15).
func (m MAD) TID() uint64 { return binary.BigEndian.Uint64(m[8:]) }

// AttrID returns the attribute ID (bytes 16–17): the CM message type or the
// PerfMgt attribute.
func (m MAD) AttrID() uint16 { return binary.BigEndian.Uint16(m[16:]) }

// AttrMod returns the attribute modifier (bytes 20–23).
func (m MAD) AttrMod() uint32 { return binary.BigEndian.Uint32(m[20:]) }

// Data returns the class data, bytes 24–255.
func (m MAD) Data() []byte { return m[HeaderLen:Size] }

// SetBaseVersion sets byte 0.
func (m MAD) SetBaseVersion(v uint8) { m[0] = v }

// SetMgmtClass sets byte 1.
func (m MAD) SetMgmtClass(v uint8) { m[1] = v }

// SetClassVersion sets byte 2.
func (m MAD) SetClassVersion(v uint8) { m[2] = v }

// SetMethod sets byte 3 (response bit included).
func (m MAD) SetMethod(v uint8) { m[3] = v }

// SetStatus sets the status word.
func (m MAD) SetStatus(v uint16) { binary.BigEndian.PutUint16(m[4:], v) }

// SetClassSpecific sets bytes 6–7.
func (m MAD) SetClassSpecific(v uint16) { binary.BigEndian.PutUint16(m[6:], v) }

// SetTID sets the transaction ID.
func (m MAD) SetTID(v uint64) { binary.BigEndian.PutUint64(m[8:], v) }

// SetAttrID sets the attribute ID.
func (m MAD) SetAttrID(v uint16) { binary.BigEndian.PutUint16(m[16:], v) }

// SetAttrMod sets the attribute modifier.
func (m MAD) SetAttrMod(v uint32) { binary.BigEndian.PutUint32(m[20:], v) }

// Clone returns a copy of m's 256 bytes.
func (m MAD) Clone() MAD { return append(MAD(nil), m[:Size]...) }

// String summarises the header.
func (m MAD) String() string {
	return fmt.Sprintf("MAD{class %#02x v%d method %#02x status %#04x tid %#016x attr %#04x mod %#x}",
		m.MgmtClass(), m.ClassVersion(), m.Method(), m.Status(), m.TID(), m.AttrID(), m.AttrMod())
}

// Byte-field helpers shared by the views. Offsets are MAD (or attribute)
// byte offsets; masks and shifts are those of the spec tables.

func get8(b []byte, off int, mask uint8, shift uint) uint8 { return (b[off] & mask) >> shift }

func set8(b []byte, off int, mask uint8, shift uint, v uint8) {
	b[off] = b[off]&^mask | (v<<shift)&mask
}

func getBool(b []byte, off int, mask uint8) bool { return b[off]&mask != 0 }

func setBool(b []byte, off int, mask uint8, v bool) {
	if v {
		b[off] |= mask
	} else {
		b[off] &^= mask
	}
}

func get16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
func get24(b []byte, off int) uint32 {
	return uint32(b[off])<<16 | uint32(b[off+1])<<8 | uint32(b[off+2])
}
func get32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
func get64(b []byte, off int) uint64 { return binary.BigEndian.Uint64(b[off:]) }

func put16(b []byte, off int, v uint16) { binary.BigEndian.PutUint16(b[off:], v) }
func put24(b []byte, off int, v uint32) {
	b[off], b[off+1], b[off+2] = byte(v>>16), byte(v>>8), byte(v)
}
func put32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.BigEndian.PutUint64(b[off:], v) }

// putData copies p into the n-byte area at off and zeroes the rest of it.
// It reports false, copying nothing, if p is longer than the area.
func putData(b []byte, off, n int, p []byte) bool {
	if len(p) > n {
		return false
	}
	copy(b[off:off+n], p)
	clear(b[off+len(p) : off+n])
	return true
}
