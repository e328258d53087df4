package wire

// Opcode is the 8-bit BTH operation code. Bits 7–5 select the transport and
// bits 4–0 the operation.
type Opcode uint8

// Transport classes (BTH opcode bits 7–5).
const (
	TransportRC  Opcode = 0x00
	TransportUC  Opcode = 0x20
	TransportRD  Opcode = 0x40
	TransportUD  Opcode = 0x60
	TransportCNP Opcode = 0x80
)

// Reliable Connection opcodes.
const (
	RCSendFirst          Opcode = 0x00
	RCSendMiddle         Opcode = 0x01
	RCSendLast           Opcode = 0x02
	RCSendLastImm        Opcode = 0x03
	RCSendOnly           Opcode = 0x04
	RCSendOnlyImm        Opcode = 0x05
	RCWriteFirst         Opcode = 0x06
	RCWriteMiddle        Opcode = 0x07
	RCWriteLast          Opcode = 0x08
	RCWriteLastImm       Opcode = 0x09
	RCWriteOnly          Opcode = 0x0A
	RCWriteOnlyImm       Opcode = 0x0B
	RCReadRequest        Opcode = 0x0C
	RCReadResponseFirst  Opcode = 0x0D
	RCReadResponseMiddle Opcode = 0x0E
	RCReadResponseLast   Opcode = 0x0F
	RCReadResponseOnly   Opcode = 0x10
	RCAck                Opcode = 0x11
	RCAtomicAck          Opcode = 0x12
	RCCompareSwap        Opcode = 0x13
	RCFetchAdd           Opcode = 0x14
	RCSendLastInvalidate Opcode = 0x16
	RCSendOnlyInvalidate Opcode = 0x17
	RCFlush              Opcode = 0x1C
	RCAtomicWrite        Opcode = 0x1D
)

// Unreliable Connection opcodes (RC's SEND/WRITE set with transport bits 001).
const (
	UCSendFirst    Opcode = 0x20
	UCSendMiddle   Opcode = 0x21
	UCSendLast     Opcode = 0x22
	UCSendLastImm  Opcode = 0x23
	UCSendOnly     Opcode = 0x24
	UCSendOnlyImm  Opcode = 0x25
	UCWriteFirst   Opcode = 0x26
	UCWriteMiddle  Opcode = 0x27
	UCWriteLast    Opcode = 0x28
	UCWriteLastImm Opcode = 0x29
	UCWriteOnly    Opcode = 0x2A
	UCWriteOnlyImm Opcode = 0x2B
)

// Unreliable Datagram opcodes and the congestion notification packet.
const (
	UDSendOnly    Opcode = 0x64
	UDSendOnlyImm Opcode = 0x65
	CNP           Opcode = 0x81
)

// Header flags: which extended headers follow the BTH, and what the opcode means.
const (
	HasRETH OpFlags = 1 << iota
	HasAETH
	HasAtomicETH
	HasAtomicAckETH
	HasImmDt
	HasIETH
	HasDETH
	HasFETH
	HasPayload
	IsFirst
	IsMiddle
	IsLast
	IsSend
	IsWrite
	IsRead
	IsAtomic
	IsResponse // sent by a responder and handled by the requester's completer
	NeedsRecvWQE
	IsAtomicWrite
	IsFlush
	IsCNP
)

// IsOnly is the position of a single-packet message.
const IsOnly = IsFirst | IsLast

// OpFlags describes an opcode: its extended headers, position and class.
type OpFlags uint32

// OpInfo is one row of the opcode table.
type OpInfo struct {
	Name   string
	Flags  OpFlags
	HdrLen int // BTH plus extended headers: the payload offset
}

// Extended header lengths in bytes.
const (
	BTHLen          = 12
	RETHLen         = 16
	AETHLen         = 4
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	IETHLen         = 4
	DETHLen         = 8
	FETHLen         = 4
	ICRCLen         = 4
	CNPPadLen       = 16 // reserved bytes after a CNP's BTH
)

var opTable [256]OpInfo

