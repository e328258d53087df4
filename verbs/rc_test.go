package verbs_test

// RC data path, error paths and completion queues, between two soft devices
// of this process on two loopback addresses, over real UDP port 4791.

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// ---------------------------------------------------------------------------
// Data path

func TestRCSend(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t, func(c *pairConfig) { c.MTU = verbs.MTU1024 })
	for i, tc := range []struct {
		name string
		n    int
		imm  bool
	}{
		{"empty", 0, false},
		{"one byte", 1, false},
		{"one packet", 1024, false},
		{"multi-packet", 10*1024 + 17, false},
		{"with imm", 100, true},
		{"multi-packet with imm", 5000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := uint64(100 + i)
			clear(b.buf)
			fill(a.buf[:tc.n], byte(i))
			b.postRecv(t, id, 0, 16<<10)
			wr := verbs.SendWR{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, tc.n)}}
			if tc.imm {
				wr.Opcode, wr.ImmData = verbs.WRSendWithImm, 0xdeadbeef-uint32(i)
			}
			a.post(t, wr)
			wc := a.sendWC(t, id, verbs.WCSend)
			if wc.QPNum != a.qp.QPN() {
				t.Errorf("send WC qp_num 0x%x, want 0x%x", wc.QPNum, a.qp.QPN())
			}
			rwc := b.recvWCs(t, 1)[0]
			checkWC(t, rwc, id, verbs.WCSuccess, verbs.WCRecv)
			if rwc.ByteLen != uint32(tc.n) || rwc.QPNum != b.qp.QPN() {
				t.Errorf("recv WC byte_len %d qp_num 0x%x, want %d and 0x%x", rwc.ByteLen, rwc.QPNum, tc.n, b.qp.QPN())
			}
			if got := rwc.Flags&verbs.WCFlagWithImm != 0; got != tc.imm {
				t.Errorf("recv WC flags %s, WITH_IMM want %v", rwc.Flags, tc.imm)
			}
			if tc.imm && rwc.ImmData != wr.ImmData {
				t.Errorf("recv WC imm 0x%x, want 0x%x", rwc.ImmData, wr.ImmData)
			}
			checkBytes(t, "received data", b.buf[:tc.n], a.buf[:tc.n])
			if b.buf[tc.n] != 0 {
				t.Errorf("byte after the message was written")
			}
		})
	}
}

func TestRCWrite(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	for i, n := range []int{0, 1, 8, 4096, 4097, 40000} {
		id := uint64(i + 1)
		fill(a.buf[:n], byte(0x40+i))
		clear(b.buf)
		a.post(t, verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr() + 3, RKey: b.mr.RKey()})
		a.sendWC(t, id, verbs.WCRDMAWrite)
		checkBytes(t, "written data", b.buf[3:3+n], a.buf[:n])
		if b.buf[2] != 0 || b.buf[3+n] != 0 {
			t.Fatalf("WRITE of %d bytes touched bytes around its target", n)
		}
	}
	// A WRITE consumes no receive.
	expectNoWC(t, b.rcq, 10*time.Millisecond)
}

func TestRCWriteWithImm(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t, func(c *pairConfig) { c.MTU = verbs.MTU2048 })
	for i, n := range []int{0, 100, 2048, 9000} {
		id := uint64(i + 1)
		fill(a.buf[:n], byte(i))
		// The receive's own buffer is not used by a WRITE with immediate.
		if err := b.qp.PostRecv(verbs.RecvWR{ID: 50 + id}); err != nil {
			t.Fatal(err)
		}
		imm := uint32(0x01020304 * (i + 1))
		a.post(t, verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, ImmData: imm,
			SGL: []verbs.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr() + 1024, RKey: b.mr.RKey()})
		a.sendWC(t, id, verbs.WCRDMAWrite)
		rwc := b.recvWCs(t, 1)[0]
		checkWC(t, rwc, 50+id, verbs.WCSuccess, verbs.WCRecvRDMAWithImm)
		if rwc.ByteLen != uint32(n) || rwc.ImmData != imm || rwc.Flags&verbs.WCFlagWithImm == 0 {
			t.Fatalf("recv WC byte_len %d imm 0x%x flags %s, want %d, 0x%x, WITH_IMM", rwc.ByteLen, rwc.ImmData, rwc.Flags, n, imm)
		}
		checkBytes(t, "written data", b.buf[1024:1024+n], a.buf[:n])
	}
}

func TestRCRead(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t, func(c *pairConfig) { c.MTU = verbs.MTU1024 })
	fill(b.buf, 0x5a)
	for i, n := range []int{1, 1024, 1025, 30000} {
		id := uint64(i + 1)
		clear(a.buf)
		a.post(t, verbs.SendWR{ID: id, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(8, n)}, RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()})
		wc := a.sendWC(t, id, verbs.WCRDMARead)
		if wc.ByteLen != uint32(n) {
			t.Errorf("READ WC byte_len %d, want %d", wc.ByteLen, n)
		}
		checkBytes(t, "read data", a.buf[8:8+n], b.buf[100:100+n])
		if a.buf[7] != 0 || a.buf[8+n] != 0 {
			t.Fatalf("READ of %d bytes wrote outside its scatter list", n)
		}
	}
}

