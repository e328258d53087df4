package verbs_test

// Object lifetimes under -race: posting, polling, querying and destroying
// the same objects from many goroutines at once, and destroying an object
// while another goroutine is blocked waiting on it. Every loop is bounded in
// count and every wait in time; a waiter that a Destroy or Close does not
// wake fails the test with a message instead of hanging it.

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

const (
	lifeRounds  = 3                // fresh QPs and CQs per round
	lifeWorkers = 3                // goroutines of each kind
	lifeIters   = 20_000           // most operations one goroutine tries
	lifeWake    = 10 * time.Second // longest a waiter may stay blocked after Destroy
)

func isClosed(err error) bool { return errors.Is(err, verbs.ErrClosed) }

// waitAll waits at most d for wg, failing the test with what when it does
// not finish.
func waitAll(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still running %v later", what, d)
	}
}

// lifeCtx is a context that ends when the test does, so that goroutines a
// failing test leaves blocked still return before goleak looks.
func lifeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestLifetimeQPPostPollDestroy destroys a connected RC QP while goroutines
// post sends and receives to it, poll and wait on its CQs and query and
// modify it; then destroys the CQs under the pollers and waiters. Every
// goroutine ends with ErrClosed, and the objects refuse all use afterwards.
func TestLifetimeQPPostPollDestroy(t *testing.T) {
	a, b := newRCPair(t)
	cfg := defaultPairConfig()
	ctx := lifeCtx(t)
	for round := range lifeRounds {
		scq, err := a.ctx.CreateCQ(64, nil)
		if err != nil {
			t.Fatal(err)
		}
		rcq, err := a.ctx.CreateCQ(64, a.ch)
		if err != nil {
			t.Fatal(err)
		}
		qa, err := a.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: scq, RecvCQ: rcq, Cap: cfg.Cap})
		if err != nil {
			t.Fatal(err)
		}
		qb, err := b.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: b.scq, RecvCQ: b.rcq, Cap: cfg.Cap})
		if err != nil {
			t.Fatal(err)
		}
		ia := peerInfo{QPN: qa.QPN(), PSN: 100, GID: a.gid}
		ib := peerInfo{QPN: qb.QPN(), PSN: 200, GID: b.gid}
		if err := connectQP(qa, ia.PSN, ib, &cfg); err != nil {
			t.Fatal(err)
		}
		if err := connectQP(qb, ib.PSN, ia, &cfg); err != nil {
			t.Fatal(err)
		}

		var (
			posters, others sync.WaitGroup
			posted          atomic.Int64
			fail            = func(what string, err error) { t.Errorf("round %d: %s: %v", round, what, err) }
		)
		for w := range lifeWorkers {
			posters.Add(2)
			go func() { // RDMA WRITEs into b's buffer
				defer posters.Done()
				off := w * 64
				for i := range lifeIters {
					err := qa.PostSend(verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
						SGL: []verbs.SGE{a.mr.SGE(off, 64)}, RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()})
					switch {
					case err == nil:
						posted.Add(1)
					case isClosed(err):
						return
					case errors.Is(err, verbs.ErrNoMemory): // send queue full
						runtime.Gosched()
					default:
						fail("PostSend", err)
						return
					}
				}
			}()
			go func() { // receives nothing will consume
				defer posters.Done()
				for i := range lifeIters {
					err := qa.PostRecv(verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{a.mr.SGE(4096, 64)}})
					switch {
					case err == nil:
						posted.Add(1)
					case isClosed(err):
						return
					case errors.Is(err, verbs.ErrNoMemory): // receive queue full
						runtime.Gosched()
					default:
						fail("PostRecv", err)
						return
					}
				}
			}()
			others.Add(1)
			go func() { // pollers, until the CQs are destroyed
				defer others.Done()
				var wc [16]verbs.WC
				for range lifeIters * 4 {
					for _, cq := range []*verbs.CQ{scq, rcq} {
						if _, err := cq.Poll(wc[:]); err != nil {
							if !isClosed(err) {
								fail("Poll", err)
							}
							return
						}
						_ = cq.Cap()
					}
					runtime.Gosched()
				}
			}()
		}
		others.Add(3)
		go func() { // a blocking waiter on the send CQ
			defer others.Done()
			for range lifeIters {
				err := scq.Wait(ctx)
				if err == nil {
					var wc [16]verbs.WC
					_, err = scq.Poll(wc[:])
				}
				if err != nil {
					if !isClosed(err) {
						fail("Wait", err)
					}
					return
				}
			}
		}()
		go func() { // a completion-channel waiter on the receive CQ
			defer others.Done()
			for range lifeIters {
				if err := rcq.ReqNotify(false); err != nil {
					if !isClosed(err) {
						fail("ReqNotify", err)
					}
					return
				}
				wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				cq, err := a.ch.GetEvent(wctx)
				cancel()
				switch {
				case err == nil:
					cq.AckEvents(1)
				case errors.Is(err, context.DeadlineExceeded):
				default:
					fail("GetEvent", err)
					return
				}
			}
		}()
		go func() { // queries and a harmless modify
			defer others.Done()
			for range lifeIters {
				_, _, err := qa.Query()
				if err == nil {
					err = qa.Modify(&verbs.QPAttr{MinRNRTimer: 12}, verbs.QPAttrMinRNRTimer)
					if errors.Is(err, verbs.ErrInvalidArgument) { // not allowed in RTS: fine
						err = nil
					}
				}
				if err != nil {
					if !isClosed(err) {
						fail("Query/Modify", err)
					}
					return
				}
				_ = qa.State()
				runtime.Gosched()
			}
		}()

		// Let the workers run, then pull the QP from under them.
		for deadline := time.Now().Add(5 * time.Second); posted.Load() < 500 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if err := qa.Destroy(); err != nil {
			t.Fatalf("round %d: Destroy QP: %v", round, err)
		}
		waitAll(t, &posters, wcTimeout, "posters after QP.Destroy")
		if err := qa.PostSend(verbs.SendWR{Opcode: verbs.WRSend}); !isClosed(err) {
			t.Errorf("PostSend after Destroy: %v, want ErrClosed", err)
		}
		if err := qa.PostRecv(verbs.RecvWR{}); !isClosed(err) {
			t.Errorf("PostRecv after Destroy: %v, want ErrClosed", err)
		}
		if _, _, err := qa.Query(); !isClosed(err) {
			t.Errorf("Query after Destroy: %v, want ErrClosed", err)
		}
		if err := qa.Destroy(); !isClosed(err) {
			t.Errorf("second Destroy: %v, want ErrClosed", err)
		}
		// The CQs are free now: destroy them under the pollers and waiters.
		for _, cq := range []*verbs.CQ{scq, rcq} {
			if err := cq.Destroy(); err != nil {
				t.Fatalf("round %d: Destroy CQ after its QP: %v", round, err)
			}
		}
		waitAll(t, &others, wcTimeout, "pollers and waiters after CQ.Destroy")
		if err := qb.Destroy(); err != nil {
			t.Fatalf("round %d: Destroy peer QP: %v", round, err)
		}
	}
}

