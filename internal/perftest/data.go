package perftest

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// stallTimeout ends a run in which nothing completes for this long
// (perftest's check_alive gives up after 120 s without a message).
const stallTimeout = 120 * time.Second

// Duration-mode states (perftest's START_STATE … END_STATE).
const (
	stStart = iota
	stSample
	stStopSample
	stEnd
)

// durClock is perftest's SIGALRM state machine as deadlines: warm up for
// the margin, sample until duration−margin, run on to the duration.
type durClock struct {
	on      bool
	started bool
	base    int64
	margin  int64
	total   int64
	state   int
	t0, t1  int64
	iters   uint64
}

func newDurClock(c *Config) *durClock {
	return &durClock{on: c.TestDur, margin: int64(c.Margin) * 1e9, total: int64(c.Duration) * 1e9}
}

func (d *durClock) start() {
	if d.on && !d.started {
		d.started, d.base = true, nowNS()
		d.tick()
	}
}

// tick advances the state to the current time. It inlines into the data
// loops (which call it at every turn, mostly with the clock off); the
// work is in advance.
func (d *durClock) tick() {
	if d.on && d.started {
		d.advance()
	}
}

func (d *durClock) advance() {
	now := nowNS()
	for {
		switch {
		case d.state == stStart && now >= d.base+d.margin:
			d.state, d.t0 = stSample, now
		case d.state == stSample && now >= d.base+d.total-d.margin:
			d.state, d.t1 = stStopSample, now
		case d.state == stStopSample && now >= d.base+d.total:
			d.state = stEnd
		default:
			return
		}
	}
}

// deadline is when the state next changes (zero when off).
func (d *durClock) deadline() time.Time {
	if !d.on || !d.started {
		return time.Time{}
	}
	return d.next()
}

func (d *durClock) next() time.Time {
	var at int64
	switch d.state {
	case stStart:
		at = d.base + d.margin
	case stSample:
		at = d.base + d.total - d.margin
	case stStopSample:
		at = d.base + d.total
	default:
		return time.Time{}
	}
	return monoBase.Add(time.Duration(at))
}

func (d *durClock) ended() bool { return d.on && d.state == stEnd }

func (d *durClock) sampling() bool { return d.on && d.state == stSample }

// durResult is a duration run's sample window.
type durResult struct {
	iters   uint64
	elapsed int64
}

func (d *durClock) result() *durResult {
	return &durResult{iters: d.iters, elapsed: d.t1 - d.t0}
}

// poll returns at least one completion of cq, or 0 once until has passed
// (duration mode). It polls without pause, as perftest does (on a soft
// device blocking after a while without a completion, see package spin),
// or with -e blocks on the CQ's events.
func (s *session) poll(cq *verbs.CQ, wc []verbs.WC, until time.Time) (int, error) {
	sp := s.spinner
	var since time.Time
	for {
		n, err := cq.Poll(wc)
		if err != nil || n > 0 {
			return n, err
		}
		if !s.cfg.Events {
			// As perftest: poll without pause (-e blocks instead).
			if !sp.Empty() {
				continue
			}
			now := stampTime()
			if since.IsZero() {
				since = now
			}
			if !until.IsZero() && !now.Before(until) {
				return 0, nil
			}
			if err := s.stopped(); err != nil {
				return 0, err
			}
			s.watchPeer()
			if left, gone := s.peerLeft(); gone && left <= 0 {
				return 0, s.errPeerGone()
			}
			if now.Sub(since) >= stallTimeout {
				return 0, fmt.Errorf(" No completion for %v: the %s stopped answering", stallTimeout, s.peerRole())
			}
			if !sp.Block(now) {
				continue
			}
			sp.Reset()
		}
		// With -e, or on a soft device after a while without a
		// completion: block on the CQ.
		if !until.IsZero() && !stampTime().Before(until) {
			return 0, nil
		}
		wait := stallTimeout
		if !until.IsZero() {
			wait = min(wait, until.Sub(stampTime()))
		}
		s.watchPeer()
		base := s.peerCtx // wakes the wait when the peer goes
		if left, gone := s.peerLeft(); gone {
			if left <= 0 {
				return 0, s.errPeerGone()
			}
			base, wait = s.ctx, min(wait, left)
		}
		ctx, cancel := context.WithTimeout(base, wait)
		err = cq.Wait(ctx)
		cancel()
		if err != nil {
			if err := s.stopped(); err != nil {
				return 0, err
			}
			if _, gone := s.peerLeft(); gone {
				continue // poll once more, then wait out the grace
			}
			if !until.IsZero() && !stampTime().Before(until) {
				return 0, nil
			}
			return 0, fmt.Errorf(" No completion for %v: the %s stopped answering", stallTimeout, s.peerRole())
		}
	}
}