func TestRCAtomics(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	word := b.buf[64:72]
	remote := b.mr.Addr() + 64
	ne := binary.NativeEndian
	result := func() uint64 { return ne.Uint64(a.buf[8:16]) }
	atomic := func(id uint64, op verbs.WROpcode, cmpAdd, swap uint64) {
		t.Helper()
		ne.PutUint64(a.buf[8:16], 0xAAAAAAAAAAAAAAAA)
		a.post(t, verbs.SendWR{ID: id, Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(8, 8)},
			RemoteAddr: remote, RKey: b.mr.RKey(), CompareAdd: cmpAdd, Swap: swap})
		want := verbs.WCCompSwap
		if op == verbs.WRAtomicFetchAndAdd {
			want = verbs.WCFetchAdd
		}
		if wc := a.sendWC(t, id, want); wc.ByteLen != 8 {
			t.Errorf("atomic WC byte_len %d, want 8", wc.ByteLen)
		}
	}

	ne.PutUint64(word, 0x1122334455667788)
	atomic(1, verbs.WRAtomicCmpAndSwp, 0x1122334455667788, 42) // compare matches: swapped
	if result() != 0x1122334455667788 || ne.Uint64(word) != 42 {
		t.Fatalf("CMP_SWP (match): returned %#x, word %#x; want 0x1122334455667788 and 42", result(), ne.Uint64(word))
	}
	atomic(2, verbs.WRAtomicCmpAndSwp, 41, 7) // no match: unchanged
	if result() != 42 || ne.Uint64(word) != 42 {
		t.Fatalf("CMP_SWP (no match): returned %d, word %d; want 42 and 42", result(), ne.Uint64(word))
	}
	atomic(3, verbs.WRAtomicFetchAndAdd, 8, 0)
	if result() != 42 || ne.Uint64(word) != 50 {
		t.Fatalf("FETCH_ADD: returned %d, word %d; want 42 and 50", result(), ne.Uint64(word))
	}
	ne.PutUint64(word, ^uint64(0))
	atomic(4, verbs.WRAtomicFetchAndAdd, 2, 0) // wraps modulo 2^64
	if result() != ^uint64(0) || ne.Uint64(word) != 1 {
		t.Fatalf("FETCH_ADD wrap: returned %#x, word %d; want all ones and 1", result(), ne.Uint64(word))
	}
	// Many in flight at once (up to max_rd_atomic), all applied once.
	ne.PutUint64(word, 0)
	var wrs []verbs.SendWR
	for i := range 32 {
		wrs = append(wrs, verbs.SendWR{ID: uint64(100 + i), Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(1024+8*i, 8)}, RemoteAddr: remote, RKey: b.mr.RKey(), CompareAdd: 1})
	}
	a.post(t, wrs...)
	seen := map[uint64]bool{}
	for i, wc := range a.sendWCs(t, len(wrs)) {
		checkWC(t, wc, uint64(100+i), verbs.WCSuccess, verbs.WCFetchAdd)
		old := ne.Uint64(a.buf[1024+8*i:])
		if seen[old] {
			t.Fatalf("two FETCH_ADDs returned %d", old)
		}
		seen[old] = true
	}
	if ne.Uint64(word) != 32 {
		t.Fatalf("32 FETCH_ADDs of 1 gave %d", ne.Uint64(word))
	}
}

func TestRCMultiSGE(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t, func(c *pairConfig) { c.MTU = verbs.MTU1024 })
	fill(a.buf, 0x11)
	gather := []verbs.SGE{a.mr.SGE(10, 700), a.mr.SGE(5000, 1500), a.mr.SGE(20000, 3)}
	var want []byte
	for _, s := range gather {
		off := int(s.Addr - a.mr.Addr())
		want = append(want, a.buf[off:off+int(s.Length)]...)
	}
	n := len(want)

	t.Run("send gather/scatter", func(t *testing.T) {
		clear(b.buf)
		// Three receive SGEs of 1000, 100 and 2000 bytes, not contiguous.
		scatter := []verbs.SGE{b.mr.SGE(0, 1000), b.mr.SGE(3000, 100), b.mr.SGE(8000, 2000)}
		if err := b.qp.PostRecv(verbs.RecvWR{ID: 1, SGL: scatter}); err != nil {
			t.Fatal(err)
		}
		a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: gather})
		a.sendWC(t, 1, verbs.WCSend)
		rwc := b.recvWCs(t, 1)[0]
		checkWC(t, rwc, 1, verbs.WCSuccess, verbs.WCRecv)
		if rwc.ByteLen != uint32(n) {
			t.Fatalf("byte_len %d, want %d", rwc.ByteLen, n)
		}
		got := append(append(append([]byte(nil), b.buf[0:1000]...), b.buf[3000:3100]...), b.buf[8000:8000+n-1100]...)
		checkBytes(t, "scattered data", got, want)
		if b.buf[1000] != 0 || b.buf[3100] != 0 || b.buf[8000+n-1100] != 0 {
			t.Fatal("data outside the scatter list")
		}
	})
	t.Run("write gather", func(t *testing.T) {
		clear(b.buf)
		a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: gather,
			RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey()})
		a.sendWC(t, 2, verbs.WCRDMAWrite)
		checkBytes(t, "written data", b.buf[512:512+n], want)
	})
	t.Run("read scatter", func(t *testing.T) {
		fill(b.buf, 0x77)
		clear(a.buf)
		scatter := []verbs.SGE{a.mr.SGE(0, 1), a.mr.SGE(100, 2047), a.mr.SGE(9000, 952)}
		a.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, SGL: scatter,
			RemoteAddr: b.mr.Addr() + 7, RKey: b.mr.RKey()})
		if wc := a.sendWC(t, 3, verbs.WCRDMARead); wc.ByteLen != 3000 {
			t.Errorf("byte_len %d, want 3000", wc.ByteLen)
		}
		got := append(append(append([]byte(nil), a.buf[0:1]...), a.buf[100:2147]...), a.buf[9000:9952]...)
		checkBytes(t, "read data", got, b.buf[7:3007])
	})
}

func TestRCInlineSend(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	msg := []byte("inline data is copied when the work request is posted")
	copy(a.buf, msg)
	b.postRecv(t, 1, 0, 4096)
	b.postRecv(t, 2, 4096, 4096)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: []verbs.SGE{a.mr.SGE(0, 20), a.mr.SGE(20, len(msg)-20)}})
	// The buffer may be reused as soon as PostSend returns.
	clear(a.buf[:len(msg)])
	a.sendWC(t, 1, verbs.WCSend)
	rwc := b.recvWCs(t, 1)[0]
	checkWC(t, rwc, 1, verbs.WCSuccess, verbs.WCRecv)
	checkBytes(t, "inline message", b.buf[:rwc.ByteLen], msg)

	// Up to max_inline_data (64) bytes, with immediate data.
	fill(a.buf[:64], 0x21)
	a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled | verbs.SendInline,
		ImmData: 9, SGL: []verbs.SGE{a.mr.SGE(0, 64)}})
	want := append([]byte(nil), a.buf[:64]...)
	fill(a.buf[:64], 0)
	a.sendWC(t, 2, verbs.WCSend)
	rwc = b.recvWCs(t, 1)[0]
	checkWC(t, rwc, 2, verbs.WCSuccess, verbs.WCRecv)
	if rwc.ImmData != 9 || rwc.ByteLen != 64 {
		t.Fatalf("inline SEND_WITH_IMM: %+v", rwc)
	}
	checkBytes(t, "inline message", b.buf[4096:4096+64], want)
}

