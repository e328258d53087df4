// Package softdev runs the soft RoCEv2 device: it binds a link, feeds received
// batches to the transport engine from one goroutine, and turns the engine's
// timer deadlines into real timers. Everything protocol-related lives in
// package engine; this package only supplies the clock and the I/O.
package softdev

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/link/capture"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/gsi"
	"github.com/rdma-go/rdma-go/provider/soft/internal/debuglog"
	"github.com/rdma-go/rdma-go/provider/soft/service"
	"github.com/rdma-go/rdma-go/wire"
)

// Options configure a running device.
type Options struct {
	// Port is the UDP port to bind (0 means 4791).
	Port uint16
	// ICRC selects how received IPv4 ICRCs are verified.
	ICRC wire.ICRCMode
	// TrustLoopback skips the ICRC check of packets from loopback
	// addresses (engine.HostConfig.TrustLoopback).
	TrustLoopback bool
	// Logger receives debug logs (nil: slog.Default()).
	Logger *slog.Logger
	// OnEvent receives the engine's asynchronous events; it must only
	// queue them (it runs with engine locks held).
	OnEvent func(engine.Event)
	// GUID is the device's node GUID, which the connection manager sends
	// as its CA GUID.
	GUID uint64
	// OnPortDown is called once if the device's link fails and it stops
	// receiving (the port goes down).
	OnPortDown func()
	// Slot, when not 0, is the device's share of an address that a host
	// service shares among processes (see SetSlot).
	Slot uint8
	// Claims, when set, is where the CM claims its service IDs among the
	// processes sharing the address.
	Claims ibcm.ServiceClaims
}

// Device is a running soft device bound to one IP address.
type Device struct {
	onPortDown func()
	host       *engine.Host
	gsi        *gsi.Port
	guid       uint64
	claims     ibcm.ServiceClaims
	link       link.Link
	log        *slog.Logger
	done       chan struct{}
	wg         sync.WaitGroup
	once       sync.Once

	// poller is the link's non-waiting receive (nil when it has none).
	// rxMu serializes reading it and processing what was read, so that
	// the receive goroutine and Poll callers process datagrams in order.
	// rx is the receive goroutine's batch and prx, guarded by rxMu, the
	// one Poll reads into.
	poller link.Poller
	rxMu   sync.Mutex
	rx     rxBatch
	prx    rxBatch
	// pollSkip counts Poll calls to skip; pollBackoff (guarded by rxMu)
	// is how many the next empty attempt skips.
	pollSkip    atomic.Int32
	pollBackoff int32
	// pollSize (guarded by rxMu) sizes Poll's reads.
	pollSize readSizer
	// acksSince is when Poll first left ACKs pending (UnixNano), 0 when
	// none are; flusherKick wakes ackFlusher when flusherIdle.
	acksSince atomic.Int64
	// postsWaiting is set while PostSends have left work requests for
	// FlushPosts (see DeferPosts).
	postsWaiting atomic.Bool
	flusherIdle  atomic.Bool
	flusherKick  chan struct{}
	// lastPoll is when Poll last read the link (UnixNano; 0 after
	// Blocking): for pollHoldTime after it the receive goroutine does
	// not wait on the link, but on loopKick and holdTimer.
	lastPoll atomic.Int64
	// polled says a CQ poll found completions since DeferPosts last
	// looked (Polled): DeferPosts then dates that poll with its own clock
	// reading, so a poll that finds work reads no clock (a clock read is
	// a system call on some machines).
	polled    atomic.Bool
	loopKick  chan struct{}
	holdTimer *time.Timer
	wheel     *timerWheel // the QPs' deadlines (timer.go)
	// detach ends the capture package's knowledge of this device's
	// address.
	detach func()
	// base is Options.Logger, from which each subsystem's logger is made
	// (package debuglog).
	base *slog.Logger
	mtu  mtuCache
}

// Open binds addr and starts the device's receive loop.
func Open(addr netip.Addr, opts Options) (*Device, error) {
	addr = addr.Unmap()
	l, err := link.ListenUDP(addr, link.UDPOptions{Port: opts.Port, GRO: true, Logger: debuglog.For("link", opts.Logger)})
	if err != nil {
		return nil, err
	}
	return Start(l, opts), nil
}

