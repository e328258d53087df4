package verbs

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/internal/softdev"
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
	pd    *PD
	init  QPInitAttr
	eqp   *engine.QP
	timer *softdev.QPTimer

	mu   sync.Mutex // serialises Modify, Query and Destroy
	attr QPAttr     // last attributes set by Modify

	// postMu serialises PostSend with PostSend and with Destroy.
	postMu sync.Mutex
	// destroyed is set by Destroy, under mu and postMu. It is atomic
	// because PostRecv, on the hot path, reads it without a lock.
	destroyed atomic.Bool
}

// CreateQP creates an RC or UC queue pair in RESET (ibv_create_qp). The
// returned QP's Cap holds the sizes actually granted.
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
	switch {
	case cp.MaxSendWR > maxQPWR || cp.MaxRecvWR > maxQPWR:
		return nil, verrorf(ErrInvalidArgument, "max_send_wr %d / max_recv_wr %d above the device limit %d", cp.MaxSendWR, cp.MaxRecvWR, maxQPWR)
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
	var esrq *engine.SRQ
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
		esrq = init.SRQ.e
	}
	q := &QP{pd: pd, init: init}
	t := softdev.NewQPTimer()
	eqp, err := c.host().CreateQP(engine.QPConfig{
		Type: engine.QPType(init.Type), PD: pd.handle, SendCQ: init.SendCQ, RecvCQ: init.RecvCQ,
		MaxSendWR: int(cp.MaxSendWR), MaxRecvWR: int(cp.MaxRecvWR),
		MaxSendSGE: int(cp.MaxSendSGE), MaxRecvSGE: int(cp.MaxRecvSGE), MaxInline: int(cp.MaxInlineData),
		SigAll: init.SigAll, OnDeadline: t.Arm, SRQ: esrq, Owner: q,
	})
	if err != nil {
		init.SendCQ.use(-1)
		init.RecvCQ.use(-1)
		if init.SRQ != nil {
			init.SRQ.use(-1)
		}
		pd.use(0, -1)
		return nil, verrorf(ErrNoMemory, "create QP: %v", err)
	}
	t.Bind(eqp)
	q.eqp, q.timer = eqp, t
	return q, nil
}

// QPN returns the queue pair number (ibv_qp.qp_num).
func (qp *QP) QPN() uint32 { return qp.eqp.QPN() }

// Type returns the QP type.
func (qp *QP) Type() QPType { return qp.init.Type }

