package verbs_test

// UD queue pairs and address handles between two soft devices of this
// process on two loopback addresses, over real UDP: the 40-byte GRH area,
// replies addressed from a receive completion, Q_Key checks, the MTU limit,
// and the checks of PostSend and CreateAH.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

const udQKey = 0x1EE7C0DE

// retypeQP replaces e's RC QP with a new QP of type typ on the same CQs,
// taking its receives from srq when srq is not nil. e.close destroys the
// new one.
func retypeQP(t testing.TB, e *tEnd, typ verbs.QPType, srq *verbs.SRQ, cfg *pairConfig) {
	t.Helper()
	if err := e.qp.Destroy(); err != nil {
		t.Fatalf("destroy RC QP: %v", err)
	}
	e.qp = nil
	qp, err := e.pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: e.scq, RecvCQ: e.rcq, Cap: cfg.Cap,
		SigAll: cfg.SigAll, SRQ: srq})
	if err != nil {
		t.Fatalf("create %s QP: %v", typ, err)
	}
	e.qp = qp
}

// udToRTS moves a UD QP from RESET to RTS with Q_Key qkey, using only the
// attributes each transition requires.
func udToRTS(qp *verbs.QP, qkey, psn uint32) error {
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1, QKey: qkey},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey); err != nil {
		return err
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR}, verbs.QPAttrState); err != nil {
		return err
	}
	return qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: psn}, verbs.QPAttrState|verbs.QPAttrSQPSN)
}

// newUDEnd is newEnd with a UD QP in RTS (Q_Key qkey) instead of the RC QP.
func newUDEnd(t testing.TB, tag string, qkey uint32) *tEnd {
	t.Helper()
	cfg := defaultPairConfig()
	e := newEnd(t, tag, &cfg)
	retypeQP(t, e, verbs.QPTypeUD, nil, &cfg)
	if err := udToRTS(e.qp, qkey, e.psn); err != nil {
		t.Fatalf("UD QP to RTS: %v", err)
	}
	return e
}

// ahTo creates an address handle on pd for the device whose GID is gid.
func ahTo(t testing.TB, pd *verbs.PD, gid verbs.GID) *verbs.AH {
	t.Helper()
	ah, err := pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: verbs.GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 64}})
	if err != nil {
		t.Fatalf("CreateAH(%s): %v", gid, err)
	}
	t.Cleanup(func() { ah.Destroy() })
	return ah
}

// udWirePayload is the UDP payload length of a UD SEND of n bytes: BTH,
// DETH, the immediate if any, the data padded to 4 bytes, and the ICRC.
func udWirePayload(n int, imm bool) int {
	l := 12 + 8 + n + (4-n%4)%4 + 4
	if imm {
		l += 4
	}
	return l
}

