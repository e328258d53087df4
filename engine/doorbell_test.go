package engine

import (
	"github.com/rdma-go/rdma-go/link"
	"testing"
	"time"
)

// TestPostSendDeferred: deferred posts stay queued until FlushPosts, which
// sends every QP's in one batch, in order; a deferred WQE also leaves when
// something else moves the send queue (an ACK, a later PostSendList), and a
// QP destroyed while on the doorbell list is skipped without harm.
func TestPostSendDeferred(t *testing.T) {
	p := newPair(t, AccessRemoteWrite)
	for i := range 4096 {
		p.mema[i] = byte(i * 3)
	}
	sends := 0
	countingLink := &countLink{queueLink: p.la, sends: &sends}
	p.ha.cfg.Link = countingLink

	// A second QP pair between the same hosts.
	cfg := QPConfig{Type: QPTypeRC, PD: 1, MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, SendCQ: p.acq, RecvCQ: p.arq}
	a2, err := p.ha.CreateQP(cfg)
	must(t, err)
	cfg.SendCQ, cfg.RecvCQ = p.bcq, p.brq
	b2, err := p.hb.CreateQP(cfg)
	must(t, err)
	connect(p.now, a2, b2, addrB, 0x300, 0x400, 1024)
	connect(p.now, b2, a2, addrA, 0x400, 0x300, 1024)

	write := func(id uint64, off int) SendWR {
		return SendWR{ID: id, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, off, 512),
			RemoteAddr: p.mrb.Addr + uint64(off), RKey: p.mrb.RKey}
	}
	deferred := func(q *QP, wrs ...SendWR) bool {
		t.Helper()
		n, waits, err := q.PostSendDeferred(p.now, wrs)
		if n != len(wrs) || err != nil {
			t.Fatalf("PostSendDeferred = %d, %v; want %d, nil", n, err, len(wrs))
		}
		return waits
	}
	// A post to an idle QP goes out at once: nothing would join it.
	if deferred(p.a, write(1, 0)) || deferred(a2, write(2, 512)) {
		t.Fatal("a post to an idle QP reports that it waits for FlushPosts")
	}
	if len(p.la.q) != 2 || sends != 2 {
		t.Fatalf("posts to idle QPs: %d datagrams in %d sends, want 2 in 2", len(p.la.q), sends)
	}
	delivered := p.la.q
	p.la.q, sends = nil, 0
	// Behind outstanding ones, posts wait for FlushPosts.
	if !deferred(p.a, write(3, 1024), write(4, 1536)) || !deferred(a2, write(5, 2048)) || !deferred(p.a, write(6, 2560)) {
		t.Fatal("a post behind outstanding ones does not report that it waits for FlushPosts")
	}
	if len(p.la.q) != 0 || sends != 0 {
		t.Fatalf("deferred posts sent before FlushPosts: %d datagrams in %d sends", len(p.la.q), sends)
	}
	if got := len(p.ha.doorbell); got != 2 {
		t.Fatalf("doorbell lists %d QPs, want 2 (each once)", got)
	}
	p.ha.FlushPosts(p.now)
	if len(p.la.q) != 4 || sends != 1 {
		t.Fatalf("FlushPosts sent %d datagrams in %d sends, want 4 in 1", len(p.la.q), sends)
	}
	p.la.q = append(delivered, p.la.q...)
	p.ha.FlushPosts(p.now) // nothing left: no send
	if sends != 1 {
		t.Fatalf("an empty FlushPosts sent (%d sends)", sends)
	}
	p.run(time.Second)
	got := map[uint64]bool{}
	for _, c := range p.acq.take() {
		if c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
		got[c.WRID] = true
	}
	if len(got) != 6 {
		t.Fatalf("completions for %v, want 1–6", got)
	}
	for i := range 3072 {
		if p.memb[i] != byte(i*3) {
			t.Fatalf("byte %d not written", i)
		}
	}

	// A later PostSendList sends what was deferred before it, in order.
	deferred(p.a, write(7, 3072))
	deferred(p.a, write(8, 3584))
	if _, err := p.a.PostSendList(p.now, []SendWR{write(9, 3584)}); err != nil {
		t.Fatal(err)
	}
	if len(p.la.q) != 3 {
		t.Fatalf("PostSendList after a deferred post sent %d datagrams, want 3", len(p.la.q))
	}
	p.run(time.Second)
	if c := p.acq.take(); len(c) != 3 || c[0].WRID != 7 || c[1].WRID != 8 || c[2].WRID != 9 {
		t.Fatalf("completions %+v, want 7, 8, 9", c)
	}
	p.ha.FlushPosts(p.now) // a's stale doorbell entry: nothing to send
	if len(p.la.q) != 0 {
		t.Fatalf("stale doorbell entry sent %d datagrams", len(p.la.q))
	}

	// Destroyed while on the doorbell list.
	deferred(a2, write(10, 0))
	deferred(a2, write(11, 512))
	p.la.q = nil
	p.ha.DestroyQP(a2)
	p.ha.FlushPosts(p.now)
	if len(p.la.q) != 0 {
		t.Fatalf("a destroyed QP's deferred post went out: %d datagrams", len(p.la.q))
	}
}

// countLink counts Send calls.
type countLink struct {
	*queueLink
	sends *int
}

func (l *countLink) Send(b []link.Datagram) error {
	*l.sends++
	return l.queueLink.Send(b)
}