func TestRCUnsignaled(t *testing.T) {
	t.Parallel()
	t.Run("selective", func(t *testing.T) {
		t.Parallel()
		a, b := newRCPair(t)
		for i := range 5 {
			b.postRecv(t, uint64(i), i*64, 64)
		}
		var wrs []verbs.SendWR
		for i := range 5 {
			wr := verbs.SendWR{ID: uint64(10 + i), Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 8)}}
			if i == 4 {
				wr.Flags = verbs.SendSignaled
			}
			wrs = append(wrs, wr)
		}
		a.post(t, wrs...)
		// Only the signaled (last) one completes; it implies the others.
		a.sendWC(t, 14, verbs.WCSend)
		if got := b.recvWCs(t, 5); got[4].WRID != 4 {
			t.Fatalf("receives completed out of order: %+v", got)
		}
		expectNoWC(t, a.scq, 20*time.Millisecond)
	})
	t.Run("sq_sig_all", func(t *testing.T) {
		t.Parallel()
		a, b := newRCPair(t, func(c *pairConfig) { c.SigAll = true })
		for i := range 3 {
			b.postRecv(t, uint64(i), i*64, 64)
		}
		a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 8)}},
			verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
			verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
		for i, wc := range a.sendWCs(t, 3) {
			op := verbs.WCSend
			if i == 1 {
				op = verbs.WCRDMAWrite
			}
			checkWC(t, wc, uint64(i+1), verbs.WCSuccess, op)
		}
		b.recvWCs(t, 2)
	})
}

func TestRCPostList(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t, func(c *pairConfig) {
		c.Cap.MaxSendWR, c.Cap.MaxRecvWR = 128, 128
		c.MTU = verbs.MTU1024
	})
	// 128 WRs in one call: WRITEs, SENDs and READs mixed, in order.
	fill(a.buf[:32<<10], 3)
	fill(b.buf[32<<10:], 4)
	var wrs []verbs.SendWR
	nrecv := 0
	for i := range 128 {
		wr := verbs.SendWR{ID: uint64(i), Flags: verbs.SendSignaled}
		off := i * 256
		switch i % 3 {
		case 0:
			wr.Opcode, wr.SGL = verbs.WRRDMAWrite, []verbs.SGE{a.mr.SGE(off, 256)}
			wr.RemoteAddr, wr.RKey = b.mr.Addr()+uint64(off), b.mr.RKey()
		case 1:
			wr.Opcode, wr.SGL = verbs.WRSend, []verbs.SGE{a.mr.SGE(off, 256)}
			b.postRecv(t, uint64(i), off, 256)
			nrecv++
		case 2:
			wr.Opcode, wr.SGL = verbs.WRRDMARead, []verbs.SGE{a.mr.SGE(32<<10+off, 256)}
			wr.RemoteAddr, wr.RKey = b.mr.Addr()+uint64(32<<10+off), b.mr.RKey()
		}
		wrs = append(wrs, wr)
	}
	a.post(t, wrs...)
	for i, wc := range a.sendWCs(t, len(wrs)) {
		if wc.WRID != uint64(i) || wc.Status != verbs.WCSuccess {
			t.Fatalf("completion %d: %+v", i, wc)
		}
	}
	for _, wc := range b.recvWCs(t, nrecv) {
		if wc.Status != verbs.WCSuccess || wc.ByteLen != 256 {
			t.Fatalf("receive: %+v", wc)
		}
	}
	for i := range 128 {
		off := i * 256
		if i%3 == 2 {
			checkBytes(t, "read data", a.buf[32<<10+off:32<<10+off+256], b.buf[32<<10+off:32<<10+off+256])
		} else {
			checkBytes(t, "written or sent data", b.buf[off:off+256], a.buf[off:off+256])
		}
	}

	// A list longer than the send queue: the WRs that fit are posted, and
	// the PostError names the first one that did not (ENOMEM). They are
	// SENDs to a peer with no receive posted, so none completes (RNR
	// NAKs, retried for ever) and frees its slot while the list is posted.
	wrs = wrs[:0]
	for i := range 130 {
		wrs = append(wrs, verbs.SendWR{ID: uint64(1000 + i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
	}
	err := a.qp.PostSend(wrs...)
	var pe *verbs.PostError
	if !errors.As(err, &pe) || pe.Index != 128 || !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("posting 130 WRs on a 128-deep send queue: %v, want *PostError at index 128 wrapping ENOMEM", err)
	}
	for i := range 128 {
		b.postRecv(t, uint64(2000+i), 0, 8)
	}
	for i, wc := range a.sendWCs(t, 128) {
		checkWC(t, wc, uint64(1000+i), verbs.WCSuccess, verbs.WCSend)
	}
	b.recvWCs(t, 128)
	expectNoWC(t, a.scq, 20*time.Millisecond)
}

func TestRCLarge(t *testing.T) {
	t.Parallel()
	for _, mtu := range []verbs.MTU{verbs.MTU4096, verbs.MTU1024} {
		t.Run(mtu.String(), func(t *testing.T) {
			t.Parallel()
			const n = 1 << 20
			a, b := newRCPair(t, func(c *pairConfig) { c.MTU, c.BufSize = mtu, 2*n })
			fill(a.buf[:n], 0x3c)
			a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr() + n, RKey: b.mr.RKey()})
			a.sendWC(t, 1, verbs.WCRDMAWrite)
			checkBytes(t, "1 MiB WRITE", b.buf[n:], a.buf[:n])
			fill(b.buf[:n], 0xc3)
			a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{a.mr.SGE(n, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			if wc := a.sendWC(t, 2, verbs.WCRDMARead); wc.ByteLen != n {
				t.Fatalf("READ byte_len %d", wc.ByteLen)
			}
			checkBytes(t, "1 MiB READ", a.buf[n:], b.buf[:n])
			// And a 1 MiB SEND into a 1 MiB receive.
			b.postRecv(t, 3, 0, n)
			a.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, n)}})
			a.sendWC(t, 3, verbs.WCSend)
			if wc := b.recvWCs(t, 1)[0]; wc.Status != verbs.WCSuccess || wc.ByteLen != n {
				t.Fatalf("1 MiB SEND: %+v", wc)
			}
			checkBytes(t, "1 MiB SEND", b.buf[:n], a.buf[:n])
		})
	}
}

// TestRCPathMTU checks that messages are cut into path-MTU packets: a WRITE
// of n bytes costs ceil(n/MTU) request packets.
func TestRCPathMTU(t *testing.T) {
	t.Parallel()
	for _, mtu := range []verbs.MTU{verbs.MTU256, verbs.MTU512, verbs.MTU1024, verbs.MTU2048, verbs.MTU4096} {
		t.Run(mtu.String(), func(t *testing.T) {
			t.Parallel()
			a, b := newRCPair(t, func(c *pairConfig) { c.MTU = mtu })
			if attr, _, err := a.qp.Query(); err != nil || attr.PathMTU != mtu {
				t.Fatalf("Query: path MTU %s (%v), want %s", attr.PathMTU, err, mtu)
			}
			const n = 3*4096 + 1
			fill(a.buf[:n], byte(mtu))
			st := stats(a.ctx)
			sent, retrans := st.Sent.Load(), st.Retransmits.Load()
			a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			a.sendWC(t, 1, verbs.WCRDMAWrite)
			checkBytes(t, "written data", b.buf[:n], a.buf[:n])
			want := (n + mtu.Bytes() - 1) / mtu.Bytes()
			if got := st.Sent.Load() - sent; got != uint64(want) && st.Retransmits.Load() == retrans {
				t.Errorf("WRITE of %d bytes at MTU %s took %d packets, want %d", n, mtu, got, want)
			}
			// SEND and READ across packet boundaries.
			b.postRecv(t, 2, 0, n)
			a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, n)}})
			a.sendWC(t, 2, verbs.WCSend)
			if wc := b.recvWCs(t, 1)[0]; wc.ByteLen != n {
				t.Fatalf("recv: %+v", wc)
			}
			a.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{a.mr.SGE(n, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			a.sendWC(t, 3, verbs.WCRDMARead)
			checkBytes(t, "read data", a.buf[n:2*n], b.buf[:n])
		})
	}
}