// checkIPv4GRH checks the GRH area of a UD receive from an IPv4 sender: 20
// zero bytes, then a valid IPv4 header of a UDP datagram of udpPayload
// bytes from src to dst.
func checkIPv4GRH(t testing.TB, grh []byte, src, dst netip.Addr, udpPayload int) {
	t.Helper()
	if len(grh) != verbs.GRHLen {
		t.Fatalf("GRH area of %d bytes", len(grh))
	}
	for i, v := range grh[:20] {
		if v != 0 {
			t.Fatalf("GRH byte %d is 0x%02x, want 0 (IPv4: 20 zero bytes first): % x", i, v, grh)
		}
	}
	ip := grh[20:]
	if ip[0] != 0x45 {
		t.Errorf("IPv4 version/IHL 0x%02x, want 0x45", ip[0])
	}
	if got, want := int(binary.BigEndian.Uint16(ip[2:])), 20+8+udpPayload; got != want {
		t.Errorf("IPv4 total length %d, want %d", got, want)
	}
	if ip[9] != 17 {
		t.Errorf("IPv4 protocol %d, want 17 (UDP)", ip[9])
	}
	if got := netip.AddrFrom4([4]byte(ip[12:16])); got != src {
		t.Errorf("IPv4 source %s, want %s", got, src)
	}
	if got := netip.AddrFrom4([4]byte(ip[16:20])); got != dst {
		t.Errorf("IPv4 destination %s, want %s", got, dst)
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	if sum != 0xFFFF {
		t.Errorf("IPv4 header checksum does not verify (sum 0x%04x): % x", sum, ip)
	}
}

func TestUDSendRecv(t *testing.T) {
	t.Parallel()
	a := newUDEnd(t, "uda", udQKey)
	b := newUDEnd(t, "udb", udQKey)
	ah := ahTo(t, a.pd, b.gid)
	if got := ah.Attr().GRH.DGID; got != b.gid {
		t.Fatalf("AH Attr DGID %s, want %s", got, b.gid)
	}
	pa, err := a.ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	mtu := pa.ActiveMTU.Bytes()
	for i, tc := range []struct {
		name string
		n    int
		imm  bool
	}{
		{"empty", 0, false},
		{"one byte", 1, false},
		{"odd length with imm", 333, true},
		{"port MTU", mtu, false},
		{"port MTU with imm", mtu, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := uint64(10 + i)
			clear(b.buf)
			fill(a.buf[:tc.n], byte(i+1))
			// Exactly GRHLen+n bytes, as ud_pingpong posts: the message
			// must fit with nothing to spare.
			b.postRecv(t, id, 0, verbs.GRHLen+tc.n)
			wr := verbs.SendWR{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{a.mr.SGE(0, tc.n)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: udQKey}
			if tc.imm {
				wr.Opcode, wr.ImmData = verbs.WRSendWithImm, 0xA5A50000+uint32(i)
			}
			a.post(t, wr)
			a.sendWC(t, id, verbs.WCSend)
			wc := b.recvWCs(t, 1)[0]
			checkWC(t, wc, id, verbs.WCSuccess, verbs.WCRecv)
			if wc.Flags&verbs.WCFlagGRH == 0 {
				t.Errorf("receive flags %s: no GRH", wc.Flags)
			}
			if got := wc.Flags&verbs.WCFlagWithImm != 0; got != tc.imm {
				t.Errorf("receive flags %s: WITH_IMM %v, want %v", wc.Flags, got, tc.imm)
			}
			if tc.imm && wc.ImmData != wr.ImmData {
				t.Errorf("imm 0x%x, want 0x%x", wc.ImmData, wr.ImmData)
			}
			if wc.SrcQP != a.qp.QPN() || wc.QPNum != b.qp.QPN() {
				t.Errorf("src_qp 0x%x qp_num 0x%x, want 0x%x and 0x%x", wc.SrcQP, wc.QPNum, a.qp.QPN(), b.qp.QPN())
			}
			if wc.ByteLen != uint32(verbs.GRHLen+tc.n) {
				t.Errorf("byte_len %d, want GRHLen+%d = %d", wc.ByteLen, tc.n, verbs.GRHLen+tc.n)
			}
			checkIPv4GRH(t, b.buf[:verbs.GRHLen], a.ctx.Device().Addr(), b.ctx.Device().Addr(), udWirePayload(tc.n, tc.imm))
			checkBytes(t, "UD payload", b.buf[verbs.GRHLen:verbs.GRHLen+tc.n], a.buf[:tc.n])
			if b.buf[verbs.GRHLen+tc.n] != 0 {
				t.Errorf("byte after the receive buffer was written")
			}
		})
	}

	// The receiver answers the last message, addressing it from the
	// completion and the GRH area alone.
	t.Run("reply from WC", func(t *testing.T) {
		clear(a.buf)
		a.postRecv(t, 50, 0, verbs.GRHLen+64)
		b.postRecv(t, 40, 0, verbs.GRHLen+64)
		fill(a.buf[4096:4096+64], 0x33)
		a.post(t, verbs.SendWR{ID: 41, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(4096, 64)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: udQKey})
		a.sendWC(t, 41, verbs.WCSend)
		wc := b.recvWCs(t, 1)[0]
		checkWC(t, wc, 40, verbs.WCSuccess, verbs.WCRecv)
		attr, err := b.ctx.InitAHFromWC(1, &wc, b.buf[:verbs.GRHLen])
		if err != nil {
			t.Fatalf("InitAHFromWC: %v", err)
		}
		if !attr.IsGlobal || attr.GRH.DGID != a.gid || attr.GRH.SGIDIndex != 1 || attr.PortNum != 1 {
			t.Fatalf("InitAHFromWC: %+v, want a global AV to %s from GID index 1 on port 1", attr, a.gid)
		}
		back, err := b.pd.CreateAHFromWC(&wc, b.buf[:verbs.GRHLen], 1)
		if err != nil {
			t.Fatalf("CreateAHFromWC: %v", err)
		}
		defer back.Destroy()
		fill(b.buf[8192:8192+64], 0x44)
		b.post(t, verbs.SendWR{ID: 42, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled, ImmData: 4242,
			SGL: []verbs.SGE{b.mr.SGE(8192, 64)}, AH: back, RemoteQPN: wc.SrcQP, RemoteQKey: udQKey})
		b.sendWC(t, 42, verbs.WCSend)
		r := a.recvWCs(t, 1)[0]
		checkWC(t, r, 50, verbs.WCSuccess, verbs.WCRecv)
		if r.SrcQP != b.qp.QPN() || r.ImmData != 4242 || r.ByteLen != verbs.GRHLen+64 {
			t.Fatalf("reply completion %+v", r)
		}
		checkIPv4GRH(t, a.buf[:verbs.GRHLen], b.ctx.Device().Addr(), a.ctx.Device().Addr(), udWirePayload(64, true))
		checkBytes(t, "reply", a.buf[verbs.GRHLen:verbs.GRHLen+64], b.buf[8192:8192+64])

		// A completion without a GRH, or a short GRH area, cannot be
		// answered.
		noGRH := wc
		noGRH.Flags &^= verbs.WCFlagGRH
		if _, err := b.ctx.InitAHFromWC(1, &noGRH, b.buf[:verbs.GRHLen]); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("InitAHFromWC without WCFlagGRH: %v, want ErrInvalidArgument", err)
		}
		if _, err := b.pd.CreateAHFromWC(&wc, b.buf[:verbs.GRHLen-1], 1); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("CreateAHFromWC with a short GRH: %v, want ErrInvalidArgument", err)
		}
		// The GRH of a message for another device.
		if _, err := a.ctx.InitAHFromWC(1, &wc, b.buf[:verbs.GRHLen]); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("InitAHFromWC with another device's GRH: %v, want ErrInvalidArgument", err)
		}
	})
}

