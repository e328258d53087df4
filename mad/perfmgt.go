package mad

import (
	"sync"
)

// PortCounterValues are a port's raw counters, as 64-bit totals since the
// device started. Data counters are in octets; the responder reports them
// in units of 4 octets as PerfMgt requires.
type PortCounterValues struct {
	XmitData, RcvData            uint64 // octets
	XmitPkts, RcvPkts            uint64
	UnicastXmitPkts              uint64
	UnicastRcvPkts               uint64
	MulticastXmitPkts            uint64
	MulticastRcvPkts             uint64
	RcvErrors                    uint64 // packets dropped as malformed
	XmitDiscards                 uint64 // packets that could not be sent
	RcvConstraintErrors          uint64 // P_Key / Q_Key violations
	QP1Dropped                   uint64 // MADs dropped for lack of a receive buffer
	LinkDowned                   uint64
	SymbolErrors, VL15Dropped    uint64 // always 0 on a soft device
	XmitConstraintErrors         uint64
	LinkErrorRecovery            uint64
	RcvRemotePhysicalErrors      uint64
	RcvSwitchRelayErrors         uint64
	LocalLinkIntegrityErrors     uint64
	ExcessiveBufferOverrunErrors uint64
}

// PerfMgtConfig configures ServePerfMgt.
type PerfMgtConfig struct {
	// Port is the port number the device answers for (default 1).
	Port uint8
	// Counters returns the current raw counters; required.
	Counters func() PortCounterValues
	// CapabilityMask defaults to PerfCapExtendedWidth (0x0200), as
	// mlx5; add PerfCapQP1Dropped if Counters fills QP1Dropped.
	CapabilityMask uint16
	// RespTimeValue defaults to 16 (≈268 ms).
	RespTimeValue uint8
}

// PerfMgt answers PerfMgt Get and Set (docs/spec/cm-mad.md §6): ClassPortInfo,
// PortCounters and PortCountersExtended; any other attribute gets status
// 0x000C and a PortSelect naming no port 0x001C. Set clears the selected
// counters (by remembering a baseline) and answers like Get.
type PerfMgt struct {
	reg *Registration
	cfg PerfMgtConfig

	mu   sync.Mutex
	base PortCounterValues
}

// ServePerfMgt registers a PerfMgt responder (class 0x04 version 1, Get and
// Set) on a.
func ServePerfMgt(a *Agent, cfg PerfMgtConfig) (*PerfMgt, error) {
	if cfg.Port == 0 {
		cfg.Port = 1
	}
	if cfg.CapabilityMask == 0 {
		cfg.CapabilityMask = PerfCapExtendedWidth
	}
	if cfg.RespTimeValue == 0 {
		cfg.RespTimeValue = 16
	}
	p := &PerfMgt{cfg: cfg}
	r, err := a.Register(ClassPerfMgt, PerfMgtVersion, []uint8{MethodGet, MethodSet}, p.handle)
	if err != nil {
		return nil, err
	}
	p.reg = r
	return p, nil
}

// Close unregisters the responder.
func (p *PerfMgt) Close() { p.reg.Unregister() }

// current returns the counters less the baseline.
func (p *PerfMgt) current() PortCounterValues {
	v := p.cfg.Counters()
	p.mu.Lock()
	b := p.base
	p.mu.Unlock()
	sub := func(x, y uint64) uint64 {
		if x < y {
			return 0
		}
		return x - y
	}
	return PortCounterValues{
		XmitData: sub(v.XmitData, b.XmitData), RcvData: sub(v.RcvData, b.RcvData),
		XmitPkts: sub(v.XmitPkts, b.XmitPkts), RcvPkts: sub(v.RcvPkts, b.RcvPkts),
		UnicastXmitPkts: sub(v.UnicastXmitPkts, b.UnicastXmitPkts), UnicastRcvPkts: sub(v.UnicastRcvPkts, b.UnicastRcvPkts),
		MulticastXmitPkts: sub(v.MulticastXmitPkts, b.MulticastXmitPkts), MulticastRcvPkts: sub(v.MulticastRcvPkts, b.MulticastRcvPkts),
		RcvErrors: sub(v.RcvErrors, b.RcvErrors), XmitDiscards: sub(v.XmitDiscards, b.XmitDiscards),
		RcvConstraintErrors: sub(v.RcvConstraintErrors, b.RcvConstraintErrors), QP1Dropped: sub(v.QP1Dropped, b.QP1Dropped),
		LinkDowned: sub(v.LinkDowned, b.LinkDowned), SymbolErrors: sub(v.SymbolErrors, b.SymbolErrors),
		VL15Dropped: sub(v.VL15Dropped, b.VL15Dropped), XmitConstraintErrors: sub(v.XmitConstraintErrors, b.XmitConstraintErrors),
		LinkErrorRecovery:            sub(v.LinkErrorRecovery, b.LinkErrorRecovery),
		RcvRemotePhysicalErrors:      sub(v.RcvRemotePhysicalErrors, b.RcvRemotePhysicalErrors),
		RcvSwitchRelayErrors:         sub(v.RcvSwitchRelayErrors, b.RcvSwitchRelayErrors),
		LocalLinkIntegrityErrors:     sub(v.LocalLinkIntegrityErrors, b.LocalLinkIntegrityErrors),
		ExcessiveBufferOverrunErrors: sub(v.ExcessiveBufferOverrunErrors, b.ExcessiveBufferOverrunErrors),
	}
}

