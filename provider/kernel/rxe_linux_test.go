//go:build linux

package kernel

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/rdma-go/rdma-go/provider"
)

// TestConformanceRXERings: on an rdma_rxe device (RDMA_GO_TEST_DEVICE=rxe0,
// as the lab runs it), CQs and QPs find their rings, so posting and polling
// take the fast path; SRQ-attached QPs have no receive ring, UD QPs no send
// ring; a resized CQ finds its new ring.
func TestConformanceRXERings(t *testing.T) {
	name := os.Getenv("RDMA_GO_TEST_DEVICE")
	if name == "" {
		t.Skip("RDMA_GO_TEST_DEVICE names no kernel device")
	}
	haveLib(t)
	ds, err := Provider{}.Devices()
	if err != nil {
		t.Fatal(err)
	}
	var dev provider.Device
	for _, d := range ds {
		if d.Name() == name {
			dev = d
		}
	}
	if dev == nil {
		t.Skipf("%s is not a kernel device", name)
	}
	pc, err := dev.Open(func(provider.AsyncEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	c := pc.(*Context)
	t.Cleanup(func() { c.Close() })
	if !c.rxe {
		t.Skipf("%s is not an rxe device", name)
	}
	ppd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ppd.Dealloc() })
	pcq, err := c.CreateCQ(64, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pcq.Destroy() })
	q := pcq.(*cq)
	if q.ring.base == 0 {
		t.Fatal("CQ: no ring found")
	}
	old := q.ring.base
	if err := q.Resize(1000); err != nil {
		t.Fatal(err)
	}
	if q.ring.base == 0 || q.ring.base == old || int(q.ring.mask) < 1000 {
		t.Fatalf("resized CQ: ring %#x (was %#x), mask %d", q.ring.base, old, q.ring.mask)
	}
	srq, err := ppd.CreateSRQ(provider.SRQAttr{MaxWR: 16, MaxSGE: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srq.Destroy() })
	cp := provider.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	for _, tc := range []struct {
		name   string
		typ    provider.QPType
		srq    provider.SRQ
		sq, rq bool
	}{
		{"RC", provider.QPTypeRC, nil, true, true},
		{"UC", provider.QPTypeUC, nil, true, true},
		{"UD", provider.QPTypeUD, nil, false, true},
		{"RC with SRQ", provider.QPTypeRC, srq, true, false},
	} {
		p, err := ppd.CreateQP(&provider.QPInitAttr{Type: tc.typ, SendCQ: pcq, RecvCQ: pcq, SRQ: tc.srq, Cap: cp}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		x := p.(*qp).rxe
		p.Destroy()
		if (x.sq.base != 0) != tc.sq || (x.rq.base != 0) != tc.rq {
			t.Errorf("%s QP: send ring %#x, receive ring %#x; want send %v, receive %v", tc.name, x.sq.base, x.rq.base, tc.sq, tc.rq)
		}
	}
}

// fakeRing lays out an rxe queue of n elements of 2^shift bytes in memory
// from Alloc, as the kernel would map it.
func fakeRing(t *testing.T, n int, shift uint32) rxeRing {
	t.Helper()
	mem, err := Alloc(rxeQData + n<<shift)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Free(mem) })
	r := rxeRing{base: uintptr(unsafe.Pointer(&mem[0])), mask: uint32(n - 1), shift: shift}
	*(*uint32)(cptr(r.base + rxeQLog2ElemSize)) = shift
	*(*uint32)(cptr(r.base + rxeQIndexMask)) = r.mask
	return r
}

