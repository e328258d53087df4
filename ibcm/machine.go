package ibcm

import (
	"encoding/binary"
	"time"

	"github.com/rdma-go/rdma-go/mad"
)

// Event is something that happened to a connection, delivered to its
// handler.
type Event struct {
	Type EventType
	// MAD is the message that caused the event (REQ, REP, RTU, MRA, REJ,
	// DREQ, DREP, SIDR_REQ, SIDR_REP); nil for timeouts, TIMEWAIT_EXIT and
	// USER_ESTABLISHED.
	MAD mad.MAD
	// From is where MAD came from.
	From mad.Address
	// Listener is the listener a REQ_RECEIVED or SIDR_REQ_RECEIVED
	// arrived through.
	Listener *Listener
}

// outMAD is a MAD a machine wants sent.
type outMAD struct {
	to mad.Address
	m  mad.MAD
}

// output collects what one input to a machine produced.
type output struct {
	sends  []outMAD
	events []Event
}

func (o *output) send(to mad.Address, m mad.MAD) { o.sends = append(o.sends, outMAD{to, m}) }
func (o *output) event(ev Event)                 { o.events = append(o.events, ev) }

// machine is one connection's protocol state (docs/spec/cm-mad.md §3.5): plain
// data changed only by its methods, which take the current time and record
// MADs to send and events to deliver in an output. Its timer is the single
// deadline field; the owner calls timer when it passes.
type machine struct {
	guid  uint64 // our CA GUID
	state State

	localID, remoteID   uint32
	remoteGUID          uint64
	localQPN, remoteQPN uint32
	serviceID           uint64
	tid                 uint64      // TID of the current exchange
	av                  mad.Address // where the connection's messages go
	passive             bool

	msg        mad.MAD // the message being retransmitted (REQ, REP, DREQ, SIDR_REQ)
	left       int     // retransmissions left for msg
	maxRetries int
	timeout    time.Duration // the connection's retransmission timeout
	wait       time.Duration // msg's current wait (timeout, or stretched by an MRA)
	deadline   time.Time     // zero: no timer
	avTimeout  uint8         // the path's ACK timeout: TimeWait and the MRA stretch

	req, rep  mad.MAD // the REQ and REP, sent or received
	rtu, drep mad.MAD // the last RTU and DREP sent, for duplicates
}

// replyTo is where a MAD answering one from a goes when it is not sent on
// the connection's own path: the packet's source, QP1 (§1.4).
func replyTo(a mad.Address) mad.Address {
	return mad.Address{Remote: a.Remote, QPN: mad.GSIQPN, TrafficClass: a.TrafficClass, FlowLabel: a.FlowLabel}
}

func (c *machine) arm(now time.Time, d time.Duration) {
	c.wait = d
	c.deadline = now.Add(d)
}

func (c *machine) stopTimer() {
	c.deadline = time.Time{}
	c.msg = nil
}

// transmit sends m on the connection's path and starts retransmitting it.
func (c *machine) transmit(now time.Time, m mad.MAD, o *output) {
	c.msg, c.left = m, c.maxRetries
	o.send(c.av, m)
	c.arm(now, c.timeout)
}

func (c *machine) enterTimeWait(now time.Time) {
	c.state = StateTimeWait
	c.msg = nil
	c.arm(now, Duration(c.avTimeout))
}

func (c *machine) ev(o *output, t EventType, m mad.MAD, from mad.Address) {
	o.event(Event{Type: t, MAD: m, From: from})
}

// connect sends the REQ (IDLE → REQ_SENT).
func (c *machine) connect(now time.Time, p *ConnectParams, tid uint64, o *output) error {
	if c.state != StateIdle {
		return ErrState
	}
	m, err := buildREQ(p, c.guid, c.localID, tid)
	if err != nil {
		return err
	}
	c.tid, c.req = tid, m
	c.serviceID, c.localQPN = p.ServiceID, p.QPN
	c.av = mad.Address{Remote: p.Path.Remote, QPN: mad.GSIQPN, TrafficClass: p.Path.TrafficClass,
		FlowLabel: p.Path.FlowLabel, HopLimit: p.Path.HopLimit}
	c.timeout = 2*Duration(p.Path.PacketLifeTime) + Duration(p.RemoteCMResponseTimeout)
	c.maxRetries = int(min(p.MaxCMRetries, 15))
	c.avTimeout = min(p.Path.PacketLifeTime+1, 31)
	c.transmit(now, m, o)
	c.state = StateREQSent
	return nil
}

