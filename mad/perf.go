package mad

// PerfMgt attributes (class 0x04, version 1; docs/spec/cm-mad.md §6).
const (
	AttrPortSamplesControl       = 0x0010
	AttrPortSamplesResult        = 0x0011
	AttrPortCounters             = 0x0012
	AttrPortCountersExtended     = 0x001D
	AttrPortSamplesResultExt     = 0x001E
	PerfAttrOffset               = 64 // the attribute starts at MAD byte 64
	PerfAttrLen                  = Size - PerfAttrOffset
	ClassPortInfoLen             = 72
	PortCountersLen              = 44
	PortCountersExtendedLen      = 184
	AllPorts                     = 0xFF // PortSelect meaning every port
	PerfCapAllPortSelect         = 0x0100
	PerfCapExtendedWidth         = 0x0200 // PortCountersExtended with the unicast/multicast counters
	PerfCapExtendedWidthNoIETF   = 0x0400
	PerfCapSamplesOnly           = 0x0800
	PerfCapPortXmitWait          = 0x1000
	PerfCapInhibitLimitedPKeyMC  = 0x2000
	PerfCapRSFEC                 = 0x4000
	PerfCapQP1Dropped            = 0x8000
	PerfCap2PMKey                = 0x1
	PerfCap2AdditionalPortCntExt = 0x2
)

// PortCounters CounterSelect bits (Set: a 1 clears the counter).
const (
	SelSymbolError           = 0x0001
	SelLinkErrorRecovery     = 0x0002
	SelLinkDowned            = 0x0004
	SelPortRcvErrors         = 0x0008
	SelPortRcvRemotePhys     = 0x0010
	SelPortRcvSwitchRelay    = 0x0020
	SelPortXmitDiscards      = 0x0040
	SelPortXmitConstraint    = 0x0080
	SelPortRcvConstraint     = 0x0100
	SelLocalLinkIntegrity    = 0x0200
	SelExcessiveBufOverrun   = 0x0400
	SelVL15Dropped           = 0x0800
	SelPortXmitData          = 0x1000
	SelPortRcvData           = 0x2000
	SelPortXmitPkts          = 0x4000
	SelPortRcvPkts           = 0x8000
	Sel2PortXmitWait         = 0x01 // PortCounters CounterSelect2
	Sel2QP1Dropped           = 0x02
	SelXPortXmitData         = 0x0001 // PortCountersExtended CounterSelect
	SelXPortRcvData          = 0x0002
	SelXPortXmitPkts         = 0x0004
	SelXPortRcvPkts          = 0x0008
	SelXPortUnicastXmitPkts  = 0x0010
	SelXPortUnicastRcvPkts   = 0x0020
	SelXPortMulticastXmitPkt = 0x0040
	SelXPortMulticastRcvPkt  = 0x0080
)

// PerfAttr returns the attribute area of a PerfMgt MAD (bytes 64–255).
func (m MAD) PerfAttr() []byte { return m[PerfAttrOffset:Size] }

// ClassPortInfo is the ClassPortInfo attribute (72 bytes, §6.2), a view of
// the attribute area.
type ClassPortInfo []byte

// BaseVersion returns the base version (1).
func (c ClassPortInfo) BaseVersion() uint8 { return c[0] }

// ClassVersion returns the class version.
func (c ClassPortInfo) ClassVersion() uint8 { return c[1] }

// CapabilityMask returns the class capability mask.
func (c ClassPortInfo) CapabilityMask() uint16 { return get16(c, 2) }

// CapabilityMask2 returns the 27-bit second capability mask.
func (c ClassPortInfo) CapabilityMask2() uint32 { return get32(c, 4) >> 5 }

// RespTimeValue returns the 5-bit response time value.
func (c ClassPortInfo) RespTimeValue() uint8 { return c[7] & 0x1F }

