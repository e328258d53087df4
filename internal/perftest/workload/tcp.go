package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// TCPPair returns a connected TCP pair on 127.0.0.1.
func TCPPair() (client, server net.Conn, err error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	client, err = net.DialTimeout("tcp4", ln.Addr().String(), WaitTimeout)
	if err != nil {
		return nil, nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			client.Close()
			return nil, nil, r.err
		}
		return client, r.c, nil
	case <-time.After(WaitTimeout):
		client.Close()
		return nil, nil, errors.New("accept timed out")
	}
}

// TCPStream writes size-byte buffers on a TCP loopback connection,
// drained by a reader goroutine: the baseline of RCWrite.
func TCPStream(ctx context.Context, size int, b Budget) (Result, error) {
	return TCPWrites(ctx, size, 1, 1, b)
}

// TCPWrites is WriteConns over conns loopback connections in this
// process, each drained by a SinkTCP goroutine.
func TCPWrites(ctx context.Context, size, batch, conns int, b Budget) (Result, error) {
	cs := make([]net.Conn, 0, conns)
	done := make(chan error, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, s, err := TCPPair()
		if err != nil {
			return Result{}, err
		}
		cs = append(cs, c)
		go func() {
			defer s.Close()
			_, err := SinkTCP(s)
			done <- err
		}()
	}
	r, err := WriteConns(ctx, cs, size, batch, b)
	if err != nil {
		return r, err
	}
	for range conns {
		if err := <-done; err != nil { // SinkTCP's reads are bounded
			return r, err
		}
	}
	return r, nil
}

// WriteConns writes size-byte messages, batch at a time (one write call
// per batch), on each of conns in turn, each read by a SinkTCP at the
// other end. Once the budget is spent it closes its side of each
// connection for writing and waits for each sink's count of bytes, which
// must match: the time measured ends when the last byte has been read.
// One op is one message.
func WriteConns(ctx context.Context, conns []net.Conn, size, batch int, b Budget) (Result, error) {
	stop := abortOnDone(ctx, conns)
	defer stop()
	buf := make([]byte, size*batch)
	start := time.Now()
	ops := 0
	for q := 0; !b.done(ops, start); q = (q + 1) % len(conns) {
		c := conns[q]
		c.SetWriteDeadline(time.Now().Add(WaitTimeout))
		if _, err := c.Write(buf); err != nil {
			return Result{}, ctxErr(ctx, fmt.Errorf("write: %w", err))
		}
		ops += batch
	}
	var got int64
	for _, c := range conns {
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			return Result{}, ctxErr(ctx, fmt.Errorf("close for writing: %w", err))
		}
		var n [8]byte
		c.SetReadDeadline(time.Now().Add(WaitTimeout))
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return Result{}, ctxErr(ctx, fmt.Errorf("the reader's byte count: %w", err))
		}
		got += int64(binary.BigEndian.Uint64(n[:]))
	}
	el := time.Since(start)
	if want := int64(ops) * int64(size); got != want {
		return Result{}, fmt.Errorf("the readers read %d bytes, %d were written", got, want)
	}
	return Result{Ops: ops, Bytes: got, Elapsed: el}, nil
}

// SinkTCP reads c to EOF, then writes back how many bytes it read (8
// bytes, big-endian) for WriteConns. Every read is bounded by WaitTimeout.
func SinkTCP(c net.Conn) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		c.SetReadDeadline(time.Now().Add(WaitTimeout))
		k, err := c.Read(buf)
		n += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("read: %w", err)
		}
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	c.SetWriteDeadline(time.Now().Add(WaitTimeout))
	if _, err := c.Write(b[:]); err != nil {
		return n, fmt.Errorf("write the count: %w", err)
	}
	return n, nil
}

// TCPPingPong echoes size bytes on a TCP loopback connection (Nagle off,
// blocking reads): the baseline of RCSendPingPong. One op is a round trip.
func TCPPingPong(ctx context.Context, size int, b Budget) (Result, error) {
	c, s, err := TCPPair()
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	defer s.Close()
	go EchoTCP(s, size)
	return PingTCP(ctx, c, size, b)
}

// PingTCP sends size bytes on c and reads the echo (EchoTCP at the other
// end), until the budget is spent. One op is a round trip.
func PingTCP(ctx context.Context, c net.Conn, size int, b Budget) (Result, error) {
	stop := abortOnDone(ctx, []net.Conn{c})
	defer stop()
	buf := make([]byte, size)
	start := time.Now()
	rtt := newRTTLog(b, start)
	ops := 0
	for !b.done(ops, start) {
		c.SetDeadline(time.Now().Add(WaitTimeout))
		if _, err := c.Write(buf); err != nil {
			return Result{}, ctxErr(ctx, fmt.Errorf("write: %w", err))
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return Result{}, ctxErr(ctx, fmt.Errorf("read the echo: %w", err))
		}
		rtt.lap()
		ops++
	}
	return Result{Ops: ops, Bytes: int64(ops) * int64(2*size), Elapsed: time.Since(start), RTTs: rtt.d}, nil
}

// EchoTCP writes back every size bytes it reads on c, until EOF (then it
// returns nil). Every read waits at most WaitTimeout.
func EchoTCP(c net.Conn, size int) error {
	buf := make([]byte, size)
	for {
		c.SetDeadline(time.Now().Add(WaitTimeout))
		if _, err := io.ReadFull(c, buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		if _, err := c.Write(buf); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}

// abortOnDone closes conns when ctx is done, so that every read and write
// on them fails at once; the returned function stops watching ctx.
func abortOnDone(ctx context.Context, conns []net.Conn) func() bool {
	return context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.Close()
		}
	})
}

// ctxErr returns ctx's cause when ctx is done (a failure it provoked),
// else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	}
	return err
}
