package verbs_test

// UC queue pairs between two soft devices of this process over real UDP:
// the UC modify rules, SEND, WRITE and WRITE with immediate, what UC refuses
// to post, and its silent drops (no receive, bad R_Key).

import (
	"errors"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// ucConnect moves a UC QP from RESET to RTS aimed at peer with only the
// attributes UC requires: RTR takes AV, PATH_MTU, DEST_QPN and RQ_PSN, RTS
// takes SQ_PSN.
func ucConnect(qp *verbs.QP, psn uint32, peer peerInfo, cfg *pairConfig) error {
	if err := qpToInit(qp, cfg); err != nil {
		return err
	}
	err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: cfg.MTU, DestQPN: peer.QPN, RQPSN: peer.PSN,
		AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer.GID, SGIDIndex: 1, HopLimit: 1}}},
		verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN)
	if err != nil {
		return err
	}
	return qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: psn}, verbs.QPAttrState|verbs.QPAttrSQPSN)
}

// newUCPair is newRCPair with UC QPs.
func newUCPair(t testing.TB, opts ...func(*pairConfig)) (a, b *tEnd) {
	t.Helper()
	cfg := defaultPairConfig()
	for _, o := range opts {
		o(&cfg)
	}
	a = newEnd(t, "uca", &cfg)
	b = newEnd(t, "ucb", &cfg)
	retypeQP(t, a, verbs.QPTypeUC, nil, &cfg)
	retypeQP(t, b, verbs.QPTypeUC, nil, &cfg)
	if err := ucConnect(a.qp, a.psn, b.info(), &cfg); err != nil {
		t.Fatalf("connect a: %v", err)
	}
	if err := ucConnect(b.qp, b.psn, a.info(), &cfg); err != nil {
		t.Fatalf("connect b: %v", err)
	}
	return a, b
}

func TestUCModifyRules(t *testing.T) {
	t.Parallel()
	cfg := defaultPairConfig()
	a := newEnd(t, "ucm", &cfg)
	retypeQP(t, a, verbs.QPTypeUC, nil, &cfg)
	if a.qp.Type() != verbs.QPTypeUC {
		t.Fatalf("type %s", a.qp.Type())
	}
	if err := qpToInit(a.qp, &cfg); err != nil {
		t.Fatal(err)
	}
	peer := peerInfo{QPN: 0x123, PSN: 0x456, GID: a.gid}
	rtr := verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPN: peer.QPN, RQPSN: peer.PSN,
		MaxDestRDAtomic: 1, MinRNRTimer: 12,
		AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer.GID, SGIDIndex: 1}}}
	need := verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN
	for _, tc := range []struct {
		name string
		mask verbs.QPAttrMask
	}{
		{"RC's MAX_DEST_RD_ATOMIC", need | verbs.QPAttrMaxDestRDAtomic},
		{"RC's MIN_RNR_TIMER", need | verbs.QPAttrMinRNRTimer},
		{"without RQ_PSN", need &^ verbs.QPAttrRQPSN},
		{"without AV", need &^ verbs.QPAttrAV},
	} {
		if err := a.qp.Modify(&rtr, tc.mask); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("UC INIT→RTR %s: %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if st := a.qp.State(); st != verbs.QPStateInit {
		t.Fatalf("state %s after refused modifies, want INIT", st)
	}
	if err := a.qp.Modify(&rtr, need); err != nil {
		t.Fatalf("UC INIT→RTR with AV, PATH_MTU, DEST_QPN, RQ_PSN: %v", err)
	}
	rts := verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: 77, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1}
	for _, tc := range []struct {
		name string
		mask verbs.QPAttrMask
	}{
		{"RC's TIMEOUT", verbs.QPAttrState | verbs.QPAttrSQPSN | verbs.QPAttrTimeout},
		{"RC's RETRY_CNT", verbs.QPAttrState | verbs.QPAttrSQPSN | verbs.QPAttrRetryCnt},
		{"RC's RNR_RETRY", verbs.QPAttrState | verbs.QPAttrSQPSN | verbs.QPAttrRNRRetry},
		{"RC's MAX_QP_RD_ATOMIC", verbs.QPAttrState | verbs.QPAttrSQPSN | verbs.QPAttrMaxQPRDAtomic},
		{"without SQ_PSN", verbs.QPAttrState},
	} {
		if err := a.qp.Modify(&rts, tc.mask); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("UC RTR→RTS %s: %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if err := a.qp.Modify(&rts, verbs.QPAttrState|verbs.QPAttrSQPSN); err != nil {
		t.Fatalf("UC RTR→RTS with SQ_PSN: %v", err)
	}
	q, _, err := a.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	if q.State != verbs.QPStateRTS || q.PathMTU != verbs.MTU1024 || q.DestQPN != peer.QPN || q.RQPSN != peer.PSN ||
		q.SQPSN != 77 || q.AH.GRH.DGID != peer.GID {
		t.Fatalf("Query: %+v", q)
	}
}

