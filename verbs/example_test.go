package verbs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// loopbackAddr returns a random loopback address for the soft device of an
// example that sends packets: 127.x.y.z outside 127.0.0.0/24, where the
// automatically addressed devices of other processes live (the range of
// internal/testdev's devices). A program of your own would rather call
// verbs.AddLoopbackDevice or configure its devices (see Devices).
func loopbackAddr() netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
}

// The objects of a verbs program, in the order libibverbs programs make
// them: open a device, allocate a protection domain, register memory,
// create a completion queue and a queue pair. Close them in reverse order.
func Example() {
	devs, err := verbs.Devices() // ibv_get_device_list
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := devs[0].Open() // ibv_open_device
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()

	// A protection domain groups the memory regions and queue pairs that
	// may be used together.
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Dealloc()

	// Registering pins the buffer and gives it keys: the L_Key for this
	// side's work requests, the R_Key for the peer's RDMA WRITE and READ.
	buf := make([]byte, 4096)
	mr, err := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Dereg()

	// One completion queue for the sends and receives of the QP.
	cq, err := ctx.CreateCQ(16, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Destroy()

	qp, err := pd.CreateQP(verbs.QPInitAttr{
		Type:   verbs.QPTypeRC, // reliable connection
		SendCQ: cq,
		RecvCQ: cq,
		Cap:    verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Destroy()

	// The MR is buf itself, not a copy: the device reads and writes it.
	fmt.Printf("MR: %d bytes, the same memory as buf: %v\n", mr.Len(), &mr.Bytes()[0] == &buf[0])
	fmt.Printf("QP: %s, state %s, room for %d sends\n", qp.Type(), qp.State(), qp.Cap().MaxSendWR)
	// Output:
	// MR: 4096 bytes, the same memory as buf: true
	// QP: RC, state RESET, room for 8 sends
}

// List the devices, as ibv_devices does, and find one by name, as
// ibv_devinfo -d does.
func ExampleDevices() {
	devs, err := verbs.Devices()
	if err != nil {
		log.Fatal(err)
	}
	// The soft loopback device rgo0 comes first; the devices of
	// RDMA_GO_DEVICES, of the config file and of AddDevice follow, then
	// the kernel's (rxe0, mlx5_0, ...).
	fmt.Println("first device:", devs[0].Name())

	dev, err := verbs.DeviceByName(verbs.DefaultDeviceName)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("by name:", dev.Name())
	// Output:
	// first device: rgo0
	// by name: rgo0
}

// Open a device and query it, as ibv_devinfo does. On RoCE, GID index 1 of
// port 1 holds the device's IP address: the source GID to use.
func ExampleDevice_Open() {
	dev, err := verbs.DeviceByName(verbs.DefaultDeviceName)
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()

	attr, err := ctx.QueryDevice()
	if err != nil {
		log.Fatal(err)
	}
	port, err := ctx.QueryPort(1) // ports count from 1
	if err != nil {
		log.Fatal(err)
	}
	gid, err := ctx.QueryGID(1, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ports:", attr.PhysPortCnt)
	fmt.Println("port 1:", port.State, port.LinkLayer)
	fmt.Println("GID[1] is the device's address:", gid == verbs.GIDFromIP(dev.Addr()))
	// Output:
	// ports: 1
	// port 1: PORT_ACTIVE Ethernet
	// GID[1] is the device's address: true
}

// Access flags say what may touch a memory region. The local side always
// reads it; LOCAL_WRITE lets the device write into it (receives, READ
// results); the REMOTE_ flags let the peer WRITE, READ or use atomics on it
// with the R_Key. Grant no more than the region needs: a region that only
// sources SENDs needs no flag at all.
func ExamplePD_RegMR() {
	dev, err := verbs.DeviceByName(verbs.DefaultDeviceName)
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Dealloc()

	for _, access := range []verbs.AccessFlags{
		0,                       // sources SENDs and WRITEs
		verbs.AccessLocalWrite,  // receive buffers
		verbs.AccessRemoteRead,  // the peer may READ it
		verbs.AccessRemoteWrite, // invalid: remote write needs local write
		verbs.AccessLocalWrite | verbs.AccessRemoteWrite, // the peer may WRITE it
	} {
		mr, err := pd.RegMR(make([]byte, 4096), access)
		switch {
		case errors.Is(err, verbs.ErrInvalidArgument):
			fmt.Printf("%-25s refused: invalid argument\n", access)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("%-25s registered\n", access)
			mr.Dereg()
		}
	}
	// Output:
	// 0                         registered
	// LOCAL_WRITE               registered
	// REMOTE_READ               registered
	// REMOTE_WRITE              refused: invalid argument
	// LOCAL_WRITE|REMOTE_WRITE  registered
}

// Connect two RC queue pairs and move data between them: an RDMA WRITE
// into the peer's memory, then a SEND into a receive the peer posted. The
// two QPs are on one device here, as they could be on two hosts: each side
// needs the other's QP number, first PSN and GID (and, for the WRITE, a
// buffer's address and R_Key), which programs exchange out of band (TCP,
// or rdma_cm's private data; see package rdmacm).
func ExampleQP_PostSend() {
	dev, err := verbs.AddDevice("postsend", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Dealloc()
	gid, err := ctx.QueryGID(1, 1) // RoCEv2: GID index 1 is the device's IP address
	if err != nil {
		log.Fatal(err)
	}

	// Each side: a CQ, a buffer and an RC QP.
	type side struct {
		cq  *verbs.CQ
		mr  *verbs.MR
		qp  *verbs.QP
		psn uint32 // the first packet sequence number it sends
	}
	var a, b side
	for i, s := range []*side{&a, &b} {
		if s.cq, err = ctx.CreateCQ(16, nil); err != nil {
			log.Fatal(err)
		}
		defer s.cq.Destroy()
		if s.mr, err = pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
			log.Fatal(err)
		}
		defer s.mr.Dereg()
		s.qp, err = pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
			Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		defer s.qp.Destroy()
		s.psn = uint32(0x1000 * (i + 1)) // any 24-bit value; real programs pick a random one
	}

	// connect takes s's QP from RESET to RTS, aimed at the peer's QP.
	connect := func(s, peer *side) error {
		// RESET→INIT: the port, and what the peer may do to this side's
		// memory (here: RDMA WRITE). Receives may be posted from INIT.
		err := s.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1,
			AccessFlags: verbs.AccessRemoteWrite},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags)
		if err != nil {
			return fmt.Errorf("RESET→INIT: %w", err)
		}
		// INIT→RTR (ready to receive): where the peer is (its GID and QP
		// number), the PSN it starts with, the path MTU.
		err = s.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTU1024,
			DestQPN: peer.qp.QPN(), RQPSN: peer.psn, MaxDestRDAtomic: 1, MinRNRTimer: 12,
			AH: verbs.AHAttr{IsGlobal: true, PortNum: 1,
				GRH: verbs.GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 64}}},
			verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
				verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer)
		if err != nil {
			return fmt.Errorf("INIT→RTR: %w", err)
		}
		// RTR→RTS (ready to send): this side's first PSN, and how long and
		// how often to retry when the peer does not acknowledge.
		err = s.qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: s.psn,
			Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
			verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
				verbs.QPAttrRNRRetry|verbs.QPAttrMaxQPRDAtomic)
		if err != nil {
			return fmt.Errorf("RTR→RTS: %w", err)
		}
		return nil
	}
	if err := connect(&a, &b); err != nil {
		log.Fatal(err)
	}
	if err := connect(&b, &a); err != nil {
		log.Fatal(err)
	}
	fmt.Println("QPs:", a.qp.State(), b.qp.State())

	// Every wait is bounded.
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// poll returns the next completion of cq: Poll never blocks, and Wait
	// sleeps until the CQ has something.
	poll := func(cq *verbs.CQ) verbs.WC {
		wc := make([]verbs.WC, 1)
		for {
			n, err := cq.Poll(wc)
			if err != nil {
				log.Fatal(err)
			}
			if n == 1 {
				return wc[0]
			}
			if err := cq.Wait(wctx); err != nil {
				log.Fatal(err)
			}
		}
	}

	// RDMA WRITE: A's bytes land in B's memory; B's CPU is not involved
	// and B gets no completion. A signaled WR gives A a completion.
	n := copy(a.mr.Bytes(), "written by A")
	err = a.qp.PostSend(verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL:        []verbs.SGE{a.mr.SGE(0, n)},
		RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()})
	if err != nil {
		log.Fatal(err)
	}
	wc := poll(a.cq)
	fmt.Printf("A: WR %d %s %s; B's memory: %q\n", wc.WRID, wc.Opcode, wc.Status, b.mr.Bytes()[100:100+n])

	// SEND: B must have posted a receive for it; the receive completes on
	// B's CQ with the length received.
	if err := b.qp.PostRecv(verbs.RecvWR{ID: 2, SGL: []verbs.SGE{b.mr.SGE(0, 64)}}); err != nil {
		log.Fatal(err)
	}
	n = copy(a.mr.Bytes(), "hello, B")
	err = a.qp.PostSend(verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(0, n)}})
	if err != nil {
		log.Fatal(err)
	}
	wc = poll(a.cq)
	fmt.Printf("A: WR %d %s %s\n", wc.WRID, wc.Opcode, wc.Status)
	wc = poll(b.cq)
	fmt.Printf("B: WR %d %s %s, %d bytes: %q\n", wc.WRID, wc.Opcode, wc.Status, wc.ByteLen, b.mr.Bytes()[:wc.ByteLen])
	// Output:
	// QPs: RTS RTS
	// A: WR 1 RDMA_WRITE success; B's memory: "written by A"
	// A: WR 3 SEND success
	// B: WR 2 RECV success, 8 bytes: "hello, B"
}

