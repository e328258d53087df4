package engine

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// sliceCQ is a CompletionQueue for tests.
type sliceCQ struct {
	c   []Completion
	cap int
}

func (q *sliceCQ) Push(c Completion) bool {
	if q.cap > 0 && len(q.c) >= q.cap {
		return false
	}
	q.c = append(q.c, c)
	return true
}

func (q *sliceCQ) take() []Completion { c := q.c; q.c = nil; return c }

// queueLink records sent datagrams for the test to deliver.
type queueLink struct {
	q    []link.Datagram
	drop func(d link.Datagram) bool
}

func (l *queueLink) Send(b []link.Datagram) error {
	for _, d := range b {
		if l.drop != nil && l.drop(d) {
			continue
		}
		d.Buf, d.Payload = d.AppendBytes(nil), nil
		l.q = append(l.q, d)
	}
	return nil
}

func (l *queueLink) SourcePort(w uint16) uint16 { return w }

// pair is two hosts wired back to back with one RC QP each.
type pair struct {
	t          *testing.T
	now        time.Time
	ha, hb     *Host
	la, lb     *queueLink
	a, b       *QP
	acq, bcq   *sliceCQ // send CQs
	arq, brq   *sliceCQ // recv CQs
	mema, memb []byte
	mra, mrb   *MR
}

var (
	addrA = netip.MustParseAddr("127.0.0.1")
	addrB = netip.MustParseAddr("127.0.0.2")
)

