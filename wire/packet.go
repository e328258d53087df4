package wire

import "errors"

// Reasons a received datagram is not a well-formed RoCEv2 packet. A receiver
// counts them and drops the datagram; none of them is ever answered.
var (
	ErrTooShort      = errors.New("wire: packet shorter than its headers")
	ErrUnknownOpcode = errors.New("wire: unknown opcode")
	ErrBadTVer       = errors.New("wire: transport header version is not 0")
	ErrBadPad        = errors.New("wire: pad count larger than the payload")
)

// Packet is a parsed view of one RoCEv2 datagram: BTH, extended headers,
// payload, pad and ICRC. It aliases the bytes it was parsed from.
type Packet struct {
	Buf     []byte // the whole datagram, ICRC included
	BTH     BTH
	Op      Opcode
	Flags   OpFlags
	Payload []byte // without pad and ICRC
	hdr     int    // payload offset
}

// Parse checks that b holds a complete packet of a known opcode and fills p.
// It does not verify the ICRC (see VerifyICRC) or any transport rule. It never
// panics on any input.
func (p *Packet) Parse(b []byte) error {
	if len(b) < BTHLen+ICRCLen {
		return ErrTooShort
	}
	bth := BTH(b[:BTHLen])
	op := bth.Opcode()
	info := opTable[op]
	if info.Name == "" {
		return ErrUnknownOpcode
	}
	if bth.TVer() != 0 {
		return ErrBadTVer
	}
	end := len(b) - ICRCLen
	if end < info.HdrLen {
		return ErrTooShort
	}
	pad := bth.PadCount()
	if end-pad < info.HdrLen {
		return ErrBadPad
	}
	*p = Packet{Buf: b, BTH: bth, Op: op, Flags: info.Flags, Payload: b[info.HdrLen : end-pad], hdr: info.HdrLen}
	return nil
}

// offset returns where the extended header h starts, following the fixed order
// DETH, FETH, RETH/AtomicETH, AETH, AtomicAckETH, ImmDt/IETH.
func (p *Packet) offset(h OpFlags) int {
	off := BTHLen
	for _, x := range extHeaders {
		if x.f == h {
			return off
		}
		if p.Flags&x.f != 0 {
			off += x.n
		}
	}
	return off
}

func (p *Packet) ext(h OpFlags, n int) []byte {
	if p.Flags&h == 0 {
		return nil
	}
	off := p.offset(h)
	return p.Buf[off : off+n : off+n]
}

// RETH returns the RDMA extended header, or nil if the opcode has none.
func (p *Packet) RETH() RETH { return RETH(p.ext(HasRETH, RETHLen)) }

// AETH returns the ACK extended header, or nil.
func (p *Packet) AETH() AETH { return AETH(p.ext(HasAETH, AETHLen)) }

// AtomicETH returns the atomic extended header, or nil.
func (p *Packet) AtomicETH() AtomicETH { return AtomicETH(p.ext(HasAtomicETH, AtomicETHLen)) }

// AtomicAckETH returns the atomic acknowledge extended header, or nil.
func (p *Packet) AtomicAckETH() AtomicAckETH {
	return AtomicAckETH(p.ext(HasAtomicAckETH, AtomicAckETHLen))
}

// ImmDt returns the immediate data header, or nil.
func (p *Packet) ImmDt() ImmDt { return ImmDt(p.ext(HasImmDt, ImmDtLen)) }

// IETH returns the invalidate extended header, or nil.
func (p *Packet) IETH() IETH { return IETH(p.ext(HasIETH, IETHLen)) }

// DETH returns the datagram extended header, or nil.
func (p *Packet) DETH() DETH { return DETH(p.ext(HasDETH, DETHLen)) }

// FETH returns the flush extended header, or nil.
func (p *Packet) FETH() FETH { return FETH(p.ext(HasFETH, FETHLen)) }

// HdrLen returns the offset of the payload.
func (p *Packet) HdrLen() int { return p.hdr }

// Pad returns the pad count for a payload of n bytes: (-n) & 3.
func Pad(n int) int { return -n & 3 }

// PacketLen returns the datagram length for opcode op with an n-byte payload:
// headers, payload, pad and ICRC.
func PacketLen(op Opcode, n int) int { return op.HdrLen() + n + Pad(n) + ICRCLen }