// initPassive takes a new connection to the REQ it was created for
// (→ MRA_REQ_SENT: rdma_cm always arms the delayed MRA, §3.5).
func (c *machine) initPassive(m mad.MAD, from mad.Address, o *output) {
	r := mad.REQ(m)
	p := r.Primary()
	c.passive, c.req, c.tid = true, m, m.TID()
	c.remoteID, c.remoteGUID, c.remoteQPN, c.serviceID = r.LocalCommID(), r.LocalCAGUID(), r.LocalQPN(), r.ServiceID()
	hop := p.HopLimit()
	if from.HopLimit != 0 {
		hop = from.HopLimit
	}
	c.av = mad.Address{Remote: mad.GIDAddr(p.LocalGID()), QPN: mad.GSIQPN, TrafficClass: p.TrafficClass(),
		FlowLabel: p.FlowLabel(), HopLimit: hop}
	c.timeout = Duration(r.LocalCMResponseTimeout())
	c.maxRetries = int(r.MaxCMRetries())
	c.avTimeout = p.LocalACKTimeout()
	c.state = StateMRAREQSent
	c.ev(o, EventREQReceived, m, from)
}

// dupREQ answers a duplicate REQ: an MRA while the user decides.
func (c *machine) dupREQ(from mad.Address, o *output) {
	if c.state == StateMRAREQSent {
		o.send(replyTo(from), c.mra(mad.MsgREQ))
	}
}

func (c *machine) mra(msg uint8) mad.MAD {
	m := mad.NewCM(mad.AttrMRA, c.tid)
	a := mad.MRA(m)
	a.SetLocalCommID(c.localID)
	a.SetRemoteCommID(c.remoteID)
	a.SetMessageMRAed(msg)
	a.SetServiceTimeout(MRAServiceTimeout)
	return m
}

// accept sends the REP (REQ_RCVD/MRA_REQ_SENT → REP_SENT).
func (c *machine) accept(now time.Time, p *AcceptParams, o *output) error {
	if c.state != StateREQRcvd && c.state != StateMRAREQSent {
		return ErrState
	}
	m, err := buildREP(p, c.guid, c.localID, c.remoteID, c.tid)
	if err != nil {
		return err
	}
	c.localQPN, c.rep = p.QPN, m
	c.transmit(now, m, o)
	c.state = StateREPSent
	return nil
}

// onREP handles a REP whose RemoteCommID is ours.
func (c *machine) onREP(now time.Time, m mad.MAD, from mad.Address, o *output) {
	r := mad.REP(m)
	switch c.state {
	case StateREQSent, StateMRAREQRcvd:
		c.remoteID, c.remoteGUID, c.remoteQPN = r.LocalCommID(), r.LocalCAGUID(), r.LocalQPN()
		c.rep = m
		c.stopTimer()
		c.state = StateMRAREPSent // rdma_cm arms the delayed MRA
		c.ev(o, EventREPReceived, m, from)
	case StateMRAREPSent:
		if r.LocalCommID() == c.remoteID {
			o.send(replyTo(from), c.mra(mad.MsgREP))
		}
	case StateEstablished:
		if r.LocalCommID() == c.remoteID && c.rtu != nil {
			o.send(replyTo(from), c.rtu)
		}
	}
}

// sendRTU completes the active side (REP_RCVD/MRA_REP_SENT → ESTABLISHED).
func (c *machine) sendRTU(pdata []byte, o *output) error {
	if c.state != StateREPRcvd && c.state != StateMRAREPSent {
		return ErrState
	}
	m := mad.NewCM(mad.AttrRTU, c.tid)
	r := mad.RTU(m)
	if !r.SetPrivateData(pdata) {
		return ErrPrivateData
	}
	r.SetLocalCommID(c.localID)
	r.SetRemoteCommID(c.remoteID)
	c.rtu = m
	o.send(c.av, m)
	c.state = StateEstablished
	return nil
}

