package verbs_test

// Memory windows over real UDP: type 1 windows bound with QP.BindMW, type 2
// windows bound with a BIND_MW work request, remote access through a
// window's R_Key (inside and outside its range), rebinding, LOCAL_INV,
// SEND_WITH_INV, bind errors and the lifetime rules.

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// mwAccess is allAccess plus the right to bind windows.
const mwAccess = allAccess | verbs.AccessMWBind

func mwPair(t testing.TB) (a, b *tEnd, cfg pairConfig) {
	t.Helper()
	cfg = defaultPairConfig()
	cfg.MRAccess = mwAccess
	a, b = newRCPair(t, func(c *pairConfig) { *c = cfg })
	return a, b, cfg
}

// reconnect takes both QPs of a connection through RESET and connects them
// again with new PSNs, after a remote access error has put them in ERR.
// The completions flushed until then are discarded.
func reconnect(t testing.TB, a, b *tEnd, cfg *pairConfig) {
	t.Helper()
	for _, e := range []*tEnd{a, b} {
		stateIs(t, e.qp, verbs.QPStateErr)
	}
	for _, e := range []*tEnd{a, b} {
		if err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateReset}, verbs.QPAttrState); err != nil {
			t.Fatalf("to RESET: %v", err)
		}
		drainCQ(t, e.scq)
		drainCQ(t, e.rcq)
		e.psn = rand.Uint32() & 0xFFFFFF
	}
	if err := connectQP(a.qp, a.psn, b.info(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := connectQP(b.qp, b.psn, a.info(), cfg); err != nil {
		t.Fatal(err)
	}
}

// toErr moves qp to ERR.
func toErr(t testing.TB, qp *verbs.QP) {
	t.Helper()
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		t.Fatalf("to ERR: %v", err)
	}
}

// drainCQ discards what cq holds; anything but a flushed or failed
// completion is an error.
func drainCQ(t testing.TB, cq *verbs.CQ) {
	t.Helper()
	var wc [16]verbs.WC
	for range 1000 {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		for _, c := range wc[:n] {
			if c.Status == verbs.WCSuccess {
				t.Fatalf("successful completion left behind: %+v", c)
			}
		}
	}
	t.Fatal("CQ does not drain")
}

// remote posts one signaled WRITE or READ of n bytes between a's buffer at
// off and the remote address raddr with rkey, and returns its status.
func (e *tEnd) remote(t testing.TB, id uint64, op verbs.WROpcode, off, n int, raddr uint64, rkey uint32) verbs.WCStatus {
	t.Helper()
	e.post(t, verbs.SendWR{ID: id, Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{e.mr.SGE(off, n)},
		RemoteAddr: raddr, RKey: rkey})
	wc := e.sendWCs(t, 1)[0]
	if wc.WRID != id {
		t.Fatalf("completion for wr_id %d, want %d: %+v", wc.WRID, id, wc)
	}
	return wc.Status
}

// expectRemoteAccessErr checks that a's access fails with REM_ACCESS_ERR
// and leaves b's memory as it was, then reconnects the pair.
func expectRemoteAccessErr(t testing.TB, a, b *tEnd, cfg *pairConfig, what string, op verbs.WROpcode, raddr uint64, rkey uint32) {
	t.Helper()
	before := append([]byte(nil), b.buf...)
	fill(a.buf[:256], 0xEE)
	if st := a.remote(t, 999, op, 0, 256, raddr, rkey); st != verbs.WCRemAccessErr {
		t.Fatalf("%s: status %s, want REM_ACCESS_ERR", what, st)
	}
	if i := firstDiff(b.buf, before); i >= 0 {
		t.Fatalf("%s: the failed access changed the responder's memory at byte %d", what, i)
	}
	reconnect(t, a, b, cfg)
}

