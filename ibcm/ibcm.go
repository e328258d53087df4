// Package ibcm is the InfiniBand Communication Manager as Linux's ib_cm runs
// it over RoCE (docs/spec/cm-mad.md §3): connection setup with REQ, REP and RTU,
// rejection, MRA, teardown with DREQ and DREP, TimeWait, and service ID
// resolution (SIDR) for UD, carried in MADs over QP1.
//
// Each connection is a state machine (machine.go) written as plain code:
// it is driven by inputs — a MAD received, its timer firing, a call of its
// user — and produces outputs — MADs to send, a new state, user events,
// its next deadline. It reads no clock and touches no socket, so its
// transitions are tested exhaustively by tables and its behaviour over a
// lossy network by deterministic simulation. The Manager (manager.go) owns
// a device's connections: it matches received MADs to them by
// communication IDs exactly as Linux does (§3.2), answers what belongs to no
// connection, runs their timers on an injected clock and delivers their
// events, in order, to their handlers.
//
// Timers follow Linux (§3.6): a connection re-sends REQ, REP, DREQ or
// SIDR_REQ with timeouts taken from the fields the two sides exchanged, up
// to MaxCMRetries times, then reports an error event; an MRA stretches the
// wait; TimeWait lasts about one local ACK timeout.
package ibcm

import (
	"errors"
	"fmt"
	"time"
)

// State is a connection state; values equal Linux's enum ib_cm_state.
type State uint8

// Connection states.
const (
	StateIdle State = iota
	StateListen
	StateREQSent
	StateREQRcvd
	StateMRAREQSent
	StateMRAREQRcvd
	StateREPSent
	StateREPRcvd
	StateMRAREPSent
	StateMRAREPRcvd
	StateEstablished
	StateDREQSent
	StateDREQRcvd
	StateTimeWait
	StateSIDRREQSent
	StateSIDRREQRcvd
)

var stateNames = [...]string{"IDLE", "LISTEN", "REQ_SENT", "REQ_RCVD", "MRA_REQ_SENT", "MRA_REQ_RCVD",
	"REP_SENT", "REP_RCVD", "MRA_REP_SENT", "MRA_REP_RCVD", "ESTABLISHED", "DREQ_SENT", "DREQ_RCVD",
	"TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// EventType is a CM event; values equal Linux's enum ib_cm_event_type.
type EventType uint8

// CM events.
const (
	EventREQError EventType = iota
	EventREQReceived
	EventREPError
	EventREPReceived
	EventRTUReceived
	EventUserEstablished
	EventDREQError
	EventDREQReceived
	EventDREPReceived
	EventTimeWaitExit
	EventMRAReceived
	EventREJReceived
	EventLAPError
	EventLAPReceived
	EventAPRReceived
	EventSIDRREQError
	EventSIDRREQReceived
	EventSIDRREPReceived
)

var eventNames = [...]string{"REQ_ERROR", "REQ_RECEIVED", "REP_ERROR", "REP_RECEIVED", "RTU_RECEIVED",
	"USER_ESTABLISHED", "DREQ_ERROR", "DREQ_RECEIVED", "DREP_RECEIVED", "TIMEWAIT_EXIT", "MRA_RECEIVED",
	"REJ_RECEIVED", "LAP_ERROR", "LAP_RECEIVED", "APR_RECEIVED", "SIDR_REQ_ERROR", "SIDR_REQ_RECEIVED",
	"SIDR_REP_RECEIVED"}

func (e EventType) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("EventType(%d)", e)
}

// Linux's rdma_cm constants (§3.6).
const (
	// DefaultCMResponseTimeout is CMA_CM_RESPONSE_TIMEOUT upstream.
	DefaultCMResponseTimeout = 20
	// DefaultMaxCMRetries is CMA_MAX_CM_RETRIES.
	DefaultMaxCMRetries = 15
	// DefaultPacketLifeTime is CMA_IBOE_PACKET_LIFETIME.
	DefaultPacketLifeTime = 16
	// MRAServiceTimeout is the ServiceTimeout of every MRA Linux sends.
	MRAServiceTimeout = 24
	// SoftAckDelay is the local CA ACK delay of rxe and of the soft device.
	SoftAckDelay = 15
)

// Duration converts a 5-bit IBA time value (4.096 µs × 2^t) to the
// duration Linux's cm_convert_to_ms uses: 2^(t−8) ms, at least 1 ms.
func Duration(t uint8) time.Duration {
	return time.Duration(1<<max(int(t)-8, 0)) * time.Millisecond
}

// AckTimeout is Linux's cm_ack_timeout: the local ACK timeout of a path
// with the given packet life time, from a CA with the given ACK delay.
func AckTimeout(caAckDelay, packetLifeTime uint8) uint8 {
	t := int(packetLifeTime) + 1
	d := int(caAckDelay)
	if t >= d {
		if d >= t-1 {
			t++
		}
	} else if t >= d-1 {
		t = d + 1
	} else {
		t = d
	}
	return uint8(min(t, 31))
}

// Errors returned by the Manager and connections.
var (
	// ErrState is returned for a call the connection's state does not
	// allow (Linux's -EINVAL).
	ErrState = errors.New("ibcm: not allowed in this connection state")
	// ErrPrivateData is returned when private data exceeds the message's
	// private data area.
	ErrPrivateData = errors.New("ibcm: private data too long")
	// ErrBusy is returned by Listen for a service ID already listened on.
	ErrBusy = errors.New("ibcm: service ID already has a listener")
	// ErrClosed is returned after the Manager is closed.
	ErrClosed = errors.New("ibcm: manager closed")
	// ErrDrop, returned by a handler for REQ_RECEIVED or
	// SIDR_REQ_RECEIVED, discards the new connection without answering
	// the requester, so that its retransmission can succeed later (what
	// Linux does when a listener's backlog is full).
	ErrDrop = errors.New("ibcm: request dropped")
)
