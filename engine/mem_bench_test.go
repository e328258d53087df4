package engine

import (
	"runtime"
	"testing"
)

// benchTable registers n MRs of 4 KiB with remote access in pd 1 and
// returns the table and their R_Keys.
func benchTable(b *testing.B, n int) (*MemTable, []uint32) {
	t := NewMemTable()
	keys := make([]uint32, n)
	mem := make([]byte, n*4096)
	for i := range keys {
		mr := t.Register(1, mem[i*4096:(i+1)*4096], AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
		keys[i] = mr.RKey
	}
	runtime.GC()
	return t, keys
}

// BenchmarkMemRemote is the receive path's per-packet work on memory: an
// R_Key resolved and a range checked (MemTable.Remote), over 1, 1,000 and
// 100,000 registered MRs, and a key that names none (a guessing peer).
func BenchmarkMemRemote(b *testing.B) {
	for _, n := range []int{1, 1000, 100000} {
		t, keys := benchTable(b, n)
		addrs := make([]uint64, n)
		for i, k := range keys {
			addrs[i] = t.lookup(k).Addr
		}
		b.Run("mrs="+itoa(n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				j := i % n
				if _, err := t.Remote(1, 0, keys[j], addrs[j]+64, 1024, AccessRemoteWrite); err != nil {
					b.Fatal(err)
				}
				i += 7919
			}
		})
	}
	t, keys := benchTable(b, 1000)
	b.Run("bad-key", func(b *testing.B) {
		k := uint32(0x12345678)
		for b.Loop() {
			k = k*2654435761 + 1
			if k == keys[0] {
				continue
			}
			_, _ = t.Remote(1, 0, k, 0, 8, AccessRemoteWrite)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				j := i % len(keys)
				_, _ = t.Remote(1, 0, keys[j], 0, 0, AccessRemoteWrite)
				i += 7919
			}
		})
	})
}

// BenchmarkMemRegister is a registration and a deregistration.
func BenchmarkMemRegister(b *testing.B) {
	t, _ := benchTable(b, 1000)
	buf := make([]byte, 4096)
	for b.Loop() {
		t.Deregister(t.Register(1, buf, AccessLocalWrite|AccessRemoteWrite))
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}