// Start runs a device over an already open link.
func Start(l link.Link, opts Options) *Device {
	lg := debuglog.For("dev", opts.Logger)
	d := &Device{link: l, log: lg, base: opts.Logger, done: make(chan struct{}), guid: opts.GUID, onPortDown: opts.OnPortDown, claims: opts.Claims}
	var send engine.Sender = l
	if raceEnabled {
		send = raceLink{l}
	}
	send = tapSender{send, l.LocalAddr()}
	d.detach = capture.Attach(l.LocalAddr().Addr())
	d.host = engine.NewHost(engine.HostConfig{
		Addr: l.LocalAddr().Addr(), Link: send, ICRC: opts.ICRC, TrustLoopback: opts.TrustLoopback, MaxBatch: l.MaxBatch(), Logger: debuglog.For("qp", opts.Logger),
		MTU: d.ActiveMTU(), OnEvent: opts.OnEvent, Port: l.LocalAddr().Port(),
	})
	d.startGSI()
	if opts.Slot != 0 {
		d.SetSlot(opts.Slot)
	} else {
		d.host.SetNextQPN(randomQPN(d.host.QPNRange()))
	}
	d.poller, _ = l.(link.Poller)
	d.rx = newRxBatch(l.MaxBatch())
	if d.poller != nil {
		d.prx = newRxBatch(min(l.MaxBatch(), pollBatch))
		d.pollSize = newReadSizer(len(d.prx.d))
	}
	d.loopKick = make(chan struct{}, 1)
	d.wheel = newTimerWheel()
	d.wg.Add(2)
	go d.receiveLoop()
	go d.runWheel()
	if d.poller != nil {
		d.flusherKick = make(chan struct{}, 1)
		d.flusherIdle.Store(true)
		d.wg.Add(1)
		go d.ackFlusher()
	}
	return d
}

// startGSI creates QP1 with its MAD agent and PerfMgt responder. A device
// without them still moves data, so a failure is logged, not fatal.
func (d *Device) startGSI() {
	p, err := gsi.Open(d.host, gsi.Config{Logger: d.base, GUID: d.guid, Claims: d.claims})
	if err != nil {
		d.log.Error("softdev: no GSI QP; management datagrams will be dropped", "addr", d.Addr(), "err", err)
		return
	}
	h := d.host
	if _, err := mad.ServePerfMgt(p.Agent(), mad.PerfMgtConfig{Counters: func() mad.PortCounterValues { return gsi.Counters(h) }}); err != nil {
		d.log.Error("softdev: no PerfMgt responder", "addr", d.Addr(), "err", err)
	}
	d.gsi = p
	register(d)
}

// SetSlot makes the device number new QPs, CM communication IDs and MAD
// transaction IDs in slot's share of its address, which a host service
// gave this process (see package service).
func (d *Device) SetSlot(slot uint8) {
	d.host.SetQPNRange(service.QPNRange(slot))
	d.host.SetNextQPN(randomQPN(d.host.QPNRange()))
	if d.gsi != nil {
		d.gsi.SetPrefix(slot)
	}
}

// randomQPN picks where a device's QP numbering starts in first…last: a
// program run again soon after the last run (a restarted client) does not
// reuse the QPNs that its peers' connection managers may still hold for
// the connections of the last run, as it would if every run started at
// first.
func randomQPN(first, last uint32) uint32 {
	return first + rand.Uint32N(last-first+1)
}

// GSI returns the device's QP1 and MAD agent, or nil if it could not be
// created.
func (d *Device) GSI() *gsi.Port { return d.gsi }

// GUID returns the node GUID the device was started with.
func (d *Device) GUID() uint64 { return d.guid }

// running maps the address of each running device to it, so that the
// management layers can find the device a verbs context is open on.
var running struct {
	mu   sync.Mutex
	devs map[netip.Addr]*Device
}

func register(d *Device) {
	running.mu.Lock()
	defer running.mu.Unlock()
	if running.devs == nil {
		running.devs = make(map[netip.Addr]*Device)
	}
	running.devs[d.Addr().Unmap()] = d
}

func unregister(d *Device) {
	running.mu.Lock()
	defer running.mu.Unlock()
	if running.devs[d.Addr().Unmap()] == d {
		delete(running.devs, d.Addr().Unmap())
	}
}

// Lookup returns the running device bound to addr, or nil.
func Lookup(addr netip.Addr) *Device {
	running.mu.Lock()
	defer running.mu.Unlock()
	return running.devs[addr.Unmap()]
}

// Host returns the device's transport engine.
func (d *Device) Host() *engine.Host { return d.host }

// Addr returns the device's IP address.
func (d *Device) Addr() netip.Addr { return d.link.LocalAddr().Addr() }

// Link returns the device's link.
func (d *Device) Link() link.Link { return d.link }

