package capture

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// rocePacket is an RC SEND ONLY of n payload bytes to QP 0x11 with its
// ICRC for IPv4 ID id.
func rocePacket(src, dst netip.AddrPort, psn uint32, n int, id uint16) []byte {
	p := make([]byte, 12+n+wire.ICRCLen)
	p[0] = 0x04 // RC SEND ONLY
	binary.BigEndian.PutUint16(p[2:], 0xffff)
	binary.BigEndian.PutUint32(p[4:], 0x11)
	binary.BigEndian.PutUint32(p[8:], psn&0xffffff)
	for i := range n {
		p[12+i] = byte(i)
	}
	wire.PutICRC(src.Addr(), dst.Addr(), src.Port(), dst.Port(), p)
	wire.RetagICRC(p, 0, id)
	return p
}

// readCapture decodes every packet of a pcap stream.
func readCapture(t *testing.T, r io.Reader) []gopacket.Packet {
	t.Helper()
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if pr.LinkType() != layers.LinkTypeRaw {
		t.Fatalf("link type %v, want raw IP", pr.LinkType())
	}
	var ps []gopacket.Packet
	for range 1000 {
		data, _, err := pr.ReadPacketData()
		if err == io.EOF {
			return ps
		}
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, gopacket.NewPacket(data, layers.LinkTypeRaw, gopacket.Default))
	}
	t.Fatal("more than 1000 packets")
	return nil
}

// TestCaptureOnTheWire: sent and received datagrams, GRO-coalesced ones
// one by one, become IPv4/IPv6 UDP packets to port 4791 whose payload is
// the datagram and whose IPv4 ID makes the ICRC valid; Stop ends it.
func TestCaptureOnTheWire(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:4791")
	b := netip.MustParseAddrPort("127.0.0.2:4791")
	var buf bytes.Buffer
	if err := Start(&buf); err != nil {
		t.Fatal(err)
	}
	sent := rocePacket(netip.AddrPortFrom(a.Addr(), 50000), b, 1, 100, 0)
	Sent(a, []link.Datagram{{Buf: sent, Src: netip.AddrPortFrom(netip.Addr{}, 50000), Dst: b}})
	var gro []byte
	for i := range 3 {
		gro = append(gro, rocePacket(b, a, uint32(10+i), 64, uint16(0x1230+i))...)
	}
	seg := len(gro) / 3
	gro = append(gro, rocePacket(b, a, 13, 8, 0x1233)...) // the last, shorter
	Received([]link.Datagram{{Buf: gro, Src: b, Dst: a, SegSize: seg}})
	v6a := netip.MustParseAddrPort("[::1]:4791")
	Sent(v6a, []link.Datagram{{Buf: rocePacket(v6a, v6a, 20, 4, 0), Dst: v6a}})
	if got := Packets(); got != 6 {
		t.Fatalf("Packets() = %d, want 6", got)
	}
	if err := Stop(); err != nil {
		t.Fatal(err)
	}
	Sent(a, []link.Datagram{{Buf: sent, Dst: b}}) // not recorded

	ps := readCapture(t, &buf)
	if len(ps) != 6 {
		t.Fatalf("%d packets in the capture, want 6", len(ps))
	}
	for i, p := range ps {
		if el := p.ErrorLayer(); el != nil {
			t.Fatalf("packet %d: %v", i, el.Error())
		}
		u, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if u == nil || u.DstPort != 4791 {
			t.Fatalf("packet %d: no UDP to 4791: %v", i, p)
		}
		var src, dst netip.Addr
		var id uint16
		if v4, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			src, _ = netip.AddrFromSlice(v4.SrcIP)
			dst, _ = netip.AddrFromSlice(v4.DstIP)
			id = v4.Id
			if v4.Flags != layers.IPv4DontFragment {
				t.Fatalf("packet %d: IPv4 flags %v, want DF", i, v4.Flags)
			}
		} else if v6, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
			src, _ = netip.AddrFromSlice(v6.SrcIP)
			dst, _ = netip.AddrFromSlice(v6.DstIP)
		} else {
			t.Fatalf("packet %d: no IP layer", i)
		}
		if want := wire.ICRCWithIPv4ID(src, dst, id, uint16(u.SrcPort), uint16(u.DstPort), u.Payload[:len(u.Payload)-4]); binary.LittleEndian.Uint32(u.Payload[len(u.Payload)-4:]) != want {
			t.Fatalf("packet %d (%v → %v, ID %#x): ICRC does not match its headers", i, src, dst, id)
		}
	}
	if u := ps[0].Layer(layers.LayerTypeUDP).(*layers.UDP); u.SrcPort != 50000 || !bytes.Equal(u.Payload, sent) {
		t.Fatalf("sent packet: source port %d, payload %x", u.SrcPort, u.Payload)
	}
	for i := 1; i <= 4; i++ {
		v4 := ps[i].Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if v4.Id != uint16(0x1230+i-1) {
			t.Fatalf("received packet %d: IP ID %#x, want %#x", i, v4.Id, 0x1230+i-1)
		}
	}
	if n := len(ps[4].Layer(layers.LayerTypeUDP).(*layers.UDP).Payload); n != 12+8+4 {
		t.Fatalf("last GRO segment: %d bytes", n)
	}
}

// TestStartFileBadPath: a capture file that cannot be created is an error.
func TestStartFileBadPath(t *testing.T) {
	if err := StartFile(t.TempDir() + "/no/such/dir/x.pcap"); err == nil {
		Stop()
		t.Fatal("StartFile into a missing directory succeeded")
	}
	if Active() {
		t.Fatal("a capture runs after StartFile failed")
	}
}
