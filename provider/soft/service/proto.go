package service

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdma-go/rdma-go/provider/soft/rundir"
)

// SocketEnv names the service's socket instead of the default (see
// SocketPath); "off" keeps every process on its own in-process devices.
const SocketEnv = "RDMA_GO_SERVICE"

// SocketPath returns where clients look for the service: SocketEnv's
// value, or service.sock in the per-user run directory
// ($XDG_RUNTIME_DIR/rdma-go, else /tmp/rdma-go-UID). It returns "" when
// SocketEnv is "off".
func SocketPath() string {
	switch v := strings.TrimSpace(os.Getenv(SocketEnv)); {
	case strings.EqualFold(v, "off"):
		return ""
	case v != "":
		return v
	}
	return filepath.Join(rundir.Dir(), "service.sock")
}

// Slots 1 to MaxSlot are handed out; slot 0 holds QP0 and QP1, and 255 the
// multicast QPN 0xFFFFFF.
const MaxSlot = 254

// QPNRange returns the QP numbers a process in slot may use (0, 0 for slot
// 0: the whole space, as a device with the address to itself has).
func QPNRange(slot uint8) (first, last uint32) {
	if slot == 0 {
		return 0, 0
	}
	return uint32(slot)<<16 | 2, uint32(slot)<<16 | 0xFFFF
}

// DeriveGUID derives a stable node GUID from parts (a device's name and
// address) the way rxe derives one from a MAC: a locally administered
// unicast MAC made from a hash, expanded to EUI-64 (ff:fe in the middle,
// the universal/local bit flipped).
func DeriveGUID(parts ...[]byte) uint64 {
	h := uint64(1469598103934665603) // FNV-1a
	for _, p := range parts {
		for _, b := range p {
			h = (h ^ uint64(b)) * 1099511628211
		}
	}
	mac := h & 0xFFFFFFFFFFFF
	mac = mac&^(0x01<<40) | 0x02<<40 // unicast, locally administered
	eui := (mac>>24)<<40 | 0xFFFE<<24 | mac&0xFFFFFF
	return eui ^ 0x02<<56
}

// addressGUID is the node GUID of the device a service runs on addr: the
// same in every process attached to it, and across restarts.
func addressGUID(ap netip.AddrPort) uint64 {
	var port [2]byte
	binary.BigEndian.PutUint16(port[:], ap.Port())
	return DeriveGUID([]byte("rdma-go service"), ap.Addr().Unmap().AsSlice(), port[:])
}

// Message kinds, the first byte of every message.
const (
	kindAttach  = 1 // client → service: attach to an address
	kindClaim   = 3 // client → service: claim a service ID
	kindRelease = 4 // client → service: release a service ID
	kindReply   = 5 // service → client: the answer to a request
)

// protoVersion is the protocol's version, checked at attach.
const protoVersion = 2

// Reply status codes.
const (
	statusOK    = 0
	statusBusy  = 1 // a service ID another process claimed
	statusFull  = 2 // no slot free
	statusError = 3 // anything else; the reply's text says what
)

// ErrBusy is returned by Claim when another process listens on the
// service ID.
var ErrBusy = errors.New("service ID in use by another process")

// attachReq asks to attach to an address (kindAttach).
//
//	0 kind, 1 version, 2 wanted slot (0: any), 3 reserved,
//	4–5 port, 6–7 reserved, 8–11 pid, 12–27 address (IPv6 or v4-mapped)
type attachReq []byte

const attachReqLen = 28

func newAttachReq(addr netip.AddrPort, slot uint8, pid int) attachReq {
	m := make(attachReq, attachReqLen)
	m[0], m[1], m[2] = kindAttach, protoVersion, slot
	binary.BigEndian.PutUint16(m[4:], addr.Port())
	binary.BigEndian.PutUint32(m[8:], uint32(pid))
	a := addr.Addr().Unmap().As16()
	copy(m[12:], a[:])
	return m
}

func (m attachReq) version() uint8 { return m[1] }
func (m attachReq) slot() uint8    { return m[2] }
func (m attachReq) pid() int       { return int(binary.BigEndian.Uint32(m[8:])) }
func (m attachReq) addr() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(m[12:28])).Unmap(), binary.BigEndian.Uint16(m[4:]))
}

// reply answers a request (kindReply); the answer to kindAttach carries
// the process's socket (SCM_RIGHTS).
//
//	0 kind, 1 status, 2 slot, 3 reserved, 4–7 reserved,
//	8–15 reserved, 16–23 GUID, 24– error text
type reply []byte

const replyLen = 24

func newReply(status, slot uint8, guid uint64, text string) reply {
	m := make(reply, replyLen, replyLen+len(text))
	m[0], m[1], m[2] = kindReply, status, slot
	binary.BigEndian.PutUint64(m[16:], guid)
	return append(m, text...)
}

func (m reply) status() uint8 { return m[1] }
func (m reply) slot() uint8   { return m[2] }
func (m reply) guid() uint64  { return binary.BigEndian.Uint64(m[16:]) }
func (m reply) text() string  { return string(m[replyLen:]) }

// idMsg is a message carrying a service ID (kindClaim, kindRelease).
//
//	0 kind, 1–7 reserved, 8–15 value
type idMsg []byte

const idMsgLen = 16

func newIDMsg(kind uint8, v uint64) idMsg {
	m := make(idMsg, idMsgLen)
	m[0] = kind
	binary.BigEndian.PutUint64(m[8:], v)
	return m
}

func (m idMsg) value() uint64 { return binary.BigEndian.Uint64(m[8:]) }