// State returns the current state, which the device may have moved to ERR.
func (qp *QP) State() QPState { return QPState(qp.eqp.State()) }

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
	c := qp.pd.ctx
	cur := qp.State()
	lim := ModifyLimits{PortCount: 1, PKeyTableLen: 1, MaxQPRDAtom: maxRDAtom, MaxQPInitRDAtom: maxRDAtom,
		GIDTableLen: gidTableLen, MaxMTU: MTU4096}
	next, err := checkModify(qp.init.Type, cur, attr, mask, lim)
	if err != nil {
		return err
	}
	var (
		ea engine.Attr
		em uint32
	)
	if mask&QPAttrAV != 0 {
		fail := func(format string, args ...any) error {
			return verrorf(ErrInvalidArgument, "modify %s QP %s→%s: AV: %s", qp.init.Type, cur, next, fmt.Sprintf(format, args...))
		}
		if attr.AH.PortNum > 1 {
			return fail("port %d is not the QP's port 1", attr.AH.PortNum)
		}
		src, why := c.sourceGIDAddr(attr.AH.GRH.SGIDIndex)
		if why != "" {
			return fail("%s", why)
		}
		dst := attr.AH.GRH.DGID.IP()
		if dst.Is4() != src.Is4() {
			return fail("destination GID %s and source %s are of different IP families", attr.AH.GRH.DGID, GIDFromIP(src))
		}
		ea.Remote, ea.FlowLabel = dst, attr.AH.GRH.FlowLabel
		em |= engine.AttrAV
	}
	if mask&QPAttrPathMTU != 0 {
		ea.PathMTU = attr.PathMTU.Bytes()
		em |= engine.AttrPathMTU
	}
	set := func(bit QPAttrMask, ebit uint32) bool {
		if mask&bit != 0 {
			em |= ebit
			return true
		}
		return false
	}
	if set(QPAttrAccessFlags, engine.AttrAccessFlags) {
		ea.AccessFlags = uint32(attr.AccessFlags)
	}
	if set(QPAttrQKey, engine.AttrQKey) {
		ea.QKey = attr.QKey
	}
	if set(QPAttrTimeout, engine.AttrTimeout) {
		ea.Timeout = attr.Timeout
	}
	if set(QPAttrRetryCnt, engine.AttrRetryCnt) {
		ea.RetryCnt = attr.RetryCnt
	}
	if set(QPAttrRNRRetry, engine.AttrRNRRetry) {
		ea.RNRRetry = attr.RNRRetry
	}
	if set(QPAttrRQPSN, engine.AttrRQPSN) {
		ea.RQPSN = attr.RQPSN
	}
	if set(QPAttrSQPSN, engine.AttrSQPSN) {
		ea.SQPSN = attr.SQPSN
	}
	if set(QPAttrMaxQPRDAtomic, engine.AttrMaxQPRDAtomic) {
		ea.MaxRDAtomic = roundPow2(attr.MaxRDAtomic)
	}
	if set(QPAttrMaxDestRDAtomic, engine.AttrMaxDestRDAtomic) {
		ea.MaxDestRDAtomic = roundPow2(attr.MaxDestRDAtomic)
	}
	if set(QPAttrMinRNRTimer, engine.AttrMinRNRTimer) {
		ea.MinRNRTimer = attr.MinRNRTimer
	}
	if set(QPAttrDestQPN, engine.AttrDestQPN) {
		ea.DestQPN = attr.DestQPN
	}
	if mask&QPAttrState != 0 {
		ea.State = engine.QPState(next)
		em |= engine.AttrState
	}
	qp.eqp.Modify(time.Now(), &ea, em)
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
	live := qp.eqp.Attr()
	a.State = QPState(live.State)
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
	qp.postMu.Lock()
	defer qp.postMu.Unlock()
	if qp.destroyed.Load() {
		return &PostError{Index: 0, Err: verrorf(ErrClosed, "QP destroyed")}
	}
	// The engine's work requests are built in a stack buffer and posted
	// postChunk at a time: nothing here keeps a pointer to the caller's
	// SGLs, so a PostSend with an SGL literal does not allocate.
	var buf [postChunk]engine.SendWR
	var avs [postChunk]engine.AV // UD address vectors, copied too
	n, first := 0, 0             // buf[:n] holds wrs[first:first+n]
	for i := range wrs {
		wr := &wrs[i]
		if err := qp.checkSendWR(wr); err != nil {
			if n > 0 {
				if err2 := qp.postEngine(buf[:n], first); err2 != nil {
					return err2
				}
			}
			return &PostError{Index: i, Err: err}
		}
		if n == postChunk {
			if err := qp.postEngine(buf[:n], first); err != nil {
				return err
			}
			n, first = 0, i
		}
		imm := wr.ImmData
		if wr.Opcode == WRSendWithInv || wr.Opcode == WRLocalInv {
			imm = wr.InvalidateRKey
		}
		buf[n] = engine.SendWR{ID: wr.ID, Op: engine.WROp(wr.Opcode), Flags: uint32(wr.Flags),
			SGL: engineSGL(wr.SGL), Imm: imm, RemoteAddr: wr.RemoteAddr, RKey: wr.RKey,
			CompareAdd: wr.CompareAdd, Swap: wr.Swap}
		if wr.AH != nil {
			// The engine copies the AV and the bind at post time.
			avs[n] = wr.AH.av
			buf[n].AV, buf[n].RemoteQPN, buf[n].RemoteQKey = &avs[n], wr.RemoteQPN, wr.RemoteQKey
		}
		if wr.Opcode == WRBindMW {
			b := &engine.Bind{MW: wr.BindMW.e, RKey: wr.BindRKey, Addr: wr.BindInfo.Addr,
				Length: wr.BindInfo.Length, Access: uint32(wr.BindInfo.Access)}
			if wr.BindInfo.MR != nil {
				b.MR = wr.BindInfo.MR.mr
			}
			buf[n].Bind = b
		}
		n++
	}
	return qp.postEngine(buf[:n], first)
}

