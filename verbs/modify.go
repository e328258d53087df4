package verbs

import "fmt"

// ModifyLimits are the device and port limits a QP modify is checked
// against.
type ModifyLimits struct {
	// PortCount is the number of ports; valid port numbers are 1..PortCount.
	PortCount uint8
	// PKeyTableLen is the P_Key table length; valid indexes are below it.
	PKeyTableLen uint16
	// MaxQPRDAtom bounds MAX_DEST_RD_ATOMIC (max_qp_rd_atom: reads and
	// atomics a QP handles as responder).
	MaxQPRDAtom uint8
	// MaxQPInitRDAtom bounds MAX_QP_RD_ATOMIC (max_qp_init_rd_atom: reads
	// and atomics a QP may have outstanding as initiator).
	MaxQPInitRDAtom uint8
	// GIDTableLen is the GID table length; an AV's SGIDIndex must be below it.
	GIDTableLen int
	// MaxMTU is the port's max_mtu, bounding PATH_MTU; zero means MTU4096.
	MaxMTU MTU
}

// qpModifyRule is what one QP type needs for one state transition: the
// attributes it must supply and the ones it may supply besides STATE.
type qpModifyRule struct {
	req, opt QPAttrMask
}

// qpTransitionRules holds the rule of one transition for each QP type.
type qpTransitionRules struct {
	rc, uc, ud qpModifyRule
}

// qpStateEdge is a (current, next) state pair.
type qpStateEdge struct {
	from, to QPState
}

// qpTransitions is the table of legal state transitions for RC, UC and UD
// QPs, with the required and optional attributes of each, as the Linux
// kernel's ib_modify_qp_is_ok enforces them. A pair that is absent is an
// invalid transition for every type; a present pair with empty rules allows
// STATE alone. RESET→ERR is deliberately absent (the kernel rejects it).
var qpTransitions = func() map[qpStateEdge]qpTransitionRules {
	const (
		curState  = QPAttrCurState
		sqdNotify = QPAttrEnSQDAsyncNotify
		access    = QPAttrAccessFlags
		pkey      = QPAttrPKeyIndex
		port      = QPAttrPort
		qkey      = QPAttrQKey
		av        = QPAttrAV
		mtu       = QPAttrPathMTU
		timeout   = QPAttrTimeout
		retry     = QPAttrRetryCnt
		rnrRetry  = QPAttrRNRRetry
		rqPSN     = QPAttrRQPSN
		rdAtomic  = QPAttrMaxQPRDAtomic
		altPath   = QPAttrAltPath
		rnrTimer  = QPAttrMinRNRTimer
		sqPSN     = QPAttrSQPSN
		destRD    = QPAttrMaxDestRDAtomic
		migState  = QPAttrPathMigState
		destQPN   = QPAttrDestQPN
	)
	const (
		reset = QPStateReset
		initS = QPStateInit
		rtr   = QPStateRTR
		rts   = QPStateRTS
		sqd   = QPStateSQD
		sqe   = QPStateSQE
		errS  = QPStateErr
	)
	same := func(r qpModifyRule) qpTransitionRules { return qpTransitionRules{r, r, r} }
	t := map[qpStateEdge]qpTransitionRules{
		{reset, reset}: {},
		{reset, initS}: {
			rc: qpModifyRule{req: pkey | port | access},
			uc: qpModifyRule{req: pkey | port | access},
			ud: qpModifyRule{req: pkey | port | qkey},
		},
		{initS, initS}: {
			rc: qpModifyRule{opt: pkey | port | access},
			uc: qpModifyRule{opt: pkey | port | access},
			ud: qpModifyRule{opt: pkey | port | qkey},
		},
		{initS, rtr}: {
			rc: qpModifyRule{
				req: av | mtu | destQPN | rqPSN | destRD | rnrTimer,
				opt: altPath | access | pkey,
			},
			uc: qpModifyRule{
				req: av | mtu | destQPN | rqPSN,
				opt: altPath | access | pkey,
			},
			ud: qpModifyRule{opt: pkey | qkey},
		},
		{rtr, rts}: {
			rc: qpModifyRule{
				req: timeout | retry | rnrRetry | sqPSN | rdAtomic,
				opt: curState | altPath | access | rnrTimer | migState,
			},
			uc: qpModifyRule{req: sqPSN, opt: curState | altPath | access | migState},
			ud: qpModifyRule{req: sqPSN, opt: curState | qkey},
		},
		{rts, rts}: {
			rc: qpModifyRule{opt: curState | access | altPath | migState | rnrTimer},
			uc: qpModifyRule{opt: curState | access | altPath | migState},
			ud: qpModifyRule{opt: curState | qkey},
		},
		{rts, sqd}: same(qpModifyRule{opt: sqdNotify}),
		{sqd, rts}: {
			rc: qpModifyRule{opt: curState | altPath | access | rnrTimer | migState},
			uc: qpModifyRule{opt: curState | altPath | access | migState},
			ud: qpModifyRule{opt: curState | qkey},
		},
		{sqd, sqd}: {
			rc: qpModifyRule{opt: port | av | timeout | retry | rnrRetry | rdAtomic |
				destRD | altPath | access | pkey | rnrTimer | migState},
			uc: qpModifyRule{opt: av | altPath | access | pkey | migState},
			ud: qpModifyRule{opt: pkey | qkey},
		},
		{sqe, rts}: {
			uc: qpModifyRule{opt: curState | access},
			ud: qpModifyRule{opt: curState | qkey},
		},
	}
	// Every state but RESET may go to ERR, and every state may go to RESET,
	// with STATE alone.
	for _, s := range []QPState{initS, rtr, rts, sqd, sqe, errS} {
		t[qpStateEdge{s, reset}] = qpTransitionRules{}
		t[qpStateEdge{s, errS}] = qpTransitionRules{}
	}
	return t
}()

