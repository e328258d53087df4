package provider

import (
	"strconv"
	"strings"
)

// enumFlagName names one bit of a flag set.
type enumFlagName struct {
	bit  uint64
	name string
}

// enumFormatFlags renders v as NAME|NAME|0x<rest>, listing known bits in table
// order and any unknown remainder in hex. Zero renders as "0".
func enumFormatFlags(v uint64, names []enumFlagName) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	for _, f := range names {
		if v&f.bit == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(f.name)
		v &^= f.bit
	}
	if v != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x")
		b.WriteString(strconv.FormatUint(v, 16))
	}
	return b.String()
}

// enumUnknownName renders a value with no name as Type(n).
func enumUnknownName(typ string, v int64) string {
	return typ + "(" + strconv.FormatInt(v, 10) + ")"
}

// ---------------------------------------------------------------------------
// Work completions

// WCStatus is the status of a work completion (enum ibv_wc_status).
type WCStatus uint32

// Work completion status values.
const (
	WCSuccess          WCStatus = 0  // IBV_WC_SUCCESS
	WCLocLenErr        WCStatus = 1  // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr       WCStatus = 2  // IBV_WC_LOC_QP_OP_ERR
	WCLocEECOpErr      WCStatus = 3  // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr       WCStatus = 4  // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr       WCStatus = 5  // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr        WCStatus = 6  // IBV_WC_MW_BIND_ERR
	WCBadRespErr       WCStatus = 7  // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr     WCStatus = 8  // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr     WCStatus = 9  // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr     WCStatus = 10 // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr         WCStatus = 11 // IBV_WC_REM_OP_ERR
	WCRetryExcErr      WCStatus = 12 // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr   WCStatus = 13 // IBV_WC_RNR_RETRY_EXC_ERR
	WCLocRDDViolErr    WCStatus = 14 // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr   WCStatus = 15 // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr      WCStatus = 16 // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr       WCStatus = 17 // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr   WCStatus = 18 // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr         WCStatus = 19 // IBV_WC_FATAL_ERR
	WCRespTimeoutErr   WCStatus = 20 // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr       WCStatus = 21 // IBV_WC_GENERAL_ERR
	WCTMErr            WCStatus = 22 // IBV_WC_TM_ERR
	WCTMRndvIncomplete WCStatus = 23 // IBV_WC_TM_RNDV_INCOMPLETE
)

var wcStatusText = [...]string{
	WCSuccess:          "success",
	WCLocLenErr:        "local length error",
	WCLocQPOpErr:       "local QP operation error",
	WCLocEECOpErr:      "local EE context operation error",
	WCLocProtErr:       "local protection error",
	WCWRFlushErr:       "Work Request Flushed Error",
	WCMWBindErr:        "memory management operation error",
	WCBadRespErr:       "bad response error",
	WCLocAccessErr:     "local access error",
	WCRemInvReqErr:     "remote invalid request error",
	WCRemAccessErr:     "remote access error",
	WCRemOpErr:         "remote operation error",
	WCRetryExcErr:      "transport retry counter exceeded",
	WCRNRRetryExcErr:   "RNR retry counter exceeded",
	WCLocRDDViolErr:    "local RDD violation error",
	WCRemInvRDReqErr:   "remote invalid RD request",
	WCRemAbortErr:      "aborted error",
	WCInvEECNErr:       "invalid EE context number",
	WCInvEECStateErr:   "invalid EE context state",
	WCFatalErr:         "fatal error",
	WCRespTimeoutErr:   "response timeout error",
	WCGeneralErr:       "general error",
	WCTMErr:            "TM error",
	WCTMRndvIncomplete: "TM software rendezvous",
}

// String returns the phrase ibv_wc_status_str prints, e.g. "success" or
// "Work Request Flushed Error"; values it does not know give "unknown".
func (s WCStatus) String() string {
	if int(s) < len(wcStatusText) {
		return wcStatusText[s]
	}
	return "unknown"
}

// WCOpcode is the operation a work completion reports (enum ibv_wc_opcode).
// Receive completions have bit 7 set.
type WCOpcode uint32

// Work completion opcodes.
const (
	WCSend            WCOpcode = 0   // IBV_WC_SEND
	WCRDMAWrite       WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3   // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // IBV_WC_FETCH_ADD
	WCBindMW          WCOpcode = 5   // IBV_WC_BIND_MW
	WCLocalInv        WCOpcode = 6   // IBV_WC_LOCAL_INV
	WCTSO             WCOpcode = 7   // IBV_WC_TSO
	WCFlush           WCOpcode = 8   // IBV_WC_FLUSH
	WCAtomicWrite     WCOpcode = 9   // IBV_WC_ATOMIC_WRITE
	WCRecv            WCOpcode = 128 // IBV_WC_RECV
	WCRecvRDMAWithImm WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM
)

