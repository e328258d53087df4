package rdmacm

import (
	"fmt"
	"syscall"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/verbs"
)

const (
	// maxRDAtomic is the soft device's max_qp_rd_atom.
	maxRDAtomic = 128
	// localAckDelay is the soft device's local CA ACK delay (as rxe).
	localAckDelay = ibcm.SoftAckDelay
)

// CreateQP creates the id's QP (rdma_create_qp) on pd (nil: the device's
// default PD; on a soft device a PD of any context of the id's device, on
// a kernel device one of the id's own context, ID.Verbs) and takes it to
// INIT — a UD QP all the way to RTS with the
// id's Q_Key. CQs left nil in init are created, with a completion channel,
// and destroyed with the QP. Connect and Accept then move an RC QP on.
func (id *ID) CreateQP(pd *verbs.PD, init *verbs.QPInitAttr) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.destroyed {
		return ErrClosed
	}
	if id.dev == nil {
		return fmt.Errorf("rdmacm: create QP before the id has a device: %w", ErrInvalid)
	}
	if id.qp != nil {
		return fmt.Errorf("rdmacm: the id already has a QP: %w", syscall.EEXIST)
	}
	ctx := id.dev.ctx
	if pd == nil {
		var err error
		if pd, err = id.dev.defaultPD(); err != nil {
			return fmt.Errorf("rdmacm: %w", err)
		}
	}
	if pc := pd.Context(); pc != ctx {
		// A soft device is one engine however many times a process
		// opens it, so a PD of any of its contexts serves (and the CQs
		// go on the PD's context). A kernel rdma_cm id drives the QP
		// through its own ibv_context, as librdmacm's rdma_create_qp
		// does.
		switch {
		case pc.Device().Provider() != ctx.Device().Provider():
			return fmt.Errorf("rdmacm: PD of device %s for an id on %s: %w", pc.Device().Name(), ctx.Device().Name(), syscall.EINVAL)
		case id.kid != nil:
			return fmt.Errorf("rdmacm: PD of another context of %s: on a kernel device use a PD of the id's own context (ID.Verbs): %w", ctx.Device().Name(), syscall.EINVAL)
		}
		ctx = pc
	}
	a := verbs.QPInitAttr{Type: id.qpType}
	if init != nil {
		a = *init
		a.Type = id.qpType
	}
	own := false
	var cc *verbs.CompChannel
	if a.SendCQ == nil || a.RecvCQ == nil {
		var err error
		if cc, err = ctx.CreateCompChannel(); err != nil {
			return fmt.Errorf("rdmacm: %w", err)
		}
		n := int(max(a.Cap.MaxSendWR, 1))
		if a.SendCQ == nil {
			if a.SendCQ, err = ctx.CreateCQ(n, cc); err != nil {
				cc.Destroy()
				return fmt.Errorf("rdmacm: %w", err)
			}
		}
		if a.RecvCQ == nil {
			if a.RecvCQ, err = ctx.CreateCQ(int(max(a.Cap.MaxRecvWR, 1)), cc); err != nil {
				cc.Destroy()
				return fmt.Errorf("rdmacm: %w", err)
			}
		}
		own = true
	}
	qp, err := pd.CreateQP(a)
	if err != nil {
		if own {
			a.SendCQ.Destroy()
			a.RecvCQ.Destroy()
			cc.Destroy()
		}
		return fmt.Errorf("rdmacm: %w", err)
	}
	if id.kid != nil {
		err = id.kernelInitQPLocked(qp)
	} else if id.qpType == verbs.QPTypeUD {
		err = qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1, QKey: id.qkey},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey)
		if err == nil {
			err = qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR}, verbs.QPAttrState)
		}
		if err == nil {
			err = qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS}, verbs.QPAttrState|verbs.QPAttrSQPSN)
		}
	} else {
		err = qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags)
	}
	if err != nil {
		qp.Destroy()
		if own {
			a.SendCQ.Destroy()
			a.RecvCQ.Destroy()
			cc.Destroy()
		}
		return fmt.Errorf("rdmacm: %w", err)
	}
	id.qp, id.pd, id.sendCQ, id.recvCQ, id.srq, id.ownCQs, id.compCh = qp, pd, a.SendCQ, a.RecvCQ, a.SRQ, own, cc
	return nil
}

