package verbs_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// TestSnapshot counts a context's objects and lists its QPs, in Snapshot
// and on the process's statistics socket alike, and follows their
// destruction.
func TestSnapshot(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	c := openContext(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(make([]byte, 64), verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQ(verbs.SRQAttr{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	find := func(s verbs.ProcessSnapshot) *verbs.ContextSnapshot {
		for i := range s.Contexts {
			if s.Contexts[i].Device == c.Device().Name() {
				return &s.Contexts[i]
			}
		}
		t.Fatalf("no context of %s in %+v", c.Device().Name(), s)
		return nil
	}
	check := func(where string, cs *verbs.ContextSnapshot, pds, cqs, mrs, srqs int64, qps int) {
		t.Helper()
		if cs.PDs != pds || cs.CQs != cqs || cs.MRs != mrs || cs.SRQs != srqs || len(cs.QPs) != qps {
			t.Errorf("%s: pd %d cq %d mr %d srq %d qp %d; want %d %d %d %d %d", where, cs.PDs, cs.CQs, cs.MRs, cs.SRQs, len(cs.QPs), pds, cqs, mrs, srqs, qps)
		}
	}
	s := verbs.Snapshot()
	if s.PID != os.Getpid() {
		t.Errorf("PID %d", s.PID)
	}
	cs := find(s)
	check("Snapshot", cs, 1, 1, 1, 1, 1)
	if q := cs.QPs[0]; q.QPN != qp.QPN() || q.Type != "UD" || q.State != "RESET" {
		t.Errorf("QP %+v, want QPN %d UD RESET", q, qp.QPN())
	}

	conn, err := net.DialTimeout("unix", filepath.Join(verbs.StatsDir(), fmt.Sprintf("%d.sock", os.Getpid())), 5*time.Second)
	if err != nil {
		t.Fatalf("statistics socket: %v", err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var fromSock verbs.ProcessSnapshot
	err = json.NewDecoder(conn).Decode(&fromSock)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	check("socket", find(fromSock), 1, 1, 1, 1, 1)

	qp.Destroy()
	srq.Destroy()
	mr.Dereg()
	cq.Destroy()
	pd.Dealloc()
	check("after destroying", find(verbs.Snapshot()), 0, 0, 0, 0, 0)
}
