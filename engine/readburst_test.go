package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

// Tests of READ responses in bursts (HostConfig.ReadBurst): a long READ is
// answered a burst at a time, the rest from OnTimer, and what arrives
// meanwhile is dropped and asked for again with a sequence NAK.

// A long READ with a SEND, a WRITE and another READ queued behind it: every
// READ response goes out in bursts of 4, the three requests behind are
// dropped once and resent after the sequence NAK, and everything completes
// in order with the right bytes.
func TestReadBurst(t *testing.T) {
	p := newPairOf(t, QPTypeRC, addrA, addrB, func(c *HostConfig) { c.ReadBurst = 4 }, nil)
	fill(p.memb, 0x21)
	fill(p.mema, 0x43)
	c := p.capture()
	const n = 50*1024 + 17
	p.recvB(9, p.mrb, 900000, 4096)
	p.postA(SendWR{ID: 1, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 0, n), RemoteAddr: p.mrb.Addr + 1000, RKey: p.mrb.RKey})
	p.postA(SendWR{ID: 2, Op: WRSend, Flags: SendSignaled, SGL: p.sge(p.mra, 200000, 3000)})
	p.postA(SendWR{ID: 3, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 300000, 2000), RemoteAddr: p.mrb.Addr + 500000, RKey: p.mrb.RKey})
	p.postA(SendWR{ID: 4, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 400000, 5000), RemoteAddr: p.mrb.Addr + 600000, RKey: p.mrb.RKey})
	want := clone(p.memb)
	copy(want[900000:], p.mema[200000:203000])
	copy(want[500000:], p.mema[300000:302000])
	p.run(time.Second)
	checkWCs(t, "A", p.acq.take(), wc{1, StatusSuccess}, wc{2, StatusSuccess}, wc{3, StatusSuccess}, wc{4, StatusSuccess})
	checkWCs(t, "B", p.brq.take(), wc{9, StatusSuccess})
	if !bytes.Equal(p.mema[:n], p.memb[1000:1000+n]) || !bytes.Equal(p.mema[400000:405000], p.memb[600000:605000]) {
		t.Fatal("READ data wrong")
	}
	if !bytes.Equal(p.memb, want) {
		t.Fatal("SEND or WRITE data wrong")
	}
	// The responses of the first READ came in bursts of 4, one receive
	// or timer event each.
	resp := c.sent(false, wire.RCReadResponseFirst, wire.RCReadResponseMiddle, wire.RCReadResponseLast, wire.RCReadResponseOnly)
	if len(resp) != 51+5 {
		t.Fatalf("%d READ responses:\n%s", len(resp), c.dump())
	}
	if got := p.hb.Stats().DropResponding.Load(); got == 0 {
		t.Fatal("nothing dropped while responding")
	}
	if naks := c.acks(false, wire.SyndromePSNSeqErr); len(naks) == 0 {
		t.Fatalf("no sequence NAK after the READ:\n%s", c.dump())
	}
	if p.a.State() != StateRTS || p.b.State() != StateRTS {
		t.Fatal("QPs left RTS")
	}
}

// An MR deregistered while its READ is being answered: the next burst finds
// the R_Key gone and answers with a remote access NAK.
func TestReadBurstMRGone(t *testing.T) {
	p := newPairOf(t, QPTypeRC, addrA, addrB, func(c *HostConfig) { c.ReadBurst = 4 }, nil)
	c := p.capture()
	p.postA(SendWR{ID: 1, Op: WRRead, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 20*1024), RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey})
	// Deliver the request, then deregister before the next burst.
	q := p.la.q
	p.la.q = nil
	p.hb.Receive(p.now, q)
	if d, ok := p.b.Deadline(); !ok || !d.Equal(p.now) {
		t.Fatalf("no burst due: %v %v", d, ok)
	}
	p.hb.Mem().Deregister(p.mrb)
	p.run(time.Second)
	checkWCs(t, "A", p.acq.take(), wc{1, StatusRemAccessErr})
	if got := len(c.sent(false, wire.RCReadResponseFirst, wire.RCReadResponseMiddle)); got != 4 {
		t.Fatalf("%d responses before the NAK:\n%s", got, c.dump())
	}
	if p.b.State() != StateErr {
		t.Fatal("responder not in ERR")
	}
}

// 3b. A peer with a granted R_Key asks for 64 READs of 64 MiB in one
// receive batch, the legitimate pair's SEND behind them: the receive path
// sends one burst (the requests behind it are dropped, counted) and goes on
// to the legitimate SEND, which completes while the READ is still being
// answered; the READ's responses then come from the timer.
func TestHostileReadStall(t *testing.T) {
	h := newHostile(t)
	big := make([]byte, 64<<20)
	mr := h.hb.Mem().Register(1, big, AccessLocalWrite|AccessRemoteRead)
	start := ePSN(h.v)
	for i := range 64 {
		b := h.packet(wire.RCReadRequest, 0)
		wire.RETH(b[wire.BTHLen:]).Encode(mr.Addr, mr.RKey, 64<<20)
		h.put(b, wire.RCReadRequest, h.v.QPN(), start.Add(i*(64<<10)), addrA)
	}
	h.recvB(1, h.mrb, 0, 4096)
	h.postA(SendWR{ID: 1, Op: WRSend, Flags: SendSignaled, SGL: h.sge(h.mra, 0, 100)})
	h.batch = append(h.batch, h.la.q...)
	h.la.q = nil
	t0 := time.Now()
	h.hb.Receive(h.now, h.batch)
	took := time.Since(t0)
	h.batch = h.batch[:0]
	if h.toA != 256 {
		t.Errorf("one receive batch made %d READ responses, want one burst (256)", h.toA)
	}
	if c := h.v.Counters(); c.DropResponding != 63 {
		t.Errorf("%d requests dropped while responding, want 63", c.DropResponding)
	}
	t.Logf("receive batch with 64 READs of 64 MiB: %v", took)
	// The legitimate SEND got through in the same batch.
	h.ha.Receive(h.now, h.lb.q)
	h.lb.q = nil
	checkWCs(t, "legitimate B", h.brq.take(), wc{1, StatusSuccess})
	checkWCs(t, "legitimate A", h.acq.take(), wc{1, StatusSuccess})
	// The READ goes on from the timer, a burst per call.
	for i := 0; ; i++ {
		d, ok := h.v.Deadline()
		if !ok {
			break
		}
		if i > 1<<20 {
			t.Fatal("READ never finished")
		}
		h.v.OnTimer(d)
	}
	if want := 64 << 20 >> 10; h.toA != want+1 { // every response, then the sequence NAK
		t.Errorf("%d packets to the reader, want %d responses and a NAK", h.toA, want)
	}
}

// The simulation with bursts of 3 READ responses: long READs are paced and
// requests behind them resent, under loss, reordering and duplication.
func TestSimReadBurst(t *testing.T) {
	cfg := defaultSimConfig(301, simDeterminismWRs)
	cfg.readBurst = 3
	r := runSim(t, cfg)
	t.Logf("%s", r)
}