// onRTU completes the passive side.
func (c *machine) onRTU(m mad.MAD, from mad.Address, o *output) {
	if c.state == StateREPSent || c.state == StateMRAREPRcvd {
		c.stopTimer()
		c.state = StateEstablished
		c.ev(o, EventRTUReceived, m, from)
	}
}

// establish is the passive user's "the QP saw traffic" (ib_cm_notify).
func (c *machine) establish(o *output) error {
	switch c.state {
	case StateREPSent, StateMRAREPRcvd:
		c.stopTimer()
		c.state = StateEstablished
		c.ev(o, EventUserEstablished, nil, mad.Address{})
		return nil
	case StateEstablished:
		return nil
	}
	return ErrState
}

// onMRA stretches the wait for the answer to our REQ or REP.
func (c *machine) onMRA(now time.Time, m mad.MAD, from mad.Address, o *output) {
	a := mad.MRA(m)
	var next State
	switch {
	case c.state == StateREQSent && a.MessageMRAed() == mad.MsgREQ:
		next = StateMRAREQRcvd
	case c.state == StateREPSent && a.MessageMRAed() == mad.MsgREP:
		next = StateMRAREPRcvd
	default:
		return
	}
	c.state = next
	c.arm(now, Duration(a.ServiceTimeout())+Duration(c.avTimeout))
	c.ev(o, EventMRAReceived, m, from)
}

// reject sends a REJ (ib_send_cm_rej).
func (c *machine) reject(now time.Time, reason uint16, ari, pdata []byte, o *output) error {
	from := c.state
	switch from {
	case StateREQSent, StateMRAREQRcvd, StateREQRcvd, StateMRAREQSent, StateREPRcvd, StateMRAREPSent,
		StateREPSent, StateMRAREPRcvd:
	default:
		return ErrState
	}
	m, err := c.rej(reason, ari, pdata)
	if err != nil {
		return err
	}
	o.send(c.av, m)
	c.stopTimer()
	if from == StateREPSent || from == StateMRAREPRcvd {
		c.enterTimeWait(now)
	} else {
		c.state = StateIdle
	}
	return nil
}

// rej formats a REJ for the current state (Linux's cm_format_rej).
func (c *machine) rej(reason uint16, ari, pdata []byte) (mad.MAD, error) {
	m := mad.NewCM(mad.AttrREJ, c.tid)
	r := mad.REJ(m)
	if !r.SetPrivateData(pdata) || !r.SetARI(ari) {
		return nil, ErrPrivateData
	}
	switch c.state {
	case StateREQRcvd:
		r.SetMessageRejected(mad.MsgREQ)
	case StateMRAREQSent:
		r.SetLocalCommID(c.localID)
		r.SetMessageRejected(mad.MsgREQ)
	case StateREPRcvd, StateMRAREPSent:
		r.SetLocalCommID(c.localID)
		r.SetMessageRejected(mad.MsgREP)
	default:
		r.SetLocalCommID(c.localID)
		r.SetMessageRejected(mad.MsgOther)
	}
	r.SetRemoteCommID(c.remoteID)
	r.SetReason(reason)
	return m, nil
}

// onREJ handles a REJ matched to this connection (cm_rej_handler).
func (c *machine) onREJ(now time.Time, m mad.MAD, from mad.Address, o *output) {
	switch c.state {
	case StateREQSent, StateMRAREQRcvd, StateREPSent, StateMRAREPRcvd, StateREQRcvd, StateMRAREQSent:
		c.stopTimer()
		if mad.REJ(m).Reason() == mad.RejStaleConn {
			c.enterTimeWait(now)
		} else {
			c.state = StateIdle
		}
	case StateDREQSent, StateREPRcvd, StateMRAREPSent, StateEstablished:
		c.stopTimer()
		c.enterTimeWait(now)
	default:
		return
	}
	c.ev(o, EventREJReceived, m, from)
}