// String returns the opcode name without the IBV_WC_ prefix, e.g. "SEND" or
// "RECV_RDMA_WITH_IMM".
func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCTSO:
		return "TSO"
	case WCFlush:
		return "FLUSH"
	case WCAtomicWrite:
		return "ATOMIC_WRITE"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return enumUnknownName("WCOpcode", int64(o))
}

// IsRecv reports whether the opcode belongs to a receive completion.
func (o WCOpcode) IsRecv() bool { return o&0x80 != 0 }

// WCFlags are the wc_flags of a work completion.
type WCFlags uint32

// Work completion flags.
const (
	WCFlagGRH      WCFlags = 1 // IBV_WC_GRH: the buffer starts with a 40-byte GRH
	WCFlagWithImm  WCFlags = 2 // IBV_WC_WITH_IMM: ImmData is valid
	WCFlagIPCsumOK WCFlags = 4 // IBV_WC_IP_CSUM_OK
	WCFlagWithInv  WCFlags = 8 // IBV_WC_WITH_INV: InvalidatedRKey is valid
)

var wcFlagNames = []enumFlagName{
	{uint64(WCFlagGRH), "GRH"},
	{uint64(WCFlagWithImm), "WITH_IMM"},
	{uint64(WCFlagIPCsumOK), "IP_CSUM_OK"},
	{uint64(WCFlagWithInv), "WITH_INV"},
}

// String lists the set flags, e.g. "GRH|WITH_IMM"; zero gives "0".
func (f WCFlags) String() string { return enumFormatFlags(uint64(f), wcFlagNames) }

// ---------------------------------------------------------------------------
// Work requests

// WROpcode is the operation of a send work request (enum ibv_wr_opcode).
type WROpcode uint32

// Send work request opcodes.
const (
	WRRDMAWrite         WROpcode = 0  // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm  WROpcode = 1  // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend              WROpcode = 2  // IBV_WR_SEND
	WRSendWithImm       WROpcode = 3  // IBV_WR_SEND_WITH_IMM
	WRRDMARead          WROpcode = 4  // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp   WROpcode = 5  // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAndAdd WROpcode = 6  // IBV_WR_ATOMIC_FETCH_AND_ADD
	WRLocalInv          WROpcode = 7  // IBV_WR_LOCAL_INV
	WRBindMW            WROpcode = 8  // IBV_WR_BIND_MW
	WRSendWithInv       WROpcode = 9  // IBV_WR_SEND_WITH_INV
	WRTSO               WROpcode = 10 // IBV_WR_TSO
	WRDriver1           WROpcode = 11 // IBV_WR_DRIVER1
	WRFlush             WROpcode = 14 // IBV_WR_FLUSH
	WRAtomicWrite       WROpcode = 15 // IBV_WR_ATOMIC_WRITE
)

// String returns the opcode name without the IBV_WR_ prefix, e.g.
// "RDMA_WRITE_WITH_IMM".
func (o WROpcode) String() string {
	switch o {
	case WRRDMAWrite:
		return "RDMA_WRITE"
	case WRRDMAWriteWithImm:
		return "RDMA_WRITE_WITH_IMM"
	case WRSend:
		return "SEND"
	case WRSendWithImm:
		return "SEND_WITH_IMM"
	case WRRDMARead:
		return "RDMA_READ"
	case WRAtomicCmpAndSwp:
		return "ATOMIC_CMP_AND_SWP"
	case WRAtomicFetchAndAdd:
		return "ATOMIC_FETCH_AND_ADD"
	case WRLocalInv:
		return "LOCAL_INV"
	case WRBindMW:
		return "BIND_MW"
	case WRSendWithInv:
		return "SEND_WITH_INV"
	case WRTSO:
		return "TSO"
	case WRDriver1:
		return "DRIVER1"
	case WRFlush:
		return "FLUSH"
	case WRAtomicWrite:
		return "ATOMIC_WRITE"
	}
	return enumUnknownName("WROpcode", int64(o))
}

// SendFlags are the send_flags of a send work request (enum ibv_send_flags).
type SendFlags uint32

// Send work request flags.
const (
	SendFence     SendFlags = 1  // IBV_SEND_FENCE
	SendSignaled  SendFlags = 2  // IBV_SEND_SIGNALED
	SendSolicited SendFlags = 4  // IBV_SEND_SOLICITED
	SendInline    SendFlags = 8  // IBV_SEND_INLINE
	SendIPCsum    SendFlags = 16 // IBV_SEND_IP_CSUM
)

var sendFlagNames = []enumFlagName{
	{uint64(SendFence), "FENCE"},
	{uint64(SendSignaled), "SIGNALED"},
	{uint64(SendSolicited), "SOLICITED"},
	{uint64(SendInline), "INLINE"},
	{uint64(SendIPCsum), "IP_CSUM"},
}