// errSend and errRecv are perftest's reports of a completion in error,
// followed by a line that says what the status means for this run.
func (s *session) errSend(wc *verbs.WC, scnt, ccnt uint64) error {
	return errQuiet(fmt.Sprintf(" Completion with error at client\n Failed status %d: wr_id %d syndrom 0x%x\nscnt=%d, ccnt=%d%s",
		int(wc.Status), int(wc.WRID), wc.VendorErr, scnt, ccnt, s.explain(wc.Status)))
}

func (s *session) errRecv(wc *verbs.WC, rcnt uint64) error {
	return errQuiet(fmt.Sprintf(" Completion with error at server\n Failed status %d: wr_id %d syndrom 0x%x\n rcnt=%d%s",
		int(wc.Status), int(wc.WRID), wc.VendorErr, rcnt, s.explain(wc.Status)))
}

// explain says, on a line of its own, what a completion status tells about
// the run: above all which side stopped answering.
func (s *session) explain(st verbs.WCStatus) string {
	peer := s.peerRole()
	switch st {
	case verbs.WCRetryExcErr:
		return fmt.Sprintf("\n The %s stopped answering: no acknowledgement after every retry (%s)", peer, st)
	case verbs.WCRNRRetryExcErr:
		return fmt.Sprintf("\n The %s had no receive posted after every RNR retry (%s)", peer, st)
	case verbs.WCRemAccessErr, verbs.WCRemInvReqErr, verbs.WCRemOpErr:
		return fmt.Sprintf("\n The %s refused the request (%s)", peer, st)
	case verbs.WCWRFlushErr:
		// Flushed because the QP failed: the QP's counters say why.
		for _, qp := range s.qps {
			c := qp.Counters()
			switch {
			case c.RetryExceeded > 0:
				return s.explain(verbs.WCRetryExcErr)
			case c.RNRRetryExceeded > 0:
				return s.explain(verbs.WCRNRRetryExcErr)
			}
		}
		return fmt.Sprintf("\n The QP went to the error state after an earlier error (%s)", st)
	}
	return fmt.Sprintf("\n (%s)", st)
}

// sendState is one QP's work requests (ctx_set_send_wqes).
type sendState struct {
	wrs        []verbs.SendWR
	sgl        []verbs.SGE
	localBase  uint64
	remoteBase uint64
}

// setSendWQEs builds each QP's post list.
func (s *session) setSendWQEs() []*sendState {
	c := s.cfg
	t := c.Test
	out := make([]*sendState, len(s.qps))
	step := inc(s.size, s.cacheLine)
	wrapEvery := uint64(s.cycle) / step
	stepAddrs := t.Kind == BW && s.size <= uint64(s.cycle/2)
	for i := range s.qps {
		mr, _, local, _ := s.mrFor(i)
		st := &sendState{wrs: make([]verbs.SendWR, c.PostList), sgl: make([]verbs.SGE, c.PostList),
			localBase: mr.Addr() + local, remoteBase: s.rem[i].VAddr}
		length := uint32(s.size)
		for j := 0; j < c.PostList; j++ {
			st.sgl[j] = verbs.SGE{Addr: st.localBase, Length: length, LKey: mr.LKey()}
			w := &st.wrs[j]
			w.ID = uint64(i)
			w.SGL = st.sgl[j : j+1]
			if (j+1)%c.CQMod == 0 {
				w.Flags = verbs.SendSignaled
			}
			switch t.Verb {
			case Send:
				w.Opcode = verbs.WRSend
				if c.Conn == UD {
					w.AH, w.RemoteQPN, w.RemoteQKey = s.ahs[i], s.rem[i].QPN, udQKey
				}
			case Write:
				w.Opcode = verbs.WRRDMAWrite
			case Read:
				w.Opcode = verbs.WRRDMARead
			case Atomic:
				w.Opcode = verbs.WRAtomicFetchAndAdd
				w.CompareAdd = 1
				if c.AtomicType == CmpAndSwap {
					w.Opcode, w.CompareAdd, w.Swap = verbs.WRAtomicCmpAndSwp, 1, 0
				}
			}
			w.RemoteAddr, w.RKey = st.remoteBase, s.rem[i].RKey
			if j > 0 {
				st.sgl[j].Addr = st.sgl[j-1].Addr
				w.RemoteAddr = st.wrs[j-1].RemoteAddr
				if stepAddrs || (t.Verb == Atomic && t.Kind == BW) {
					if stepAddrs {
						st.sgl[j].Addr = stepAddr(st.sgl[j].Addr, step, uint64(j-1), wrapEvery, st.localBase)
					}
					if t.Verb != Send {
						w.RemoteAddr = stepAddr(w.RemoteAddr, step, uint64(j-1), wrapEvery, st.remoteBase)
					}
				}
			}
		}
		out[i] = st
	}
	return out
}

