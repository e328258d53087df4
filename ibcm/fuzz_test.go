package ibcm_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/clock"
)

type nullTransport struct{ n int }

func (t *nullTransport) SendMAD(mad.Address, mad.MAD) error { t.n++; return nil }

// FuzzManager: hostile CM MADs — any attribute, any IDs, any lengths and
// field values — delivered to a manager with a listener, an outgoing
// connection and an accepted one never panic, and whatever the manager
// does afterwards (timers, user calls) stays sane.
func FuzzManager(f *testing.F) {
	for _, a := range []uint16{mad.AttrREQ, mad.AttrMRA, mad.AttrREJ, mad.AttrREP, mad.AttrRTU, mad.AttrDREQ,
		mad.AttrDREP, mad.AttrSIDRREQ, mad.AttrSIDRREP, mad.AttrLAP, 0x77} {
		m := mad.NewCM(a, 1)
		m[24], m[28] = 1, 1
		f.Add([]byte(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := clock.NewFake(time.Unix(0, 0))
		tr := &nullTransport{}
		a := mad.NewAgent(mad.Config{Transport: tr, Clock: c})
		m, err := ibcm.New(a, ibcm.Config{GUID: 7})
		if err != nil {
			t.Fatal(err)
		}
		var accepted []*ibcm.Conn
		h := func(c *ibcm.Conn, ev *ibcm.Event) error {
			switch ev.Type {
			case ibcm.EventREQReceived:
				accepted = append(accepted, c)
				return c.Accept(&ibcm.AcceptParams{QPN: 5})
			case ibcm.EventREPReceived:
				return c.SendRTU(nil)
			case ibcm.EventDREQReceived:
				return c.SendDREP(nil)
			case ibcm.EventSIDRREQReceived:
				return c.SIDRReply(&ibcm.SIDRReply{QPN: 5})
			}
			return nil
		}
		if _, err := m.Listen(0x1061D2F, h); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Listen(0, h); err != nil {
			t.Fatal(err)
		}
		out, err := m.Connect(&ibcm.ConnectParams{Path: ibcm.Path{Local: netip.MustParseAddr("127.0.0.1"),
			Remote: netip.MustParseAddr("127.0.0.2"), PacketLifeTime: 16}, ServiceID: 1, QPN: 9,
			RemoteCMResponseTimeout: 20, MaxCMRetries: 2}, h)
		if err != nil {
			t.Fatal(err)
		}
		from := mad.Address{Remote: netip.MustParseAddr("127.0.0.2"), Local: netip.MustParseAddr("127.0.0.1"), QPN: 1}
		// The fuzzed MAD, then the same aimed at the outgoing connection.
		a.Deliver(c.Now(), b, from)
		if len(b) >= mad.Size {
			x := append([]byte(nil), b[:mad.Size]...)
			x[0], x[1], x[2], x[3] = 1, mad.ClassCM, 2, mad.MethodSend
			copy(x[28:32], []byte{byte(out.LocalID() >> 24), byte(out.LocalID() >> 16), byte(out.LocalID() >> 8), byte(out.LocalID())})
			a.Deliver(c.Now(), x, from)
			a.Deliver(c.Now(), x, from) // and its duplicate
		}
		for i := 0; i < 100; i++ {
			next, ok := c.Next()
			if !ok {
				break
			}
			c.AdvanceTo(next)
		}
		for _, x := range append(accepted, out) {
			_ = x.Disconnect(nil)
			x.Destroy()
		}
		m.Close()
	})
}
