package wire

import "testing"

// TestSourcePort checks the values of docs/spec/roce-wire.md §1.4.
func TestSourcePort(t *testing.T) {
	for _, c := range []struct {
		lqpn, rqpn, fl uint32
		want           uint16
	}{
		{0x11, 0x12, 0, 0xC132},
		{0x123, 0x456, 0, 0xEDD1},
		{0xABCDEF, 0x123456, 0, 0xC3C8},
		{0x11, 0x12, 0x12345, 0xE341},
		{0x999, 0x777, 0x12345, 0xE341}, // a flow label overrides the QPNs
	} {
		if got := SourcePort(c.lqpn, c.rqpn, c.fl); got != c.want {
			t.Errorf("SourcePort(%#x, %#x, %#x) = %#04x, want %#04x", c.lqpn, c.rqpn, c.fl, got, c.want)
		}
		// Both ends of a connection pick the same port.
		if SourcePort(c.lqpn, c.rqpn, c.fl) != SourcePort(c.rqpn, c.lqpn, c.fl) {
			t.Errorf("SourcePort(%#x, %#x) is not symmetric", c.lqpn, c.rqpn)
		}
	}
	for q := uint32(0); q < 5000; q += 7 {
		if p := SourcePort(q, q*3+1, 0); p < MinSourcePort {
			t.Fatalf("SourcePort %#04x below 0xC000", p)
		}
		if p := UDSourcePort(q); p < MinSourcePort {
			t.Fatalf("UDSourcePort %#04x below 0xC000", p)
		}
	}
	if got := UDSourcePort(0x11); got != 0xDF94 {
		t.Errorf("UDSourcePort(0x11) = %#04x, want 0xDF94", got)
	}
	if got := FlowLabel(0x11, 0x12); got != 0x132 {
		t.Errorf("FlowLabel(0x11, 0x12) = %#x, want 0x132", got)
	}
	// V1's and V4's source ports (§5.4).
	if SourcePort(0x11, 0x12, 0) != 0xC132 {
		t.Error("V1 sport")
	}
}

func TestEncapsulationConstants(t *testing.T) {
	if IPv4HeaderLen != 20 || IPv6HeaderLen != 40 || UDPHeaderLen != 8 || RoCEv2Port != 4791 {
		t.Fatal("constants")
	}
	// §1.6: the biggest IPv4 packet at PMTU 1024 is 1084 bytes, 1088 with RETH and ImmDt.
	if n := IPv4HeaderLen + UDPHeaderLen + PacketLen(RCWriteFirst, 1024); n != 1084 {
		t.Errorf("WRITE FIRST at 1024: %d", n)
	}
	if n := IPv4HeaderLen + UDPHeaderLen + PacketLen(RCWriteOnlyImm, 1024); n != 1088 {
		t.Errorf("WRITE ONLY IMM at 1024: %d", n)
	}
}