// waitCounter waits, at most 5 s, until get() reaches want.
func waitCounter(t testing.TB, what string, get func() uint64, want uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for get() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %d, want %d", what, get(), want)
		}
		time.Sleep(time.Millisecond)
	}
	if got := get(); got != want {
		t.Fatalf("%s is %d, want %d", what, got, want)
	}
}

func TestUDQKey(t *testing.T) {
	t.Parallel()
	a := newUDEnd(t, "qka", udQKey)
	b := newUDEnd(t, "qkb", udQKey)
	ah := ahTo(t, a.pd, b.gid)
	qkeyViol := func() uint64 {
		p, err := b.ctx.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(p.QKeyViolCntr)
	}
	before := qkeyViol()
	b.postRecv(t, 1, 0, verbs.GRHLen+64)
	b.postRecv(t, 2, 4096, verbs.GRHLen+64)
	send := func(id uint64, qkey uint32) {
		t.Helper()
		a.post(t, verbs.SendWR{ID: id, Opcode: verbs.WRSendWithImm, ImmData: uint32(id), Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, 16)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey})
		a.sendWC(t, id, verbs.WCSend) // UD sends complete whatever happens to them
	}
	send(100, udQKey^1)
	waitCounter(t, "Q_Key violation counter", qkeyViol, before+1)
	expectNoWC(t, b.rcq, 20*time.Millisecond)

	// Bit 31 set: the sender's own Q_Key (udQKey) goes out, and matches.
	send(101, 0x80000000)
	wc := b.recvWCs(t, 1)[0]
	checkWC(t, wc, 1, verbs.WCSuccess, verbs.WCRecv) // the first receive: nothing took it before
	if wc.ImmData != 101 {
		t.Fatalf("delivered the message with imm %d, want 101", wc.ImmData)
	}
	send(102, udQKey)
	if wc := b.recvWCs(t, 1)[0]; wc.WRID != 2 || wc.ImmData != 102 || wc.Status != verbs.WCSuccess {
		t.Fatalf("second delivery: %+v", wc)
	}
	if got := qkeyViol(); got != before+1 {
		t.Fatalf("Q_Key violations %d, want %d", got, before+1)
	}

	// A receiver whose Q_Key changes (RTS→RTS) drops the old key.
	if err := b.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, QKey: 0x77}, verbs.QPAttrState|verbs.QPAttrQKey); err != nil {
		t.Fatalf("RTS→RTS with a new Q_Key: %v", err)
	}
	if q, _, err := b.qp.Query(); err != nil || q.QKey != 0x77 {
		t.Fatalf("Query Q_Key 0x%x (%v), want 0x77", q.QKey, err)
	}
	b.postRecv(t, 3, 0, verbs.GRHLen+64)
	send(103, udQKey)
	waitCounter(t, "Q_Key violation counter", qkeyViol, before+2)
	send(104, 0x77)
	if wc := b.recvWCs(t, 1)[0]; wc.WRID != 3 || wc.ImmData != 104 {
		t.Fatalf("delivery after the Q_Key change: %+v", wc)
	}
}