// RedirectGID returns the redirect GID.
func (c ClassPortInfo) RedirectGID() [16]byte { return getGID(c, 8) }

// RedirectTC returns the redirect traffic class.
func (c ClassPortInfo) RedirectTC() uint8 { return c[24] }

// RedirectSL returns the 4-bit redirect SL.
func (c ClassPortInfo) RedirectSL() uint8 { return c[25] >> 4 }

// RedirectFL returns the 20-bit redirect flow label.
func (c ClassPortInfo) RedirectFL() uint32 { return get24(c, 25) & 0xFFFFF }

// RedirectLID returns the redirect LID.
func (c ClassPortInfo) RedirectLID() uint16 { return get16(c, 28) }

// RedirectPKey returns the redirect P_Key.
func (c ClassPortInfo) RedirectPKey() uint16 { return get16(c, 30) }

// RedirectQP returns the redirect QP.
func (c ClassPortInfo) RedirectQP() uint32 { return get24(c, 33) }

// RedirectQKey returns the redirect Q_Key.
func (c ClassPortInfo) RedirectQKey() uint32 { return get32(c, 36) }

// TrapGID returns the trap GID.
func (c ClassPortInfo) TrapGID() [16]byte { return getGID(c, 40) }

// TrapTC returns the trap traffic class.
func (c ClassPortInfo) TrapTC() uint8 { return c[56] }

// TrapSL returns the 4-bit trap SL.
func (c ClassPortInfo) TrapSL() uint8 { return c[57] >> 4 }

// TrapFL returns the 20-bit trap flow label.
func (c ClassPortInfo) TrapFL() uint32 { return get24(c, 57) & 0xFFFFF }

// TrapLID returns the trap LID.
func (c ClassPortInfo) TrapLID() uint16 { return get16(c, 60) }

// TrapPKey returns the trap P_Key.
func (c ClassPortInfo) TrapPKey() uint16 { return get16(c, 62) }

// TrapHL returns the trap hop limit.
func (c ClassPortInfo) TrapHL() uint8 { return c[64] }

// TrapQP returns the trap QP.
func (c ClassPortInfo) TrapQP() uint32 { return get24(c, 65) }

// TrapQKey returns the trap Q_Key.
func (c ClassPortInfo) TrapQKey() uint32 { return get32(c, 68) }

// SetBaseVersion sets the base version.
func (c ClassPortInfo) SetBaseVersion(v uint8) { c[0] = v }

// SetClassVersion sets the class version.
func (c ClassPortInfo) SetClassVersion(v uint8) { c[1] = v }

// SetCapabilityMask sets the capability mask.
func (c ClassPortInfo) SetCapabilityMask(v uint16) { put16(c, 2, v) }

// SetCapabilityMask2 sets the 27-bit second capability mask.
func (c ClassPortInfo) SetCapabilityMask2(v uint32) {
	put32(c, 4, get32(c, 4)&0x1F|v<<5)
}

// SetRespTimeValue sets the 5-bit response time value.
func (c ClassPortInfo) SetRespTimeValue(v uint8) { c[7] = c[7]&^0x1F | v&0x1F }

// SetRedirectGID sets the redirect GID.
func (c ClassPortInfo) SetRedirectGID(g [16]byte) { copy(c[8:24], g[:]) }

// SetRedirectTC sets the redirect traffic class.
func (c ClassPortInfo) SetRedirectTC(v uint8) { c[24] = v }

// SetRedirectSL sets the 4-bit redirect SL.
func (c ClassPortInfo) SetRedirectSL(v uint8) { set8(c, 25, 0xF0, 4, v) }

// SetRedirectFL sets the 20-bit redirect flow label.
func (c ClassPortInfo) SetRedirectFL(v uint32) { put24(c, 25, get24(c, 25)&0xF00000|v&0xFFFFF) }

// SetRedirectLID sets the redirect LID.
func (c ClassPortInfo) SetRedirectLID(v uint16) { put16(c, 28, v) }

