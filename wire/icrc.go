package wire

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
	"sync/atomic"
)

// The RoCEv2 invariant CRC (docs/spec/roce-wire.md §5).
//
// The ICRC is the IEEE CRC-32 (hash/crc32.IEEE) of
//
//	8×0xFF | masked IP header | masked UDP header | masked BTH | rest of the packet
//
// where the IP header is the one our sender puts on the wire for IPv4 (IHL 5,
// total length 20 + UDP length, flags 0x4000 (DF), protocol 17, the given ID)
// or the IPv6 header, and "masked" replaces the variant fields by 1-bits: IPv4
// TOS, TTL and header checksum; IPv6 traffic class, flow label and hop limit;
// the UDP checksum; BTH byte 4 (FECN, BECN, Resv6a). The trailer goes on the
// wire least-significant byte first (§5.3).
//
// The pseudo header is hashed with a local slicing-by-8 loop over a stack
// array (hash/crc32 calls its accelerated kernel through a function value, so
// a stack buffer handed to it would escape to the heap), and the rest of the
// packet with crc32.Update, which uses the CPU's carry-less multiply where it
// has one. None of the functions here allocates, except that VerifyICRC
// allocates one small table the first time it meets a given packet length
// with a non-zero IPv4 ID (see ICRCIPv4AnyID).

// ICRCMode selects how VerifyICRC treats IPv4 packets, whose IP
// Identification field is covered by the ICRC but cannot be seen through a UDP
// socket (spec §1.7). IPv6 packets are always checked exactly.
type ICRCMode uint8

const (
	// ICRCIPv4AnyID, the default, accepts an IPv4 packet whose ICRC is right
	// for some IP ID. Packets from ID-0 senders (every Go peer, §1.7) match
	// on the fast path, a full CRC-32 comparison; other packets are accepted
	// if some non-zero ID fits, a 16-bit-strength check, because 16 of the 32
	// CRC bits are spent on recovering the unknown ID. So in this mode a
	// corrupted IPv4 packet, from any sender, escapes detection with
	// probability about 2^-16 rather than 2^-32.
	ICRCIPv4AnyID ICRCMode = iota
	// ICRCIPv4Strict accepts an IPv4 packet only if its ICRC is right for IP
	// ID 0, the ID our own senders produce. Use it where every sender is
	// known to be this stack, such as deterministic tests.
	ICRCIPv4Strict
)

// String returns the mode's name.
func (m ICRCMode) String() string {
	switch m {
	case ICRCIPv4AnyID:
		return "ipv4-any-id"
	case ICRCIPv4Strict:
		return "ipv4-strict"
	}
	return "ICRCMode(" + hex2(uint8(m)) + ")"
}

// Offsets in the pseudo header.
const (
	lrhLen   = 8            // the 8×0xFF that stand in for the IB LRH
	idOffset = lrhLen + 4   // IPv4 Identification within the CRC input
	idEnd    = idOffset + 2 // first byte after the ID
	v6PHLen  = lrhLen + 40 + UDPHeaderLen + BTHLen
	v4Prefix = lrhLen + 2 // 8×FF, 0x45, TOS mask: constant, precomputed
	v6Prefix = lrhLen + 4 // 8×FF, 6f ff ff ff: constant, precomputed
)

// crcTab holds the slicing-by-8 tables of the reflected IEEE polynomial;
// crcTab[0] is crc32.IEEETable.
var crcTab [8][256]uint32

// Raw (non-inverted) CRC states after the constant start of each pseudo header.
var v4PrefixState, v6PrefixState uint32

func init() {
	crcTab[0] = *crc32.IEEETable
	for i := range 256 {
		c := crcTab[0][i]
		for k := 1; k < 8; k++ {
			c = crcTab[0][c&0xFF] ^ c>>8
			crcTab[k][i] = c
		}
	}
	ff8 := [...]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	s := crcRaw(0xFFFFFFFF, ff8[:]) // 0xDEBB20E3, rxe's seed (§5.2)
	v4PrefixState = crcRaw(s, []byte{0x45, 0xff})
	v6PrefixState = crcRaw(s, []byte{0x6f, 0xff, 0xff, 0xff})
	initZeroOps()
	initLenTab()
}

