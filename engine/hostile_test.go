package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// Tests of hostile peers: a peer that floods SENDs with no receive posted,
// forges PSNs and QPNs, asks for more READs and atomics than
// max_dest_rd_atomic, or guesses R_Keys and addresses. Each attack is a
// stream of hostilePackets crafted packets (valid ICRCs) into the victim
// device, B, between which a legitimate QP pair on the same devices keeps
// transferring; each checks that the device's memory did not grow, that
// every hostile packet was counted, and that no byte outside what the
// attacker was granted changed.

// hostile is the victim world: the legitimate pair p (p.a on A, p.b on B),
// and on B an attacked RC QP v (its peer vPeer on A, whose address the
// attacker spoofs), a UD QP and a UC QP; and B's memory: an MR with remote
// access between two guard pages, and an MR of another PD.
type hostile struct {
	*pair
	v, vPeer    *QP
	vcq         *sliceCQ
	ud, uc      *QP
	ucPeer      *QP
	mem         []byte // guard | MR | guard
	mr, otherPD *MR
	rng         *rand.Rand
	evil        netip.Addr // an address that is no one's peer
	bufs        [][]byte   // packet buffers reused batch after batch
	batch       []link.Datagram
	pad         int // pad count of the packet being built
	toA         int // packets B sent to A's QPs other than p.a
	legit       int // legitimate messages A sent B during the attack
}

const guard = 4096

func newHostile(t *testing.T) *hostile {
	h := &hostile{pair: newPair(t, allRemote), rng: rand.New(rand.NewPCG(7, 8)), evil: netip.MustParseAddr("127.0.0.66")}
	p := h.pair
	h.vcq = &sliceCQ{}
	rc := QPConfig{Type: QPTypeRC, PD: 1, MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: h.vcq, RecvCQ: h.vcq}
	var err error
	h.v, err = p.hb.CreateQP(rc)
	must(t, err)
	h.vPeer, err = p.ha.CreateQP(rc)
	must(t, err)
	connect(p.now, h.v, h.vPeer, addrA, 0x300, 0x500, 1024)
	connect(p.now, h.vPeer, h.v, addrB, 0x500, 0x300, 1024)
	ud := rc
	ud.Type = QPTypeUD
	h.ud, err = p.hb.CreateQP(ud)
	must(t, err)
	udReady(p.now, h.ud, udQKey)
	uc := rc
	uc.Type = QPTypeUC
	h.uc, err = p.hb.CreateQP(uc)
	must(t, err)
	h.ucPeer, err = p.ha.CreateQP(uc)
	must(t, err)
	connect(p.now, h.uc, h.ucPeer, addrA, 0x700, 0x900, 1024)
	connect(p.now, h.ucPeer, h.uc, addrB, 0x900, 0x700, 1024)

	h.mem = make([]byte, guard+4096+guard)
	fill(h.mem, 0x5A)
	h.mr = p.hb.Mem().Register(1, h.mem[guard:guard+4096], AccessLocalWrite|allRemote)
	h.otherPD = p.hb.Mem().Register(2, make([]byte, 4096), AccessLocalWrite|allRemote)

	// What B sends to the QPs the attacker spoofs goes to A, which has
	// nothing outstanding on them; it is counted and not delivered.
	p.lb.drop = func(d link.Datagram) bool {
		if wire.BTH(d.Buf).DestQP() != p.a.QPN() {
			h.toA++
			return true
		}
		return false
	}
	h.bufs = make([][]byte, 64)
	for i := range h.bufs {
		h.bufs[i] = make([]byte, maxPacket)
	}
	return h
}

// packet returns the next packet buffer of the batch, for opcode op with an
// n-byte payload; put seals it.
func (h *hostile) packet(op wire.Opcode, n int) []byte {
	if len(h.batch) == len(h.bufs) {
		h.flushBatch()
	}
	b := h.bufs[len(h.batch)][:wire.PacketLen(op, n)]
	clear(b)
	h.pad = wire.Pad(n)
	return b
}

