package testdev

import (
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rdma-go/rdma-go/wire"
)

// CheckPcap reads a capture of package link/capture and fails the test
// unless every packet is IPv4 or IPv6 UDP whose RoCEv2 ICRC is valid for its
// headers, and, where tshark is installed, Wireshark decodes every packet as
// InfiniBand with none malformed. It returns how many packets of each BTH
// opcode went between the addresses in between (all packets if none is
// given), and how many packets the capture holds.
func CheckPcap(t testing.TB, path string, between ...netip.Addr) (ops map[byte]int, total int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	in := func(a netip.Addr) bool {
		if len(between) == 0 {
			return true
		}
		for _, b := range between {
			if a == b {
				return true
			}
		}
		return false
	}
	ops = map[byte]int{}
	for range 1 << 20 {
		data, _, err := pr.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		total++
		p := gopacket.NewPacket(data, layers.LinkTypeRaw, gopacket.Default)
		u, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		var src, dst netip.Addr
		var id uint16
		switch ip := p.NetworkLayer().(type) {
		case *layers.IPv4:
			src, _ = netip.AddrFromSlice(ip.SrcIP)
			dst, _ = netip.AddrFromSlice(ip.DstIP)
			id = ip.Id
		case *layers.IPv6:
			src, _ = netip.AddrFromSlice(ip.SrcIP)
			dst, _ = netip.AddrFromSlice(ip.DstIP)
		}
		if u == nil || !src.IsValid() {
			t.Fatalf("packet %d: not IP/UDP: %v", total, p)
		}
		if !in(src) || !in(dst) {
			continue
		}
		pl := u.Payload
		if len(pl) < 16 || binary.LittleEndian.Uint32(pl[len(pl)-4:]) !=
			wire.ICRCWithIPv4ID(src, dst, id, uint16(u.SrcPort), uint16(u.DstPort), pl[:len(pl)-4]) {
			t.Fatalf("packet %d (%v → %v, IP ID %#x, %d bytes): ICRC not valid for its headers", total, src, dst, id, len(pl))
		}
		ops[pl[0]]++
	}
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("no tshark: the capture's decoding by Wireshark is not checked")
		return ops, total
	}
	count := func(filter string) int {
		t.Helper()
		out, err := exec.Command(tshark, "-r", path, "-Y", filter, "-T", "fields", "-e", "frame.number").Output()
		if err != nil {
			t.Fatalf("tshark -Y %q: %v", filter, err)
		}
		return len(strings.Fields(string(out)))
	}
	if ib, bad := count("infiniband"), count("_ws.malformed || _ws.expert.severity >= error"); ib != total || bad != 0 {
		t.Fatalf("tshark: %d of %d packets decode as InfiniBand, %d malformed or in error", ib, total, bad)
	}
	t.Logf("tshark: all %d packets InfiniBand, none malformed", total)
	return ops, total
}