// crcRaw advances a raw (non-inverted) reflected CRC-32 state over p.
func crcRaw(s uint32, p []byte) uint32 {
	for len(p) >= 8 {
		s ^= binary.LittleEndian.Uint32(p)
		s = crcTab[7][s&0xFF] ^ crcTab[6][s>>8&0xFF] ^ crcTab[5][s>>16&0xFF] ^ crcTab[4][s>>24] ^
			crcTab[3][p[4]] ^ crcTab[2][p[5]] ^ crcTab[1][p[6]] ^ crcTab[0][p[7]]
		p = p[8:]
	}
	if len(p) >= 4 { // slicing by 4: packets are whole words, so often all that is left
		s ^= binary.LittleEndian.Uint32(p)
		s = crcTab[3][s&0xFF] ^ crcTab[2][s>>8&0xFF] ^ crcTab[1][s>>16&0xFF] ^ crcTab[0][s>>24]
		p = p[4:]
	}
	for _, b := range p {
		s = crcTab[0][byte(s)^b] ^ s>>8
	}
	return s
}

// ipv4Pair returns the IPv4 addresses of src and dst, unmapped, and whether
// both are IPv4: the packet is then IPv4.
func ipv4Pair(src, dst netip.Addr) (s4, d4 [4]byte, ok bool) {
	src, dst = src.Unmap(), dst.Unmap()
	if !src.Is4() || !dst.Is4() {
		return s4, d4, false
	}
	return src.As4(), dst.As4(), true
}

// pseudoHeader writes the CRC input that precedes pkt[BTHLen:] into buf:
// 8×0xFF, the masked IP and UDP headers and the masked BTH (as much of it as
// pkt holds). udpLen is the UDP length to cover. It returns the number of
// bytes written.
func pseudoHeader(buf *[v6PHLen]byte, src, dst netip.Addr, id, sport, dport, udpLen uint16, pkt []byte) int {
	for i := range lrhLen {
		buf[i] = 0xff
	}
	var n int
	if s4, d4, ok := ipv4Pair(src, dst); ok {
		h := buf[lrhLen : lrhLen+20]
		h[0] = 0x45
		h[1] = 0xff // TOS
		binary.BigEndian.PutUint16(h[2:], IPv4HeaderLen+udpLen)
		binary.BigEndian.PutUint16(h[4:], id)
		binary.BigEndian.PutUint16(h[6:], 0x4000) // DF, offset 0
		h[8] = 0xff                               // TTL
		h[9] = 17
		h[10], h[11] = 0xff, 0xff // header checksum
		copy(h[12:16], s4[:])
		copy(h[16:20], d4[:])
		n = lrhLen + IPv4HeaderLen
	} else {
		h := buf[lrhLen : lrhLen+40]
		h[0], h[1], h[2], h[3] = 0x6f, 0xff, 0xff, 0xff // version, TC, flow label
		binary.BigEndian.PutUint16(h[4:], udpLen)
		h[6] = 17
		h[7] = 0xff // hop limit
		s16, d16 := src.As16(), dst.As16()
		copy(h[8:24], s16[:])
		copy(h[24:40], d16[:])
		n = lrhLen + IPv6HeaderLen
	}
	u := buf[n : n+UDPHeaderLen]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], udpLen)
	u[6], u[7] = 0xff, 0xff // checksum
	n += UDPHeaderLen
	k := copy(buf[n:n+BTHLen], pkt)
	if k > 4 {
		buf[n+4] = 0xff // FECN, BECN, Resv6a
	}
	return n + k
}

// icrc computes the ICRC of the covered bytes pkt (BTH..pad).
func icrc(src, dst netip.Addr, id, sport, dport uint16, pkt []byte) uint32 {
	var buf [v6PHLen]byte
	k := pseudoHeader(&buf, src, dst, id, sport, dport, uint16(UDPHeaderLen+len(pkt)+ICRCLen), pkt)
	c := ^prefixState(&buf, k)
	if len(pkt) <= BTHLen {
		return c
	}
	return crc32.Update(c, crc32.IEEETable, pkt[BTHLen:])
}

// prefixState returns the raw CRC state after buf[:k], a pseudo header that
// pseudoHeader wrote, starting from the precomputed state of its constant
// beginning.
func prefixState(buf *[v6PHLen]byte, k int) uint32 {
	if buf[lrhLen] == 0x45 {
		return crcRaw(v4PrefixState, buf[v4Prefix:k])
	}
	return crcRaw(v6PrefixState, buf[v6Prefix:k])
}

