package engine

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestGSI: each host has one QP1 (UD, Q_Key 0x80010000 without being set);
// a MAD sent from it with a controlled Q_Key carries DETH source QP 1 and
// Q_Key 0x80010000 to destination QP 1, P_Key 0xFFFF, and arrives with the
// GRH area and SrcQP 1; a wrong Q_Key is dropped; ordinary QPs never get
// QPN 1.
func TestGSI(t *testing.T) {
	p := newPairOf(t, QPTypeUD, addrA, addrB, nil, nil)
	gcq := [2]*sliceCQ{{}, {}}
	var g [2]*QP
	for i, h := range []*Host{p.ha, p.hb} {
		q, err := h.CreateGSI(QPConfig{Type: QPTypeUD, PD: 1, MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInline: 256, SendCQ: gcq[i], RecvCQ: gcq[i]})
		must(t, err)
		if q.QPN() != GSIQPN || q.Attr().QKey != GSIQKey {
			t.Fatalf("GSI QP %d qkey %#x", q.QPN(), q.Attr().QKey)
		}
		q.Modify(p.now, &Attr{State: StateInit}, AttrState)
		q.Modify(p.now, &Attr{State: StateRTR}, AttrState)
		q.Modify(p.now, &Attr{State: StateRTS}, AttrState)
		g[i] = q
		if _, err := h.CreateGSI(QPConfig{Type: QPTypeUD, MaxSendWR: 1}); !errors.Is(err, ErrGSIExists) {
			t.Fatalf("second CreateGSI: %v", err)
		}
	}
	if _, err := p.ha.CreateGSI(QPConfig{Type: QPTypeRC, MaxSendWR: 1}); err == nil {
		t.Fatal("RC GSI QP created")
	}
	for range 100 {
		q, err := p.ha.CreateQP(QPConfig{Type: QPTypeUD, MaxSendWR: 1})
		must(t, err)
		if q.QPN() <= 1 {
			t.Fatalf("CreateQP gave QPN %d", q.QPN())
		}
	}
	mad := make([]byte, 256)
	fill(mad, 9)
	must(t, p.b.PostRecv(&RecvWR{ID: 1, SGL: p.sge(p.mrb, 0, 4096)}))
	must(t, g[1].PostRecv(&RecvWR{ID: 2, SGL: p.sge(p.mrb, 8192, GRHLen+256)}))
	c := p.capture()
	send := func(qkey uint32) {
		t.Helper()
		copy(p.mema[0:256], mad)
		must(t, g[0].PostSend(p.now, &SendWR{ID: 7, Op: WRSend, Flags: SendInline, SGL: p.sge(p.mra, 0, 256),
			AV: &AV{Remote: addrB}, RemoteQPN: GSIQPN, RemoteQKey: qkey}))
		p.run(time.Second)
	}
	send(0x80000000) // "use the QP's own Q_Key"
	pk := c.sent(true)
	if len(pk) != 1 {
		t.Fatalf("sent:\n%s", c.dump())
	}
	s := pk[0]
	if s.p.BTH.Opcode() != 0x64 || s.p.BTH.PKey() != 0xFFFF || s.p.BTH.DestQP() != 1 || s.p.DETH().QKey() != GSIQKey ||
		s.p.DETH().SrcQP() != 1 || !bytes.Equal(s.p.Payload, mad) || len(s.d.Buf) != 280 {
		t.Fatalf("MAD packet % x", s.d.Buf)
	}
	rc := gcq[1].take()
	checkWCs(t, "GSI recv", rc, wc{2, StatusSuccess})
	if rc[0].SrcQP != 1 || rc[0].QPN != 1 || rc[0].ByteLen != GRHLen+256 || rc[0].Flags&WCFlagGRH == 0 {
		t.Fatalf("completion %+v", rc[0])
	}
	checkGRH(t, p.memb[8192:8192+GRHLen], addrA, addrB, len(s.d.Buf))
	if !bytes.Equal(p.memb[8192+GRHLen:8192+GRHLen+256], mad) {
		t.Fatal("MAD damaged")
	}
	if len(p.brq.take()) != 0 {
		t.Fatal("an ordinary QP received the MAD")
	}
	// A wrong Q_Key is dropped and counted.
	must(t, g[1].PostRecv(&RecvWR{ID: 3, SGL: p.sge(p.mrb, 8192, GRHLen+256)}))
	drops := p.hb.Stats().DropQKey.Load()
	send(0x1234)
	if len(gcq[1].take()) != 0 || p.hb.Stats().DropQKey.Load() != drops+1 {
		t.Fatal("MAD with a wrong Q_Key delivered")
	}
	// After DestroyQP the number is free again.
	p.ha.DestroyQP(g[0])
	if q, err := p.ha.CreateGSI(QPConfig{Type: QPTypeUD, MaxSendWR: 1}); err != nil || q.QPN() != 1 {
		t.Fatalf("CreateGSI after destroy: %v", err)
	}
}
