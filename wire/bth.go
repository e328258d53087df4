package wire

import "encoding/binary"

// DefaultPKey is the full-membership default partition key every RoCE peer sends.
const DefaultPKey = 0xFFFF

// MulticastQPN is the destination QPN of a multicast UD packet.
const MulticastQPN = 0xFFFFFF

// BTH is the 12-byte Base Transport Header.
type BTH []byte

// Opcode returns the operation code (byte 0).
func (b BTH) Opcode() Opcode { return Opcode(b[0]) }

// SetOpcode sets the operation code.
func (b BTH) SetOpcode(op Opcode) { b[0] = byte(op) }

// SE reports the solicited-event bit.
func (b BTH) SE() bool { return b[1]&0x80 != 0 }

// MigReq reports the migration-request bit (rxe sends 0, NICs often 1; ignored on receive).
func (b BTH) MigReq() bool { return b[1]&0x40 != 0 }

// PadCount returns the number of pad bytes (0–3) between payload and ICRC.
func (b BTH) PadCount() int { return int(b[1]>>4) & 3 }

// TVer returns the transport header version, which must be 0.
func (b BTH) TVer() uint8 { return b[1] & 0x0F }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[2:4]) }

// FECN reports the forward explicit congestion notification bit.
func (b BTH) FECN() bool { return b[4]&0x80 != 0 }

// BECN reports the backward explicit congestion notification bit.
func (b BTH) BECN() bool { return b[4]&0x40 != 0 }

// DestQP returns the 24-bit destination queue pair number.
func (b BTH) DestQP() uint32 { return get24(b[5:8]) }

// AckReq reports whether the sender asks for an acknowledgement.
func (b BTH) AckReq() bool { return b[8]&0x80 != 0 }

// PSN returns the 24-bit packet sequence number.
func (b BTH) PSN() PSN { return PSN(get24(b[9:12])) }

// SetFlags sets byte 1: solicited event, MigReq, pad count; TVer is set to 0.
func (b BTH) SetFlags(se, migReq bool, pad int) {
	v := byte(pad&3) << 4
	if se {
		v |= 0x80
	}
	if migReq {
		v |= 0x40
	}
	b[1] = v
}

// SetPKey sets the partition key.
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[2:4], k) }

// SetBECN sets byte 4 (FECN, BECN, reserved): only BECN may be set.
func (b BTH) SetBECN(becn bool) {
	if becn {
		b[4] = 0x40
	} else {
		b[4] = 0
	}
}

// SetDestQP sets the 24-bit destination QPN.
func (b BTH) SetDestQP(qpn uint32) { put24(b[5:8], qpn) }

// SetAckReqPSN sets byte 8 (AckReq, reserved bits zero) and the PSN.
func (b BTH) SetAckReqPSN(ackReq bool, psn PSN) {
	if ackReq {
		b[8] = 0x80
	} else {
		b[8] = 0
	}
	put24(b[9:12], uint32(psn))
}

// Encode writes a whole BTH with P_Key 0xFFFF and all reserved bits zero.
func (b BTH) Encode(op Opcode, se bool, pad int, destQP uint32, ackReq bool, psn PSN) {
	_ = b[11]
	b.SetOpcode(op)
	b.SetFlags(se, false, pad)
	b.SetPKey(DefaultPKey)
	b[4] = 0
	b.SetDestQP(destQP)
	b.SetAckReqPSN(ackReq, psn)
}

func get24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

func put24(b []byte, v uint32) {
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}
