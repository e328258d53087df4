package service

import (
	"encoding/binary"
	"testing"

	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/wire"
)

// packet builds a RoCEv2 packet of opcode op to qpn with payload, and room
// for the ICRC (its value does not matter to routing).
func packet(op wire.Opcode, qpn uint32, payload []byte) []byte {
	p := make([]byte, wire.BTHLen, wire.BTHLen+len(payload)+wire.ICRCLen)
	wire.BTH(p).Encode(op, false, 0, qpn, false, 0)
	p = append(p, payload...)
	return append(p, make([]byte, wire.ICRCLen)...)
}

// madPacket is a UD SEND_ONLY to QP1 carrying m.
func madPacket(m mad.MAD) []byte {
	return packet(wire.UDSendOnly, 1, append(make([]byte, wire.DETHLen), m...))
}

func cmMAD(attr uint16, at int, v uint64, size int) mad.MAD {
	m := mad.NewCM(attr, 0x1234)
	switch size {
	case 4:
		binary.BigEndian.PutUint32(m[at:], uint32(v))
	case 8:
		binary.BigEndian.PutUint64(m[at:], v)
	}
	return m
}

func TestRoute(t *testing.T) {
	perfGet := mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, 0x12, 0x0700000000000001)
	perfResp := mad.New(mad.ClassPerfMgt, 1, mad.MethodGetResp, 0x12, 0x0700000000000001)
	for _, tc := range []struct {
		name string
		pkt  []byte
		want dest
	}{
		{"RC to slot 1", packet(wire.RCSendOnly, 0x010002, make([]byte, 8)), dest{kind: destSlot, slot: 1}},
		{"RC to slot 254", packet(wire.RCWriteFirst, 0xFE1234, make([]byte, 16)), dest{kind: destSlot, slot: 254}},
		{"ACK to slot 9", packet(wire.RCAck, 0x09FFFF, make([]byte, 4)), dest{kind: destSlot, slot: 9}},
		{"multicast QPN", packet(wire.UDSendOnly, 0xFFFFFF, make([]byte, 8)), dest{}},
		{"QP0", packet(wire.UDSendOnly, 0, make([]byte, wire.DETHLen+mad.Size)), dest{}},
		{"unused slot-0 QPN", packet(wire.RCSendOnly, 0x11, make([]byte, 8)), dest{}},
		{"too short", make([]byte, wire.BTHLen+wire.ICRCLen-1), dest{}},
		{"QP1 not a UD send", packet(wire.RCSendOnly, 1, make([]byte, wire.DETHLen+mad.Size)), dest{}},
		{"QP1 short MAD", packet(wire.UDSendOnly, 1, make([]byte, wire.DETHLen+mad.Size-1)), dest{}},
		{"REQ", madPacket(cmMAD(mad.AttrREQ, 32, 0x0106000000004E21, 8)), dest{kind: destListener, serviceID: 0x0106000000004E21}},
		{"SIDR_REQ", madPacket(cmMAD(mad.AttrSIDRREQ, 32, 0x0111000000004E21, 8)), dest{kind: destListener, serviceID: 0x0111000000004E21}},
		{"REP", madPacket(cmMAD(mad.AttrREP, 28, 0x05ABCDEF, 4)), dest{kind: destSlot, slot: 5}},
		{"RTU", madPacket(cmMAD(mad.AttrRTU, 28, 0x06000001, 4)), dest{kind: destSlot, slot: 6}},
		{"REJ", madPacket(cmMAD(mad.AttrREJ, 28, 0x07000001, 4)), dest{kind: destSlot, slot: 7}},
		{"MRA", madPacket(cmMAD(mad.AttrMRA, 28, 0x08000001, 4)), dest{kind: destSlot, slot: 8}},
		{"DREQ", madPacket(cmMAD(mad.AttrDREQ, 28, 0x09000001, 4)), dest{kind: destSlot, slot: 9}},
		{"DREP", madPacket(cmMAD(mad.AttrDREP, 28, 0x0A000001, 4)), dest{kind: destSlot, slot: 10}},
		{"LAP", madPacket(cmMAD(mad.AttrLAP, 28, 0x0B000001, 4)), dest{kind: destSlot, slot: 11}},
		{"APR", madPacket(cmMAD(mad.AttrAPR, 28, 0x0C000001, 4)), dest{kind: destSlot, slot: 12}},
		{"SIDR_REP", madPacket(cmMAD(mad.AttrSIDRREP, 24, 0x0D000001, 4)), dest{kind: destSlot, slot: 13}},
		{"DREQ to an ID without a slot", madPacket(cmMAD(mad.AttrDREQ, 28, 0x00000001, 4)), dest{kind: destAny}},
		{"DREQ to slot 255", madPacket(cmMAD(mad.AttrDREQ, 28, 0xFF000001, 4)), dest{kind: destAny}},
		{"CM ClassPortInfo", madPacket(mad.NewCM(mad.AttrClassPortInfo, 1)), dest{kind: destAny}},
		{"PerfMgt request", madPacket(perfGet), dest{kind: destAny}},
		{"PerfMgt response", madPacket(perfResp), dest{kind: destSlot, slot: 7}},
		{"response without a slot", madPacket(mad.New(mad.ClassPerfMgt, 1, mad.MethodGetResp, 0x12, 0xFF00000000000001)), dest{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := route(tc.pkt); got != tc.want {
				t.Errorf("route = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzRoute(f *testing.F) {
	f.Add(packet(wire.RCSendOnly, 0x010002, make([]byte, 8)))
	f.Add(madPacket(cmMAD(mad.AttrREQ, 32, 0x0106000000004E21, 8)))
	f.Add(madPacket(cmMAD(mad.AttrREP, 28, 0x05ABCDEF, 4)))
	f.Fuzz(func(t *testing.T, p []byte) {
		d := route(p)
		if d.kind == destSlot && (d.slot == 0 || d.slot > MaxSlot) {
			t.Fatalf("route gave slot %d", d.slot)
		}
	})
}

func TestQPNRange(t *testing.T) {
	for _, s := range []uint8{1, 2, 127, MaxSlot} {
		first, last := QPNRange(s)
		if route(packet(wire.RCSendOnly, first, nil)) != (dest{kind: destSlot, slot: s}) ||
			route(packet(wire.RCSendOnly, last, nil)) != (dest{kind: destSlot, slot: s}) {
			t.Errorf("slot %d: range %#x–%#x does not route back to it", s, first, last)
		}
	}
	if f, l := QPNRange(0); f != 0 || l != 0 {
		t.Errorf("QPNRange(0) = %#x, %#x; want the whole space (0, 0)", f, l)
	}
}
