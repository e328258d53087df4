package verbs_test

import (
	"errors"
	"testing"

	"github.com/rdma-go/rdma-go/verbs"
)

// TestPDDeallocBusy: a PD cannot go while an object made from it lives
// (ibv_dealloc_pd returns EBUSY), and can once they are gone.
func TestPDDeallocBusy(t *testing.T) {
	ctx := openContext(t)
	gid, err := ctx.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	for _, c := range []struct {
		name string
		make func(pd *verbs.PD) (destroy func() error, err error)
	}{
		{"MR", func(pd *verbs.PD) (func() error, error) {
			mr, err := pd.RegMR(make([]byte, 64), verbs.AccessLocalWrite)
			if err != nil {
				return nil, err
			}
			return mr.Dereg, nil
		}},
		{"MW", func(pd *verbs.PD) (func() error, error) {
			mw, err := pd.AllocMW(verbs.MWType2)
			if err != nil {
				return nil, err
			}
			return mw.Dealloc, nil
		}},
		{"AH", func(pd *verbs.PD) (func() error, error) {
			ah, err := pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 1}})
			if err != nil {
				return nil, err
			}
			return ah.Destroy, nil
		}},
		{"QP", func(pd *verbs.PD) (func() error, error) {
			qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
				Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				return nil, err
			}
			return qp.Destroy, nil
		}},
		{"SRQ", func(pd *verbs.PD) (func() error, error) {
			srq, err := pd.CreateSRQ(verbs.SRQAttr{MaxWR: 4, MaxSGE: 1})
			if err != nil {
				return nil, err
			}
			return srq.Destroy, nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pd, err := ctx.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			destroy, err := c.make(pd)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if err := pd.Dealloc(); !errors.Is(err, verbs.ErrBusy) {
				t.Fatalf("Dealloc with a live %s: %v, want ErrBusy", c.name, err)
			}
			if err := destroy(); err != nil {
				t.Fatalf("destroy: %v", err)
			}
			if err := pd.Dealloc(); err != nil {
				t.Fatalf("Dealloc after the %s went: %v", c.name, err)
			}
		})
	}
}