// TestLifetimeDestroyWakesWaiters checks that destroying an object wakes
// every goroutine blocked on it with ErrClosed: CQ.Wait, CompChannel.GetEvent
// and Context.GetAsyncEvent.
func TestLifetimeDestroyWakesWaiters(t *testing.T) {
	const waiters = 8
	// run starts waiters goroutines in wait, lets them block, calls destroy
	// and expects each to return ErrClosed soon.
	run := func(t *testing.T, wait func(context.Context) error, destroy func() error) {
		ctx := lifeCtx(t)
		errs := make(chan error, waiters)
		for range waiters {
			go func() { errs <- wait(ctx) }()
		}
		time.Sleep(20 * time.Millisecond) // most of them are blocked by now
		if err := destroy(); err != nil {
			t.Fatalf("destroy: %v", err)
		}
		timeout := time.After(lifeWake)
		for i := range waiters {
			select {
			case err := <-errs:
				if !isClosed(err) {
					t.Errorf("waiter %d: %v, want ErrClosed", i, err)
				}
			case <-timeout:
				t.Fatalf("%d of %d waiters still blocked %v after destroy", waiters-i, waiters, lifeWake)
			}
		}
		// A new wait on the dead object fails at once.
		if err := wait(ctx); !isClosed(err) {
			t.Errorf("wait after destroy: %v, want ErrClosed", err)
		}
	}
	open := func(t *testing.T) *verbs.Context {
		c, err := newLoopbackDevice(t, "wake").Open()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for range lifeRounds {
		t.Run("CQ.Wait", func(t *testing.T) {
			c := open(t)
			cq, err := c.CreateCQ(16, nil)
			if err != nil {
				t.Fatal(err)
			}
			run(t, cq.Wait, cq.Destroy)
		})
		t.Run("CompChannel.GetEvent", func(t *testing.T) {
			c := open(t)
			ch, err := c.CreateCompChannel()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := c.CreateCQ(16, ch)
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Destroy()
			if err := cq.ReqNotify(false); err != nil {
				t.Fatal(err)
			}
			run(t, func(ctx context.Context) error { _, err := ch.GetEvent(ctx); return err }, ch.Destroy)
		})
		t.Run("GetAsyncEvent", func(t *testing.T) {
			c := open(t)
			run(t, func(ctx context.Context) error { _, err := c.GetAsyncEvent(ctx); return err }, c.Close)
		})
	}
}

// TestLifetimeDestroyOnce destroys each kind of object from many goroutines
// at once: exactly one call succeeds, the others report ErrClosed.
func TestLifetimeDestroyOnce(t *testing.T) {
	const n = 8
	e := newEnd(t, "once", ptr(defaultPairConfig()))
	once := func(what string, destroy func() error) {
		t.Helper()
		var ok, closed atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				switch err := destroy(); {
				case err == nil:
					ok.Add(1)
				case isClosed(err):
					closed.Add(1)
				default:
					t.Errorf("%s: %v", what, err)
				}
			}()
		}
		close(start)
		waitAll(t, &wg, wcTimeout, what)
		if ok.Load() != 1 || closed.Load() != n-1 {
			t.Errorf("%s from %d goroutines: %d succeeded, %d ErrClosed; want 1 and %d", what, n, ok.Load(), closed.Load(), n-1)
		}
	}
	for range lifeRounds {
		pd, err := e.ctx.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		mr, err := pd.RegMR(make([]byte, 4096), allAccess|verbs.AccessMWBind)
		if err != nil {
			t.Fatal(err)
		}
		mw, err := pd.AllocMW(verbs.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		ah, err := pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: e.gid, SGIDIndex: 1, HopLimit: 1}})
		if err != nil {
			t.Fatal(err)
		}
		srq, err := pd.CreateSRQ(verbs.SRQAttr{MaxWR: 16, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		cq, err := e.ctx.CreateCQ(16, nil)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: cq, RecvCQ: cq, SRQ: srq,
			Cap: verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		once("QP.Destroy", qp.Destroy)
		once("SRQ.Destroy", srq.Destroy)
		once("CQ.Destroy", cq.Destroy)
		once("AH.Destroy", ah.Destroy)
		once("MW.Dealloc", mw.Dealloc)
		once("MR.Dereg", mr.Dereg)
		once("PD.Dealloc", pd.Dealloc)
	}
}