func TestUCSendWrite(t *testing.T) {
	t.Parallel()
	a, b := newUCPair(t, func(c *pairConfig) { c.MTU = verbs.MTU1024 })

	t.Run("SEND", func(t *testing.T) {
		n := 5*1024 + 3 // six packets
		fill(a.buf[:n], 1)
		b.postRecv(t, 1, 0, 8192)
		a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, n)}})
		a.sendWC(t, 1, verbs.WCSend)
		wc := b.recvWCs(t, 1)[0]
		checkWC(t, wc, 1, verbs.WCSuccess, verbs.WCRecv)
		if wc.ByteLen != uint32(n) || wc.Flags&verbs.WCFlagWithImm != 0 || wc.QPNum != b.qp.QPN() {
			t.Fatalf("receive completion %+v", wc)
		}
		checkBytes(t, "UC SEND", b.buf[:n], a.buf[:n])
	})
	t.Run("SEND with imm", func(t *testing.T) {
		fill(a.buf[:100], 2)
		b.postRecv(t, 2, 0, 8192)
		a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSendWithImm, ImmData: 0xFEEDF00D, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, 100)}})
		a.sendWC(t, 2, verbs.WCSend)
		wc := b.recvWCs(t, 1)[0]
		checkWC(t, wc, 2, verbs.WCSuccess, verbs.WCRecv)
		if wc.ByteLen != 100 || wc.Flags&verbs.WCFlagWithImm == 0 || wc.ImmData != 0xFEEDF00D {
			t.Fatalf("receive completion %+v", wc)
		}
		checkBytes(t, "UC SEND with imm", b.buf[:100], a.buf[:100])
	})
	t.Run("WRITE", func(t *testing.T) {
		n := 3*1024 + 500
		fill(a.buf[:n], 3)
		a.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, n)},
			RemoteAddr: b.mr.Addr() + 16384, RKey: b.mr.RKey()})
		a.sendWC(t, 3, verbs.WCRDMAWrite)
		// UC has no ACK: the data lands after the completion. A SEND
		// after it proves it arrived (same QP, in order).
		b.postRecv(t, 4, 0, 64)
		a.post(t, verbs.SendWR{ID: 4, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
		a.sendWC(t, 4, verbs.WCSend)
		checkWC(t, b.recvWCs(t, 1)[0], 4, verbs.WCSuccess, verbs.WCRecv)
		checkBytes(t, "UC WRITE", b.buf[16384:16384+n], a.buf[:n])
	})
	t.Run("WRITE with imm", func(t *testing.T) {
		n := 2048
		fill(a.buf[:n], 4)
		b.postRecv(t, 5, 0, 0)
		a.post(t, verbs.SendWR{ID: 5, Opcode: verbs.WRRDMAWriteWithImm, ImmData: 55, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr() + 32768, RKey: b.mr.RKey()})
		a.sendWC(t, 5, verbs.WCRDMAWrite)
		wc := b.recvWCs(t, 1)[0]
		checkWC(t, wc, 5, verbs.WCSuccess, verbs.WCRecvRDMAWithImm)
		if wc.ImmData != 55 || wc.ByteLen != uint32(n) || wc.Flags&verbs.WCFlagWithImm == 0 {
			t.Fatalf("receive completion %+v", wc)
		}
		checkBytes(t, "UC WRITE with imm", b.buf[32768:32768+n], a.buf[:n])
	})
	t.Run("both ways", func(t *testing.T) {
		fill(b.buf[40000:40100], 5)
		a.postRecv(t, 6, 0, 128)
		b.post(t, verbs.SendWR{ID: 6, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{b.mr.SGE(40000, 100)}})
		b.sendWC(t, 6, verbs.WCSend)
		checkWC(t, a.recvWCs(t, 1)[0], 6, verbs.WCSuccess, verbs.WCRecv)
		checkBytes(t, "UC SEND b→a", a.buf[:100], b.buf[40000:40100])
	})
}

