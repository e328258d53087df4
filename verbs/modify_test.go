package verbs

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
)

// modTestLimits are rxe-like limits: one port, one P_Key, four GIDs.
var modTestLimits = ModifyLimits{
	PortCount:       1,
	PKeyTableLen:    1,
	MaxQPRDAtom:     128,
	MaxQPInitRDAtom: 128,
	GIDTableLen:     4,
	MaxMTU:          MTU4096,
}

var modQPTypes = []QPType{QPTypeRC, QPTypeUC, QPTypeUD}

var modAllStates = []QPState{QPStateReset, QPStateInit, QPStateRTR, QPStateRTS,
	QPStateSQD, QPStateSQE, QPStateErr}

// modDefinedBits are all QP attribute mask bits except STATE.
var modDefinedBits = []QPAttrMask{QPAttrCurState, QPAttrEnSQDAsyncNotify,
	QPAttrAccessFlags, QPAttrPKeyIndex, QPAttrPort, QPAttrQKey, QPAttrAV,
	QPAttrPathMTU, QPAttrTimeout, QPAttrRetryCnt, QPAttrRNRRetry, QPAttrRQPSN,
	QPAttrMaxQPRDAtomic, QPAttrAltPath, QPAttrMinRNRTimer, QPAttrSQPSN,
	QPAttrMaxDestRDAtomic, QPAttrPathMigState, QPAttrCap, QPAttrDestQPN,
	QPAttrRateLimit}

// modExpectRule is one row of the expected transition table, written out
// independently of modify.go from the kernel's qp_state_table.
type modExpectRule struct {
	t        QPType
	from, to QPState
	req, opt QPAttrMask
}

func modExpectedTable() []modExpectRule {
	const (
		cs  = QPAttrCurState
		acc = QPAttrAccessFlags
		pk  = QPAttrPKeyIndex
		prt = QPAttrPort
		qk  = QPAttrQKey
		av  = QPAttrAV
		mtu = QPAttrPathMTU
		to  = QPAttrTimeout
		rc  = QPAttrRetryCnt
		rnr = QPAttrRNRRetry
		rq  = QPAttrRQPSN
		rda = QPAttrMaxQPRDAtomic
		alt = QPAttrAltPath
		rnt = QPAttrMinRNRTimer
		sq  = QPAttrSQPSN
		dra = QPAttrMaxDestRDAtomic
		mig = QPAttrPathMigState
		dqp = QPAttrDestQPN
	)
	R, U, D := QPTypeRC, QPTypeUC, QPTypeUD
	rows := []modExpectRule{
		{R, QPStateReset, QPStateInit, pk | prt | acc, 0},
		{U, QPStateReset, QPStateInit, pk | prt | acc, 0},
		{D, QPStateReset, QPStateInit, pk | prt | qk, 0},

		{R, QPStateInit, QPStateInit, 0, pk | prt | acc},
		{U, QPStateInit, QPStateInit, 0, pk | prt | acc},
		{D, QPStateInit, QPStateInit, 0, pk | prt | qk},

		{R, QPStateInit, QPStateRTR, av | mtu | dqp | rq | dra | rnt, alt | acc | pk},
		{U, QPStateInit, QPStateRTR, av | mtu | dqp | rq, alt | acc | pk},
		{D, QPStateInit, QPStateRTR, 0, pk | qk},

		{R, QPStateRTR, QPStateRTS, to | rc | rnr | sq | rda, cs | alt | acc | rnt | mig},
		{U, QPStateRTR, QPStateRTS, sq, cs | alt | acc | mig},
		{D, QPStateRTR, QPStateRTS, sq, cs | qk},

		{R, QPStateRTS, QPStateRTS, 0, cs | acc | alt | mig | rnt},
		{U, QPStateRTS, QPStateRTS, 0, cs | acc | alt | mig},
		{D, QPStateRTS, QPStateRTS, 0, cs | qk},

		{R, QPStateRTS, QPStateSQD, 0, QPAttrEnSQDAsyncNotify},
		{U, QPStateRTS, QPStateSQD, 0, QPAttrEnSQDAsyncNotify},
		{D, QPStateRTS, QPStateSQD, 0, QPAttrEnSQDAsyncNotify},

		{R, QPStateSQD, QPStateRTS, 0, cs | alt | acc | rnt | mig},
		{U, QPStateSQD, QPStateRTS, 0, cs | alt | acc | mig},
		{D, QPStateSQD, QPStateRTS, 0, cs | qk},

		{R, QPStateSQD, QPStateSQD, 0, prt | av | to | rc | rnr | rda | dra | alt | acc | pk | rnt | mig},
		{U, QPStateSQD, QPStateSQD, 0, av | alt | acc | pk | mig},
		{D, QPStateSQD, QPStateSQD, 0, pk | qk},

		{R, QPStateSQE, QPStateRTS, 0, 0},
		{U, QPStateSQE, QPStateRTS, 0, cs | acc},
		{D, QPStateSQE, QPStateRTS, 0, cs | qk},
	}
	for _, ty := range modQPTypes {
		rows = append(rows, modExpectRule{ty, QPStateReset, QPStateReset, 0, 0})
		for _, s := range modAllStates[1:] {
			rows = append(rows,
				modExpectRule{ty, s, QPStateReset, 0, 0},
				modExpectRule{ty, s, QPStateErr, 0, 0})
		}
	}
	return rows
}

