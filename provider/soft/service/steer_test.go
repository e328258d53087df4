package service

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/wire"
)

// testSteering is a table with slots, claims and a longest-attached
// process, and service IDs that share their high or low half.
func testSteering() *steering {
	return &steering{
		bySlot: map[uint8]uint32{1: 3, 2: 1, 7: 2, 254: 5},
		claims: map[uint64]uint32{0x0106000000004E21: 2, 0x0106000000004E22: 5, 0x0206000000004E21: 1},
		oldest: 3,
	}
}

func vmFor(t testing.TB, st *steering) *bpf.VM {
	t.Helper()
	prog, err := st.program()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// seeds are packets of every kind route tells apart.
func seeds() [][]byte {
	perf := func(method uint8, tid uint64) []byte {
		return madPacket(mad.New(mad.ClassPerfMgt, 1, method, 0x12, tid))
	}
	var out [][]byte
	for _, q := range []uint32{0x010002, 0x020005, 0x070002, 0xFE0002, 0x050002, 0xFFFFFF, 0x11, 0} {
		out = append(out, packet(wire.RCSendOnly, q, make([]byte, 8)))
	}
	for _, id := range []uint64{0x0106000000004E21, 0x0106000000004E22, 0x0206000000004E21, 0x0106000000004E23, 0x0206000000004E22} {
		out = append(out, madPacket(cmMAD(mad.AttrREQ, 32, id, 8)), madPacket(cmMAD(mad.AttrSIDRREQ, 32, id, 8)))
	}
	for _, attr := range []uint16{mad.AttrREP, mad.AttrRTU, mad.AttrREJ, mad.AttrMRA, mad.AttrDREQ, mad.AttrDREP, mad.AttrLAP, mad.AttrAPR} {
		for _, top := range []uint64{0, 1, 2, 5, 7, 254, 255} {
			out = append(out, madPacket(cmMAD(attr, 28, top<<24|0x123456, 4)))
		}
	}
	for _, top := range []uint64{0, 1, 3, 7, 255} {
		out = append(out, madPacket(cmMAD(mad.AttrSIDRREP, 24, top<<24|1, 4)), perf(mad.MethodGetResp, top<<56|1))
	}
	out = append(out, perf(mad.MethodGet, 0x0100000000000001), perf(mad.MethodTrapRepress, 0x0700000000000001), madPacket(mad.NewCM(mad.AttrClassPortInfo, 1)),
		packet(wire.RCSendOnly, 1, make([]byte, wire.DETHLen+mad.Size)), make([]byte, 15), nil)
	return out
}

// TestSteeringProgram: the BPF program picks the socket the Go routing
// picks, for every kind of packet and for tables from empty to full.
func TestSteeringProgram(t *testing.T) {
	full := &steering{bySlot: map[uint8]uint32{}, claims: map[uint64]uint32{}, oldest: 1}
	for s := 1; s <= MaxSlot; s++ {
		full.bySlot[uint8(s)] = uint32(s)
		full.claims[uint64(s)<<40|0x4E21] = uint32(s)
	}
	for name, st := range map[string]*steering{
		"empty": {}, "some": testSteering(), "full": full,
	} {
		t.Run(name, func(t *testing.T) {
			vm := vmFor(t, st)
			for i, p := range seeds() {
				got, err := vm.Run(p)
				if err != nil {
					t.Fatal(err)
				}
				if want := st.index(p); uint32(got) != want {
					t.Errorf("packet %d (%x…): program gives socket %d, routing %d", i, p[:min(len(p), 8)], got, want)
				}
			}
		})
	}
}

// FuzzSteeringProgram: on any bytes, the program agrees with the routing.
func FuzzSteeringProgram(f *testing.F) {
	for _, p := range seeds() {
		f.Add(p)
	}
	st := testSteering()
	vm := vmFor(f, st)
	f.Fuzz(func(t *testing.T, p []byte) {
		// Most random bytes are not MADs: make some of them MADs to QP1
		// by fixing the header bytes the program checks.
		if len(p) > 0 && p[0]&1 == 1 && len(p) >= madOffset+mad.Size+wire.ICRCLen {
			p[0] = byte(wire.UDSendOnly)
			binary.BigEndian.PutUint32(p[4:], 1)
			p[madOffset+1] = []byte{mad.ClassCM, mad.ClassPerfMgt}[p[1]&1]
		}
		got, err := vm.Run(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := st.index(p); uint32(got) != want {
			t.Fatalf("program gives socket %d, routing %d", got, want)
		}
	})
}
