package engine

import (
	"fmt"
	"sync"
)

// SRQ is a shared receive queue: receive WQEs that any attached QP consumes.
// Its methods are safe for concurrent use.
type SRQ struct {
	host *Host
	pd   uint32
	// Owner is the caller's handle for the SRQ, for routing events.
	Owner any

	mu     sync.Mutex
	keys   KeyCache // the MR last named by a receive, under mu
	rq     recvQueue
	maxSGE int
	limit  int // SRQ limit; 0 means disarmed
}

// CreateSRQ creates a shared receive queue of depth WQEs with up to maxSGE
// scatter elements each.
func (h *Host) CreateSRQ(pd uint32, depth, maxSGE int) (*SRQ, error) {
	if depth <= 0 || maxSGE <= 0 {
		return nil, fmt.Errorf("engine: bad SRQ size %d/%d", depth, maxSGE)
	}
	return &SRQ{host: h, pd: pd, rq: newRecvQueue(depth, maxSGE), maxSGE: maxSGE}, nil
}

// PostRecv validates a receive work request and queues it on the SRQ.
func (s *SRQ) PostRecv(wr *RecvWR) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rq.full() {
		return ErrQueueFull
	}
	if len(wr.SGL) > s.maxSGE {
		return ErrTooManySGE
	}
	r := s.rq.push()
	r.id = wr.ID
	for _, sge := range wr.SGL {
		b, err := s.host.mem.LocalCached(&s.keys, s.pd, sge, true)
		if err != nil {
			s.rq.tail--
			return fmt.Errorf("engine: receive SGE (addr 0x%x, length %d, lkey 0x%x): %w", sge.Addr, sge.Length, sge.LKey, err)
		}
		r.segs = append(r.segs, b)
		r.length += len(b)
	}
	return nil
}

// Len returns the number of posted receives.
func (s *SRQ) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rq.len()
}

// Cap returns the SRQ's depth.
func (s *SRQ) Cap() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rq.depth
}

// SetLimit arms the SRQ limit: when fewer than limit receives remain, one
// SRQ_LIMIT_REACHED event is raised and the limit disarms. 0 disarms it.
// It fails when limit exceeds the depth.
func (s *SRQ) SetLimit(limit int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit < 0 || limit > s.rq.depth {
		return fmt.Errorf("engine: SRQ limit %d above depth %d", limit, s.rq.depth)
	}
	s.limit = limit
	return nil
}

// Limit returns the armed limit (0 when disarmed).
func (s *SRQ) Limit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit
}

// Resize changes the depth; it fails if more receives are posted than fit.
func (s *SRQ) Resize(depth int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if depth < s.rq.len() || depth <= 0 {
		return fmt.Errorf("engine: SRQ depth %d below the %d receives posted", depth, s.rq.len())
	}
	nq := newRecvQueue(depth, s.maxSGE)
	for !s.rq.empty() {
		r := s.rq.pop()
		n := nq.push()
		n.id, n.length = r.id, r.length
		n.segs = append(n.segs, r.segs...)
	}
	s.rq = nq
	return nil
}

// take copies the oldest receive into dst and removes it, raising the limit
// event when the queue falls below the armed limit.
func (s *SRQ) take(dst *recvWQE) bool {
	s.mu.Lock()
	if s.rq.empty() {
		s.mu.Unlock()
		return false
	}
	dst.copyFrom(s.rq.pop())
	fire := s.limit > 0 && s.rq.len() < s.limit
	if fire {
		s.limit = 0
	}
	s.mu.Unlock()
	if fire {
		s.host.event(Event{Type: EventSRQLimitReached, SRQ: s})
	}
	return true
}