// put seals b (BTH for op, qpn, psn already in it or written here) as sent
// from src to B and queues it.
func (h *hostile) put(b []byte, op wire.Opcode, qpn uint32, psn wire.PSN, src netip.Addr) {
	wire.BTH(b).Encode(op, false, h.pad, qpn, true, psn)
	wire.PutICRC(src, addrB, 0xC000, link.RoCEPort, b)
	h.batch = append(h.batch, link.Datagram{Buf: b, Src: netip.AddrPortFrom(src, 0xC000), Dst: netip.AddrPortFrom(addrB, link.RoCEPort)})
}

// flushBatch hands the batch to B and lets both devices answer.
func (h *hostile) flushBatch() {
	if len(h.batch) == 0 {
		return
	}
	h.hb.Receive(h.now, h.batch)
	h.batch = h.batch[:0]
	h.run(time.Millisecond)
}

// legitimate sends a 3000-byte SEND and a 2000-byte WRITE from A to B on
// the legitimate pair, in the same receive batch as the hostile packets
// built so far, and checks that both arrive intact and complete.
func (h *hostile) legitimate() {
	t := h.t
	t.Helper()
	h.legit++
	seed := byte(h.legit)
	fill(h.mema[:5000], seed)
	h.recvB(uint64(h.legit), h.mrb, 0, 4096)
	h.postA(SendWR{ID: uint64(h.legit), Op: WRSend, Flags: SendSignaled, SGL: h.sge(h.mra, 0, 3000)})
	h.postA(SendWR{ID: uint64(h.legit) << 32, Op: WRWrite, Flags: SendSignaled, SGL: h.sge(h.mra, 3000, 2000),
		RemoteAddr: h.mrb.Addr + 8192, RKey: h.mrb.RKey})
	// A's packets go in among the hostile ones, in their order.
	pos := 0
	for _, d := range h.la.q {
		pos += h.rng.IntN(len(h.batch) - pos + 1)
		h.batch = append(h.batch[:pos], append([]link.Datagram{d}, h.batch[pos:]...)...)
		pos++
	}
	h.la.q = nil
	h.flushBatch()
	h.run(10 * time.Second)
	checkWCs(t, "legitimate A", h.acq.take(), wc{uint64(h.legit), StatusSuccess}, wc{uint64(h.legit) << 32, StatusSuccess})
	checkWCs(t, "legitimate B", h.brq.take(), wc{uint64(h.legit), StatusSuccess})
	if !bytes.Equal(h.memb[:3000], h.mema[:3000]) || !bytes.Equal(h.memb[8192:10192], h.mema[3000:5000]) {
		t.Fatalf("legitimate message %d damaged", h.legit)
	}
}

// attack runs gen n times, a legitimate exchange every 10,000 packets, and
// checks that B's heap did not grow by more than a few MiB.
func (h *hostile) attack(n int, gen func(i int)) {
	t := h.t
	t.Helper()
	before := heapInuse()
	for i := range n {
		gen(i)
		if i%10000 == 9999 {
			h.legitimate()
		}
	}
	h.legitimate()
	after := heapInuse()
	t.Logf("%d packets: heap in use %d KiB before, %d KiB after", n, before>>10, after>>10)
	if after > before+4<<20 {
		t.Errorf("heap grew by %d KiB under %d hostile packets", (after-before)>>10, n)
	}
	if h.a.State() != StateRTS || h.b.State() != StateRTS {
		t.Errorf("legitimate QPs left RTS: %d %d", h.a.State(), h.b.State())
	}
	// Nothing outside the MR changed.
	want := make([]byte, len(h.mem))
	fill(want, 0x5A)
	if !bytes.Equal(h.mem[:guard], want[:guard]) || !bytes.Equal(h.mem[guard+4096:], want[guard+4096:]) {
		t.Error("memory around the MR changed")
	}
}

func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// ePSN returns q's next expected PSN.
func ePSN(q *QP) wire.PSN {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rsp.ePSN
}

