// Command atomics builds a distributed counter and a distributed lock out of
// RDMA atomics. A server exposes one small memory region holding a 64-bit
// counter, a lock word and a plain 64-bit value; N clients, each with an RC
// connection of its own, work on it concurrently without the server's CPU:
//
//   - the counter: every client adds 1 to it K times with FETCH_AND_ADD, and
//     it ends at exactly N×K, every old value fetched exactly once;
//   - the lock: a spin lock taken with COMPARE_AND_SWAP (0 → client id) and
//     released with COMPARE_AND_SWAP (id → 0), protecting an update of the
//     value by RDMA READ, add 1, RDMA WRITE, which is not atomic by itself.
//
// Both ends run in this process on one device, connected to itself through
// its own IP address:
//
//	go run ./examples/atomics -clients 4 -n 1000
//	go run ./examples/atomics -d rxe0
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// The server's words, each 8-byte aligned: an atomic works on one aligned
// 64-bit word (a misaligned one is refused with an error completion).
const (
	offCounter = 0  // the FETCH_AND_ADD counter
	offLock    = 8  // the lock word: 0 free, else the holder's id
	offValue   = 16 // the value the lock protects
	serverLen  = 64
)

// serverAccess is what the server's region allows: atomics need
// REMOTE_ATOMIC, the lock's READ and WRITE need REMOTE_READ and
// REMOTE_WRITE, and remote writes need LOCAL_WRITE.
const serverAccess = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic

// depth is how many RDMA READs and atomics a client asks to have in flight
// (the initiator depth); the device's limits may lower it.
const depth = 16

// timeout bounds the whole program: every wait below ends by then.
const timeout = 2 * time.Minute

// main parses the flags and runs the program; errors go to stderr, exit
// status 1.
func main() {
	o := exdev.Flags()
	clients := flag.Int("clients", 4, "number of clients, each with its own connection")
	n := flag.Int("n", 1000, "FETCH_AND_ADDs per client")
	locked := flag.Int("locked", 100, "lock-protected updates per client")
	flag.Parse()
	if err := run(os.Stdout, o, *clients, *n, *locked); err != nil {
		fmt.Fprintln(os.Stderr, "atomics:", err)
		os.Exit(1)
	}
}

// client is one client's connection and its local memory: slots for the
// old values atomics return, and a word for the lock-protected value.
type client struct {
	id     uint64 // its lock id, 1..N
	conn   *rdmacm.Conn
	mr     *verbs.MR
	window int    // atomics in flight at most
	addr   uint64 // the server region's address
	rkey   uint32 // and its rkey
}

