// Package udpfloor measures the floor under a RoCEv2 device's RDMA WRITE
// stream over UDP: the kernel's cost of carrying the stream's packets, with
// only what every device must add. The sender lays out the WRITEs' packets
// as the soft device does (FIRST with its RETH, MIDDLE, LAST at MTU 4096;
// WRITE ONLY up to it), computes each packet's ICRC as it sends it, sends
// the payload from a memory region without copying it (a header and
// trailer around it), up to 64 datagrams per system call through the soft
// device's own link (GSO runs of equal-sized packets); the receiver copies
// each payload out of the socket's buffer into its place in a memory
// region (the RETH's address), as a device writes a WRITE. Nothing else runs: no transport state, no completions, and one
// small credit datagram back per system call's worth of packets instead
// of ACKs.
//
// No RoCEv2 device over UDP sockets can move a stream of that size faster
// on the same machine, so where a device's curve lies below TCP's and at
// this floor, the gap is the protocol's over this kernel, not the
// device's.
package udpfloor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"time"

	"github.com/rdma-go/rdma-go/internal/perftest/workload"
	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// Stream describes the WRITEs.
type Stream struct {
	// Size is each WRITE's payload in bytes (at least 1).
	Size int
	// Mem is the bytes of memory the WRITEs cycle through (at least Size).
	Mem int
}

const (
	mtu = 4096
	// maxInFlight bounds the packets sent and not yet credited, as the
	// soft device's requester bounds its unacknowledged PSNs, and
	// ackEvery packets ask for a credit, as its requester asks for ACKs.
	maxInFlight = 256
	ackEvery    = 16
	// maxMem bounds the memory region Serve keeps.
	maxMem = 64 << 20
	// creditLen is a credit datagram's size: one past the PSN of the
	// packet that asked for it.
	creditLen = 4
)

// stallTimeout is how long the sender waits for a credit before it calls
// the run lossy (a variable for tests).
var stallTimeout = 2 * time.Second

// ErrLost is the sender's report that credits stopped coming: datagrams
// were dropped, and a floor needs a lossless run.
var ErrLost = errors.New("udpfloor: no credit for 2 s: datagrams were lost (the floor needs a lossless run)")

// Listen opens a link for the floor on an ephemeral UDP port of addr, with
// the soft device's options (GRO on receive, GSO on send).
func Listen(addr netip.Addr) (*link.UDP, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
	if err != nil {
		return nil, fmt.Errorf("udpfloor: %w", err)
	}
	l, err := link.ListenUDP(addr, link.UDPOptions{Conn: c, GRO: true})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("udpfloor: %w", err)
	}
	if p, ok := any(l).(link.Poller); ok {
		// Only TryReceive reads it (poll): arrivals need not wake the
		// runtime's poller, which would take CPU from the other end.
		p.SetQuiet(true)
	}
	return l, nil
}

// Serve receives the stream on l until ctx ends, copying every payload
// into a region, and answers each packet that asks for an acknowledgment
// with a credit to its source: one past the packet's PSN (the sender
// numbers its packets from 0 in each Run). It returns the bytes of payload
// received.
func Serve(ctx context.Context, l *link.UDP) (int64, error) {
	batch := make([]link.Datagram, l.MaxBatch())
	bufs := make([][]byte, len(batch))
	for i := range bufs {
		bufs[i] = make([]byte, link.MaxDatagram)
	}
	var mem []byte // the memory region, as large as the WRITEs reach
	var (
		off     int // where the next payload goes in mem
		bytes   int64
		credits = []link.Datagram{{Buf: make([]byte, creditLen)}}
	)
	for {
		for i := range batch {
			batch[i].Buf = bufs[i]
		}
		n, err := receive(ctx, l, batch)
		if err != nil {
			if ctx.Err() != nil {
				return bytes, nil
			}
			return bytes, err
		}
		for i := range batch[:n] {
			d := &batch[i]
			seg := d.SegSize
			if seg <= 0 {
				seg = len(d.Buf)
			}
			ack, next := false, wire.PSN(0)
			for b := d.Buf; len(b) > 0; b = b[min(seg, len(b)):] {
				p := b[:min(seg, len(b))]
				if len(p) < wire.BTHLen+wire.ICRCLen {
					continue
				}
				bth := wire.BTH(p)
				hdr := wire.BTHLen
				if bth.Opcode().Has(wire.HasRETH) {
					hdr += wire.RETHLen
					if len(p) < hdr {
						continue
					}
					r := wire.RETH(p[wire.BTHLen:])
					end := r.VA() + uint64(r.DMALen())
					if end > maxMem {
						continue
					}
					if end > uint64(len(mem)) {
						mem = append(mem, make([]byte, int(end)-len(mem))...)
					}
					off = int(r.VA())
				}
				if len(p) < hdr+wire.ICRCLen {
					continue
				}
				payload := p[hdr : len(p)-wire.ICRCLen]
				if off+len(payload) > len(mem) {
					continue // no WRITE of this stream goes there
				}
				off += copy(mem[off:], payload)
				bytes += int64(len(payload))
				if bth.AckReq() {
					ack, next = true, bth.PSN().Next()
				}
			}
			if ack {
				binary.BigEndian.PutUint32(credits[0].Buf, uint32(next))
				credits[0].Dst = d.Src
				if err := l.Send(credits); err != nil {
					return bytes, fmt.Errorf("udpfloor: credit: %w", err)
				}
			}
		}
	}
}

// receive reads a batch from l, spinning as the soft device does, and
// stops when ctx ends.
func receive(ctx context.Context, l *link.UDP, batch []link.Datagram) (int, error) {
	for spins := 0; ; spins++ {
		n, err := poll(l, batch)
		if n > 0 || err != nil {
			return n, err
		}
		if spins%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			runtime.Gosched()
		}
	}
}

