//go:build !race

// The race detector allocates on its own (sync.Pool, for one, drops items).

package verbs_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// TestPostSendSGLLiteralNoAlloc checks that a PostSend whose work request
// carries a fresh SGL literal does not allocate, nor does polling for its
// completion: nothing keeps a pointer to the caller's SGL.
func TestPostSendSGLLiteralNoAlloc(t *testing.T) {
	a, b := newRCPair(t)
	wc := make([]verbs.WC, 4)
	remote, rkey := b.mr.Addr(), b.mr.RKey()
	allocs := testing.AllocsPerRun(100, func() {
		err := a.qp.PostSend(verbs.SendWR{ID: 7, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: remote, RKey: rkey})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(wcTimeout)
		for {
			n, err := a.scq.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				if wc[0].Status != verbs.WCSuccess {
					t.Fatalf("completion %+v", wc[0])
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no completion")
			}
			// AllocsPerRun runs with GOMAXPROCS=1: drive B's device
			// (an empty CQ's Poll receives for it) and yield.
			b.rcq.Poll(wc[2:])
			runtime.Gosched()

		}
	})
	if allocs != 0 {
		t.Fatalf("PostSend with an SGL literal and its completion: %v allocations, want 0", allocs)
	}
}