func newPair(t *testing.T, access uint32) *pair {
	p := &pair{t: t, now: time.Unix(1000, 0)}
	p.la, p.lb = &queueLink{}, &queueLink{}
	p.ha = NewHost(HostConfig{Addr: addrA, Link: p.la, ICRC: wire.ICRCIPv4Strict})
	p.hb = NewHost(HostConfig{Addr: addrB, Link: p.lb, ICRC: wire.ICRCIPv4Strict})
	p.acq, p.bcq, p.arq, p.brq = &sliceCQ{}, &sliceCQ{}, &sliceCQ{}, &sliceCQ{}
	cfg := QPConfig{Type: QPTypeRC, PD: 1, MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInline: 64}
	cfg.SendCQ, cfg.RecvCQ = p.acq, p.arq
	var err error
	if p.a, err = p.ha.CreateQP(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.SendCQ, cfg.RecvCQ = p.bcq, p.brq
	if p.b, err = p.hb.CreateQP(cfg); err != nil {
		t.Fatal(err)
	}
	p.mema, p.memb = make([]byte, 1<<20), make([]byte, 1<<20)
	p.mra = p.ha.Mem().Register(1, p.mema, AccessLocalWrite|access)
	p.mrb = p.hb.Mem().Register(1, p.memb, AccessLocalWrite|access)
	connect(p.now, p.a, p.b, addrB, 0x100, 0x200, 1024)
	connect(p.now, p.b, p.a, addrA, 0x200, 0x100, 1024)
	return p
}

func connect(now time.Time, q, peer *QP, remote netip.Addr, sq, rq uint32, mtu int) {
	q.Modify(now, &Attr{State: StateInit, AccessFlags: AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic}, AttrState|AttrAccessFlags)
	q.Modify(now, &Attr{State: StateRTR, Remote: remote, PathMTU: mtu, DestQPN: peer.QPN(), RQPSN: rq,
		MaxDestRDAtomic: 16, MinRNRTimer: 12}, AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRDAtomic|AttrMinRNRTimer)
	q.Modify(now, &Attr{State: StateRTS, SQPSN: sq, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 16},
		AttrState|AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRDAtomic)
}

// run delivers packets and fires timers until nothing is left to do or
// the time limit passes.
func (p *pair) run(limit time.Duration) {
	end := p.now.Add(limit)
	for i := 0; i < 1_000_000 && p.now.Before(end); i++ {
		if len(p.la.q) > 0 || len(p.lb.q) > 0 {
			qa, qb := p.la.q, p.lb.q
			p.la.q, p.lb.q = nil, nil
			if len(qa) > 0 {
				p.hb.Receive(p.now, qa)
			}
			if len(qb) > 0 {
				p.ha.Receive(p.now, qb)
			}
			continue
		}
		var next time.Time
		for _, q := range []*QP{p.a, p.b} {
			if d, ok := q.Deadline(); ok && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
		if next.IsZero() || next.After(end) {
			return
		}
		p.now = next
		p.a.OnTimer(p.now)
		p.b.OnTimer(p.now)
	}
}

func (p *pair) sge(mr *MR, off, n int) []SGE {
	return []SGE{{Addr: mr.Addr + uint64(off), Length: uint32(n), LKey: mr.LKey}}
}

func TestSmokeSendWriteReadAtomic(t *testing.T) {
	p := newPair(t, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	for i := range 5000 {
		p.mema[i] = byte(i * 7)
	}
	if err := p.b.PostRecv(&RecvWR{ID: 77, SGL: p.sge(p.mrb, 0, 8192)}); err != nil {
		t.Fatal(err)
	}
	must(t, p.a.PostSend(p.now, &SendWR{ID: 1, Op: WRSendImm, Flags: SendSignaled, Imm: 0xdeadbeef, SGL: p.sge(p.mra, 0, 5000)}))
	p.run(time.Second)
	if c := p.brq.take(); len(c) != 1 || c[0].Status != 0 || c[0].ByteLen != 5000 || c[0].Imm != 0xdeadbeef || c[0].WRID != 77 {
		t.Fatalf("recv completion %+v", c)
	}
	if c := p.acq.take(); len(c) != 1 || c[0].Status != 0 || c[0].WRID != 1 {
		t.Fatalf("send completion %+v", c)
	}
	for i := range 5000 {
		if p.memb[i] != byte(i*7) {
			t.Fatalf("byte %d: %d", i, p.memb[i])
		}
	}
	// WRITE 3000 bytes to B at offset 100000.
	must(t, p.a.PostSend(p.now, &SendWR{ID: 2, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 3000), RemoteAddr: p.mrb.Addr + 100000, RKey: p.mrb.RKey}))
	// READ it back into A at 200000.
	must(t, p.a.PostSend(p.now, &SendWR{ID: 3, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 200000, 3000), RemoteAddr: p.mrb.Addr + 100000, RKey: p.mrb.RKey}))
	// FETCH_ADD on B's word at 8.
	wire.BTH(p.memb[8:20]).SetDestQP(0)
	for i := 8; i < 16; i++ {
		p.memb[i] = 0
	}
	p.memb[8] = 5
	must(t, p.a.PostSend(p.now, &SendWR{ID: 4, Op: WRFetchAdd, Flags: SendSignaled, SGL: p.sge(p.mra, 300000, 8), RemoteAddr: p.mrb.Addr + 8, RKey: p.mrb.RKey, CompareAdd: 10}))
	must(t, p.a.PostSend(p.now, &SendWR{ID: 5, Op: WRCompareSwap, Flags: SendSignaled, SGL: p.sge(p.mra, 300008, 8), RemoteAddr: p.mrb.Addr + 8, RKey: p.mrb.RKey, CompareAdd: 15, Swap: 99}))
	p.run(time.Second)
	c := p.acq.take()
	if len(c) != 4 {
		t.Fatalf("completions %+v", c)
	}
	for i, cc := range c {
		if cc.Status != 0 || cc.WRID != uint64(i+2) {
			t.Fatalf("completion %d: %+v", i, cc)
		}
	}
	for i := range 3000 {
		if p.memb[100000+i] != byte(i*7) || p.mema[200000+i] != byte(i*7) {
			t.Fatalf("write/read byte %d", i)
		}
	}
	if p.mema[300000] != 5 || p.mema[300008] != 15 || p.memb[8] != 99 {
		t.Fatalf("atomics: fetched %d, cmp got %d, final %d", p.mema[300000], p.mema[300008], p.memb[8])
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
