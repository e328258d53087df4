package verbs

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdma-go/rdma-go/provider"
	"github.com/rdma-go/rdma-go/provider/soft"
)

// QPInitAttr describes a QP to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	Cap    QPCap
	// SigAll makes every send work request signaled (sq_sig_all).
	SigAll bool
	// SRQ, if set, supplies the QP's receives; Cap.MaxRecvWR is ignored.
	SRQ *SRQ
}

// QP is a queue pair (ibv_qp).
type QP struct {
	// What a post reads comes first: one or two cache lines for a QP
	// not used for a while.

	// postMu serialises PostSend with PostSend and with Destroy.
	postMu sync.Mutex
	// destroyed is set by Destroy, under mu and postMu. It is atomic
	// because PostRecv, on the hot path, reads it without a lock.
	destroyed atomic.Bool
	p         provider.QP
	init      QPInitAttr

	pd   *PD
	mu   sync.Mutex // serialises Modify, Query and Destroy
	attr QPAttr     // last attributes set by Modify
}

// softQP is a QP of the soft provider: verbs' QP and the provider's, in
// one object. A post reads both; as two objects, the second's address was
// known only once the first had come from memory (see soft.QPStorage).
type softQP struct {
	QP
	prov soft.QPStorage
}

// postBytes is how far into a soft QP's object a post reads. PostSend asks
// the CPU for all of it first thing: for a QP not used for a while (one of
// many connections), the post's code otherwise reached its lines one miss
// after another — verbs' lock, the provider's fields, the engine's lock,
// the send queue's slot.
const postBytes = unsafe.Offsetof(softQP{}.prov) + soft.QPStoragePostBytes

// plainQP is a QP of another provider, padded so that PostSend's prefetch
// of postBytes stays inside its object.
type plainQP struct {
	QP
	_ [max(0, int(postBytes)-int(unsafe.Sizeof(QP{})))]byte
}

// softQPCreator is a soft PD, which can build its QP in a softQP.
type softQPCreator interface {
	CreateQPIn(s *soft.QPStorage, init *provider.QPInitAttr, owner any) (provider.QP, error)
}

// CreateQP creates an RC, UC or UD queue pair in RESET (ibv_create_qp).
// The returned QP's Cap holds the sizes actually granted.
func (pd *PD) CreateQP(init QPInitAttr) (*QP, error) {
	c := pd.ctx
	if err := c.check(); err != nil {
		return nil, err
	}
	switch init.Type {
	case QPTypeRC, QPTypeUC, QPTypeUD:
	default:
		return nil, verrorf(ErrInvalidArgument, "QP type %s not supported", init.Type)
	}
	if init.SendCQ == nil || init.RecvCQ == nil {
		return nil, verrorf(ErrInvalidArgument, "QP needs a send CQ and a receive CQ")
	}
	if init.SendCQ.ctx != c || init.RecvCQ.ctx != c {
		return nil, verrorf(ErrInvalidArgument, "CQ belongs to another context")
	}
	cp := &init.Cap
	maxWR, maxSGE, maxInline := uint32(c.attr.MaxQPWR), uint32(c.attr.MaxSGE), uint32(c.attr.MaxInlineData)
	switch {
	case cp.MaxSendWR > maxWR || cp.MaxRecvWR > maxWR:
		return nil, verrorf(ErrInvalidArgument, "max_send_wr %d / max_recv_wr %d above the device limit %d", cp.MaxSendWR, cp.MaxRecvWR, maxWR)
	case cp.MaxSendSGE > maxSGE || cp.MaxRecvSGE > maxSGE:
		return nil, verrorf(ErrInvalidArgument, "max_send_sge %d / max_recv_sge %d above the device limit %d", cp.MaxSendSGE, cp.MaxRecvSGE, maxSGE)
	case cp.MaxInlineData > maxInline:
		return nil, verrorf(ErrInvalidArgument, "max_inline_data %d above the device limit %d", cp.MaxInlineData, maxInline)
	}
	cp.MaxSendWR = max(cp.MaxSendWR, 1)
	cp.MaxRecvWR = max(cp.MaxRecvWR, 1)
	cp.MaxSendSGE = max(cp.MaxSendSGE, 1)
	cp.MaxRecvSGE = max(cp.MaxRecvSGE, 1)
	if err := pd.use(0, 1); err != nil {
		return nil, err
	}
	if err := init.SendCQ.use(1); err != nil {
		pd.use(0, -1)
		return nil, err
	}
	if err := init.RecvCQ.use(1); err != nil {
		init.SendCQ.use(-1)
		pd.use(0, -1)
		return nil, err
	}
	pinit := provider.QPInitAttr{Type: init.Type, SendCQ: init.SendCQ.p, RecvCQ: init.RecvCQ.p, Cap: init.Cap, SigAll: init.SigAll}
	if init.SRQ != nil {
		if init.SRQ.pd.ctx != c {
			init.SendCQ.use(-1)
			init.RecvCQ.use(-1)
			pd.use(0, -1)
			return nil, verrorf(ErrInvalidArgument, "SRQ belongs to another context")
		}
		if err := init.SRQ.use(1); err != nil {
			init.SendCQ.use(-1)
			init.RecvCQ.use(-1)
			pd.use(0, -1)
			return nil, err
		}
		pinit.SRQ = init.SRQ.p
	}
	var (
		q   *QP
		p   provider.QP
		err error
	)
	if s, ok := pd.p.(softQPCreator); ok {
		o := &softQP{QP: QP{pd: pd, init: init}}
		q = &o.QP
		p, err = s.CreateQPIn(&o.prov, &pinit, q)
	} else {
		o := &plainQP{QP: QP{pd: pd, init: init}}
		q = &o.QP
		p, err = pd.p.CreateQP(&pinit, q)
	}
	if err != nil {
		init.SendCQ.use(-1)
		init.RecvCQ.use(-1)
		if init.SRQ != nil {
			init.SRQ.use(-1)
		}
		pd.use(0, -1)
		return nil, err
	}
	q.p = p
	c.track(q, true)
	return q, nil
}