// run is the program: it prints what happens to w and fails if the counter
// or the value do not end where they must.
func run(w io.Writer, o *exdev.Options, nClients, n, locked int) error {
	if nClients < 1 || nClients > 64 || n < 0 || locked < 0 {
		return fmt.Errorf("want 1-64 clients and counts ≥ 0, got -clients %d -n %d -locked %d", nClients, n, locked)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	dev, err := o.Open("atomics")
	if err != nil {
		return fmt.Errorf("opening the device: %w", err)
	}
	defer dev.Close()
	ip, _, err := exdev.Addr(dev)
	if err != nil {
		return err
	}
	attr, err := dev.QueryDevice()
	if err != nil {
		return fmt.Errorf("query device: %w", err)
	}
	if attr.AtomicCap == verbs.AtomicNone {
		return fmt.Errorf("%s has no remote atomics (atomic_cap %s)", dev.Device().Name(), attr.AtomicCap)
	}
	fmt.Fprintf(w, "1. device %s, IP address %s: atomic_cap %s, max_qp_rd_atom %d, max_qp_init_rd_atom %d\n",
		dev.Device().Name(), ip, attr.AtomicCap, attr.MaxQPRDAtom, attr.MaxQPInitRDAtom)
	if attr.AtomicCap == verbs.AtomicHCA {
		fmt.Fprintln(w, "   ATOMIC_HCA: atomic against the device's other atomics only, so the server's CPU must not change these words while clients work")
	}

	s, err := listen(ip, nClients)
	if err != nil {
		return err
	}
	defer s.close()
	fmt.Fprintf(w, "2. server: listening on %s; one %d-byte region in its PD, %s at 0x%x: counter +%d, lock +%d, value +%d\n",
		s.lid.SrcAddr(), serverLen, serverAccess, s.mr.Addr(), offCounter, offLock, offValue)

	// The connection parameters that matter for atomics: the client's
	// initiator depth (atomics and READs it may have in flight) must be
	// matched by the server's responder resources (how many it keeps
	// state for); rdmacm gives the server's QPs REMOTE_ATOMIC and
	// REMOTE_READ access only when it has responder resources.
	rr := uint8(min(depth, attr.MaxQPRDAtom))
	initDepth := uint8(min(depth, attr.MaxQPInitRDAtom))
	cs, err := s.connect(ctx, ip, nClients, rr, initDepth)
	defer func() {
		// The server hangs up first: each client's connection answers
		// the server's disconnect request by itself, so its Close
		// need not wait.
		s.hangUp()
		for _, c := range cs {
			c.mr.Dereg()
			c.conn.Close()
		}
	}()
	if err != nil {
		return err
	}
	sa, _, err := s.ids[0].QP().Query()
	if err != nil {
		return fmt.Errorf("query server QP: %w", err)
	}
	ca, _, err := cs[0].conn.QP().Query()
	if err != nil {
		return fmt.Errorf("query client QP: %w", err)
	}
	fmt.Fprintf(w, "3. %d clients connected, each asking initiator depth %d; the server accepts with responder resources %d\n", nClients, initDepth, rr)
	fmt.Fprintf(w, "   server QP: access %s, max_dest_rd_atomic %d; client QP: max_rd_atomic %d\n",
		sa.AccessFlags, sa.MaxDestRDAtomic, ca.MaxRDAtomic)

	// The counter: FETCH_AND_ADD(+1) from every client at once.
	olds := make([][]uint64, nClients)
	if err := each(ctx, cs, func(ctx context.Context, i int, c *client) error {
		var err error
		olds[i], err = c.count(ctx, n)
		return err
	}); err != nil {
		return err
	}
	total := uint64(nClients) * uint64(n)
	counter := binary.NativeEndian.Uint64(s.mem[offCounter:])
	if counter != total {
		return fmt.Errorf("counter is %d after %d×%d increments, want %d", counter, nClients, n, total)
	}
	// Atomic means no increment was lost and none saw another's value:
	// the old values fetched are 0..total-1, each exactly once.
	seen := make([]bool, total)
	for _, vs := range olds {
		for _, v := range vs {
			if v >= total || seen[v] {
				return fmt.Errorf("FETCH_AND_ADD returned %d twice or out of range: not atomic", v)
			}
			seen[v] = true
		}
	}
	fmt.Fprintf(w, "4. counter: %d clients × %d FETCH_AND_ADD(+1), up to %d in flight each: counter = %d (want %d)\n",
		nClients, n, cs[0].window, counter, total)
	if total > 0 {
		fmt.Fprintf(w, "   the old values fetched are 0..%d, each exactly once: no update lost or duplicated\n", total-1)
	}

	// The lock: COMPARE_AND_SWAP around a READ, add, WRITE.
	var contended atomic.Int64
	if err := each(ctx, cs, func(ctx context.Context, _ int, c *client) error {
		return c.critical(ctx, locked, &contended)
	}); err != nil {
		return err
	}
	want := uint64(nClients) * uint64(locked)
	value, lock := binary.NativeEndian.Uint64(s.mem[offValue:]), binary.NativeEndian.Uint64(s.mem[offLock:])
	if value != want || lock != 0 {
		return fmt.Errorf("value %d and lock word %d after %d×%d locked updates, want %d and 0", value, lock, nClients, locked, want)
	}
	fmt.Fprintf(w, "5. lock: %d clients × %d updates (CMP_SWP 0→id, READ, +1, WRITE, CMP_SWP id→0): value = %d (want %d), lock word %d\n",
		nClients, locked, value, want, lock)
	fmt.Fprintf(w, "   %d CMP_SWPs found the lock taken and retried; without the lock, concurrent READ/WRITE updates would get lost\n",
		contended.Load())
	return nil
}

// server is the passive side, written as a librdmacm program would: a
// listening rdma_cm id whose device gives the PD that every accepted QP and
// the server's memory region share (an rkey works only on QPs of its PD).
type server struct {
	lid *rdmacm.ID   // listening
	ids []*rdmacm.ID // one per accepted connection
	pd  *verbs.PD
	mem []byte
	mr  *verbs.MR
}

// listen binds a synchronous rdma_cm id to ip (any free port), allocates
// the PD and registers the server's memory on the device the id bound to,
// and listens.
func listen(ip netip.Addr, backlog int) (*server, error) {
	s := &server{mem: make([]byte, serverLen)}
	var err error
	if s.lid, err = rdmacm.CreateID(nil, nil, rdmacm.PSTCP); err != nil {
		return nil, fmt.Errorf("server: create id: %w", err)
	}
	fail := func(err error) (*server, error) { s.close(); return nil, err }
	if err := s.lid.BindAddr(netip.AddrPortFrom(ip, 0)); err != nil {
		return fail(fmt.Errorf("server: bind %s: %w", ip, err))
	}
	// After the bind the id knows its device: id->verbs in librdmacm.
	if s.pd, err = s.lid.Verbs().AllocPD(); err != nil {
		return fail(fmt.Errorf("server: alloc PD: %w", err))
	}
	if s.mr, err = s.pd.RegMR(s.mem, serverAccess); err != nil {
		return fail(fmt.Errorf("server: register memory: %w", err))
	}
	if s.mr.Addr()%8 != 0 {
		return fail(fmt.Errorf("server memory at 0x%x is not 8-byte aligned: atomics need that", s.mr.Addr()))
	}
	if err := s.lid.Listen(backlog); err != nil {
		return fail(fmt.Errorf("server: listen: %w", err))
	}
	return s, nil
}

// connect dials n clients while a goroutine accepts them on the server
// side: a QP in the server's PD for each request, accepted with rr
// responder resources. The clients ask for initiator depth id. It returns
// the clients connected so far, also on error, for the caller to close.
func (s *server) connect(ctx context.Context, ip netip.Addr, n int, rr, id uint8) ([]*client, error) {
	type accepted struct {
		id  *rdmacm.ID
		err error
	}
	ch := make(chan accepted, n)
	actx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		defer close(ch)
		for range n {
			cid, err := s.accept(actx, rr)
			ch <- accepted{cid, err}
			if err != nil {
				return
			}
		}
	}()
	var cs []*client
	var err error
	for i := range n {
		var c *client
		if c, err = dial(ctx, s.lid.SrcAddr(), id, uint64(i+1)); err != nil {
			break
		}
		cs = append(cs, c)
	}
	if err != nil {
		stop() // the accepting goroutine gives up
	}
	for a := range ch { // every accepted id, also those of a failed run
		if a.id != nil {
			s.ids = append(s.ids, a.id)
		}
		if a.err != nil && err == nil {
			err = a.err
		}
	}
	if err != nil {
		return cs, err
	}
	// The clients learn where the server's memory is. In one process
	// the values are at hand; between machines they would travel in a
	// SEND or in the connection's private data.
	for _, c := range cs {
		c.addr, c.rkey = s.mr.Addr(), s.mr.RKey()
	}
	return cs, nil
}