// TestRXERingsWithoutKernel: the fast path's ring code on memory laid out
// as rxe's queues, without a device: WQEs hold what rdma-core's rxe
// provider writes, a full ring stops a chain with ErrNoMemory at the first
// that does not fit, a refused work request stops it before anything after
// it, completions come out in order, and nothing allocates.
func TestRXERingsWithoutKernel(t *testing.T) {
	x := &rxeQP{maxSendSGE: 2, maxRecvSGE: 2, maxInline: 64}
	x.sq = fakeRing(t, 4, 8) // room for 3
	inline := []byte("inline data!")
	wrs := []provider.SendWR{
		{ID: 1, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled, RemoteAddr: 0x1000, RKey: 0x77,
			SGL: []provider.SGE{{Addr: 0x5000, Length: 100, LKey: 9}, {Addr: 0x6000, Length: 28, LKey: 9}}},
		{ID: 2, Opcode: provider.WRSendWithImm, ImmData: 0x01020304, Flags: provider.SendInline,
			SGL: []provider.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&inline[0]))), Length: uint32(len(inline))}}},
		{ID: 3, Opcode: provider.WRAtomicFetchAndAdd, RemoteAddr: 0x2000, RKey: 0x88, CompareAdd: 5,
			SGL: []provider.SGE{{Addr: 0x7000, Length: 8, LKey: 9}}},
		{ID: 4, Opcode: provider.WRSend},
	}
	n, err := x.fillSend(wrs)
	if n != 3 || !errors.Is(err, provider.ErrNoMemory) {
		t.Fatalf("4 sends into a ring of 3: %d, %v; want 3 and ErrNoMemory", n, err)
	}
	if p := x.sq.producer().Load(); p != 3 {
		t.Fatalf("producer index %d, want 3", p)
	}
	e := (*rxeSendWQE)(cptr(x.sq.slot(0)))
	sge := unsafe.Slice((*cSGE)(cptr(x.sq.slot(0)+unsafe.Sizeof(rxeSendWQE{}))), 2)
	if e.WRID != 1 || e.Opcode != uint32(provider.WRRDMAWrite) || e.RemoteAddr != 0x1000 || uint32(e.CompareAdd) != 0x77 ||
		e.IOVA != 0x1000 || e.DMA != (rxeDMA{Length: 128, Resid: 128, NumSGE: 2}) || sge[1] != (cSGE{Addr: 0x6000, Length: 28, LKey: 9}) {
		t.Fatalf("WRITE WQE %+v, SGEs %+v", *e, sge)
	}
	e = (*rxeSendWQE)(cptr(x.sq.slot(1)))
	data := unsafe.Slice((*byte)(cptr(x.sq.slot(1)+unsafe.Sizeof(rxeSendWQE{}))), len(inline))
	if e.Ex != 0x04030201 || e.DMA.Length != uint32(len(inline)) || string(data) != string(inline) || e.SSN != 1 {
		t.Fatalf("inline SEND WQE %+v, data %q", *e, data)
	}
	e = (*rxeSendWQE)(cptr(x.sq.slot(2)))
	if e.RemoteAddr != 0x2000 || e.CompareAdd != 5 || e.AtomicRKey != 0x88 || e.IOVA != 0x2000 {
		t.Fatalf("atomic WQE %+v", *e)
	}

	// The kernel consumes two; a chain whose second is refused posts one.
	x.sq.consumer().Store(2)
	bad := []provider.SendWR{{ID: 5, Opcode: provider.WRSend}, {ID: 6, Opcode: provider.WRSend, SGL: make([]provider.SGE, 3)}, {ID: 7}}
	if n, err := x.fillSend(bad); n != 1 || !errors.Is(err, provider.ErrInvalidArgument) {
		t.Fatalf("a chain with 3 SGEs in its second: %d, %v; want 1 and ErrInvalidArgument", n, err)
	}

	x.rq = fakeRing(t, 8, 6)
	recv := []provider.RecvWR{{ID: 10, SGL: []provider.SGE{{Addr: 0x9000, Length: 4096, LKey: 3}}}}
	allocs := testing.AllocsPerRun(100, func() {
		x.sq.consumer().Store(x.sq.producer().Load())
		x.rq.consumer().Store(x.rq.producer().Load())
		if n, err := x.fillSend(wrs[:1]); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		if n, err := x.fillRecv(recv); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("posting a send and a receive allocates %.1f times", allocs)
	}
	re := (*rxeRecvWQE)(cptr(x.rq.slot(x.rq.producer().Load() - 1)))
	if re.WRID != 10 || re.DMA != (rxeDMA{Length: 4096, Resid: 4096, NumSGE: 1}) {
		t.Fatalf("receive WQE %+v", *re)
	}

	// Completions: three queued by "the kernel", polled two and one.
	q := &cq{ring: fakeRing(t, 8, 6)}
	for i := range 3 {
		*(*cWC)(cptr(q.ring.slot(uint32(i)))) = cWC{WRID: uint64(100 + i), ByteLen: uint32(i), QPNum: 0x11}
	}
	q.ring.producer().Store(3)
	wc := make([]provider.WC, 2)
	if got := q.pollRing(wc); got != 2 || wc[0].WRID != 100 || wc[1].WRID != 101 || wc[1].ByteLen != 1 {
		t.Fatalf("pollRing: %d %+v", got, wc)
	}
	if got := q.pollRing(wc); got != 1 || wc[0].WRID != 102 || q.ring.consumer().Load() != 3 {
		t.Fatalf("pollRing again: %d %+v, consumer %d", got, wc[:got], q.ring.consumer().Load())
	}
	if got := q.pollRing(wc); got != 0 {
		t.Fatalf("pollRing of an empty ring: %d", got)
	}
}