// modGoodAttr returns attributes whose every field is valid under modTestLimits.
func modGoodAttr(from, to QPState) *QPAttr {
	return &QPAttr{
		State:       to,
		CurState:    from,
		PathMTU:     MTU1024,
		QKey:        0x11111111,
		RQPSN:       0x123456,
		SQPSN:       0xabcdef,
		DestQPN:     0x11,
		AccessFlags: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic,
		AH: AHAttr{
			IsGlobal: true,
			GRH: GlobalRoute{
				DGID:      GIDFromIP(netip.MustParseAddr("192.0.2.2")),
				SGIDIndex: 1,
				HopLimit:  1,
			},
			PortNum: 1,
		},
		PKeyIndex:       0,
		MaxRDAtomic:     1,
		MaxDestRDAtomic: 1,
		MinRNRTimer:     12,
		PortNum:         1,
		Timeout:         14,
		RetryCnt:        7,
		RNRRetry:        7,
	}
}

func modWantInvalid(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", substr)
	}
	if !errors.Is(err, ErrInvalidArgument) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("error %q does not wrap EINVAL", err)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("error %q does not contain %q", err, substr)
	}
	if !strings.HasPrefix(err.Error(), "verbs: modify ") || !strings.HasSuffix(err.Error(), ": invalid argument") {
		t.Fatalf("error %q is not in the usual form", err)
	}
}

func TestModifyTableMatchesExpected(t *testing.T) {
	want := map[[3]uint32]modExpectRule{}
	for _, r := range modExpectedTable() {
		want[[3]uint32{uint32(r.t), uint32(r.from), uint32(r.to)}] = r
	}
	for _, ty := range modQPTypes {
		for _, from := range modAllStates {
			for _, to := range modAllStates {
				got, ok := qpTransitionRule(ty, from, to)
				exp, wantOK := want[[3]uint32{uint32(ty), uint32(from), uint32(to)}]
				if ok != wantOK {
					t.Errorf("%s %s→%s: legal=%v, want %v", ty, from, to, ok, wantOK)
					continue
				}
				if ok && (got.req != exp.req || got.opt != exp.opt) {
					t.Errorf("%s %s→%s: req %s opt %s, want req %s opt %s",
						ty, from, to, got.req, got.opt, exp.req, exp.opt)
				}
			}
		}
	}
}

