package verbs

import (
	"sync"

	"github.com/rdma-go/rdma-go/engine"
)

// SRQAttr holds shared receive queue attributes (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR    uint32
	MaxSGE   uint32
	SRQLimit uint32
}

// SRQAttrMask selects SRQ attributes to modify (enum ibv_srq_attr_mask).
type SRQAttrMask uint32

// SRQ attribute mask bits.
const (
	SRQMaxWR SRQAttrMask = 1 << 0
	SRQLimit SRQAttrMask = 1 << 1
)

// Device limits for SRQs.
const (
	maxSRQ    = 1 << 16
	maxSRQWR  = 1 << 14
	maxSRQSGE = maxSGE
)

// SRQ is a shared receive queue (ibv_srq): receives that any attached QP
// consumes.
type SRQ struct {
	pd  *PD
	e   *engine.SRQ
	sge uint32

	mu        sync.Mutex
	users     int
	destroyed bool
}

// CreateSRQ creates a shared receive queue (ibv_create_srq). A non-zero
// SRQLimit arms the limit event at once.
func (pd *PD) CreateSRQ(attr SRQAttr) (*SRQ, error) {
	if err := pd.ctx.check(); err != nil {
		return nil, err
	}
	if attr.MaxWR == 0 || attr.MaxWR > maxSRQWR || attr.MaxSGE > maxSRQSGE {
		return nil, verrorf(ErrInvalidArgument, "SRQ max_wr %d / max_sge %d out of range 1..%d / 0..%d", attr.MaxWR, attr.MaxSGE, maxSRQWR, maxSRQSGE)
	}
	if attr.SRQLimit > attr.MaxWR {
		return nil, verrorf(ErrInvalidArgument, "SRQ limit %d above max_wr %d", attr.SRQLimit, attr.MaxWR)
	}
	sge := max(attr.MaxSGE, 1)
	if err := pd.use(0, 1); err != nil {
		return nil, err
	}
	e, err := pd.ctx.host().CreateSRQ(pd.handle, int(attr.MaxWR), int(sge))
	if err != nil {
		pd.use(0, -1)
		return nil, verrorf(ErrNoMemory, "create SRQ: %v", err)
	}
	s := &SRQ{pd: pd, e: e, sge: sge}
	e.Owner = s
	if attr.SRQLimit > 0 {
		e.SetLimit(int(attr.SRQLimit))
	}
	return s, nil
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv).
func (s *SRQ) PostRecv(wrs ...RecvWR) error {
	if s.isDestroyed() {
		return &PostError{Index: 0, Err: verrorf(ErrClosed, "SRQ destroyed")}
	}
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGL) > int(s.sge) {
			return &PostError{Index: i, Err: verrorf(ErrInvalidArgument, "%d SGEs, SRQ allows %d", len(wr.SGL), s.sge)}
		}
		if err := s.e.PostRecv(&engine.RecvWR{ID: wr.ID, SGL: engineSGL(wr.SGL)}); err != nil {
			return &PostError{Index: i, Err: postErr(err)}
		}
	}
	return nil
}

// Modify changes the SRQ's size (SRQMaxWR, which may only grow) or arms its
// limit (SRQLimit) (ibv_modify_srq).
func (s *SRQ) Modify(attr SRQAttr, mask SRQAttrMask) error {
	if s.isDestroyed() {
		return verrorf(ErrClosed, "SRQ destroyed")
	}
	if mask&^(SRQMaxWR|SRQLimit) != 0 {
		return verrorf(ErrInvalidArgument, "unknown SRQ attribute mask %#x", uint32(mask))
	}
	if mask&SRQMaxWR != 0 {
		if attr.MaxWR == 0 || attr.MaxWR > maxSRQWR || int(attr.MaxWR) < s.e.Cap() {
			return verrorf(ErrInvalidArgument, "SRQ max_wr %d: must be %d..%d", attr.MaxWR, s.e.Cap(), maxSRQWR)
		}
		if err := s.e.Resize(int(attr.MaxWR)); err != nil {
			return verrorf(ErrInvalidArgument, "%v", err)
		}
	}
	if mask&SRQLimit != 0 {
		if err := s.e.SetLimit(int(attr.SRQLimit)); err != nil {
			return verrorf(ErrInvalidArgument, "SRQ limit %d above max_wr %d", attr.SRQLimit, s.e.Cap())
		}
	}
	return nil
}

// Query returns the SRQ's attributes (ibv_query_srq).
func (s *SRQ) Query() (SRQAttr, error) {
	if s.isDestroyed() {
		return SRQAttr{}, verrorf(ErrClosed, "SRQ destroyed")
	}
	return SRQAttr{MaxWR: uint32(s.e.Cap()), MaxSGE: s.sge, SRQLimit: uint32(s.e.Limit())}, nil
}

// Len returns the number of receives posted and not yet consumed.
func (s *SRQ) Len() int { return s.e.Len() }

// Destroy destroys the SRQ (ibv_destroy_srq); it fails with ErrBusy while
// QPs are attached.
func (s *SRQ) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return verrorf(ErrClosed, "SRQ already destroyed")
	}
	if s.users > 0 {
		return verrorf(ErrBusy, "SRQ still used by %d QP(s)", s.users)
	}
	s.destroyed = true
	s.pd.use(0, -1)
	return nil
}

func (s *SRQ) isDestroyed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.destroyed
}

func (s *SRQ) use(d int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return verrorf(ErrClosed, "SRQ destroyed")
	}
	s.users += d
	return nil
}
