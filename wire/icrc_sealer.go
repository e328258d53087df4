package wire

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// ICRCFlow is the precomputed start of the ICRC of one flow's packets: the
// CRC state after 8×0xFF and the masked IP and UDP headers (36 bytes for
// IPv4, 56 for IPv6) of a packet from src:sport to dst:dport, taken with
// both length fields zero. A packet's lengths enter as a table look-up each
// (the CRC is linear), so one ICRCFlow seals packets of every size: each
// costs a CRC pass over its masked BTH and what follows. A QP keeps one for
// its peer; it is 8 bytes.
//
// The zero value is not a flow: make one with NewICRCFlow.
type ICRCFlow struct {
	state uint32 // raw CRC state after the pseudo header, lengths zero
	v6    bool
}

// NewICRCFlow returns the flow of packets sent from src:sport to dst:dport,
// IPv4 (ID 0, as PutICRC) if both addresses are IPv4 or IPv4-mapped, IPv6
// otherwise.
func NewICRCFlow(src, dst netip.Addr, sport, dport uint16) ICRCFlow {
	var buf [v6PHLen]byte
	k := pseudoHeader(&buf, src, dst, 0, sport, dport, 0, nil)
	v6 := buf[lrhLen] != 0x45
	if !v6 {
		buf[lrhLen+3] = 0 // the IPv4 total length pseudoHeader set from the UDP length
	}
	return ICRCFlow{state: prefixState(&buf, k), v6: v6}
}

// Put computes the ICRC of pkt[:len(pkt)-4] (BTH, extended headers, payload
// and pad) in flow f and writes it into pkt's last 4 bytes, exactly as
// PutICRC does. pkt must hold at least a BTH and the trailer.
func (f ICRCFlow) Put(pkt []byte) {
	end := len(pkt) - ICRCLen
	c := f.start(pkt[:BTHLen], end)
	c = crcRest(c, pkt[BTHLen:end])
	binary.LittleEndian.PutUint32(pkt[end:], ^c)
}

// PutParts is Put for a packet sent in parts, as PutICRCParts: its bytes
// are pkt[:at] (BTH and extended headers, at least the BTH), then payload,
// then pkt[at:] (pad, then the trailer, which it fills).
func (f ICRCFlow) PutParts(pkt []byte, at int, payload []byte) {
	end := len(pkt) - ICRCLen
	c := f.start(pkt[:BTHLen], end+len(payload))
	c = crcRest(c, pkt[BTHLen:at])
	c = crcRest(c, payload)
	c = crcRest(c, pkt[at:end])
	binary.LittleEndian.PutUint32(pkt[end:], ^c)
}

// start returns the raw CRC state after the pseudo header and the masked
// bth (the packet's first 12 bytes) of a packet covering n bytes (BTH
// through pad).
func (f ICRCFlow) start(bth []byte, n int) uint32 {
	u := uint16(UDPHeaderLen + n + ICRCLen)
	c := f.state ^ lenTab[udpLenHi][u>>8] ^ lenTab[udpLenLo][u&0xFF]
	if f.v6 {
		c ^= lenTab[v6LenHi][u>>8] ^ lenTab[v6LenLo][u&0xFF]
	} else {
		ip := u + IPv4HeaderLen
		c ^= lenTab[v4LenHi][ip>>8] ^ lenTab[v4LenLo][ip&0xFF]
	}
	var b [BTHLen]byte
	copy(b[:], bth)
	b[4] = 0xff // FECN, BECN, Resv6a
	return crcRaw(c, b[:])
}

// The length fields of the pseudo header, as the tables of lenTab: the
// UDP length (both families), the IPv4 total length and the IPv6 payload
// length, high byte and low byte.
const (
	udpLenHi = iota
	udpLenLo
	v4LenHi
	v4LenLo
	v6LenHi
	v6LenLo
)

// lenTab[f][b] is what byte b in length field byte f adds to the raw CRC
// state after the pseudo header (the CRC is linear: a byte's share is its
// own CRC shifted over the zero bytes that follow it).
var lenTab [6][256]uint32

func initLenTab() {
	const v4End, v6End = lrhLen + IPv4HeaderLen + UDPHeaderLen, lrhLen + IPv6HeaderLen + UDPHeaderLen
	at := [6]struct{ off, end int }{
		udpLenHi: {lrhLen + IPv4HeaderLen + 4, v4End}, // the same distance from the end in IPv6
		udpLenLo: {lrhLen + IPv4HeaderLen + 5, v4End},
		v4LenHi:  {lrhLen + 2, v4End},
		v4LenLo:  {lrhLen + 3, v4End},
		v6LenHi:  {lrhLen + 4, v6End},
		v6LenLo:  {lrhLen + 5, v6End},
	}
	for f, p := range at {
		for b := range 256 {
			lenTab[f][b] = zeroShift(crcTab[0][b], p.end-p.off-1)
		}
	}
}

// ICRCSealer computes ICRC trailers as PutICRC and PutICRCParts do, keeping
// the ICRCFlow of the last flow (addresses and ports) it sealed a packet of,
// so that a run of packets of one flow, of any sizes, costs what
// ICRCFlow.Put costs. A packet of another flow costs what PutICRC costs.
//
// Its zero value is ready to use. An ICRCSealer is not safe for concurrent
// use; it does not allocate.
type ICRCSealer struct {
	src, dst     netip.Addr
	sport, dport uint16
	valid        bool
	flow         ICRCFlow
}

// shortRest is the longest tail that the ICRC's senders hash with their
// own slicing-by-8 loop: below 64 bytes hash/crc32 does not use the
// carry-less multiply, and its byte-wise tail loop costs more than this
// loop's.
const shortRest = 63

// Put computes the ICRC of pkt[:len(pkt)-4] (BTH, extended headers, payload
// and pad) sent from src:sport to dst:dport and writes it into pkt's last 4
// bytes, exactly as PutICRC does. pkt must hold at least a BTH and the
// trailer.
func (s *ICRCSealer) Put(src, dst netip.Addr, sport, dport uint16, pkt []byte) {
	s.flowOf(src, dst, sport, dport).Put(pkt)
}

// PutParts is Put for a packet sent in parts, as PutICRCParts: its bytes
// are pkt[:at] (BTH and extended headers, at least the BTH), then payload,
// then pkt[at:] (pad, then the trailer, which it fills).
func (s *ICRCSealer) PutParts(src, dst netip.Addr, sport, dport uint16, pkt []byte, at int, payload []byte) {
	s.flowOf(src, dst, sport, dport).PutParts(pkt, at, payload)
}

// flowOf returns the flow's ICRCFlow, computing it if the flow changed.
func (s *ICRCSealer) flowOf(src, dst netip.Addr, sport, dport uint16) ICRCFlow {
	if !s.valid || sport != s.sport || dport != s.dport || src != s.src || dst != s.dst {
		s.src, s.dst, s.sport, s.dport = src, dst, sport, dport
		s.flow, s.valid = NewICRCFlow(src, dst, sport, dport), true
	}
	return s.flow
}

// crcRest advances the raw CRC state c over p: short tails with crcRaw,
// longer ones with hash/crc32 (which inverts its state on entry and exit).
func crcRest(c uint32, p []byte) uint32 {
	if len(p) <= shortRest {
		return crcRaw(c, p)
	}
	return ^crc32.Update(^c, crc32.IEEETable, p)
}