// clear moves the baseline of the counters selected in the PortCounters
// (ext false) or PortCountersExtended (ext true) masks to their current
// raw value.
func (p *PerfMgt) clear(ext bool, sel uint16, sel2 uint32) {
	v := p.cfg.Counters()
	p.mu.Lock()
	defer p.mu.Unlock()
	b := &p.base
	set := func(bit bool, dst *uint64, src uint64) {
		if bit {
			*dst = src
		}
	}
	if !ext {
		set(sel&SelSymbolError != 0, &b.SymbolErrors, v.SymbolErrors)
		set(sel&SelLinkErrorRecovery != 0, &b.LinkErrorRecovery, v.LinkErrorRecovery)
		set(sel&SelLinkDowned != 0, &b.LinkDowned, v.LinkDowned)
		set(sel&SelPortRcvErrors != 0, &b.RcvErrors, v.RcvErrors)
		set(sel&SelPortRcvRemotePhys != 0, &b.RcvRemotePhysicalErrors, v.RcvRemotePhysicalErrors)
		set(sel&SelPortRcvSwitchRelay != 0, &b.RcvSwitchRelayErrors, v.RcvSwitchRelayErrors)
		set(sel&SelPortXmitDiscards != 0, &b.XmitDiscards, v.XmitDiscards)
		set(sel&SelPortXmitConstraint != 0, &b.XmitConstraintErrors, v.XmitConstraintErrors)
		set(sel&SelPortRcvConstraint != 0, &b.RcvConstraintErrors, v.RcvConstraintErrors)
		set(sel&SelLocalLinkIntegrity != 0, &b.LocalLinkIntegrityErrors, v.LocalLinkIntegrityErrors)
		set(sel&SelExcessiveBufOverrun != 0, &b.ExcessiveBufferOverrunErrors, v.ExcessiveBufferOverrunErrors)
		set(sel&SelVL15Dropped != 0, &b.VL15Dropped, v.VL15Dropped)
		set(sel&SelPortXmitData != 0, &b.XmitData, v.XmitData)
		set(sel&SelPortRcvData != 0, &b.RcvData, v.RcvData)
		set(sel&SelPortXmitPkts != 0, &b.XmitPkts, v.XmitPkts)
		set(sel&SelPortRcvPkts != 0, &b.RcvPkts, v.RcvPkts)
		set(sel2&Sel2QP1Dropped != 0, &b.QP1Dropped, v.QP1Dropped)
		return
	}
	set(sel&SelXPortXmitData != 0, &b.XmitData, v.XmitData)
	set(sel&SelXPortRcvData != 0, &b.RcvData, v.RcvData)
	set(sel&SelXPortXmitPkts != 0, &b.XmitPkts, v.XmitPkts)
	set(sel&SelXPortRcvPkts != 0, &b.RcvPkts, v.RcvPkts)
	set(sel&SelXPortUnicastXmitPkts != 0, &b.UnicastXmitPkts, v.UnicastXmitPkts)
	set(sel&SelXPortUnicastRcvPkts != 0, &b.UnicastRcvPkts, v.UnicastRcvPkts)
	set(sel&SelXPortMulticastXmitPkt != 0, &b.MulticastXmitPkts, v.MulticastXmitPkts)
	set(sel&SelXPortMulticastRcvPkt != 0, &b.MulticastRcvPkts, v.MulticastRcvPkts)
}