// disconnect sends a DREQ (ESTABLISHED → DREQ_SENT).
func (c *machine) disconnect(now time.Time, tid uint64, pdata []byte, o *output) error {
	if c.state != StateEstablished {
		return ErrState
	}
	m, err := c.dreq(tid, pdata)
	if err != nil {
		return err
	}
	c.transmit(now, m, o)
	c.state = StateDREQSent
	return nil
}

func (c *machine) dreq(tid uint64, pdata []byte) (mad.MAD, error) {
	m := mad.NewCM(mad.AttrDREQ, tid)
	d := mad.DREQ(m)
	if !d.SetPrivateData(pdata) {
		return nil, ErrPrivateData
	}
	d.SetLocalCommID(c.localID)
	d.SetRemoteCommID(c.remoteID)
	d.SetRemoteQPN(c.remoteQPN)
	return m, nil
}

// onDREQ handles a DREQ matched by both comm IDs (cm_dreq_handler).
func (c *machine) onDREQ(now time.Time, m mad.MAD, from mad.Address, o *output) {
	if mad.DREQ(m).RemoteQPN() != c.localQPN {
		return // Linux ignores a DREQ naming another QP
	}
	switch c.state {
	case StateREPSent, StateDREQSent, StateMRAREPRcvd:
		c.stopTimer()
	case StateEstablished:
	case StateTimeWait:
		d := c.drep
		if d == nil {
			d = c.newDREP(m.TID(), nil)
		}
		o.send(replyTo(from), d)
		return
	default:
		return
	}
	c.state = StateDREQRcvd
	c.tid = m.TID()
	c.ev(o, EventDREQReceived, m, from)
}

func (c *machine) newDREP(tid uint64, pdata []byte) mad.MAD {
	m := mad.NewCM(mad.AttrDREP, tid)
	d := mad.DREP(m)
	d.SetPrivateData(pdata)
	d.SetLocalCommID(c.localID)
	d.SetRemoteCommID(c.remoteID)
	return m
}

// sendDREP answers the DREQ (DREQ_RCVD → TIMEWAIT).
func (c *machine) sendDREP(now time.Time, pdata []byte, o *output) error {
	if c.state != StateDREQRcvd {
		return ErrState
	}
	if len(pdata) > mad.DREPPrivateDataLen {
		return ErrPrivateData
	}
	c.drep = c.newDREP(c.tid, pdata)
	o.send(c.av, c.drep)
	c.enterTimeWait(now)
	return nil
}

// onDREP completes a disconnect (cm_drep_handler).
func (c *machine) onDREP(now time.Time, m mad.MAD, from mad.Address, o *output) {
	if c.state != StateDREQSent && c.state != StateDREQRcvd {
		return
	}
	c.stopTimer()
	c.enterTimeWait(now)
	c.ev(o, EventDREPReceived, m, from)
}

// sidrRequest sends a SIDR_REQ (IDLE → SIDR_REQ_SENT).
func (c *machine) sidrRequest(now time.Time, p *SIDRParams, tid uint64, o *output) error {
	if c.state != StateIdle {
		return ErrState
	}
	m := mad.NewCM(mad.AttrSIDRREQ, tid)
	s := mad.SIDRREQ(m)
	if !s.SetPrivateData(p.PrivateData) {
		return ErrPrivateData
	}
	s.SetRequestID(c.localID)
	s.SetPartitionKey(mad.GSIPKey)
	s.SetServiceID(p.ServiceID)
	c.tid, c.serviceID, c.req = tid, p.ServiceID, m
	c.av = mad.Address{Remote: p.To, QPN: mad.GSIQPN, TrafficClass: p.TrafficClass, FlowLabel: p.FlowLabel, HopLimit: p.HopLimit}
	c.timeout = Duration(p.Timeout)
	c.maxRetries = int(min(p.MaxCMRetries, 15))
	c.transmit(now, m, o)
	c.state = StateSIDRREQSent
	return nil
}

