package engine

import (
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Counters is a snapshot of a Stats, of a device or of one QP: the same
// counters, field for field, as plain numbers. The first fifteen are Linux
// rxe's hw counters (drivers/infiniband/sw/rxe/rxe_hw_counters.c), in rxe's
// order; their rxe names are in the fields' rxe tags and List prints them.
// See Stats for what each counts.
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

// RxeCounters is how many of Counters' fields, from the first, are Linux
// rxe's own hw counters; the names of the others follow rxe's style.
const RxeCounters = 15

// numCounters is the number of counters in a Stats (and a Counters).
const numCounters = int(unsafe.Sizeof(Stats{}) / unsafe.Sizeof(atomic.Uint64{}))

// Snapshot returns the counters' current values.
func (s *Stats) Snapshot() (c Counters) {
	src := (*[numCounters]atomic.Uint64)(unsafe.Pointer(s))
	dst := (*[numCounters]uint64)(unsafe.Pointer(&c))
	for i := range src {
		dst[i] = src[i].Load()
	}
	return c
}

// NamedCounter is one counter of a Counters with its rxe-style name.
type NamedCounter struct {
	Name  string
	Value uint64
}

// List returns the counters with their names: rxe's hw counters in rxe's
// order (sent_pkts, rcvd_pkts, duplicate_request, ...), then the engine's
// own.
func (c *Counters) List() []NamedCounter {
	names := CounterNames()
	v := (*[numCounters]uint64)(unsafe.Pointer(c))
	out := make([]NamedCounter, len(names))
	for i, n := range names {
		out[i] = NamedCounter{Name: n, Value: v[i]}
	}
	return out
}

// CounterNames returns the rxe-style names of Counters' fields, in order.
var CounterNames = sync.OnceValue(func() []string {
	t := reflect.TypeFor[Counters]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Tag.Get("rxe")
	}
	return names
})

// count adds one to the device counter c, a field of qp.host.stats, and to
// the same counter of qp's own Stats.
func (qp *QP) count(c *atomic.Uint64) {
	c.Add(1)
	off := uintptr(unsafe.Pointer(c)) - uintptr(unsafe.Pointer(&qp.host.stats))
	if off >= unsafe.Sizeof(Stats{}) {
		panic("engine: QP.count of a counter outside the host's Stats")
	}
	(*atomic.Uint64)(unsafe.Add(unsafe.Pointer(&qp.stats), off)).Add(1)
}

// Counters returns a snapshot of the QP's own counters: what the device
// counted for packets, requests and completions of this QP. Counters of
// the device alone (malformed packets, unknown QPNs, ICRC errors, bytes,
// send errors, link failures) stay 0.
func (qp *QP) Counters() Counters {
	c := qp.stats.Snapshot()
	qp.mu.Lock()
	c.Sent, c.Received = qp.sent, qp.received
	c.RDMASends, c.RDMARecvs, c.AckDeferred = qp.sends, qp.recvs, qp.acksDeferred
	qp.mu.Unlock()
	return c
}

// countOwn adds one to the device counter c, a field of qp.host.stats, and
// to *own, the same counter of qp kept as a plain field under qp.mu next to
// what changes with it: the counters most messages move (RDMASends,
// RDMARecvs, AckDeferred) then cost a post or a packet no cache line of
// their own.
func (qp *QP) countOwn(c *atomic.Uint64, own *uint64) {
	c.Add(1)
	*own++
}
