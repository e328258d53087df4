//go:build linux

package kernel

// The C structures of rdma-core 44's <infiniband/verbs.h>, laid out as the
// LP64 Linux ABIs (amd64, arm64) lay them out. offsets_test.go checks every
// field used here against the header with the C compiler where one is
// installed. Pointers are uintptr: these structures live in C memory or are
// handed to C for the length of one call, and never hold Go pointers.

// Offsets into struct ibv_context: its ops (struct ibv_context_ops) start
// at 8; the inline verbs call through these.
const (
	ctxOpsAllocMW     = 64  // ops.alloc_mw
	ctxOpsBindMW      = 72  // ops.bind_mw
	ctxOpsDeallocMW   = 80  // ops.dealloc_mw
	ctxOpsPollCQ      = 96  // ops.poll_cq
	ctxOpsReqNotifyCQ = 104 // ops.req_notify_cq
	ctxOpsPostSRQRecv = 168 // ops.post_srq_recv
	ctxOpsPostSend    = 208 // ops.post_send
	ctxOpsPostRecv    = 216 // ops.post_recv
	ctxAsyncFD        = 268 // async_fd
	ctxNumCompVectors = 272 // num_comp_vectors
)

// cDeviceAttr is struct ibv_device_attr.
type cDeviceAttr struct {
	FWVer                 [64]byte
	NodeGUID              uint64 // __be64
	SysImageGUID          uint64 // __be64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 int32
	MaxQPWR               int32
	DeviceCapFlags        uint32
	MaxSGE                int32
	MaxSGERD              int32
	MaxCQ                 int32
	MaxCQE                int32
	MaxMR                 int32
	MaxPD                 int32
	MaxQPRDAtom           int32
	MaxEERDAtom           int32
	MaxResRDAtom          int32
	MaxQPInitRDAtom       int32
	MaxEEInitRDAtom       int32
	AtomicCap             uint32
	MaxEE                 int32
	MaxRDD                int32
	MaxMW                 int32
	MaxRawIPv6QP          int32
	MaxRawEthyQP          int32
	MaxMcastGrp           int32
	MaxMcastQPAttach      int32
	MaxTotalMcastQPAttach int32
	MaxAH                 int32
	MaxFMR                int32
	MaxMapPerFMR          int32
	MaxSRQ                int32
	MaxSRQWR              int32
	MaxSRQSGE             int32
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
}

// cPortAttr is struct ibv_port_attr (the full one of verbs.h 44, which
// the exported ibv_query_port fills in as far as its compat prefix).
type cPortAttr struct {
	State         uint32
	MaxMTU        uint32
	ActiveMTU     uint32
	GIDTblLen     int32
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	PortCapFlags2 uint16
}

// cSGE is struct ibv_sge.
type cSGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// cSendWR is struct ibv_send_wr. The unions are flattened: the field at
// each offset is named for its first use and documented with the others.
type cSendWR struct {
	WRID      uint64
	Next      uintptr
	SGList    uintptr
	NumSGE    int32
	Opcode    uint32
	SendFlags uint32
	ImmData   uint32 // imm_data (__be32), invalidate_rkey
	// RemoteAddr is wr.rdma.remote_addr, wr.atomic.remote_addr, wr.ud.ah.
	RemoteAddr uint64
	// RKey is wr.rdma.rkey, the low half of wr.atomic.compare_add, and
	// wr.ud.remote_qpn; Word52 the high half of compare_add and
	// wr.ud.remote_qkey.
	RKey       uint32
	Word52     uint32
	Swap       uint64 // wr.atomic.swap
	AtomicRKey uint32 // wr.atomic.rkey
	_          uint32
	RemoteSRQN uint32 // qp_type.xrc.remote_srqn
	_          uint32
	MW         uintptr // bind_mw.mw
	BindRKey   uint32  // bind_mw.rkey
	_          uint32
	BindMR     uintptr // bind_mw.bind_info.mr
	BindAddr   uint64  // bind_mw.bind_info.addr
	BindLength uint64  // bind_mw.bind_info.length
	BindAccess uint32  // bind_mw.bind_info.mw_access_flags
	_          uint32
}

// cRecvWR is struct ibv_recv_wr.
type cRecvWR struct {
	WRID   uint64
	Next   uintptr
	SGList uintptr
	NumSGE int32
	_      int32
}

// cWC is struct ibv_wc.
type cWC struct {
	WRID         uint64
	Status       uint32
	Opcode       uint32
	VendorErr    uint32
	ByteLen      uint32
	ImmData      uint32 // imm_data (__be32), invalidated_rkey
	QPNum        uint32
	SrcQP        uint32
	WCFlags      uint32
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	_            [2]byte
}

// cGlobalRoute is struct ibv_global_route.
type cGlobalRoute struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	_            uint8
}

// cAHAttr is struct ibv_ah_attr.
type cAHAttr struct {
	GRH         cGlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    uint8
	PortNum     uint8
	_           uint8
}

// cQPCap is struct ibv_qp_cap.
type cQPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// cQPInitAttr is struct ibv_qp_init_attr.
type cQPInitAttr struct {
	QPContext uintptr
	SendCQ    uintptr
	RecvCQ    uintptr
	SRQ       uintptr
	Cap       cQPCap
	QPType    uint32
	SQSigAll  int32
	_         uint32
}

// cQPAttr is struct ibv_qp_attr.
type cQPAttr struct {
	QPState          uint32
	CurQPState       uint32
	PathMTU          uint32
	PathMigState     uint32
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    uint32
	Cap              cQPCap
	AHAttr           cAHAttr
	AltAHAttr        cAHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8
	MaxRDAtomic      uint8
	MaxDestRDAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	_                uint8
	RateLimit        uint32
	_                uint32 // union ibv_gid (in ah_attr) aligns the struct to 8
}

// cSRQAttr is struct ibv_srq_attr.
type cSRQAttr struct {
	MaxWR    uint32
	MaxSGE   uint32
	SRQLimit uint32
}

// cSRQInitAttr is struct ibv_srq_init_attr.
type cSRQInitAttr struct {
	SRQContext uintptr
	Attr       cSRQAttr
	_          uint32
}

// cAsyncEvent is struct ibv_async_event.
type cAsyncEvent struct {
	Element   uintptr // element.cq, .qp, .srq, .wq, or .port_num (int)
	EventType uint32
	_         uint32
}

// Offsets of the fields read from objects libibverbs allocates.
const (
	compChannelFD = 8   // struct ibv_comp_channel.fd
	cqCQE         = 28  // struct ibv_cq.cqe
	qpQPNum       = 52  // struct ibv_qp.qp_num
	qpState       = 56  // struct ibv_qp.state
	qpHandle      = 48  // struct ibv_qp.handle
	ctxCmdFD      = 264 // struct ibv_context.cmd_fd
	sizeofQPEx    = 352 // sizeof(struct ibv_qp_ex)
	sizeofCQEx    = 288 // sizeof(struct ibv_cq_ex)
	mrAddr        = 16  // struct ibv_mr.addr
	mrLKey        = 36  // struct ibv_mr.lkey
	mrRKey        = 40  // struct ibv_mr.rkey
	mwRKey        = 16  // struct ibv_mw.rkey
)