// SetRedirectPKey sets the redirect P_Key.
func (c ClassPortInfo) SetRedirectPKey(v uint16) { put16(c, 30, v) }

// SetRedirectQP sets the redirect QP.
func (c ClassPortInfo) SetRedirectQP(v uint32) { put24(c, 33, v) }

// SetRedirectQKey sets the redirect Q_Key.
func (c ClassPortInfo) SetRedirectQKey(v uint32) { put32(c, 36, v) }

// SetTrapGID sets the trap GID.
func (c ClassPortInfo) SetTrapGID(g [16]byte) { copy(c[40:56], g[:]) }

// SetTrapTC sets the trap traffic class.
func (c ClassPortInfo) SetTrapTC(v uint8) { c[56] = v }

// SetTrapSL sets the 4-bit trap SL.
func (c ClassPortInfo) SetTrapSL(v uint8) { set8(c, 57, 0xF0, 4, v) }

// SetTrapFL sets the 20-bit trap flow label.
func (c ClassPortInfo) SetTrapFL(v uint32) { put24(c, 57, get24(c, 57)&0xF00000|v&0xFFFFF) }

// SetTrapLID sets the trap LID.
func (c ClassPortInfo) SetTrapLID(v uint16) { put16(c, 60, v) }

// SetTrapPKey sets the trap P_Key.
func (c ClassPortInfo) SetTrapPKey(v uint16) { put16(c, 62, v) }

// SetTrapHL sets the trap hop limit.
func (c ClassPortInfo) SetTrapHL(v uint8) { c[64] = v }

// SetTrapQP sets the trap QP.
func (c ClassPortInfo) SetTrapQP(v uint32) { put24(c, 65, v) }

// SetTrapQKey sets the trap Q_Key.
func (c ClassPortInfo) SetTrapQKey(v uint32) { put32(c, 68, v) }

// PortCounters is the PortCounters attribute (44 bytes, §6.3).
type PortCounters []byte

// PortSelect returns the port the counters are for.
func (p PortCounters) PortSelect() uint8 { return p[1] }

// CounterSelect returns the counters a Set clears.
func (p PortCounters) CounterSelect() uint16 { return get16(p, 2) }

// SymbolErrorCounter returns the counter.
func (p PortCounters) SymbolErrorCounter() uint16 { return get16(p, 4) }

// LinkErrorRecoveryCounter returns the counter.
func (p PortCounters) LinkErrorRecoveryCounter() uint8 { return p[6] }

// LinkDownedCounter returns the counter.
func (p PortCounters) LinkDownedCounter() uint8 { return p[7] }

// PortRcvErrors returns the counter.
func (p PortCounters) PortRcvErrors() uint16 { return get16(p, 8) }

// PortRcvRemotePhysicalErrors returns the counter.
func (p PortCounters) PortRcvRemotePhysicalErrors() uint16 { return get16(p, 10) }

// PortRcvSwitchRelayErrors returns the counter.
func (p PortCounters) PortRcvSwitchRelayErrors() uint16 { return get16(p, 12) }

// PortXmitDiscards returns the counter.
func (p PortCounters) PortXmitDiscards() uint16 { return get16(p, 14) }

// PortXmitConstraintErrors returns the counter.
func (p PortCounters) PortXmitConstraintErrors() uint8 { return p[16] }

// PortRcvConstraintErrors returns the counter.
func (p PortCounters) PortRcvConstraintErrors() uint8 { return p[17] }

// CounterSelect2 returns attribute byte 18.
func (p PortCounters) CounterSelect2() uint8 { return p[18] }

// LocalLinkIntegrityErrors returns the 4-bit counter.
func (p PortCounters) LocalLinkIntegrityErrors() uint8 { return p[19] >> 4 }

// ExcessiveBufferOverrunErrors returns the 4-bit counter.
func (p PortCounters) ExcessiveBufferOverrunErrors() uint8 { return p[19] & 0x0F }

