//go:build linux

package link

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdma-go/rdma-go/wire"
)

// maxBatch is the number of datagrams one recvmmsg/sendmmsg call moves.
const maxBatch = 64

// portableBuffers is false: setSocketOptions sizes the buffers, with
// SO_RCVBUFFORCE when allowed.
const portableBuffers = false

// setSocketOptions applies the RoCEv2 socket options before bind. Only
// IP_PMTUDISC_DO is required: without it Linux would put a changing IP ID on
// sent IPv4 datagrams, and the peer's ICRC check would fail. It reports
// whether the socket may send with UDP GSO: o.gso, if the kernel supports it.
func setSocketOptions(fd uintptr, o sockOpts, log *slog.Logger) (gso bool, err error) {
	s := int(fd)
	opt := func(level, name, v int, what string) {
		if err := unix.SetsockoptInt(s, level, name, v); err != nil {
			log.Debug("link: cannot set socket option", "option", what, "err", err)
		}
	}
	if o.gso {
		// UDP_SEGMENT is readable from Linux 4.18 on, with GSO itself.
		if _, err := unix.GetsockoptInt(s, unix.SOL_UDP, unix.UDP_SEGMENT); err == nil {
			gso = true
		} else {
			log.Debug("link: no UDP GSO in this kernel", "err", err)
		}
	}
	if o.is4 {
		if err := unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); err != nil {
			return false, fmt.Errorf("setsockopt IP_MTU_DISCOVER=IP_PMTUDISC_DO: %w", err)
		}
		if !gso { // the kernel refuses GSO sends without checksums
			opt(unix.SOL_SOCKET, unix.SO_NO_CHECK, 1, "SO_NO_CHECK")
		}
	} else {
		opt(unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER")
		if !gso {
			opt(unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_TX, 1, "UDP_NO_CHECK6_TX")
		}
		opt(unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX")
	}
	if o.sendOnly {
		// Nothing should arrive on a source-port socket; discard whatever does
		// before it takes buffer space. The smallest buffer is enough.
		drop := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}
		prog := unix.SockFprog{Len: 1, Filter: &drop[0]}
		if err := unix.SetsockoptSockFprog(s, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			log.Debug("link: cannot set socket option", "option", "SO_ATTACH_FILTER", "err", err)
		}
		opt(unix.SOL_SOCKET, unix.SO_RCVBUF, 1, "SO_RCVBUF")
		return gso, nil
	}
	if o.gro {
		opt(unix.SOL_UDP, unix.UDP_GRO, 1, "UDP_GRO")
	}
	if o.buf > 0 {
		for _, b := range [...]struct {
			force, plain int
			name         string
		}{
			{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, "SO_RCVBUF"},
			{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, "SO_SNDBUF"},
		} {
			if unix.SetsockoptInt(s, unix.SOL_SOCKET, b.force, o.buf) != nil {
				opt(unix.SOL_SOCKET, b.plain, o.buf, b.name)
			}
		}
	}
	return gso, nil
}

// recvState is the preallocated scratch space of Receive.
type recvState struct {
	hs    []unix.Mmsghdr
	iov   []unix.Iovec
	names []unix.RawSockaddrInet6
	ctl   [][ctlWords]uint64 // each message's control buffer (UDP_GRO), with GRO on
	vlen  int
	n     int
	// filled bounds the messages whose output fields a read wrote since
	// arm last reset them: the first filled. A read with a shorter batch
	// leaves the slots beyond it as they were, so this is a high-water
	// mark, not the last read's count.
	filled   int
	errno    syscall.Errno
	fn       func(uintptr) bool // bound run, made once
	lockedFn func(uintptr) bool // bound runLocked, made once
	mu       sync.Locker        // ReceiveLocked's lock
	locked   bool               // runLocked returned with mu held
	u        *UDP               // whose main socket run reads
}

// ctlWords is the size in 8-byte words of the control buffer of one message:
// room for one cmsg with an int (UDP_GRO) or a uint16 (UDP_SEGMENT).
const ctlWords = (unix.SizeofCmsghdr + 8) / 8

