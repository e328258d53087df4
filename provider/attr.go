package provider

import (
	"reflect"
	"sync"
	"unsafe"
)

// GRHLen is the size of the area at the start of every UD receive buffer
// that receives the network header (the GRH): the IPv6 header, or for IPv4
// 20 zero bytes and the IPv4 header. The message follows it.
const GRHLen = 40

// DeviceAttr holds device attributes (struct ibv_device_attr).
type DeviceAttr struct {
	FWVer                 string
	NodeGUID              uint64
	SysImageGUID          uint64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 int
	MaxQPWR               int
	DeviceCapFlags        DeviceCapFlags
	MaxSGE                int
	MaxSGERD              int
	MaxCQ                 int
	MaxCQE                int
	MaxMR                 int
	MaxPD                 int
	MaxQPRDAtom           int
	MaxEERDAtom           int
	MaxResRDAtom          int
	MaxQPInitRDAtom       int
	MaxEEInitRDAtom       int
	AtomicCap             AtomicCap
	MaxEE                 int
	MaxRDD                int
	MaxMW                 int
	MaxRawIPv6QP          int
	MaxRawEthyQP          int
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxAH                 int
	MaxFMR                int
	MaxMapPerFMR          int
	MaxSRQ                int
	MaxSRQWR              int
	MaxSRQSGE             int
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
	MaxInlineData         int // largest max_inline_data a QP may ask for
	NumCompVectors        int
}

// PortAttr holds port attributes (struct ibv_port_attr).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTblLen     int
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
	LinkLayer     LinkLayer
	Flags         uint8
	PortCapFlags2 uint16
}

// SRQAttr holds shared receive queue attributes (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR    uint32
	MaxSGE   uint32
	SRQLimit uint32
}

// SRQAttrMask selects SRQ attributes to modify (enum ibv_srq_attr_mask).
type SRQAttrMask uint32

// SRQ attribute mask bits.
const (
	SRQMaxWR SRQAttrMask = 1 << 0
	SRQLimit SRQAttrMask = 1 << 1
)

// MWType is a memory window type (enum ibv_mw_type).
type MWType uint32

// Memory window types.
const (
	MWType1 MWType = 1 // bound with QP.BindMW, invalidated by rebinding
	MWType2 MWType = 2 // bound with a WRBindMW work request, invalidated by LOCAL_INV or SEND_WITH_INV
)

// MWBindInfo says what a window exposes (struct ibv_mw_bind_info): a range
// of an MR registered with AccessMWBind, and the remote access allowed.
// A zero Length unbinds the window.
type MWBindInfo struct {
	MR     MRHandle // a verbs *MR
	Addr   uint64
	Length uint64
	Access AccessFlags
}

// Counters are a port's or a QP's counters, what Linux exposes as rxe's hw
// counters (rdma statistic, /sys/class/infiniband/rxe0/ports/1/hw_counters)
// plus the soft device's own: one for every reason a packet is dropped and
// every error the responder answers with. A QP's Counters count what
// concerned it; those no QP can be named for (malformed packets, unknown
// QPNs, ICRC errors, bytes, send errors, link failures) are 0 there.
//
// The first fifteen fields are rxe's, in rxe's order; List gives every
// counter with its rxe (or rxe-style) name.
type Counters struct {
	Sent              uint64 `rxe:"sent_pkts"`
	Received          uint64 `rxe:"rcvd_pkts"`
	Duplicates        uint64 `rxe:"duplicate_request"`
	DropOutOfSequence uint64 `rxe:"out_of_seq_request"`
	RNRNAKsReceived   uint64 `rxe:"rcvd_rnr_err"`
	RNRNAKsSent       uint64 `rxe:"send_rnr_err"`
	SeqNAKsReceived   uint64 `rxe:"rcvd_seq_err"`
	AckDeferred       uint64 `rxe:"ack_deferred"`
	RetryExceeded     uint64 `rxe:"retry_exceeded_err"`
	RNRRetryExceeded  uint64 `rxe:"retry_rnr_exceeded_err"`
	Retries           uint64 `rxe:"completer_retry_err"`
	SendErrors        uint64 `rxe:"send_err"`
	LinkDowned        uint64 `rxe:"link_downed"`
	RDMASends         uint64 `rxe:"rdma_sends"`
	RDMARecvs         uint64 `rxe:"rdma_recvs"`

	ReceivedBytes uint64 `rxe:"rcvd_bytes"`
	SentBytes     uint64 `rxe:"sent_bytes"`

	DropMalformed      uint64 `rxe:"rcvd_malformed"`
	DropNotForUs       uint64 `rxe:"rcvd_not_for_us"`
	DropCNP            uint64 `rxe:"rcvd_cnp"`
	DropUnknownQP      uint64 `rxe:"rcvd_unknown_qp"`
	DropICRC           uint64 `rxe:"rcvd_icrc_err"`
	DropPKey           uint64 `rxe:"rcvd_pkey_err"`
	DropWrongTransport uint64 `rxe:"rcvd_wrong_transport"`
	DropWrongSource    uint64 `rxe:"rcvd_wrong_source"`
	DropState          uint64 `rxe:"rcvd_bad_state"`

	DropDuplicate          uint64 `rxe:"duplicate_request_dropped"`
	DropBadResponse        uint64 `rxe:"rcvd_bad_response"`
	DropOutOfOrderResponse uint64 `rxe:"rcvd_out_of_order_response"`
	DropStaleNAK           uint64 `rxe:"rcvd_stale_nak"`

	RequestErrors          uint64 `rxe:"request_err"`
	InvalidRequestNAKsSent uint64 `rxe:"send_inv_req_err"`
	RemoteAccessNAKsSent   uint64 `rxe:"send_rem_access_err"`
	RemoteOpNAKsSent       uint64 `rxe:"send_rem_op_err"`
	SeqNAKsSent            uint64 `rxe:"send_seq_err"`
	DropResponding         uint64 `rxe:"rcvd_while_responding"`

	InvalidRequestNAKsReceived uint64 `rxe:"rcvd_inv_req_err"`
	RemoteAccessNAKsReceived   uint64 `rxe:"rcvd_rem_access_err"`
	RemoteOpNAKsReceived       uint64 `rxe:"rcvd_rem_op_err"`

	Retransmits uint64 `rxe:"retransmit_timeouts"`
	CQOverflow  uint64 `rxe:"cq_overflow"`

	DropQKey      uint64 `rxe:"rcvd_qkey_err"`
	DropNoRecv    uint64 `rxe:"rcvd_rq_empty"`
	DropUDTooLong uint64 `rxe:"send_ud_too_long"`
	DropUCMessage uint64 `rxe:"rcvd_uc_msg_dropped"`
}

// Counter is one counter with its name.
type Counter struct {
	Name  string
	Value uint64
}

// List returns every counter with its name: rxe's hw counters in rxe's
// order (sent_pkts, rcvd_pkts, duplicate_request, ...), then the soft
// device's own, in the order of the fields.
func (c Counters) List() []Counter {
	names := counterNames()
	v := (*[unsafe.Sizeof(Counters{}) / 8]uint64)(unsafe.Pointer(&c))
	out := make([]Counter, len(names))
	for i, n := range names {
		out[i] = Counter{Name: n, Value: v[i]}
	}
	return out
}

var counterNames = sync.OnceValue(func() []string {
	t := reflect.TypeFor[Counters]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Tag.Get("rxe")
	}
	return names
})