func TestModifyLegalTransitions(t *testing.T) {
	for _, r := range modExpectedTable() {
		name := r.t.String() + "_" + r.from.String() + "_" + r.to.String()
		t.Run(name, func(t *testing.T) {
			attr := modGoodAttr(r.from, r.to)
			header := "verbs: modify " + r.t.String() + " QP " + r.from.String() + "→" + r.to.String() + ": "

			// The minimal mask succeeds.
			next, err := checkModify(r.t, r.from, attr, QPAttrState|r.req, modTestLimits)
			if err != nil || next != r.to {
				t.Fatalf("minimal mask %s: next %s, err %v", QPAttrState|r.req, next, err)
			}

			// Every optional attribute as well (ALT_PATH is refused on RoCE
			// by a value check, tested below).
			full := QPAttrState | r.req | r.opt&^QPAttrAltPath
			if next, err := checkModify(r.t, r.from, attr, full, modTestLimits); err != nil || next != r.to {
				t.Fatalf("full mask %s: next %s, err %v", full, next, err)
			}

			// Without STATE, a same-state modify is an attribute-only one.
			if r.from == r.to {
				if next, err := checkModify(r.t, r.from, attr, full&^QPAttrState, modTestLimits); err != nil || next != r.from {
					t.Fatalf("attribute-only mask %s: next %s, err %v", full&^QPAttrState, next, err)
				}
			}

			// Removing any one required attribute fails and names it.
			for _, b := range modDefinedBits {
				if r.req&b == 0 {
					continue
				}
				next, err := checkModify(r.t, r.from, attr, QPAttrState|r.req&^b, modTestLimits)
				modWantInvalid(t, err, header+"missing required attribute(s) "+b.String()+": invalid argument")
				if next != r.from {
					t.Fatalf("failed modify returned state %s, want %s", next, r.from)
				}
			}

			// Adding any attribute outside required|optional fails and names it.
			for _, b := range modDefinedBits {
				if (r.req|r.opt)&b != 0 {
					continue
				}
				_, err := checkModify(r.t, r.from, attr, QPAttrState|r.req|b, modTestLimits)
				modWantInvalid(t, err, header+"attribute(s) "+b.String()+" not allowed: invalid argument")
			}

			// ALT_PATH, where the table allows it, is refused on RoCE.
			if r.opt&QPAttrAltPath != 0 {
				_, err := checkModify(r.t, r.from, attr, QPAttrState|r.req|QPAttrAltPath, modTestLimits)
				modWantInvalid(t, err, "ALT_PATH: alternate paths are not supported on RoCE")
			}
		})
	}
}

func TestModifyIllegalTransitions(t *testing.T) {
	legal := map[[3]uint32]bool{}
	for _, r := range modExpectedTable() {
		legal[[3]uint32{uint32(r.t), uint32(r.from), uint32(r.to)}] = true
	}
	n := 0
	for _, ty := range modQPTypes {
		for _, from := range modAllStates {
			for _, to := range modAllStates {
				if legal[[3]uint32{uint32(ty), uint32(from), uint32(to)}] {
					continue
				}
				n++
				// Even a mask with everything a neighbour would need fails.
				for _, mask := range []QPAttrMask{QPAttrState, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags} {
					next, err := checkModify(ty, from, modGoodAttr(from, to), mask, modTestLimits)
					modWantInvalid(t, err, "verbs: modify "+ty.String()+" QP "+from.String()+"→"+to.String()+": invalid state transition: invalid argument")
					if next != from {
						t.Fatalf("failed modify returned %s", next)
					}
				}
			}
		}
	}
	if n != 3*(49-22) {
		t.Errorf("%d illegal transitions, want %d", n, 3*(49-22))
	}
	// The ones people get wrong, spelled out.
	for _, c := range [][2]QPState{
		{QPStateReset, QPStateRTR}, {QPStateInit, QPStateRTS}, {QPStateReset, QPStateRTS},
		{QPStateRTR, QPStateInit}, {QPStateRTS, QPStateRTR}, {QPStateErr, QPStateInit},
		{QPStateReset, QPStateErr}, {QPStateRTR, QPStateRTR}, {QPStateErr, QPStateRTS},
		{QPStateInit, QPStateSQD}, {QPStateSQE, QPStateSQD}, {QPStateSQD, QPStateInit},
	} {
		for _, ty := range modQPTypes {
			_, err := checkModify(ty, c[0], modGoodAttr(c[0], c[1]), QPAttrState, modTestLimits)
			modWantInvalid(t, err, "invalid state transition")
		}
	}
}

func TestModifyToResetAndErr(t *testing.T) {
	for _, ty := range modQPTypes {
		for _, from := range modAllStates {
			next, err := checkModify(ty, from, &QPAttr{State: QPStateReset}, QPAttrState, modTestLimits)
			if err != nil || next != QPStateReset {
				t.Errorf("%s %s→RESET: %s %v", ty, from, next, err)
			}
			next, err = checkModify(ty, from, &QPAttr{State: QPStateErr}, QPAttrState, modTestLimits)
			if from == QPStateReset {
				// The kernel's table has no RESET→ERR edge.
				modWantInvalid(t, err, "invalid state transition")
				continue
			}
			if err != nil || next != QPStateErr {
				t.Errorf("%s %s→ERR: %s %v", ty, from, next, err)
			}
			// Extra attributes are refused on the way to ERR or RESET.
			_, err = checkModify(ty, from, modGoodAttr(from, QPStateErr), QPAttrState|QPAttrPKeyIndex, modTestLimits)
			modWantInvalid(t, err, "attribute(s) PKEY_INDEX not allowed")
		}
	}
}