// stepAddr is increase_loc_addr / increase_rem_addr: the next message's
// address, wrapping to base every cycle buffer.
func stepAddr(addr, step, cnt, wrapEvery, base uint64) uint64 {
	addr += step
	if wrapEvery == 0 || (cnt+1)%wrapEvery == 0 {
		return base
	}
	return addr
}

// recvState is one QP's receive list (ctx_set_recv_wqes).
type recvState struct {
	wrs    []verbs.RecvWR
	sgl    []verbs.SGE
	base   uint64
	posted uint64
	unused uint64
}

// postRecvs posts every QP's initial receives.
func (s *session) postRecvs() error {
	c := s.cfg
	perQP := c.RxDepth / c.RecvPost
	s.recv = make([]*recvState, len(s.qps))
	step := inc(s.size, s.cacheLine)
	wrapEvery := uint64(s.cycle) / step
	length := uint32(s.size)
	if c.Conn == UD {
		length += udAddition
	}
	stepAddrs := c.Test.Kind == BW && s.size <= uint64(s.cycle/2)
	for i, qp := range s.qps {
		mr, _, _, remote := s.mrFor(i)
		rs := &recvState{wrs: make([]verbs.RecvWR, c.RecvPost), sgl: make([]verbs.SGE, c.RecvPost),
			base: mr.Addr() + remote}
		if c.Conn == UD {
			rs.base += uint64(s.cacheLine - udAddition)
		}
		for j := range rs.wrs {
			rs.sgl[j] = verbs.SGE{Addr: rs.base, Length: length, LKey: mr.LKey()}
			if j > 0 {
				rs.sgl[j].Addr = rs.sgl[j-1].Addr
				if stepAddrs {
					rs.sgl[j].Addr = stepAddr(rs.sgl[j].Addr, step, uint64(j), wrapEvery, rs.base)
				}
			}
			rs.wrs[j] = verbs.RecvWR{ID: uint64(i), SGL: rs.sgl[j : j+1]}
		}
		for j := 0; j < perQP; j++ {
			if err := qp.PostRecv(rs.wrs...); err != nil {
				return fmt.Errorf("Couldn't post recv Qp = %d: counter=%d: %v", i, j, err)
			}
			if c.RecvPost == 1 && stepAddrs {
				rs.sgl[0].Addr = stepAddr(rs.sgl[0].Addr, step, uint64(j), wrapEvery, rs.base)
			}
		}
		rs.sgl[0].Addr = rs.base
		rs.posted = uint64(perQP * c.RecvPost)
		s.recv[i] = rs
	}
	return nil
}

// repost re-posts QP q's receive list after a completion, as the server
// loops do.
func (s *session) repost(q int, dur bool) error {
	c := s.cfg
	rs := s.recv[q]
	rs.unused++
	if (dur || rs.posted+uint64(c.RecvPost) <= uint64(c.Iters)) && rs.unused >= uint64(c.RecvPost) {
		if err := s.qps[q].PostRecv(rs.wrs...); err != nil {
			return fmt.Errorf("Couldn't post recv Qp=%d: %v", q, err)
		}
		rs.unused -= uint64(c.RecvPost)
		rs.posted += uint64(c.RecvPost)
		sz := s.size
		if c.Conn == UD && !c.Client {
			sz += udAddition
		}
		if sz <= uint64(s.cycle/2) && c.RecvPost == 1 {
			step := inc(s.size, s.cacheLine)
			rs.sgl[0].Addr = stepAddr(rs.sgl[0].Addr, step, rs.posted, uint64(s.cycle)/step, rs.base)
		}
	}
	return nil
}