// QP1Dropped returns the counter.
func (p PortCounters) QP1Dropped() uint16 { return get16(p, 20) }

// VL15Dropped returns the counter.
func (p PortCounters) VL15Dropped() uint16 { return get16(p, 22) }

// PortXmitData returns transmitted data in units of 4 octets.
func (p PortCounters) PortXmitData() uint32 { return get32(p, 24) }

// PortRcvData returns received data in units of 4 octets.
func (p PortCounters) PortRcvData() uint32 { return get32(p, 28) }

// PortXmitPkts returns the counter.
func (p PortCounters) PortXmitPkts() uint32 { return get32(p, 32) }

// PortRcvPkts returns the counter.
func (p PortCounters) PortRcvPkts() uint32 { return get32(p, 36) }

// PortXmitWait returns the counter.
func (p PortCounters) PortXmitWait() uint32 { return get32(p, 40) }

// SetPortSelect sets the port.
func (p PortCounters) SetPortSelect(v uint8) { p[1] = v }

// SetCounterSelect sets the counter select mask.
func (p PortCounters) SetCounterSelect(v uint16) { put16(p, 2, v) }

// SetSymbolErrorCounter sets the counter.
func (p PortCounters) SetSymbolErrorCounter(v uint16) { put16(p, 4, v) }

// SetLinkErrorRecoveryCounter sets the counter.
func (p PortCounters) SetLinkErrorRecoveryCounter(v uint8) { p[6] = v }

// SetLinkDownedCounter sets the counter.
func (p PortCounters) SetLinkDownedCounter(v uint8) { p[7] = v }

// SetPortRcvErrors sets the counter.
func (p PortCounters) SetPortRcvErrors(v uint16) { put16(p, 8, v) }

// SetPortRcvRemotePhysicalErrors sets the counter.
func (p PortCounters) SetPortRcvRemotePhysicalErrors(v uint16) { put16(p, 10, v) }

// SetPortRcvSwitchRelayErrors sets the counter.
func (p PortCounters) SetPortRcvSwitchRelayErrors(v uint16) { put16(p, 12, v) }

// SetPortXmitDiscards sets the counter.
func (p PortCounters) SetPortXmitDiscards(v uint16) { put16(p, 14, v) }

// SetPortXmitConstraintErrors sets the counter.
func (p PortCounters) SetPortXmitConstraintErrors(v uint8) { p[16] = v }

// SetPortRcvConstraintErrors sets the counter.
func (p PortCounters) SetPortRcvConstraintErrors(v uint8) { p[17] = v }

// SetCounterSelect2 sets attribute byte 18.
func (p PortCounters) SetCounterSelect2(v uint8) { p[18] = v }

// SetLocalLinkIntegrityErrors sets the 4-bit counter.
func (p PortCounters) SetLocalLinkIntegrityErrors(v uint8) { set8(p, 19, 0xF0, 4, v) }

// SetExcessiveBufferOverrunErrors sets the 4-bit counter.
func (p PortCounters) SetExcessiveBufferOverrunErrors(v uint8) { set8(p, 19, 0x0F, 0, v) }

// SetQP1Dropped sets the counter.
func (p PortCounters) SetQP1Dropped(v uint16) { put16(p, 20, v) }

// SetVL15Dropped sets the counter.
func (p PortCounters) SetVL15Dropped(v uint16) { put16(p, 22, v) }

// SetPortXmitData sets the counter.
func (p PortCounters) SetPortXmitData(v uint32) { put32(p, 24, v) }

// SetPortRcvData sets the counter.
func (p PortCounters) SetPortRcvData(v uint32) { put32(p, 28, v) }

// SetPortXmitPkts sets the counter.
func (p PortCounters) SetPortXmitPkts(v uint32) { put32(p, 32, v) }