// String lists the set flags, e.g. "SIGNALED|INLINE"; zero gives "0".
func (f SendFlags) String() string { return enumFormatFlags(uint64(f), sendFlagNames) }

// ---------------------------------------------------------------------------
// Access flags

// AccessFlags are memory region, memory window and QP access rights
// (enum ibv_access_flags).
type AccessFlags uint32

// Access flags.
const (
	AccessLocalWrite      AccessFlags = 1       // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite     AccessFlags = 2       // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead      AccessFlags = 4       // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic    AccessFlags = 8       // IBV_ACCESS_REMOTE_ATOMIC
	AccessMWBind          AccessFlags = 16      // IBV_ACCESS_MW_BIND
	AccessZeroBased       AccessFlags = 32      // IBV_ACCESS_ZERO_BASED
	AccessOnDemand        AccessFlags = 64      // IBV_ACCESS_ON_DEMAND
	AccessHugeTLB         AccessFlags = 128     // IBV_ACCESS_HUGETLB
	AccessFlushGlobal     AccessFlags = 256     // IBV_ACCESS_FLUSH_GLOBAL
	AccessFlushPersistent AccessFlags = 512     // IBV_ACCESS_FLUSH_PERSISTENT
	AccessRelaxedOrdering AccessFlags = 1 << 20 // IBV_ACCESS_RELAXED_ORDERING (first optional bit)
)

// QPAccessMask holds the access flags that a QP's ACCESS_FLAGS attribute may
// carry.
const QPAccessMask = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead |
	AccessRemoteAtomic | AccessMWBind

var accessFlagNames = []enumFlagName{
	{uint64(AccessLocalWrite), "LOCAL_WRITE"},
	{uint64(AccessRemoteWrite), "REMOTE_WRITE"},
	{uint64(AccessRemoteRead), "REMOTE_READ"},
	{uint64(AccessRemoteAtomic), "REMOTE_ATOMIC"},
	{uint64(AccessMWBind), "MW_BIND"},
	{uint64(AccessZeroBased), "ZERO_BASED"},
	{uint64(AccessOnDemand), "ON_DEMAND"},
	{uint64(AccessHugeTLB), "HUGETLB"},
	{uint64(AccessFlushGlobal), "FLUSH_GLOBAL"},
	{uint64(AccessFlushPersistent), "FLUSH_PERSISTENT"},
	{uint64(AccessRelaxedOrdering), "RELAXED_ORDERING"},
}

// String lists the set flags, e.g. "LOCAL_WRITE|REMOTE_READ"; zero gives "0".
func (f AccessFlags) String() string { return enumFormatFlags(uint64(f), accessFlagNames) }

// ---------------------------------------------------------------------------
// Queue pairs

// QPState is a queue pair state (enum ibv_qp_state).
type QPState uint32

// Queue pair states.
const (
	QPStateReset   QPState = 0 // IBV_QPS_RESET
	QPStateInit    QPState = 1 // IBV_QPS_INIT
	QPStateRTR     QPState = 2 // IBV_QPS_RTR: ready to receive
	QPStateRTS     QPState = 3 // IBV_QPS_RTS: ready to send
	QPStateSQD     QPState = 4 // IBV_QPS_SQD: send queue drained
	QPStateSQE     QPState = 5 // IBV_QPS_SQE: send queue error
	QPStateErr     QPState = 6 // IBV_QPS_ERR
	QPStateUnknown QPState = 7 // IBV_QPS_UNKNOWN
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"}

// String returns the state name, e.g. "RTS".
func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return enumUnknownName("QPState", int64(s))
}

// QPType is a queue pair transport type (enum ibv_qp_type).
type QPType uint32

// Queue pair types. The soft RoCE device implements RC, UC and UD.
const (
	QPTypeRC        QPType = 2  // IBV_QPT_RC: reliable connection
	QPTypeUC        QPType = 3  // IBV_QPT_UC: unreliable connection
	QPTypeUD        QPType = 4  // IBV_QPT_UD: unreliable datagram
	QPTypeRawPacket QPType = 8  // IBV_QPT_RAW_PACKET
	QPTypeXRCSend   QPType = 9  // IBV_QPT_XRC_SEND
	QPTypeXRCRecv   QPType = 10 // IBV_QPT_XRC_RECV
)

// String returns the type name, e.g. "RC".
func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	case QPTypeRawPacket:
		return "RAW_PACKET"
	case QPTypeXRCSend:
		return "XRC_SEND"
	case QPTypeXRCRecv:
		return "XRC_RECV"
	}
	return enumUnknownName("QPType", int64(t))
}

