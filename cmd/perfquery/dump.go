package main

import (
	"fmt"
	"strings"

	"github.com/rdma-go/rdma-go/mad"
)

// field formats one line of libibmad's field dump: the name, a colon, dots
// up to column 33, the value.
func field(b *strings.Builder, name string, value any) {
	b.WriteString(name)
	b.WriteByte(':')
	b.WriteString(strings.Repeat(".", max(32-len(name), 0)))
	fmt.Fprint(b, value)
	b.WriteByte('\n')
}

// hex formats a selector as libibmad's mad_dump_hex does for a field of n
// bytes: "0x" and 2n hex digits.
func hex(v uint64, n int) string { return fmt.Sprintf("0x%0*x", 2*n, v) }

// dumpPortCounters is libibmad's mad_dump_perfcounters: the PortCounters
// fields in attribute order up to ExcessiveBufferOverrunErrors, then
// QP1Dropped, then VL15Dropped to PortXmitWait.
func dumpPortCounters(a []byte) string {
	p := mad.PortCounters(a)
	var b strings.Builder
	field(&b, "PortSelect", p.PortSelect())
	field(&b, "CounterSelect", hex(uint64(p.CounterSelect()), 2))
	field(&b, "SymbolErrorCounter", p.SymbolErrorCounter())
	field(&b, "LinkErrorRecoveryCounter", p.LinkErrorRecoveryCounter())
	field(&b, "LinkDownedCounter", p.LinkDownedCounter())
	field(&b, "PortRcvErrors", p.PortRcvErrors())
	field(&b, "PortRcvRemotePhysicalErrors", p.PortRcvRemotePhysicalErrors())
	field(&b, "PortRcvSwitchRelayErrors", p.PortRcvSwitchRelayErrors())
	field(&b, "PortXmitDiscards", p.PortXmitDiscards())
	field(&b, "PortXmitConstraintErrors", p.PortXmitConstraintErrors())
	field(&b, "PortRcvConstraintErrors", p.PortRcvConstraintErrors())
	field(&b, "CounterSelect2", hex(uint64(p.CounterSelect2()), 1))
	field(&b, "LocalLinkIntegrityErrors", p.LocalLinkIntegrityErrors())
	field(&b, "ExcessiveBufferOverrunErrors", p.ExcessiveBufferOverrunErrors())
	field(&b, "QP1Dropped", p.QP1Dropped())
	field(&b, "VL15Dropped", p.VL15Dropped())
	field(&b, "PortXmitData", p.PortXmitData())
	field(&b, "PortRcvData", p.PortRcvData())
	field(&b, "PortXmitPkts", p.PortXmitPkts())
	field(&b, "PortRcvPkts", p.PortRcvPkts())
	field(&b, "PortXmitWait", p.PortXmitWait())
	return b.String()
}

// extNames are the 64-bit counters of PortCountersExtended in field order,
// as libibmad names them.
var extNames = [mad.XNumCounters]string{
	"PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts",
	"PortUnicastXmitPkts", "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts",
	"SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
	"PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards",
	"PortXmitConstraintErrors", "PortRcvConstraintErrors", "LocalLinkIntegrityErrors",
	"ExcessiveBufferOverrunErrors", "VL15Dropped", "PortXmitWait", "QP1Dropped",
}

// dumpPortCountersExt is perfquery's dump_perfcounters_ext: the selectors
// and the four 64-bit traffic counters; the unicast and multicast counters
// only when the PMA's CapabilityMask says it fills them
// (IsExtendedWidthSupported); the 64-bit error counters only when
// CapabilityMask2 does (IsAdditionalPortCountersExtendedSupported).
func dumpPortCountersExt(a []byte, capMask uint16, capMask2 uint32) string {
	p := mad.PortCountersExtended(a)
	var b strings.Builder
	field(&b, "PortSelect", p.PortSelect())
	field(&b, "CounterSelect", hex(uint64(p.CounterSelect()), 2))
	for i := mad.XPortXmitData; i <= mad.XPortRcvPkts; i++ {
		field(&b, extNames[i], p.Counter(i))
	}
	if capMask&mad.PerfCapExtendedWidth != 0 {
		for i := mad.XPortUnicastXmitPkts; i <= mad.XPortMulticastRcvPkts; i++ {
			field(&b, extNames[i], p.Counter(i))
		}
	}
	if capMask2&mad.PerfCap2AdditionalPortCntExt != 0 {
		field(&b, "CounterSelect2", hex(uint64(p.CounterSelect2()), 4))
		for i := mad.XSymbolErrorCounter; i < mad.XNumCounters; i++ {
			field(&b, extNames[i], p.Counter(i))
		}
	}
	return b.String()
}

// Saturating sums, as perfquery aggregates: IB counters stop at their
// maximum instead of wrapping.
func sat(x, y, limit uint64) uint64 {
	if x+y < x || x+y > limit {
		return limit
	}
	return x + y
}

// aggregate sums the PortCounters of each port for -a when the PMA cannot
// select all ports itself (perfquery's aggregate_perfcounters and
// output_aggregate_perfcounters).
type aggregate struct {
	last []byte // the last response, whose other fields the output keeps
	sel  uint16
	v    [18]uint64
}

