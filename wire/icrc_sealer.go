package wire

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// ICRCSealer computes ICRC trailers as PutICRC and PutICRCParts do, reusing
// the CRC of the pseudo header's constant part — 8×0xFF and the masked IP
// and UDP headers, 36 bytes for IPv4 and 56 for IPv6 — from one packet to
// the next while the flow (addresses and ports) and the UDP length stay the
// same, as they do for a stream of equal-sized packets from one QP. Each
// packet then costs a CRC pass over its masked BTH and what follows. A
// packet of another flow or length recomputes the saved state and costs
// what PutICRC costs.
//
// Its zero value is ready to use. An ICRCSealer is not safe for concurrent
// use; it does not allocate.
type ICRCSealer struct {
	src, dst     netip.Addr
	sport, dport uint16
	udpLen       uint16
	valid        bool
	state        uint32 // raw CRC state after the UDP header
}

// shortRest is the longest tail that ICRCSealer hashes with its own
// slicing-by-8 loop: below 64 bytes hash/crc32 does not use the carry-less
// multiply, and its byte-wise tail loop costs more than this loop's.
const shortRest = 63

// Put computes the ICRC of pkt[:len(pkt)-4] (BTH, extended headers, payload
// and pad) sent from src:sport to dst:dport and writes it into pkt's last 4
// bytes, exactly as PutICRC does. pkt must hold at least a BTH and the
// trailer.
func (s *ICRCSealer) Put(src, dst netip.Addr, sport, dport uint16, pkt []byte) {
	end := len(pkt) - ICRCLen
	c := s.start(src, dst, sport, dport, pkt[:BTHLen], end)
	c = crcRest(c, pkt[BTHLen:end])
	binary.LittleEndian.PutUint32(pkt[end:], ^c)
}

// PutParts is Put for a packet sent in parts, as PutICRCParts: its bytes
// are pkt[:at] (BTH and extended headers, at least the BTH), then payload,
// then pkt[at:] (pad, then the trailer, which it fills).
func (s *ICRCSealer) PutParts(src, dst netip.Addr, sport, dport uint16, pkt []byte, at int, payload []byte) {
	end := len(pkt) - ICRCLen
	c := s.start(src, dst, sport, dport, pkt[:BTHLen], end+len(payload))
	c = crcRest(c, pkt[BTHLen:at])
	c = crcRest(c, payload)
	c = crcRest(c, pkt[at:end])
	binary.LittleEndian.PutUint32(pkt[end:], ^c)
}

// start returns the raw CRC state after the pseudo header and the masked
// bth (the packet's first 12 bytes) of a packet covering n bytes (BTH
// through pad), refreshing the saved state when the flow or length changed.
func (s *ICRCSealer) start(src, dst netip.Addr, sport, dport uint16, bth []byte, n int) uint32 {
	udpLen := uint16(UDPHeaderLen + n + ICRCLen)
	if !s.valid || udpLen != s.udpLen || sport != s.sport || dport != s.dport || src != s.src || dst != s.dst {
		s.refresh(src, dst, sport, dport, udpLen)
	}
	var b [BTHLen]byte
	copy(b[:], bth)
	b[4] = 0xff // FECN, BECN, Resv6a
	return crcRaw(s.state, b[:])
}

// refresh saves the raw CRC state after the masked IP and UDP headers of
// the flow with UDP length udpLen (IPv4 ID 0, as PutICRC).
func (s *ICRCSealer) refresh(src, dst netip.Addr, sport, dport, udpLen uint16) {
	var buf [v6PHLen]byte
	k := pseudoHeader(&buf, src, dst, 0, sport, dport, udpLen, nil)
	s.src, s.dst, s.sport, s.dport, s.udpLen = src, dst, sport, dport, udpLen
	s.state, s.valid = prefixState(&buf, k), true
}

// crcRest advances the raw CRC state c over p: short tails with crcRaw,
// longer ones with hash/crc32 (which inverts its state on entry and exit).
func crcRest(c uint32, p []byte) uint32 {
	if len(p) <= shortRest {
		return crcRaw(c, p)
	}
	return ^crc32.Update(^c, crc32.IEEETable, p)
}