// pollHoldTime is how long after a Poll the receive goroutine leaves the
// link to pollers.
const pollHoldTime = time.Millisecond

// holdClock is the clock pollHold reads (a test scripts it).
var holdClock = Now

// pollHold returns how much longer the receive goroutine should leave the
// link to pollers, or 0.
func (d *Device) pollHold() time.Duration {
	lp := d.lastPoll.Load()
	if lp == 0 {
		return 0
	}
	return max(0, time.Duration(lp+int64(pollHoldTime)-holdClock().UnixNano()))
}

// Blocking tells the device that a goroutine that polled it is about to
// block waiting for a completion: it sends the ACKs Poll left pending and
// hands the link back to the receive goroutine at once. The verbs layer
// calls it from CQ.Wait and CompChannel.GetEvent.
func (d *Device) Blocking() {
	d.FlushPosts()
	d.FlushAcks()
	d.polled.Store(false)
	if d.lastPoll.Load() != 0 {
		d.lastPoll.Store(0)
		select {
		case d.loopKick <- struct{}{}:
		default:
		}
	}
}

func (d *Device) receiveLoop() {
	defer d.wg.Done()
	d.holdTimer = time.NewTimer(time.Hour)
	d.holdTimer.Stop()
	for {
		var got int
		var err error
		if d.poller != nil {
			if hold := d.pollHold(); hold > 0 {
				// An application is polling the device: leave the
				// socket to it, so that its packets do not wake this
				// goroutine too, until it blocks or stops polling.
				d.poller.SetQuiet(true)
				d.holdTimer.Reset(hold)
				select {
				case <-d.loopKick:
				case <-d.holdTimer.C:
				case <-d.done:
					return
				}
				continue
			}
			// Back in the wait set before waiting: the hold may have
			// ended between two reads of the clock, and a socket left
			// quiet here would wake nobody, ever.
			d.poller.SetQuiet(false)
			got, err = d.poller.ReceiveLocked(&d.rxMu, d.rx.reset())
			if got > 0 {
				d.process(d.rx.d[:got])
				d.rxMu.Unlock()
				err = d.spinReceive()
			}
		} else {
			got, err = d.link.Receive(d.rx.reset())
			if got > 0 {
				d.process(d.rx.d[:got])
			}
		}
		if err != nil {
			if !errors.Is(err, link.ErrClosed) {
				d.log.Error("softdev: receive failed; device stops", "addr", d.Addr(), "err", err)
				if d.onPortDown != nil {
					d.onPortDown()
				}
			}
			return
		}
	}
}

// rxSpin is how long the receive goroutine keeps reading the link without
// waiting after a batch (spinReceive).
const rxSpin = 50 * time.Microsecond

// spinReceive reads the link without waiting for as long as datagrams keep
// coming, until rxSpin passes without one, and processes them: a stream
// whose next batch is microseconds away does not pay a wake-up of this
// goroutine for each (tens of microseconds on an idle CPU, and the
// sender's window waits for the ACKs that follow). It stops when a poller
// takes the link over. RDMA_GO_POLL=off turns it off too.
func (d *Device) spinReceive() error {
	if pollOff {
		return nil
	}
	last := Now()
	for d.pollHold() == 0 {
		d.rxMu.Lock()
		got, err := d.poller.TryReceive(d.rx.reset())
		if got > 0 {
			d.process(d.rx.d[:got])
		}
		d.rxMu.Unlock()
		if err != nil {
			return err
		}
		now := Now()
		if got > 0 {
			last = now
		} else if now.Sub(last) > rxSpin {
			return nil
		}
		runtime.Gosched()
	}
	return nil
}

// rxBatch is a receive batch with its buffers.
type rxBatch struct {
	d    []link.Datagram
	bufs [][]byte
}

// pollBatch is the size of Poll's batch.
const pollBatch = 16

func newRxBatch(n int) rxBatch {
	b := rxBatch{d: make([]link.Datagram, n), bufs: make([][]byte, n)}
	// Room for a datagram coalesced by UDP GRO. Pages the kernel never
	// writes to are never touched.
	for i := range b.bufs {
		b.bufs[i] = make([]byte, link.MaxDatagram)
	}
	return b
}

// reset gives every datagram of b its buffer back and returns them.
func (b *rxBatch) reset() []link.Datagram { return b.first(len(b.d)) }

// first gives the first n datagrams of b their buffers back and returns
// them.
func (b *rxBatch) first(n int) []link.Datagram {
	d := b.d[:n]
	for i := range d {
		d[i].Buf = b.bufs[i]
	}
	return d
}