// add adds one port's PortCounters attribute.
func (g *aggregate) add(a []byte) {
	p := mad.PortCounters(a)
	g.last = append(g.last[:0], a...)
	g.sel = p.CounterSelect()
	vals := [...]struct {
		v     uint64
		limit uint64
	}{
		{uint64(p.SymbolErrorCounter()), 0xFFFF}, {uint64(p.LinkErrorRecoveryCounter()), 0xFF},
		{uint64(p.LinkDownedCounter()), 0xFF}, {uint64(p.PortRcvErrors()), 0xFFFF},
		{uint64(p.PortRcvRemotePhysicalErrors()), 0xFFFF}, {uint64(p.PortRcvSwitchRelayErrors()), 0xFFFF},
		{uint64(p.PortXmitDiscards()), 0xFFFF}, {uint64(p.PortXmitConstraintErrors()), 0xFF},
		{uint64(p.PortRcvConstraintErrors()), 0xFF}, {uint64(p.LocalLinkIntegrityErrors()), 0xF},
		{uint64(p.ExcessiveBufferOverrunErrors()), 0xF}, {uint64(p.QP1Dropped()), 0xFFFF},
		{uint64(p.VL15Dropped()), 0xFFFF}, {uint64(p.PortXmitData()), 0xFFFFFFFF},
		{uint64(p.PortRcvData()), 0xFFFFFFFF}, {uint64(p.PortXmitPkts()), 0xFFFFFFFF},
		{uint64(p.PortRcvPkts()), 0xFFFFFFFF}, {uint64(p.PortXmitWait()), 0xFFFFFFFF},
	}
	for i, x := range vals {
		g.v[i] = sat(g.v[i], x.v, x.limit)
	}
}

// attr returns the aggregated attribute, PortSelect 0xFF (AllPortSelect).
func (g *aggregate) attr() []byte {
	a := append([]byte(nil), g.last...)
	p := mad.PortCounters(a)
	p.SetPortSelect(mad.AllPorts)
	p.SetCounterSelect(g.sel)
	v := g.v
	p.SetSymbolErrorCounter(uint16(v[0]))
	p.SetLinkErrorRecoveryCounter(uint8(v[1]))
	p.SetLinkDownedCounter(uint8(v[2]))
	p.SetPortRcvErrors(uint16(v[3]))
	p.SetPortRcvRemotePhysicalErrors(uint16(v[4]))
	p.SetPortRcvSwitchRelayErrors(uint16(v[5]))
	p.SetPortXmitDiscards(uint16(v[6]))
	p.SetPortXmitConstraintErrors(uint8(v[7]))
	p.SetPortRcvConstraintErrors(uint8(v[8]))
	p.SetLocalLinkIntegrityErrors(uint8(v[9]))
	p.SetExcessiveBufferOverrunErrors(uint8(v[10]))
	p.SetQP1Dropped(uint16(v[11]))
	p.SetVL15Dropped(uint16(v[12]))
	p.SetPortXmitData(uint32(v[13]))
	p.SetPortRcvData(uint32(v[14]))
	p.SetPortXmitPkts(uint32(v[15]))
	p.SetPortRcvPkts(uint32(v[16]))
	p.SetPortXmitWait(uint32(v[17]))
	return a
}

// aggregateExt sums PortCountersExtended (perfquery's
// aggregate_perfcounters_ext): the counters the capability masks say the
// PMA fills, 64-bit and saturating.
type aggregateExt struct {
	last []byte
	sel  uint16
	sel2 uint32
	v    [mad.XNumCounters]uint64
}

// add adds one port's PortCountersExtended attribute.
func (g *aggregateExt) add(a []byte, capMask uint16, capMask2 uint32) {
	p := mad.PortCountersExtended(a)
	g.last = append(g.last[:0], a...)
	g.sel = p.CounterSelect()
	for i := range mad.XNumCounters {
		switch {
		case i <= mad.XPortRcvPkts,
			i <= mad.XPortMulticastRcvPkts && capMask&mad.PerfCapExtendedWidth != 0,
			i > mad.XPortMulticastRcvPkts && capMask2&mad.PerfCap2AdditionalPortCntExt != 0:
			g.v[i] = sat(g.v[i], p.Counter(i), ^uint64(0))
		}
	}
	if capMask2&mad.PerfCap2AdditionalPortCntExt != 0 {
		g.sel2 = p.CounterSelect2()
	}
}

// attr returns the aggregated attribute, PortSelect 0xFF.
func (g *aggregateExt) attr(capMask uint16, capMask2 uint32) []byte {
	a := append([]byte(nil), g.last...)
	p := mad.PortCountersExtended(a)
	p.SetPortSelect(mad.AllPorts)
	p.SetCounterSelect(g.sel)
	for i := range mad.XNumCounters {
		switch {
		case i <= mad.XPortRcvPkts,
			i <= mad.XPortMulticastRcvPkts && capMask&mad.PerfCapExtendedWidth != 0,
			i > mad.XPortMulticastRcvPkts && capMask2&mad.PerfCap2AdditionalPortCntExt != 0:
			p.SetCounter(i, g.v[i])
		}
	}
	if capMask2&mad.PerfCap2AdditionalPortCntExt != 0 {
		p.SetCounterSelect2(g.sel2)
	}
	return a
}