func TestMWType1(t *testing.T) {
	t.Parallel()
	a, b, cfg := mwPair(t)
	mw, err := b.pd.AllocMW(verbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	if mw.Type() != verbs.MWType1 {
		t.Fatalf("type %d", mw.Type())
	}
	old := mw.RKey()
	const wOff, wLen = 4096, 8192
	base := b.mr.Addr() + wOff
	rkey, err := b.qp.BindMW(mw, verbs.MWBind{WRID: 1, Flags: verbs.SendSignaled, Info: verbs.MWBindInfo{
		MR: b.mr, Addr: base, Length: wLen, Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead}})
	if err != nil {
		t.Fatalf("BindMW: %v", err)
	}
	if rkey == old || rkey>>8 != old>>8 {
		t.Fatalf("bound R_Key 0x%x, old 0x%x: want a new key with the same index", rkey, old)
	}
	if rkey == b.mr.RKey() {
		t.Fatalf("window R_Key equals the MR's")
	}
	b.sendWC(t, 1, verbs.WCBindMW)
	if mw.RKey() != rkey {
		t.Fatalf("RKey() 0x%x after the bind, want 0x%x", mw.RKey(), rkey)
	}

	t.Run("WRITE and READ inside", func(t *testing.T) {
		fill(a.buf[:wLen], 1)
		if st := a.remote(t, 2, verbs.WRRDMAWrite, 0, wLen, base, rkey); st != verbs.WCSuccess {
			t.Fatalf("WRITE through the window: %s", st)
		}
		checkBytes(t, "written through the window", b.buf[wOff:wOff+wLen], a.buf[:wLen])
		if b.buf[wOff-1] != 0 || b.buf[wOff+wLen] != 0 {
			t.Fatal("WRITE went outside the window")
		}
		fill(b.buf[wOff+wLen-100:wOff+wLen], 2)
		if st := a.remote(t, 3, verbs.WRRDMARead, 16384, 100, base+wLen-100, rkey); st != verbs.WCSuccess {
			t.Fatalf("READ of the window's last bytes: %s", st)
		}
		checkBytes(t, "read through the window", a.buf[16384:16384+100], b.buf[wOff+wLen-100:wOff+wLen])
	})
	t.Run("MR R_Key unaffected", func(t *testing.T) {
		fill(a.buf[:64], 3)
		if st := a.remote(t, 4, verbs.WRRDMAWrite, 0, 64, b.mr.Addr()+40000, b.mr.RKey()); st != verbs.WCSuccess {
			t.Fatalf("WRITE through the MR's R_Key outside the window: %s", st)
		}
		checkBytes(t, "written through the MR", b.buf[40000:40064], a.buf[:64])
	})
	t.Run("outside the window", func(t *testing.T) {
		expectRemoteAccessErr(t, a, b, &cfg, "WRITE below the window", verbs.WRRDMAWrite, base-8, rkey)
		expectRemoteAccessErr(t, a, b, &cfg, "WRITE across the window's end", verbs.WRRDMAWrite, base+wLen-128, rkey)
		expectRemoteAccessErr(t, a, b, &cfg, "READ after the window", verbs.WRRDMARead, base+wLen, rkey)
	})
	t.Run("rebind", func(t *testing.T) {
		// Rebound read-only over another range: the old key is dead.
		const nOff, nLen = 32768, 4096
		rkey2, err := b.qp.BindMW(mw, verbs.MWBind{WRID: 5, Flags: verbs.SendSignaled, Info: verbs.MWBindInfo{
			MR: b.mr, Addr: b.mr.Addr() + nOff, Length: nLen, Access: verbs.AccessRemoteRead}})
		if err != nil {
			t.Fatal(err)
		}
		b.sendWC(t, 5, verbs.WCBindMW)
		if rkey2 == rkey || mw.RKey() != rkey2 {
			t.Fatalf("rebind R_Key 0x%x (RKey() 0x%x), old 0x%x", rkey2, mw.RKey(), rkey)
		}
		fill(b.buf[nOff:nOff+nLen], 4)
		if st := a.remote(t, 6, verbs.WRRDMARead, 0, nLen, b.mr.Addr()+nOff, rkey2); st != verbs.WCSuccess {
			t.Fatalf("READ through the new key: %s", st)
		}
		checkBytes(t, "read through the rebound window", a.buf[:nLen], b.buf[nOff:nOff+nLen])
		expectRemoteAccessErr(t, a, b, &cfg, "READ through the old key", verbs.WRRDMARead, base, rkey)
		expectRemoteAccessErr(t, a, b, &cfg, "WRITE to a read-only window", verbs.WRRDMAWrite, b.mr.Addr()+nOff, rkey2)
		rkey = rkey2
	})
	t.Run("lifetime", func(t *testing.T) {
		if err := b.mr.Dereg(); !errors.Is(err, verbs.ErrBusy) {
			t.Fatalf("Dereg of an MR with a bound window: %v, want ErrBusy", err)
		}
		// Type 1 windows are invalidated by rebinding, not LOCAL_INV.
		b.post(t, verbs.SendWR{ID: 7, Opcode: verbs.WRLocalInv, Flags: verbs.SendSignaled, InvalidateRKey: rkey})
		if wc := b.sendWCs(t, 1)[0]; wc.WRID != 7 || wc.Status == verbs.WCSuccess {
			t.Fatalf("LOCAL_INV of a type 1 window: %+v, want an error", wc)
		}
		stateIs(t, b.qp, verbs.QPStateErr)
		toErr(t, a.qp)
		reconnect(t, a, b, &cfg)
		// A zero-length bind unbinds: the key dies and the MR is free.
		k, err := b.qp.BindMW(mw, verbs.MWBind{WRID: 8, Flags: verbs.SendSignaled})
		if err != nil {
			t.Fatalf("unbind: %v", err)
		}
		b.sendWC(t, 8, verbs.WCBindMW)
		expectRemoteAccessErr(t, a, b, &cfg, "READ through an unbound window", verbs.WRRDMARead, b.mr.Addr()+32768, k)
		expectRemoteAccessErr(t, a, b, &cfg, "READ through the key before the unbind", verbs.WRRDMARead, b.mr.Addr()+32768, rkey)
		// Bound again: the MR is busy until the window goes.
		if rkey, err = b.qp.BindMW(mw, verbs.MWBind{WRID: 9, Flags: verbs.SendSignaled, Info: verbs.MWBindInfo{
			MR: b.mr, Addr: b.mr.Addr() + 32768, Length: 4096, Access: verbs.AccessRemoteRead}}); err != nil {
			t.Fatal(err)
		}
		b.sendWC(t, 9, verbs.WCBindMW)
		if err := b.mr.Dereg(); !errors.Is(err, verbs.ErrBusy) {
			t.Fatalf("Dereg of an MR with a rebound window: %v, want ErrBusy", err)
		}
		if st := a.remote(t, 10, verbs.WRRDMARead, 0, 64, b.mr.Addr()+32768, rkey); st != verbs.WCSuccess {
			t.Fatalf("READ through the rebound window: %s", st)
		}
		if err := mw.Dealloc(); err != nil {
			t.Fatalf("Dealloc: %v", err)
		}
		if err := mw.Dealloc(); !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("second Dealloc: %v, want ErrClosed", err)
		}
		expectRemoteAccessErr(t, a, b, &cfg, "READ through a deallocated window", verbs.WRRDMARead, b.mr.Addr()+32768, rkey)
		// With the window gone the MR can go; its key then fails.
		if err := b.mr.Dereg(); err != nil {
			t.Fatalf("Dereg after Dealloc: %v", err)
		}
		if err := b.mr.Dereg(); !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("second Dereg: %v, want ErrClosed", err)
		}
		expectRemoteAccessErr(t, a, b, &cfg, "READ through a deregistered MR", verbs.WRRDMARead, b.mr.Addr(), b.mr.RKey())
		b.mr = nil
	})
}

