package verbs

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"

	"github.com/rdma-go/rdma-go/provider"
)

// GRHLen is the size of the area at the start of every UD receive buffer
// that receives the network header (the GRH): the IPv6 header, or for IPv4
// 20 zero bytes and the IPv4 header. The message follows it.
const GRHLen = provider.GRHLen

// AH is an address handle (ibv_ah): where a UD work request goes.
type AH struct {
	pd   *PD
	attr AHAttr
	p    provider.AH
	dead atomic.Bool
}

// CreateAH creates an address handle (ibv_create_ah). On RoCE the address
// vector must be global: GRH.DGID is the destination and GRH.SGIDIndex a
// source GID of this device.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	c := pd.ctx
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := pd.use(1, 0); err != nil { // the PD stays until the AH goes
		return nil, err
	}
	p, err := pd.p.CreateAH(&attr)
	if err != nil {
		pd.use(-1, 0)
		return nil, err
	}
	return &AH{pd: pd, attr: attr, p: p}, nil
}

// ProviderAH returns the provider's address handle (provider.AHHandle):
// how a UD work request that names this AH reaches the device.
func (ah *AH) ProviderAH() provider.AH { return ah.p }

// Attr returns the address vector the AH was created with.
func (ah *AH) Attr() AHAttr { return ah.attr }

// Destroy destroys the AH (ibv_destroy_ah).
func (ah *AH) Destroy() error {
	if ah.dead.Swap(true) {
		return verrorf(ErrClosed, "AH already destroyed")
	}
	ah.p.Destroy()
	ah.pd.use(-1, 0)
	return nil
}

// InitAHFromWC builds the address vector that answers a UD receive
// (ibv_init_ah_from_wc): the destination is the sender's address from the
// GRH area grh (the first GRHLen bytes of the receive buffer).
func (c *Context) InitAHFromWC(port uint8, wc *WC, grh []byte) (AHAttr, error) {
	if wc.Flags&WCFlagGRH == 0 {
		return AHAttr{}, verrorf(ErrInvalidArgument, "work completion has no GRH: cannot address a RoCE reply")
	}
	if len(grh) < GRHLen {
		return AHAttr{}, verrorf(ErrInvalidArgument, "GRH buffer of %d bytes, want %d", len(grh), GRHLen)
	}
	var src, dst netip.Addr
	var tclass uint8
	var flow uint32
	if grh[0]>>4 == 6 {
		src = netip.AddrFrom16([16]byte(grh[8:24]))
		dst = netip.AddrFrom16([16]byte(grh[24:40]))
		w := binary.BigEndian.Uint32(grh[0:4])
		tclass, flow = uint8(w>>20), w&0xFFFFF
	} else {
		ip := grh[20:40]
		if ip[0]>>4 != 4 {
			return AHAttr{}, verrorf(ErrInvalidArgument, "GRH area holds neither an IPv6 nor an IPv4 header")
		}
		src = netip.AddrFrom4([4]byte(ip[12:16]))
		dst = netip.AddrFrom4([4]byte(ip[16:20]))
		tclass = ip[1]
	}
	// The source GID of the reply is the GID the request was sent to.
	sgid := -1
	pa, err := c.QueryPort(max(port, 1))
	if err != nil {
		return AHAttr{}, err
	}
	for i := 0; i < pa.GIDTblLen && sgid < 0; i++ {
		if g, err := c.QueryGID(max(port, 1), i); err == nil && !g.IsZero() && g.IP() == dst.Unmap() {
			sgid = i
		}
	}
	if sgid < 0 {
		return AHAttr{}, verrorf(ErrInvalidArgument, "GRH destination %s is not this device's address %s", dst, c.dev.Addr())
	}
	return AHAttr{IsGlobal: true, PortNum: port, SL: wc.SL, GRH: GlobalRoute{
		DGID: GIDFromIP(src), SGIDIndex: uint8(sgid), HopLimit: 0xFF, TrafficClass: tclass, FlowLabel: flow}}, nil
}

// CreateAHFromWC is InitAHFromWC followed by CreateAH (ibv_create_ah_from_wc).
func (pd *PD) CreateAHFromWC(wc *WC, grh []byte, port uint8) (*AH, error) {
	attr, err := pd.ctx.InitAHFromWC(port, wc, grh)
	if err != nil {
		return nil, err
	}
	return pd.CreateAH(attr)
}