// QPN returns the queue pair number (ibv_qp.qp_num).
func (qp *QP) QPN() uint32 { return qp.p.QPN() }

// Type returns the QP type.
func (qp *QP) Type() QPType { return qp.init.Type }

// State returns the current state, which the device may have moved to ERR.
func (qp *QP) State() QPState { return qp.p.State() }

// Cap returns the queue sizes granted at creation.
func (qp *QP) Cap() QPCap { return qp.init.Cap }

// Modify changes the attributes selected by mask (ibv_modify_qp), following
// libibverbs' rules for which attributes each state transition requires and
// allows. A missing or invalid attribute is an error that names it.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.destroyed.Load() {
		return verrorf(ErrClosed, "QP destroyed")
	}
	cur := qp.State()
	next, err := checkModify(qp.init.Type, cur, attr, mask, qp.pd.ctx.lim)
	if err != nil {
		return err
	}
	// The provider sees the next state and max_rd_atomic values rounded
	// as rxe rounds them: in a copy when attr has others (the copy goes
	// to the heap, so not when attr already fits).
	pa := attr
	if rd, dest := roundPow2(attr.MaxRDAtomic), roundPow2(attr.MaxDestRDAtomic); attr.State != next ||
		rd != attr.MaxRDAtomic || dest != attr.MaxDestRDAtomic {
		a := *attr
		a.State, a.MaxRDAtomic, a.MaxDestRDAtomic = next, rd, dest
		pa = &a
	}
	if err := qp.p.Modify(pa, mask); err != nil {
		return err
	}
	qp.remember(attr, mask)
	return nil
}

// roundPow2 rounds max_rd_atomic values up to a power of two, as rxe does.
func roundPow2(v uint8) uint8 {
	if v == 0 {
		return 0
	}
	p := uint8(1)
	for p < v && p < 128 {
		p <<= 1
	}
	return p
}

