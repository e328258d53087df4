package provider

import (
	"testing"
	"unsafe"
)

func TestLineCount(t *testing.T) {
	for _, c := range []struct {
		a, n uintptr
		want int
	}{
		{0, 0, 0},
		{64, 0, 0},
		{0, 1, 1},
		{0, 64, 1},
		{0, 65, 2},
		{63, 1, 1},
		{63, 2, 2},
		{100, 28, 1},  // 100–127
		{100, 29, 2},  // 100–128
		{64, 128, 2},  // exactly two lines
		{65, 128, 3},  // straddles a third
		{0, 904, 15},  // a soft QP's post range
		{0, 1632, 26}, // an object of 1632 bytes from a line start
	} {
		if got := lineCount(c.a, c.n); got != c.want {
			t.Errorf("lineCount(%d, %d) = %d, want %d", c.a, c.n, got, c.want)
		}
	}
}

// TestPrefetch runs the hint over ranges that start and end anywhere in a
// line, up to the ends of an object: it must not fault, and must not
// change what it is asked about.
func TestPrefetch(t *testing.T) {
	buf := make([]byte, 4*CacheLineSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	for off := range 2 * CacheLineSize {
		for _, n := range []uintptr{0, 1, CacheLineSize - 1, CacheLineSize, CacheLineSize + 1, uintptr(len(buf) - off)} {
			if off+int(n) <= len(buf) {
				Prefetch(unsafe.Pointer(&buf[off]), n)
			}
		}
	}
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, buf[i])
		}
	}
}

func BenchmarkPrefetch(b *testing.B) {
	buf := make([]byte, 16*CacheLineSize)
	for range b.N {
		Prefetch(unsafe.Pointer(&buf[0]), uintptr(len(buf)))
	}
}
