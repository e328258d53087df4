package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/rdma-go/rdma-go/verbs"
)

// Pool is a set of fixed-size buffers carved out of one registered memory
// region: the memory is registered once, when the pool is made, and every
// message borrows a buffer (Get) and gives it back (Put) once the device
// is done with it, i.e. after its work request's completion. Get and Put
// are safe for concurrent use: typically one goroutine posts work and
// another polls completions and returns buffers.
type Pool struct {
	mr   *verbs.MR
	size int
	// free holds the indexes of the buffers not handed out. Get takes
	// from it, blocking while every buffer is out: the pool's size is
	// also a bound on the messages in flight.
	free chan int

	mu  sync.Mutex
	out []bool // out[i]: buffer i is handed out (to refuse a double Put)
}

// Buf is one buffer of a Pool. Its index identifies it in work request
// IDs, so a completion finds its buffer (Pool.Buf).
type Buf struct {
	pool *Pool
	idx  int
}

// NewPool registers count buffers of size bytes, as one MR of pd with the
// given access flags (LOCAL_WRITE for receive buffers, none for buffers
// only sent from).
func NewPool(pd *verbs.PD, count, size int, access verbs.AccessFlags) (*Pool, error) {
	if count < 1 || size < 1 {
		return nil, fmt.Errorf("pool of %d buffers of %d bytes: need at least one byte and one buffer", count, size)
	}
	mr, err := pd.RegMR(make([]byte, count*size), access)
	if err != nil {
		return nil, fmt.Errorf("pool: register %d × %d bytes: %w", count, size, err)
	}
	p := &Pool{mr: mr, size: size, free: make(chan int, count), out: make([]bool, count)}
	for i := range count {
		p.free <- i
	}
	return p, nil
}

// Get hands out a free buffer, waiting while none is free until ctx is
// done.
func (p *Pool) Get(ctx context.Context) (Buf, error) {
	select {
	case i := <-p.free:
		p.mu.Lock()
		p.out[i] = true
		p.mu.Unlock()
		return Buf{p, i}, nil
	case <-ctx.Done():
		return Buf{}, fmt.Errorf("pool: waiting for a free buffer (all %d in use): %w", cap(p.free), ctx.Err())
	}
}

// Put returns a buffer that Get handed out. Return it only once the
// device is done with it: after the completion of the work request that
// used it (a SEND's data is read by the device after PostSend returns).
func (p *Pool) Put(b Buf) error {
	if b.pool != p {
		return fmt.Errorf("pool: Put of a buffer of another pool")
	}
	p.mu.Lock()
	if !p.out[b.idx] {
		p.mu.Unlock()
		return fmt.Errorf("pool: buffer %d returned twice", b.idx)
	}
	p.out[b.idx] = false
	p.mu.Unlock()
	p.free <- b.idx // never blocks: there is room for every buffer
	return nil
}

// Buf returns the buffer with index i, as found in a work request ID.
func (p *Pool) Buf(i uint64) (Buf, error) {
	if i >= uint64(len(p.out)) {
		return Buf{}, fmt.Errorf("pool: no buffer %d", i)
	}
	return Buf{p, int(i)}, nil
}

// Size returns the size of each buffer.
func (p *Pool) Size() int { return p.size }

// Close deregisters the pool's memory. Buffers still handed out must not
// be in use by the device any more; Close reports how many there were.
func (p *Pool) Close() error {
	p.mu.Lock()
	out := 0
	for _, o := range p.out {
		if o {
			out++
		}
	}
	p.mu.Unlock()
	if err := p.mr.Dereg(); err != nil {
		return fmt.Errorf("pool: deregister: %w", err)
	}
	if out > 0 {
		return fmt.Errorf("pool: closed with %d of %d buffers not returned", out, len(p.out))
	}
	return nil
}

// Index returns the buffer's index in its pool, for a work request ID.
func (b Buf) Index() uint64 { return uint64(b.idx) }

// Bytes returns the buffer's memory.
func (b Buf) Bytes() []byte {
	off := b.idx * b.pool.size
	return b.pool.mr.Bytes()[off : off+b.pool.size : off+b.pool.size]
}

// SGE returns the buffer's first n bytes as a scatter/gather element: its
// address, length and the pool MR's L_Key.
func (b Buf) SGE(n int) verbs.SGE { return b.pool.mr.SGE(b.idx*b.pool.size, n) }
