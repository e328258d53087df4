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
)

// BenchmarkUDPFloor64KiB is the floor under BenchmarkRCWrite64KiB: what the
// kernel alone costs to carry 64 KiB as RoCEv2 packets over UDP loopback,
// measured beside BenchmarkTCPStream64KiB in the same run. One op sends the
// 16 datagrams of a 64 KiB RDMA WRITE at MTU 4096 (a FIRST with its RETH,
// then 14 MIDDLE and a LAST: header, payload and ICRC bytes, prebuilt) through
// the soft device's own link (link.UDP: GSO on send, GRO on receive), and a
// reader goroutine receives them; up to 16 ops are outstanding, paced by a
// channel (cheaper than the ACK packets a device sends). No transport logic
// runs, no CRC is computed, and no byte is copied in user space: a device
// that sent from and received into the MR without copies, computed no ICRC
// and sent no ACK would cost this. Where this floor is below TCP's stream,
// no RoCEv2 device over UDP can match TCP on this kernel.
func BenchmarkUDPFloor64KiB(b *testing.B) {
	const (
		payload = 64 << 10
		mtu     = 4096
		bth     = 12
		reth    = 16
		icrc    = 4
		window  = 16
	)
	x, y := floorLink(b, "127.0.0.1"), floorLink(b, "127.0.0.2")
	var pkts []link.Datagram
	for off := 0; off < payload; off += mtu {
		n := bth + mtu + icrc
		if off == 0 {
			n += reth
		}
		pkts = append(pkts, link.Datagram{Buf: make([]byte, n), Dst: y.LocalAddr()})
	}
	b.SetBytes(payload)
	floorRun(b, x, y, pkts, window)
}

// BenchmarkUDPFloorRate8B is the floor under issue 15's message-rate target
// (ib_write_bw -s 8 -l 32, perftest's 128 WRs outstanding): RDMA WRITE ONLY
// packets of 8 payload bytes (BTH, RETH, payload, ICRC: 40 bytes each,
// prebuilt) through the soft device's link (GSO send, GRO receive) to a
// reader goroutine, 128 packets outstanding, paced by a channel. No
// transport logic, no CRC, no ACK; sender and reader on their own
// goroutines (so up to two CPUs). send=1 sends each post list of 32 with its
// own send call, as a device that flushes each PostSend does; send=4 sends
// the 4 outstanding lists with one call, the most a sender can batch. It
// reports the rate as Mpps: no RoCEv2 device over UDP loopback on this
// kernel sends 8-byte WRITEs faster.
func BenchmarkUDPFloorRate8B(b *testing.B) {
	const (
		list        = 32
		outstanding = 4
		size        = 12 + 16 + 8 + 4
	)
	for _, lists := range []int{1, outstanding} {
		b.Run(fmt.Sprintf("send=%d", lists), func(b *testing.B) {
			x, y := floorLink(b, "127.0.0.1"), floorLink(b, "127.0.0.2")
			pkts := make([]link.Datagram, list*lists)
			for i := range pkts {
				pkts[i] = link.Datagram{Buf: make([]byte, size), Dst: y.LocalAddr()}
			}
			start := time.Now()
			floorRun(b, x, y, pkts, outstanding/lists)
			b.ReportMetric(float64(b.N*len(pkts))/time.Since(start).Seconds()/1e6, "Mpps")
		})
	}
}

// floorRun sends pkts from x to y b.N times, at most window sends ahead of
// what a reader goroutine on y has received in full, and fails the
// benchmark on any loss.
func floorRun(b *testing.B, x, y *link.UDP, pkts []link.Datagram, window int) {
	b.Helper()
	opBytes := 0
	for _, p := range pkts {
		opBytes += len(p.Buf)
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
				got += len(batch[i].Buf)
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
		return u
	}
	b.Fatalf("no free port on %s: %v", addr, err)
	return nil
}