// ICRC returns the RoCEv2 invariant CRC of pkt, the UDP payload without its
// 4-byte ICRC trailer (BTH, extended headers, payload and pad), sent from
// src:sport to dst:dport.
//
// If src and dst are both IPv4 (or IPv4-mapped IPv6) addresses the packet is
// IPv4, and the IP header is covered exactly as this stack sends it: IHL 5,
// total length 20 + UDP length, ID 0 and flags 0x4000 (DF); see the package's
// IPv4 send rule in ip.go. Otherwise the packet is IPv6 with both addresses in
// their 16-byte form. The UDP length is 8 + len(pkt) + 4. ICRC does not
// allocate.
func ICRC(src, dst netip.Addr, sport, dport uint16, pkt []byte) uint32 {
	return icrc(src, dst, 0, sport, dport, pkt)
}

// ICRCWithIPv4ID is ICRC for an IPv4 packet that carries IP Identification id
// instead of 0, as rxe and RoCE NICs send. For IPv6 addresses id is ignored
// and the result equals ICRC.
func ICRCWithIPv4ID(src, dst netip.Addr, id, sport, dport uint16, pkt []byte) uint32 {
	return icrc(src, dst, id, sport, dport, pkt)
}

// PutICRC computes the ICRC of pkt[:len(pkt)-4], as ICRC does, and writes it
// into the last 4 bytes of pkt, least-significant byte first (spec §5.3).
// pkt must be at least 4 bytes long.
func PutICRC(src, dst netip.Addr, sport, dport uint16, pkt []byte) {
	end := len(pkt) - ICRCLen
	binary.LittleEndian.PutUint32(pkt[end:], icrc(src, dst, 0, sport, dport, pkt[:end]))
}

// PutICRCParts is PutICRC for a packet sent in parts (link.Datagram's
// Payload): its bytes are pkt[:at] (BTH and extended headers, at least the
// BTH), then payload, then pkt[at:] (pad, then the 4-byte trailer, which it
// fills). It does not allocate. A flow's packets are sealed more cheaply
// by its ICRCFlow, made once.
func PutICRCParts(src, dst netip.Addr, sport, dport uint16, pkt []byte, at int, payload []byte) {
	NewICRCFlow(src, dst, sport, dport).PutParts(pkt, at, payload)
}

// RetagICRC rewrites the ICRC trailer of pkt, a whole RoCEv2 UDP payload
// (trailer included) whose ICRC is correct for IPv4 Identification from, into
// the one that is correct for ID to, without recomputing the CRC: the ID's
// contribution is linear (see the receive-side note below), so the trailer
// changes by L_N(from ⊕ to). It is for senders whose IP IDs are assigned by
// the kernel after the ICRC was computed, such as the segments of one UDP GSO
// send (link.UDP). Only IPv4 packets carry an ID: do not call it for IPv6.
// It does not allocate, except once per new packet length (a 64-byte table
// shared by all goroutines).
func RetagICRC(pkt []byte, from, to uint16) {
	if len(pkt) < ICRCLen {
		return
	}
	n := len(pkt) - ICRCLen
	RetagTrailer(pkt[n:], n, from, to)
}

// RetagTrailer is RetagICRC for a packet whose bytes are not in one slice
// (sent in parts, see PutICRCParts): icrc is its 4-byte trailer and n the
// length the ICRC covers (BTH through pad).
func RetagTrailer(icrc []byte, n int, from, to uint16) {
	if len(icrc) < ICRCLen || from == to {
		return
	}
	binary.LittleEndian.PutUint32(icrc, binary.LittleEndian.Uint32(icrc)^idDelta(from^to, n))
}

// idBasis holds L_N(1<<i) for the 16 ID bits, for one covered length.
type idBasis [16]uint32

var idBases [maxCachedLen/4 + 1]atomic.Pointer[idBasis]

// idDelta returns L_N(id) for a packet with covered length n (BTH..pad),
// from a cached basis for the lengths valid packets have.
func idDelta(id uint16, n int) uint32 {
	after := lrhLen + IPv4HeaderLen + UDPHeaderLen + n - idEnd // covered bytes after the ID
	if n%4 != 0 || n > maxCachedLen {
		return idImage(id, after)
	}
	p := &idBases[n/4]
	v := p.Load()
	if v == nil {
		v = new(idBasis)
		for i := range v {
			v[i] = idImage(uint16(1)<<i, after)
		}
		if !p.CompareAndSwap(nil, v) {
			v = p.Load()
		}
	}
	var d uint32
	for i := 0; id != 0; i, id = i+1, id>>1 {
		d ^= v[i] & -uint32(id&1)
	}
	return d
}

