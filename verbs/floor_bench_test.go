package verbs_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// BenchmarkUDPFloor64KiB is the floor under BenchmarkRCWrite64KiB: what the
// kernel costs to carry 64 KiB as RoCEv2 packets over UDP loopback, measured
// beside BenchmarkTCPStream64KiB in the same run. One op sends the 16
// datagrams of a 64 KiB RDMA WRITE at MTU 4096 (a FIRST with its RETH, then
// 14 MIDDLE and a LAST) through the soft device's own link (link.UDP: GSO on
// send, GRO on receive), and a reader goroutine receives them; up to 16 ops
// are outstanding, paced by a channel (cheaper than the ACK packets a device
// sends). No transport logic runs and no ACK is sent.
//
//   - bare: the datagrams are prebuilt (header, payload and ICRC bytes), no
//     CRC is computed and no byte is copied in user space. Where this is
//     below TCP's stream, no RoCEv2 device over UDP can match TCP on this
//     kernel.
//   - required: what every device must do on top: each packet's ICRC is
//     computed as it is sent (the wire format needs it, a kernel rxe peer
//     checks it; with wire.ICRCSealer, as the soft device does), the payload
//     goes to the kernel from a "memory region" without a copy (a header
//     and trailer buffer around it, as the soft device sends), and the
//     reader copies each payload out of the socket's buffer into a
//     destination of the message's size (the kernel cannot place a
//     datagram's payload by its RETH). Where this is below TCP's stream, a
//     target of 1.0× TCP is beyond what RoCEv2 over UDP loopback allows.
func BenchmarkUDPFloor64KiB(b *testing.B) { benchUDPFloor(b, 64<<10, 16, 1) }

// BenchmarkUDPFloor16KiB, BenchmarkUDPFloor32KiB and BenchmarkUDPFloor1MiB
// are BenchmarkUDPFloor64KiB for sizes where rdma-bench -curve finds WRITE
// below TCP (beside BenchmarkTCPStream16KiB, 32KiB and 1MiB): a 16 KiB WRITE
// is a FIRST and three packets 16 bytes shorter, so no GSO run (equal
// sizes, a shorter last) spans two messages; 1 MiB WRITEs are 256 packets,
// two outstanding (the soft device's requester keeps at most 1 MiB in
// flight).
func BenchmarkUDPFloor16KiB(b *testing.B) { benchUDPFloor(b, 16<<10, 16, 1) }
func BenchmarkUDPFloor32KiB(b *testing.B) { benchUDPFloor(b, 32<<10, 16, 1) }
func BenchmarkUDPFloor1MiB(b *testing.B)  { benchUDPFloor(b, 1<<20, 2, 1) }

// BenchmarkUDPFloorCurve is the floor under the shape of rdma-bench -curve
// (issue 15, target 8) from 4 KiB to 64 KiB: the WRITEs of each size go as
// the soft device sends a stream of them, several messages per send call
// (up to the link's 64 datagrams, at most 256 KiB), four sends outstanding,
// bare and with what is required (see BenchmarkUDPFloor64KiB). A 4 KiB WRITE ONLY packet has the size of every
// other, so up to 15 go in one GSO send; from 8 KiB on a message's FIRST
// carries a RETH its MIDDLE and LAST packets do not, and a GSO run (equal
// sizes, a shorter last) never spans two messages. Where this floor falls
// from 4 KiB to 8 KiB, so must any RoCEv2 device's curve over UDP on this
// kernel.
func BenchmarkUDPFloorCurve(b *testing.B) {
	for _, size := range []int{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10} {
		perSend := max(1, min(64*4096/size, 256<<10/size))
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			benchUDPFloor(b, size, 4, perSend)
		})
	}
}

// benchUDPFloor runs the bare and the required floor for WRITEs of payload
// bytes, perSend messages per send call, window sends outstanding.
func benchUDPFloor(b *testing.B, payload, window, perSend int) {
	b.Run("bare", func(b *testing.B) { benchUDPFloorMode(b, payload, window, perSend, false) })
	b.Run("required", func(b *testing.B) { benchUDPFloorMode(b, payload, window, perSend, true) })
}