func (r *recvState) init(n int, gro bool) {
	r.hs = make([]unix.Mmsghdr, n)
	r.iov = make([]unix.Iovec, n)
	r.names = make([]unix.RawSockaddrInet6, n)
	if gro {
		r.ctl = make([][ctlWords]uint64, n)
	}
	r.fn = r.run
	r.lockedFn = r.runLocked
}

// runLocked is run with r.mu held for the read: it returns true, with r.mu
// still held, when the read found datagrams or failed.
func (r *recvState) runLocked(uintptr) bool {
	r.mu.Lock()
	r.readNow()
	if r.n > 0 || r.errno != 0 {
		r.locked = true
		return true
	}
	r.mu.Unlock()
	return false
}

// try is called by RawConn.Control: one recvmmsg that does not wait.
//
// It and sendState.run make their calls with RawSyscall6, without telling
// the scheduler (Syscall6's entersyscall and exitsyscall, about 4 % of an
// in-process ping-pong hop): with MSG_DONTWAIT neither call sleeps, and
// while the kernel copies the thread keeps its CPU busy, so there is
// nothing a handed-off P could use it for. A signal interrupts them like
// any other call (EINTR, retried).
func (r *recvState) try(fd uintptr) {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hs[0])), uintptr(r.vlen), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			r.n, r.errno = int(n), 0
		case unix.EAGAIN:
			r.n, r.errno = 0, 0
		case unix.EINTR, unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH,
			unix.EHOSTDOWN, unix.ENETDOWN, unix.ENOBUFS, unix.ENOMEM:
			continue
		default:
			r.n, r.errno = 0, e
		}
		return
	}
}

// groSize returns the segment size from a UDP_GRO control message in the
// control buffer of message i, or 0 if there is none.
func (r *recvState) groSize(i int) int {
	if r.ctl == nil {
		return 0
	}
	h := &r.hs[i].Hdr
	if h.Controllen < unix.SizeofCmsghdr+4 {
		return 0
	}
	c := (*unix.Cmsghdr)(unsafe.Pointer(&r.ctl[i][0]))
	if c.Level != unix.SOL_UDP || c.Type != unix.UDP_GRO || c.Len < unix.SizeofCmsghdr+4 {
		return 0
	}
	return int(*(*int32)(unsafe.Pointer(&r.ctl[i][unix.SizeofCmsghdr/8])))
}

// run is called by RawConn.Read of the link's epoll file; returning false
// waits for the main socket to become readable.
func (r *recvState) run(uintptr) bool {
	r.readNow()
	return r.n > 0 || r.errno != 0
}

// readNow makes one recvmmsg on the main socket that does not wait.
func (r *recvState) readNow() {
	u := r.u
	u.fdMu.RLock()
	defer u.fdMu.RUnlock()
	if u.closed.Load() {
		r.n, r.errno = 0, unix.EBADF
		return
	}
	r.try(uintptr(u.main.fd))
}

var _ Poller = (*UDP)(nil)

// pollState is the receive scratch space of TryReceive, separate from
// Receive's so that a TryReceive need not wait for a blocked Receive.
type pollState struct {
	mu   sync.Mutex
	once sync.Once
	r    recvState
}

// TryReceive is Receive that never waits: it returns 0 at once when no
// datagram is queued, or when another TryReceive is under way.
func (u *UDP) TryReceive(batch []Datagram) (int, error) {
	if u.closed.Load() {
		return 0, ErrClosed
	}
	p := &u.poll
	if len(batch) == 0 || !p.mu.TryLock() {
		return 0, nil
	}
	defer p.mu.Unlock()
	p.once.Do(func() { p.r.init(maxBatch, u.gro) })
	n, err := u.receiveMode(&p.r, batch, modeTry)
	return n, u.recvErr(err)
}