// Poll drains completions in batches without blocking. Every work request
// completes, successfully or not: here a QP moved to the error state
// flushes the receives it holds, which is also what a program sees of its
// outstanding work when it tears a connection down. Check each status.
func ExampleCQ_Poll() {
	dev, err := verbs.DeviceByName(verbs.DefaultDeviceName)
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Dealloc()
	mr, err := pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Dereg()
	cq, err := ctx.CreateCQ(16, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Destroy()
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Destroy()

	// Receives may be posted from INIT on; post three at once.
	err = qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags)
	if err != nil {
		log.Fatal(err)
	}
	err = qp.PostRecv(
		verbs.RecvWR{ID: 1, SGL: []verbs.SGE{mr.SGE(0, 1024)}},
		verbs.RecvWR{ID: 2, SGL: []verbs.SGE{mr.SGE(1024, 1024)}},
		verbs.RecvWR{ID: 3, SGL: []verbs.SGE{mr.SGE(2048, 1024)}})
	if err != nil {
		log.Fatal(err)
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		log.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wcs := make([]verbs.WC, 2) // up to two per call
	for got := 0; got < 3; {
		n, err := cq.Poll(wcs)
		if err != nil {
			log.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			// Of a failed completion only WRID and Status are valid.
			fmt.Printf("WR %d: %s\n", wc.WRID, wc.Status)
		}
		got += n
		if n == 0 {
			if err := cq.Wait(wctx); err != nil { // nothing yet: sleep until there is
				log.Fatal(err)
			}
		}
	}
	// Output:
	// WR 1: Work Request Flushed Error
	// WR 2: Work Request Flushed Error
	// WR 3: Work Request Flushed Error
}

// A completion channel lets a program sleep until a CQ has work, as
// ibv_get_cq_event does: arm the CQ with ReqNotify, wait for its event
// with GetEvent, acknowledge it, re-arm, and poll. The QP here is
// connected to itself, the smallest setup that sends something.
func ExampleCompChannel_GetEvent() {
	dev, err := verbs.AddDevice("compchannel", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Dealloc()
	mr, err := pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Dereg()
	ch, err := ctx.CreateCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Destroy()
	cq, err := ctx.CreateCQ(16, ch) // the CQ reports to the channel
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Destroy()
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Destroy()
	gid, err := ctx.QueryGID(1, 1)
	if err != nil {
		log.Fatal(err)
	}
	const psn = 0x1234
	for _, m := range []struct {
		attr verbs.QPAttr
		mask verbs.QPAttrMask
	}{
		{verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1},
			verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrAccessFlags},
		{verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPN: qp.QPN(), RQPSN: psn,
			MinRNRTimer: 12, AH: verbs.AHAttr{IsGlobal: true, PortNum: 1,
				GRH: verbs.GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 64}}},
			verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN |
				verbs.QPAttrRQPSN | verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrMinRNRTimer},
		{verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
			verbs.QPAttrState | verbs.QPAttrSQPSN | verbs.QPAttrTimeout | verbs.QPAttrRetryCnt |
				verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRDAtomic},
	} {
		if err := qp.Modify(&m.attr, m.mask); err != nil {
			log.Fatal(err)
		}
	}

	// Arm the CQ before posting: its next completion sends one event to
	// the channel.
	if err := cq.ReqNotify(false); err != nil {
		log.Fatal(err)
	}

	// A SEND to itself: two completions, the receive's and the send's.
	n := copy(mr.Bytes(), "ping")
	if err := qp.PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{mr.SGE(1024, 1024)}}); err != nil {
		log.Fatal(err)
	}
	err = qp.PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{mr.SGE(0, n)}})
	if err != nil {
		log.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recv, send verbs.WC
	wcs := make([]verbs.WC, 4)
	for got := 0; got < 2; {
		evCQ, err := ch.GetEvent(wctx) // sleep until an armed CQ has a completion
		if err != nil {
			log.Fatal(err)
		}
		evCQ.AckEvents(1) // every event is acknowledged (ibv_ack_cq_events)
		// Re-arm, then poll: a completion that arrives after this poll
		// sends the next event, none is missed.
		if err := evCQ.ReqNotify(false); err != nil {
			log.Fatal(err)
		}
		n, err := evCQ.Poll(wcs)
		if err != nil {
			log.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Opcode.IsRecv() {
				recv = wc
			} else {
				send = wc
			}
		}
		got += n
	}
	fmt.Printf("send: %s %s\n", send.Opcode, send.Status)
	fmt.Printf("receive: %s %s, %q\n", recv.Opcode, recv.Status, mr.Bytes()[1024:1024+recv.ByteLen])
	// Output:
	// send: SEND success
	// receive: RECV success, "ping"
}
