package verbs

import "github.com/rdma-go/rdma-go/engine"

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
	Sent              uint64 // sent_pkts: packets sent (a QP's: packets it built)
	Received          uint64 // rcvd_pkts: packets received (a QP's: packets that reached it)
	Duplicates        uint64 // duplicate_request: request PSN before the expected one
	DropOutOfSequence uint64 // out_of_seq_request: request PSN after the expected one
	RNRNAKsReceived   uint64 // rcvd_rnr_err
	RNRNAKsSent       uint64 // send_rnr_err: an RC request found the receive queue empty
	SeqNAKsReceived   uint64 // rcvd_seq_err
	AckDeferred       uint64 // ack_deferred: ACKs coalesced into one per received batch
	RetryExceeded     uint64 // retry_exceeded_err: a work request failed with RETRY_EXC_ERR
	RNRRetryExceeded  uint64 // retry_rnr_exceeded_err: a work request failed with RNR_RETRY_EXC_ERR
	Retries           uint64 // completer_retry_err: go-back-N retries (timeout, sequence NAK, lost response)
	SendErrors        uint64 // send_err: packets the network refused
	LinkDowned        uint64 // link_downed
	RDMASends         uint64 // rdma_sends: SENDs completed successfully
	RDMARecvs         uint64 // rdma_recvs: receives completed successfully

	ReceivedBytes uint64 // rcvd_bytes: UDP payload bytes received
	SentBytes     uint64 // sent_bytes: UDP payload bytes sent

	DropMalformed      uint64 // rcvd_malformed: not a well-formed RoCEv2 packet
	DropNotForUs       uint64 // rcvd_not_for_us: destination IP is not the device's
	DropCNP            uint64 // rcvd_cnp: congestion notifications (ignored)
	DropUnknownQP      uint64 // rcvd_unknown_qp: no QP with the destination QPN
	DropICRC           uint64 // rcvd_icrc_err: invariant CRC mismatch
	DropPKey           uint64 // rcvd_pkey_err: P_Key mismatch
	DropWrongTransport uint64 // rcvd_wrong_transport: opcode of another QP type
	DropWrongSource    uint64 // rcvd_wrong_source: RC/UC packet not from the QP's peer
	DropState          uint64 // rcvd_bad_state: the QP's state does not accept the packet

	DropDuplicate          uint64 // duplicate_request_dropped: duplicate READ/atomic with no responder resource left
	DropBadResponse        uint64 // rcvd_bad_response: response matching no outstanding request
	DropOutOfOrderResponse uint64 // rcvd_out_of_order_response
	DropStaleNAK           uint64 // rcvd_stale_nak: NAK for a PSN already acknowledged

	RequestErrors          uint64 // request_err: requests answered with a fatal NAK (the QP goes to ERR)
	InvalidRequestNAKsSent uint64 // send_inv_req_err: NAK invalid request sent
	RemoteAccessNAKsSent   uint64 // send_rem_access_err: NAK remote access error sent
	RemoteOpNAKsSent       uint64 // send_rem_op_err: NAK remote operational error sent
	SeqNAKsSent            uint64 // send_seq_err: PSN sequence error NAKs sent
	DropResponding         uint64 // rcvd_while_responding: requests dropped while a long READ was being answered (asked for again)

	InvalidRequestNAKsReceived uint64 // rcvd_inv_req_err
	RemoteAccessNAKsReceived   uint64 // rcvd_rem_access_err
	RemoteOpNAKsReceived       uint64 // rcvd_rem_op_err

	Retransmits uint64 // retransmit_timeouts: retransmission timeouts acted on
	CQOverflow  uint64 // cq_overflow: completions lost to a full CQ

	DropQKey      uint64 // rcvd_qkey_err: UD Q_Key violations
	DropNoRecv    uint64 // rcvd_rq_empty: UC/UD message dropped, no receive posted
	DropUDTooLong uint64 // send_ud_too_long: UD sends larger than the MTU, not sent
	DropUCMessage uint64 // rcvd_uc_msg_dropped: UC messages abandoned (gap, length, key)
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
	ec := engine.Counters(c)
	l := ec.List()
	out := make([]Counter, len(l))
	for i, n := range l {
		out[i] = Counter(n)
	}
	return out
}

// QueryPortCounters returns the counters of port (the soft device has one
// port, number 1).
func (c *Context) QueryPortCounters(port uint8) (Counters, error) {
	if err := c.check(); err != nil {
		return Counters{}, err
	}
	if port != 1 {
		return Counters{}, verrorf(ErrInvalidArgument, "port %d does not exist (the device has port 1)", port)
	}
	return Counters(c.host().Counters()), nil
}

// Counters returns the QP's counters. They stay readable after Destroy.
func (qp *QP) Counters() Counters { return Counters(qp.eqp.Counters()) }