func TestUDLargerThanMTU(t *testing.T) {
	t.Parallel()
	a := newUDEnd(t, "biga", udQKey)
	b := newUDEnd(t, "bigb", udQKey)
	ah := ahTo(t, a.pd, b.gid)
	p, err := a.ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	mtu := p.ActiveMTU.Bytes()
	b.postRecv(t, 1, 0, verbs.GRHLen+2*mtu)
	tooLong := stats(a.ctx).DropUDTooLong.Load()
	sent := stats(a.ctx).Sent.Load()
	a.post(t, verbs.SendWR{ID: 7, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, mtu+1)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: udQKey})
	// SUCCESS, as IBTA C10-93.1.1 and rxe have it, and nothing on the wire.
	a.sendWC(t, 7, verbs.WCSend)
	if got := stats(a.ctx).DropUDTooLong.Load() - tooLong; got != 1 {
		t.Errorf("DropUDTooLong went up by %d, want 1", got)
	}
	if got := stats(a.ctx).Sent.Load(); got != sent {
		t.Errorf("%d datagram(s) sent for a UD message above the MTU", got-sent)
	}
	expectNoWC(t, b.rcq, 30*time.Millisecond)
	// The receive is still there for the next message.
	a.post(t, verbs.SendWR{ID: 8, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 5)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: udQKey})
	a.sendWC(t, 8, verbs.WCSend)
	if wc := b.recvWCs(t, 1)[0]; wc.WRID != 1 || wc.Status != verbs.WCSuccess || wc.ByteLen != verbs.GRHLen+5 {
		t.Fatalf("receive after the dropped message: %+v", wc)
	}

	// A receive buffer without room for the GRH and the message.
	b.postRecv(t, 2, 0, verbs.GRHLen+4)
	a.post(t, verbs.SendWR{ID: 9, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, 5)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: udQKey})
	a.sendWC(t, 9, verbs.WCSend)
	checkWC(t, b.recvWCs(t, 1)[0], 2, verbs.WCLocLenErr, 0)
}

