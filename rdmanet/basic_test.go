package rdmanet

import (
	"io"
	"testing"
)

// TestBasic: a message each way, then Close and io.EOF.
func TestBasic(t *testing.T) {
	c, s := pipe(t)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := io.ReadFull(s, buf[:4])
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("server read %q, %v", buf[:n], err)
	}
	if _, err := s.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	n, err = io.ReadFull(c, buf[:4])
	if err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("client read %q, %v", buf[:n], err)
	}
	must(t, c.Close())
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after peer Close: %d, %v", n, err)
	}
}
