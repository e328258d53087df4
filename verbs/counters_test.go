package verbs_test

import (
	"testing"

	"github.com/rdma-go/rdma-go/verbs"
)

// TestCountersRemoteAccess: a WRITE with a wrong R_Key is counted on both
// sides, on the port and on the QP, under distinct names.
func TestCountersRemoteAccess(t *testing.T) {
	t.Parallel()
	a, b := newRCPair(t)
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x100})
	checkWC(t, a.sendWCs(t, 1)[0], 1, verbs.WCRemAccessErr, 0)
	stateIs(t, b.qp, verbs.QPStateErr)

	bp, err := b.ctx.QueryPortCounters(1)
	if err != nil {
		t.Fatal(err)
	}
	ap, err := a.ctx.QueryPortCounters(1)
	if err != nil {
		t.Fatal(err)
	}
	bq, aq := b.qp.Counters(), a.qp.Counters()
	for _, c := range []struct {
		what string
		got  uint64
	}{
		{"B port RemoteAccessNAKsSent", bp.RemoteAccessNAKsSent},
		{"B QP RemoteAccessNAKsSent", bq.RemoteAccessNAKsSent},
		{"B port RequestErrors", bp.RequestErrors},
		{"B QP RequestErrors", bq.RequestErrors},
		{"A port RemoteAccessNAKsReceived", ap.RemoteAccessNAKsReceived},
		{"A QP RemoteAccessNAKsReceived", aq.RemoteAccessNAKsReceived},
	} {
		if c.got != 1 {
			t.Errorf("%s = %d, want 1", c.what, c.got)
		}
	}
	if bp.InvalidRequestNAKsSent != 0 || bp.RemoteOpNAKsSent != 0 || aq.InvalidRequestNAKsReceived != 0 {
		t.Errorf("other NAK kinds counted: %+v / %+v", bp, aq)
	}
	if bq.Received == 0 || bp.Received < bq.Received || aq.Sent == 0 {
		t.Errorf("packets: B port %d QP %d received, A QP %d sent", bp.Received, bq.Received, aq.Sent)
	}

	// The named list: rxe's counters first, in rxe's order.
	l := bp.List()
	if len(l) < 15 || l[0].Name != "sent_pkts" || l[1].Name != "rcvd_pkts" || l[14].Name != "rdma_recvs" {
		t.Fatalf("List() = %v", l)
	}
	found := false
	for _, c := range l {
		if c.Name == "send_rem_access_err" {
			found = c.Value == 1
		}
	}
	if !found {
		t.Errorf("List() has no send_rem_access_err = 1: %v", l)
	}
	if _, err := b.ctx.QueryPortCounters(2); err == nil {
		t.Error("QueryPortCounters(2) succeeded")
	}
}