// Path migration states (enum ibv_mig_state), the values of
// QPAttr.PathMigState.
const (
	PathMigMigrated uint8 = 0 // IBV_MIG_MIGRATED
	PathMigRearm    uint8 = 1 // IBV_MIG_REARM
	PathMigArmed    uint8 = 2 // IBV_MIG_ARMED
)

// MTU is a path MTU code (enum ibv_mtu); the size in bytes is 1 << (code+7).
type MTU uint32

// Path MTU codes.
const (
	MTU256  MTU = 1 // IBV_MTU_256
	MTU512  MTU = 2 // IBV_MTU_512
	MTU1024 MTU = 3 // IBV_MTU_1024
	MTU2048 MTU = 4 // IBV_MTU_2048
	MTU4096 MTU = 5 // IBV_MTU_4096
)

// Valid reports whether m is one of MTU256..MTU4096.
func (m MTU) Valid() bool { return m >= MTU256 && m <= MTU4096 }

// Bytes returns the MTU in bytes (256..4096), or 0 for an invalid code.
func (m MTU) Bytes() int {
	if !m.Valid() {
		return 0
	}
	return 1 << (m + 7)
}

// MTUFromBytes returns the code for an exact MTU size of 256, 512, 1024, 2048
// or 4096 bytes; ok is false for any other size.
func MTUFromBytes(n int) (m MTU, ok bool) {
	for m = MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m, true
		}
	}
	return 0, false
}

// MTUFloor returns the largest MTU code whose size is at most n bytes (as
// for deriving a port's active MTU from a link MTU); ok is false when n is
// below 256.
func MTUFloor(n int) (m MTU, ok bool) {
	for m = MTU4096; m >= MTU256; m-- {
		if m.Bytes() <= n {
			return m, true
		}
	}
	return 0, false
}

// String returns the size in bytes, e.g. "1024", as ibv_devinfo prints it.
func (m MTU) String() string {
	if !m.Valid() {
		return enumUnknownName("MTU", int64(m))
	}
	return strconv.Itoa(m.Bytes())
}

// QPAttrMask selects the QPAttr fields a modify or query uses
// (enum ibv_qp_attr_mask).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0  // IBV_QP_STATE
	QPAttrCurState         QPAttrMask = 1 << 1  // IBV_QP_CUR_STATE
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2  // IBV_QP_EN_SQD_ASYNC_NOTIFY
	QPAttrAccessFlags      QPAttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS
	QPAttrPKeyIndex        QPAttrMask = 1 << 4  // IBV_QP_PKEY_INDEX
	QPAttrPort             QPAttrMask = 1 << 5  // IBV_QP_PORT
	QPAttrQKey             QPAttrMask = 1 << 6  // IBV_QP_QKEY
	QPAttrAV               QPAttrMask = 1 << 7  // IBV_QP_AV
	QPAttrPathMTU          QPAttrMask = 1 << 8  // IBV_QP_PATH_MTU
	QPAttrTimeout          QPAttrMask = 1 << 9  // IBV_QP_TIMEOUT
	QPAttrRetryCnt         QPAttrMask = 1 << 10 // IBV_QP_RETRY_CNT
	QPAttrRNRRetry         QPAttrMask = 1 << 11 // IBV_QP_RNR_RETRY
	QPAttrRQPSN            QPAttrMask = 1 << 12 // IBV_QP_RQ_PSN
	QPAttrMaxQPRDAtomic    QPAttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC
	QPAttrAltPath          QPAttrMask = 1 << 14 // IBV_QP_ALT_PATH
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER
	QPAttrSQPSN            QPAttrMask = 1 << 16 // IBV_QP_SQ_PSN
	QPAttrMaxDestRDAtomic  QPAttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC
	QPAttrPathMigState     QPAttrMask = 1 << 18 // IBV_QP_PATH_MIG_STATE
	QPAttrCap              QPAttrMask = 1 << 19 // IBV_QP_CAP
	QPAttrDestQPN          QPAttrMask = 1 << 20 // IBV_QP_DEST_QPN
	QPAttrRateLimit        QPAttrMask = 1 << 25 // IBV_QP_RATE_LIMIT
)

// QPAttrAll is the union of every defined QP attribute mask bit.
const QPAttrAll = QPAttrState | QPAttrCurState | QPAttrEnSQDAsyncNotify |
	QPAttrAccessFlags | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey | QPAttrAV |
	QPAttrPathMTU | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry |
	QPAttrRQPSN | QPAttrMaxQPRDAtomic | QPAttrAltPath | QPAttrMinRNRTimer |
	QPAttrSQPSN | QPAttrMaxDestRDAtomic | QPAttrPathMigState | QPAttrCap |
	QPAttrDestQPN | QPAttrRateLimit

