package service

import (
	"fmt"
	"slices"

	"golang.org/x/net/bpf"

	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/wire"
)

// steering is what the service tells the kernel about an address: which
// socket of the address's SO_REUSEPORT group each slot's process reads,
// which process listens on each service ID, and which gets requests that
// no slot owns. Index 0 is the service's own socket: what comes there was
// routed to no process.
type steering struct {
	bySlot map[uint8]uint32  // slot → socket index
	claims map[uint64]uint32 // service ID → socket index
	oldest uint32            // the longest-attached process's index (0: none)
}

// index is the socket index the kernel should pick for packet p: route's
// decision, resolved through the table. It is the reference the BPF
// program is tested against.
func (st *steering) index(p []byte) uint32 {
	switch d := route(p); d.kind {
	case destSlot:
		return st.bySlot[d.slot]
	case destListener:
		if i, ok := st.claims[d.serviceID]; ok {
			return i
		}
		return st.oldest
	case destAny:
		return st.oldest
	}
	return 0
}

// program compiles the table into a classic BPF program for
// SO_ATTACH_REUSEPORT_CBPF: run on each UDP datagram (its payload, the
// RoCEv2 packet, from offset 0), it returns the index of the socket that
// gets it, making the same decision as index. A load past the end of the
// packet ends the program with 0, the service's socket.
func (st *steering) program() ([]bpf.Instruction, error) {
	var a asm
	slots := make([]uint8, 0, len(st.bySlot))
	for s := range st.bySlot {
		slots = append(slots, s)
	}
	slices.Sort(slots)
	dispatch := func() { // A holds a slot: return its socket, or 0
		for _, s := range slots {
			a.retIf(bpf.JumpEqual, uint32(s), st.bySlot[s])
		}
		a.ret(0)
	}
	const (
		minLen  = wire.BTHLen + wire.ICRCLen
		gsiLen  = madOffset + mad.Size + wire.ICRCLen
		classAt = madOffset + 1
		methAt  = madOffset + 3
		tidAt   = madOffset + 8
		attrAt  = madOffset + 16
		sidAt   = madOffset + 32 // REQ, SIDR_REQ: service ID
		reqIDAt = madOffset + 24 // SIDR_REP: request ID
		remIDAt = madOffset + 28 // REP … APR: remote communication ID
	)
	a.add(bpf.LoadExtension{Num: bpf.ExtLen})
	a.retIf(bpf.JumpLessThan, minLen, 0)
	a.add(bpf.LoadAbsolute{Off: 5, Size: 1}) // the destination QPN's top byte
	a.gotoIf(bpf.JumpEqual, 0, "qp1")
	dispatch()

	a.label("qp1")
	a.add(bpf.LoadExtension{Num: bpf.ExtLen})
	a.retIf(bpf.JumpLessThan, gsiLen, 0)
	a.add(bpf.LoadAbsolute{Off: 4, Size: 4})
	a.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xFFFFFF})
	a.retIf(bpf.JumpNotEqual, 1, 0)
	a.add(bpf.LoadAbsolute{Off: 0, Size: 1})
	a.retIf(bpf.JumpNotEqual, uint32(wire.UDSendOnly), 0)
	a.add(bpf.LoadAbsolute{Off: classAt, Size: 1})
	a.gotoIf(bpf.JumpEqual, mad.ClassCM, "cm")
	a.add(bpf.LoadAbsolute{Off: methAt, Size: 1})
	a.gotoIf(bpf.JumpEqual, mad.MethodTrapRepress, "response")
	a.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mad.MethodResponseFlag})
	a.retIf(bpf.JumpEqual, 0, st.oldest) // a request
	a.label("response")
	a.add(bpf.LoadAbsolute{Off: tidAt, Size: 1})
	dispatch() // a response: the TID's top byte

	a.label("cm")
	a.add(bpf.LoadAbsolute{Off: attrAt, Size: 2})
	a.gotoIf(bpf.JumpEqual, mad.AttrREQ, "sid")
	a.gotoIf(bpf.JumpEqual, mad.AttrSIDRREQ, "sid")
	a.gotoIf(bpf.JumpEqual, mad.AttrSIDRREP, "reqid")
	for _, attr := range []uint32{mad.AttrREP, mad.AttrRTU, mad.AttrREJ, mad.AttrMRA, mad.AttrDREQ, mad.AttrDREP, mad.AttrLAP, mad.AttrAPR} {
		a.gotoIf(bpf.JumpEqual, attr, "remid")
	}
	a.ret(st.oldest)

	a.label("sid")
	ids := make([]uint64, 0, len(st.claims))
	for id := range st.claims {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a.add(bpf.LoadAbsolute{Off: sidAt, Size: 4})
		a.add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(id >> 32), SkipFalse: 3})
		a.add(bpf.LoadAbsolute{Off: sidAt + 4, Size: 4})
		a.retIf(bpf.JumpEqual, uint32(id), st.claims[id])
	}
	a.ret(st.oldest)

	a.label("reqid")
	a.add(bpf.LoadAbsolute{Off: reqIDAt, Size: 1})
	a.gotoAlways("cmslot")
	a.label("remid")
	a.add(bpf.LoadAbsolute{Off: remIDAt, Size: 1})
	a.label("cmslot") // an echoed ID's top byte: no slot there means any process
	a.retIf(bpf.JumpEqual, 0, st.oldest)
	a.retIf(bpf.JumpGreaterThan, MaxSlot, st.oldest)
	dispatch()
	return a.resolve()
}

// asm assembles a program with forward jumps to labels: a conditional
// jump skips over an unconditional one (32-bit offset), so no 8-bit skip
// ever runs out.
type asm struct {
	ins    []bpf.Instruction
	fixups map[int]string // index of a Jump → its label
	labels map[string]int
}

func (a *asm) add(i bpf.Instruction) { a.ins = append(a.ins, i) }

func (a *asm) ret(v uint32) { a.add(bpf.RetConstant{Val: v}) }

// retIf returns v when A cond val holds.
func (a *asm) retIf(cond bpf.JumpTest, val, v uint32) {
	a.add(bpf.JumpIf{Cond: cond, Val: val, SkipFalse: 1})
	a.ret(v)
}

// gotoIf jumps to label when A cond val holds.
func (a *asm) gotoIf(cond bpf.JumpTest, val uint32, label string) {
	a.add(bpf.JumpIf{Cond: cond, Val: val, SkipFalse: 1})
	a.gotoAlways(label)
}

func (a *asm) gotoAlways(label string) {
	if a.fixups == nil {
		a.fixups = make(map[int]string)
	}
	a.fixups[len(a.ins)] = label
	a.add(bpf.Jump{})
}

func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = make(map[string]int)
	}
	a.labels[name] = len(a.ins)
}

func (a *asm) resolve() ([]bpf.Instruction, error) {
	for at, l := range a.fixups {
		to, ok := a.labels[l]
		if !ok || to <= at {
			return nil, fmt.Errorf("service: BPF label %q missing or behind its jump", l)
		}
		a.ins[at] = bpf.Jump{Skip: uint32(to - at - 1)}
	}
	if len(a.ins) > 4096 { // BPF_MAXINSNS
		return nil, fmt.Errorf("service: steering program of %d instructions, more than the kernel's 4096", len(a.ins))
	}
	return a.ins, nil
}