func TestUDBadAH(t *testing.T) {
	t.Parallel()
	a := newUDEnd(t, "aha", udQKey)
	b := newUDEnd(t, "ahb", udQKey)
	good := ahTo(t, a.pd, b.gid)
	dead, err := a.pd.CreateAH(good.Attr())
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := dead.Destroy(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("second AH Destroy: %v, want ErrClosed", err)
	}
	pd2, err := a.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd2.Dealloc()
	other := ahTo(t, pd2, b.gid)
	b.postRecv(t, 1, 0, verbs.GRHLen+64)
	wr := func(id uint64, ah *verbs.AH) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, 8)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: udQKey}
	}
	for _, tc := range []struct {
		name string
		wr   verbs.SendWR
	}{
		{"nil AH", wr(1, nil)},
		{"destroyed AH", wr(2, dead)},
		{"AH of another PD", wr(3, other)},
		{"RDMA WRITE", verbs.SendWR{ID: 4, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, AH: good,
			RemoteQPN: b.qp.QPN(), RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}},
		{"RDMA READ", verbs.SendWR{ID: 5, Opcode: verbs.WRRDMARead, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, AH: good,
			RemoteQPN: b.qp.QPN(), RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}},
		{"atomic", verbs.SendWR{ID: 6, Opcode: verbs.WRAtomicFetchAndAdd, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, AH: good,
			RemoteQPN: b.qp.QPN(), RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}},
	} {
		err := a.qp.PostSend(tc.wr)
		var pe *verbs.PostError
		if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%s: PostSend returned %v, want a *PostError at index 0 wrapping ErrInvalidArgument", tc.name, err)
		}
	}
	// In a chain, the good work request before the bad one is posted.
	err = a.qp.PostSend(wr(10, good), wr(11, dead), wr(12, good))
	var pe *verbs.PostError
	if !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("chain with a destroyed AH: %v, want a PostError at index 1", err)
	}
	a.sendWC(t, 10, verbs.WCSend)
	if wc := b.recvWCs(t, 1)[0]; wc.WRID != 1 || wc.SrcQP != a.qp.QPN() {
		t.Fatalf("receive: %+v", wc)
	}
	expectNoWC(t, a.scq, 20*time.Millisecond)
	expectNoWC(t, b.rcq, 0)
	if st := a.qp.State(); st != verbs.QPStateRTS {
		t.Fatalf("UD QP state %s after refused posts, want RTS", st)
	}
}

func TestCreateAHErrors(t *testing.T) {
	t.Parallel()
	ctx := openContext(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	peer := verbs.GIDFromIP(netip.MustParseAddr("127.0.0.1"))
	ok := verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer, SGIDIndex: 1, HopLimit: 64}}
	ah, err := pd.CreateAH(ok)
	if err != nil {
		t.Fatalf("CreateAH(%+v): %v", ok, err)
	}
	if ah.Attr() != ok {
		t.Errorf("Attr() = %+v, want %+v", ah.Attr(), ok)
	}
	ah.Destroy()
	for _, tc := range []struct {
		name string
		mod  func(*verbs.AHAttr)
	}{
		{"not global", func(a *verbs.AHAttr) { a.IsGlobal = false }},
		{"zero DGID", func(a *verbs.AHAttr) { a.GRH.DGID = verbs.GID{} }},
		{"source GID index 0 (link-local)", func(a *verbs.AHAttr) { a.GRH.SGIDIndex = 0 }},
		{"source GID index out of the table", func(a *verbs.AHAttr) { a.GRH.SGIDIndex = 2 }},
		{"IPv6 destination from an IPv4 device", func(a *verbs.AHAttr) {
			a.GRH.DGID = verbs.GIDFromIP(netip.MustParseAddr("::1"))
		}},
		{"port 2", func(a *verbs.AHAttr) { a.PortNum = 2 }},
	} {
		attr := ok
		tc.mod(&attr)
		if ah, err := pd.CreateAH(attr); !errors.Is(err, verbs.ErrInvalidArgument) || ah != nil {
			t.Errorf("%s: CreateAH returned %v, %v; want nil and ErrInvalidArgument", tc.name, ah, err)
		}
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateAH(ok); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("CreateAH after Close: %v, want ErrClosed", err)
	}
}