func (qp *QP) remember(a *QPAttr, mask QPAttrMask) {
	r := &qp.attr
	if mask&QPAttrAccessFlags != 0 {
		r.AccessFlags = a.AccessFlags
	}
	if mask&QPAttrPKeyIndex != 0 {
		r.PKeyIndex = a.PKeyIndex
	}
	if mask&QPAttrPort != 0 {
		r.PortNum = a.PortNum
	}
	if mask&QPAttrQKey != 0 {
		r.QKey = a.QKey
	}
	if mask&QPAttrAV != 0 {
		r.AH = a.AH
	}
	if mask&QPAttrPathMTU != 0 {
		r.PathMTU = a.PathMTU
	}
	if mask&QPAttrTimeout != 0 {
		r.Timeout = a.Timeout
	}
	if mask&QPAttrRetryCnt != 0 {
		r.RetryCnt = a.RetryCnt
	}
	if mask&QPAttrRNRRetry != 0 {
		r.RNRRetry = a.RNRRetry
	}
	if mask&QPAttrRQPSN != 0 {
		r.RQPSN = a.RQPSN
	}
	if mask&QPAttrSQPSN != 0 {
		r.SQPSN = a.SQPSN
	}
	if mask&QPAttrMaxQPRDAtomic != 0 {
		r.MaxRDAtomic = roundPow2(a.MaxRDAtomic)
	}
	if mask&QPAttrMaxDestRDAtomic != 0 {
		r.MaxDestRDAtomic = roundPow2(a.MaxDestRDAtomic)
	}
	if mask&QPAttrMinRNRTimer != 0 {
		r.MinRNRTimer = a.MinRNRTimer
	}
	if mask&QPAttrDestQPN != 0 {
		r.DestQPN = a.DestQPN
	}
}

// Query returns the QP's attributes and creation attributes (ibv_query_qp).
// All attributes are filled in whatever the mask; State is the current
// state, and from RTR on RQPSN and SQPSN are the live PSNs (the next
// expected and the next sent), as rxe reports them.
func (qp *QP) Query() (QPAttr, QPInitAttr, error) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.destroyed.Load() {
		return QPAttr{}, QPInitAttr{}, verrorf(ErrClosed, "QP destroyed")
	}
	a := qp.attr
	live, err := qp.p.Query()
	if err != nil {
		return QPAttr{}, QPInitAttr{}, err
	}
	a.State = live.State
	a.CurState = a.State
	a.Cap = qp.init.Cap
	if a.State >= QPStateRTR && a.State != QPStateErr {
		// As rxe reports them: the next PSN the responder expects and
		// the next the requester sends.
		a.RQPSN, a.SQPSN = live.RQPSN, live.SQPSN
	}
	return a, qp.init, nil
}

// PostSend posts a chain of send work requests (ibv_post_send). It returns
// a *PostError naming the first one refused; those before it are posted.
// Completions and errors found while executing arrive on the send CQ.
func (qp *QP) PostSend(wrs ...SendWR) error {
	// Everything the post reads, asked for at once (see postBytes).
	provider.Prefetch(unsafe.Pointer(qp), postBytes)
	qp.postMu.Lock() // also serialises the provider's PostSend (its contract)
	if qp.destroyed.Load() {
		qp.postMu.Unlock()
		return &PostError{Index: 0, Err: verrorf(ErrClosed, "QP destroyed")}
	}
	bad, badErr := len(wrs), error(nil)
	for i := range wrs {
		if w := &wrs[i]; !qp.plainSend(w) {
			if err := qp.checkSendWR(w); err != nil {
				bad, badErr = i, err
				break
			}
		}
	}
	var err error
	if bad > 0 {
		var n int
		if n, err = qp.p.PostSend(noescape(wrs[:bad])); err != nil {
			err = &PostError{Index: n, Err: err}
		}
	}
	qp.postMu.Unlock()
	if err == nil && badErr != nil {
		err = &PostError{Index: bad, Err: badErr}
	}
	return err
}

// plainSend reports whether wr is a SEND or an RDMA WRITE on a connected
// QP within the QP's limits: the common work request, which this check,
// inlined into PostSend, passes without a call to checkSendWR.
func (qp *QP) plainSend(wr *SendWR) bool {
	return (wr.Opcode == WRSend || wr.Opcode == WRRDMAWrite) && qp.init.Type != QPTypeUD &&
		len(wr.SGL) <= int(qp.init.Cap.MaxSendSGE) &&
		(wr.Flags&SendInline == 0 || provider.SGLLen(wr.SGL) <= uint64(qp.init.Cap.MaxInlineData))
}