// newTiming allocates tposted/tcompleted.
func (s *session) newTiming(n uint64) *BWTiming {
	if s.cfg.NoPeak || n == 0 {
		return &BWTiming{Posted: make([]int64, 1), Completed: make([]int64, 1), Iters: n}
	}
	return &BWTiming{Posted: make([]int64, n), Completed: make([]int64, n), Iters: n}
}

// runBWClient is run_iter_bw: keep up to tx_depth messages in flight per
// QP, signalling one in cq_mod, until every QP has sent iters.
func (s *session) runBWClient() (*BWTiming, error) {
	c := s.cfg
	bw := s.newBWSender(16)
	bw.clk.start()
	if !bw.clk.on && c.NoPeak {
		bw.tm.Posted[0] = nowNS()
	}
	for bw.totS < bw.tot || bw.totC < bw.tot || (bw.clk.on && !bw.clk.ended()) {
		for q := range s.qps {
			if err := bw.post(q, c.Test.Verb != Send); err != nil {
				return nil, err
			}
		}
		if bw.totC < bw.tot || (bw.clk.on && bw.totC < bw.totS) {
			n, err := s.poll(s.sendCQ, bw.wc, bw.clk.deadline())
			if err != nil {
				return nil, err
			}
			for i := 0; i < n; i++ {
				if err := bw.completed(&bw.wc[i]); err != nil {
					return nil, err
				}
			}
		}
		bw.clk.tick()
		if err := s.stopped(); err != nil {
			return nil, err
		}
	}
	return bw.finish(), nil
}

// bwSender is the send side shared by the BW loops (run_iter_bw and
// run_iter_bi): per-QP posted and completed counts, post lists, CQ
// moderation, address stepping and the timing.
type bwSender struct {
	s               *session
	st              []*sendState
	scnt, ccnt      []uint64
	totS, totC      uint64
	iters, tot      uint64
	pl, cqMod       uint64
	step, wrapEvery uint64
	stepAddrs       bool
	tm              *BWTiming
	clk             *durClock
	wc              []verbs.WC
}

func (s *session) newBWSender(wcs int) *bwSender {
	c := s.cfg
	nq := len(s.qps)
	b := &bwSender{s: s, st: s.setSendWQEs(), scnt: make([]uint64, nq), ccnt: make([]uint64, nq),
		iters: uint64(c.Iters), pl: uint64(c.PostList), cqMod: uint64(c.CQMod),
		step: inc(s.size, s.cacheLine), clk: newDurClock(c), wc: make([]verbs.WC, wcs)}
	b.tot = b.iters * uint64(nq)
	b.tm = s.newTiming(b.tot)
	b.wrapEvery = uint64(s.cycle) / b.step
	b.stepAddrs = b.pl == 1 && s.size <= uint64(s.cycle/2)
	return b
}

// post keeps QP q's window of tx_depth full, signaling one in cq_mod
// sends; stepRemote also walks the remote address (WRITE/READ/atomic).
func (b *bwSender) post(q int, stepRemote bool) error {
	c, st, clk, pl, cqMod := b.s.cfg, b.st[q], b.clk, b.pl, b.cqMod
	w := &st.wrs[0]
	for (b.scnt[q] < b.iters || clk.on) && b.scnt[q]-b.ccnt[q]+pl <= uint64(c.TxDepth) {
		if pl == 1 && b.scnt[q]%cqMod == 0 && cqMod > 1 && !(!clk.on && b.scnt[q] == b.iters-1) {
			w.Flags &^= verbs.SendSignaled
		}
		if !c.NoPeak {
			b.tm.Posted[b.totS] = nowNS()
		}
		if clk.ended() {
			break
		}
		if err := b.s.qps[q].PostSend(st.wrs...); err != nil {
			return fmt.Errorf("Couldn't post send: qp %d scnt=%d: %v", q, b.scnt[q], err)
		}
		// A window is tx_depth posts, each a system call on rxe: a
		// turn of its own.
		b.s.turns.Turn()
		if b.stepAddrs {
			st.sgl[0].Addr = stepAddr(st.sgl[0].Addr, b.step, b.scnt[q], b.wrapEvery, st.localBase)
			if stepRemote {
				w.RemoteAddr = stepAddr(w.RemoteAddr, b.step, b.scnt[q], b.wrapEvery, st.remoteBase)
			}
		}
		b.scnt[q] += pl
		b.totS += pl
		if pl == 1 && (b.scnt[q]%cqMod == cqMod-1 || (!clk.on && b.scnt[q] == b.iters-1)) {
			w.Flags |= verbs.SendSignaled
		}
	}
	return nil
}

