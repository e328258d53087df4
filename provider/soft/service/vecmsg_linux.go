package service

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// vecMsg is a sendmsg/recvmsg of two buffers (a header and a payload) that
// allocates nothing per call, unlike unix.SendmsgBuffers. Its owner keeps
// the buffers alive until the call returns.
type vecMsg struct {
	iov [2]unix.Iovec
	hdr unix.Msghdr
}

func (m *vecMsg) set(head, body []byte) {
	m.iov[0].Base = &head[0]
	m.iov[0].SetLen(len(head))
	m.iov[1].Base, m.iov[1].Len = nil, 0
	if len(body) > 0 {
		m.iov[1].Base = &body[0]
		m.iov[1].SetLen(len(body))
	}
	m.hdr = unix.Msghdr{Iov: &m.iov[0]}
	m.hdr.SetIovlen(2)
}

// send is sendmsg(2) of head and body.
func (m *vecMsg) send(fd uintptr, head, body []byte, flags int) (int, error) {
	m.set(head, body)
	n, _, e := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&m.hdr)), uintptr(flags))
	m.iov[1].Base = nil
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// recv is recvmsg(2) into head and body; it returns the bytes read and the
// message's flags (MSG_TRUNC).
func (m *vecMsg) recv(fd uintptr, head, body []byte, flags int) (int, int, error) {
	m.set(head, body)
	n, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&m.hdr)), uintptr(flags))
	m.iov[1].Base = nil
	if e != 0 {
		return 0, 0, e
	}
	return int(n), int(m.hdr.Flags), nil
}