// accept takes the next connection request, gives it a QP in the
// server's PD and accepts it.
func (s *server) accept(ctx context.Context, rr uint8) (*rdmacm.ID, error) {
	id, err := s.lid.GetRequest(ctx)
	if err != nil {
		return nil, fmt.Errorf("server: get request: %w", err)
	}
	// The server posts nothing: its QP only answers.
	if err := id.CreateQP(s.pd, &verbs.QPInitAttr{Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		id.Reject(nil)
		id.Destroy()
		return nil, fmt.Errorf("server: create QP: %w", err)
	}
	if err := id.Accept(ctx, &rdmacm.ConnParam{ResponderResources: rr, RNRRetryCount: 7}); err != nil {
		id.DestroyQP()
		id.Destroy()
		return nil, fmt.Errorf("server: accept: %w", err)
	}
	return id, nil
}

// hangUp disconnects and destroys the accepted connections.
func (s *server) hangUp() {
	for _, id := range s.ids {
		id.DestroyQP()
		id.Destroy() // sends the disconnect request
	}
	s.ids = nil
}

// close frees what listen made: connections, memory, PD, listener.
func (s *server) close() {
	s.hangUp()
	if s.mr != nil {
		s.mr.Dereg()
	}
	if s.pd != nil {
		s.pd.Dealloc()
	}
	s.lid.Destroy()
}

// dial connects client number cid to the server at addr, asking for
// initiator depth id, and registers its local memory: result slots for
// atomics in flight, and a word for the lock-protected value. Its
// connection has a PD of its own; the local memory goes there.
func dial(ctx context.Context, addr netip.AddrPort, id uint8, cid uint64) (*client, error) {
	conn, err := rdmacm.Dial(ctx, addr.String(), &rdmacm.Options{InitiatorDepth: id, Cap: verbs.QPCap{MaxSendWR: 2 * depth}})
	if err != nil {
		return nil, fmt.Errorf("client %d: dial %s: %w", cid, addr, err)
	}
	a, _, err := conn.QP().Query()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("client %d: query QP: %w", cid, err)
	}
	window := min(max(int(a.MaxRDAtomic), 1), depth) // what the server granted
	// Atomics and READs write their results into local memory:
	// LOCAL_WRITE. Nobody reaches it remotely.
	mr, err := conn.PD().RegMR(make([]byte, 8+8*window), verbs.AccessLocalWrite)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("client %d: register memory: %w", cid, err)
	}
	return &client{id: cid, conn: conn, mr: mr, window: window}, nil
}