// TestRCBothWays runs traffic in both directions at once.
func TestRCBothWays(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	const rounds, n = 50, 3000
	run := func(x, y *tEnd, seed byte) error {
		fill(x.buf[:n], seed)
		for i := range rounds {
			if err := x.qp.PostSend(verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{x.mr.SGE(0, n)}, RemoteAddr: y.mr.Addr() + 32<<10, RKey: y.mr.RKey()}); err != nil {
				return err
			}
			wcs, err := collectWCs(x.scq, x.ch, 1, wcTimeout)
			if err != nil {
				return err
			}
			if wcs[0].Status != verbs.WCSuccess {
				return errors.New(wcs[0].Status.String())
			}
		}
		return nil
	}
	errc := make(chan error, 1)
	go func() { errc <- run(b, a, 2) }()
	if err := run(a, b, 1); err != nil {
		t.Error(err)
	}
	if err := <-errc; err != nil {
		t.Error(err)
	}
	checkBytes(t, "a→b", b.buf[32<<10:32<<10+n], a.buf[:n])
	checkBytes(t, "b→a", a.buf[32<<10:32<<10+n], b.buf[:n])
}

// ---------------------------------------------------------------------------
// Error completions

// postFlushCheck posts a signaled and an unsignaled SEND on an errored QP and
// checks both complete with WR_FLUSH_ERR.
func postFlushCheck(t *testing.T, e *tEnd) {
	t.Helper()
	e.post(t, verbs.SendWR{ID: 900, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{e.mr.SGE(0, 8)}},
		verbs.SendWR{ID: 901, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{e.mr.SGE(0, 8)}})
	for i, wc := range e.sendWCs(t, 2) {
		checkWC(t, wc, uint64(900+i), verbs.WCWRFlushErr, 0)
	}
	if err := e.qp.PostRecv(verbs.RecvWR{ID: 902, SGL: []verbs.SGE{e.mr.SGE(0, 8)}}); err != nil {
		t.Fatalf("PostRecv on an ERR QP: %v", err)
	}
	checkWC(t, e.recvWCs(t, 1)[0], 902, verbs.WCWRFlushErr, 0)
}

func TestRCWrongRKey(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	b.postRecv(t, 7, 0, 64)
	fill(a.buf[:4096], 1)
	a.post(t,
		verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 4096)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x5A},
		verbs.SendWR{ID: 2, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 8)}}, // unsignaled
		verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
	wcs := a.sendWCs(t, 3)
	checkWC(t, wcs[0], 1, verbs.WCRemAccessErr, 0)
	checkWC(t, wcs[1], 2, verbs.WCWRFlushErr, 0) // failed WRs complete even when unsignaled
	checkWC(t, wcs[2], 3, verbs.WCWRFlushErr, 0)
	if got := a.qp.State(); got != verbs.QPStateErr {
		t.Fatalf("requester QP state %s, want ERR", got)
	}
	for i, v := range b.buf {
		if v != 0 {
			t.Fatalf("responder memory changed at byte %d", i)
		}
	}
	// The responder QP went to ERR too (class C error), flushing its receive.
	stateIs(t, b.qp, verbs.QPStateErr)
	checkWC(t, b.recvWCs(t, 1)[0], 7, verbs.WCWRFlushErr, 0)
	postFlushCheck(t, a)
	if q, _, err := a.qp.Query(); err != nil || q.State != verbs.QPStateErr {
		t.Fatalf("Query: state %s, %v", q.State, err)
	}
}

func TestRCAccessErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		mrAccess verbs.AccessFlags // responder MR
		qpAccess verbs.AccessFlags // responder QP
		op       verbs.WROpcode
		want     verbs.WCStatus
	}{
		{"WRITE without MR REMOTE_WRITE", verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic, remoteAccess, verbs.WRRDMAWrite, verbs.WCRemAccessErr},
		{"READ without MR REMOTE_READ", verbs.AccessLocalWrite | verbs.AccessRemoteWrite, remoteAccess, verbs.WRRDMARead, verbs.WCRemAccessErr},
		{"atomic without MR REMOTE_ATOMIC", verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead, remoteAccess, verbs.WRAtomicFetchAndAdd, verbs.WCRemAccessErr},
		{"WRITE without QP REMOTE_WRITE", allAccess, verbs.AccessRemoteRead, verbs.WRRDMAWrite, verbs.WCRemInvReqErr},
		{"READ without QP REMOTE_READ", allAccess, verbs.AccessRemoteWrite, verbs.WRRDMARead, verbs.WCRemInvReqErr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := defaultPairConfig()
			a := newEnd(t, "a", &cfg)
			bcfg := cfg
			bcfg.MRAccess, bcfg.QPAccess = tc.mrAccess, tc.qpAccess
			b := newEnd(t, "b", &bcfg)
			if err := connectQP(a.qp, a.psn, b.info(), &cfg); err != nil {
				t.Fatal(err)
			}
			if err := connectQP(b.qp, b.psn, a.info(), &bcfg); err != nil {
				t.Fatal(err)
			}
			fill(a.buf[:64], 9)
			n := 64
			if tc.op == verbs.WRAtomicFetchAndAdd {
				n = 8
			}
			a.post(t, verbs.SendWR{ID: 1, Opcode: tc.op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, n)},
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), CompareAdd: 1})
			checkWC(t, a.sendWCs(t, 1)[0], 1, tc.want, 0)
			stateIs(t, a.qp, verbs.QPStateErr)
			for i, v := range b.buf {
				if v != 0 {
					t.Fatalf("responder memory changed at byte %d", i)
				}
			}
		})
	}
}