// 1. SENDs with no receive posted: RC answers each with an RNR NAK (the
// message is not kept), UC and UD drop them; all counted.
func TestHostileSendFlood(t *testing.T) {
	t.Run("RC", func(t *testing.T) {
		h := newHostile(t)
		psn := ePSN(h.v)
		h.attack(hostilePackets, func(i int) {
			op := wire.RCSendOnly
			n := 1 + i%1024
			if i%3 == 0 {
				op, n = wire.RCSendFirst, 1024
			}
			b := h.packet(op, n)
			h.put(b, op, h.v.QPN(), psn, addrA)
		})
		c := h.v.Counters()
		if c.RNRNAKsSent != hostilePackets || c.Received != hostilePackets || h.toA != hostilePackets {
			t.Errorf("RNR NAKs %d, received %d, sent to A %d; want %d each", c.RNRNAKsSent, c.Received, h.toA, hostilePackets)
		}
		if h.v.State() != StateRTS || ePSN(h.v) != psn || len(h.vcq.c) != 0 || h.v.rsp.kind != msgNone {
			t.Errorf("attacked QP: state %d, ePSN %#x, %d completions", h.v.State(), uint32(ePSN(h.v)), len(h.vcq.c))
		}
	})
	t.Run("UD", func(t *testing.T) {
		h := newHostile(t)
		h.attack(hostilePackets, func(i int) {
			op := wire.UDSendOnly
			n := i % 1024
			b := h.packet(op, n)
			qkey := uint32(udQKey)
			if i%4 == 0 {
				qkey = h.rng.Uint32()
			}
			wire.DETH(b[wire.BTHLen:]).Encode(qkey, uint32(i)&0xFFFFFF)
			src := h.evil
			if i%2 == 0 {
				src = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			}
			h.put(b, op, h.ud.QPN(), wire.PSN(i), src)
		})
		c := h.ud.Counters()
		if c.DropNoRecv+c.DropQKey != hostilePackets || c.DropQKey != hostilePackets/4 {
			t.Errorf("UD: %d dropped without a receive, %d for their Q_Key; want %d in all", c.DropNoRecv, c.DropQKey, hostilePackets)
		}
		if h.toA != 0 {
			t.Errorf("UD answered %d times", h.toA)
		}
	})
	t.Run("UC", func(t *testing.T) {
		h := newHostile(t)
		h.attack(hostilePackets, func(i int) {
			ops := []wire.Opcode{wire.UCSendOnly, wire.UCSendFirst, wire.UCSendMiddle, wire.UCSendLast}
			op := ops[i%4]
			n := 1024
			if op == wire.UCSendOnly || op == wire.UCSendLast {
				n = 1 + i%1024
			}
			b := h.packet(op, n)
			h.put(b, op, h.uc.QPN(), wire.PSN(0x700+i), addrA)
		})
		c := h.uc.Counters()
		if c.DropNoRecv+c.DropOutOfSequence+c.DropUCMessage != hostilePackets || c.DropNoRecv != hostilePackets/2 {
			t.Errorf("UC: %d without a receive, %d out of sequence, %d abandoned; want %d in all",
				c.DropNoRecv, c.DropOutOfSequence, c.DropUCMessage, hostilePackets)
		}
		if h.toA != 0 || h.uc.State() != StateRTS {
			t.Errorf("UC answered %d times, state %d", h.toA, h.uc.State())
		}
	})
}