// onSIDRREP completes a SIDR request.
func (c *machine) onSIDRREP(m mad.MAD, from mad.Address, o *output) {
	if c.state != StateSIDRREQSent {
		return
	}
	c.stopTimer()
	c.state = StateIdle
	c.rep = m
	c.ev(o, EventSIDRREPReceived, m, from)
}

// initSIDR takes a new passive connection to the SIDR_REQ it was created
// for.
func (c *machine) initSIDR(m mad.MAD, from mad.Address, o *output) {
	s := mad.SIDRREQ(m)
	c.passive, c.req, c.tid = true, m, m.TID()
	c.remoteID, c.serviceID = s.RequestID(), s.ServiceID()
	c.av = replyTo(from)
	c.state = StateSIDRREQRcvd
	c.ev(o, EventSIDRREQReceived, m, from)
}

// sidrReply sends the SIDR_REP (SIDR_REQ_RCVD → IDLE).
func (c *machine) sidrReply(r *SIDRReply, o *output) error {
	if c.state != StateSIDRREQRcvd {
		return ErrState
	}
	m := mad.NewCM(mad.AttrSIDRREP, c.tid)
	s := mad.SIDRREP(m)
	if !s.SetPrivateData(r.PrivateData) || !s.SetAdditionalInfo(r.Info) {
		return ErrPrivateData
	}
	s.SetRequestID(c.remoteID)
	s.SetStatus(r.Status)
	s.SetQPN(r.QPN)
	s.SetServiceID(c.serviceID)
	s.SetQKey(r.QKey)
	c.rep = m
	o.send(c.av, m)
	c.state = StateIdle
	return nil
}

// timer runs an expired deadline: a retransmission, or the error that ends
// the exchange, or the end of TimeWait.
func (c *machine) timer(now time.Time, o *output) {
	if c.deadline.IsZero() || now.Before(c.deadline) {
		return
	}
	c.deadline = time.Time{}
	switch c.state {
	case StateREQSent, StateMRAREQRcvd, StateREPSent, StateMRAREPRcvd, StateDREQSent, StateSIDRREQSent:
		if c.left > 0 && c.msg != nil {
			c.left--
			o.send(c.av, c.msg)
			c.arm(now, c.wait)
			return
		}
		c.msg = nil
		switch c.state {
		case StateREQSent, StateMRAREQRcvd:
			c.state = StateIdle
			c.ev(o, EventREQError, nil, mad.Address{})
		case StateREPSent, StateMRAREPRcvd:
			c.state = StateIdle
			c.ev(o, EventREPError, nil, mad.Address{})
		case StateDREQSent:
			c.enterTimeWait(now)
			c.ev(o, EventDREQError, nil, mad.Address{})
		case StateSIDRREQSent:
			c.state = StateIdle
			c.ev(o, EventSIDRREQError, nil, mad.Address{})
		}
	case StateTimeWait:
		c.state = StateIdle
		c.ev(o, EventTimeWaitExit, nil, mad.Address{})
	}
}

// destroy is what Linux's cm_destroy_id sends and does in each state.
func (c *machine) destroy(now time.Time, tid uint64, o *output) {
	switch c.state {
	case StateSIDRREQSent:
		c.stopTimer()
		c.state = StateIdle
	case StateSIDRREQRcvd:
		_ = c.sidrReply(&SIDRReply{Status: mad.SIDRReject}, o)
	case StateREQSent, StateMRAREQRcvd:
		var guid [8]byte
		binary.BigEndian.PutUint64(guid[:], c.guid)
		_ = c.reject(now, mad.RejTimeout, guid[:], nil, o)
	case StateREQRcvd, StateMRAREQSent, StateREPRcvd, StateMRAREPSent, StateREPSent, StateMRAREPRcvd:
		_ = c.reject(now, mad.RejConsumerDefined, nil, nil, o)
	case StateEstablished:
		if m, err := c.dreq(tid, nil); err == nil {
			o.send(c.av, m)
		}
		c.enterTimeWait(now)
	case StateDREQSent:
		c.stopTimer()
		c.enterTimeWait(now)
	case StateDREQRcvd:
		_ = c.sendDREP(now, nil, o)
	}
}