var qpAttrMaskNames = []enumFlagName{
	{uint64(QPAttrState), "STATE"},
	{uint64(QPAttrCurState), "CUR_STATE"},
	{uint64(QPAttrEnSQDAsyncNotify), "EN_SQD_ASYNC_NOTIFY"},
	{uint64(QPAttrAccessFlags), "ACCESS_FLAGS"},
	{uint64(QPAttrPKeyIndex), "PKEY_INDEX"},
	{uint64(QPAttrPort), "PORT"},
	{uint64(QPAttrQKey), "QKEY"},
	{uint64(QPAttrAV), "AV"},
	{uint64(QPAttrPathMTU), "PATH_MTU"},
	{uint64(QPAttrTimeout), "TIMEOUT"},
	{uint64(QPAttrRetryCnt), "RETRY_CNT"},
	{uint64(QPAttrRNRRetry), "RNR_RETRY"},
	{uint64(QPAttrRQPSN), "RQ_PSN"},
	{uint64(QPAttrMaxQPRDAtomic), "MAX_QP_RD_ATOMIC"},
	{uint64(QPAttrAltPath), "ALT_PATH"},
	{uint64(QPAttrMinRNRTimer), "MIN_RNR_TIMER"},
	{uint64(QPAttrSQPSN), "SQ_PSN"},
	{uint64(QPAttrMaxDestRDAtomic), "MAX_DEST_RD_ATOMIC"},
	{uint64(QPAttrPathMigState), "PATH_MIG_STATE"},
	{uint64(QPAttrCap), "CAP"},
	{uint64(QPAttrDestQPN), "DEST_QPN"},
	{uint64(QPAttrRateLimit), "RATE_LIMIT"},
}

// String lists the set bits by their IBV_QP_ names without the prefix, in bit
// order, e.g. "STATE|ACCESS_FLAGS|PKEY_INDEX|PORT"; zero gives "0".
func (m QPAttrMask) String() string { return enumFormatFlags(uint64(m), qpAttrMaskNames) }

// ---------------------------------------------------------------------------
// Ports and devices

// PortState is the logical state of a port (enum ibv_port_state).
type PortState uint32

// Port states.
const (
	PortNOP         PortState = 0 // IBV_PORT_NOP
	PortDown        PortState = 1 // IBV_PORT_DOWN
	PortInit        PortState = 2 // IBV_PORT_INIT
	PortArmed       PortState = 3 // IBV_PORT_ARMED
	PortActive      PortState = 4 // IBV_PORT_ACTIVE
	PortActiveDefer PortState = 5 // IBV_PORT_ACTIVE_DEFER
)

var portStateNames = [...]string{
	"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER",
}

// String returns the name ibv_devinfo prints, e.g. "PORT_ACTIVE".
func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return enumUnknownName("PortState", int64(s))
}

// LinkLayer is the link layer of a port.
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0 // IBV_LINK_LAYER_UNSPECIFIED
	LinkLayerInfiniBand  LinkLayer = 1 // IBV_LINK_LAYER_INFINIBAND
	LinkLayerEthernet    LinkLayer = 2 // IBV_LINK_LAYER_ETHERNET
)

// String returns the name ibv_devinfo prints: "Unspecified", "InfiniBand",
// "Ethernet", or "Unknown".
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified:
		return "Unspecified"
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// NodeType is the kind of RDMA node (enum ibv_node_type). A RoCE device is a
// channel adapter (NodeCA).
type NodeType int32

// Node types.
const (
	NodeUnknown     NodeType = -1 // IBV_NODE_UNKNOWN
	NodeCA          NodeType = 1  // IBV_NODE_CA
	NodeSwitch      NodeType = 2  // IBV_NODE_SWITCH
	NodeRouter      NodeType = 3  // IBV_NODE_ROUTER
	NodeRNIC        NodeType = 4  // IBV_NODE_RNIC
	NodeUSNIC       NodeType = 5  // IBV_NODE_USNIC
	NodeUSNICUDP    NodeType = 6  // IBV_NODE_USNIC_UDP
	NodeUnspecified NodeType = 7  // IBV_NODE_UNSPECIFIED
)

// String returns the phrase ibv_node_type_str prints, e.g. "InfiniBand
// channel adapter"; other values give "unknown".
func (n NodeType) String() string {
	switch n {
	case NodeCA:
		return "InfiniBand channel adapter"
	case NodeSwitch:
		return "InfiniBand switch"
	case NodeRouter:
		return "InfiniBand router"
	case NodeRNIC:
		return "iWARP NIC"
	case NodeUSNIC:
		return "usNIC"
	case NodeUSNICUDP:
		return "usNIC UDP"
	}
	return "unknown"
}

// TransportType is the transport of a device (enum ibv_transport_type). A
// RoCE device, rxe included, reports TransportIB.
type TransportType int32