func (qp *QP) checkSendWR(wr *SendWR) error {
	t := qp.init.Type
	bad := func() error {
		return verrorf(ErrInvalidArgument, "opcode %s not valid on a %s QP", wr.Opcode, t)
	}
	switch wr.Opcode {
	case WRSend, WRSendWithImm:
	case WRRDMAWrite, WRRDMAWriteWithImm, WRLocalInv:
		if t == QPTypeUD {
			return bad()
		}
	case WRRDMARead, WRAtomicCmpAndSwp, WRAtomicFetchAndAdd, WRSendWithInv:
		if t != QPTypeRC {
			return bad()
		}
	case WRBindMW:
		if t == QPTypeUD {
			return bad()
		}
		mw, _ := wr.BindMW.(*MW)
		if mw == nil {
			return verrorf(ErrInvalidArgument, "BIND_MW without a window")
		}
		if mw.pd != qp.pd {
			return verrorf(ErrInvalidArgument, "BIND_MW: window belongs to another PD")
		}
		if wr.BindInfo.MR != nil {
			mr, _ := wr.BindInfo.MR.(*MR)
			if mr == nil {
				return verrorf(ErrInvalidArgument, "BIND_MW: no valid MR")
			}
			if mr.pd != qp.pd {
				return verrorf(ErrInvalidArgument, "BIND_MW: MR belongs to another PD")
			}
		}
	default:
		return verrorf(ErrNotSupported, "opcode %s not supported", wr.Opcode)
	}
	if t == QPTypeUD {
		ah, _ := wr.AH.(*AH)
		if ah == nil || ah.dead.Load() {
			return verrorf(ErrInvalidArgument, "UD send without a valid address handle")
		}
		if ah.pd != qp.pd {
			return verrorf(ErrInvalidArgument, "address handle belongs to another PD")
		}
	}
	if len(wr.SGL) > int(qp.init.Cap.MaxSendSGE) {
		return verrorf(ErrInvalidArgument, "%d SGEs, QP allows %d", len(wr.SGL), qp.init.Cap.MaxSendSGE)
	}
	if wr.Flags&SendInline != 0 {
		if n := provider.SGLLen(wr.SGL); n > uint64(qp.init.Cap.MaxInlineData) {
			return verrorf(ErrInvalidArgument, "inline data of %d bytes, QP allows %d", n, qp.init.Cap.MaxInlineData)
		}
	}
	if wr.Opcode == WRAtomicCmpAndSwp || wr.Opcode == WRAtomicFetchAndAdd {
		if len(wr.SGL) != 1 || wr.SGL[0].Length != 8 {
			return verrorf(ErrInvalidArgument, "atomic needs one 8-byte SGE")
		}
	}
	return nil
}

// PostRecv posts receive work requests (ibv_post_recv).
func (qp *QP) PostRecv(wrs ...RecvWR) error {
	if qp.destroyed.Load() {
		return &PostError{Index: 0, Err: verrorf(ErrClosed, "QP destroyed")}
	}
	if qp.init.SRQ != nil {
		return &PostError{Index: 0, Err: verrorf(ErrInvalidArgument, "QP takes its receives from an SRQ: post them with SRQ.PostRecv")}
	}
	bad := len(wrs)
	for i := range wrs {
		if len(wrs[i].SGL) > int(qp.init.Cap.MaxRecvSGE) {
			bad = i
			break
		}
	}
	if bad > 0 {
		if n, err := qp.p.PostRecv(noescape(wrs[:bad])); err != nil {
			return &PostError{Index: n, Err: err}
		}
	}
	if bad < len(wrs) {
		return &PostError{Index: bad, Err: verrorf(ErrInvalidArgument, "%d SGEs, QP allows %d", len(wrs[bad].SGL), qp.init.Cap.MaxRecvSGE)}
	}
	return nil
}

// Destroy destroys the QP (ibv_destroy_qp). Outstanding work is dropped
// without completions; packets for its QPN are ignored from then on.
func (qp *QP) Destroy() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.destroyed.Load() {
		return verrorf(ErrClosed, "QP already destroyed")
	}
	qp.postMu.Lock() // a PostSend in progress finishes first
	qp.destroyed.Store(true)
	qp.postMu.Unlock()
	qp.p.Destroy()
	qp.init.SendCQ.use(-1)
	qp.init.RecvCQ.use(-1)
	if qp.init.SRQ != nil {
		qp.init.SRQ.use(-1)
	}
	qp.pd.use(0, -1)
	qp.pd.ctx.track(qp, false)
	return nil
}
