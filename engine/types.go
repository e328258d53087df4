package engine

import "net/netip"

// Status is a work completion status; values equal libibverbs' ibv_wc_status.
type Status uint8

// Completion statuses used by the engine.
const (
	StatusSuccess        Status = 0
	StatusLocLenErr      Status = 1
	StatusLocQPOpErr     Status = 2
	StatusLocProtErr     Status = 4
	StatusWRFlushErr     Status = 5
	StatusMWBindErr      Status = 6
	StatusBadRespErr     Status = 7
	StatusLocAccessErr   Status = 8
	StatusRemInvReqErr   Status = 9
	StatusRemAccessErr   Status = 10
	StatusRemOpErr       Status = 11
	StatusRetryExcErr    Status = 12
	StatusRNRRetryExcErr Status = 13
	StatusFatalErr       Status = 19
	StatusGeneralErr     Status = 21
)

// WROp is a send work request opcode; values equal ibv_wr_opcode.
type WROp uint8

// Send work request opcodes.
const (
	WRWrite       WROp = 0
	WRWriteImm    WROp = 1
	WRSend        WROp = 2
	WRSendImm     WROp = 3
	WRRead        WROp = 4
	WRCompareSwap WROp = 5
	WRFetchAdd    WROp = 6
	WRLocalInv    WROp = 7
	WRBindMW      WROp = 8
	WRSendWithInv WROp = 9
	numWROps           = 10
)

// WCOp is a work completion opcode; values equal ibv_wc_opcode.
type WCOp uint8

// Work completion opcodes.
const (
	WCSend            WCOp = 0
	WCWrite           WCOp = 1
	WCRead            WCOp = 2
	WCCompareSwap     WCOp = 3
	WCFetchAdd        WCOp = 4
	WCBindMW          WCOp = 5
	WCLocalInv        WCOp = 6
	WCRecv            WCOp = 128
	WCRecvRDMAWithImm WCOp = 129
)

// Completion flags; values equal ibv_wc_flags.
const (
	WCFlagGRH     = 1
	WCFlagWithImm = 2
	WCFlagWithInv = 8
)

// Send flags; values equal ibv_send_flags.
const (
	SendFence     = 1
	SendSignaled  = 2
	SendSolicited = 4
	SendInline    = 8
)

// Access flags; values equal ibv_access_flags.
const (
	AccessLocalWrite   = 1
	AccessRemoteWrite  = 2
	AccessRemoteRead   = 4
	AccessRemoteAtomic = 8
	AccessMWBind       = 16
)

// SGE is one scatter/gather element: a range of registered memory given by
// its virtual address and the L_Key of the MR that covers it.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request as the engine receives it.
type SendWR struct {
	ID         uint64
	Op         WROp
	Flags      uint32 // SendFence | SendSignaled | SendSolicited | SendInline
	SGL        []SGE
	Imm        uint32 // immediate data, or the R_Key to invalidate (SEND_WITH_INV, LOCAL_INV)
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64 // compare (CmpSwap) or add (FetchAdd) operand
	Swap       uint64
	// BIND_MW: the window, the new R_Key (same index, new low byte) and
	// what it covers.
	Bind *Bind
	// UD only: where the datagram goes.
	AV         *AV
	RemoteQPN  uint32
	RemoteQKey uint32
}

// Bind describes a memory window bind.
type Bind struct {
	MW     *MR
	RKey   uint32
	MR     *MR // nil or zero Length: unbind
	Addr   uint64
	Length uint64
	Access uint32
}

// AV is an address vector: the destination of a UD work request.
type AV struct {
	Remote       netip.Addr
	FlowLabel    uint32
	HopLimit     uint8
	TrafficClass uint8
}

// RecvWR is a receive work request.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// Completion is one work completion, as libibverbs' ibv_wc.
type Completion struct {
	WRID    uint64
	Status  Status
	Opcode  WCOp
	Flags   uint32
	ByteLen uint32
	Imm     uint32 // immediate data, or the invalidated R_Key with WCFlagWithInv
	QPN     uint32
	SrcQP   uint32
	// VendorErr is ibv_wc.vendor_err: always 0 here, as on rxe (the status
	// says what went wrong).
	VendorErr uint32
	// Solicited is set on a receive completion whose message asked for a
	// solicited event.
	Solicited bool
}

// CompletionQueue receives completions. Push returns false when the queue is
// full (a CQ overflow).
type CompletionQueue interface {
	Push(c Completion) bool
}
