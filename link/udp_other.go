//go:build !linux

package link

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"syscall"
	"time"
)

// maxBatch is 1 here: without recvmmsg a Receive call returns one datagram.
const maxBatch = 1

// portableBuffers asks open to size socket buffers through net.UDPConn,
// since setSocketOptions does not.
const portableBuffers = true

// setSocketOptions is a stub on this OS: the RoCEv2 options (DF with IP ID
// 0, zero UDP checksums, large buffers) are only set on Linux, so a peer that
// checks the ICRC of IPv4 packets may reject what this link sends.
// Nor is UDP GSO or GRO.
func setSocketOptions(_ uintptr, _ sockOpts, log *slog.Logger) (gso bool, err error) {
	log.Debug("link: RoCEv2 socket options are not supported on this OS")
	return false, nil
}

// recvState holds a scratch buffer big enough for any datagram, so that
// one too long for the caller's buffer is detected, not silently truncated.
type recvState struct{ scratch []byte }

func (r *recvState) init(int, bool) { r.scratch = make([]byte, 1<<16) }

// pollState is empty: UDP is not a Poller here.
type pollState struct{}

func detach(*udpSock) error                      { return nil }
func closeSock(k *udpSock) error                 { return k.conn.Close() }
func (u *UDP) sysInit() error                    { return nil }
func (u *UDP) setReadDeadline(t time.Time) error { return u.main.conn.SetReadDeadline(t) }
func (u *UDP) unblock() error                    { return u.main.conn.Close() }
func (u *UDP) closeMain() error                  { return nil }

// sysState is empty: the sockets are plain net.UDPConns here.
type sysState struct{}

// maxRecvErrors bounds the consecutive read errors one Receive call skips
// (Windows, for one, reports an ICMP port unreachable as a read error)
// before it returns the last one.
const maxRecvErrors = 64

// receive is Receive under recvMu: one datagram per call.
func (u *UDP) receive(batch []Datagram) (int, error) {
	errs := 0
	for {
		n, src, err := u.main.conn.ReadFromUDPAddrPort(u.recv.scratch)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || u.closed.Load() {
				return 0, err
			}
			if errs++; errs >= maxRecvErrors {
				return 0, err
			}
			continue
		}
		if n > cap(batch[0].Buf) {
			u.recvDrops.Add(1)
			continue
		}
		batch[0].Buf = append(batch[0].Buf[:0], u.recv.scratch[:n]...)
		batch[0].Src = netipUnmap(src)
		batch[0].Dst = u.local
		batch[0].SegSize = 0
		u.received.Add(1)
		return 1, nil
	}
}

// sendOn sends ds, all of which leave from socket k, one at a time.
func (u *UDP) sendOn(k *udpSock, ds []Datagram) error {
	for i := range ds {
		d := &ds[i]
		if !dstOK(d.Dst, u.is4) {
			u.countDrop(1, errBadDst)
			continue
		}
		dst := d.Dst
		if u.is4 {
			dst = netipUnmap(dst)
		}
		if _, err := k.conn.WriteToUDPAddrPort(d.Bytes(), dst); err != nil {
			var e syscall.Errno
			if errors.As(err, &e) {
				if drop, _ := dropErrno(e); drop {
					u.countDrop(1, err)
					continue
				}
			}
			return err
		}
		u.sent.Add(1)
	}
	return nil
}

func netipUnmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