// qpTransitionRule returns the rule for moving a QP of type t from one state
// to another; ok is false when the transition is invalid or the type is not
// RC, UC or UD.
func qpTransitionRule(t QPType, from, to QPState) (r qpModifyRule, ok bool) {
	rules, ok := qpTransitions[qpStateEdge{from, to}]
	if !ok {
		return qpModifyRule{}, false
	}
	switch t {
	case QPTypeRC:
		return rules.rc, true
	case QPTypeUC:
		return rules.uc, true
	case QPTypeUD:
		return rules.ud, true
	}
	return qpModifyRule{}, false
}

// checkModify validates a modify of a QP of type t that is in state cur,
// with the attributes of attr selected by mask, and returns the state the
// QP moves to (cur itself when mask lacks STATE). It applies the kernel's
// transition table (required and optional attributes per QP type and state
// pair; anything else in mask is refused), then checks every selected value
// against lim and the RoCE rules. On failure it returns cur and an error
// wrapping ErrInvalidArgument that names the offending attribute, e.g.
// "verbs: modify RC QP INIT→RTR: missing required attribute(s)
// PATH_MTU|DEST_QPN: invalid argument".
func checkModify(t QPType, cur QPState, attr *QPAttr, mask QPAttrMask, lim ModifyLimits) (next QPState, err error) {
	next = cur
	if attr != nil && mask&QPAttrState != 0 {
		next = attr.State
	}
	fail := func(format string, args ...any) (QPState, error) {
		return cur, verrorf(ErrInvalidArgument, "modify %s QP %s→%s: %s",
			t, cur, next, fmt.Sprintf(format, args...))
	}
	switch t {
	case QPTypeRC, QPTypeUC, QPTypeUD:
	default:
		return fail("unsupported QP type")
	}
	if attr == nil {
		if mask != 0 {
			return fail("no attributes given for mask %s", mask)
		}
		attr = &QPAttr{}
	}
	if unknown := mask &^ QPAttrAll; unknown != 0 {
		return fail("unknown attribute mask bit(s) %#x", uint32(unknown))
	}
	if next > QPStateErr {
		return fail("invalid target state")
	}
	rule, ok := qpTransitionRule(t, cur, next)
	if !ok {
		return fail("invalid state transition")
	}
	if missing := rule.req &^ mask; missing != 0 {
		return fail("missing required attribute(s) %s", missing)
	}
	if extra := mask &^ (rule.req | rule.opt | QPAttrState); extra != 0 {
		return fail("attribute(s) %s not allowed", extra)
	}
	if msg := checkModifyValues(cur, attr, mask, &lim); msg != "" {
		return fail("%s", msg)
	}
	return next, nil
}

