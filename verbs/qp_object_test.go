package verbs

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestSoftQPIsOneObject checks that a soft device's QP and the provider's
// QP behind it are one allocation: the provider's object lies inside the
// softQP that holds verbs' QP, so a post finds the provider's state next
// to verbs' own instead of behind a pointer to somewhere else in memory.
func TestSoftQPIsOneObject(t *testing.T) {
	t.Parallel()
	_, c := openLoopback(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Destroy()
	start := uintptr(unsafe.Pointer(qp))
	end := start + unsafe.Sizeof(softQP{})
	prov := reflect.ValueOf(qp.p).Pointer() // the provider's QP object
	if prov < start+unsafe.Offsetof(softQP{}.prov) || prov >= end {
		t.Fatalf("provider QP at %#x, outside the softQP at %#x–%#x", prov, start, end)
	}
}