func init() {
	for _, r := range []struct {
		op    Opcode
		name  string
		flags OpFlags
	}{
		{RCSendFirst, "RC_SEND_FIRST", IsSend | HasPayload | IsFirst | NeedsRecvWQE},
		{RCSendMiddle, "RC_SEND_MIDDLE", IsSend | HasPayload | IsMiddle},
		{RCSendLast, "RC_SEND_LAST", IsSend | HasPayload | IsLast},
		{RCSendLastImm, "RC_SEND_LAST_WITH_IMMEDIATE", IsSend | HasPayload | IsLast | HasImmDt},
		{RCSendOnly, "RC_SEND_ONLY", IsSend | HasPayload | IsOnly | NeedsRecvWQE},
		{RCSendOnlyImm, "RC_SEND_ONLY_WITH_IMMEDIATE", IsSend | HasPayload | IsOnly | HasImmDt | NeedsRecvWQE},
		{RCWriteFirst, "RC_RDMA_WRITE_FIRST", IsWrite | HasPayload | IsFirst | HasRETH},
		{RCWriteMiddle, "RC_RDMA_WRITE_MIDDLE", IsWrite | HasPayload | IsMiddle},
		{RCWriteLast, "RC_RDMA_WRITE_LAST", IsWrite | HasPayload | IsLast},
		{RCWriteLastImm, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", IsWrite | HasPayload | IsLast | HasImmDt | NeedsRecvWQE},
		{RCWriteOnly, "RC_RDMA_WRITE_ONLY", IsWrite | HasPayload | IsOnly | HasRETH},
		{RCWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", IsWrite | HasPayload | IsOnly | HasRETH | HasImmDt | NeedsRecvWQE},
		{RCReadRequest, "RC_RDMA_READ_REQUEST", IsRead | IsOnly | HasRETH},
		{RCReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", IsRead | IsResponse | HasPayload | IsFirst | HasAETH},
		{RCReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", IsRead | IsResponse | HasPayload | IsMiddle},
		{RCReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", IsRead | IsResponse | HasPayload | IsLast | HasAETH},
		{RCReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", IsRead | IsResponse | HasPayload | IsOnly | HasAETH},
		{RCAck, "RC_ACKNOWLEDGE", IsResponse | IsOnly | HasAETH},
		{RCAtomicAck, "RC_ATOMIC_ACKNOWLEDGE", IsResponse | IsAtomic | IsOnly | HasAETH | HasAtomicAckETH},
		{RCCompareSwap, "RC_COMPARE_SWAP", IsAtomic | IsOnly | HasAtomicETH},
		{RCFetchAdd, "RC_FETCH_ADD", IsAtomic | IsOnly | HasAtomicETH},
		{RCSendLastInvalidate, "RC_SEND_LAST_WITH_INVALIDATE", IsSend | HasPayload | IsLast | HasIETH},
		{RCSendOnlyInvalidate, "RC_SEND_ONLY_WITH_INVALIDATE", IsSend | HasPayload | IsOnly | HasIETH | NeedsRecvWQE},
		{RCFlush, "RC_FLUSH", IsFlush | IsOnly | HasFETH | HasRETH},
		{RCAtomicWrite, "RC_ATOMIC_WRITE", IsAtomicWrite | IsOnly | HasRETH | HasPayload},
		{UCSendFirst, "UC_SEND_FIRST", IsSend | HasPayload | IsFirst | NeedsRecvWQE},
		{UCSendMiddle, "UC_SEND_MIDDLE", IsSend | HasPayload | IsMiddle},
		{UCSendLast, "UC_SEND_LAST", IsSend | HasPayload | IsLast},
		{UCSendLastImm, "UC_SEND_LAST_WITH_IMMEDIATE", IsSend | HasPayload | IsLast | HasImmDt},
		{UCSendOnly, "UC_SEND_ONLY", IsSend | HasPayload | IsOnly | NeedsRecvWQE},
		{UCSendOnlyImm, "UC_SEND_ONLY_WITH_IMMEDIATE", IsSend | HasPayload | IsOnly | HasImmDt | NeedsRecvWQE},
		{UCWriteFirst, "UC_RDMA_WRITE_FIRST", IsWrite | HasPayload | IsFirst | HasRETH},
		{UCWriteMiddle, "UC_RDMA_WRITE_MIDDLE", IsWrite | HasPayload | IsMiddle},
		{UCWriteLast, "UC_RDMA_WRITE_LAST", IsWrite | HasPayload | IsLast},
		{UCWriteLastImm, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", IsWrite | HasPayload | IsLast | HasImmDt | NeedsRecvWQE},
		{UCWriteOnly, "UC_RDMA_WRITE_ONLY", IsWrite | HasPayload | IsOnly | HasRETH},
		{UCWriteOnlyImm, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", IsWrite | HasPayload | IsOnly | HasRETH | HasImmDt | NeedsRecvWQE},
		{UDSendOnly, "UD_SEND_ONLY", IsSend | HasPayload | IsOnly | HasDETH | NeedsRecvWQE},
		{UDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", IsSend | HasPayload | IsOnly | HasDETH | HasImmDt | NeedsRecvWQE},
		{CNP, "CNP", IsCNP | IsOnly},
	} {
		opTable[r.op] = OpInfo{Name: r.name, Flags: r.flags, HdrLen: hdrLen(r.flags)}
	}
}

// extHeaders lists the extended headers in the order they follow the BTH.
var extHeaders = [...]struct {
	f OpFlags
	n int
}{
	{HasDETH, DETHLen}, {HasFETH, FETHLen}, {HasRETH, RETHLen}, {HasAtomicETH, AtomicETHLen},
	{HasAETH, AETHLen}, {HasAtomicAckETH, AtomicAckETHLen}, {HasImmDt, ImmDtLen}, {HasIETH, IETHLen},
}

func hdrLen(f OpFlags) int {
	n := BTHLen
	for _, h := range extHeaders {
		if f&h.f != 0 {
			n += h.n
		}
	}
	if f&IsCNP != 0 {
		n += CNPPadLen
	}
	return n
}

// Info returns the opcode's table row and whether the opcode is known.
func (op Opcode) Info() (OpInfo, bool) {
	i := opTable[op]
	return i, i.Name != ""
}

// Valid reports whether op is an opcode this stack understands.
func (op Opcode) Valid() bool { return opTable[op].Name != "" }

// Flags returns the opcode's flags, or 0 for an unknown opcode.
func (op Opcode) Flags() OpFlags { return opTable[op].Flags }

// Has reports whether every flag in f is set for op.
func (op Opcode) Has(f OpFlags) bool { return opTable[op].Flags&f == f }

// HdrLen returns the length of the BTH and the opcode's extended headers, which
// is also the offset of the payload; 0 for an unknown opcode.
func (op Opcode) HdrLen() int { return opTable[op].HdrLen }

// Transport returns the transport class bits (TransportRC, TransportUC, ...).
func (op Opcode) Transport() Opcode { return op & 0xE0 }

// String returns the opcode name as the kernel and Wireshark spell it.
func (op Opcode) String() string {
	if n := opTable[op].Name; n != "" {
		return n
	}
	return "UNKNOWN_OPCODE(0x" + hex2(uint8(op)) + ")"
}

func hex2(b uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}