// DestroyQP destroys the id's QP (rdma_destroy_qp), and the CQs CreateQP
// made for it.
func (id *ID) DestroyQP() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.qp == nil {
		return nil
	}
	err := id.qp.Destroy()
	if id.ownCQs {
		id.sendCQ.Destroy()
		if id.recvCQ != id.sendCQ {
			id.recvCQ.Destroy()
		}
		if id.compCh != nil {
			id.compCh.Destroy()
		}
	}
	id.qp, id.sendCQ, id.recvCQ, id.compCh, id.ownCQs = nil, nil, nil, nil, false
	return err
}

// CompChannel returns the completion channel of the CQs CreateQP made.
func (id *ID) CompChannel() *verbs.CompChannel { id.mu.Lock(); defer id.mu.Unlock(); return id.compCh }

// qpErrorLocked moves the id's QP to ERR (what rdma_cm does on a REJ and
// librdmacm before a DREQ).
func (id *ID) qpErrorLocked() {
	if id.qp != nil && id.qp.State() != verbs.QPStateErr {
		_ = id.qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState)
	}
}

// access returns the access flags ib_cm gives a connected QP at INIT.
func (id *ID) access() verbs.AccessFlags {
	f := verbs.AccessRemoteWrite | verbs.AccessLocalWrite
	if id.respRes > 0 {
		f |= verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	}
	return f
}

// qpAttrs computes the attributes of docs/spec/cm-mad.md §3.7 for moving the
// id's QP to state (INIT, RTR or RTS), from the REQ and REP exchanged.
func (id *ID) qpAttrsLocked(state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	if id.kid != nil {
		return id.kernelAttrsLocked(state)
	}
	var a verbs.QPAttr
	a.State = state
	switch state {
	case verbs.QPStateInit:
		mask := verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort
		a.PortNum = 1
		if id.qpType == verbs.QPTypeUD {
			a.QKey = id.qkey
			return a, mask | verbs.QPAttrQKey, nil
		}
		a.AccessFlags = id.access()
		return a, mask | verbs.QPAttrAccessFlags, nil
	case verbs.QPStateRTR, verbs.QPStateRTS:
	default:
		return a, 0, fmt.Errorf("rdmacm: QP attributes for %v: %w", state, syscall.EINVAL)
	}
	if id.qpType == verbs.QPTypeUD {
		if state == verbs.QPStateRTS {
			return a, verbs.QPAttrState | verbs.QPAttrSQPSN, nil
		}
		return a, verbs.QPAttrState, nil
	}
	if id.conn == nil {
		return a, 0, fmt.Errorf("rdmacm: no connection yet: %w", ErrInvalid)
	}
	req, rep := mad.REQ(id.conn.REQ()), mad.REP(id.conn.REP())
	passive := id.parent != nil
	if passive && req != nil && rep == nil {
		// Before Accept (rping -q moves its own QP first, as the kernel
		// allows in REQ_RCVD): the REP's PSN is the one drawn with the
		// request, its depths those the REQ asks for.
		rep = mad.REP(mad.NewCM(mad.AttrREP, 0))
		rep.SetStartingPSN(id.psn)
		rep.SetResponderResources(min(req.InitiatorDepth(), maxRDAtomic))
		rep.SetInitiatorDepth(min(req.ResponderResources(), maxRDAtomic))
		return id.passiveAttrs(state, req, rep)
	}
	if req == nil || rep == nil {
		return a, 0, fmt.Errorf("rdmacm: the REQ and REP are not both known yet: %w", ErrInvalid)
	}
	if state == verbs.QPStateRTR {
		a.PathMTU = verbs.MTU(req.PathMTU())
		a.AH = id.ahAttrLocked()
		a.MinRNRTimer = id.minRNR
		mask := verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN
		if passive {
			a.DestQPN, a.RQPSN, a.MaxDestRDAtomic = req.LocalQPN(), rep.StartingPSN(), rep.ResponderResources()
		} else {
			a.DestQPN, a.RQPSN, a.MaxDestRDAtomic = rep.LocalQPN(), req.StartingPSN(), rep.InitiatorDepth()
		}
		if id.qpType == verbs.QPTypeRC {
			mask |= verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrMinRNRTimer
		}
		return a, mask, nil
	}
	mask := verbs.QPAttrState | verbs.QPAttrSQPSN
	a.RetryCnt = req.RetryCount()
	if passive {
		a.SQPSN, a.RNRRetry, a.MaxRDAtomic = req.StartingPSN(), req.RNRRetryCount(), rep.InitiatorDepth()
		a.Timeout = req.Primary().LocalACKTimeout()
	} else {
		a.SQPSN, a.RNRRetry, a.MaxRDAtomic = rep.StartingPSN(), rep.RNRRetryCount(), rep.ResponderResources()
		a.Timeout = ibcm.AckTimeout(rep.TargetACKDelay(), id.path.PacketLifeTime)
	}
	if id.qpType == verbs.QPTypeRC {
		mask |= verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRDAtomic
	}
	return a, mask, nil
}

