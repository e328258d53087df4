// Command quickstart moves data between two soft RoCEv2 devices in one
// process over real UDP on loopback: a SEND with immediate data, an RDMA
// WRITE, an RDMA READ and an atomic FETCH_AND_ADD, printing what happened.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// end is one side: a device context, PD, CQ, memory and an RC QP.
type end struct {
	name string
	ctx  *verbs.Context
	pd   *verbs.PD
	ch   *verbs.CompChannel
	cq   *verbs.CQ
	qp   *verbs.QP
	mr   *verbs.MR
	gid  verbs.GID
	psn  uint32
}

func main() {
	if err := run(verbs.AddLoopbackDevice); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run is the program. addDevice makes its two soft devices: in main each
// takes its own free loopback address (verbs.AddLoopbackDevice).
func run(addDevice func(name string) (*verbs.Device, error)) error {
	var ends [2]*end
	for i, name := range []string{"qs-a", "qs-b"} {
		dev, err := addDevice(name)
		if err != nil {
			return err
		}
		e, err := open(dev)
		if err != nil {
			return err
		}
		defer e.close()
		ends[i] = e
		fmt.Printf("%s: device %s, GID %s, QPN 0x%06x, PSN 0x%06x\n", e.name, dev.Name(), e.gid, e.qp.QPN(), e.psn)
	}
	a, b := ends[0], ends[1]
	if err := connect(a, b); err != nil {
		return err
	}
	if err := connect(b, a); err != nil {
		return err
	}
	fmt.Println("connected: both RC QPs in RTS")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// 1. SEND with immediate data: B posts a receive, A sends.
	msg := []byte("hello over RoCEv2 from a Go soft device")
	copy(a.mr.Bytes(), msg)
	if err := b.qp.PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{b.mr.SGE(0, 4096)}}); err != nil {
		return err
	}
	if err := a.qp.PostSend(verbs.SendWR{ID: 10, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled,
		ImmData: 0x1234abcd, SGL: []verbs.SGE{a.mr.SGE(0, len(msg))}}); err != nil {
		return err
	}
	wcA, err := wait(ctx, a)
	if err != nil {
		return err
	}
	wcB, err := wait(ctx, b)
	if err != nil {
		return err
	}
	fmt.Printf("SEND:  A completed %s; B received %d bytes, imm 0x%08x: %q\n",
		wcA.Status, wcB.ByteLen, wcB.ImmData, b.mr.Bytes()[:wcB.ByteLen])

	// 2. RDMA WRITE 64 KiB from A into B's memory at offset 8192.
	const n = 64 << 10
	src := a.mr.Bytes()[8192 : 8192+n]
	for i := range src {
		src[i] = byte(i * 31)
	}
	if err := a.qp.PostSend(verbs.SendWR{ID: 11, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(8192, n)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()}); err != nil {
		return err
	}
	if wcA, err = wait(ctx, a); err != nil {
		return err
	}
	fmt.Printf("WRITE: %d bytes A→B, %s, B's memory matches: %v\n", n, wcA.Status, equal(src, b.mr.Bytes()[8192:8192+n]))

	// 3. RDMA READ the same 64 KiB back from B into A at offset 1 MiB/2.
	const back = 512 << 10
	if err := a.qp.PostSend(verbs.SendWR{ID: 12, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(back, n)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()}); err != nil {
		return err
	}
	if wcA, err = wait(ctx, a); err != nil {
		return err
	}
	fmt.Printf("READ:  %d bytes B→A, %s, data matches: %v\n", wcA.ByteLen, wcA.Status, equal(src, a.mr.Bytes()[back:back+n]))

	// 4. Atomic FETCH_AND_ADD on an 8-byte counter in B's memory.
	counter := b.mr.Bytes()[256 : 256+8]
	binary.NativeEndian.PutUint64(counter, 40)
	if err := a.qp.PostSend(verbs.SendWR{ID: 13, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(64, 8)}, RemoteAddr: b.mr.Addr() + 256, RKey: b.mr.RKey(), CompareAdd: 2}); err != nil {
		return err
	}
	if wcA, err = wait(ctx, a); err != nil {
		return err
	}
	fmt.Printf("ATOMIC FETCH_AND_ADD(+2): %s, old value %d, B's counter now %d\n", wcA.Status,
		binary.NativeEndian.Uint64(a.mr.Bytes()[64:72]), binary.NativeEndian.Uint64(counter))

	sa, err := a.ctx.QueryPortCounters(1)
	if err != nil {
		return err
	}
	sb, err := b.ctx.QueryPortCounters(1)
	if err != nil {
		return err
	}
	fmt.Printf("packets: A sent %d received %d, B sent %d received %d (UDP port 4791, an ICRC on every packet)\n",
		sa.Sent, sa.Received, sb.Sent, sb.Received)
	return nil
}

func open(dev *verbs.Device) (*end, error) {
	e := &end{name: dev.Name(), psn: rand.Uint32() & 0xFFFFFF}
	var err error
	if e.ctx, err = dev.Open(); err != nil {
		return nil, err
	}
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return nil, err
	}
	if e.ch, err = e.ctx.CreateCompChannel(); err != nil {
		return nil, err
	}
	if e.cq, err = e.ctx.CreateCQ(64, e.ch); err != nil {
		return nil, err
	}
	if e.mr, err = e.pd.RegMR(make([]byte, 1<<20),
		verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic); err != nil {
		return nil, err
	}
	if e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, err
	}
	if e.gid, err = e.ctx.QueryGID(1, 1); err != nil {
		return nil, err
	}
	return e, nil
}

// connect moves e's QP to RTS aimed at peer, with rc_pingpong's attributes.
func connect(e, peer *end) error {
	err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1,
		AccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags)
	if err != nil {
		return err
	}
	err = e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTU4096, DestQPN: peer.qp.QPN(),
		RQPSN: peer.psn, MaxDestRDAtomic: 1, MinRNRTimer: 12,
		AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: peer.gid, SGIDIndex: 1, HopLimit: 1}}},
		verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
			verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer)
	if err != nil {
		return err
	}
	return e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: e.psn, Timeout: 14, RetryCnt: 7,
		RNRRetry: 7, MaxRDAtomic: 1},
		verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|
			verbs.QPAttrMaxQPRDAtomic)
}

// wait blocks on the completion channel until e's CQ has a completion.
func wait(ctx context.Context, e *end) (verbs.WC, error) {
	var wc [1]verbs.WC
	for armed := false; ; armed = true {
		n, err := e.cq.Poll(wc[:])
		if err != nil {
			return wc[0], err
		}
		if n == 1 {
			if wc[0].Status != verbs.WCSuccess {
				return wc[0], fmt.Errorf("work request %d failed: %s", wc[0].WRID, wc[0].Status)
			}
			return wc[0], nil
		}
		if !armed {
			// Arm, then poll again: a completion that landed in
			// between is found by that poll, not lost.
			if err := e.cq.ReqNotify(false); err != nil {
				return wc[0], err
			}
			continue
		}
		cq, err := e.ch.GetEvent(ctx)
		if err != nil {
			return wc[0], fmt.Errorf("%s: waiting for a completion: %w", e.name, err)
		}
		cq.AckEvents(1)
		armed = false
	}
}

func (e *end) close() {
	e.qp.Destroy()
	e.mr.Dereg()
	e.cq.Destroy()
	e.ch.Destroy()
	e.pd.Dealloc()
	e.ctx.Close()
}

func equal(a, b []byte) bool { return string(a) == string(b) }