func benchUDPFloorMode(b *testing.B, payload, window, perSend int, required bool) {
	const (
		mtu  = 4096
		bth  = 12
		reth = 16
		icrc = 4
	)
	x, y := floorLink(b, "127.0.0.1"), floorLink(b, "127.0.0.2")
	var pkts []link.Datagram
	for range perSend {
		for off := 0; off < payload; off += mtu {
			n := min(mtu, payload-off)
			hdr := bth
			if off == 0 {
				hdr += reth
			}
			if !required {
				pkts = append(pkts, link.Datagram{Buf: make([]byte, hdr+n+icrc), Dst: y.LocalAddr()})
				continue
			}
			d := link.Datagram{Buf: make([]byte, hdr+icrc), Dst: y.LocalAddr(), PayloadAt: hdr}
			op := wire.RCWriteMiddle
			switch {
			case off == 0 && off+n == payload:
				op = wire.RCWriteOnly
			case off == 0:
				op = wire.RCWriteFirst
			case off+n == payload:
				op = wire.RCWriteLast
			}
			wire.BTH(d.Buf).Encode(op, false, 0, 0x12, off+n == payload, wire.PSN(len(pkts)))
			pkts = append(pkts, d)
		}
	}
	var prep func(op int)
	var recv func(seg []byte)
	if required {
		opBytes := perSend * payload
		mr := make([]byte, window*opBytes)
		src, dst := x.LocalAddr(), y.LocalAddr()
		var seal wire.ICRCSealer
		prep = func(op int) {
			slot := mr[op%window*opBytes:]
			for k := range pkts {
				p := &pkts[k]
				p.Payload = slot[k*mtu : min((k+1)*mtu, opBytes)]
				seal.PutParts(src.Addr(), dst.Addr(), src.Port(), dst.Port(), p.Buf, p.PayloadAt, p.Payload)
			}
		}
		into, off := make([]byte, payload), 0
		recv = func(seg []byte) {
			hdr := bth
			if len(seg) > bth+icrc && wire.BTH(seg).Opcode().Has(wire.HasRETH) {
				hdr += reth
			}
			if len(seg) < hdr+icrc {
				return
			}
			off += copy(into[off%payload:], seg[hdr:len(seg)-icrc])
		}
	}
	b.SetBytes(int64(perSend * payload))
	floorRun(b, x, y, pkts, window, prep, recv)
}

// BenchmarkUDPFloorRate8B is the floor under issue 15's message-rate target
// (ib_write_bw -s 8 -l 32, perftest's 128 WRs outstanding): RDMA WRITE ONLY
// packets of 8 payload bytes (BTH, RETH, payload, ICRC: 40 bytes each)
// through the soft device's link (GSO send, GRO receive) to a reader
// goroutine, 128 packets outstanding, paced by a channel; no transport
// logic, no ACK; sender and reader on their own goroutines (so up to two
// CPUs). It reports the rate as Mpps.
//
//   - send=1 sends each post list of 32 with its own send call, as a device
//     that flushes each PostSend does; send=4 sends the 4 outstanding lists
//     with one call, the most a sender can batch;
//   - bare: the packets are prebuilt, no CRC, no copy; required: each
//     packet's ICRC is computed as it is sent and the reader copies each
//     payload into a destination (see BenchmarkUDPFloor64KiB).
func BenchmarkUDPFloorRate8B(b *testing.B) {
	const (
		list        = 32
		outstanding = 4
		hdr         = 12 + 16
		size        = hdr + 8 + 4
	)
	for _, lists := range []int{1, outstanding} {
		for _, required := range []bool{false, true} {
			name := fmt.Sprintf("send=%d/bare", lists)
			if required {
				name = fmt.Sprintf("send=%d/required", lists)
			}
			b.Run(name, func(b *testing.B) {
				x, y := floorLink(b, "127.0.0.1"), floorLink(b, "127.0.0.2")
				pkts := make([]link.Datagram, list*lists)
				for i := range pkts {
					pkts[i] = link.Datagram{Buf: make([]byte, size), Dst: y.LocalAddr()}
					wire.BTH(pkts[i].Buf).Encode(wire.RCWriteOnly, false, 0, 0x12, i%list == list-1, wire.PSN(i))
				}
				var prep func(int)
				var recv func([]byte)
				if required {
					src, dst := x.LocalAddr(), y.LocalAddr()
					var seal wire.ICRCSealer
					prep = func(int) {
						for i := range pkts {
							seal.Put(src.Addr(), dst.Addr(), src.Port(), dst.Port(), pkts[i].Buf)
						}
					}
					into, off := make([]byte, 4096), 0
					recv = func(seg []byte) {
						if len(seg) == size {
							off = (off + copy(into[off:], seg[hdr:hdr+8])) % len(into)
						}
					}
				}
				start := time.Now()
				floorRun(b, x, y, pkts, outstanding/lists, prep, recv)
				b.ReportMetric(float64(b.N*len(pkts))/time.Since(start).Seconds()/1e6, "Mpps")
			})
		}
	}
}