// InitQPAttr returns the attributes and mask for moving a QP of this
// connection to state (rdma_init_qp_attr), for applications that manage
// their own QP.
func (id *ID) InitQPAttr(state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qpAttrsLocked(state)
}

// toRTS moves the id's QP INIT → INIT (access flags) → RTR → RTS, as
// librdmacm's ucma_modify_qp_rtr/rts do.
func (id *ID) toRTSLocked() error {
	for _, st := range []verbs.QPState{verbs.QPStateInit, verbs.QPStateRTR, verbs.QPStateRTS} {
		a, mask, err := id.qpAttrsLocked(st)
		if err != nil {
			return err
		}
		if err := id.qp.Modify(&a, mask); err != nil {
			return fmt.Errorf("rdmacm: QP to %v: %w", st, err)
		}
	}
	return nil
}

// activeRTSLocked readies the active side's QP once the REP is in.
func (id *ID) activeRTSLocked() error { return id.toRTSLocked() }

// passiveRTSLocked readies the passive side's QP before the REP is sent;
// the REP fields it needs are the ones Accept is about to send.
func (id *ID) passiveRTSLocked(req mad.REQ) error {
	rep := mad.REP(mad.NewCM(mad.AttrREP, 0))
	rep.SetStartingPSN(id.psn)
	rep.SetResponderResources(id.respRes)
	rep.SetInitiatorDepth(id.initDepth)
	for _, st := range []verbs.QPState{verbs.QPStateInit, verbs.QPStateRTR, verbs.QPStateRTS} {
		a, mask, err := id.passiveAttrs(st, req, rep)
		if err != nil {
			return err
		}
		if err := id.qp.Modify(&a, mask); err != nil {
			return fmt.Errorf("rdmacm: QP to %v: %w", st, err)
		}
	}
	return nil
}

// passiveAttrs is qpAttrsLocked with the REP given (not sent yet).
func (id *ID) passiveAttrs(st verbs.QPState, req mad.REQ, rep mad.REP) (verbs.QPAttr, verbs.QPAttrMask, error) {
	if st == verbs.QPStateInit {
		return id.qpAttrsLocked(st)
	}
	var a verbs.QPAttr
	a.State = st
	if st == verbs.QPStateRTR {
		a.PathMTU = verbs.MTU(req.PathMTU())
		a.AH = id.ahAttrLocked()
		a.MinRNRTimer = id.minRNR
		a.DestQPN, a.RQPSN, a.MaxDestRDAtomic = req.LocalQPN(), rep.StartingPSN(), rep.ResponderResources()
		mask := verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN
		if id.qpType == verbs.QPTypeRC {
			mask |= verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrMinRNRTimer
		}
		return a, mask, nil
	}
	a.SQPSN, a.RetryCnt, a.RNRRetry, a.MaxRDAtomic = req.StartingPSN(), req.RetryCount(), req.RNRRetryCount(), rep.InitiatorDepth()
	a.Timeout = req.Primary().LocalACKTimeout()
	mask := verbs.QPAttrState | verbs.QPAttrSQPSN
	if id.qpType == verbs.QPTypeRC {
		mask |= verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRDAtomic
	}
	return a, mask, nil
}
