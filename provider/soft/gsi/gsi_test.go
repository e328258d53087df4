package gsi_test

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link/memlink"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/gsi"
	"github.com/rdma-go/rdma-go/provider/soft/gsi/gsisim"
)

var (
	a4, b4 = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	a6, b6 = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
)

// TestPerfMgtOverQP1: a PerfMgt Get travels from one device's QP1 to the
// other's, is answered by its responder and matched to the request; an
// unhandled class gets status 0x000C; over IPv4 and IPv6.
func TestPerfMgtOverQP1(t *testing.T) {
	for _, fam := range [][2]netip.Addr{{a4, b4}, {a6, b6}} {
		s := gsisim.New(1, memlink.Faults{Delay: time.Millisecond})
		na, nb := s.Add(fam[0], 1), s.Add(fam[1], 2)
		if _, err := mad.ServePerfMgt(nb.Port.Agent(), mad.PerfMgtConfig{Counters: func() mad.PortCounterValues { return gsi.Counters(nb.Host) }}); err != nil {
			t.Fatal(err)
		}
		reg, err := na.Port.Agent().Register(mad.ClassPerfMgt, 1, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ask := func(class uint8, attr uint16) *mad.Received {
			t.Helper()
			m := mad.New(class, 1, mad.MethodGet, attr, 0)
			m.PerfAttr()[1] = 1
			var done atomic.Bool
			var got *mad.Received
			var gerr error
			go func() {
				got, gerr = reg.Request(context.Background(), mad.Address{Remote: nb.Addr, QPN: 1}, m, mad.RequestOptions{Timeout: time.Second})
				done.Store(true)
			}()
			for i := 0; i < 100000 && !done.Load(); i++ {
				if !s.Step(s.Clock.Now().Add(10 * time.Second)) {
					time.Sleep(10 * time.Microsecond)
				}
			}
			if gerr != nil {
				t.Fatal(gerr)
			}
			return got
		}
		r := ask(mad.ClassPerfMgt, mad.AttrPortCounters)
		if r.MAD.Status() != 0 || r.From.Remote != nb.Addr || r.From.Local != na.Addr || r.From.QPN != 1 {
			t.Fatalf("response %v from %+v", r.MAD, r.From)
		}
		if pc := mad.PortCounters(r.MAD.PerfAttr()); pc.PortRcvPkts() != 1 || pc.PortRcvData() != 280/4 {
			t.Fatalf("counters: rcv pkts %d data %d", pc.PortRcvPkts(), pc.PortRcvData())
		}
		reg.Unregister()
		reg, _ = na.Port.Agent().Register(mad.ClassDevMgt, 1, nil, nil)
		if r := ask(mad.ClassDevMgt, 0x10); r.MAD.Status() != mad.StatusMethodAttrUnsupported {
			t.Fatalf("DevMgt Get: status %#x", r.MAD.Status())
		}
		na.Port.Close()
		nb.Port.Close()
	}
}

// TestProgramSendsGoOutAtOnce: a MAD that a program sends while QP1's Poll
// runs (here between two deliveries, as a DREQ from Disconnect can) is on
// the wire when SendMAD returns, after the replies Poll had queued; only
// what a delivery itself sends waits for the end of Poll. A Poll that held
// everything back lost a DREQ when the device closed right after it.
func TestProgramSendsGoOutAtOnce(t *testing.T) {
	s := gsisim.New(1, memlink.Faults{Delay: time.Millisecond})
	na, nb := s.Add(a4, 1), s.Add(b4, 2)
	if _, err := mad.ServePerfMgt(nb.Port.Agent(), mad.PerfMgtConfig{Counters: func() mad.PortCounterValues { return gsi.Counters(nb.Host) }}); err != nil {
		t.Fatal(err)
	}
	const reqTID, ownTID = 0x1111, 0x2222
	var sent []uint64 // TIDs of the MADs B sent, in order
	s.Trace = func(_ time.Time, from, _ netip.Addr, m mad.MAD) {
		if from == nb.Addr {
			sent = append(sent, m.TID())
		}
	}
	hooked, seen := false, []uint64(nil)
	gsi.SetTestHookDelivered(func() {
		if hooked {
			return
		}
		hooked = true
		m := mad.New(mad.ClassPerfMgt, 1, mad.MethodTrap, 0x1, ownTID)
		if err := nb.Port.SendMAD(mad.Address{Remote: na.Addr, QPN: 1}, m); err != nil {
			t.Errorf("SendMAD during Poll: %v", err)
		}
		seen = append(seen, sent...)
	})
	defer gsi.SetTestHookDelivered(nil)
	get := mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrPortCounters, reqTID)
	get.PerfAttr()[1] = 1
	if err := na.Port.SendMAD(mad.Address{Remote: nb.Addr, QPN: 1}, get); err != nil {
		t.Fatal(err)
	}
	s.Run(time.Second, 100, func() bool { return hooked })
	if !hooked {
		t.Fatal("B's Poll never delivered the Get")
	}
	// The answer to the Get, queued while it was delivered, then the
	// program's own MAD: both out before SendMAD returned.
	if len(seen) != 2 || seen[0] != reqTID || seen[1] != ownTID {
		t.Fatalf("B had sent TIDs %#x when SendMAD returned in Poll; want the answer %#x, then %#x", seen, reqTID, ownTID)
	}
	na.Port.Close()
	nb.Port.Close()
}
