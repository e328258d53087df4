// Package gsisim wires soft devices (transport engine and GSI port) over a
// deterministic memlink network with a fake clock, for simulation tests of
// the management layers. Everything runs on the caller's goroutine: Step
// moves the clock to the next datagram delivery or timer and processes it.
package gsisim

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/link/memlink"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/clock"
	"github.com/rdma-go/rdma-go/provider/soft/gsi"
	"github.com/rdma-go/rdma-go/wire"
)

// Sim is a set of nodes on one simulated network.
type Sim struct {
	Clock *clock.Fake
	Net   *memlink.Network
	// Drop, if set, is asked about every MAD sent; true loses it.
	Drop func(from, to netip.Addr, m mad.MAD) bool
	// Trace, if set, sees every MAD sent that is not dropped.
	Trace func(at time.Time, from, to netip.Addr, m mad.MAD)
	nodes map[netip.Addr]*Node
	order []*Node
}

// Node is one simulated device.
type Node struct {
	Addr netip.Addr
	Host *engine.Host
	Port *gsi.Port
	sim  *Sim
	down bool
}

// New returns an empty simulation whose network draws faults from seed.
func New(seed int64, f memlink.Faults) *Sim {
	return &Sim{Clock: clock.NewFake(time.Unix(1_000_000, 0)), Net: memlink.NewNetwork(seed, f),
		nodes: make(map[netip.Addr]*Node)}
}

// Add creates a device at addr with its GSI port and CM.
func (s *Sim) Add(addr netip.Addr, guid uint64) *Node {
	n := &Node{Addr: addr, sim: s}
	n.Host = engine.NewHost(engine.HostConfig{Addr: addr, Link: (*sender)(n), ICRC: wire.ICRCIPv4Strict})
	p, err := gsi.Open(n.Host, gsi.Config{Clock: s.Clock, GUID: guid})
	if err != nil {
		panic(fmt.Sprintf("gsisim: %v", err))
	}
	n.Port = p
	s.nodes[addr] = n
	s.order = append(s.order, n)
	return n
}

// SetDown makes a node deaf and mute (a crashed peer) or brings it back.
func (n *Node) SetDown(down bool) { n.down = down }

type sender Node

func (s *sender) Send(batch []link.Datagram) error {
	n := (*Node)(s)
	if n.down {
		return nil
	}
	now := n.sim.Clock.Now()
	for _, d := range batch {
		d.Src = netip.AddrPortFrom(n.Addr, d.Src.Port())
		if m, ok := madOf(d.Buf); ok {
			if n.sim.Drop != nil && n.sim.Drop(n.Addr, d.Dst.Addr(), m) {
				continue
			}
			if n.sim.Trace != nil {
				n.sim.Trace(now, n.Addr, d.Dst.Addr(), m)
			}
		}
		n.sim.Net.Send(now, d)
	}
	return nil
}

func (s *sender) SourcePort(want uint16) uint16 { return want }

// madOf returns the MAD in a UD SEND-only packet to QP1.
func madOf(b []byte) (mad.MAD, bool) {
	var p wire.Packet
	if p.Parse(b) != nil || p.BTH.DestQP() != mad.GSIQPN || len(p.Payload) < mad.Size {
		return nil, false
	}
	return mad.MAD(p.Payload[:mad.Size]), true
}

// Step processes the next event due no later than limit: every datagram
// due at the earliest delivery time, or the earliest timer. It reports
// false when nothing is due by limit (the clock then reads limit).
func (s *Sim) Step(limit time.Time) bool {
	nd, okD := s.Net.NextDelivery()
	nt, okT := s.Clock.Next()
	switch {
	case okD && !nd.After(limit) && (!okT || !nd.After(nt)):
		s.Clock.AdvanceTo(nd)
		now := s.Clock.Now()
		for {
			d, ok := s.Net.Pop(now)
			if !ok {
				break
			}
			n := s.nodes[d.Dst.Addr().Unmap()]
			if n == nil || n.down {
				continue
			}
			n.Host.Receive(now, []link.Datagram{d})
			n.Port.Poll(now)
		}
		return true
	case okT && !nt.After(limit):
		s.Clock.AdvanceTo(nt)
		return true
	}
	s.Clock.AdvanceTo(limit)
	return false
}

// Run steps until done reports true, nothing is left to do within d of
// virtual time, or maxSteps steps; it reports whether done became true.
func (s *Sim) Run(d time.Duration, maxSteps int, done func() bool) bool {
	limit := s.Clock.Now().Add(d)
	for i := 0; i < maxSteps; i++ {
		if done != nil && done() {
			return true
		}
		if !s.Step(limit) {
			break
		}
	}
	return done != nil && done()
}