// drainLocked reads what the link holds now into prx, as many datagrams
// as pollSize says, without waiting, and processes them.
func (d *Device) drainLocked(now time.Time) (int, error) {
	got, err := d.poller.TryReceive(d.prx.first(d.pollSize.want))
	d.pollSize.observe(got)
	if got > 0 {
		if raceEnabled {
			netSlot(d.Addr()).Load()
		}
		if capture.Active() {
			capture.Received(d.prx.d[:got])
		}
		if d.host.ReceivePolled(now, d.prx.d[:got]) {
			d.deferAcks(now)
		}
		if d.gsi != nil {
			d.gsi.Poll(now)
		}
	}
	return got, err
}

// ACKs left pending by Poll (engine.Host.ReceivePolled) go out with the
// poller's next send on their QP, at its next Poll, when it blocks (verbs
// calls FlushAcks), when the receive goroutine next processes a batch, or
// at the latest after about ackDelay, from the ackFlusher goroutine.
const ackDelay = 200 * time.Microsecond

// deferAcks records, under rxMu, that ACKs are pending, and starts the
// flusher if it is not running.
func (d *Device) deferAcks(now time.Time) {
	d.acksSince.CompareAndSwap(0, now.UnixNano())
	if d.flusherIdle.CompareAndSwap(true, false) {
		select {
		case d.flusherKick <- struct{}{}:
		default:
		}
	}
}

// deferWindow is how recently Poll must have read the link for DeferPosts
// to hold a post back: the application is then in a polling loop and
// polls again within microseconds.
const deferWindow = 100 * time.Microsecond

// DeferPosts reports whether a PostSend at now may leave its work requests
// queued (engine.QP.PostSendDeferred) for the next FlushPosts: whether an
// application is busy polling this device. Its next CQ poll — on any
// goroutine — sends everything posted meanwhile, on every QP, in one
// batch (one sendmmsg, often one GSO send), where posting one work
// request at a time costs a system call each: a stream of small WRITEs
// otherwise spends most of its time there. A post with nobody polling
// goes out at once; one whose poller then blocks goes out when it blocks
// (Blocking), or at the latest at the ackFlusher's next tick.
func (d *Device) DeferPosts(now time.Time) bool {
	if d.poller == nil || pollOff {
		return false
	}
	if d.polled.Load() && d.polled.Swap(false) {
		d.lastPoll.Store(now.UnixNano())
		return true
	}
	lp := d.lastPoll.Load()
	return lp != 0 && now.UnixNano()-lp < int64(deferWindow)
}

// Polled records that a CQ poll found completions without asking the
// device (Poll) to read the link: the application is polling all the same,
// and DeferPosts should keep holding its posts for the next poll.
func (d *Device) Polled() {
	if d.poller != nil && !pollOff && !d.polled.Load() {
		d.polled.Store(true)
	}
}

// PostsDeferred records that a PostSend left work requests for FlushPosts.
func (d *Device) PostsDeferred() {
	if d.postsWaiting.CompareAndSwap(false, true) && d.flusherIdle.CompareAndSwap(true, false) {
		select {
		case d.flusherKick <- struct{}{}:
		default:
		}
	}
}

// FlushPosts sends the work requests that PostSends left waiting (see
// DeferPosts). The soft provider calls it at every CQ poll.
func (d *Device) FlushPosts() {
	if d.postsWaiting.Load() {
		d.flushPosts()
	}
}

func (d *Device) flushPosts() {
	if d.postsWaiting.Swap(false) {
		d.host.FlushPosts(Now())
	}
}

// FlushAcks sends the ACKs that Poll left pending. The verbs layer calls it
// before a poller blocks.
func (d *Device) FlushAcks() {
	if d.acksSince.Load() == 0 {
		return
	}
	d.rxMu.Lock()
	d.flushAcksLocked()
	d.rxMu.Unlock()
}

func (d *Device) flushAcksLocked() {
	if d.acksSince.Load() != 0 {
		d.acksSince.Store(0)
		d.host.FlushAcks()
	}
}

