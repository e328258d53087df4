// Package pingpong implements rdma-core's libibverbs example pingpongs
// (ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong):
// their out-of-band TCP exchange, byte for byte, and their data phase.
package pingpong

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// RecordLen is the size of one exchange record: 51 characters and a NUL.
const RecordLen = 52

// doneMsg is what the client writes after reading the server's records.
var doneMsg = []byte("done\x00")

// Dest is one side's address as the pingpongs exchange it.
type Dest struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID verbs.GID
}

// Marshal returns the 52-byte record "LLLL:QQQQQQ:PPPPPP:<32 hex GID>\0".
func (d Dest) Marshal() [RecordLen]byte {
	var b [RecordLen]byte
	s := fmt.Sprintf("%04x:%06x:%06x:%x", d.LID, d.QPN&0xFFFFFF, d.PSN&0xFFFFFF, d.GID[:])
	copy(b[:], s)
	return b
}

// ErrBadRecord is returned for a record that does not parse.
var ErrBadRecord = errors.New("pingpong: malformed address record")

// ParseDest parses a record the way the C tools' sscanf("%x:%x:%x:%s")
// does, leniently: hex fields of any case, separated by colons, and a GID
// of 32 hex digits; anything after a NUL is ignored.
func ParseDest(b []byte) (Dest, error) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	parts := bytes.SplitN(b, []byte(":"), 4)
	if len(parts) != 4 {
		return Dest{}, fmt.Errorf("%w: %q: want 4 colon-separated fields", ErrBadRecord, b)
	}
	var v [3]uint64
	for i, bits := range []int{16, 24, 24} {
		n, err := strconv.ParseUint(string(bytes.TrimSpace(parts[i])), 16, bits)
		if err != nil {
			return Dest{}, fmt.Errorf("%w: field %d %q: %v", ErrBadRecord, i+1, parts[i], err)
		}
		v[i] = n
	}
	g := bytes.TrimSpace(parts[3])
	if len(g) != 32 {
		return Dest{}, fmt.Errorf("%w: GID %q is not 32 hex digits", ErrBadRecord, g)
	}
	var d Dest
	for i := 0; i < 16; i++ {
		n, err := strconv.ParseUint(string(g[2*i:2*i+2]), 16, 8)
		if err != nil {
			return Dest{}, fmt.Errorf("%w: GID %q: %v", ErrBadRecord, g, err)
		}
		d.GID[i] = byte(n)
	}
	d.LID, d.QPN, d.PSN = uint16(v[0]), uint32(v[1]), uint32(v[2])
	return d, nil
}

// exchangeTimeout bounds each step of the TCP exchange.
const exchangeTimeout = 60 * time.Second

// ClientExchange connects to host:port, sends the local records, reads as
// many remote records, and sends "done".
func ClientExchange(ctx context.Context, host string, port int, local []Dest) ([]Dest, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("Couldn't connect to %s:%d", host, port)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(exchangeTimeout))
	if err := writeRecords(conn, local); err != nil {
		return nil, fmt.Errorf("Couldn't send local address: %w", err)
	}
	remote, err := readRecords(conn, len(local))
	if err != nil {
		return nil, fmt.Errorf("Couldn't read remote address: %w", err)
	}
	if _, err := conn.Write(doneMsg); err != nil {
		return nil, fmt.Errorf("Couldn't send \"done\": %w", err)
	}
	return remote, nil
}

// Listen opens the server's TCP port (the C server binds with SO_REUSEADDR,
// which Go's listener sets).
func Listen(ctx context.Context, port int) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("Couldn't listen to port %d", port)
	}
	return ln, nil
}

// ServerExchange accepts one connection on ln (and closes ln), reads n
// remote records, calls connect with them (the server moves its QPs to RTS
// before answering), sends the local records and waits for "done".
func ServerExchange(ctx context.Context, ln net.Listener, n int, connect func(remote []Dest) ([]Dest, error)) ([]Dest, error) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	conn, err := ln.Accept()
	stop()
	ln.Close()
	if err != nil {
		return nil, fmt.Errorf("accept() failed: %w", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(exchangeTimeout))
	remote, err := readRecords(conn, n)
	if err != nil {
		return nil, fmt.Errorf("%d/%d: Couldn't read remote address: %w", 0, RecordLen, err)
	}
	local, err := connect(remote)
	if err != nil {
		return nil, err
	}
	if err := writeRecords(conn, local); err != nil {
		return nil, fmt.Errorf("Couldn't send local address: %w", err)
	}
	var done [len("done\x00")]byte
	if _, err := io.ReadFull(conn, done[:]); err != nil {
		return nil, fmt.Errorf("Couldn't read \"done\": %w", err)
	}
	return remote, nil
}

func writeRecords(w io.Writer, ds []Dest) error {
	buf := make([]byte, 0, len(ds)*RecordLen)
	for _, d := range ds {
		r := d.Marshal()
		buf = append(buf, r[:]...)
	}
	_, err := w.Write(buf)
	return err
}

func readRecords(r io.Reader, n int) ([]Dest, error) {
	buf := make([]byte, n*RecordLen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	out := make([]Dest, n)
	for i := range out {
		d, err := ParseDest(buf[i*RecordLen : (i+1)*RecordLen])
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}