// trailer returns the ICRC carried in the last 4 bytes of pkt.
func trailer(pkt []byte) uint32 { return binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:]) }

// VerifyICRC reports whether pkt, a whole RoCEv2 UDP payload including its
// 4-byte ICRC trailer, received from src:sport at dst:dport, carries a correct
// ICRC. A packet shorter than the trailer is never correct.
//
// IPv6 packets are checked exactly. For IPv4 the sender's IP Identification
// is covered by the ICRC but is not visible through a UDP socket, so:
//
//   - the ICRC is computed with ID 0; if the trailer matches the packet is
//     accepted (every Go sender uses ID 0: a full CRC-32 comparison);
//   - otherwise, in ICRCIPv4AnyID mode (the zero value), the packet is
//     accepted if some 16-bit ID makes the ICRC match, which is found by
//     solving a GF(2)-linear system (a 16-bit-strength check, for rxe and
//     NIC senders); in ICRCIPv4Strict mode it is rejected, which keeps the
//     full 32-bit strength when every sender is known to use ID 0.
//
// VerifyICRC does not allocate, except once per new packet length in the
// AnyID slow path (a 112-byte table that is then shared by all goroutines).
func VerifyICRC(src, dst netip.Addr, sport, dport uint16, pkt []byte, mode ICRCMode) bool {
	if len(pkt) < ICRCLen {
		return false
	}
	body := pkt[:len(pkt)-ICRCLen]
	c0 := icrc(src, dst, 0, sport, dport, body)
	got := trailer(pkt)
	if got == c0 {
		return true
	}
	if mode != ICRCIPv4AnyID {
		return false
	}
	if _, _, ok := ipv4Pair(src, dst); !ok {
		return false
	}
	_, ok := solveID(len(body), got^c0)
	return ok
}

// RecoverIPv4ID returns the IPv4 Identification with which pkt's ICRC
// trailer is correct, and whether there is one. pkt is the whole UDP payload,
// trailer included, as for VerifyICRC. For a correct packet the ID is the one
// its sender put in the IP header; for IPv6 addresses ok is false.
func RecoverIPv4ID(src, dst netip.Addr, sport, dport uint16, pkt []byte) (id uint16, ok bool) {
	if len(pkt) < ICRCLen {
		return 0, false
	}
	if _, _, v4 := ipv4Pair(src, dst); !v4 {
		return 0, false
	}
	body := pkt[:len(pkt)-ICRCLen]
	d := trailer(pkt) ^ icrc(src, dst, 0, sport, dport, body)
	if d == 0 {
		return 0, true
	}
	return solveID(len(body), d)
}

// Receive-side choice (spec §1.7): a UDP socket cannot show the IPv4 ID that
// the ICRC covers, and rxe and NICs send arbitrary IDs. Of the options in
// §1.7 we take (c): CRC-32 is affine, so for packets that differ only in the
// ID, ICRC(id) = ICRC(0) ⊕ L_N(id), where L_N is a GF(2)-linear, injective map
// from the 16 ID bits to 32 CRC bits that depends only on N, the number of
// covered bytes after the ID field. A received trailer t is accepted when
// t ⊕ ICRC(0) lies in the image of L_N. That gives a full CRC-32 comparison
// for ID-0 senders (all Go peers) and a 16-bit-strength check for foreign
// senders; unlike option (a) it needs no raw socket, and unlike (b) it still
// catches all but about 2^-16 of corrupted packets (measured in
// TestAnyIDStrength). The price is that a corrupted ID-0 packet can also pass
// as a packet with some other ID, with that same 2^-16 probability;
// ICRCIPv4Strict turns the foreign-sender path off and restores 2^-32 where
// all senders are Go peers.
//
// L_N(e_i) for ID bit i is the raw CRC (zero initial state, no final
// inversion) of the two ID bytes followed by N zero bytes. It is built with
// zlib's crc32_combine technique: the 32×32 matrices that advance a CRC state
// over 2^k zero bytes. The 16 images are reduced to reduced row echelon form
// (one pivot bit per row, cleared in every other row), so solving costs 16
// steps: id = XOR of the rows' ID masks whose pivot bit is set in t ⊕ ICRC(0),
// and t is accepted when those rows XOR to t ⊕ ICRC(0) exactly.