func (p *PerfMgt) handle(r *Registration, in *Received) {
	set := in.MAD.Method() == MethodSet
	resp := in.MAD // our own copy
	attr := resp.AttrID()
	resp.SetMethod(MethodGetResp)
	resp.SetStatus(0)
	a := resp.PerfAttr()
	// PortSelect 0 on a channel adapter means the port the MAD came in
	// on (perfquery sends it for a LID given without a port), which is
	// the one port this responder serves.
	portOK := func(ps uint8) bool {
		return ps == p.cfg.Port || ps == 0 || (ps == AllPorts && p.cfg.CapabilityMask&PerfCapAllPortSelect != 0)
	}
	switch attr {
	case AttrClassPortInfo:
		if set {
			resp.SetStatus(StatusMethodAttrUnsupported)
			break
		}
		clear(a)
		c := ClassPortInfo(a)
		c.SetBaseVersion(BaseVersion)
		c.SetClassVersion(PerfMgtVersion)
		c.SetCapabilityMask(p.cfg.CapabilityMask)
		c.SetRespTimeValue(p.cfg.RespTimeValue)
	case AttrPortCounters:
		pc := PortCounters(a)
		if !portOK(pc.PortSelect()) {
			resp.SetStatus(StatusInvalidAttrValue)
			break
		}
		if set {
			p.clear(false, pc.CounterSelect(), uint32(pc.CounterSelect2()))
		}
		v := p.current()
		sat16 := func(x uint64) uint16 { return uint16(min(x, 0xFFFF)) }
		sat8 := func(x uint64) uint8 { return uint8(min(x, 0xFF)) }
		sat4 := func(x uint64) uint8 { return uint8(min(x, 0xF)) }
		sat32 := func(x uint64) uint32 { return uint32(min(x, 0xFFFFFFFF)) }
		pc.SetSymbolErrorCounter(sat16(v.SymbolErrors))
		pc.SetLinkErrorRecoveryCounter(sat8(v.LinkErrorRecovery))
		pc.SetLinkDownedCounter(sat8(v.LinkDowned))
		pc.SetPortRcvErrors(sat16(v.RcvErrors))
		pc.SetPortRcvRemotePhysicalErrors(sat16(v.RcvRemotePhysicalErrors))
		pc.SetPortRcvSwitchRelayErrors(sat16(v.RcvSwitchRelayErrors))
		pc.SetPortXmitDiscards(sat16(v.XmitDiscards))
		pc.SetPortXmitConstraintErrors(sat8(v.XmitConstraintErrors))
		pc.SetPortRcvConstraintErrors(sat8(v.RcvConstraintErrors))
		pc.SetLocalLinkIntegrityErrors(sat4(v.LocalLinkIntegrityErrors))
		pc.SetExcessiveBufferOverrunErrors(sat4(v.ExcessiveBufferOverrunErrors))
		if p.cfg.CapabilityMask&PerfCapQP1Dropped != 0 {
			pc.SetQP1Dropped(sat16(v.QP1Dropped))
		}
		pc.SetVL15Dropped(sat16(v.VL15Dropped))
		pc.SetPortXmitData(sat32(v.XmitData / 4))
		pc.SetPortRcvData(sat32(v.RcvData / 4))
		pc.SetPortXmitPkts(sat32(v.XmitPkts))
		pc.SetPortRcvPkts(sat32(v.RcvPkts))
		pc.SetPortXmitWait(0)
	case AttrPortCountersExtended:
		pc := PortCountersExtended(a)
		if !portOK(pc.PortSelect()) {
			resp.SetStatus(StatusInvalidAttrValue)
			break
		}
		if set {
			p.clear(true, pc.CounterSelect(), pc.CounterSelect2())
		}
		v := p.current()
		for i := range XNumCounters {
			pc.SetCounter(i, 0)
		}
		pc.SetCounter(XPortXmitData, v.XmitData/4)
		pc.SetCounter(XPortRcvData, v.RcvData/4)
		pc.SetCounter(XPortXmitPkts, v.XmitPkts)
		pc.SetCounter(XPortRcvPkts, v.RcvPkts)
		if p.cfg.CapabilityMask&PerfCapExtendedWidth != 0 {
			pc.SetCounter(XPortUnicastXmitPkts, v.UnicastXmitPkts)
			pc.SetCounter(XPortUnicastRcvPkts, v.UnicastRcvPkts)
			pc.SetCounter(XPortMulticastXmitPkts, v.MulticastXmitPkts)
			pc.SetCounter(XPortMulticastRcvPkts, v.MulticastRcvPkts)
		}
	default:
		resp.SetStatus(StatusMethodAttrUnsupported)
	}
	if err := r.Respond(in, resp); err != nil {
		r.a.log.Debug("mad: PerfMgt response failed", "err", err)
	}
}
