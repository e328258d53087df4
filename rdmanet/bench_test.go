package rdmanet

import (
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkConnThroughput streams 64 KiB writes one way: over rdmanet
// between the two soft loopback devices, and over a net.TCPConn on
// 127.0.0.1 as the baseline, in the same run.
func BenchmarkConnThroughput(b *testing.B) {
	const chunk = 64 << 10
	run := func(b *testing.B, w io.Writer, r io.Reader) {
		b.SetBytes(chunk)
		b.ReportAllocs()
		buf := make([]byte, chunk)
		done := make(chan error, 1)
		total := int64(b.N) * chunk
		go func() {
			_, err := io.CopyN(io.Discard, struct{ io.Reader }{r}, total)
			done <- err
		}()
		b.ResetTimer()
		for range b.N {
			if _, err := w.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case err := <-done:
			if err != nil {
				b.Fatal(err)
			}
		case <-time.After(time.Minute):
			b.Fatal("reader stuck")
		}
	}
	b.Run("rdma", func(b *testing.B) {
		c, s := pipe(b)
		run(b, c, s)
	})
	b.Run("tcp", func(b *testing.B) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(b, err)
		defer l.Close()
		acc := make(chan net.Conn, 1)
		go func() {
			c, _ := l.Accept()
			acc <- c
		}()
		c, err := net.Dial("tcp", l.Addr().String())
		must(b, err)
		defer c.Close()
		s := <-acc
		if s == nil {
			b.Fatal("accept failed")
		}
		defer s.Close()
		run(b, c, s)
	})
}