// count does n FETCH_AND_ADD(+1) on the server's counter, keeping up to
// c.window of them in flight, and returns the old values they fetched.
// Work request k returns its old value into slot k mod window: an RC send
// queue completes in order, so a slot is free again once the request
// window places earlier has completed.
func (c *client) count(ctx context.Context, n int) ([]uint64, error) {
	olds := make([]uint64, 0, n)
	for posted := 0; len(olds) < n; {
		for ; posted < n && posted-len(olds) < c.window; posted++ {
			if err := c.conn.QP().PostSend(verbs.SendWR{ID: uint64(posted), Opcode: verbs.WRAtomicFetchAndAdd,
				Flags: verbs.SendSignaled, SGL: []verbs.SGE{c.mr.SGE(c.slot(posted), 8)},
				RemoteAddr: c.addr + offCounter, RKey: c.rkey, CompareAdd: 1}); err != nil {
				return olds, fmt.Errorf("client %d: post FETCH_AND_ADD: %w", c.id, err)
			}
		}
		wc, err := c.wait(ctx, "FETCH_AND_ADD")
		if err != nil {
			return olds, err
		}
		if wc.WRID != uint64(len(olds)) {
			return olds, fmt.Errorf("client %d: FETCH_AND_ADD %d completed before %d", c.id, wc.WRID, len(olds))
		}
		olds = append(olds, binary.NativeEndian.Uint64(c.mr.Bytes()[c.slot(len(olds)):]))
	}
	return olds, nil
}

// slot is the offset of the result slot of atomic k.
func (c *client) slot(k int) int { return 8 + 8*(k%c.window) }

