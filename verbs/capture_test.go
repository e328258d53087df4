package verbs_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/link/capture"
	"github.com/rdma-go/rdma-go/verbs"
)

// TestCaptureRCTraffic: a capture of a 64 KiB RDMA WRITE (sent with GSO,
// received with GRO) and a SEND between two soft devices holds each
// packet as it is on the wire: WRITE FIRST, MIDDLEs and LAST of one MTU
// each, the SEND, the ACKs, every ICRC valid for its IP header; and tshark,
// where installed, decodes every packet as InfiniBand with none malformed.
func TestCaptureRCTraffic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rc.pcap")
	if err := capture.StartFile(path); err != nil {
		t.Fatal(err)
	}
	running := true
	t.Cleanup(func() {
		if running {
			capture.Stop()
		}
	})
	a, b := newRCPair(t)
	const n = 64 << 10
	fill(a.buf[:n], 1)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	a.sendWC(t, 1, verbs.WCRDMAWrite)
	b.postRecv(t, 2, 0, 64)
	a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)}})
	a.sendWC(t, 2, verbs.WCSend)
	b.recvWCs(t, 1)
	time.Sleep(10 * time.Millisecond) // the last ACK's capture
	running = false
	if err := capture.Stop(); err != nil {
		t.Fatal(err)
	}

	ops, _ := testdev.CheckPcap(t, path, a.ctx.Device().Addr(), b.ctx.Device().Addr())
	// RC opcodes: WRITE FIRST 0x06, MIDDLE 0x07, LAST 0x08, SEND ONLY
	// 0x04, ACKNOWLEDGE 0x11.
	mid := n/4096 - 2
	if ops[0x06] != 1 || ops[0x07] != mid || ops[0x08] != 1 || ops[0x04] != 1 || ops[0x11] < 1 {
		t.Fatalf("captured opcodes %v: want one WRITE FIRST, %d MIDDLE, one LAST, one SEND ONLY and ACKs", ops, mid)
	}

}