// ackFlusher sends ACKs that have been pending for ackDelay, and posts
// that DeferPosts left waiting for a poll that did not come. While Poll
// keeps deferring ACKs it wakes every millisecond or so (a timer, not a
// wake-up per packet); after 10 ms without any it sleeps until kicked.
func (d *Device) ackFlusher() {
	defer d.wg.Done()
	tick := time.NewTimer(ackDelay) // one timer, reset each round: no garbage a millisecond
	defer tick.Stop()
	idle := 0
	for {
		if idle > 10 {
			d.flusherIdle.Store(true)
			if d.acksSince.Load() == 0 && !d.postsWaiting.Load() {
				select {
				case <-d.flusherKick:
				case <-d.done:
					return
				}
			}
			d.flusherIdle.Store(false)
			idle = 0
		}
		tick.Reset(ackDelay)
		select {
		case <-tick.C:
		case <-d.done:
			return
		}
		posts := d.postsWaiting.Load()
		if posts {
			// The poller that was to send them has not polled since:
			// it blocks elsewhere, or has stopped.
			d.FlushPosts()
		}
		since := d.acksSince.Load()
		if since == 0 && !posts {
			idle++
			continue
		}
		idle = 0
		if since != 0 && Now().UnixNano()-since >= int64(ackDelay) {
			d.FlushAcks()
		}
	}
}

// process hands received datagrams to the engine.
func (d *Device) process(batch []link.Datagram) {
	if raceEnabled {
		netSlot(d.Addr()).Load()
	}
	d.FlushPosts()
	now := Now()
	d.acksSince.Store(0) // Receive sends those Poll left pending too
	if capture.Active() {
		capture.Received(batch)
	}
	d.host.Receive(now, batch)
	if d.gsi != nil {
		d.gsi.Poll(now)
	}
}

// monoBase is the origin of Now.
var monoBase = time.Now()

// Now is the devices' clock: the system's monotonic clock, as a time.Time
// whose wall reading moves with it from the program's start (an NTP step
// does not move it). It reads the clock once where time.Now reads it
// twice (the wall and the monotonic clock): on the data path a device
// reads it per poll attempt and per post, and where a clock read is a
// system call (a VM whose clocksource is hpet or acpi_pm: ~5 µs each in
// the interop lab's guest) the reads were most of a round trip.
// Everything the devices compare — deadlines, the poll hold, pending
// ACKs' age — comes from it.
func Now() time.Time { return monoBase.Add(time.Since(monoBase)) }

// pollOff is RDMA_GO_POLL=off.
var pollOff = os.Getenv("RDMA_GO_POLL") == "off"

// Poll receives and processes what the device's link holds now, on the
// calling goroutine, unless the device's receive goroutine is already at it.
// It reports whether it processed anything. A goroutine that busy polls a
// CQ calls it (through verbs.CQ.Poll) so that a completion can arrive
// without a wake-up of the receive goroutine: on a loopback link the
// datagram is already queued when the peer's send returns.
//
// The environment variable RDMA_GO_POLL=off turns it off: every packet is
// then processed by the receive goroutine, which then also waits on the
// link after every batch (see spinReceive).
//
// Each empty attempt costs a system call, so after an attempt that finds
// nothing Poll skips the next 1, 3, 7, 15, then 16 calls (maxPollBackoff):
// a poller that waits for a round trip still finds its reply within about
// a microsecond, while one that polls a busy stream leaves most of the
// work to the receive goroutine on another CPU.
func (d *Device) Poll() bool {
	d.FlushPosts()
	if d.poller == nil || pollOff {
		return false
	}
	if d.pollSkip.Load() > 0 && d.acksSince.Load() == 0 {
		d.pollSkip.Add(-1)
		return false
	}
	if !d.rxMu.TryLock() {
		// The receive goroutine is reading the link (spinReceive):
		// tell it a poller is here, and it leaves the link to us.
		d.lastPoll.Store(Now().UnixNano())
		return false
	}
	now := Now() // one clock read per attempt: it is on the latency path
	d.lastPoll.Store(now.UnixNano())
	d.flushAcksLocked()
	got, _ := d.drainLocked(now)
	if got > 0 {
		d.pollBackoff = 0
	} else {
		d.pollBackoff = min(2*d.pollBackoff+1, maxPollBackoff())
		d.pollSkip.Store(d.pollBackoff)
	}
	d.rxMu.Unlock()
	return got > 0
}

// maxPollBackoff is the most Poll calls skipped after an empty attempt:
// defaultPollBackoff, or RDMA_GO_POLL_BACKOFF (0–64), read at the first
// Poll. Callers whose polls cost more than a Go caller's (a C program's
// ibv_poll_cq, one call into Go each, about 150 ns) skip fewer, so that
// the time between attempts stays about the same.
var maxPollBackoff = sync.OnceValue(pollBackoffFromEnv)

