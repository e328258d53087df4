//go:build !linux

package rdmacm

import (
	"net/netip"
	"time"
)

// resolveNeighbour checks nothing outside Linux: the connection's REQ
// finds out whether the peer answers.
func resolveNeighbour(netip.Addr, time.Duration) error { return nil }