// SetPortRcvPkts sets the counter.
func (p PortCounters) SetPortRcvPkts(v uint32) { put32(p, 36, v) }

// SetPortXmitWait sets the counter.
func (p PortCounters) SetPortXmitWait(v uint32) { put32(p, 40, v) }

// PortCountersExtended is the PortCountersExtended attribute (184 bytes,
// §6.4). Its counters are 64-bit; Counter and SetCounter address them by
// index in field order (XPortXmitData … XQP1Dropped).
type PortCountersExtended []byte

// Indexes of the 64-bit counters of PortCountersExtended, in field order.
const (
	XPortXmitData = iota
	XPortRcvData
	XPortXmitPkts
	XPortRcvPkts
	XPortUnicastXmitPkts
	XPortUnicastRcvPkts
	XPortMulticastXmitPkts
	XPortMulticastRcvPkts
	XSymbolErrorCounter
	XLinkErrorRecoveryCounter
	XLinkDownedCounter
	XPortRcvErrors
	XPortRcvRemotePhysicalErrors
	XPortRcvSwitchRelayErrors
	XPortXmitDiscards
	XPortXmitConstraintErrors
	XPortRcvConstraintErrors
	XLocalLinkIntegrityErrors
	XExcessiveBufferOverrunErrors
	XVL15Dropped
	XPortXmitWait
	XQP1Dropped
	XNumCounters
)

// PortSelect returns the port.
func (p PortCountersExtended) PortSelect() uint8 { return p[1] }

// CounterSelect returns the traffic counters a Set clears.
func (p PortCountersExtended) CounterSelect() uint16 { return get16(p, 2) }

// CounterSelect2 returns the additional counters a Set clears.
func (p PortCountersExtended) CounterSelect2() uint32 { return get32(p, 4) }

// Counter returns the 64-bit counter with index i (XPortXmitData …).
func (p PortCountersExtended) Counter(i int) uint64 { return get64(p, 8+8*i) }

// PortXmitData returns transmitted data in units of 4 octets.
func (p PortCountersExtended) PortXmitData() uint64 { return p.Counter(XPortXmitData) }

// PortRcvData returns received data in units of 4 octets.
func (p PortCountersExtended) PortRcvData() uint64 { return p.Counter(XPortRcvData) }

// PortXmitPkts returns the counter.
func (p PortCountersExtended) PortXmitPkts() uint64 { return p.Counter(XPortXmitPkts) }

// PortRcvPkts returns the counter.
func (p PortCountersExtended) PortRcvPkts() uint64 { return p.Counter(XPortRcvPkts) }

// PortUnicastXmitPkts returns the counter.
func (p PortCountersExtended) PortUnicastXmitPkts() uint64 { return p.Counter(XPortUnicastXmitPkts) }

// PortUnicastRcvPkts returns the counter.
func (p PortCountersExtended) PortUnicastRcvPkts() uint64 { return p.Counter(XPortUnicastRcvPkts) }

// PortMulticastXmitPkts returns the counter.
func (p PortCountersExtended) PortMulticastXmitPkts() uint64 {
	return p.Counter(XPortMulticastXmitPkts)
}

// PortMulticastRcvPkts returns the counter.
func (p PortCountersExtended) PortMulticastRcvPkts() uint64 {
	return p.Counter(XPortMulticastRcvPkts)
}

// SetPortSelect sets the port.
func (p PortCountersExtended) SetPortSelect(v uint8) { p[1] = v }

// SetCounterSelect sets the traffic counter select mask.
func (p PortCountersExtended) SetCounterSelect(v uint16) { put16(p, 2, v) }

// SetCounterSelect2 sets the additional counter select mask.
func (p PortCountersExtended) SetCounterSelect2(v uint32) { put32(p, 4, v) }

// SetCounter sets the 64-bit counter with index i.
func (p PortCountersExtended) SetCounter(i int, v uint64) { put64(p, 8+8*i, v) }