// ReceiveLocked is Receive that locks mu before each read of the socket
// and unlocks it after a read that found nothing: it returns with mu held
// when n > 0, and without it otherwise. A caller that processes datagrams
// under mu, also read by TryReceive under mu elsewhere, thus processes them
// in the order they arrived.
func (u *UDP) ReceiveLocked(mu sync.Locker, batch []Datagram) (int, error) {
	if u.closed.Load() {
		return 0, ErrClosed
	}
	if len(batch) == 0 {
		return 0, nil
	}
	u.recvMu.Lock()
	defer u.recvMu.Unlock()
	u.recv.mu = mu
	n, err := u.receiveMode(&u.recv, batch, modeLocked)
	u.recv.mu = nil
	return n, u.recvErr(err)
}

func (u *UDP) recvErr(err error) error {
	if err == nil {
		return nil
	}
	if u.closed.Load() || errors.Is(err, net.ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("link: UDP %s: receive: %w", u.local, err)
}

// receive is Receive under recvMu.
func (u *UDP) receive(batch []Datagram) (int, error) { return u.receiveMode(&u.recv, batch, modeWait) }

// The ways receiveMode reads the socket.
const (
	modeWait   = iota // wait for a datagram (Receive)
	modeTry           // return 0 if none is queued (TryReceive)
	modeLocked        // wait, reading under r.mu (ReceiveLocked)
)

// arm points the first len(batch) messages of r at batch's buffers. A
// message that already points at its buffer (as it does for a receiver
// that spins on an empty socket, handing back the same batch) only has the
// fields a read may have written reset (see filled): rewriting all of them
// cost a spinning receiver a tenth of its time. The iovecs keep the
// buffers they point at alive until the next read; link buffers live as
// long as their receiver anyway.
func (r *recvState) arm(batch []Datagram) {
	for i := range batch {
		b := batch[i].Buf[:cap(batch[i].Buf)]
		var base *byte
		if len(b) > 0 {
			base = &b[0]
		}
		h := &r.hs[i]
		if r.iov[i].Base == base && int(r.iov[i].Len) == len(b) && h.Hdr.Iov == &r.iov[i] {
			if i < r.filled { // the kernel wrote these fields
				h.Len = 0
				h.Hdr.Namelen = unix.SizeofSockaddrInet6
				h.Hdr.Flags = 0
				if r.ctl != nil {
					h.Hdr.SetControllen(ctlWords * 8)
				}
			}
			continue
		}
		h.Len = 0
		r.iov[i].Base = base
		r.iov[i].SetLen(len(b))
		h.Hdr = unix.Msghdr{
			Name:    (*byte)(unsafe.Pointer(&r.names[i])),
			Namelen: unix.SizeofSockaddrInet6,
			Iov:     &r.iov[i],
		}
		h.Hdr.SetIovlen(1)
		if r.ctl != nil {
			h.Hdr.Control = (*byte)(unsafe.Pointer(&r.ctl[i][0]))
			h.Hdr.SetControllen(ctlWords * 8)
		}
	}
}

// receiveMode receives into batch with r's scratch space, in one of the
// modes above.
func (u *UDP) receiveMode(r *recvState, batch []Datagram, mode int) (int, error) {
	for {
		n := min(len(batch), len(r.hs))
		r.arm(batch[:n])
		r.vlen = n
		if r.filled <= n {
			r.filled = 0 // arm reset them all
		}
		var err error
		r.u, r.n, r.errno = u, 0, 0
		switch mode {
		case modeWait:
			err = u.sys.rc.Read(r.fn)
		case modeTry:
			r.readNow()
		case modeLocked:
			err = u.sys.rc.Read(r.lockedFn)
		}
		if err == nil && r.errno == 0 {
			r.filled = max(r.filled, r.n)
		} else {
			r.filled = max(r.filled, n) // the kernel may have written any
		}
		if r.errno == unix.EBADF && u.closed.Load() {
			r.errno, err = 0, net.ErrClosed
		}
		if err == nil && r.errno != 0 {
			err = os.NewSyscallError("recvmmsg", r.errno)
		}
		if err != nil {
			if mode == modeLocked && r.locked {
				r.locked = false
				r.mu.Unlock()
			}
			return 0, err
		}
		k, segs := 0, 0
		for i := 0; i < r.n; i++ {
			h := &r.hs[i]
			if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
				u.recvDrops.Add(1)
				continue
			}
			if k != i {
				batch[k].Buf, batch[i].Buf = batch[i].Buf, batch[k].Buf
			}
			d := &batch[k]
			d.Buf = d.Buf[:cap(d.Buf)][:h.Len]
			d.Src = u.sockaddrToAddrPort(&r.names[i])
			d.Dst = u.local
			d.SegSize = 0
			segs++
			if g := r.groSize(i); g > 0 && g < len(d.Buf) {
				d.SegSize = g
				segs += (len(d.Buf)+g-1)/g - 1
				u.coalesced.Add(1)
			}
			k++
		}
		if k > 0 {
			u.received.Add(uint64(segs))
			r.locked = false // the caller unlocks r.mu
			return k, nil
		}
		if mode == modeLocked {
			r.locked = false
			r.mu.Unlock() // every datagram was truncated: wait again
		}
		if mode == modeTry && r.n == 0 {
			return 0, nil
		}
	}
}