// poll reads what l holds now into batch: without waiting on a
// link.Poller, else waiting at most a millisecond.
func poll(l *link.UDP, batch []link.Datagram) (int, error) {
	if p, ok := any(l).(link.Poller); ok {
		return p.TryReceive(batch)
	}
	l.SetReadDeadline(time.Now().Add(time.Millisecond))
	n, err := l.Receive(batch)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, nil
	}
	return n, err
}

// Run sends the stream from l to dst, where Serve runs, within budget b,
// and returns the WRITEs sent and credited, their payload bytes and the
// time taken.
func Run(ctx context.Context, l *link.UDP, dst netip.AddrPort, s Stream, b workload.Budget) (workload.Result, error) {
	if s.Size < 1 || s.Mem < s.Size {
		return workload.Result{}, fmt.Errorf("udpfloor: size %d, memory %d", s.Size, s.Mem)
	}
	mr := make([]byte, s.Mem)
	for i := range mr {
		mr[i] = byte(i)
	}
	per := (s.Size + mtu - 1) / mtu // packets per WRITE
	batch := make([]link.Datagram, l.MaxBatch())
	for i := range batch {
		batch[i] = link.Datagram{Buf: make([]byte, wire.BTHLen+wire.RETHLen+wire.ICRCLen), Dst: dst}
	}
	credit := make([]link.Datagram, l.MaxBatch())
	cbufs := make([][]byte, len(credit))
	for i := range cbufs {
		cbufs[i] = make([]byte, link.MaxDatagram)
	}
	src := l.LocalAddr()
	var (
		seal     wire.ICRCSealer
		msg, pkt int    // the next packet: WRITE number msg, its packet pkt
		sent     uint64 // packets sent
		credited uint64 // packets the receiver reported
		msgs     int    // WRITEs whose last packet has been credited
		lastOf   []uint64
	)
	start := time.Now()
	deadline := time.Time{}
	if b.Iters == 0 {
		deadline = start.Add(b.Duration)
	}
	done := func() bool {
		if b.Iters > 0 {
			return msg >= b.Iters
		}
		return time.Now().After(deadline)
	}
	stalled := time.Now()
	for {
		// Credits: count the WRITEs now wholly received.
		for sent+uint64(len(batch)) > credited+maxInFlight || (done() && credited < sent) {
			for i := range credit {
				credit[i].Buf = cbufs[i]
			}
			n, err := poll(l, credit)
			if err != nil {
				return workload.Result{}, err
			}
			for _, c := range credit[:n] {
				// GRO may coalesce credits: each is creditLen bytes.
				for b := c.Buf; len(b) >= creditLen; b = b[creditLen:] {
					// One past a PSN of the last 2^24 packets sent.
					behind := (sent - uint64(binary.BigEndian.Uint32(b))) & 0xFFFFFF
					credited = max(credited, sent-behind)
				}
			}
			if n > 0 {
				stalled = time.Now()
			} else if time.Since(stalled) > stallTimeout {
				return workload.Result{}, ErrLost
			}
			if err := ctx.Err(); err != nil {
				return workload.Result{}, err
			}
		}
		for len(lastOf) > 0 && lastOf[0] <= credited {
			lastOf = lastOf[1:]
			msgs++
		}
		if done() && credited == sent {
			break
		}
		// One system call's worth of packets, within the window.
		k := 0
		for k < len(batch) && sent+uint64(k) < credited+maxInFlight && !(pkt == 0 && done()) {
			d := &batch[k]
			at := (msg * s.Size) % (s.Mem - s.Size + 1)
			off := pkt * mtu
			n := min(mtu, s.Size-off)
			first, last := pkt == 0, pkt == per-1
			op := wire.RCWriteMiddle
			switch {
			case first && last:
				op = wire.RCWriteOnly
			case first:
				op = wire.RCWriteFirst
			case last:
				op = wire.RCWriteLast
			}
			hdr := wire.BTHLen
			if first {
				hdr += wire.RETHLen
			}
			d.Buf = d.Buf[:hdr+wire.ICRCLen]
			d.PayloadAt, d.Payload = hdr, mr[at+off:at+off+n]
			n64 := sent + uint64(k)
			wire.BTH(d.Buf).Encode(op, false, 0, 0x12, n64%ackEvery == ackEvery-1, psn(n64))
			if first {
				wire.RETH(d.Buf[wire.BTHLen:]).Encode(uint64(at), 0x1234, uint32(s.Size))
			}
			k++
			if pkt++; last {
				lastOf = append(lastOf, sent+uint64(k))
				msg, pkt = msg+1, 0
			}
		}
		if k == 0 {
			continue
		}
		// The last packet of the call asks for a credit too.
		wire.BTH(batch[k-1].Buf).SetAckReqPSN(true, psn(sent+uint64(k-1)))
		for i := range batch[:k] {
			d := &batch[i]
			seal.PutParts(src.Addr(), dst.Addr(), src.Port(), dst.Port(), d.Buf, d.PayloadAt, d.Payload)
		}
		if err := l.Send(batch[:k]); err != nil {
			return workload.Result{}, err
		}
		sent += uint64(k)
	}
	el := time.Since(start)
	if st := l.Stats(); st.SendDrops > 0 {
		return workload.Result{}, fmt.Errorf("udpfloor: %d datagrams dropped on send (the floor needs a lossless run)", st.SendDrops)
	}
	return workload.Result{Ops: msgs, Bytes: int64(msgs) * int64(s.Size), Elapsed: el}, nil
}

// psn is the PSN of the n-th packet of a Run.
func psn(n uint64) wire.PSN { return wire.PSN(n & wire.PSNMask) }