func TestUCRefusedOpcodes(t *testing.T) {
	t.Parallel()
	a, b := newUCPair(t)
	for _, wr := range []verbs.SendWR{
		{ID: 1, Opcode: verbs.WRRDMARead, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
		{ID: 2, Opcode: verbs.WRAtomicCmpAndSwp, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
		{ID: 3, Opcode: verbs.WRAtomicFetchAndAdd, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), CompareAdd: 1},
		{ID: 4, Opcode: verbs.WRSendWithInv, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, InvalidateRKey: b.mr.RKey()},
	} {
		err := a.qp.PostSend(wr)
		var pe *verbs.PostError
		if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%s on UC: %v, want a PostError wrapping ErrInvalidArgument", wr.Opcode, err)
		}
	}
	expectNoWC(t, a.scq, 10*time.Millisecond)
	if st := a.qp.State(); st != verbs.QPStateRTS {
		t.Fatalf("state %s, want RTS", st)
	}
	// A chain stops at the READ; the SEND before it goes.
	b.postRecv(t, 9, 0, 64)
	err := a.qp.PostSend(
		verbs.SendWR{ID: 5, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}},
		verbs.SendWR{ID: 6, Opcode: verbs.WRRDMARead, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	var pe *verbs.PostError
	if !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("SEND+READ chain: %v, want a PostError at index 1", err)
	}
	a.sendWC(t, 5, verbs.WCSend)
	checkWC(t, b.recvWCs(t, 1)[0], 9, verbs.WCSuccess, verbs.WCRecv)
}

// TestUCSilentDrops: without a receive, or with a bad R_Key, UC drops the
// message without a NAK; the sender completes successfully and the
// connection carries on.
func TestUCSilentDrops(t *testing.T) {
	t.Parallel()
	a, b := newUCPair(t)
	noRecv := stats(b.ctx).DropNoRecv.Load()
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)}})
	a.sendWC(t, 1, verbs.WCSend)
	waitCounter(t, "DropNoRecv", func() uint64 { return stats(b.ctx).DropNoRecv.Load() - noRecv }, 1)

	fill(a.buf[:256], 7)
	dropped := stats(b.ctx).DropUCMessage.Load()
	a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 256)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x80})
	a.sendWC(t, 2, verbs.WCRDMAWrite)
	waitCounter(t, "DropUCMessage", func() uint64 { return stats(b.ctx).DropUCMessage.Load() - dropped }, 1)
	for _, qp := range []*verbs.QP{a.qp, b.qp} {
		if st := qp.State(); st != verbs.QPStateRTS {
			t.Fatalf("QP 0x%x state %s after a silent drop, want RTS", qp.QPN(), st)
		}
	}
	for i, v := range b.buf[:256] {
		if v != 0 {
			t.Fatalf("memory written through a bad R_Key at byte %d", i)
		}
	}
	b.postRecv(t, 3, 1024, 64)
	a.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 32)}})
	a.sendWC(t, 3, verbs.WCSend)
	wc := b.recvWCs(t, 1)[0]
	checkWC(t, wc, 3, verbs.WCSuccess, verbs.WCRecv)
	if wc.ByteLen != 32 {
		t.Fatalf("byte_len %d, want 32", wc.ByteLen)
	}
	checkBytes(t, "SEND after the drops", b.buf[1024:1024+32], a.buf[:32])
}