// sockaddrToAddrPort decodes a sockaddr the kernel filled in.
func (u *UDP) sockaddrToAddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port := uint16(p[0])<<8 | uint16(p[1])
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr).Unmap()
		if sa.Scope_id != 0 && sa.Scope_id == u.scope && a.Is6() {
			a = a.WithZone(u.local.Addr().Zone())
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}

// sendState is the scratch space of one Send call on one socket. It comes
// from sendPool, so concurrent Sends do not share it and steady-state sends
// do not allocate. A datagram is one iovec, or three when it has a Payload
// (head, payload, tail); a message covers one datagram, or a GSO run of
// consecutive ones.
type sendState struct {
	hs     [maxBatch]unix.Mmsghdr
	iov    [3 * maxBatch]unix.Iovec // up to three per datagram (Datagram.Payload)
	niov   int                      // iovecs packed
	msgIov int                      // the first iovec of the message being packed
	names  [maxBatch]unix.RawSockaddrInet6
	ctl    [maxBatch][ctlWords]uint64 // UDP_SEGMENT control message of a GSO message
	first  [maxBatch]int              // the chunk index of each message's first datagram
	segs   [maxBatch]int              // the datagrams in each message
	off    int                        // first message to send
	m      int                        // number of messages packed
	n      int
	errno  syscall.Errno
	fn     func(fd uintptr) bool // bound run, made once
}

var sendPool = sync.Pool{New: func() any {
	s := new(sendState)
	s.fn = s.run
	return s
}}

// GSO limits. The kernel takes at most 64 segments per send before Linux
// 6.10 (UDP_MAX_SEGMENTS) and a super-datagram's payload must fit an IP
// datagram (65507 bytes for IPv4).
const (
	maxGSOSegs  = 64
	maxGSOBytes = 65000
)

// errGSORefused is flush's report that the kernel refused a GSO message
// (EINVAL or EIO: an IPsec route, or a kernel without GSO checksum support).
var errGSORefused = errors.New("link: UDP GSO send refused")

// run is called by RawConn.Write. It never waits for writability: a full
// socket buffer is a drop, as on a NIC.
func (s *sendState) run(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&s.hs[s.off])), uintptr(s.m-s.off), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			s.n, s.errno = 0, e
		} else {
			s.n, s.errno = int(n), 0
		}
		return true
	}
}

// gsoRun returns the end of the GSO run that starts at ds[i]: the datagrams
// after it for the same destination with the same length, and one shorter
// one that ends the run, within the kernel's limits.
func gsoRun(ds []Datagram, i int) int {
	size := ds[i].Len()
	j := i + 1
	if size == 0 {
		return j
	}
	total := size
	for j < len(ds) && j-i < maxGSOSegs {
		n := ds[j].Len()
		if n == 0 || n > size || total+n > maxGSOBytes || ds[j].Dst != ds[i].Dst {
			break
		}
		total += n
		j++
		if n < size {
			break
		}
	}
	return j
}

