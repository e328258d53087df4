package verbs

import (
	"sync"

	"github.com/rdma-go/rdma-go/provider"
)

// SRQ is a shared receive queue (ibv_srq): receives that any attached QP
// consumes.
type SRQ struct {
	pd  *PD
	p   provider.SRQ
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
	maxWR, maxSGE := uint32(pd.ctx.attr.MaxSRQWR), uint32(pd.ctx.attr.MaxSRQSGE)
	if attr.MaxWR == 0 || attr.MaxWR > maxWR || attr.MaxSGE > maxSGE {
		return nil, verrorf(ErrInvalidArgument, "SRQ max_wr %d / max_sge %d out of range 1..%d / 0..%d", attr.MaxWR, attr.MaxSGE, maxWR, maxSGE)
	}
	if attr.SRQLimit > attr.MaxWR {
		return nil, verrorf(ErrInvalidArgument, "SRQ limit %d above max_wr %d", attr.SRQLimit, attr.MaxWR)
	}
	sge := max(attr.MaxSGE, 1)
	if err := pd.use(0, 1); err != nil {
		return nil, err
	}
	s := &SRQ{pd: pd, sge: sge}
	p, err := pd.p.CreateSRQ(attr, s)
	if err != nil {
		pd.use(0, -1)
		return nil, err
	}
	pd.ctx.res[resSRQ].Add(1)
	s.p = p
	return s, nil
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv).
func (s *SRQ) PostRecv(wrs ...RecvWR) error {
	if s.isDestroyed() {
		return &PostError{Index: 0, Err: verrorf(ErrClosed, "SRQ destroyed")}
	}
	bad := len(wrs)
	for i := range wrs {
		if len(wrs[i].SGL) > int(s.sge) {
			bad = i
			break
		}
	}
	if bad > 0 {
		if n, err := s.p.PostRecv(noescape(wrs[:bad])); err != nil {
			return &PostError{Index: n, Err: err}
		}
	}
	if bad < len(wrs) {
		return &PostError{Index: bad, Err: verrorf(ErrInvalidArgument, "%d SGEs, SRQ allows %d", len(wrs[bad].SGL), s.sge)}
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
	return s.p.Modify(attr, mask)
}

// Query returns the SRQ's attributes (ibv_query_srq).
func (s *SRQ) Query() (SRQAttr, error) {
	if s.isDestroyed() {
		return SRQAttr{}, verrorf(ErrClosed, "SRQ destroyed")
	}
	return s.p.Query()
}

// Len returns the number of receives posted and not yet consumed.
func (s *SRQ) Len() int { return s.p.Len() }

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
	if err := s.p.Destroy(); err != nil {
		return err
	}
	s.destroyed = true
	s.pd.use(0, -1)
	s.pd.ctx.res[resSRQ].Add(-1)
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