func TestRCMisalignedAtomic(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)},
		RemoteAddr: b.mr.Addr() + 4, RKey: b.mr.RKey(), CompareAdd: 0, Swap: 1})
	wc := a.sendWCs(t, 1)[0]
	checkWC(t, wc, 1, verbs.WCRemInvReqErr, 0)
	stateIs(t, a.qp, verbs.QPStateErr)
	if binary.NativeEndian.Uint64(b.buf[0:8]) != 0 || binary.NativeEndian.Uint64(b.buf[8:16]) != 0 {
		t.Fatal("misaligned atomic changed memory")
	}
}

func TestRCLocalProtectionError(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	// An L_Key that names no MR: a local protection error, and the QP
	// goes to ERR without sending anything.
	bad := a.mr.SGE(0, 8)
	bad.LKey ^= 0x33
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{bad}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	checkWC(t, a.sendWCs(t, 1)[0], 1, verbs.WCLocProtErr, 0)
	stateIs(t, a.qp, verbs.QPStateErr)
	postFlushCheck(t, a)
}

func TestRCRemoteLengthError(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	b.postRecv(t, 1, 0, 100)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 101)}})
	checkWC(t, a.sendWCs(t, 1)[0], 1, verbs.WCRemInvReqErr, 0)
	checkWC(t, b.recvWCs(t, 1)[0], 1, verbs.WCLocLenErr, 0)
	stateIs(t, b.qp, verbs.QPStateErr)
}

// fastRetry makes a lost peer show quickly: retry_cnt 2, timeout 8
// (4.096 µs × 2^8 ≈ 1 ms).
func fastRetry(c *pairConfig) { c.RetryCnt, c.Timeout = 2, 8 }

func TestRCPeerGone(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, a *tEnd, op verbs.WROpcode) {
		t.Helper()
		st := stats(a.ctx)
		before := st.Retransmits.Load()
		start := time.Now()
		a.post(t, verbs.SendWR{ID: 1, Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)},
			RemoteAddr: a.info().Addr, RKey: 1})
		checkWC(t, a.sendWCs(t, 1)[0], 1, verbs.WCRetryExcErr, 0)
		if got := st.Retransmits.Load() - before; got != 2 {
			t.Errorf("%d retransmissions before RETRY_EXC_ERR, want retry_cnt = 2", got)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("RETRY_EXC_ERR took %v", d)
		}
		stateIs(t, a.qp, verbs.QPStateErr)
		postFlushCheck(t, a)
	}
	t.Run("peer QP destroyed", func(t *testing.T) {
		t.Parallel()
		a, b := newRCPair(t, fastRetry)
		if err := b.qp.Destroy(); err != nil {
			t.Fatal(err)
		}
		check(t, a, verbs.WRSend)
	})
	t.Run("peer context closed", func(t *testing.T) {
		t.Parallel()
		a, b := newRCPair(t, fastRetry)
		if err := b.ctx.Close(); err != nil { // its QP and MR are left behind
			t.Fatal(err)
		}
		check(t, a, verbs.WRRDMARead)
	})
}

func TestRCRNR(t *testing.T) {
	t.Parallel()
	t.Run("receive posted late", func(t *testing.T) {
		t.Parallel()
		// rnr_retry 7 retries forever; min_rnr_timer 14 asks for 1.28 ms.
		a, b := newRCPair(t, func(c *pairConfig) { c.RNRRetry, c.MinRNRTimer = 7, 14 })
		fill(a.buf[:5000], 1)
		a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 5000)}},
			verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, ImmData: 77,
				SGL: []verbs.SGE{a.mr.SGE(0, 100)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()})
		deadline := time.Now().Add(5 * time.Second)
		for stats(b.ctx).RNRNAKsSent.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if stats(a.ctx).RNRNAKsReceived.Load() == 0 {
			t.Fatal("no RNR NAK received")
		}
		expectNoWC(t, a.scq, 0)
		b.postRecv(t, 10, 0, 8192)
		a.sendWC(t, 1, verbs.WCSend)
		checkWC(t, b.recvWCs(t, 1)[0], 10, verbs.WCSuccess, verbs.WCRecv)
		checkBytes(t, "data sent after RNR", b.buf[:5000], a.buf[:5000])

		// WRITE with immediate needs a receive too.
		time.Sleep(5 * time.Millisecond)
		b.postRecv(t, 11, 0, 0)
		a.sendWC(t, 2, verbs.WCRDMAWrite)
		rwc := b.recvWCs(t, 1)[0]
		checkWC(t, rwc, 11, verbs.WCSuccess, verbs.WCRecvRDMAWithImm)
		if rwc.ImmData != 77 || rwc.ByteLen != 100 {
			t.Fatalf("WRITE_WITH_IMM after RNR: %+v", rwc)
		}
		checkBytes(t, "data written after RNR", b.buf[8192:8292], a.buf[:100])
	})
	t.Run("never posted", func(t *testing.T) {
		t.Parallel()
		a, b := newRCPair(t, func(c *pairConfig) { c.RNRRetry, c.MinRNRTimer = 1, 1 })
		a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
		checkWC(t, a.sendWCs(t, 1)[0], 1, verbs.WCRNRRetryExcErr, 0)
		stateIs(t, a.qp, verbs.QPStateErr)
		if got := stats(a.ctx).RNRNAKsReceived.Load(); got != 2 {
			t.Errorf("%d RNR NAKs received, want rnr_retry+1 = 2", got)
		}
		// The responder is fine: RNR is not an error there.
		if got := b.qp.State(); got != verbs.QPStateRTS {
			t.Errorf("responder state %s, want RTS", got)
		}
	})
}

// ---------------------------------------------------------------------------
// Verbs-level errors

