// Package link moves RoCEv2 datagrams between soft devices. The real link is a
// UDP socket on port 4791 with batched I/O; tests use the in-memory network of
// package memlink. The transport engine sees only the Link interface.
package link

import (
	"errors"
	"net/netip"
	"sync"
)

// RoCEPort is the IANA UDP destination port of RoCEv2.
const RoCEPort = 4791

// Datagram is one UDP payload (a RoCEv2 packet: BTH through ICRC) with its
// addresses. On receive, Src is the sender and Dst the local address it was
// sent to; on send, Src.Port() is the UDP source port to use (0 means the
// link's own port) and Src.Addr() is ignored (a link sends from its own
// address), and Dst is the destination.
//
// A link with UDP GRO (see UDPOptions.GRO) may return several datagrams of
// one flow coalesced into one Buf; SegSize then says where they split.
type Datagram struct {
	Buf []byte
	Src netip.AddrPort
	Dst netip.AddrPort
	// SegSize is set by Receive: 0 when Buf is one datagram, or the size of
	// each of the datagrams coalesced into Buf (the last may be shorter),
	// all sent from Src to Dst. Send ignores it.
	SegSize int
	// Payload, on a datagram to send, is the middle of the datagram,
	// sent from where it lies instead of being copied into Buf (a
	// device sends a message from its memory region this way): the
	// datagram is Buf[:PayloadAt], then Payload, then Buf[PayloadAt:].
	// Receive never sets it.
	Payload   []byte
	PayloadAt int
}

// Len returns the datagram's length: Buf's, and Payload's if it has one.
func (d *Datagram) Len() int { return len(d.Buf) + len(d.Payload) }

// Bytes returns the datagram's bytes in one slice: Buf itself, or a new
// slice that joins Buf and Payload.
func (d *Datagram) Bytes() []byte {
	if d.Payload == nil {
		return d.Buf
	}
	return d.AppendBytes(make([]byte, 0, d.Len()))
}

// AppendBytes appends the datagram's bytes to dst (Buf, with Payload in its
// place) and returns the extended slice.
func (d *Datagram) AppendBytes(dst []byte) []byte {
	if d.Payload == nil {
		return append(dst, d.Buf...)
	}
	dst = append(dst, d.Buf[:d.PayloadAt]...)
	dst = append(dst, d.Payload...)
	return append(dst, d.Buf[d.PayloadAt:]...)
}

// ErrClosed is returned by a Link after Close.
var ErrClosed = errors.New("link: closed")

// Link is a bidirectional datagram endpoint bound to one local IP address.
// Receive is called from one goroutine at a time; Send may be called from many
// goroutines at once.
type Link interface {
	// Send transmits the datagrams in order. It does not retain the buffers,
	// but may rewrite the ICRC trailer of IPv4 packets whose IP ID it
	// changes from 0 (UDP does, for GSO).
	// A datagram the network refuses (no route, buffer full) is dropped and
	// counted, as a NIC would, and is not an error; an error means the link
	// itself is broken or closed.
	Send(batch []Datagram) error
	// Receive fills up to len(batch) datagrams, blocking until at least one
	// arrives or the link is closed. Each batch[i].Buf must have room for a
	// datagram (cap is used; Buf is resliced to the received length); a
	// datagram longer than cap(Buf) is dropped and counted, not truncated.
	Receive(batch []Datagram) (n int, err error)
	// LocalAddr returns the address and port this link receives on.
	LocalAddr() netip.AddrPort
	// SourcePort returns the UDP source port that datagrams sent with Src
	// port want will actually carry: want when the link can send from it, or
	// the link's own port otherwise. The ICRC covers the source port, so the
	// sender must compute it with this value.
	SourcePort(want uint16) uint16
	// MaxBatch returns the best batch size for Send and Receive.
	MaxBatch() int
	// Close releases the link and unblocks Receive.
	Close() error
}

// Poller is implemented by links that can be read without waiting (UDP on
// Linux). A device uses it to read under its own lock, so that both its
// receive goroutine and a goroutine polling for completions can drain the
// link and process what they read in order.
type Poller interface {
	// TryReceive is Receive that returns 0 at once when no datagram is
	// queued, or when another TryReceive is under way.
	TryReceive(batch []Datagram) (n int, err error)
	// ReceiveLocked is Receive that locks mu before each read of the
	// link and unlocks it after a read that found nothing: it returns
	// with mu held when n > 0, and without it otherwise.
	ReceiveLocked(mu sync.Locker, batch []Datagram) (n int, err error)
	// SetQuiet(true) makes datagrams that arrive wake no waiting Receive
	// (only TryReceive reads them); SetQuiet(false) undoes it, and wakes
	// a waiter if datagrams are queued. A device sets it while goroutines
	// busy poll it.
	SetQuiet(on bool)
}