// completed accounts one signaled send completion: cq_mod sends of its QP.
func (b *bwSender) completed(w *verbs.WC) error {
	if w.Status != verbs.WCSuccess {
		return b.s.errSend(w, b.totS, b.totC)
	}
	b.ccnt[int(w.WRID)] += b.cqMod
	b.totC += b.cqMod
	if !b.s.cfg.NoPeak {
		b.tm.Completed[min(b.totC, b.tot)-1] = nowNS()
	}
	if b.clk.sampling() {
		b.clk.iters += b.cqMod
	}
	return nil
}

// finish closes the timing: the duration window, or the end time when
// per-message times are not kept.
func (b *bwSender) finish() *BWTiming {
	if b.clk.on {
		b.tm.Posted[0], b.tm.Completed[0], b.tm.Iters = b.clk.t0, b.clk.t1, b.clk.iters
	} else if b.s.cfg.NoPeak {
		b.tm.Completed[0] = nowNS()
	}
	return b.tm
}

// runBWServer is run_iter_bw_server: receive iters messages per QP,
// re-posting receives; the clock runs from the first arrival.
func (s *session) runBWServer() (*BWTiming, error) {
	c := s.cfg
	nq := len(s.qps)
	tot := uint64(c.Iters) * uint64(nq)
	tm := &BWTiming{Posted: make([]int64, 1), Completed: make([]int64, 1), Iters: tot}
	clk := newDurClock(c)
	wc := make([]verbs.WC, 16)
	var rcnt uint64
	first := true
	for rcnt < tot || (clk.on && !clk.ended()) {
		until := clk.deadline()
		n, err := s.poll(s.recvCQ, wc, until)
		if err != nil {
			return nil, err
		}
		if n > 0 && first {
			first = false
			if clk.on {
				clk.start()
			} else {
				tm.Posted[0] = nowNS()
			}
		}
		for i := 0; i < n; i++ {
			if wc[i].Status != verbs.WCSuccess {
				return nil, s.errRecv(&wc[i], rcnt)
			}
			rcnt++
			if clk.sampling() {
				clk.iters++
			}
			if err := s.repost(int(wc[i].WRID), clk.on); err != nil {
				return nil, err
			}
		}
		clk.tick()
		if err := s.stopped(); err != nil {
			return nil, err
		}
	}
	if clk.on {
		tm.Posted[0], tm.Completed[0], tm.Iters = clk.t0, clk.t1, clk.iters
	} else {
		tm.Completed[0] = nowNS()
	}
	return tm, nil
}

// runBI is run_iter_bi: send and receive at once (ib_send_bw -b). The
// server starts sending at its first arrival. Sends and receives complete
// on one CQ here, told apart by opcode.
func (s *session) runBI() (*BWTiming, error) {
	c := s.cfg
	bw := s.newBWSender(32)
	clk := bw.clk
	var totR uint64
	beforeFirstRx := !c.Client
	if c.NoPeak {
		bw.tm.Posted[0] = nowNS()
	}
	if c.Client {
		clk.start()
	}
	for (clk.on && !clk.ended()) || bw.totC < bw.tot || totR < bw.tot {
		for q := 0; q < len(s.qps) && !beforeFirstRx; q++ {
			if err := bw.post(q, false); err != nil {
				return nil, err
			}
		}
		n, err := s.poll(s.sendCQ, bw.wc, clk.deadline())
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			w := &bw.wc[i]
			if w.Opcode.IsRecv() {
				if w.Status != verbs.WCSuccess {
					return nil, s.errRecv(w, totR)
				}
				if beforeFirstRx {
					beforeFirstRx = false
					clk.start()
				}
				totR++
				if clk.sampling() {
					clk.iters++
				}
				if err := s.repost(int(w.WRID), clk.on); err != nil {
					return nil, err
				}
				continue
			}
			if err := bw.completed(w); err != nil {
				return nil, err
			}
		}
		clk.tick()
		if err := s.stopped(); err != nil {
			return nil, err
		}
	}
	return bw.finish(), nil
}

