package rdmanet

import (
	"net"
	"testing"

	"golang.org/x/net/nettest"
)

// TestNetTest runs x/net/nettest's conformance suite for net.Conn over
// pairs dialled between the two loopback devices.
func TestNetTest(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		l := listen(t)
		c, s, err := connect(t, l)
		if err != nil {
			return nil, nil, nil, err
		}
		stop = func() {
			c.Close()
			s.Close()
			l.Close()
		}
		return c, s, stop, nil
	})
}

// TestNetTestSmallRing runs it again with the smallest ring, so that the
// rings wrap and writers wait for credits all the time.
func TestNetTestSmallRing(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		l := listen(t, WithRingSize(MinRingSize))
		c, s, err := connect(t, l, WithRingSize(MinRingSize))
		if err != nil {
			return nil, nil, nil, err
		}
		stop = func() {
			c.Close()
			s.Close()
			l.Close()
		}
		return s, c, stop, nil
	})
}