// checkModifyValues checks the selected attribute values, in mask bit
// order, and describes the first bad one ("" when all are good).
func checkModifyValues(cur QPState, attr *QPAttr, mask QPAttrMask, lim *ModifyLimits) string {
	has := func(b QPAttrMask) bool { return mask&b != 0 }
	if has(QPAttrCurState) && attr.CurState != cur {
		return fmt.Sprintf("CUR_STATE %s does not match current state %s", attr.CurState, cur)
	}
	if has(QPAttrAccessFlags) {
		if bad := attr.AccessFlags &^ QPAccessMask; bad != 0 {
			return fmt.Sprintf("ACCESS_FLAGS %#x has bit(s) %s not valid for a QP", uint32(attr.AccessFlags), bad)
		}
	}
	if has(QPAttrPKeyIndex) && attr.PKeyIndex >= lim.PKeyTableLen {
		return fmt.Sprintf("PKEY_INDEX %d out of range (P_Key table has %d entries)", attr.PKeyIndex, lim.PKeyTableLen)
	}
	if has(QPAttrPort) {
		if msg := modifyCheckPort("PORT", attr.PortNum, lim.PortCount); msg != "" {
			return msg
		}
	}
	if has(QPAttrAV) {
		if msg := modifyCheckAV(&attr.AH, lim); msg != "" {
			return msg
		}
	}
	if has(QPAttrPathMTU) {
		maxMTU := lim.MaxMTU
		if maxMTU == 0 {
			maxMTU = MTU4096
		}
		switch {
		case !attr.PathMTU.Valid():
			return fmt.Sprintf("PATH_MTU %d out of range %d..%d", uint32(attr.PathMTU), uint32(MTU256), uint32(MTU4096))
		case attr.PathMTU > maxMTU:
			return fmt.Sprintf("PATH_MTU %d (%s bytes) exceeds port max_mtu %d (%s bytes)",
				uint32(attr.PathMTU), attr.PathMTU, uint32(maxMTU), maxMTU)
		}
	}
	if has(QPAttrTimeout) && attr.Timeout > 31 {
		return fmt.Sprintf("TIMEOUT %d out of range 0..31", attr.Timeout)
	}
	if has(QPAttrRetryCnt) && attr.RetryCnt > 7 {
		return fmt.Sprintf("RETRY_CNT %d out of range 0..7", attr.RetryCnt)
	}
	if has(QPAttrRNRRetry) && attr.RNRRetry > 7 {
		return fmt.Sprintf("RNR_RETRY %d out of range 0..7", attr.RNRRetry)
	}
	if has(QPAttrRQPSN) && attr.RQPSN > 0xFFFFFF {
		return fmt.Sprintf("RQ_PSN %#x out of range 0..0xffffff", attr.RQPSN)
	}
	if has(QPAttrMaxQPRDAtomic) && attr.MaxRDAtomic > lim.MaxQPInitRDAtom {
		return fmt.Sprintf("MAX_QP_RD_ATOMIC %d exceeds device max_qp_init_rd_atom %d", attr.MaxRDAtomic, lim.MaxQPInitRDAtom)
	}
	if has(QPAttrAltPath) {
		return "ALT_PATH: alternate paths are not supported on RoCE"
	}
	if has(QPAttrMinRNRTimer) && attr.MinRNRTimer > 31 {
		return fmt.Sprintf("MIN_RNR_TIMER %d out of range 0..31", attr.MinRNRTimer)
	}
	if has(QPAttrSQPSN) && attr.SQPSN > 0xFFFFFF {
		return fmt.Sprintf("SQ_PSN %#x out of range 0..0xffffff", attr.SQPSN)
	}
	if has(QPAttrMaxDestRDAtomic) && attr.MaxDestRDAtomic > lim.MaxQPRDAtom {
		return fmt.Sprintf("MAX_DEST_RD_ATOMIC %d exceeds device max_qp_rd_atom %d", attr.MaxDestRDAtomic, lim.MaxQPRDAtom)
	}
	if has(QPAttrPathMigState) && attr.PathMigState > PathMigArmed {
		return fmt.Sprintf("PATH_MIG_STATE %d out of range 0..2", attr.PathMigState)
	}
	if has(QPAttrDestQPN) && (attr.DestQPN == 0 || attr.DestQPN > 0xFFFFFF) {
		return fmt.Sprintf("DEST_QPN %#x out of range 0x1..0xffffff", attr.DestQPN)
	}
	return ""
}

// modifyCheckPort checks a 1-based port number against the port count.
func modifyCheckPort(what string, p, count uint8) string {
	if p == 0 || p > count {
		return fmt.Sprintf("%s %d out of range 1..%d", what, p, count)
	}
	return ""
}

// modifyCheckAV checks a primary-path address vector for a RoCE port.
func modifyCheckAV(ah *AHAttr, lim *ModifyLimits) string {
	if !ah.IsGlobal {
		return "AV: is_global must be set on RoCE (a GRH is mandatory)"
	}
	if int(ah.GRH.SGIDIndex) >= lim.GIDTableLen {
		return fmt.Sprintf("AV: sgid_index %d out of range (GID table has %d entries)", ah.GRH.SGIDIndex, lim.GIDTableLen)
	}
	if ah.GRH.DGID.IsZero() {
		return "AV: dgid is zero"
	}
	if ah.PortNum != 0 {
		if msg := modifyCheckPort("AV: port_num", ah.PortNum, lim.PortCount); msg != "" {
			return msg
		}
	}
	return ""
}
