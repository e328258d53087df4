package ibcm_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/link/memlink"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/gsi/gsisim"
)

// Deterministic simulation: clients on two nodes open many connections to
// a server node over a network that drops, duplicates, reorders and delays
// MADs, on a fake clock. The server accepts, accepts late (provoking
// MRAs), rejects, or drops requests; established connections are closed by
// either side. Every run must end quiet: every connection on every node
// finished (IDLE, its user gone), the managers' tables empty, no passive
// side established without its active side, and each side's events a
// sequence Linux could produce. A failure names its seed:
//
//	go test ./ibcm -run TestSim -sim.seed=N -v

var (
	simSeed  = flag.Uint64("sim.seed", 0, "CM simulation: run only this seed")
	simSeeds = flag.Int("sim.seeds", 30, "CM simulation: number of seeds")
)

type simConn struct {
	name        string
	events      []string
	established bool // reached ESTABLISHED (RTU sent / received, or USER_ESTABLISHED)
	done        bool // destroyed by its user
	c           *ibcm.Conn
}

func TestSim(t *testing.T) {
	seeds := []uint64{}
	if *simSeed != 0 {
		seeds = append(seeds, *simSeed)
	} else {
		for s := 1; s <= *simSeeds; s++ {
			seeds = append(seeds, uint64(s))
		}
	}
	for _, seed := range seeds {
		if err := runSim(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func runSim(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 42))
	f := memlink.Faults{Drop: 0.15 * rng.Float64(), Duplicate: 0.1 * rng.Float64(), Reorder: 0.1 * rng.Float64(),
		Delay: time.Duration(rng.IntN(5)+1) * time.Millisecond, Jitter: time.Duration(rng.IntN(20)) * time.Millisecond}
	s := gsisim.New(int64(seed), f)
	srv := s.Add(netip.MustParseAddr("127.0.0.10"), 0x10)
	clients := []*gsisim.Node{s.Add(netip.MustParseAddr("127.0.0.11"), 0x11), s.Add(netip.MustParseAddr("127.0.0.12"), 0x12)}
	var all []*simConn
	var trace []string
	s.Trace = func(at time.Time, from, to netip.Addr, m mad.MAD) {
		if len(trace) < 20000 {
			trace = append(trace, fmt.Sprintf("%v %s>%s %s", at.Sub(time.Unix(1_000_000, 0)), from, to, mad.CMAttrName(m.AttrID())))
		}
	}
	after := func(d time.Duration, fn func()) { s.Clock.AfterFunc(d, fn) }
	finish := func(sc *simConn) {
		if !sc.done {
			sc.done = true
			sc.c.Destroy()
		}
	}
	// handler is both sides' user: RTU on REP, DREP on DREQ, destroy once
	// the connection is over.
	handler := func(sc *simConn) ibcm.Handler {
		return func(c *ibcm.Conn, ev *ibcm.Event) (err error) {
			sc.c = c
			sc.events = append(sc.events, ev.Type.String())
			defer func() {
				if err == nil && c.State() == ibcm.StateIdle {
					finish(sc)
				}
			}()
			switch ev.Type {
			case ibcm.EventREPReceived:
				if rng.IntN(20) == 0 {
					return c.Reject(mad.RejConsumerDefined, nil, nil) // QP setup "failed"
				}
				if err := c.SendRTU(nil); err != nil {
					return err
				}
				sc.established = true
				after(time.Duration(rng.IntN(3000))*time.Millisecond, func() {
					if c.State() == ibcm.StateEstablished {
						_ = c.Disconnect(nil)
					}
				})
			case ibcm.EventRTUReceived, ibcm.EventUserEstablished:
				// The server disconnects too, later: what ends a
				// connection whose peer's DREQs were all lost (a real
				// application learns it from its QP's errors).
				sc.established = true
				after(time.Duration(rng.IntN(10000))*time.Millisecond, func() {
					if c.State() == ibcm.StateEstablished {
						_ = c.Disconnect(nil)
					}
				})
			case ibcm.EventDREQReceived:
				return c.SendDREP(nil)
			}
			return nil
		}
	}
	qpn := uint32(0x1000)
	_, err := srv.Port.CM().Listen(service, func(c *ibcm.Conn, ev *ibcm.Event) error {
		sc := &simConn{name: fmt.Sprintf("srv/%x", c.LocalID()), c: c}
		all = append(all, sc)
		sc.events = append(sc.events, ev.Type.String())
		c.SetHandler(handler(sc))
		qpn++
		ap := *accept
		ap.QPN = qpn
		switch r := rng.IntN(20); {
		case r < 12:
			return c.Accept(&ap)
		case r < 16:
			after(time.Duration(rng.IntN(8000))*time.Millisecond, func() {
				if c.State() == ibcm.StateMRAREQSent {
					_ = c.Accept(&ap)
				}
			})
		case r < 18:
			err := c.Reject(mad.RejConsumerDefined, nil, []byte("no"))
			finish(sc)
			return err
		default:
			sc.done = true
			return ibcm.ErrDrop
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := 20 + rng.IntN(20)
	for i := range n {
		cl := clients[i%2]
		sc := &simConn{name: fmt.Sprintf("cli%d", i)}
		all = append(all, sc)
		after(time.Duration(rng.IntN(2000))*time.Millisecond, func() {
			p := params(uint32(0x100 + i))
			p.Path.Local, p.Path.Remote = cl.Addr, srv.Addr
			p.MaxCMRetries = uint8(1 + rng.IntN(5))
			p.RemoteCMResponseTimeout = uint8(14 + rng.IntN(6))
			p.LocalCMResponseTimeout = p.RemoteCMResponseTimeout
			c, err := cl.Port.CM().Connect(p, handler(sc))
			if err != nil {
				panic(err)
			}
			sc.c = c
			// Some clients give up while connecting.
			if rng.IntN(15) == 0 {
				after(time.Duration(rng.IntN(500))*time.Millisecond, func() {
					if st := c.State(); st == ibcm.StateREQSent || st == ibcm.StateMRAREQRcvd {
						finish(sc)
					}
				})
			}
		})
	}
	// Run until nothing is left to do (bounded in steps and virtual time).
	const horizon = 2 * time.Hour
	quiet := s.Run(horizon, 2_000_000, func() bool {
		_, d := s.Net.NextDelivery()
		_, tm := s.Clock.Next()
		return !d && !tm
	})
	dump := func() string {
		var b strings.Builder
		for _, sc := range all {
			st := "-"
			if sc.c != nil {
				st = sc.c.State().String()
			}
			fmt.Fprintf(&b, "  %s state %s done %v events %v\n", sc.name, st, sc.done, sc.events)
		}
		if len(trace) > 60 {
			trace = trace[len(trace)-60:]
		}
		fmt.Fprintf(&b, "  faults %+v\n  last MADs:\n    %s", f, strings.Join(trace, "\n    "))
		return b.String()
	}
	if !quiet {
		return fmt.Errorf("not quiet after %v of virtual time\n%s", horizon, dump())
	}
	for _, sc := range all {
		if sc.c == nil {
			return fmt.Errorf("%s never started\n%s", sc.name, dump())
		}
		if !sc.done {
			// Only a connection that is over may be left: a REJ that
			// reached an idle id, for instance, is fine once IDLE.
			if st := sc.c.State(); st != ibcm.StateIdle {
				return fmt.Errorf("%s left in %v (half-open)\n%s", sc.name, st, dump())
			}
			sc.c.Destroy()
		}
		if err := validSequence(sc.events); err != nil {
			return fmt.Errorf("%s: %v\n%s", sc.name, err, dump())
		}
	}
	// A passive side established only after its active side sent the RTU.
	byLocal := map[uint32]*simConn{}
	for _, sc := range all {
		if strings.HasPrefix(sc.name, "cli") {
			byLocal[sc.c.LocalID()] = sc
		}
	}
	for _, sc := range all {
		if strings.HasPrefix(sc.name, "srv") && sc.established {
			if cl := byLocal[sc.c.RemoteID()]; cl == nil || !cl.established {
				return fmt.Errorf("%s established without its client\n%s", sc.name, dump())
			}
		}
	}
	for _, nd := range append(clients, srv) {
		if k := nd.Port.CM().Conns(); k != 0 {
			return fmt.Errorf("%s still tracks %d connections\n%s", nd.Addr, k, dump())
		}
	}
	return nil
}

// validSequence checks a connection's events against what the CM can
// deliver: set-up events, then at most one way out of set-up, then
// teardown, TIMEWAIT_EXIT last.
func validSequence(evs []string) error {
	seq := strings.Join(evs, " ")
	terminal := map[string]bool{"REQ_ERROR": true, "REP_ERROR": true, "TIMEWAIT_EXIT": true, "REJ_RECEIVED": true, "DREQ_ERROR": true}
	for i, e := range evs {
		if e == "TIMEWAIT_EXIT" && i != len(evs)-1 {
			return fmt.Errorf("events after TIMEWAIT_EXIT: %s", seq)
		}
		if (e == "REQ_ERROR" || e == "REP_ERROR") && i != len(evs)-1 {
			return fmt.Errorf("events after %s: %s", e, seq)
		}
	}
	count := func(x string) int { return strings.Count(" "+seq+" ", " "+x+" ") }
	for _, once := range []string{"REQ_RECEIVED", "REP_RECEIVED", "RTU_RECEIVED", "DREQ_RECEIVED", "DREP_RECEIVED", "TIMEWAIT_EXIT"} {
		if count(once) > 1 {
			return fmt.Errorf("%s twice: %s", once, seq)
		}
	}
	_ = terminal
	return nil
}