func TestModifyErrors(t *testing.T) {
	t.Parallel()
	cfg := defaultPairConfig()
	e := newEnd(t, "m", &cfg)
	qp := e.qp
	const (
		initMask = verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrAccessFlags
		rtrMask  = verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN |
			verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrMinRNRTimer
		rtsMask = verbs.QPAttrState | verbs.QPAttrSQPSN | verbs.QPAttrTimeout | verbs.QPAttrRetryCnt |
			verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRDAtomic
	)
	av := verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: e.gid, SGIDIndex: 1, HopLimit: 1}}
	initAttr := func() verbs.QPAttr {
		return verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1, AccessFlags: remoteAccess}
	}
	rtrAttr := func() verbs.QPAttr {
		return verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPN: 0x123, RQPSN: 5,
			MaxDestRDAtomic: 3, MinRNRTimer: 12, AH: av}
	}
	rtsAttr := func() verbs.QPAttr {
		return verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: 9, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 5}
	}
	type bad struct {
		name string
		attr func() verbs.QPAttr
		mask verbs.QPAttrMask
		want string // in the error message
	}
	with := func(f func() verbs.QPAttr, mod func(*verbs.QPAttr)) func() verbs.QPAttr {
		return func() verbs.QPAttr { a := f(); mod(&a); return a }
	}
	expect := func(t *testing.T, state verbs.QPState, cases []bad) {
		t.Helper()
		for _, c := range cases {
			a := c.attr()
			err := qp.Modify(&a, c.mask)
			if err == nil {
				t.Fatalf("%s: Modify succeeded", c.name)
			}
			if !errors.Is(err, syscall.EINVAL) || !errors.Is(err, verbs.ErrInvalidArgument) {
				t.Errorf("%s: %v does not wrap EINVAL", c.name, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, c.want)
			}
			if got := qp.State(); got != state {
				t.Fatalf("%s: failed Modify moved the QP to %s", c.name, got)
			}
		}
	}
	// RESET → INIT.
	expect(t, verbs.QPStateReset, []bad{
		{"missing PORT", initAttr, initMask &^ verbs.QPAttrPort, "missing required attribute(s) PORT"},
		{"missing ACCESS_FLAGS", initAttr, initMask &^ verbs.QPAttrAccessFlags, "ACCESS_FLAGS"},
		{"port 2", with(initAttr, func(a *verbs.QPAttr) { a.PortNum = 2 }), initMask, "PORT 2 out of range"},
		{"port 0", with(initAttr, func(a *verbs.QPAttr) { a.PortNum = 0 }), initMask, "PORT 0 out of range"},
		{"P_Key index 1", with(initAttr, func(a *verbs.QPAttr) { a.PKeyIndex = 1 }), initMask, "PKEY_INDEX 1"},
		{"bad access bit", with(initAttr, func(a *verbs.QPAttr) { a.AccessFlags |= verbs.AccessZeroBased }), initMask, "ACCESS_FLAGS"},
		{"PATH_MTU not allowed", initAttr, initMask | verbs.QPAttrPathMTU, "PATH_MTU not allowed"},
		{"RESET→RTR", rtrAttr, rtrMask, "invalid state transition"},
		{"RESET→RTS", rtsAttr, rtsMask, "invalid state transition"},
		{"RESET→ERR", func() verbs.QPAttr { return verbs.QPAttr{State: verbs.QPStateErr} }, verbs.QPAttrState, "invalid state transition"},
		{"state 9", func() verbs.QPAttr { return verbs.QPAttr{State: 9} }, verbs.QPAttrState, "invalid target state"},
	})
	a := initAttr()
	if err := qp.Modify(&a, initMask); err != nil {
		t.Fatal(err)
	}
	// INIT → RTR.
	expect(t, verbs.QPStateInit, []bad{
		{"missing DEST_QPN", rtrAttr, rtrMask &^ verbs.QPAttrDestQPN, "missing required attribute(s) DEST_QPN"},
		{"missing AV and PATH_MTU", rtrAttr, rtrMask &^ (verbs.QPAttrAV | verbs.QPAttrPathMTU), "AV|PATH_MTU"},
		{"missing MIN_RNR_TIMER", rtrAttr, rtrMask &^ verbs.QPAttrMinRNRTimer, "MIN_RNR_TIMER"},
		{"PATH_MTU 6", with(rtrAttr, func(a *verbs.QPAttr) { a.PathMTU = 6 }), rtrMask, "PATH_MTU 6 out of range"},
		{"PATH_MTU 0", with(rtrAttr, func(a *verbs.QPAttr) { a.PathMTU = 0 }), rtrMask, "PATH_MTU 0 out of range"},
		{"DEST_QPN 0", with(rtrAttr, func(a *verbs.QPAttr) { a.DestQPN = 0 }), rtrMask, "DEST_QPN"},
		{"DEST_QPN 2^24", with(rtrAttr, func(a *verbs.QPAttr) { a.DestQPN = 1 << 24 }), rtrMask, "DEST_QPN 0x1000000 out of range"},
		{"RQ_PSN 2^24", with(rtrAttr, func(a *verbs.QPAttr) { a.RQPSN = 1 << 24 }), rtrMask, "RQ_PSN"},
		{"MAX_DEST_RD_ATOMIC 200", with(rtrAttr, func(a *verbs.QPAttr) { a.MaxDestRDAtomic = 200 }), rtrMask, "MAX_DEST_RD_ATOMIC 200"},
		{"MIN_RNR_TIMER 32", with(rtrAttr, func(a *verbs.QPAttr) { a.MinRNRTimer = 32 }), rtrMask, "MIN_RNR_TIMER 32"},
		{"AV not global", with(rtrAttr, func(a *verbs.QPAttr) { a.AH.IsGlobal = false }), rtrMask, "is_global"},
		{"AV zero DGID", with(rtrAttr, func(a *verbs.QPAttr) { a.AH.GRH.DGID = verbs.GID{} }), rtrMask, "dgid is zero"},
		{"AV sgid_index 2", with(rtrAttr, func(a *verbs.QPAttr) { a.AH.GRH.SGIDIndex = 2 }), rtrMask, "sgid_index 2 out of range"},
		{"AV sgid_index 0", with(rtrAttr, func(a *verbs.QPAttr) { a.AH.GRH.SGIDIndex = 0 }), rtrMask, "use GID index 1 (" + e.gid.String() + ")"},
		{"AV IPv6 DGID", with(rtrAttr, func(a *verbs.QPAttr) { a.AH.GRH.DGID, _ = verbs.ParseGID("::1") }), rtrMask, "different IP families"},
		{"AV port 2", with(rtrAttr, func(a *verbs.QPAttr) { a.AH.PortNum = 2 }), rtrMask, "port_num 2 out of range"},
		{"INIT→RTS", rtsAttr, rtsMask, "invalid state transition"},
		{"TIMEOUT at RTR", rtrAttr, rtrMask | verbs.QPAttrTimeout, "TIMEOUT not allowed"},
	})
	a = rtrAttr()
	if err := qp.Modify(&a, rtrMask); err != nil {
		t.Fatal(err)
	}
	// RTR → RTS.
	expect(t, verbs.QPStateRTR, []bad{
		{"missing TIMEOUT", rtsAttr, rtsMask &^ verbs.QPAttrTimeout, "missing required attribute(s) TIMEOUT"},
		{"missing SQ_PSN and RETRY_CNT", rtsAttr, rtsMask &^ (verbs.QPAttrSQPSN | verbs.QPAttrRetryCnt), "RETRY_CNT|SQ_PSN"},
		{"TIMEOUT 32", with(rtsAttr, func(a *verbs.QPAttr) { a.Timeout = 32 }), rtsMask, "TIMEOUT 32 out of range 0..31"},
		{"RETRY_CNT 8", with(rtsAttr, func(a *verbs.QPAttr) { a.RetryCnt = 8 }), rtsMask, "RETRY_CNT 8 out of range 0..7"},
		{"RNR_RETRY 8", with(rtsAttr, func(a *verbs.QPAttr) { a.RNRRetry = 8 }), rtsMask, "RNR_RETRY 8 out of range 0..7"},
		{"SQ_PSN 2^24", with(rtsAttr, func(a *verbs.QPAttr) { a.SQPSN = 1 << 24 }), rtsMask, "SQ_PSN 0x1000000 out of range"},
		{"MAX_QP_RD_ATOMIC 129", with(rtsAttr, func(a *verbs.QPAttr) { a.MaxRDAtomic = 129 }), rtsMask, "MAX_QP_RD_ATOMIC 129"},
		{"CUR_STATE wrong", with(rtsAttr, func(a *verbs.QPAttr) { a.CurState = verbs.QPStateInit }), rtsMask | verbs.QPAttrCurState, "CUR_STATE"},
		{"RTR→INIT", initAttr, verbs.QPAttrState, "invalid state transition"},
		{"DEST_QPN at RTS", rtsAttr, rtsMask | verbs.QPAttrDestQPN, "DEST_QPN not allowed"},
	})
	a = rtsAttr()
	if err := qp.Modify(&a, rtsMask); err != nil {
		t.Fatal(err)
	}
	q, init, err := qp.Query()
	if err != nil || q.State != verbs.QPStateRTS || q.PathMTU != verbs.MTU1024 || q.DestQPN != 0x123 ||
		q.MaxRDAtomic != 8 || q.MaxDestRDAtomic != 4 || q.AH.GRH.DGID != e.gid || init.SendCQ != e.scq {
		t.Fatalf("Query after RTS: %+v %v (max_rd_atomic 5 rounds up to 8, max_dest_rd_atomic 3 to 4)", q, err)
	}
	// RTS.
	expect(t, verbs.QPStateRTS, []bad{
		{"RTS→RTR", rtrAttr, rtrMask, "invalid state transition"},
		{"RTS→INIT", initAttr, initMask, "invalid state transition"},
		{"PATH_MTU at RTS", rtsAttr, verbs.QPAttrState | verbs.QPAttrPathMTU, "PATH_MTU not allowed"},
		{"ALT_PATH", rtsAttr, verbs.QPAttrState | verbs.QPAttrAltPath, "ALT_PATH"},
	})
	// RTS → ERR → RESET → INIT is allowed.
	for _, st := range []verbs.QPState{verbs.QPStateErr, verbs.QPStateReset} {
		if err := qp.Modify(&verbs.QPAttr{State: st}, verbs.QPAttrState); err != nil {
			t.Fatalf("→%s: %v", st, err)
		}
		if qp.State() != st {
			t.Fatalf("state %s, want %s", qp.State(), st)
		}
	}
	a = initAttr()
	if err := qp.Modify(&a, initMask); err != nil {
		t.Fatal(err)
	}
}