// Transport types.
const (
	TransportUnknown     TransportType = -1 // IBV_TRANSPORT_UNKNOWN
	TransportIB          TransportType = 0  // IBV_TRANSPORT_IB
	TransportIWARP       TransportType = 1  // IBV_TRANSPORT_IWARP
	TransportUSNIC       TransportType = 2  // IBV_TRANSPORT_USNIC
	TransportUSNICUDP    TransportType = 3  // IBV_TRANSPORT_USNIC_UDP
	TransportUnspecified TransportType = 4  // IBV_TRANSPORT_UNSPECIFIED
)

// String returns the name ibv_devinfo prints: "InfiniBand", "iWARP",
// "usNIC", "usNIC UDP", "unspecified", or "invalid transport".
func (t TransportType) String() string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	case TransportUnspecified:
		return "unspecified"
	}
	return "invalid transport"
}

// AtomicCap is the atomic-operation guarantee of a device (enum
// ibv_atomic_cap).
type AtomicCap uint32

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0 // IBV_ATOMIC_NONE: no atomics
	AtomicHCA  AtomicCap = 1 // IBV_ATOMIC_HCA: atomic among this device's QPs
	AtomicGlob AtomicCap = 2 // IBV_ATOMIC_GLOB: atomic with CPU and other devices
)

// String returns the name ibv_devinfo prints, e.g. "ATOMIC_HCA".
func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return enumUnknownName("AtomicCap", int64(a))
}

// GIDType is the type of a GID table entry (enum ibv_gid_type).
type GIDType uint32

// GID types.
const (
	GIDTypeIB     GIDType = 0 // IBV_GID_TYPE_IB
	GIDTypeRoCEv1 GIDType = 1 // IBV_GID_TYPE_ROCE_V1
	GIDTypeRoCEv2 GIDType = 2 // IBV_GID_TYPE_ROCE_V2
)

// String returns "IB", "RoCE v1" or "RoCE v2" (the suffix ibv_devinfo
// prints after a GID).
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return enumUnknownName("GIDType", int64(t))
}

// DeviceCapFlags are device capability flags (enum ibv_device_cap_flags,
// with the bits above 31 that only device_cap_flags_ex carries).
type DeviceCapFlags uint64

// Device capability flags.
const (
	DeviceCapResizeMaxWR         DeviceCapFlags = 1 << 0  // IBV_DEVICE_RESIZE_MAX_WR
	DeviceCapBadPKeyCntr         DeviceCapFlags = 1 << 1  // IBV_DEVICE_BAD_PKEY_CNTR
	DeviceCapBadQKeyCntr         DeviceCapFlags = 1 << 2  // IBV_DEVICE_BAD_QKEY_CNTR
	DeviceCapRawMulti            DeviceCapFlags = 1 << 3  // IBV_DEVICE_RAW_MULTI
	DeviceCapAutoPathMig         DeviceCapFlags = 1 << 4  // IBV_DEVICE_AUTO_PATH_MIG
	DeviceCapChangePhyPort       DeviceCapFlags = 1 << 5  // IBV_DEVICE_CHANGE_PHY_PORT
	DeviceCapUDAVPortEnforce     DeviceCapFlags = 1 << 6  // IBV_DEVICE_UD_AV_PORT_ENFORCE
	DeviceCapCurrQPStateMod      DeviceCapFlags = 1 << 7  // IBV_DEVICE_CURR_QP_STATE_MOD
	DeviceCapShutdownPort        DeviceCapFlags = 1 << 8  // IBV_DEVICE_SHUTDOWN_PORT
	DeviceCapInitType            DeviceCapFlags = 1 << 9  // IBV_DEVICE_INIT_TYPE
	DeviceCapPortActiveEvent     DeviceCapFlags = 1 << 10 // IBV_DEVICE_PORT_ACTIVE_EVENT
	DeviceCapSysImageGUID        DeviceCapFlags = 1 << 11 // IBV_DEVICE_SYS_IMAGE_GUID
	DeviceCapRCRNRNAKGen         DeviceCapFlags = 1 << 12 // IBV_DEVICE_RC_RNR_NAK_GEN
	DeviceCapSRQResize           DeviceCapFlags = 1 << 13 // IBV_DEVICE_SRQ_RESIZE
	DeviceCapNNotifyCQ           DeviceCapFlags = 1 << 14 // IBV_DEVICE_N_NOTIFY_CQ
	DeviceCapMemWindow           DeviceCapFlags = 1 << 17 // IBV_DEVICE_MEM_WINDOW
	DeviceCapUDIPCsum            DeviceCapFlags = 1 << 18 // IBV_DEVICE_UD_IP_CSUM
	DeviceCapXRC                 DeviceCapFlags = 1 << 20 // IBV_DEVICE_XRC
	DeviceCapMemMgtExtensions    DeviceCapFlags = 1 << 21 // IBV_DEVICE_MEM_MGT_EXTENSIONS
	DeviceCapMemWindowType2A     DeviceCapFlags = 1 << 23 // IBV_DEVICE_MEM_WINDOW_TYPE_2A
	DeviceCapMemWindowType2B     DeviceCapFlags = 1 << 24 // IBV_DEVICE_MEM_WINDOW_TYPE_2B
	DeviceCapRCIPCsum            DeviceCapFlags = 1 << 25 // IBV_DEVICE_RC_IP_CSUM
	DeviceCapRawIPCsum           DeviceCapFlags = 1 << 26 // IBV_DEVICE_RAW_IP_CSUM
	DeviceCapManagedFlowSteering DeviceCapFlags = 1 << 29 // IBV_DEVICE_MANAGED_FLOW_STEERING
	DeviceCapRawScatterFCS       DeviceCapFlags = 1 << 34 // IB_UVERBS_DEVICE_RAW_SCATTER_FCS (ex only)
	DeviceCapPCIWriteEndPadding  DeviceCapFlags = 1 << 36 // IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING (ex only)
	DeviceCapCCDMABounce         DeviceCapFlags = 1 << 41 // IB_UVERBS_DEVICE_CC_DMA_BOUNCE (ex only)
)