// 2. Forged PSNs, far ahead and behind, on the legitimate QP itself (from
// its peer's address), and unknown QPNs: dropped or answered as duplicates,
// counted, and the legitimate transfers go on undisturbed.
func TestHostileForgedPSNs(t *testing.T) {
	h := newHostile(t)
	evil := bytes.Repeat([]byte{0xEE}, 1024)
	var ahead, behind, unknown int
	h.attack(hostilePackets, func(i int) {
		e := ePSN(h.b)
		var psn wire.PSN
		var dst uint32
		switch i % 3 {
		case 0:
			psn, dst = e.Add(2+h.rng.IntN(1<<22)), h.b.QPN()
			ahead++
		case 1:
			psn, dst = e.Add(-1-h.rng.IntN(1<<22)), h.b.QPN()
			behind++
		default:
			psn, dst = wire.PSN(h.rng.Uint32()), 0x1000+h.rng.Uint32N(0xFFF000)
			unknown++
		}
		switch i % 4 {
		case 0, 1:
			b := h.packet(wire.RCWriteOnly, 1024)
			wire.RETH(b[wire.BTHLen:]).Encode(h.mrb.Addr+uint64(h.rng.IntN(1<<19)), h.mrb.RKey, 1024)
			copy(b[wire.RCWriteOnly.HdrLen():], evil)
			h.put(b, wire.RCWriteOnly, dst, psn, addrA)
		case 2:
			b := h.packet(wire.RCSendOnly, 1024)
			copy(b[wire.RCSendOnly.HdrLen():], evil)
			h.put(b, wire.RCSendOnly, dst, psn, addrA)
		default:
			b := h.packet(wire.RCReadRequest, 0)
			wire.RETH(b[wire.BTHLen:]).Encode(h.mrb.Addr, h.mrb.RKey, 1<<16)
			h.put(b, wire.RCReadRequest, dst, psn, addrA)
		}
	})
	c, dev := h.b.Counters(), h.hb.Counters()
	t.Logf("B: %+v", c)
	if c.DropOutOfSequence != uint64(ahead) || c.Duplicates < uint64(behind) || dev.DropUnknownQP != uint64(unknown) {
		t.Errorf("out of sequence %d (want %d), duplicates %d (want ≥ %d), unknown QP %d (want %d)",
			c.DropOutOfSequence, ahead, c.Duplicates, behind, dev.DropUnknownQP, unknown)
	}
	if c.RequestErrors != 0 || h.b.State() != StateRTS {
		t.Errorf("legitimate responder: %d request errors, state %d", c.RequestErrors, h.b.State())
	}
	if bytes.Contains(h.memb, evil[:16]) {
		t.Error("a forged WRITE or SEND landed")
	}
}