// bindType2 binds a type 2 window with a BIND_MW work request on e's QP and
// returns its new R_Key.
func bindType2(t testing.TB, e *tEnd, mw *verbs.MW, id uint64, off, n int, access verbs.AccessFlags) uint32 {
	t.Helper()
	rkey := verbs.IncRKey(mw.RKey())
	e.post(t, verbs.SendWR{ID: id, Opcode: verbs.WRBindMW, Flags: verbs.SendSignaled, BindMW: mw, BindRKey: rkey,
		BindInfo: verbs.MWBindInfo{MR: e.mr, Addr: e.mr.Addr() + uint64(off), Length: uint64(n), Access: access}})
	e.sendWC(t, id, verbs.WCBindMW)
	if mw.RKey() != rkey {
		t.Fatalf("RKey() 0x%x after the bind, want 0x%x", mw.RKey(), rkey)
	}
	return rkey
}

func TestMWType2(t *testing.T) {
	t.Parallel()
	a, b, cfg := mwPair(t)
	mw, err := b.pd.AllocMW(verbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Dealloc()
	if _, err := b.qp.BindMW(mw, verbs.MWBind{Info: verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr(), Length: 64}}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("QP.BindMW of a type 2 window: %v, want ErrInvalidArgument", err)
	}
	if got := verbs.IncRKey(0x123456FF); got != 0x12345600 {
		t.Fatalf("IncRKey(0x123456FF) = 0x%x, want 0x12345600", got)
	}
	const off, n = 8192, 4096
	raddr := b.mr.Addr() + off

	rkey := bindType2(t, b, mw, 1, off, n, verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err := b.mr.Dereg(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("Dereg of an MR with a bound type 2 window: %v, want ErrBusy", err)
	}
	fill(a.buf[:n], 1)
	if st := a.remote(t, 2, verbs.WRRDMAWrite, 0, n, raddr, rkey); st != verbs.WCSuccess {
		t.Fatalf("WRITE through the type 2 window: %s", st)
	}
	checkBytes(t, "written through the window", b.buf[off:off+n], a.buf[:n])
	if st := a.remote(t, 3, verbs.WRRDMARead, 16384, n, raddr, rkey); st != verbs.WCSuccess {
		t.Fatalf("READ through the type 2 window: %s", st)
	}
	checkBytes(t, "read through the window", a.buf[16384:16384+n], b.buf[off:off+n])

	// A bound type 2 window cannot be bound again before it is
	// invalidated: MW_BIND_ERR, and the QP goes to ERR.
	b.post(t, verbs.SendWR{ID: 4, Opcode: verbs.WRBindMW, Flags: verbs.SendSignaled, BindMW: mw, BindRKey: verbs.IncRKey(rkey),
		BindInfo: verbs.MWBindInfo{MR: b.mr, Addr: raddr, Length: 64, Access: verbs.AccessRemoteRead}})
	checkWC(t, b.sendWCs(t, 1)[0], 4, verbs.WCMWBindErr, 0)
	stateIs(t, b.qp, verbs.QPStateErr)
	toErr(t, a.qp)
	reconnect(t, a, b, &cfg)
	if st := a.remote(t, 5, verbs.WRRDMARead, 0, 64, raddr, rkey); st != verbs.WCSuccess {
		t.Fatalf("READ through the window after the refused rebind: %s", st)
	}

	// LOCAL_INV revokes it.
	b.post(t, verbs.SendWR{ID: 6, Opcode: verbs.WRLocalInv, Flags: verbs.SendSignaled, InvalidateRKey: rkey})
	b.sendWC(t, 6, verbs.WCLocalInv)
	expectRemoteAccessErr(t, a, b, &cfg, "WRITE after LOCAL_INV", verbs.WRRDMAWrite, raddr, rkey)

	// Bound again with the next key; SEND_WITH_INV from the peer
	// revokes it.
	rkey2 := bindType2(t, b, mw, 7, off, n, verbs.AccessRemoteRead)
	if rkey2 != verbs.IncRKey(rkey) {
		t.Fatalf("rebound R_Key 0x%x, want 0x%x", rkey2, verbs.IncRKey(rkey))
	}
	if st := a.remote(t, 8, verbs.WRRDMARead, 0, 64, raddr, rkey2); st != verbs.WCSuccess {
		t.Fatalf("READ through the rebound window: %s", st)
	}
	b.postRecv(t, 9, 40000, 64)
	fill(a.buf[:32], 9)
	a.post(t, verbs.SendWR{ID: 9, Opcode: verbs.WRSendWithInv, Flags: verbs.SendSignaled, InvalidateRKey: rkey2,
		SGL: []verbs.SGE{a.mr.SGE(0, 32)}})
	a.sendWC(t, 9, verbs.WCSend)
	wc := b.recvWCs(t, 1)[0]
	checkWC(t, wc, 9, verbs.WCSuccess, verbs.WCRecv)
	if wc.Flags&verbs.WCFlagWithInv == 0 || wc.ImmData != rkey2 || wc.ByteLen != 32 {
		t.Fatalf("SEND_WITH_INV receive: flags %s, invalidated R_Key 0x%x (want 0x%x), byte_len %d", wc.Flags, wc.ImmData, rkey2, wc.ByteLen)
	}
	checkBytes(t, "SEND_WITH_INV payload", b.buf[40000:40032], a.buf[:32])
	expectRemoteAccessErr(t, a, b, &cfg, "READ after SEND_WITH_INV", verbs.WRRDMARead, raddr, rkey2)

	// Invalidating a key that is already invalid fails the LOCAL_INV.
	b.post(t, verbs.SendWR{ID: 10, Opcode: verbs.WRLocalInv, Flags: verbs.SendSignaled, InvalidateRKey: rkey2})
	if wc := b.sendWCs(t, 1)[0]; wc.WRID != 10 || wc.Status == verbs.WCSuccess {
		t.Fatalf("LOCAL_INV of an invalid key: %+v, want an error", wc)
	}
}

// TestMWType2OtherQP: a type 2 window is usable only through the QP that
// bound it.
func TestMWType2OtherQP(t *testing.T) {
	t.Parallel()
	a, b, cfg := mwPair(t)
	mw, err := b.pd.AllocMW(verbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Dealloc()
	// A second connection between the same two devices and PDs.
	var qa, qb *verbs.QP
	for _, p := range []struct {
		e  *tEnd
		qp **verbs.QP
	}{{a, &qa}, {b, &qb}} {
		qp, err := p.e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: p.e.scq, RecvCQ: p.e.rcq, Cap: cfg.Cap})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qp.Destroy() })
		*p.qp = qp
	}
	if err := connectQP(qa, 11, peerInfo{QPN: qb.QPN(), PSN: 22, GID: b.gid}, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := connectQP(qb, 22, peerInfo{QPN: qa.QPN(), PSN: 11, GID: a.gid}, &cfg); err != nil {
		t.Fatal(err)
	}
	rkey := bindType2(t, b, mw, 1, 0, 4096, verbs.AccessRemoteRead)
	if st := a.remote(t, 2, verbs.WRRDMARead, 0, 64, b.mr.Addr(), rkey); st != verbs.WCSuccess {
		t.Fatalf("READ through the binding QP: %s", st)
	}
	qa.PostSend(verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
		RemoteAddr: b.mr.Addr(), RKey: rkey})
	checkWC(t, a.sendWCs(t, 1)[0], 3, verbs.WCRemAccessErr, 0)
	// The MR's own key works on either QP.
	if st := a.remote(t, 4, verbs.WRRDMARead, 0, 64, b.mr.Addr(), b.mr.RKey()); st != verbs.WCSuccess {
		t.Fatalf("READ through the MR key: %s", st)
	}
}