// critical adds 1 to the server's value n times, each time under the lock.
// contended counts the attempts that found the lock taken.
func (c *client) critical(ctx context.Context, n int, contended *atomic.Int64) error {
	buf := c.mr.Bytes()
	for range n {
		// Lock: swap our id into the lock word if it holds 0. The old
		// value comes back: 0 means the lock is ours.
		for backoff := time.Microsecond; ; backoff = min(2*backoff, time.Millisecond) {
			old, err := c.cmpSwap(ctx, 0, c.id)
			if err != nil {
				return err
			}
			if old == 0 {
				break
			}
			contended.Add(1)
			// Someone else holds it: wait a little, then try again,
			// rather than flooding the server with atomics.
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return fmt.Errorf("client %d: waiting for the lock (held by %d): %w", c.id, old, ctx.Err())
			}
		}
		// The critical section: read the value, add 1, write it back.
		// READ and WRITE are not atomic; the lock makes the three
		// steps one.
		if err := c.post(verbs.SendWR{Opcode: verbs.WRRDMARead, SGL: []verbs.SGE{c.mr.SGE(0, 8)}, RemoteAddr: c.addr + offValue}); err != nil {
			return err
		}
		if _, err := c.wait(ctx, "READ"); err != nil {
			return err
		}
		binary.NativeEndian.PutUint64(buf, binary.NativeEndian.Uint64(buf)+1)
		if err := c.post(verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{c.mr.SGE(0, 8)}, RemoteAddr: c.addr + offValue}); err != nil {
			return err
		}
		// Its completion (the server's ACK) means the value is in the
		// server's memory before anyone else can take the lock.
		if _, err := c.wait(ctx, "WRITE"); err != nil {
			return err
		}
		// Unlock: swap 0 back in, if the lock is still ours.
		old, err := c.cmpSwap(ctx, c.id, 0)
		if err != nil {
			return err
		}
		if old != c.id {
			return fmt.Errorf("client %d: the lock word was %d while we held the lock", c.id, old)
		}
	}
	return nil
}

// cmpSwap runs COMPARE_AND_SWAP on the lock word: if it holds compare,
// it becomes swap. It returns the value the word held.
func (c *client) cmpSwap(ctx context.Context, compare, swap uint64) (uint64, error) {
	if err := c.post(verbs.SendWR{Opcode: verbs.WRAtomicCmpAndSwp, SGL: []verbs.SGE{c.mr.SGE(8, 8)},
		RemoteAddr: c.addr + offLock, CompareAdd: compare, Swap: swap}); err != nil {
		return 0, err
	}
	if _, err := c.wait(ctx, "CMP_SWP"); err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint64(c.mr.Bytes()[8:]), nil
}

// post posts one signaled work request on the server's memory.
func (c *client) post(wr verbs.SendWR) error {
	wr.Flags, wr.RKey = verbs.SendSignaled, c.rkey
	if err := c.conn.QP().PostSend(wr); err != nil {
		return fmt.Errorf("client %d: post %s: %w", c.id, wr.Opcode, err)
	}
	return nil
}

// wait returns the client's next send completion, which must be a
// success.
func (c *client) wait(ctx context.Context, what string) (verbs.WC, error) {
	var wc [1]verbs.WC
	cq := c.conn.SendCQ()
	for ctx.Err() == nil {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return wc[0], fmt.Errorf("client %d: poll: %w", c.id, err)
		}
		if n == 0 {
			// Sleep until the CQ has a completion (or ctx ends).
			if err := cq.Wait(ctx); err != nil {
				return wc[0], fmt.Errorf("client %d: waiting for %s: %w", c.id, what, err)
			}
			continue
		}
		if wc[0].Status != verbs.WCSuccess {
			return wc[0], fmt.Errorf("client %d: %s completed with %q", c.id, what, wc[0].Status)
		}
		return wc[0], nil
	}
	return wc[0], fmt.Errorf("client %d: %s: %w", c.id, what, ctx.Err())
}

// each runs f for every client in a goroutine of its own and returns
// their errors. The first error cancels the others' context: a client that
// failed holding the lock would otherwise keep the rest spinning.
func each(ctx context.Context, cs []*client, f func(ctx context.Context, i int, c *client) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			if errs[i] = f(ctx, i, c); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