// warmUp is perform_warm_up: a window of operations before the
// measurement.
func (s *session) warmUp() error {
	st := s.setSendWQEs()
	wc := make([]verbs.WC, 16)
	n := min(s.cfg.TxDepth, 64)
	out := 0
	for q := range s.qps {
		w := st[q].wrs[0]
		w.Flags = verbs.SendSignaled
		for i := 0; i < n; i++ {
			if err := s.qps[q].PostSend(w); err != nil {
				return fmt.Errorf("Problems with warm up: %v", err)
			}
			out++
		}
	}
	for out > 0 {
		k, err := s.poll(s.sendCQ, wc, time.Time{})
		if err != nil {
			return err
		}
		for i := 0; i < k; i++ {
			if wc[i].Status != verbs.WCSuccess {
				return s.errSend(&wc[i], 0, 0)
			}
		}
		out -= k
	}
	return nil
}

// runLatSend is run_iter_lat_send: the client sends first; each side sends
// its next message once it has received one.
func (s *session) runLatSend() ([]int64, *durResult, error) {
	c := s.cfg
	iters := uint64(c.Iters)
	posted := make([]int64, iters)
	st := s.setSendWQEs()[0]
	w := &st.wrs[0]
	w.Flags = 0
	clk := newDurClock(c)
	wc := make([]verbs.WC, 1)
	var scnt, rcnt uint64
	perQP := uint64(c.RxDepth)
	for scnt < iters || rcnt < iters || (clk.on && !clk.ended()) {
		if (rcnt < iters || clk.on) && !(scnt < 1 && c.Client) {
			n, err := s.poll(s.recvCQ, wc, clk.deadline())
			if err != nil {
				return nil, nil, err
			}
			clk.tick()
			if n == 0 {
				if clk.ended() {
					break
				}
				continue
			}
			clk.start()
			if wc[0].Status != verbs.WCSuccess {
				return nil, nil, s.errRecv(&wc[0], rcnt)
			}
			rcnt++
			if clk.sampling() {
				clk.iters++
			}
			if clk.on || rcnt+perQP <= iters {
				if err := s.qps[wc[0].WRID].PostRecv(s.recv[wc[0].WRID].wrs[0]); err != nil {
					return nil, nil, fmt.Errorf("Couldn't post recv: rcnt=%d: %v", rcnt, err)
				}
			}
		}
		if scnt < iters || (clk.on && !clk.ended()) {
			if c.LatencyGap > 0 {
				gap(c.LatencyGap)
			}
			if !clk.on {
				posted[scnt] = nowNS()
			}
			scnt++
			signaled := scnt%uint64(c.CQMod) == 0 || (!clk.on && scnt == iters)
			if signaled {
				w.Flags |= verbs.SendSignaled
			}
			if clk.ended() {
				break
			}
			if err := s.qps[0].PostSend(*w); err != nil {
				return nil, nil, fmt.Errorf("Couldn't post send: scnt=%d: %v", scnt, err)
			}
			if signaled {
				if err := s.awaitSend(wc, scnt, scnt); err != nil {
					return nil, nil, err
				}
				w.Flags &^= verbs.SendSignaled
			}
		}
		clk.tick()
		if err := s.stopped(); err != nil {
			return nil, nil, err
		}
	}
	return posted, clk.result(), nil
}

// gap busy-waits --latency_gap microseconds.
func gap(usec int) {
	end := nowNS() + int64(usec)*1000
	for nowNS() < end {
		runtime.Gosched()
	}
}

