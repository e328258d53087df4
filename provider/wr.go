package provider

// SGE is a scatter/gather element (struct ibv_sge): Length bytes at virtual
// address Addr inside the MR whose L_Key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SGLLen is the number of bytes sgl names.
func SGLLen(sgl []SGE) uint64 {
	var n uint64
	for _, s := range sgl {
		n += uint64(s.Length)
	}
	return n
}

// SendWR is a send work request (struct ibv_send_wr). Post a chain by
// passing several to PostSend.
type SendWR struct {
	// ID is returned in the work completion.
	ID uint64
	// Opcode is the operation.
	Opcode WROpcode
	// Flags are SendSignaled, SendFence, SendSolicited, SendInline.
	Flags SendFlags
	// SGL is the gather list (for READ and atomics: the scatter list that
	// receives the data or the original value).
	SGL []SGE
	// ImmData is the immediate value of SEND/WRITE with immediate; on the
	// wire it is sent big-endian, and the receiver's WC.ImmData equals it.
	ImmData uint32
	// InvalidateRKey is the R_Key the responder invalidates
	// (WRSendWithInv).
	InvalidateRKey uint32
	// RemoteAddr and RKey address remote memory (WRITE, READ, atomics).
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is the compare operand of a compare-and-swap or the
	// value a fetch-and-add adds; Swap is the swap operand.
	CompareAdd uint64
	Swap       uint64
	// AH, RemoteQPN and RemoteQKey address a UD send. A RemoteQKey with
	// bit 31 set means "use the QP's own Q_Key" (IBTA C10-15). AH holds a
	// verbs *AH; the provider reaches its own address handle through it.
	AH         AHHandle
	RemoteQPN  uint32
	RemoteQKey uint32
	// BindMW, BindRKey and BindInfo describe a WRBindMW: the window, its
	// new R_Key (IncRKey of the current one) and what it exposes. BindMW
	// holds a verbs *MW.
	BindMW   MWHandle
	BindRKey uint32
	BindInfo MWBindInfo
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	// ImmData is the immediate value (with WCFlagWithImm), or the
	// invalidated R_Key (with WCFlagWithInv).
	ImmData      uint32
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}