func TestModifyMessages(t *testing.T) {
	a := modGoodAttr(QPStateInit, QPStateRTR)
	_, err := checkModify(QPTypeRC, QPStateInit, a,
		QPAttrState|QPAttrAV|QPAttrRQPSN|QPAttrMaxDestRDAtomic|QPAttrMinRNRTimer, modTestLimits)
	if err == nil || err.Error() != "verbs: modify RC QP INIT→RTR: missing required attribute(s) PATH_MTU|DEST_QPN: invalid argument" {
		t.Errorf("got %v", err)
	}
	a = modGoodAttr(QPStateRTR, QPStateRTS)
	a.RetryCnt = 9
	_, err = checkModify(QPTypeRC, QPStateRTR, a,
		QPAttrState|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrSQPSN|QPAttrMaxQPRDAtomic, modTestLimits)
	if err == nil || err.Error() != "verbs: modify RC QP RTR→RTS: RETRY_CNT 9 out of range 0..7: invalid argument" {
		t.Errorf("got %v", err)
	}
	_, err = checkModify(QPTypeRC, QPStateReset, modGoodAttr(QPStateReset, QPStateRTS), QPAttrState, modTestLimits)
	if err == nil || err.Error() != "verbs: modify RC QP RESET→RTS: invalid state transition: invalid argument" {
		t.Errorf("got %v", err)
	}
	_, err = checkModify(QPTypeUD, QPStateInit, modGoodAttr(QPStateInit, QPStateRTR), QPAttrState|QPAttrAV|QPAttrCap, modTestLimits)
	if err == nil || err.Error() != "verbs: modify UD QP INIT→RTR: attribute(s) AV|CAP not allowed: invalid argument" {
		t.Errorf("got %v", err)
	}
}

// modValueCase is one out-of-range (or edge-of-range) value of one attribute.
type modValueCase struct {
	bit  QPAttrMask
	set  func(a *QPAttr)
	want string // "" when the value is valid
}