// gf2Op is a linear map on 32-bit CRC states: column i is the image of bit i.
type gf2Op [32]uint32

func (m *gf2Op) apply(v uint32) uint32 {
	var r uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		r ^= m[i] & -(v & 1)
	}
	return r
}

// zeroOps[k] advances a raw CRC state over 2^k zero bytes.
var zeroOps [17]gf2Op

func initZeroOps() {
	for i := range 32 {
		s := uint32(1) << i
		for range 8 {
			s = s>>1 ^ crc32.IEEE&-(s&1)
		}
		zeroOps[0][i] = s
	}
	for k := 1; k < len(zeroOps); k++ {
		for i := range 32 {
			zeroOps[k][i] = zeroOps[k-1].apply(zeroOps[k-1][i])
		}
	}
}

// zeroShift advances the raw CRC state s over n zero bytes.
func zeroShift(s uint32, n int) uint32 {
	for k := 0; n != 0 && k < len(zeroOps); k, n = k+1, n>>1 {
		if n&1 != 0 {
			s = zeroOps[k].apply(s)
		}
	}
	return s
}

// idImage returns L_N(id): the difference an IPv4 ID makes to the ICRC when N
// covered bytes follow the ID field.
func idImage(id uint16, n int) uint32 {
	s := zeroShift(uint32(id>>8), 1)
	s = zeroShift(s^uint32(id&0xFF), 1)
	return zeroShift(s, n)
}

// idSolver inverts L_N on its image.
type idSolver struct {
	pivot [16]uint8  // the pivot bit of each row
	row   [16]uint32 // L_N of the row's ID mask
	id    [16]uint16
}

func (v *idSolver) init(n int) {
	var rows int
	for i := range 16 {
		r, id := idImage(uint16(1)<<i, n), uint16(1)<<i
		for j := range rows {
			if r>>v.pivot[j]&1 != 0 {
				r ^= v.row[j]
				id ^= v.id[j]
			}
		}
		if r == 0 {
			panic("wire: IPv4 ID map is not injective") // impossible: x is invertible mod P
		}
		p := uint8(0)
		for r>>p&1 == 0 {
			p++
		}
		for j := range rows {
			if v.row[j]>>p&1 != 0 {
				v.row[j] ^= r
				v.id[j] ^= id
			}
		}
		v.pivot[rows], v.row[rows], v.id[rows] = p, r, id
		rows++
	}
}

// solve returns the ID with L_N(id) == d, and whether there is one.
func (v *idSolver) solve(d uint32) (uint16, bool) {
	var sum uint32
	var id uint16
	for j := range v.row {
		m := -(d >> v.pivot[j] & 1)
		sum ^= v.row[j] & m
		id ^= v.id[j] & uint16(m)
	}
	return id, sum == d
}

// maxCachedLen is the longest covered length (BTH..pad) whose solver is
// cached: more than a 9000-byte jumbo frame holds. Covered lengths of valid
// packets are multiples of 4, so the cache is indexed by length/4.
const maxCachedLen = 9216

var solvers [maxCachedLen/4 + 1]atomic.Pointer[idSolver]

// solveID returns the ID whose image under L_N is d, and whether there is
// one, for a packet with covered length n (BTH..pad). Solvers for lengths a
// valid packet can have are cached: built once per length (a racing builder
// builds an identical copy, harmlessly) and shared. For lengths that cannot be
// valid packets, or are longer than any jumbo frame, a solver is built on the
// stack each time (a few microseconds, no allocation).
func solveID(n int, d uint32) (uint16, bool) {
	after := lrhLen + IPv4HeaderLen + UDPHeaderLen + n - idEnd // covered bytes after the ID
	if n%4 != 0 || n > maxCachedLen {
		var v idSolver
		v.init(after)
		return v.solve(d)
	}
	p := &solvers[n/4]
	v := p.Load()
	if v == nil {
		v = new(idSolver)
		v.init(after)
		if !p.CompareAndSwap(nil, v) {
			v = p.Load()
		}
	}
	return v.solve(d)
}
