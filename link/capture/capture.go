// Package capture records the RoCEv2 packets that this process's soft
// devices send and receive, in pcap, as they are on the wire: one IPv4 or
// IPv6 packet per RoCEv2 datagram (pcap's raw-IP link type), with its UDP
// header, the BTH through the ICRC unchanged, and for IPv4 the IP ID the
// ICRC was computed with, so that Wireshark's InfiniBand dissector decodes
// each packet and finds its ICRC valid. Datagrams that UDP GSO sends or GRO
// receives as one are recorded one by one, as they cross the wire.
//
// Start and Stop switch capture on and off for every soft device of the
// process, open or not; RDMA_GO_PCAP=file does it from the environment
// (package provider/soft starts it when it opens its first device).
//
// tcpdump on the loopback interface sees the same datagrams only as the
// kernel handed them over: with GSO a send of many datagrams shows as one
// UDP packet of up to 64 KiB, which the dissector reads as one malformed
// RoCE packet. This package's capture is taken where the device sees each
// datagram, before segmentation and after reassembly.
package capture

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rdma-go/rdma-go/link"
	"github.com/rdma-go/rdma-go/wire"
)

// Env names the environment variable that starts a capture to a file.
const Env = "RDMA_GO_PCAP"

// snapLen is the pcap snapshot length: a whole RoCEv2 datagram always fits.
const snapLen = 65535

// Writer writes datagrams to a pcap stream.
type Writer struct {
	mu     sync.Mutex
	w      *pcapgo.Writer
	closer io.Closer
	buf    gopacket.SerializeBuffer
	err    error // the first write error; the capture stops writing
	n      int
}

var current atomic.Pointer[Writer]

// Start writes every datagram that the process's soft devices send and
// receive from now on to w, in pcap (nanosecond timestamps), until Stop.
// It writes the pcap file header at once. A capture already running is
// stopped first.
func Start(w io.Writer) error {
	cw := &Writer{w: pcapgo.NewWriterNanos(w), buf: gopacket.NewSerializeBuffer()}
	if err := cw.w.WriteFileHeader(snapLen, layers.LinkTypeRaw); err != nil {
		return fmt.Errorf("capture: pcap header: %w", err)
	}
	if old := current.Swap(cw); old != nil {
		old.close()
	}
	return nil
}

// StartFile creates (or truncates) the file at path and starts a capture
// into it; Stop closes the file.
func StartFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if err := Start(f); err != nil {
		f.Close()
		return err
	}
	if w := current.Load(); w != nil {
		w.mu.Lock()
		w.closer = f
		w.mu.Unlock()
	}
	return nil
}

// startEnv is StartFile of $RDMA_GO_PCAP, once per process.
var startEnv = sync.OnceValue(func() error {
	path := os.Getenv(Env)
	if path == "" {
		return nil
	}
	if err := StartFile(path); err != nil {
		return fmt.Errorf("%s=%s: %w", Env, path, err)
	}
	return nil
})

// StartFromEnv starts a capture to the file $RDMA_GO_PCAP names, if it is
// set, the first time it is called in the process; later calls return the
// first call's result.
func StartFromEnv() error { return startEnv() }

// Stop ends the capture and closes the file StartFile opened. It reports
// the first error writing the capture met, if any, and how the file closed.
func Stop() error {
	w := current.Swap(nil)
	if w == nil {
		return nil
	}
	return w.close()
}

// Packets reports how many packets the running capture has written (0
// when none runs).
func Packets() int {
	w := current.Load()
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *Writer) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	if w.closer != nil {
		err = errors.Join(err, w.closer.Close())
		w.closer = nil
	}
	w.err = errors.New("capture: stopped")
	return err
}

// Active reports whether a capture runs: the devices check it before
// calling Sent or Received, which costs one atomic load per batch.
func Active() bool { return current.Load() != nil }

// Sent records datagrams a device bound to local sent (after link.Link.Send
// returned: a UDP link with GSO has by then given each IPv4 datagram the
// ICRC of the IP ID it goes out with).
func Sent(local netip.AddrPort, batch []link.Datagram) {
	w := current.Load()
	if w == nil {
		return
	}
	now := time.Now()
	for i := range batch {
		d := &batch[i]
		sport := d.Src.Port()
		if sport == 0 {
			sport = local.Port()
		}
		w.record(now, netip.AddrPortFrom(local.Addr(), sport), d.Dst, d.Bytes())
	}
}

// locals are the addresses of this process's devices (Attach): a datagram
// from one to another is recorded once, when it is sent. (A RoCE sender
// varies its UDP source port per QP, so the address alone says who sent.)
var (
	localsMu sync.Mutex
	locals   sync.Map // netip.Addr → *int, how many devices attached it
)

// Attach declares that a device of this process sends from addr, until
// detach is called.
func Attach(addr netip.Addr) (detach func()) {
	addr = addr.Unmap()
	localsMu.Lock()
	v, _ := locals.LoadOrStore(addr, new(int))
	*v.(*int)++
	localsMu.Unlock()
	return sync.OnceFunc(func() {
		localsMu.Lock()
		defer localsMu.Unlock()
		c := v.(*int)
		if *c--; *c == 0 {
			locals.Delete(addr)
		}
	})
}

// Received records datagrams a device received, splitting what GRO
// coalesced; those from another device of this process were recorded when
// it sent them.
func Received(batch []link.Datagram) {
	w := current.Load()
	if w == nil {
		return
	}
	now := time.Now()
	for i := range batch {
		d := &batch[i]
		if _, ok := locals.Load(d.Src.Addr().Unmap()); ok {
			continue
		}
		seg := d.SegSize
		if seg <= 0 {
			seg = len(d.Buf)
		}
		for off := 0; off < len(d.Buf); off += seg {
			w.record(now, d.Src, d.Dst, d.Buf[off:min(off+seg, len(d.Buf))])
		}
	}
}

// record writes one datagram as an IP packet.
func (w *Writer) record(t time.Time, src, dst netip.AddrPort, payload []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	var ip gopacket.SerializableLayer
	if sa.Is4() && da.Is4() {
		// The IP ID the sender used is the one that makes the ICRC
		// valid (wire.RecoverIPv4ID); DF is set, TTL as Linux's
		// default.
		id, _ := wire.RecoverIPv4ID(sa, da, src.Port(), dst.Port(), payload)
		v4 := &layers.IPv4{Version: 4, IHL: 5, Id: id, Flags: layers.IPv4DontFragment, TTL: 64,
			Protocol: layers.IPProtocolUDP, SrcIP: sa.AsSlice(), DstIP: da.AsSlice()}
		udp.SetNetworkLayerForChecksum(v4)
		ip = v4
	} else {
		s16, d16 := src.Addr().As16(), dst.Addr().As16()
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
			SrcIP: s16[:], DstIP: d16[:]}
		udp.SetNetworkLayerForChecksum(v6)
		ip = v6
	}
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(w.buf, opts, ip, udp, gopacket.Payload(payload)); err != nil {
		w.err = fmt.Errorf("capture: %w", err)
		return
	}
	data := w.buf.Bytes()
	ci := gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(data), Length: len(data)}
	if err := w.w.WritePacket(ci, data); err != nil {
		w.err = fmt.Errorf("capture: %w", err)
		return
	}
	w.n++
}
