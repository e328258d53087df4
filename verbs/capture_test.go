package verbs_test

import (
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rdma-go/rdma-go/link/capture"
	"github.com/rdma-go/rdma-go/verbs"
	"github.com/rdma-go/rdma-go/wire"
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

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	aa, ba := a.ctx.Device().Addr(), b.ctx.Device().Addr()
	ops := map[byte]int{}
	total := 0
	for range 100000 {
		data, _, err := pr.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		total++
		p := gopacket.NewPacket(data, layers.LinkTypeRaw, gopacket.Default)
		v4, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		u, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if v4 == nil || u == nil {
			t.Fatalf("packet %d: not IPv4/UDP: %v", total, p)
		}
		src, _ := netip.AddrFromSlice(v4.SrcIP)
		dst, _ := netip.AddrFromSlice(v4.DstIP)
		if (src != aa || dst != ba) && (src != ba || dst != aa) {
			continue // another test's devices
		}
		pl := u.Payload
		if len(pl) < 16 || binary.LittleEndian.Uint32(pl[len(pl)-4:]) !=
			wire.ICRCWithIPv4ID(src, dst, v4.Id, uint16(u.SrcPort), uint16(u.DstPort), pl[:len(pl)-4]) {
			t.Fatalf("packet %d (%v → %v, ID %#x, %d bytes): ICRC not valid for its headers", total, src, dst, v4.Id, len(pl))
		}
		ops[pl[0]]++
	}
	// RC opcodes: WRITE FIRST 0x06, MIDDLE 0x07, LAST 0x08, SEND ONLY
	// 0x04, ACKNOWLEDGE 0x11.
	mid := n/4096 - 2
	if ops[0x06] != 1 || ops[0x07] != mid || ops[0x08] != 1 || ops[0x04] != 1 || ops[0x11] < 1 {
		t.Fatalf("captured opcodes %v: want one WRITE FIRST, %d MIDDLE, one LAST, one SEND ONLY and ACKs", ops, mid)
	}

	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("no tshark: the capture's decoding by Wireshark is not checked")
		return
	}
	count := func(filter string) int {
		t.Helper()
		out, err := exec.Command(tshark, "-r", path, "-Y", filter, "-T", "fields", "-e", "frame.number").Output()
		if err != nil {
			t.Fatalf("tshark -Y %q: %v", filter, err)
		}
		return len(strings.Fields(string(out)))
	}
	ib, bad := count("infiniband"), count("_ws.malformed || _ws.expert.severity >= error")
	if ib != total || bad != 0 {
		t.Fatalf("tshark: %d of %d packets decode as InfiniBand, %d malformed or in error", ib, total, bad)
	}
	t.Logf("tshark: all %s packets InfiniBand, none malformed", strconv.Itoa(total))
}