var modValueCases = []modValueCase{
	{QPAttrPathMTU, func(a *QPAttr) { a.PathMTU = 0 }, "PATH_MTU 0 out of range 1..5"},
	{QPAttrPathMTU, func(a *QPAttr) { a.PathMTU = 6 }, "PATH_MTU 6 out of range 1..5"},
	{QPAttrPathMTU, func(a *QPAttr) { a.PathMTU = MTU256 }, ""},
	{QPAttrPathMTU, func(a *QPAttr) { a.PathMTU = MTU4096 }, ""},
	{QPAttrTimeout, func(a *QPAttr) { a.Timeout = 32 }, "TIMEOUT 32 out of range 0..31"},
	{QPAttrTimeout, func(a *QPAttr) { a.Timeout = 255 }, "TIMEOUT 255 out of range 0..31"},
	{QPAttrTimeout, func(a *QPAttr) { a.Timeout = 31 }, ""},
	{QPAttrTimeout, func(a *QPAttr) { a.Timeout = 0 }, ""},
	{QPAttrRetryCnt, func(a *QPAttr) { a.RetryCnt = 8 }, "RETRY_CNT 8 out of range 0..7"},
	{QPAttrRetryCnt, func(a *QPAttr) { a.RetryCnt = 0 }, ""},
	{QPAttrRNRRetry, func(a *QPAttr) { a.RNRRetry = 8 }, "RNR_RETRY 8 out of range 0..7"},
	{QPAttrRNRRetry, func(a *QPAttr) { a.RNRRetry = 0 }, ""},
	{QPAttrMinRNRTimer, func(a *QPAttr) { a.MinRNRTimer = 32 }, "MIN_RNR_TIMER 32 out of range 0..31"},
	{QPAttrMinRNRTimer, func(a *QPAttr) { a.MinRNRTimer = 31 }, ""},
	{QPAttrRQPSN, func(a *QPAttr) { a.RQPSN = 0x1000000 }, "RQ_PSN 0x1000000 out of range 0..0xffffff"},
	{QPAttrRQPSN, func(a *QPAttr) { a.RQPSN = 0xFFFFFF }, ""},
	{QPAttrRQPSN, func(a *QPAttr) { a.RQPSN = 0 }, ""},
	{QPAttrSQPSN, func(a *QPAttr) { a.SQPSN = 0xFFFFFFFF }, "SQ_PSN 0xffffffff out of range 0..0xffffff"},
	{QPAttrSQPSN, func(a *QPAttr) { a.SQPSN = 0xFFFFFF }, ""},
	{QPAttrDestQPN, func(a *QPAttr) { a.DestQPN = 0 }, "DEST_QPN 0x0 out of range 0x1..0xffffff"},
	{QPAttrDestQPN, func(a *QPAttr) { a.DestQPN = 0x1000000 }, "DEST_QPN 0x1000000 out of range 0x1..0xffffff"},
	{QPAttrDestQPN, func(a *QPAttr) { a.DestQPN = 0xFFFFFF }, ""},
	{QPAttrPort, func(a *QPAttr) { a.PortNum = 0 }, "PORT 0 out of range 1..1"},
	{QPAttrPort, func(a *QPAttr) { a.PortNum = 2 }, "PORT 2 out of range 1..1"},
	{QPAttrPKeyIndex, func(a *QPAttr) { a.PKeyIndex = 1 }, "PKEY_INDEX 1 out of range (P_Key table has 1 entries)"},
	{QPAttrMaxQPRDAtomic, func(a *QPAttr) { a.MaxRDAtomic = 129 }, "MAX_QP_RD_ATOMIC 129 exceeds device max_qp_init_rd_atom 128"},
	{QPAttrMaxQPRDAtomic, func(a *QPAttr) { a.MaxRDAtomic = 128 }, ""},
	{QPAttrMaxQPRDAtomic, func(a *QPAttr) { a.MaxRDAtomic = 0 }, ""},
	{QPAttrMaxDestRDAtomic, func(a *QPAttr) { a.MaxDestRDAtomic = 200 }, "MAX_DEST_RD_ATOMIC 200 exceeds device max_qp_rd_atom 128"},
	{QPAttrMaxDestRDAtomic, func(a *QPAttr) { a.MaxDestRDAtomic = 128 }, ""},
	{QPAttrAccessFlags, func(a *QPAttr) { a.AccessFlags = AccessLocalWrite | AccessZeroBased }, "ACCESS_FLAGS 0x21 has bit(s) ZERO_BASED not valid for a QP"},
	{QPAttrAccessFlags, func(a *QPAttr) { a.AccessFlags = AccessOnDemand | 1<<30 }, "ACCESS_FLAGS 0x40000040 has bit(s) ON_DEMAND|0x40000000 not valid for a QP"},
	{QPAttrAccessFlags, func(a *QPAttr) { a.AccessFlags = QPAccessMask }, ""},
	{QPAttrAccessFlags, func(a *QPAttr) { a.AccessFlags = 0 }, ""},
	{QPAttrPathMigState, func(a *QPAttr) { a.PathMigState = 3 }, "PATH_MIG_STATE 3 out of range 0..2"},
	{QPAttrPathMigState, func(a *QPAttr) { a.PathMigState = PathMigArmed }, ""},
	{QPAttrAV, func(a *QPAttr) { a.AH.IsGlobal = false }, "AV: is_global must be set on RoCE"},
	{QPAttrAV, func(a *QPAttr) { a.AH.GRH.SGIDIndex = 4 }, "AV: sgid_index 4 out of range (GID table has 4 entries)"},
	{QPAttrAV, func(a *QPAttr) { a.AH.GRH.SGIDIndex = 3 }, ""},
	{QPAttrAV, func(a *QPAttr) { a.AH.GRH.DGID = GID{} }, "AV: dgid is zero"},
	{QPAttrAV, func(a *QPAttr) { a.AH.PortNum = 2 }, "AV: port_num 2 out of range 1..1"},
	{QPAttrAV, func(a *QPAttr) { a.AH.PortNum = 0 }, ""},
	{QPAttrCurState, func(a *QPAttr) { a.CurState = QPStateUnknown }, "CUR_STATE UNKNOWN does not match current state"},
}