// runLatWrite is run_iter_lat_write: a ping-pong of RDMA WRITEs. The
// server writes first; each write carries the sender's count in its last
// byte, and each side polls the last byte of the region it advertised.
func (s *session) runLatWrite() ([]int64, *durResult, error) {
	c := s.cfg
	iters := uint64(c.Iters)
	posted := make([]int64, max(iters, 1))
	st := s.setSendWQEs()[0]
	w := st.wrs[0]
	w.Flags = verbs.SendSignaled
	_, buf, local, remote := s.mrFor(0)
	postOff := int(local + s.size - 1)
	pollOff := int(remote + s.size - 1)
	clk := newDurClock(c)
	clk.start()
	wc := make([]verbs.WC, 1)
	var scnt, ccnt, rcnt uint64
	early := 0 // send completions waitByte polled
	for scnt < iters || ccnt < iters || rcnt < iters || (clk.on && !clk.ended()) {
		if (rcnt < iters || clk.on) && !(scnt < 1 && !c.Client) {
			rcnt++
			if err := s.waitByte(buf, pollOff, byte(rcnt), clk, func() error {
				n, err := s.sendCQ.Poll(wc)
				if err == nil && n > 0 {
					if wc[0].Status != verbs.WCSuccess {
						return s.errSend(&wc[0], scnt, ccnt)
					}
					early++
				}
				return err
			}); err != nil {
				return nil, nil, err
			}
		}
		if scnt < iters || clk.on {
			if c.LatencyGap > 0 {
				gap(c.LatencyGap)
			}
			if !clk.on {
				posted[scnt] = nowNS()
			}
			scnt++
			buf[postOff] = byte(scnt)
			if err := s.qps[0].PostSend(w); err != nil {
				return nil, nil, fmt.Errorf("Couldn't post send: scnt=%d: %v", scnt, err)
			}
		}
		if clk.ended() {
			break
		}
		if ccnt < iters || clk.on {
			if early > 0 {
				early--
			} else if err := s.awaitSend(wc, scnt, ccnt); err != nil {
				return nil, nil, err
			}
			ccnt++
			if clk.sampling() {
				clk.iters++
			}
		}
		clk.tick()
		if err := s.stopped(); err != nil {
			return nil, nil, err
		}
	}
	return posted, clk.result(), nil
}

// awaitSend polls the send CQ for one completion (into wc[0]), an error
// if it failed (scnt and ccnt for the message).
func (s *session) awaitSend(wc []verbs.WC, scnt, ccnt uint64) error {
	// On rxe the completion is mostly there already (the doorbell's
	// system call did the whole exchange): one poll before the loop.
	n, err := s.sendCQ.Poll(wc[:1])
	for err == nil && n == 0 {
		n, err = s.poll(s.sendCQ, wc[:1], time.Time{})
	}
	if err != nil {
		return err
	}
	if wc[0].Status != verbs.WCSuccess {
		return s.errSend(&wc[0], scnt, ccnt)
	}
	return nil
}

// waitByte polls buf[off] until it holds want, the device having written
// it, calling poll between reads: on a soft device a poll of the CQ
// receives what the device's socket holds on this goroutine (while a
// goroutine polls, the device's own receive goroutine leaves the socket
// to it), the peer's WRITE among it. The loop is paced by
// spin.Spinner.Idle (it sleeps between reads where a CQ loop would
// block: a WRITE raises no completion here). It gives up after
// stallTimeout.
func (s *session) waitByte(buf []byte, off int, want byte, clk *durClock, poll func() error) error {
	sp := s.spinner
	start := stampTime()
	for {
		if loadByte(buf, off) == want {
			return nil
		}
		if clk.on {
			clk.tick()
			if clk.ended() {
				return nil
			}
		}
		if err := poll(); err != nil {
			return err
		}
		if !sp.Idle() {
			continue
		}
		now := stampTime()
		if err := s.stopped(); err != nil {
			return err
		}
		s.watchPeer()
		if left, gone := s.peerLeft(); gone && left <= 0 {
			return s.errPeerGone()
		}
		if now.Sub(start) > stallTimeout {
			return fmt.Errorf(" No RDMA WRITE from the %s for %v: it stopped answering", s.peerRole(), stallTimeout)
		}
		sp.Block(now)
	}
}

// runLatRead is run_iter_lat for READ and atomics: one operation at a
// time.
func (s *session) runLatRead() ([]int64, *durResult, error) {
	c := s.cfg
	iters := uint64(c.Iters)
	posted := make([]int64, max(iters, 1))
	st := s.setSendWQEs()[0]
	w := st.wrs[0]
	w.Flags = verbs.SendSignaled
	clk := newDurClock(c)
	clk.start()
	wc := make([]verbs.WC, 1)
	var scnt uint64
	for scnt < iters || (clk.on && !clk.ended()) {
		if c.LatencyGap > 0 {
			gap(c.LatencyGap)
		}
		if !clk.on {
			posted[scnt] = nowNS()
		}
		scnt++
		if err := s.qps[0].PostSend(w); err != nil {
			return nil, nil, fmt.Errorf("Couldn't post send: scnt=%d: %v", scnt, err)
		}
		if clk.ended() {
			break
		}
		if err := s.awaitSend(wc, scnt, scnt); err != nil {
			return nil, nil, err
		}
		if clk.sampling() {
			clk.iters++
		}
		clk.tick()
		if err := s.stopped(); err != nil {
			return nil, nil, err
		}
	}
	return posted, clk.result(), nil
}
