package service

import (
	"encoding/binary"

	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/wire"
)

// destKind says how the service finds the process a datagram goes to.
type destKind uint8

const (
	destDrop     destKind = iota // malformed, or for no process
	destSlot                     // the process in dest.slot
	destListener                 // the process that claimed dest.serviceID
	destAny                      // a request to QP1 that no slot owns
)

// dest is where one datagram goes.
type dest struct {
	kind      destKind
	slot      uint8
	serviceID uint64
}

// madOffset is where a MAD starts in a UD SEND_ONLY packet: after the BTH
// and the DETH (RoCEv2 packets carry no GRH inside UDP).
const madOffset = wire.BTHLen + wire.DETHLen

// route reads where a RoCEv2 packet (BTH through ICRC) goes. It looks at
// the destination QPN only, and for QP1 at the MAD header and the CM
// message's IDs; it never trusts a length it has not checked.
func route(p []byte) dest {
	if len(p) < wire.BTHLen+wire.ICRCLen {
		return dest{}
	}
	qpn := wire.BTH(p).DestQP()
	if slot := qpn >> 16; slot != 0 {
		if slot > MaxSlot {
			return dest{} // the multicast QPN: no multicast here
		}
		return dest{kind: destSlot, slot: uint8(slot)}
	}
	if qpn != 1 || wire.BTH(p).Opcode() != wire.UDSendOnly || len(p) < madOffset+mad.Size+wire.ICRCLen {
		return dest{} // QP0, unused numbers, or not a MAD
	}
	m := mad.MAD(p[madOffset : madOffset+mad.Size])
	if m.MgmtClass() != mad.ClassCM {
		if m.IsResponse() {
			// To a request of ours: the TID's top byte is our slot.
			if top := m.TID() >> 56; top != 0 && top <= MaxSlot {
				return dest{kind: destSlot, slot: uint8(top)}
			}
			return dest{}
		}
		return dest{kind: destAny}
	}
	switch m.AttrID() {
	case mad.AttrREQ, mad.AttrSIDRREQ:
		// Both carry the service ID at MAD byte 32.
		return dest{kind: destListener, serviceID: binary.BigEndian.Uint64(m[32:40])}
	case mad.AttrREP, mad.AttrRTU, mad.AttrREJ, mad.AttrMRA, mad.AttrDREQ, mad.AttrDREP, mad.AttrLAP, mad.AttrAPR:
		// The remote communication ID (byte 28) is the receiver's own.
		return slotOrAny(m[28])
	case mad.AttrSIDRREP:
		// The request ID (byte 24) is the requester's own.
		return slotOrAny(m[24])
	}
	return dest{kind: destAny}
}

// slotOrAny routes a CM message by the top byte of the ID it echoes; an ID
// without one (0: a peer that answers with no ID, or a device on its own)
// goes to any process, whose CM drops or answers what it does not know.
func slotOrAny(top byte) dest {
	if top == 0 || top > MaxSlot {
		return dest{kind: destAny}
	}
	return dest{kind: destSlot, slot: top}
}