func TestPostErrors(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t, func(c *pairConfig) { c.Cap.MaxSendSGE, c.Cap.MaxRecvSGE, c.Cap.MaxInlineData = 2, 2, 16 })
	for i := range 4 {
		b.postRecv(t, uint64(i), 64*i, 64)
	}
	send := func(id uint64, flags verbs.SendFlags, sgl ...verbs.SGE) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | flags, SGL: sgl}
	}
	expectPostError := func(what string, err error, index int, errno syscall.Errno) {
		t.Helper()
		var pe *verbs.PostError
		if !errors.As(err, &pe) || pe.Index != index || !errors.Is(err, errno) {
			t.Fatalf("%s: %v, want *PostError at index %d wrapping %v", what, err, index, errno)
		}
	}
	sge := a.mr.SGE(0, 8)

	// Too many SGEs: the two WRs before it are posted and complete.
	err := a.qp.PostSend(send(1, 0, sge), send(2, 0, sge, sge), send(3, 0, sge, sge, sge), send(4, 0, sge))
	expectPostError("3 SGEs on a 2-SGE QP", err, 2, syscall.EINVAL)
	checkWC(t, a.sendWCs(t, 2)[1], 2, verbs.WCSuccess, verbs.WCSend)
	b.recvWCs(t, 2)
	expectNoWC(t, a.scq, 10*time.Millisecond)

	// Too much inline data.
	err = a.qp.PostSend(send(5, verbs.SendInline, a.mr.SGE(0, 10), a.mr.SGE(10, 6)), send(6, verbs.SendInline, a.mr.SGE(0, 17)))
	expectPostError("17 inline bytes on a 16-byte QP", err, 1, syscall.EINVAL)
	a.sendWC(t, 5, verbs.WCSend)

	// An atomic needs one 8-byte SGE.
	err = a.qp.PostSend(verbs.SendWR{ID: 7, Opcode: verbs.WRAtomicFetchAndAdd, SGL: []verbs.SGE{a.mr.SGE(0, 4)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	expectPostError("4-byte atomic", err, 0, syscall.EINVAL)

	// Unsupported opcode.
	err = a.qp.PostSend(verbs.SendWR{ID: 8, Opcode: verbs.WRTSO})
	expectPostError("TSO", err, 0, syscall.EOPNOTSUPP)

	// Too many receive SGEs.
	err = b.qp.PostRecv(verbs.RecvWR{ID: 9, SGL: []verbs.SGE{b.mr.SGE(0, 1)}},
		verbs.RecvWR{ID: 10, SGL: []verbs.SGE{b.mr.SGE(0, 1), b.mr.SGE(1, 1), b.mr.SGE(2, 1)}})
	expectPostError("3 receive SGEs", err, 1, syscall.EINVAL)

	// A receive whose L_Key is wrong.
	badSGE := b.mr.SGE(0, 8)
	badSGE.LKey++
	err = b.qp.PostRecv(verbs.RecvWR{ID: 11, SGL: []verbs.SGE{badSGE}})
	expectPostError("bad receive L_Key", err, 0, syscall.EINVAL)

	// Receive queue full.
	cfg := defaultPairConfig()
	cfg.Cap.MaxRecvWR = 4
	c := newEnd(t, "c", &cfg)
	if err := connectQP(c.qp, c.psn, a.info(), &cfg); err != nil {
		t.Fatal(err)
	}
	var rwrs []verbs.RecvWR
	for i := range 6 {
		rwrs = append(rwrs, verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{c.mr.SGE(0, 8)}})
	}
	expectPostError("6 receives on a 4-deep queue", c.qp.PostRecv(rwrs...), 4, syscall.ENOMEM)
}

func TestPostInWrongState(t *testing.T) {
	t.Parallel()
	cfg := defaultPairConfig()
	e := newEnd(t, "s", &cfg)
	var pe *verbs.PostError
	// RESET: neither receives nor sends.
	err := e.qp.PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{e.mr.SGE(0, 8)}})
	if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("PostRecv in RESET: %v, want *PostError at 0 wrapping EINVAL", err)
	}
	wr := verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{e.mr.SGE(0, 8)}}
	if err := e.qp.PostSend(wr); !errors.As(err, &pe) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("PostSend in RESET: %v", err)
	}
	// INIT: receives yes, sends no.
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.PostRecv(verbs.RecvWR{ID: 3, SGL: []verbs.SGE{e.mr.SGE(0, 8)}}); err != nil {
		t.Fatalf("PostRecv in INIT: %v", err)
	}
	if err := e.qp.PostSend(wr); !errors.As(err, &pe) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("PostSend in INIT: %v", err)
	}
	// Destroyed: ErrClosed.
	if err := e.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.PostSend(wr); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("PostSend after Destroy: %v", err)
	}
	if err := e.qp.PostRecv(verbs.RecvWR{ID: 4}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("PostRecv after Destroy: %v", err)
	}
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Modify after Destroy: %v", err)
	}
	if _, _, err := e.qp.Query(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Query after Destroy: %v", err)
	}
	if err := e.qp.Destroy(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("second Destroy: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Completion queues

func TestCQPollNonBlocking(t *testing.T) {
	t.Parallel()
	ctx := openContext(t)
	cq, err := ctx.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	var wc [4]verbs.WC
	start := time.Now()
	for range 1000 {
		if n, err := cq.Poll(wc[:]); n != 0 || err != nil {
			t.Fatalf("Poll on an empty CQ: %d, %v", n, err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("1000 polls of an empty CQ took %v", d)
	}
	if n, err := cq.Poll(nil); n != 0 || err != nil {
		t.Fatalf("Poll(nil): %d, %v", n, err)
	}
	if err := cq.ReqNotify(false); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("ReqNotify without a channel: %v", err)
	}
}

func TestCompChannelCancel(t *testing.T) {
	t.Parallel()
	ctx := openContext(t)
	ch, err := ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(4, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	// Deadline.
	c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	start := time.Now()
	got, err := ch.GetEvent(c)
	cancel()
	if got != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetEvent past its deadline: %v, %v", got, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("GetEvent returned %v after a 20ms deadline", d)
	}
	// Cancellation from another goroutine.
	c, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := ch.GetEvent(c); done <- err }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("GetEvent after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GetEvent ignored cancellation")
	}
	// Destroying the channel wakes a waiter.
	go func() { _, err := ch.GetEvent(context.Background()); done <- err }()
	time.Sleep(10 * time.Millisecond)
	ch.Destroy()
	select {
	case err := <-done:
		if !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("GetEvent on a destroyed channel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Destroy did not wake GetEvent")
	}
}

func TestCQSolicitedOnly(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	for i := range 3 {
		b.postRecv(t, uint64(i), i*64, 64)
	}
	if err := b.rcq.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
	// Wait (by polling, without events) for the unsolicited completion.
	var wc [1]verbs.WC
	deadline := time.Now().Add(wcTimeout)
	for {
		n, err := b.rcq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no receive completion")
		}
		time.Sleep(100 * time.Microsecond)
	}
	checkWC(t, wc[0], 0, verbs.WCSuccess, verbs.WCRecv)
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	ev, err := b.ch.GetEvent(c)
	cancel()
	if err == nil {
		t.Fatalf("unsolicited completion raised an event on %p with a solicited-only CQ", ev)
	}
	// A SEND with SendSolicited raises the event.
	a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSolicited | verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
	c, cancel = context.WithTimeout(context.Background(), wcTimeout)
	ev, err = b.ch.GetEvent(c)
	cancel()
	if err != nil || ev != b.rcq {
		t.Fatalf("solicited SEND: GetEvent %v, %v; want the receive CQ", ev, err)
	}
	ev.AckEvents(1)
	if n, _ := b.rcq.Poll(wc[:]); n != 1 || wc[0].WRID != 1 {
		t.Fatalf("after the event: %d completions %+v", n, wc[0])
	}
	a.sendWC(t, 2, verbs.WCSend)
	// So does a solicited WRITE with immediate.
	if err := b.rcq.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(verbs.SendWR{ID: 3, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSolicited,
		SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	c, cancel = context.WithTimeout(context.Background(), wcTimeout)
	ev, err = b.ch.GetEvent(c)
	cancel()
	if err != nil || ev != b.rcq {
		t.Fatalf("solicited WRITE_WITH_IMM: GetEvent %v, %v", ev, err)
	}
	ev.AckEvents(1)
	checkWC(t, b.recvWCs(t, 1)[0], 2, verbs.WCSuccess, verbs.WCRecvRDMAWithImm)
}

// TestCQOverflow overflows a receive CQ of size 1. As in rxe, a completion
// lost to a full CQ takes the responder's QP to ERR (without a NAK), so the
// requester, short of ACKs, fails with RETRY_EXC_ERR.
func TestCQOverflow(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t, func(c *pairConfig) { c.RecvCQE = 1; fastRetry(c) })
	if b.rcq.Cap() < 1 {
		t.Fatalf("CQ capacity %d", b.rcq.Cap())
	}
	for i := range 3 {
		b.postRecv(t, uint64(i), i*64, 64)
	}
	for i := range 3 {
		a.post(t, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}})
	}
	wcs := a.sendWCs(t, 3)
	if wcs[2].Status == verbs.WCSuccess {
		t.Errorf("all three SENDs succeeded although the receiver's CQ overflowed: %+v", wcs)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !b.rcq.Overflowed() {
		if time.Now().After(deadline) {
			t.Fatal("a CQ of size 1 with 3 completions did not overflow")
		}
		time.Sleep(time.Millisecond)
	}
	stateIs(t, b.qp, verbs.QPStateErr)
	var wc [4]verbs.WC
	if n, err := b.rcq.Poll(wc[:]); n != b.rcq.Cap() || err != nil || wc[0].WRID != 0 || wc[0].Status != verbs.WCSuccess {
		t.Fatalf("Poll after overflow: %d, %v, %+v", n, err, wc[:n])
	}
	if a.rcq.Overflowed() || a.scq.Overflowed() {
		t.Fatal("another CQ reports an overflow")
	}
	if stats(b.ctx).CQOverflow.Load() == 0 {
		t.Fatal("overflow not counted")
	}
}

// openContext opens a fresh loopback device, closed at the end of the test.
func openContext(t *testing.T) *verbs.Context {
	t.Helper()
	ctx, err := newLoopbackDevice(t, "c").Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	return ctx
}