func TestMWBindErrors(t *testing.T) {
	t.Parallel()
	t.Run("outside the MR", func(t *testing.T) {
		t.Parallel()
		a, b, cfg := mwPair(t)
		for i, typ := range []verbs.MWType{verbs.MWType1, verbs.MWType2} {
			mw, err := b.pd.AllocMW(typ)
			if err != nil {
				t.Fatal(err)
			}
			defer mw.Dealloc()
			old := mw.RKey()
			b.post(t, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRBindMW, Flags: verbs.SendSignaled, BindMW: mw,
				BindRKey: verbs.IncRKey(old), BindInfo: verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr() + uint64(b.mr.Len()) - 100,
					Length: 200, Access: verbs.AccessRemoteRead}})
			checkWC(t, b.sendWCs(t, 1)[0], uint64(i), verbs.WCMWBindErr, 0)
			stateIs(t, b.qp, verbs.QPStateErr)
			if mw.RKey() != old {
				t.Errorf("type %d: R_Key changed by a failed bind", typ)
			}
			toErr(t, a.qp)
			reconnect(t, a, b, &cfg)
		}
		if err := b.mr.Dereg(); err != nil {
			t.Fatalf("Dereg after failed binds only: %v", err)
		}
		b.mr = nil
	})
	t.Run("MR without MW_BIND", func(t *testing.T) {
		t.Parallel()
		_, b := newRCPair(t) // MRs with allAccess: no MW_BIND
		mw, err := b.pd.AllocMW(verbs.MWType1)
		if err != nil {
			t.Fatal(err)
		}
		defer mw.Dealloc()
		if _, err := b.qp.BindMW(mw, verbs.MWBind{WRID: 1, Flags: verbs.SendSignaled,
			Info: verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr(), Length: 64, Access: verbs.AccessRemoteRead}}); err != nil {
			t.Fatalf("BindMW post: %v", err)
		}
		checkWC(t, b.sendWCs(t, 1)[0], 1, verbs.WCMWBindErr, 0)
		stateIs(t, b.qp, verbs.QPStateErr)
	})
	t.Run("remote write on an MR without LOCAL_WRITE", func(t *testing.T) {
		t.Parallel()
		_, b, _ := mwPair(t)
		buf := make([]byte, 4096)
		mr, err := b.pd.RegMR(buf, verbs.AccessRemoteRead|verbs.AccessMWBind)
		if err != nil {
			t.Fatal(err)
		}
		defer mr.Dereg()
		mw, err := b.pd.AllocMW(verbs.MWType1)
		if err != nil {
			t.Fatal(err)
		}
		defer mw.Dealloc()
		if _, err := b.qp.BindMW(mw, verbs.MWBind{WRID: 1, Flags: verbs.SendSignaled,
			Info: verbs.MWBindInfo{MR: mr, Addr: mr.Addr(), Length: 64, Access: verbs.AccessRemoteWrite}}); err != nil {
			t.Fatalf("BindMW post: %v", err)
		}
		checkWC(t, b.sendWCs(t, 1)[0], 1, verbs.WCMWBindErr, 0)
	})
	t.Run("refused at post", func(t *testing.T) {
		t.Parallel()
		_, b, _ := mwPair(t)
		pd2, err := b.ctx.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		defer pd2.Dealloc()
		other, err := pd2.AllocMW(verbs.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Dealloc()
		if err := pd2.Dealloc(); !errors.Is(err, verbs.ErrBusy) {
			t.Errorf("Dealloc of a PD with a window: %v, want ErrBusy", err)
		}
		mw, err := b.pd.AllocMW(verbs.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		defer mw.Dealloc()
		for _, tc := range []struct {
			name string
			wr   verbs.SendWR
		}{
			{"no window", verbs.SendWR{Opcode: verbs.WRBindMW, BindInfo: verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr(), Length: 8}}},
			{"window of another PD", verbs.SendWR{Opcode: verbs.WRBindMW, BindMW: other, BindRKey: verbs.IncRKey(other.RKey()),
				BindInfo: verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr(), Length: 8}}},
		} {
			if err := b.qp.PostSend(tc.wr); !errors.Is(err, verbs.ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			}
		}
		if _, err := b.pd.AllocMW(3); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("AllocMW(3): %v, want ErrInvalidArgument", err)
		}
		expectNoWC(t, b.scq, 10*time.Millisecond)
	})
	t.Run("UD QP", func(t *testing.T) {
		t.Parallel()
		e := newUDEnd(t, "mwud", udQKey)
		mw, err := e.pd.AllocMW(verbs.MWType1)
		if err != nil {
			t.Fatal(err)
		}
		defer mw.Dealloc()
		if _, err := e.qp.BindMW(mw, verbs.MWBind{Info: verbs.MWBindInfo{MR: e.mr, Addr: e.mr.Addr(), Length: 8}}); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("BindMW on a UD QP: %v, want ErrInvalidArgument", err)
		}
	})
}

