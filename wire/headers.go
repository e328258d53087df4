package wire

import "encoding/binary"

// RETH is the 16-byte RDMA Extended Transport Header.
type RETH []byte

// VA returns the remote virtual address.
func (h RETH) VA() uint64 { return binary.BigEndian.Uint64(h[0:8]) }

// RKey returns the remote key.
func (h RETH) RKey() uint32 { return binary.BigEndian.Uint32(h[8:12]) }

// DMALen returns the length of the whole message.
func (h RETH) DMALen() uint32 { return binary.BigEndian.Uint32(h[12:16]) }

// Encode writes all fields.
func (h RETH) Encode(va uint64, rkey, dmaLen uint32) {
	_ = h[15]
	binary.BigEndian.PutUint64(h[0:8], va)
	binary.BigEndian.PutUint32(h[8:12], rkey)
	binary.BigEndian.PutUint32(h[12:16], dmaLen)
}

// AtomicETH is the 28-byte atomic extended header.
type AtomicETH []byte

// VA returns the remote address of the 64-bit target word.
func (h AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(h[0:8]) }

// RKey returns the remote key.
func (h AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(h[8:12]) }

// SwapAdd returns the swap (CmpSwap) or add (FetchAdd) operand.
func (h AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(h[12:20]) }

// Compare returns the compare operand (CmpSwap only).
func (h AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(h[20:28]) }

// Encode writes all fields.
func (h AtomicETH) Encode(va uint64, rkey uint32, swapAdd, compare uint64) {
	_ = h[27]
	binary.BigEndian.PutUint64(h[0:8], va)
	binary.BigEndian.PutUint32(h[8:12], rkey)
	binary.BigEndian.PutUint64(h[12:20], swapAdd)
	binary.BigEndian.PutUint64(h[20:28], compare)
}

// AtomicAckETH is the 8-byte header carrying the original remote value.
type AtomicAckETH []byte

// OrigValue returns the value the target word held before the atomic.
func (h AtomicAckETH) OrigValue() uint64 { return binary.BigEndian.Uint64(h[0:8]) }

// SetOrigValue sets the original value.
func (h AtomicAckETH) SetOrigValue(v uint64) { binary.BigEndian.PutUint64(h[0:8], v) }

// ImmDt is the 4-byte immediate data header. The value is opaque and kept in
// network byte order, exactly as libibverbs' imm_data.
type ImmDt []byte

// Imm returns the immediate data as a big-endian 32-bit value.
func (h ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(h[0:4]) }

// SetImm sets the immediate data.
func (h ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(h[0:4], v) }

// IETH is the 4-byte invalidate extended header (SEND with invalidate).
type IETH []byte

// RKey returns the R_Key the responder invalidates.
func (h IETH) RKey() uint32 { return binary.BigEndian.Uint32(h[0:4]) }

// SetRKey sets the R_Key to invalidate.
func (h IETH) SetRKey(v uint32) { binary.BigEndian.PutUint32(h[0:4], v) }

// DETH is the 8-byte datagram extended header (UD).
type DETH []byte

// QKey returns the queue key.
func (h DETH) QKey() uint32 { return binary.BigEndian.Uint32(h[0:4]) }

// SrcQP returns the 24-bit source QPN.
func (h DETH) SrcQP() uint32 { return get24(h[5:8]) }

// Encode writes the Q_Key and source QPN; the reserved byte is zero.
func (h DETH) Encode(qkey, srcQP uint32) {
	_ = h[7]
	binary.BigEndian.PutUint32(h[0:4], qkey)
	h[4] = 0
	put24(h[5:8], srcQP)
}

// FETH is the 4-byte flush extended header.
type FETH []byte

// PlacementType returns bits 3–0.
func (h FETH) PlacementType() uint8 { return h[3] & 0x0F }

// SelectivityLevel returns bits 5–4.
func (h FETH) SelectivityLevel() uint8 { return (h[3] >> 4) & 3 }
