package wire

// PSN is a 24-bit packet sequence number.
type PSN uint32

// PSNMask keeps the low 24 bits.
const PSNMask = 0xFFFFFF

// Add returns p advanced by n, modulo 2^24.
func (p PSN) Add(n int) PSN { return PSN((uint32(p) + uint32(n)) & PSNMask) }

// Next returns p + 1 modulo 2^24.
func (p PSN) Next() PSN { return p.Add(1) }

// Cmp orders two PSNs on the 24-bit circle: negative when p is before q, zero
// when equal and positive when p is after q. Correct while the two are less
// than 2^23 apart.
func (p PSN) Cmp(q PSN) int { return int(int32((uint32(p) - uint32(q)) << 8)) }

// Before reports whether p comes before q.
func (p PSN) Before(q PSN) bool { return p.Cmp(q) < 0 }

// After reports whether p comes after q.
func (p PSN) After(q PSN) bool { return p.Cmp(q) > 0 }

// Diff returns the signed distance p − q in packets.
func (p PSN) Diff(q PSN) int { return p.Cmp(q) >> 8 }