// deviceCapNames is in the order ibv_devinfo prints the flags.
var deviceCapNames = []enumFlagName{
	{uint64(DeviceCapResizeMaxWR), "RESIZE_MAX_WR"},
	{uint64(DeviceCapBadPKeyCntr), "BAD_PKEY_CNTR"},
	{uint64(DeviceCapBadQKeyCntr), "BAD_QKEY_CNTR"},
	{uint64(DeviceCapRawMulti), "RAW_MULTI"},
	{uint64(DeviceCapAutoPathMig), "AUTO_PATH_MIG"},
	{uint64(DeviceCapChangePhyPort), "CHANGE_PHY_PORT"},
	{uint64(DeviceCapUDAVPortEnforce), "UD_AV_PORT_ENFORCE"},
	{uint64(DeviceCapCurrQPStateMod), "CURR_QP_STATE_MOD"},
	{uint64(DeviceCapShutdownPort), "SHUTDOWN_PORT"},
	{uint64(DeviceCapInitType), "INIT_TYPE"},
	{uint64(DeviceCapPortActiveEvent), "PORT_ACTIVE_EVENT"},
	{uint64(DeviceCapSysImageGUID), "SYS_IMAGE_GUID"},
	{uint64(DeviceCapRCRNRNAKGen), "RC_RNR_NAK_GEN"},
	{uint64(DeviceCapSRQResize), "SRQ_RESIZE"},
	{uint64(DeviceCapNNotifyCQ), "N_NOTIFY_CQ"},
	{uint64(DeviceCapMemWindow), "MEM_WINDOW"},
	{uint64(DeviceCapUDIPCsum), "UD_IP_CSUM"},
	{uint64(DeviceCapXRC), "XRC"},
	{uint64(DeviceCapMemMgtExtensions), "MEM_MGT_EXTENSIONS"},
	{uint64(DeviceCapMemWindowType2A), "MEM_WINDOW_TYPE_2A"},
	{uint64(DeviceCapMemWindowType2B), "MEM_WINDOW_TYPE_2B"},
	{uint64(DeviceCapRCIPCsum), "RC_IP_CSUM"},
	{uint64(DeviceCapRawIPCsum), "RAW_IP_CSUM"},
	{uint64(DeviceCapManagedFlowSteering), "MANAGED_FLOW_STEERING"},
	{uint64(DeviceCapRawScatterFCS), "RAW_SCATTER_FCS"},
	{uint64(DeviceCapPCIWriteEndPadding), "PCI_WRITE_END_PADDING"},
	{uint64(DeviceCapCCDMABounce), "CC_DMA_BOUNCE"},
}

// Names returns the names of the known set flags in ibv_devinfo order (e.g.
// "BAD_PKEY_CNTR") and the remaining unknown bits.
func (f DeviceCapFlags) Names() (names []string, unknown DeviceCapFlags) {
	for _, n := range deviceCapNames {
		if uint64(f)&n.bit != 0 {
			names = append(names, n.name)
			f &^= DeviceCapFlags(n.bit)
		}
	}
	return names, f
}

// String lists the set flags, e.g. "BAD_PKEY_CNTR|MEM_WINDOW"; zero gives
// "0".
func (f DeviceCapFlags) String() string { return enumFormatFlags(uint64(f), deviceCapNames) }

// ---------------------------------------------------------------------------
// Asynchronous events