// 3. More READs and atomics than max_dest_rd_atomic: each is answered at
// once (the responder keeps no queue; as rxe, it recycles its
// max_dest_rd_atomic resources), so the resources stay bounded; a replay
// of a request whose resource was recycled is dropped and counted, and an
// atomic is never executed twice. With max_dest_rd_atomic 0, a READ is an
// invalid request.
func TestHostileReadFlood(t *testing.T) {
	h := newHostile(t)
	const rd = 4
	h.v.Modify(h.now, &Attr{MaxDestRDAtomic: rd}, AttrMaxDestRDAtomic)
	word := h.mr.Addr + 64
	start := ePSN(h.v)
	var reads, atomics int
	h.attack(hostilePackets, func(i int) {
		psn := start.Add(i)
		if i%8 == 7 {
			b := h.packet(wire.RCFetchAdd, 0)
			wire.AtomicETH(b[wire.BTHLen:]).Encode(word, h.mr.RKey, 1, 0)
			h.put(b, wire.RCFetchAdd, h.v.QPN(), psn, addrA)
			atomics++
			return
		}
		b := h.packet(wire.RCReadRequest, 0)
		wire.RETH(b[wire.BTHLen:]).Encode(h.mr.Addr+uint64(i%64), h.mr.RKey, uint32(1+i%256))
		h.put(b, wire.RCReadRequest, h.v.QPN(), psn, addrA)
		reads++
		if n := len(h.v.rsp.res); n != 0 && n != rd { // made at the first READ answered
			t.Fatalf("%d responder resources", n)
		}
	})
	if n := len(h.v.rsp.res); n != rd {
		t.Fatalf("%d responder resources after %d READs", n, reads)
	}
	if got := binary.NativeEndian.Uint64(h.mem[guard+64:]); got != binary.NativeEndian.Uint64(bytesOf(0x5A, guard+64, 8))+uint64(atomics) {
		t.Errorf("atomic word %#x after %d fetch-adds", got, atomics)
	}
	// Replays: the oldest requests' resources are gone (dropped, counted),
	// the newest are answered again; no atomic runs twice.
	before := h.v.Counters()
	for i := range 64 {
		psn := start.Add(i)
		if i%8 == 7 {
			b := h.packet(wire.RCFetchAdd, 0)
			wire.AtomicETH(b[wire.BTHLen:]).Encode(word, h.mr.RKey, 1, 0)
			h.put(b, wire.RCFetchAdd, h.v.QPN(), psn, addrA)
			continue
		}
		b := h.packet(wire.RCReadRequest, 0)
		wire.RETH(b[wire.BTHLen:]).Encode(h.mr.Addr+uint64(i%64), h.mr.RKey, uint32(1+i%256))
		h.put(b, wire.RCReadRequest, h.v.QPN(), psn, addrA)
	}
	h.flushBatch()
	after := h.v.Counters()
	if after.DropDuplicate-before.DropDuplicate != 64 || after.Duplicates-before.Duplicates != 64 {
		t.Errorf("replays: %d duplicates, %d dropped; want 64 and 64", after.Duplicates-before.Duplicates, after.DropDuplicate-before.DropDuplicate)
	}
	if got := binary.NativeEndian.Uint64(h.mem[guard+64:]); got != binary.NativeEndian.Uint64(bytesOf(0x5A, guard+64, 8))+uint64(atomics) {
		t.Errorf("an atomic ran twice: word %#x", got)
	}
	if h.v.State() != StateRTS || after.RequestErrors != 0 {
		t.Errorf("state %d, %d request errors", h.v.State(), after.RequestErrors)
	}

	// max_dest_rd_atomic 0: READs are invalid requests.
	h.v.Modify(h.now, &Attr{MaxDestRDAtomic: 0}, AttrMaxDestRDAtomic)
	b := h.packet(wire.RCReadRequest, 0)
	wire.RETH(b[wire.BTHLen:]).Encode(h.mr.Addr, h.mr.RKey, 8)
	h.put(b, wire.RCReadRequest, h.v.QPN(), ePSN(h.v), addrA)
	h.flushBatch()
	if c := h.v.Counters(); c.InvalidRequestNAKsSent != 1 || h.v.State() != StateErr {
		t.Errorf("READ with max_dest_rd_atomic 0: %d invalid request NAKs, state %d", c.InvalidRequestNAKsSent, h.v.State())
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func bytesOf(seed byte, off, n int) []byte {
	b := make([]byte, off+n)
	fill(b, seed)
	return b[off:]
}

// 4. Guessed R_Keys and addresses outside the MR: each is a remote access
// NAK (the QP goes to ERR, as it must; the test resets it for the next
// guess), counted, and no byte is read or written outside the grant.
func TestHostileKeyGuessing(t *testing.T) {
	h := newHostile(t)
	mrStart, mrEnd := h.mr.Addr, h.mr.Addr+4096
	reset := func() {
		h.flushBatch()
		if h.v.State() == StateRTS {
			return
		}
		h.v.Modify(h.now, &Attr{State: StateReset}, AttrState)
		connect(h.now, h.v, h.vPeer, addrA, 0x300, 0x500, 1024)
	}
	readResponses := 0
	lbDrop := h.lb.drop
	h.lb.drop = func(d link.Datagram) bool {
		if op := wire.BTH(d.Buf).Opcode(); op >= wire.RCReadResponseFirst && op <= wire.RCReadResponseOnly || op == wire.RCAtomicAck {
			readResponses++
		}
		return lbDrop(d)
	}
	guesses := hostilePackets / 10 // each needs a QP reset
	var kinds [6]int
	h.attack(guesses, func(i int) {
		reset()
		// An R_Key and a range: a random key, or the MR's with a range
		// that starts before it, ends after it, or straddles an end, or
		// the key of an MR in another PD.
		rkey, va, n := h.mr.RKey, mrStart, uint32(64)
		k := i % 6
		kinds[k]++
		switch k {
		case 0:
			for rkey == h.mr.RKey || rkey == h.otherPD.RKey {
				rkey = h.rng.Uint32()
			}
			va = mrStart + uint64(h.rng.IntN(4096))
		case 1:
			va = mrStart - 1 - uint64(h.rng.IntN(guard))
		case 2:
			va = mrEnd + uint64(h.rng.IntN(guard))
		case 3:
			va, n = mrEnd-uint64(h.rng.IntN(64)), 64+uint32(h.rng.IntN(64))
		case 4:
			va, n = mrStart-uint64(1+h.rng.IntN(8)), 16
		case 5:
			rkey, va = h.otherPD.RKey, h.otherPD.Addr
		}
		psn := ePSN(h.v)
		op := (i / 6) % 3
		if op == 2 && k == 3 {
			va = mrEnd // 8 bytes before the end are inside
		}
		switch op {
		case 0:
			b := h.packet(wire.RCWriteOnly, int(n))
			wire.RETH(b[wire.BTHLen:]).Encode(va, rkey, n)
			copy(b[wire.RCWriteOnly.HdrLen():], bytes.Repeat([]byte{0xEE}, int(n)))
			h.put(b, wire.RCWriteOnly, h.v.QPN(), psn, addrA)
		case 1:
			b := h.packet(wire.RCReadRequest, 0)
			wire.RETH(b[wire.BTHLen:]).Encode(va, rkey, n)
			h.put(b, wire.RCReadRequest, h.v.QPN(), psn, addrA)
		default:
			b := h.packet(wire.RCCompareSwap, 0)
			// Compare with what is there, so a wrongly granted
			// compare-and-swap would show.
			var cmp uint64
			if i := int(va&^7) - int(mrStart) + guard; i >= 0 && i+8 <= len(h.mem) {
				cmp = binary.NativeEndian.Uint64(h.mem[i:])
			}
			wire.AtomicETH(b[wire.BTHLen:]).Encode(va&^7, rkey, 0xEEEEEEEEEEEEEEEE, cmp)
			h.put(b, wire.RCCompareSwap, h.v.QPN(), psn, addrA)
		}
	})
	reset()
	c := h.v.Counters()
	if c.RemoteAccessNAKsSent != uint64(guesses) || c.RequestErrors != uint64(guesses) {
		t.Errorf("%d remote access NAKs, %d request errors, for %d guesses (%v)", c.RemoteAccessNAKsSent, c.RequestErrors, guesses, kinds)
	}
	if readResponses != 0 {
		t.Errorf("%d READ responses or atomic ACKs sent to the guesser", readResponses)
	}
	want := make([]byte, len(h.mem))
	fill(want, 0x5A)
	if !bytes.Equal(h.mem, want) {
		t.Error("memory changed")
	}
	// A legal WRITE and a multi-packet WRITE that runs past its own
	// length: the first lands, the second is an invalid request and lands
	// nothing beyond its length.
	b := h.packet(wire.RCWriteFirst, 1024)
	wire.RETH(b[wire.BTHLen:]).Encode(mrStart+2048, h.mr.RKey, 1025)
	copy(b[wire.RCWriteFirst.HdrLen():], bytes.Repeat([]byte{0x11}, 1024))
	h.put(b, wire.RCWriteFirst, h.v.QPN(), ePSN(h.v), addrA)
	b = h.packet(wire.RCWriteMiddle, 1024)
	copy(b[wire.RCWriteMiddle.HdrLen():], bytes.Repeat([]byte{0xEE}, 1024))
	h.put(b, wire.RCWriteMiddle, h.v.QPN(), ePSN(h.v).Add(1), addrA)
	h.flushBatch()
	if c := h.v.Counters(); c.InvalidRequestNAKsSent != 1 {
		t.Errorf("WRITE past its length: %d invalid request NAKs", c.InvalidRequestNAKsSent)
	}
	copy(want[guard+2048:], bytes.Repeat([]byte{0x11}, 1024))
	if i := firstDiff(h.mem, want); i >= 0 {
		t.Errorf("WRITE past its length: memory differs at MR offset %d: % x", i-guard, h.mem[i:i+4])
	}
}
