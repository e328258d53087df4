//go:build linux

package link

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxBatch is the number of datagrams one recvmmsg/sendmmsg call moves.
const maxBatch = 64

// portableBuffers is false: setSocketOptions sizes the buffers, with
// SO_RCVBUFFORCE when allowed.
const portableBuffers = false

// setSocketOptions applies the RoCEv2 socket options before bind. Only
// IP_PMTUDISC_DO is required: without it Linux would put a changing IP ID on
// sent IPv4 datagrams, and the peer's ICRC check would fail.
func setSocketOptions(fd uintptr, is4 bool, buf int, sendOnly bool, log *slog.Logger) error {
	s := int(fd)
	opt := func(level, name, v int, what string) {
		if err := unix.SetsockoptInt(s, level, name, v); err != nil {
			log.Debug("link: cannot set socket option", "option", what, "err", err)
		}
	}
	if is4 {
		if err := unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); err != nil {
			return fmt.Errorf("setsockopt IP_MTU_DISCOVER=IP_PMTUDISC_DO: %w", err)
		}
		opt(unix.SOL_SOCKET, unix.SO_NO_CHECK, 1, "SO_NO_CHECK")
	} else {
		opt(unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER")
		opt(unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_TX, 1, "UDP_NO_CHECK6_TX")
		opt(unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX")
	}
	if sendOnly {
		// Nothing should arrive on a source-port socket; discard whatever does
		// before it takes buffer space. The smallest buffer is enough.
		drop := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}
		prog := unix.SockFprog{Len: 1, Filter: &drop[0]}
		if err := unix.SetsockoptSockFprog(s, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			log.Debug("link: cannot set socket option", "option", "SO_ATTACH_FILTER", "err", err)
		}
		opt(unix.SOL_SOCKET, unix.SO_RCVBUF, 1, "SO_RCVBUF")
		return nil
	}
	if buf > 0 {
		for _, o := range [...]struct {
			force, plain int
			name         string
		}{
			{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, "SO_RCVBUF"},
			{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, "SO_SNDBUF"},
		} {
			if unix.SetsockoptInt(s, unix.SOL_SOCKET, o.force, buf) != nil {
				opt(unix.SOL_SOCKET, o.plain, buf, o.name)
			}
		}
	}
	return nil
}

// recvState is the preallocated scratch space of Receive.
type recvState struct {
	hs    []unix.Mmsghdr
	iov   []unix.Iovec
	names []unix.RawSockaddrInet6
	vlen  int
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // bound u.recv.run, made once
}

func (r *recvState) init(n int) {
	r.hs = make([]unix.Mmsghdr, n)
	r.iov = make([]unix.Iovec, n)
	r.names = make([]unix.RawSockaddrInet6, n)
	r.fn = r.run
}

// run is called by RawConn.Read; returning false waits for readability.
func (r *recvState) run(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hs[0])), uintptr(r.vlen), 0, 0, 0)
		switch e {
		case 0:
			r.n, r.errno = int(n), 0
			return true
		case unix.EAGAIN:
			return false
		case unix.EINTR, unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH,
			unix.EHOSTDOWN, unix.ENETDOWN, unix.ENOBUFS, unix.ENOMEM:
			// A pending ICMP error or a transient failure: try again.
			continue
		default:
			r.n, r.errno = 0, e
			return true
		}
	}
}

// receive is Receive under recvMu.
func (u *UDP) receive(batch []Datagram) (int, error) {
	r := &u.recv
	for {
		n := min(len(batch), len(r.hs))
		for i := 0; i < n; i++ {
			b := batch[i].Buf[:cap(batch[i].Buf)]
			if len(b) > 0 {
				r.iov[i].Base = &b[0]
			} else {
				r.iov[i].Base = nil
			}
			r.iov[i].SetLen(len(b))
			h := &r.hs[i]
			h.Len = 0
			h.Hdr = unix.Msghdr{
				Name:    (*byte)(unsafe.Pointer(&r.names[i])),
				Namelen: unix.SizeofSockaddrInet6,
				Iov:     &r.iov[i],
			}
			h.Hdr.SetIovlen(1)
		}
		r.vlen = n
		err := u.main.rc.Read(r.fn)
		for i := 0; i < n; i++ {
			r.iov[i].Base = nil // do not keep the caller's buffers alive
		}
		if err != nil {
			return 0, err
		}
		if r.errno != 0 {
			return 0, os.NewSyscallError("recvmmsg", r.errno)
		}
		k := 0
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
			k++
		}
		if k > 0 {
			u.received.Add(uint64(k))
			return k, nil
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
// do not allocate.
type sendState struct {
	hs    [maxBatch]unix.Mmsghdr
	iov   [maxBatch]unix.Iovec
	names [maxBatch]unix.RawSockaddrInet6
	off   int // first message to send
	m     int // number of messages packed
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // bound run, made once
}

var sendPool = sync.Pool{New: func() any {
	s := new(sendState)
	s.fn = s.run
	return s
}}

// run is called by RawConn.Write. It never waits for writability: a full
// socket buffer is a drop, as on a NIC.
func (s *sendState) run(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&s.hs[s.off])), uintptr(s.m-s.off), unix.MSG_DONTWAIT, 0, 0)
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

// sendOn sends ds, all of which leave from socket k.
func (u *UDP) sendOn(k *udpSock, ds []Datagram) error {
	s := sendPool.Get().(*sendState)
	defer sendPool.Put(s)
	for len(ds) > 0 {
		chunk := ds[:min(len(ds), maxBatch)]
		ds = ds[len(chunk):]
		s.m = 0
		bad := 0
		for i := range chunk {
			d := &chunk[i]
			if !dstOK(d.Dst, u.is4) {
				bad++
				continue
			}
			u.pack(s, s.m, d)
			s.m++
		}
		if bad > 0 {
			u.countDrop(bad, errBadDst)
		}
		err := u.flush(k, s)
		for i := 0; i < s.m; i++ {
			s.iov[i].Base = nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pack fills message i of s from d.
func (u *UDP) pack(s *sendState, i int, d *Datagram) {
	if len(d.Buf) > 0 {
		s.iov[i].Base = &d.Buf[0]
	} else {
		s.iov[i].Base = nil
	}
	s.iov[i].SetLen(len(d.Buf))
	sa := &s.names[i]
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
	h := &s.hs[i]
	h.Len = 0
	h.Hdr = unix.Msghdr{
		Name:    (*byte)(unsafe.Pointer(sa)),
		Namelen: namelen,
		Iov:     &s.iov[i],
	}
	h.Hdr.SetIovlen(1)
}

// flush sends the s.m packed messages of s on socket k, counting drops.
func (u *UDP) flush(k *udpSock, s *sendState) error {
	s.off = 0
	for s.off < s.m {
		if err := k.rc.Write(s.fn); err != nil {
			return err
		}
		if s.errno == 0 && s.n > 0 {
			s.off += s.n
			u.sent.Add(uint64(s.n))
			continue
		}
		if s.errno == 0 { // sent nothing and said nothing: give up on the rest
			u.countDrop(s.m-s.off, syscall.EAGAIN)
			return nil
		}
		drop, wide := dropErrno(s.errno)
		switch {
		case !drop:
			return fmt.Errorf("link: UDP %s: %w", u.local, os.NewSyscallError("sendmmsg", s.errno))
		case wide:
			u.countDrop(s.m-s.off, s.errno)
			return nil
		default:
			u.countDrop(1, s.errno)
			s.off++
		}
	}
	return nil
}