// EventType is the type of an asynchronous event (enum ibv_event_type).
type EventType uint32

// Asynchronous event types.
const (
	EventCQErr             EventType = 0  // IBV_EVENT_CQ_ERR
	EventQPFatal           EventType = 1  // IBV_EVENT_QP_FATAL
	EventQPReqErr          EventType = 2  // IBV_EVENT_QP_REQ_ERR
	EventQPAccessErr       EventType = 3  // IBV_EVENT_QP_ACCESS_ERR
	EventCommEst           EventType = 4  // IBV_EVENT_COMM_EST
	EventSQDrained         EventType = 5  // IBV_EVENT_SQ_DRAINED
	EventPathMig           EventType = 6  // IBV_EVENT_PATH_MIG
	EventPathMigErr        EventType = 7  // IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal       EventType = 8  // IBV_EVENT_DEVICE_FATAL
	EventPortActive        EventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventPortErr           EventType = 10 // IBV_EVENT_PORT_ERR
	EventLIDChange         EventType = 11 // IBV_EVENT_LID_CHANGE
	EventPKeyChange        EventType = 12 // IBV_EVENT_PKEY_CHANGE
	EventSMChange          EventType = 13 // IBV_EVENT_SM_CHANGE
	EventSRQErr            EventType = 14 // IBV_EVENT_SRQ_ERR
	EventSRQLimitReached   EventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached  EventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED
	EventClientReregister  EventType = 17 // IBV_EVENT_CLIENT_REREGISTER
	EventGIDChange         EventType = 18 // IBV_EVENT_GID_CHANGE
	EventWQFatal           EventType = 19 // IBV_EVENT_WQ_FATAL
	EventDeviceSpeedChange EventType = 20 // IBV_EVENT_DEVICE_SPEED_CHANGE
)

const (
	eventTypeCount         = 21             // number of defined event types
	eventTypeLastDescribed = EventGIDChange // last value ibv_event_type_str describes
)

var eventTypeText = [...]string{
	EventCQErr:            "CQ error",
	EventQPFatal:          "local work queue catastrophic error",
	EventQPReqErr:         "invalid request local work queue error",
	EventQPAccessErr:      "local access violation work queue error",
	EventCommEst:          "communication established",
	EventSQDrained:        "send queue drained",
	EventPathMig:          "path migrated",
	EventPathMigErr:       "path migration request error",
	EventDeviceFatal:      "local catastrophic error",
	EventPortActive:       "port active",
	EventPortErr:          "port error",
	EventLIDChange:        "LID change",
	EventPKeyChange:       "P_Key change",
	EventSMChange:         "SM change",
	EventSRQErr:           "SRQ catastrophic error",
	EventSRQLimitReached:  "SRQ limit reached",
	EventQPLastWQEReached: "last WQE reached",
	EventClientReregister: "client reregistration",
	EventGIDChange:        "GID table change",
}

var eventTypeNames = [eventTypeCount]string{
	"IBV_EVENT_CQ_ERR", "IBV_EVENT_QP_FATAL", "IBV_EVENT_QP_REQ_ERR",
	"IBV_EVENT_QP_ACCESS_ERR", "IBV_EVENT_COMM_EST", "IBV_EVENT_SQ_DRAINED",
	"IBV_EVENT_PATH_MIG", "IBV_EVENT_PATH_MIG_ERR", "IBV_EVENT_DEVICE_FATAL",
	"IBV_EVENT_PORT_ACTIVE", "IBV_EVENT_PORT_ERR", "IBV_EVENT_LID_CHANGE",
	"IBV_EVENT_PKEY_CHANGE", "IBV_EVENT_SM_CHANGE", "IBV_EVENT_SRQ_ERR",
	"IBV_EVENT_SRQ_LIMIT_REACHED", "IBV_EVENT_QP_LAST_WQE_REACHED",
	"IBV_EVENT_CLIENT_REREGISTER", "IBV_EVENT_GID_CHANGE", "IBV_EVENT_WQ_FATAL",
	"IBV_EVENT_DEVICE_SPEED_CHANGE",
}

// String returns the phrase ibv_event_type_str prints, e.g. "local work
// queue catastrophic error". Like libibverbs it gives "unknown" for every
// value after EventGIDChange (EventWQFatal and EventDeviceSpeedChange
// included); Name always identifies the value.
func (e EventType) String() string {
	if e <= eventTypeLastDescribed {
		return eventTypeText[e]
	}
	return "unknown"
}

// Name returns the C enumerator name, e.g. "IBV_EVENT_QP_FATAL".
func (e EventType) Name() string {
	if int(e) < len(eventTypeNames) {
		return eventTypeNames[e]
	}
	return enumUnknownName("EventType", int64(e))
}