// TestMWType1BindsQueued: two binds of a type 1 window posted while the send
// queue is busy (a SEND waits out RNR NAKs) return different R_Keys, as
// rxe's ibv_bind_mw does (it advances ibv_mw.rkey at post time); after
// both run, only the second key works.
func TestMWType1BindsQueued(t *testing.T) {
	t.Parallel()
	a, b, cfg := mwPair(t)
	mw, err := b.pd.AllocMW(verbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Dealloc()
	b.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{b.mr.SGE(0, 8)}})
	waitCounter(t, "RNR NAKs", func() uint64 { return min(stats(b.ctx).RNRNAKsReceived.Load(), 1) }, 1)
	info := verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr(), Length: 4096, Access: verbs.AccessRemoteRead}
	k1, err := b.qp.BindMW(mw, verbs.MWBind{WRID: 2, Flags: verbs.SendSignaled, Info: info})
	if err != nil {
		t.Fatal(err)
	}
	k2, err := b.qp.BindMW(mw, verbs.MWBind{WRID: 3, Flags: verbs.SendSignaled, Info: info})
	if err != nil {
		t.Fatal(err)
	}
	if k1 == k2 {
		t.Fatalf("two queued binds both returned R_Key 0x%x", k1)
	}
	a.postRecv(t, 1, 0, 64)
	wcs := b.sendWCs(t, 3)
	checkWC(t, wcs[0], 1, verbs.WCSuccess, verbs.WCSend)
	checkWC(t, wcs[1], 2, verbs.WCSuccess, verbs.WCBindMW)
	checkWC(t, wcs[2], 3, verbs.WCSuccess, verbs.WCBindMW)
	checkWC(t, a.recvWCs(t, 1)[0], 1, verbs.WCSuccess, verbs.WCRecv)
	if mw.RKey() != k2 {
		t.Fatalf("RKey() 0x%x, want the last bind's 0x%x", mw.RKey(), k2)
	}
	if st := a.remote(t, 4, verbs.WRRDMARead, 0, 64, b.mr.Addr(), k2); st != verbs.WCSuccess {
		t.Fatalf("READ through the last key: %s", st)
	}
	expectRemoteAccessErr(t, a, b, &cfg, "READ through the first key", verbs.WRRDMARead, b.mr.Addr(), k1)
}