func ptr[T any](v T) *T { return &v }

// TestLifetimeSRQPostDestroy destroys an SRQ while goroutines post to,
// query and modify it.
func TestLifetimeSRQPostDestroy(t *testing.T) {
	e := newEnd(t, "srq", ptr(defaultPairConfig()))
	for round := range lifeRounds {
		srq, err := e.pd.CreateSRQ(verbs.SRQAttr{MaxWR: 1024, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var posted atomic.Int64
		for range lifeWorkers {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range lifeIters {
					err := srq.PostRecv(verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{e.mr.SGE(0, 64)}})
					switch {
					case err == nil:
						posted.Add(1)
					case isClosed(err):
						return
					case errors.Is(err, verbs.ErrNoMemory): // full: nothing consumes
						runtime.Gosched()
					default:
						t.Errorf("round %d: SRQ.PostRecv: %v", round, err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				for range lifeIters {
					_, err := srq.Query()
					if err == nil {
						err = srq.Modify(verbs.SRQAttr{SRQLimit: 8}, verbs.SRQLimit)
					}
					_ = srq.Len()
					if err != nil {
						if !isClosed(err) {
							t.Errorf("round %d: SRQ.Query/Modify: %v", round, err)
						}
						return
					}
					runtime.Gosched()
				}
			}()
		}
		for deadline := time.Now().Add(5 * time.Second); posted.Load() < 200 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if err := srq.Destroy(); err != nil {
			t.Fatalf("round %d: SRQ.Destroy: %v", round, err)
		}
		waitAll(t, &wg, wcTimeout, "SRQ users after Destroy")
	}
}

// TestLifetimeContextClose closes a context while goroutines query it and
// create and destroy objects on it.
func TestLifetimeContextClose(t *testing.T) {
	for round := range lifeRounds {
		c, err := newLoopbackDevice(t, "close").Open()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var ops atomic.Int64
		for range lifeWorkers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range lifeIters / 10 {
					err := func() error {
						if _, err := c.QueryDevice(); err != nil {
							return err
						}
						if _, err := c.QueryGID(1, 1); err != nil {
							return err
						}
						pd, err := c.AllocPD()
						if err != nil {
							return err
						}
						defer pd.Dealloc()
						cq, err := c.CreateCQ(4, nil)
						if err != nil {
							return err
						}
						return cq.Destroy()
					}()
					if err != nil {
						if !isClosed(err) {
							t.Errorf("round %d: %v", round, err)
						}
						return
					}
					ops.Add(1)
				}
			}()
		}
		for deadline := time.Now().Add(5 * time.Second); ops.Load() < 50 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		waitAll(t, &wg, wcTimeout, "context users after Close")
		if _, err := c.AllocPD(); !isClosed(err) {
			t.Errorf("AllocPD after Close: %v, want ErrClosed", err)
		}
	}
}

// TestLifetimeCQResize resizes a CQ and reads its capacity while the device
// pushes completions into it and goroutines poll it.
func TestLifetimeCQResize(t *testing.T) {
	a, b := newRCPair(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(3)
	go func() { // traffic: signaled WRITEs, at most 32 outstanding
		defer wg.Done()
		for i := range lifeIters / 4 {
			select {
			case <-stop:
				return
			default:
			}
			err := a.qp.PostSend(verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			if err != nil && !errors.Is(err, verbs.ErrNoMemory) {
				t.Errorf("PostSend: %v", err)
				return
			}
			if err != nil {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	go func() { // poller
		defer wg.Done()
		var wc [8]verbs.WC
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := a.scq.Poll(wc[:]); err != nil {
				t.Errorf("Poll: %v", err)
				return
			}
			runtime.Gosched()
		}
	}()
	go func() { // resizer
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := a.scq.Resize(256 + 64*(i%4))
			if err != nil && !errors.Is(err, verbs.ErrInvalidArgument) { // too many queued: fine
				t.Errorf("Resize: %v", err)
				return
			}
			if c := a.scq.Cap(); c < 1 {
				t.Errorf("Cap %d", c)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	waitAll(t, &wg, wcTimeout, "CQ resize workers")
}