func TestModifyValueRanges(t *testing.T) {
	tested := map[QPAttrMask]bool{}
	for _, r := range modExpectedTable() {
		for _, vc := range modValueCases {
			if (r.req|r.opt)&vc.bit == 0 {
				continue
			}
			tested[vc.bit] = true
			a := modGoodAttr(r.from, r.to)
			vc.set(a)
			mask := QPAttrState | r.req | vc.bit
			next, err := checkModify(r.t, r.from, a, mask, modTestLimits)
			if vc.want == "" {
				if err != nil || next != r.to {
					t.Errorf("%s %s→%s %s: unexpected %v", r.t, r.from, r.to, vc.bit, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s %s→%s %s: no error, want %q", r.t, r.from, r.to, vc.bit, vc.want)
				continue
			}
			prefix := "verbs: modify " + r.t.String() + " QP " + r.from.String() + "→" + r.to.String() + ": " + vc.want
			if !strings.HasPrefix(err.Error(), prefix) || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("%s %s→%s %s: error %q, want prefix %q", r.t, r.from, r.to, vc.bit, err, prefix)
			}
			if next != r.from {
				t.Errorf("failed modify returned %s", next)
			}
		}
	}
	for _, vc := range modValueCases {
		if !tested[vc.bit] {
			t.Errorf("value case for %s never applied", vc.bit)
		}
	}
}

func TestModifyLimits(t *testing.T) {
	a := modGoodAttr(QPStateInit, QPStateRTR)
	a.PathMTU = MTU4096
	req := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer
	lim := modTestLimits
	lim.MaxMTU = MTU1024
	_, err := checkModify(QPTypeRC, QPStateInit, a, req, lim)
	modWantInvalid(t, err, "PATH_MTU 5 (4096 bytes) exceeds port max_mtu 3 (1024 bytes)")
	a.PathMTU = MTU1024
	if _, err := checkModify(QPTypeRC, QPStateInit, a, req, lim); err != nil {
		t.Errorf("MTU at the limit: %v", err)
	}
	lim.MaxMTU = 0 // means 4096
	a.PathMTU = MTU4096
	if _, err := checkModify(QPTypeRC, QPStateInit, a, req, lim); err != nil {
		t.Errorf("zero MaxMTU: %v", err)
	}
	// Two ports, two P_Keys.
	lim = modTestLimits
	lim.PortCount, lim.PKeyTableLen = 2, 2
	b := modGoodAttr(QPStateReset, QPStateInit)
	b.PortNum, b.PKeyIndex = 2, 1
	if _, err := checkModify(QPTypeRC, QPStateReset, b, QPAttrState|QPAttrPort|QPAttrPKeyIndex|QPAttrAccessFlags, lim); err != nil {
		t.Errorf("port 2 of 2: %v", err)
	}
	// A device with no GIDs refuses every AV.
	lim = modTestLimits
	lim.GIDTableLen = 0
	a = modGoodAttr(QPStateInit, QPStateRTR)
	a.AH.GRH.SGIDIndex = 0
	_, err = checkModify(QPTypeUC, QPStateInit, a, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN, lim)
	modWantInvalid(t, err, "AV: sgid_index 0 out of range (GID table has 0 entries)")
	// Zero limits refuse what they bound.
	_, err = checkModify(QPTypeUD, QPStateReset, modGoodAttr(QPStateReset, QPStateInit), QPAttrState|QPAttrPort|QPAttrPKeyIndex|QPAttrQKey, ModifyLimits{})
	modWantInvalid(t, err, "PKEY_INDEX 0 out of range (P_Key table has 0 entries)")
}

func TestModifyCurState(t *testing.T) {
	// CUR_STATE equal to the real state is accepted where the table allows it.
	for _, ty := range modQPTypes {
		for _, from := range []QPState{QPStateRTR, QPStateRTS, QPStateSQD, QPStateSQE} {
			a := modGoodAttr(from, QPStateRTS)
			mask := QPAttrState | QPAttrCurState
			if from == QPStateRTR {
				mask |= QPAttrSQPSN
				if ty == QPTypeRC {
					mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRDAtomic
				}
			}
			_, err := checkModify(ty, from, a, mask, modTestLimits)
			if ty == QPTypeRC && from == QPStateSQE {
				modWantInvalid(t, err, "attribute(s) CUR_STATE not allowed")
				continue
			}
			if err != nil {
				t.Errorf("%s %s→RTS with CUR_STATE: %v", ty, from, err)
			}
			a.CurState = QPStateErr
			_, err = checkModify(ty, from, a, mask, modTestLimits)
			modWantInvalid(t, err, "CUR_STATE ERR does not match current state "+from.String())
		}
	}
	// Elsewhere CUR_STATE is not allowed at all.
	_, err := checkModify(QPTypeRC, QPStateRTS, modGoodAttr(QPStateRTS, QPStateErr), QPAttrState|QPAttrCurState, modTestLimits)
	modWantInvalid(t, err, "attribute(s) CUR_STATE not allowed")
	_, err = checkModify(QPTypeRC, QPStateInit, modGoodAttr(QPStateInit, QPStateInit), QPAttrCurState, modTestLimits)
	modWantInvalid(t, err, "attribute(s) CUR_STATE not allowed")
}

func TestModifyBadInputs(t *testing.T) {
	_, err := checkModify(QPTypeRawPacket, QPStateReset, &QPAttr{State: QPStateInit}, QPAttrState|QPAttrPort, modTestLimits)
	modWantInvalid(t, err, "verbs: modify RAW_PACKET QP RESET→INIT: unsupported QP type")
	_, err = checkModify(QPType(0), QPStateReset, &QPAttr{}, 0, modTestLimits)
	modWantInvalid(t, err, "unsupported QP type")

	_, err = checkModify(QPTypeRC, QPStateRTS, &QPAttr{State: QPStateUnknown}, QPAttrState, modTestLimits)
	modWantInvalid(t, err, "verbs: modify RC QP RTS→UNKNOWN: invalid target state")
	_, err = checkModify(QPTypeRC, QPStateRTS, &QPAttr{State: 42}, QPAttrState, modTestLimits)
	modWantInvalid(t, err, "RTS→QPState(42): invalid target state")

	_, err = checkModify(QPTypeRC, QPStateRTS, &QPAttr{State: QPStateRTS}, QPAttrState|1<<21|1<<30, modTestLimits)
	modWantInvalid(t, err, "unknown attribute mask bit(s) 0x40200000")

	_, err = checkModify(QPTypeRC, QPStateUnknown, &QPAttr{State: QPStateReset}, QPAttrState, modTestLimits)
	modWantInvalid(t, err, "UNKNOWN→RESET: invalid state transition")

	_, err = checkModify(QPTypeRC, QPStateInit, nil, QPAttrState, modTestLimits)
	modWantInvalid(t, err, "no attributes given for mask STATE")
	// No attributes and no mask: a no-op modify, legal wherever X→X is.
	if next, err := checkModify(QPTypeUD, QPStateInit, nil, 0, modTestLimits); err != nil || next != QPStateInit {
		t.Errorf("nil attr, zero mask in INIT: %s %v", next, err)
	}
	_, err = checkModify(QPTypeUD, QPStateRTR, nil, 0, modTestLimits)
	modWantInvalid(t, err, "RTR→RTR: invalid state transition")

	// Value checks only look at selected attributes.
	a := modGoodAttr(QPStateReset, QPStateInit)
	a.Timeout, a.RetryCnt, a.PathMTU, a.DestQPN = 99, 99, 99, 0
	if _, err := checkModify(QPTypeRC, QPStateReset, a, QPAttrState|QPAttrPort|QPAttrPKeyIndex|QPAttrAccessFlags, modTestLimits); err != nil {
		t.Errorf("unselected bad values were checked: %v", err)
	}
}

// TestModifyPingpong walks each QP type through the sequence the libibverbs
// pingpong examples use.
func TestModifyPingpong(t *testing.T) {
	steps := map[QPType][]QPAttrMask{
		QPTypeRC: {
			QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags,
			QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer,
			QPAttrState | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRDAtomic,
		},
		QPTypeUC: {
			QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags,
			QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN,
			QPAttrState | QPAttrSQPSN,
		},
		QPTypeUD: {
			QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey,
			QPAttrState,
			QPAttrState | QPAttrSQPSN,
		},
	}
	for ty, masks := range steps {
		state := QPStateReset
		for i, to := range []QPState{QPStateInit, QPStateRTR, QPStateRTS} {
			next, err := checkModify(ty, state, modGoodAttr(state, to), masks[i], modTestLimits)
			if err != nil || next != to {
				t.Fatalf("%s step %d (%s→%s): %s %v", ty, i, state, to, next, err)
			}
			state = next
		}
		for _, to := range []QPState{QPStateErr, QPStateReset, QPStateInit} {
			mask := QPAttrState
			if to == QPStateInit {
				mask = masks[0]
			}
			next, err := checkModify(ty, state, modGoodAttr(state, to), mask, modTestLimits)
			if err != nil || next != to {
				t.Fatalf("%s %s→%s: %s %v", ty, state, to, next, err)
			}
			state = next
		}
	}
}