// floorRun sends pkts from x to y b.N times, at most window sends ahead of
// what a reader goroutine on y has received in full, and fails the
// benchmark on any loss. prep, if set, runs before each send with the op's
// number; recv, if set, gets each received datagram (each segment of a
// coalesced one).
func floorRun(b *testing.B, x, y *link.UDP, pkts []link.Datagram, window int, prep func(op int), recv func(seg []byte)) {
	b.Helper()
	opBytes := 0
	for _, p := range pkts {
		opBytes += p.Len()
	}
	if prep != nil {
		prep(0)
		opBytes = 0
		for _, p := range pkts {
			opBytes += p.Len()
		}
	}
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	failed := make(chan error, 1)
	go func() {
		batch := make([]link.Datagram, y.MaxBatch())
		for i := range batch {
			batch[i].Buf = make([]byte, link.MaxDatagram)
		}
		got := 0
		for ops := 0; ; {
			if ops%1024 == 0 {
				y.SetReadDeadline(time.Now().Add(benchTimeout))
			}
			n, err := y.Receive(batch)
			if err != nil {
				if !errors.Is(err, link.ErrClosed) {
					failed <- err
				}
				return
			}
			for i := range batch[:n] {
				d := batch[i].Buf
				got += len(d)
				if recv != nil {
					seg := batch[i].SegSize
					if seg <= 0 {
						seg = len(d)
					}
					for ; len(d) > 0; d = d[min(seg, len(d)):] {
						recv(d[:min(seg, len(d))])
					}
				}
				batch[i].Buf = batch[i].Buf[:cap(batch[i].Buf)]
			}
			for ; got >= opBytes; got -= opBytes {
				ops++
				credits <- struct{}{}
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		select {
		case <-credits:
		case err := <-failed:
			b.Fatalf("receive after %d ops: %v", i, err)
		}
		if prep != nil {
			prep(i)
		}
		if err := x.Send(pkts); err != nil {
			b.Fatal(err)
		}
	}
	for range window {
		select {
		case <-credits:
		case err := <-failed:
			b.Fatalf("receive: %v", err)
		}
	}
	b.StopTimer()
	if d := x.Stats().SendDrops + y.Stats().ReceiveDrops; d > 0 {
		b.Fatalf("%d datagrams dropped: the floor needs a lossless run", d)
	}
}

// floorLink opens a UDP link with the production options on a free port of
// addr.
func floorLink(b *testing.B, addr string) *link.UDP {
	b.Helper()
	var err error
	for range 50 {
		var u *link.UDP
		u, err = link.ListenUDP(netip.MustParseAddr(addr), link.UDPOptions{Port: uint16(20000 + rand.IntN(12000)), GRO: true})
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			b.Skipf("cannot open a UDP link on %s: %v", addr, err)
		}
		b.Cleanup(func() { u.Close() })
		// Polled, as a polled soft device keeps its socket: out of the
		// set a blocking Receive waits on, so arrivals wake nothing.
		u.SetQuiet(true)
		return u
	}
	b.Fatalf("no free port on %s: %v", addr, err)
	return nil
}

// BenchmarkUDPFloorPingPong8B is the floor under an 8-byte SEND ping-pong
// (ib_send_lat) for any RoCEv2 device over UDP sockets that polls, as the
// soft device does: a SEND ONLY packet with 8 bytes of payload, prebuilt
// (no CRC computed, no transport, no ACK), goes from one link.UDP to
// another and back; each side spins on TryReceive (a non-blocking
// recvmmsg) and sends the reply with one sendmmsg. One op is one round
// trip; ns/one-way is half of it, ib_send_lat's t_typical. A device that
// polls its socket cannot go below this; kernel rxe, whose completions
// reach user space through shared memory, has no system call on its
// receive path, so on a machine where system calls are slow (an emulated
// guest) this floor can lie above rxe's latency.
func BenchmarkUDPFloorPingPong8B(b *testing.B) {
	x, y := floorLink(b, "127.0.0.1"), floorLink(b, "127.0.0.2")
	const size = 12 + 8 + 4 // BTH, payload, ICRC
	packet := func(dst netip.AddrPort) []link.Datagram {
		d := []link.Datagram{{Buf: make([]byte, size), Dst: dst}}
		wire.BTH(d[0].Buf).Encode(wire.RCSendOnly, false, 0, 0x12, true, 0)
		return d
	}
	// spin receives one datagram on u, polling without waiting, until
	// deadline.
	spin := func(u *link.UDP, batch []link.Datagram, deadline time.Time) error {
		for i := 0; ; i++ {
			n, err := u.TryReceive(batch)
			if err != nil || n > 0 {
				return err
			}
			if i%1024 == 0 && time.Now().After(deadline) {
				return errors.New("no reply within the deadline")
			}
		}
	}
	newBatch := func() []link.Datagram {
		batch := make([]link.Datagram, 1)
		batch[0].Buf = make([]byte, link.MaxDatagram)
		return batch
	}
	deadline := time.Now().Add(time.Minute) // bounded even if one side stops
	toX, toY := packet(x.LocalAddr()), packet(y.LocalAddr())
	echoErr := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		batch := newBatch()
		for {
			select {
			case <-stop:
				echoErr <- nil
				return
			default:
			}
			if err := spin(y, batch, deadline); err != nil {
				echoErr <- err
				return
			}
			batch[0].Buf = batch[0].Buf[:cap(batch[0].Buf)]
			if err := y.Send(toX); err != nil {
				echoErr <- err
				return
			}
		}
	}()
	batch := newBatch()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := x.Send(toY); err != nil {
			b.Fatal(err)
		}
		if err := spin(x, batch, deadline); err != nil {
			b.Fatal(err)
		}
		batch[0].Buf = batch[0].Buf[:cap(batch[0].Buf)]
	}
	b.StopTimer()
	close(stop)
	if err := x.Send(toY); err != nil { // wake the echo's spin for its stop check
		b.Fatal(err)
	}
	if err := <-echoErr; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/one-way")
}

