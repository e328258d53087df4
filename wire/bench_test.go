package wire

import (
	"encoding/binary"
	"fmt"
	"testing"
)

var benchSink uint32

func BenchmarkParse(b *testing.B) {
	f := pktFields{op: RCWriteFirst, destQP: 0x12, psn: 7, va: 0x1000, rkey: 0x1a2b, dmaLen: 4096, payload: make([]byte, 1024)}
	pkt := f.build()
	b.ReportAllocs()
	var p Packet
	for b.Loop() {
		if err := p.Parse(pkt); err != nil {
			b.Fatal(err)
		}
		benchSink += p.RETH().RKey() + uint32(len(p.Payload))
	}
}

// BenchmarkEncodeWriteFirst builds an RDMA WRITE First packet (BTH, RETH and
// a 1024-byte payload) into a preallocated buffer, ICRC included.
func BenchmarkEncodeWriteFirst(b *testing.B) {
	payload := make([]byte, 1024)
	buf := make([]byte, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	psn := PSN(0)
	for b.Loop() {
		n := PacketLen(RCWriteFirst, len(payload))
		pkt := buf[:n]
		BTH(pkt).Encode(RCWriteFirst, false, 0, 0x12, false, psn)
		RETH(pkt[BTHLen:]).Encode(0x7f1234560000, 0x1a2b, 8192)
		copy(pkt[RCWriteFirst.HdrLen():], payload)
		PutICRC(addr4a, addr4b, 0xC132, RoCEv2Port, pkt)
		psn = psn.Next()
	}
}

func BenchmarkICRC(b *testing.B) {
	for _, fam := range []struct {
		name string
		v6   bool
	}{{"v4", false}, {"v6", true}} {
		for _, n := range []int{8, 64, 1024, 4096} {
			b.Run(fmt.Sprintf("%s/%dB", fam.name, n), func(b *testing.B) {
				// 8 B: an RDMA WRITE ONLY (with its RETH), the
				// message-rate packet; the others SEND MIDDLE.
				op := RCSendMiddle
				if n == 8 {
					op = RCWriteOnly
				}
				pkt := make([]byte, PacketLen(op, n))
				BTH(pkt).Encode(op, false, 0, 0x12, false, 1)
				body := pkt[:len(pkt)-ICRCLen]
				s, d := addr4a, addr4b
				if fam.v6 {
					s, d = addr6a, addr6b
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					benchSink += ICRC(s, d, 0xC000, RoCEv2Port, body)
				}
			})
		}
	}
}

// BenchmarkVerifyICRC measures the receive check: the ID-0 fast path and the
// AnyID slow path for a foreign sender's non-zero ID, after warm-up.
func BenchmarkVerifyICRC(b *testing.B) {
	for _, id := range []uint16{0, 0xe6a3} {
		b.Run(fmt.Sprintf("id=%#04x/1024B", id), func(b *testing.B) {
			benchVerify(b, id, 1024)
		})
	}
}

// BenchmarkVerifyICRCNonZeroID is the AnyID slow path after warm-up.
func BenchmarkVerifyICRCNonZeroID(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) { benchVerify(b, 0x718c, n) })
	}
}

func benchVerify(b *testing.B, id uint16, n int) {
	pkt := make([]byte, PacketLen(RCSendMiddle, n))
	BTH(pkt).Encode(RCSendMiddle, false, 0, 0x12, false, 1)
	body := pkt[:len(pkt)-ICRCLen]
	binary.LittleEndian.PutUint32(pkt[len(body):], ICRCWithIPv4ID(addr4a, addr4b, id, 0xC000, RoCEv2Port, body))
	if !VerifyICRC(addr4a, addr4b, 0xC000, RoCEv2Port, pkt, ICRCIPv4AnyID) { // warm-up
		b.Fatal("rejected")
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		if !VerifyICRC(addr4a, addr4b, 0xC000, RoCEv2Port, pkt, ICRCIPv4AnyID) {
			b.Fatal("rejected")
		}
	}
}

// BenchmarkIDSolverBuild is the one-time cost of a new packet length.
func BenchmarkIDSolverBuild(b *testing.B) {
	b.ReportAllocs()
	var v idSolver
	for b.Loop() {
		v.init(1062)
	}
	benchSink += v.row[0]
}

// BenchmarkICRCSealer is BenchmarkICRC's v4 packets sealed by one
// ICRCSealer, one flow and size after another (its saved state reused).
func BenchmarkICRCSealer(b *testing.B) {
	for _, n := range []int{8, 64, 1024, 4096} {
		b.Run(fmt.Sprintf("v4/%dB", n), func(b *testing.B) {
			op := RCSendMiddle
			if n == 8 {
				op = RCWriteOnly
			}
			pkt := make([]byte, PacketLen(op, n))
			BTH(pkt).Encode(op, false, 0, 0x12, false, 1)
			var s ICRCSealer
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt) - ICRCLen))
			for b.Loop() {
				s.Put(addr4a, addr4b, 0xC000, RoCEv2Port, pkt)
			}
		})
	}
}