// postEngine posts s, which holds wrs[first:first+len(s)], to the engine.
func (qp *QP) postEngine(s []engine.SendWR, first int) error {
	n, err := qp.eqp.PostSendList(time.Now(), s)
	clear(s)
	if err != nil {
		return &PostError{Index: first + n, Err: postErr(err)}
	}
	return nil
}

// postChunk is the most work requests PostSend hands the engine at once.
const postChunk = 32

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
		if wr.BindMW == nil {
			return verrorf(ErrInvalidArgument, "BIND_MW without a window")
		}
		if wr.BindMW.pd != qp.pd {
			return verrorf(ErrInvalidArgument, "BIND_MW: window belongs to another PD")
		}
		if mr := wr.BindInfo.MR; mr != nil && mr.pd != qp.pd {
			return verrorf(ErrInvalidArgument, "BIND_MW: MR belongs to another PD")
		}
	default:
		return verrorf(ErrNotSupported, "opcode %s not supported", wr.Opcode)
	}
	if t == QPTypeUD {
		if wr.AH == nil || wr.AH.dead.Load() {
			return verrorf(ErrInvalidArgument, "UD send without a valid address handle")
		}
		if wr.AH.pd != qp.pd {
			return verrorf(ErrInvalidArgument, "address handle belongs to another PD")
		}
	}
	if len(wr.SGL) > int(qp.init.Cap.MaxSendSGE) {
		return verrorf(ErrInvalidArgument, "%d SGEs, QP allows %d", len(wr.SGL), qp.init.Cap.MaxSendSGE)
	}
	if wr.Flags&SendInline != 0 {
		n := 0
		for _, s := range wr.SGL {
			n += int(s.Length)
		}
		if n > int(qp.init.Cap.MaxInlineData) {
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

func postErr(err error) error {
	switch {
	case errors.Is(err, engine.ErrQueueFull):
		return verrorf(ErrNoMemory, "%v", err)
	default:
		return verrorf(ErrInvalidArgument, "%v", err)
	}
}

// PostRecv posts receive work requests (ibv_post_recv).
func (qp *QP) PostRecv(wrs ...RecvWR) error {
	if qp.destroyed.Load() {
		return &PostError{Index: 0, Err: verrorf(ErrClosed, "QP destroyed")}
	}
	if qp.init.SRQ != nil {
		return &PostError{Index: 0, Err: verrorf(ErrInvalidArgument, "QP takes its receives from an SRQ: post them with SRQ.PostRecv")}
	}
	now := time.Now()
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGL) > int(qp.init.Cap.MaxRecvSGE) {
			return &PostError{Index: i, Err: verrorf(ErrInvalidArgument, "%d SGEs, QP allows %d", len(wr.SGL), qp.init.Cap.MaxRecvSGE)}
		}
		if err := qp.eqp.PostRecv(now, &engine.RecvWR{ID: wr.ID, SGL: engineSGL(wr.SGL)}); err != nil {
			return &PostError{Index: i, Err: postErr(err)}
		}
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
	qp.timer.Stop()
	qp.pd.ctx.host().DestroyQP(qp.eqp)
	qp.init.SendCQ.use(-1)
	qp.init.RecvCQ.use(-1)
	if qp.init.SRQ != nil {
		qp.init.SRQ.use(-1)
	}
	qp.pd.use(0, -1)
	return nil
}