// TestUDIPv6 runs UD between two QPs of one device on ::1 (the RoCE port of
// ::1 can hold only one device): the GRH area then holds the IPv6 header,
// and a reply addressed from it comes back.
func TestUDIPv6(t *testing.T) {
	t.Parallel()
	dev, err := verbs.AddDevice(fmt.Sprintf("vt%d-v6", testDevs.Add(1)), netip.IPv6Loopback())
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultPairConfig()
	e, err := openEnd(dev, &cfg)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT) {
			t.Skipf("no soft device on [::1]: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	if !e.gid.IP().Is6() || e.gid.IP() != netip.IPv6Loopback() {
		t.Fatalf("GID %s, want ::1", e.gid)
	}
	retypeQP(t, e, verbs.QPTypeUD, nil, &cfg)
	if err := udToRTS(e.qp, udQKey, 1); err != nil {
		t.Fatal(err)
	}
	qp2, err := e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: e.scq, RecvCQ: e.rcq, Cap: cfg.Cap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp2.Destroy() })
	if err := udToRTS(qp2, udQKey, 2); err != nil {
		t.Fatal(err)
	}
	ah := ahTo(t, e.pd, e.gid)
	if err := qp2.PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{e.mr.SGE(0, verbs.GRHLen+100)}}); err != nil {
		t.Fatal(err)
	}
	fill(e.buf[8192:8192+100], 6)
	e.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSendWithImm, ImmData: 6, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{e.mr.SGE(8192, 100)}, AH: ah, RemoteQPN: qp2.QPN(), RemoteQKey: udQKey})
	e.sendWC(t, 2, verbs.WCSend)
	wc := e.recvWCs(t, 1)[0]
	checkWC(t, wc, 1, verbs.WCSuccess, verbs.WCRecv)
	if wc.QPNum != qp2.QPN() || wc.SrcQP != e.qp.QPN() || wc.ByteLen != verbs.GRHLen+100 || wc.Flags&verbs.WCFlagGRH == 0 || wc.ImmData != 6 {
		t.Fatalf("receive completion %+v", wc)
	}
	g := e.buf[:verbs.GRHLen]
	if g[0]>>4 != 6 {
		t.Fatalf("GRH version %d, want 6: % x", g[0]>>4, g)
	}
	if got, want := int(binary.BigEndian.Uint16(g[4:])), 8+udWirePayload(100, true); got != want {
		t.Errorf("IPv6 payload length %d, want %d", got, want)
	}
	if g[6] != 17 {
		t.Errorf("IPv6 next header %d, want 17", g[6])
	}
	if src, dst := netip.AddrFrom16([16]byte(g[8:24])), netip.AddrFrom16([16]byte(g[24:40])); src != netip.IPv6Loopback() || dst != netip.IPv6Loopback() {
		t.Errorf("IPv6 source %s destination %s, want ::1 both", src, dst)
	}
	checkBytes(t, "payload", e.buf[verbs.GRHLen:verbs.GRHLen+100], e.buf[8192:8192+100])
	back, err := e.pd.CreateAHFromWC(&wc, e.buf[:verbs.GRHLen], 1)
	if err != nil {
		t.Fatalf("CreateAHFromWC: %v", err)
	}
	defer back.Destroy()
	if back.Attr().GRH.DGID != e.gid {
		t.Fatalf("reply AH to %s, want %s", back.Attr().GRH.DGID, e.gid)
	}
	e.postRecv(t, 3, 16384, verbs.GRHLen+8)
	if err := qp2.PostSend(verbs.SendWR{ID: 4, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{e.mr.SGE(8192, 8)}, AH: back, RemoteQPN: wc.SrcQP, RemoteQKey: udQKey}); err != nil {
		t.Fatal(err)
	}
	checkWC(t, e.sendWCs(t, 1)[0], 4, verbs.WCSuccess, verbs.WCSend)
	if r := e.recvWCs(t, 1)[0]; r.WRID != 3 || r.Status != verbs.WCSuccess || r.SrcQP != qp2.QPN() || r.QPNum != e.qp.QPN() {
		t.Fatalf("reply completion %+v", r)
	}
	// An IPv4 destination from an IPv6 device.
	if _, err := e.pd.CreateAH(verbs.AHAttr{IsGlobal: true, GRH: verbs.GlobalRoute{
		DGID: verbs.GIDFromIP(netip.MustParseAddr("127.0.0.1")), SGIDIndex: 1}}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("CreateAH to IPv4 from IPv6: %v, want ErrInvalidArgument", err)
	}
}