// sendOn sends ds, all of which leave from socket k.
func (u *UDP) sendOn(k *udpSock, ds []Datagram) error {
	s := sendPool.Get().(*sendState)
	defer sendPool.Put(s)
	for len(ds) > 0 {
		chunk := ds[:min(len(ds), maxBatch)]
		ds = ds[len(chunk):]
		gso := u.gso.Load()
		s.m, s.niov = 0, 0
		for i := 0; i < len(chunk); {
			if !dstOK(chunk[i].Dst, u.is4) {
				i++
				continue
			}
			j := i + 1
			if gso {
				j = gsoRun(chunk, i)
			}
			u.pack(s, s.m, chunk, i, j)
			s.first[s.m], s.segs[s.m] = i, j-i
			s.m++
			i = j
		}
		err := u.flush(k, s)
		for i := range s.iov[:s.niov] {
			s.iov[i].Base = nil // do not keep the caller's buffers alive
		}
		done := len(chunk) // datagrams dealt with
		if err == errGSORefused {
			// Undo the ICRC rewrites of what was not sent, stop using
			// GSO on this link and send the rest one by one.
			u.gso.Store(false)
			u.log.Warn("link: the kernel refused a UDP GSO send; sending without GSO from now on",
				"local", u.local, "err", os.NewSyscallError("sendmmsg", s.errno))
			done = s.first[s.off]
			for m := s.off; m < s.m; m++ {
				u.retag(chunk[s.first[m]:s.first[m]+s.segs[m]], true)
			}
			err = u.sendOn(k, chunk[done:])
		}
		if bad := countBad(chunk[:done], u.is4); bad > 0 {
			u.countDrop(bad, errBadDst)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func countBad(ds []Datagram, is4 bool) int {
	bad := 0
	for i := range ds {
		if !dstOK(ds[i].Dst, is4) {
			bad++
		}
	}
	return bad
}

// retag rewrites the ICRCs of the IPv4 datagrams of a GSO run for the IP
// IDs the kernel gives the segments (0, 1, 2, ...), or back to ID 0 if undo.
func (u *UDP) retag(run []Datagram, undo bool) {
	if !u.is4 {
		return
	}
	for x := 1; x < len(run); x++ {
		from, to := uint16(0), uint16(x)
		if undo {
			from, to = to, from
		}
		d := &run[x]
		if n := len(d.Buf); n >= wire.ICRCLen {
			wire.RetagTrailer(d.Buf[n-wire.ICRCLen:], d.Len()-wire.ICRCLen, from, to)
		}
	}
}

// pack fills message m of s from chunk[i:j], sent as one GSO message if it
// holds more than one datagram.
func (u *UDP) pack(s *sendState, m int, chunk []Datagram, i, j int) {
	first := s.niov
	s.msgIov = first
	for x := i; x < j; x++ {
		if d := &chunk[x]; d.Payload != nil {
			s.addIov(d.Buf[:d.PayloadAt])
			s.addIov(d.Payload)
			s.addIov(d.Buf[d.PayloadAt:])
		} else {
			s.addIov(d.Buf)
		}
	}
	d := &chunk[i]
	sa := &s.names[m]
	var namelen uint32
	port := d.Dst.Port()
	if u.is4 {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: d.Dst.Addr().Unmap().As4()}
		p := (*[2]byte)(unsafe.Pointer(&sa4.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		namelen = unix.SizeofSockaddrInet4
	} else {
		a := d.Dst.Addr()
		*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
		if a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
			sa.Scope_id = u.scope
		}
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		namelen = unix.SizeofSockaddrInet6
	}
	h := &s.hs[m]
	h.Len = 0
	h.Hdr = unix.Msghdr{
		Name:    (*byte)(unsafe.Pointer(sa)),
		Namelen: namelen,
		Iov:     &s.iov[first],
	}
	h.Hdr.SetIovlen(s.niov - first)
	if s.niov == first {
		h.Hdr.Iov = nil // an empty datagram
	}
	if j-i > 1 {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&s.ctl[m][0]))
		c.Level, c.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		c.SetLen(unix.CmsgLen(2))
		*(*uint16)(unsafe.Pointer(&s.ctl[m][unix.SizeofCmsghdr/8])) = uint16(d.Len())
		h.Hdr.Control = (*byte)(unsafe.Pointer(c))
		h.Hdr.SetControllen(unix.CmsgSpace(2))
		u.retag(chunk[i:j], false)
	}
}

// addIov appends b to the iovecs of the messages being packed; an empty
// part takes none (the kernel takes empty ones, but they are not needed),
// and a part that continues the message's last iovec in memory extends it
// (the kernel copies per iovec, and short packets laid out back to back
// then cost one copy per GSO message).
func (s *sendState) addIov(b []byte) {
	if len(b) == 0 {
		return
	}
	if s.niov > s.msgIov {
		if v := &s.iov[s.niov-1]; uintptr(unsafe.Pointer(v.Base))+uintptr(v.Len) == uintptr(unsafe.Pointer(&b[0])) {
			v.SetLen(int(v.Len) + len(b))
			return
		}
	}
	v := &s.iov[s.niov]
	v.Base = &b[0]
	v.SetLen(len(b))
	s.niov++
}

// sysState is how Receive waits for the main socket. Every socket of a
// UDP link is taken out of Go's network poller (detach) and used through
// its raw descriptor: a socket in the poller wakes the poller's thread for
// every datagram that arrives, and for the write space every datagram sent
// gives back, even while a goroutine drains the socket itself
// (Device.Poll); on a small VM such a wake-up costs as much as the
// datagram. Receive instead waits, through the poller, on a private epoll
// instance that watches the main socket for input only, and SetQuiet can
// take the socket out of it while pollers drain it, so that arrivals wake
// nobody.
type sysState struct {
	ep    *os.File        // the private epoll instance, in Go's poller
	rc    syscall.RawConn // ep's
	quiet bool            // the main socket is out of ep; guarded by qmu
	qmu   sync.Mutex
	// SetQuiet's epoll_ctl, under qmu: its arguments and result, and
	// the call bound once (a closure made at each SetQuiet was garbage
	// at every switch between busy polling and waiting).
	qop, qfd int
	qev      unix.EpollEvent
	qerr     error
	qctl     func(epfd uintptr)
}

// epollCtl makes SetQuiet's epoll_ctl on the epoll descriptor.
func (s *sysState) epollCtl(epfd uintptr) { s.qerr = unix.EpollCtl(int(epfd), s.qop, s.qfd, &s.qev) }

func (u *UDP) sysInit() error {
	if err := detach(u.main); err != nil {
		return err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(u.main.fd)
		return os.NewSyscallError("epoll_create1", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(u.main.fd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, u.main.fd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(u.main.fd)
		return os.NewSyscallError("epoll_ctl", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		unix.Close(u.main.fd)
		return os.NewSyscallError("fcntl O_NONBLOCK", err)
	}
	u.sys.qctl = u.sys.epollCtl
	u.sys.ep = os.NewFile(uintptr(epfd), "rdma-go-link-epoll")
	if u.sys.rc, err = u.sys.ep.SyscallConn(); err != nil {
		u.sys.ep.Close()
		unix.Close(u.main.fd)
		return err
	}
	return nil
}

func (u *UDP) setReadDeadline(t time.Time) error { return u.sys.ep.SetReadDeadline(t) }

// unblock wakes a waiting Receive for good; Close calls it before it
// takes fdMu, since closing the epoll file waits for Receive to return.
func (u *UDP) unblock() error { return u.sys.ep.Close() }

// closeMain closes the main socket; Close holds fdMu.
func (u *UDP) closeMain() error {
	if err := unix.Close(u.main.fd); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}

// SetQuiet takes the main socket out of the set that Receive waits on
// (on), or puts it back (off): while quiet, datagrams that arrive wake no
// thread, and only TryReceive (or a Receive already past its wait) reads
// them. A device sets it while goroutines busy poll it.
//
// Quiet removes the socket from the epoll instance rather than clearing
// the events it watches for: an entry that watches nothing still hangs on
// the socket's wait queue, and the kernel then takes the queue's lock and
// calls into epoll for every datagram queued (a twentieth of a small
// message's hop on loopback). Put back, a socket that holds datagrams is
// reported ready at once (level-triggered), so none is missed.
func (u *UDP) SetQuiet(on bool) {
	u.sys.qmu.Lock()
	defer u.sys.qmu.Unlock()
	if u.sys.quiet == on || u.closed.Load() {
		return
	}
	sy := &u.sys
	sy.qop, sy.qfd, sy.qev = unix.EPOLL_CTL_ADD, u.main.fd, unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(u.main.fd)}
	if on {
		sy.qop = unix.EPOLL_CTL_DEL
	}
	u.fdMu.RLock()
	defer u.fdMu.RUnlock()
	if u.closed.Load() {
		return
	}
	if cerr := sy.rc.Control(sy.qctl); cerr != nil { // Control holds the epoll file open
		return // closed
	}
	if err := sy.qerr; err != nil {
		u.log.Debug("link: epoll_ctl", "local", u.local, "err", err)
		return
	}
	u.sys.quiet = on
}

// detach takes socket k out of Go's network poller (see sysState): it
// keeps a duplicate of the socket's descriptor and closes the net.UDPConn,
// which unregisters it. Send never waits for write space (a full buffer is
// a drop), so sending needs no poller.
func detach(k *udpSock) error {
	var fd int
	var derr error
	if err := k.rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return err
	}
	if derr != nil {
		return os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", derr)
	}
	k.conn.Close()
	k.conn, k.rc, k.fd = nil, nil, fd
	return nil
}

// closeSock closes a source-port socket; Close holds fdMu.
func closeSock(k *udpSock) error {
	if k.fd < 0 {
		return k.conn.Close()
	}
	if err := unix.Close(k.fd); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}

// write makes one sendmmsg of s's messages on socket k.
func (u *UDP) write(k *udpSock, s *sendState) error {
	if k.fd < 0 {
		return k.rc.Write(s.fn)
	}
	u.fdMu.RLock()
	defer u.fdMu.RUnlock()
	if u.closed.Load() {
		return net.ErrClosed
	}
	s.run(uintptr(k.fd))
	return nil
}

// flush sends the s.m packed messages of s on socket k, counting drops. It
// returns errGSORefused, with s.off at the message, if the kernel refuses a
// GSO message.
func (u *UDP) flush(k *udpSock, s *sendState) error {
	s.off = 0
	for s.off < s.m {
		if err := u.write(k, s); err != nil {
			return err
		}
		if s.errno == 0 && s.n > 0 {
			sent := 0
			for _, n := range s.segs[s.off : s.off+s.n] {
				sent += n
				if n > 1 {
					u.gsoSends.Add(1)
					u.gsoSegs.Add(uint64(n))
				}
			}
			s.off += s.n
			u.sent.Add(uint64(sent))
			continue
		}
		if s.errno == 0 { // sent nothing and said nothing: give up on the rest
			u.countDrop(s.segsFrom(s.off), syscall.EAGAIN)
			return nil
		}
		if s.segs[s.off] > 1 && (s.errno == syscall.EINVAL || s.errno == syscall.EIO) {
			return errGSORefused
		}
		drop, wide := dropErrno(s.errno)
		switch {
		case !drop:
			return fmt.Errorf("link: UDP %s: %w", u.local, os.NewSyscallError("sendmmsg", s.errno))
		case wide:
			u.countDrop(s.segsFrom(s.off), s.errno)
			return nil
		default:
			u.countDrop(s.segs[s.off], s.errno)
			s.off++
		}
	}
	return nil
}

// segsFrom returns the datagrams in messages m and later.
func (s *sendState) segsFrom(m int) int {
	n := 0
	for _, x := range s.segs[m:s.m] {
		n += x
	}
	return n
}