// defaultPollBackoff is maxPollBackoff for Go callers (a CQ.Poll costs
// about 60 ns). It was 64: a round trip's reply then waited up to 4 µs
// for the next attempt, and ib_send_lat / ib_write_lat between two
// processes measured 4.5 / 4.4 µs against 3.6 / 3.7 with 16 (8 and 4
// gave 3.4 / 3.3, but cost small-message streams 5–10 %).
const defaultPollBackoff = 16

func pollBackoffFromEnv() int32 {
	if n, err := strconv.Atoi(os.Getenv("RDMA_GO_POLL_BACKOFF")); err == nil && n >= 0 && n <= 64 {
		return int32(n)
	}
	return defaultPollBackoff
}

// Close stops the receive loop and releases the link.
func (d *Device) Close() error {
	var err error
	d.once.Do(func() {
		d.FlushPosts() // posts a poller left waiting still go out
		close(d.done)
		unregister(d)
		d.detach()
		// QP1 first, while the link still sends: Close waits for a Poll
		// under way, which posts the MADs it queued (an RTU, a DREP).
		if d.gsi != nil {
			d.gsi.Close()
		}
		err = d.link.Close()
		d.wg.Wait()
	})
	return err
}

// Under the race detector, netSync carries the happens-before edge that a
// datagram carries through the kernel. A device writes registered memory
// (a WRITE's payload), then sends the ACK; the peer receives it and
// completes the work request; the application polls that completion and
// reads the memory the first device wrote. The detector cannot see through
// the socket, so without help it reports that read as racing with the
// device's write. A sender releases the slot of each destination address
// before sending, and a device acquires its own address's slot after each
// receive: every such edge runs from a send to a later receive, as the
// datagram itself does.
var netSync [64]atomic.Uint32

func netSlot(a netip.Addr) *atomic.Uint32 {
	h := uint32(2166136261)
	for _, c := range a.Unmap().As16() {
		h = (h ^ uint32(c)) * 16777619
	}
	return &netSync[h%uint32(len(netSync))]
}

// raceLink is the engine's sender under the race detector.
type raceLink struct{ link.Link }

func (l raceLink) Send(batch []link.Datagram) error {
	var last netip.Addr
	for i := range batch {
		if a := batch[i].Dst.Addr(); i == 0 || a != last {
			netSlot(a).Add(1)
			last = a
		}
	}
	return l.Link.Send(batch)
}

// tapSender is the engine's sender: it records what was sent while a
// capture runs (package capture).
type tapSender struct {
	engine.Sender
	local netip.AddrPort
}

func (t tapSender) Send(batch []link.Datagram) error {
	err := t.Sender.Send(batch)
	if capture.Active() {
		capture.Sent(t.local, batch)
	}
	return err
}

// mtuTTL is how long a device reuses the active MTU it computed: reading
// the interfaces takes a netlink dump per interface, which cost a quarter
// of an rdmacm connection's set-up when every Dial opened a context, and
// an interface's MTU rarely changes.
const mtuTTL = time.Second

// mtuCache holds a device's active MTU and when it was computed.
type mtuCache struct {
	mu  sync.Mutex
	mtu int
	at  time.Time
}

// ActiveMTU returns the active MTU in bytes of the device's port (see the
// package function ActiveMTU), computed again when the last computation is
// more than a second old.
func (d *Device) ActiveMTU() int {
	c := &d.mtu
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); c.mtu == 0 || now.Sub(c.at) > mtuTTL {
		c.mtu, c.at = ActiveMTU(d.Addr()), now
	}
	return c.mtu
}

// ActiveMTU returns the RoCE active MTU in bytes for a device on addr: the
// largest IB MTU that fits the interface MTU minus 80 bytes of headers, as
// rxe computes it (1500 → 1024; loopback's 65536 → 4096).
func ActiveMTU(addr netip.Addr) int {
	ifMTU := 1500
	if ifs, err := net.Interfaces(); err == nil {
		for _, ifc := range ifs {
			addrs, err := ifc.Addrs()
			if err != nil {
				continue
			}
			for _, a := range addrs {
				if pn, ok := a.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(pn.IP); ok && ip.Unmap() == addr.Unmap() {
						ifMTU = ifc.MTU
					}
				}
			}
		}
	}
	if addr.IsLoopback() && ifMTU == 1500 {
		ifMTU = 65536 // every 127/8 address is on lo even when not listed
	}
	for m := 4096; m >= 256; m /= 2 {
		if m <= ifMTU-80 {
			return m
		}
	}
	return 256
}