// BenchmarkUDPFloorHop8B is the floor under BenchmarkRCSend8B in its own
// shape: one goroutine carries every message across and back, and each
// one-way hop is what RC requires of it on the wire — the SEND ONLY packet
// (8 bytes of payload) and the ACK of the message that came the other way,
// in one send (one GSO datagram, as the soft device sends them), then one
// TryReceive (a non-blocking recvmmsg) on the other link, which finds them
// already queued. The packets are prebuilt: no CRC computed, no transport,
// no completion. ns/one-way against RCSend8B's is what the transport adds;
// against TCPPingPong8B's, what RoCEv2 over UDP sockets costs by itself.
func BenchmarkUDPFloorHop8B(b *testing.B) {
	x, y := floorLink(b, "127.0.0.1"), floorLink(b, "127.0.0.2")
	hop := func(dst netip.AddrPort) []link.Datagram {
		send := make([]byte, wire.BTHLen+8+wire.ICRCLen)
		wire.BTH(send).Encode(wire.RCSendOnly, false, 0, 0x12, true, 0)
		ack := make([]byte, wire.BTHLen+wire.AETHLen+wire.ICRCLen)
		wire.BTH(ack).Encode(wire.RCAck, false, 0, 0x12, false, 0)
		return []link.Datagram{{Buf: send, Dst: dst}, {Buf: ack, Dst: dst}}
	}
	toX, toY := hop(x.LocalAddr()), hop(y.LocalAddr())
	batch := make([]link.Datagram, 4)
	for i := range batch {
		batch[i].Buf = make([]byte, link.MaxDatagram)
	}
	// receive takes what u holds; on a loopback link the hop is queued
	// when the send returns, so the first try normally finds it.
	receive := func(u *link.UDP) {
		for try := range 1 << 20 {
			for i := range batch {
				batch[i].Buf = batch[i].Buf[:cap(batch[i].Buf)]
			}
			n, err := u.TryReceive(batch)
			if err != nil {
				b.Fatalf("receive: %v", err)
			}
			if n > 0 {
				return
			}
			if try == 1<<20-1 {
				b.Fatal("a hop did not arrive")
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := x.Send(toY); err != nil {
			b.Fatal(err)
		}
		receive(y)
		if err := y.Send(toX); err != nil {
			b.Fatal(err)
		}
		receive(x)
	}
	b.StopTimer()
	if d := x.Stats().SendDrops + y.Stats().SendDrops + x.Stats().ReceiveDrops + y.Stats().ReceiveDrops; d > 0 {
		b.Fatalf("%d datagrams dropped: the floor needs a lossless run", d)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/one-way")
}
