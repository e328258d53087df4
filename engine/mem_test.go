package engine

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// unpredictable returns why keys, in the order they were handed out, would
// let a peer that saw some of them guess others: a predictor of key i+1 from
// the keys before it (the most common difference or XOR of consecutive
// keys, learnt on the first half and tried on the second; the same for the
// 8-bit variant and the 24-bit tag alone) that succeeds more often than
// chance allows, or bits that do not vary evenly. nil means none found.
func unpredictable(keys []uint32) error {
	n := len(keys)
	half := n / 2
	type predictor struct {
		name  string
		op    func(a, b uint32) uint32 // the relation learnt from consecutive keys
		apply func(a, d uint32) uint32 // its prediction of the next key
		mask  uint32                   // the part of the key predicted
		space float64                  // how many values that part takes
	}
	sub := func(a, b uint32) uint32 { return b - a }
	add := func(a, d uint32) uint32 { return a + d }
	xor := func(a, b uint32) uint32 { return a ^ b }
	preds := []predictor{
		{"difference", sub, add, 0xFFFFFFFF, 1 << 32},
		{"xor", xor, xor, 0xFFFFFFFF, 1 << 32},
		{"variant difference", sub, add, 0xFF, 1 << 8},
		{"variant xor", xor, xor, 0xFF, 1 << 8},
		{"tag difference", func(a, b uint32) uint32 { return b>>8 - a>>8 }, func(a, d uint32) uint32 { return (a>>8 + d) << 8 }, 0xFFFFFF00, 1 << 24},
		{"tag xor", func(a, b uint32) uint32 { return (a ^ b) &^ 0xFF }, xor, 0xFFFFFF00, 1 << 24},
	}
	for _, p := range preds {
		// Learn the most common relation between consecutive keys...
		freq := map[uint32]int{}
		for i := 1; i < half; i++ {
			freq[p.op(keys[i-1], keys[i])&p.mask]++
		}
		best, bestN := uint32(0), -1
		for d, c := range freq {
			if c > bestN || (c == bestN && d < best) {
				best, bestN = d, c
			}
		}
		// ... and predict the second half with it, and with the previous
		// relation seen (a predictor that adapts).
		hits, adaptive := 0, 0
		for i := half; i < n; i++ {
			if p.apply(keys[i-1], best)&p.mask == keys[i]&p.mask {
				hits++
			}
			if p.apply(keys[i-1], p.op(keys[i-2], keys[i-1]))&p.mask == keys[i]&p.mask {
				adaptive++
			}
		}
		// Chance is (n/2)/space hits; allow 3 times that plus 5.
		limit := int(3*float64(n-half)/p.space) + 5
		if hits > limit || adaptive > limit {
			return fmt.Errorf("%s predicts %d (adaptive: %d) of %d keys, chance is about %.1f",
				p.name, hits, adaptive, n-half, float64(n-half)/p.space)
		}
	}
	// Every bit is set in about half of the keys: 50% ± 5 standard
	// deviations.
	var ones [32]int
	for _, k := range keys {
		for b := range 32 {
			ones[b] += int(k >> b & 1)
		}
	}
	dev := 5 * 0.5 * sqrt(float64(n))
	for b, c := range ones {
		if d := float64(c) - float64(n)/2; d > dev || d < -dev {
			return fmt.Errorf("bit %d is set in %d of %d keys", b, c, n)
		}
	}
	// Consecutive keys differ in about 16 bits.
	flips := 0
	for i := 1; i < n; i++ {
		flips += bits.OnesCount32(keys[i] ^ keys[i-1])
	}
	if avg := float64(flips) / float64(n-1); avg < 15 || avg > 17 {
		return fmt.Errorf("consecutive keys differ in %.2f bits on average, want about 16", avg)
	}
	return nil
}

func sqrt(x float64) float64 {
	z := x
	for range 50 {
		z = (z + x/z) / 2
	}
	return z
}

// keySequence registers n MRs in one table, deregistering some of them on
// the way (so freed keys could come back), and returns every key handed out.
func keySequence(t *MemTable, n int, rng *rand.Rand) []uint32 {
	keys := make([]uint32, 0, n)
	var live []*MR
	buf := make([]byte, 64)
	for len(keys) < n {
		mr := t.Register(1, buf, AccessLocalWrite|AccessRemoteWrite)
		if mr.LKey != mr.RKey {
			panic("L_Key and R_Key differ")
		}
		keys = append(keys, mr.RKey)
		live = append(live, mr)
		if rng.IntN(3) == 0 { // free a random one, often the newest
			i := len(live) - 1
			if rng.IntN(2) == 0 {
				i = rng.IntN(len(live))
			}
			t.Deregister(live[i])
			live = append(live[:i], live[i+1:]...)
		}
	}
	return keys
}

// TestKeysUnpredictable: the keys of 10,000 registrations give a peer that
// saw them no better than chance at guessing the next, and the check does
// catch predictable sequences, the old scheme among them.
func TestKeysUnpredictable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := keySequence(NewMemTable(), 10000, rng)
	if err := unpredictable(keys); err != nil {
		t.Fatalf("table keys: %v", err)
	}
	// Two tables do not share a sequence.
	if other := keySequence(NewMemTable(), 100, rng); other[0] == keys[0] && other[1] == keys[1] {
		t.Fatal("two tables handed out the same keys")
	}

	// Predictable sequences the check must reject.
	old := func() []uint32 { // (index+base)<<8 | variant, variant += 0x5B: the scheme this replaced
		var out []uint32
		base, variant := uint32(0x3A7), uint8(0x11)
		var free []uint32
		next := uint32(0)
		for len(out) < 10000 {
			var idx uint32
			if len(free) > 0 {
				idx, free = free[len(free)-1], free[:len(free)-1]
			} else {
				idx, next = next, next+1
			}
			variant += 0x5B
			out = append(out, (idx+base)<<8|uint32(variant))
			if rng.IntN(3) == 0 {
				free = append(free, idx)
			}
		}
		return out
	}
	seq := func(f func(i int, prev uint32) uint32) []uint32 {
		out := make([]uint32, 10000)
		for i := range out {
			var prev uint32
			if i > 0 {
				prev = out[i-1]
			}
			out[i] = f(i, prev)
		}
		return out
	}
	for name, bad := range map[string][]uint32{
		"old scheme":                  old(),
		"counter":                     seq(func(i int, _ uint32) uint32 { return uint32(i+1) << 8 }),
		"random tag, counted variant": seq(func(i int, _ uint32) uint32 { return rng.Uint32()&^0xFF | uint32(i&0xFF) }),
		"random variant, counted tag": seq(func(i int, _ uint32) uint32 { return uint32(i+7)<<8 | rng.Uint32()&0xFF }),
		"xor walk":                    seq(func(i int, prev uint32) uint32 { return prev ^ 0x9E3779B9 }),
		"LCG":                         seq(func(i int, prev uint32) uint32 { return prev*1664525 + 1013904223 }),
		"one random bit stuck":        seq(func(int, uint32) uint32 { return rng.Uint32() | 1<<17 }),
	} {
		if err := unpredictable(bad); err == nil {
			t.Errorf("%s: not caught", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestKeysNotReused: no key is handed out twice while its MR lives, and a
// freed key stays out of use for the next quarantineLen deregistrations (its
// tag too, so a window's other variants cannot come back either).
func TestKeysNotReused(t *testing.T) {
	tb := NewMemTable()
	buf := make([]byte, 64)
	recent := map[uint32]int{} // tag -> when it was freed
	var freedOrder []uint32
	liveTags := map[uint32]bool{}
	var live []*MR
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 50000 {
		mr := tb.Register(1, buf, AccessLocalWrite|AccessRemoteRead)
		tag := mr.LKey >> 8
		if tag == 0 || mr.LKey == 0 {
			t.Fatalf("key %#x", mr.LKey)
		}
		if liveTags[tag] {
			t.Fatalf("registration %d: tag %#x of a live MR handed out again", i, tag)
		}
		if _, ok := recent[tag]; ok {
			t.Fatalf("registration %d: tag %#x freed %d deregistrations ago handed out again", i, tag, len(freedOrder)-recent[tag])
		}
		if tb.lookup(mr.RKey) != mr {
			t.Fatalf("key %#x does not find its MR", mr.RKey)
		}
		liveTags[tag] = true
		live = append(live, mr)
		if len(live) > 2000 || rng.IntN(2) == 0 {
			j := rng.IntN(len(live))
			old := live[j]
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
			tb.Deregister(old)
			otag := old.LKey >> 8
			delete(liveTags, otag)
			if _, err := tb.Remote(1, 0, old.RKey, old.Addr, 1, AccessRemoteRead); err == nil {
				t.Fatal("a freed key still works")
			}
			recent[otag] = len(freedOrder)
			freedOrder = append(freedOrder, otag)
			if len(freedOrder) > quarantineLen {
				delete(recent, freedOrder[len(freedOrder)-quarantineLen-1])
			}
		}
	}
	// Every live MR is still found by its key; the table stayed small.
	for _, mr := range live {
		if tb.lookup(mr.LKey) != mr {
			t.Fatalf("key %#x lost", mr.LKey)
		}
	}
	if tb.used != len(live)+quarantineLen || len(tb.slots) > 4*(len(live)+quarantineLen) {
		t.Fatalf("table: %d used, %d slots, for %d live MRs", tb.used, len(tb.slots), len(live))
	}
}

// TestKeysGuessed: random guesses at R_Keys find nothing; the only keys
// that work are the ones handed out.
func TestKeysGuessed(t *testing.T) {
	tb := NewMemTable()
	buf := make([]byte, 4096)
	valid := map[uint32]bool{}
	for range 1000 {
		valid[tb.Register(1, buf, AccessLocalWrite|AccessRemoteWrite).RKey] = true
	}
	rng := rand.New(rand.NewPCG(5, 6))
	hits := 0
	for range 1_000_000 {
		k := rng.Uint32()
		mr := tb.lookup(k)
		found := mr != nil && mr.RKey == k
		if found != valid[k] {
			t.Fatalf("key %#x: found %v, valid %v", k, found, valid[k])
		}
		if found {
			hits++
		}
	}
	// 1,000 keys of 2^32: a million guesses hit 0.23 on average.
	if hits > 3 {
		t.Fatalf("%d of a million guesses hit a key", hits)
	}
}

// TestKeyCache: a look-up through a KeyCache answers exactly what the table
// answers, whatever happened to the MR since it was cached: deregistered,
// remote access invalidated, asked for another PD, access or range, or a
// memory window rebound.
func TestKeyCache(t *testing.T) {
	tb := NewMemTable()
	buf := make([]byte, 4096)
	all := uint32(AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite | AccessMWBind)
	var c KeyCache
	same := func(step string, pd uint32, key uint32, va, n uint64, access uint32) {
		t.Helper()
		wantL, wantLErr := tb.Local(pd, SGE{Addr: va, Length: uint32(n), LKey: key}, access&AccessLocalWrite != 0)
		gotL, gotLErr := tb.LocalCached(&c, pd, SGE{Addr: va, Length: uint32(n), LKey: key}, access&AccessLocalWrite != 0)
		if wantLErr != gotLErr || len(wantL) != len(gotL) || (len(gotL) > 0 && &wantL[0] != &gotL[0]) {
			t.Errorf("%s: LocalCached = %d bytes, %v; Local = %d bytes, %v", step, len(gotL), gotLErr, len(wantL), wantLErr)
		}
		wantR, wantRErr := tb.Remote(pd, 7, key, va, n, access&^AccessLocalWrite)
		gotR, gotRErr := tb.RemoteCached(&c, pd, 7, key, va, n, access&^AccessLocalWrite)
		if wantRErr != gotRErr || len(wantR) != len(gotR) || (len(gotR) > 0 && &wantR[0] != &gotR[0]) {
			t.Errorf("%s: RemoteCached = %d bytes, %v; Remote = %d bytes, %v", step, len(gotR), gotRErr, len(wantR), wantRErr)
		}
	}
	mr := tb.Register(1, buf, all)
	other := tb.Register(1, make([]byte, 64), AccessLocalWrite|AccessRemoteRead)
	same("first use", 1, mr.LKey, mr.Addr+64, 128, AccessLocalWrite|AccessRemoteWrite)
	if c.local != mr || c.remote != mr {
		t.Fatalf("cache holds %p, %p; want %p", c.local, c.remote, mr)
	}
	same("cached", 1, mr.LKey, mr.Addr, 4096, AccessRemoteRead)
	same("other PD", 2, mr.LKey, mr.Addr, 8, AccessRemoteRead)
	same("out of range", 1, mr.LKey, mr.Addr+4090, 8, AccessRemoteRead)
	same("before the MR", 1, mr.LKey, mr.Addr-1, 8, AccessRemoteRead)
	same("wrong variant", 1, mr.LKey^1, mr.Addr, 8, AccessRemoteRead)
	same("access not granted", 1, other.LKey, other.Addr, 8, AccessRemoteWrite)
	same("another MR", 1, other.LKey, other.Addr, 8, AccessRemoteRead)
	same("back", 1, mr.LKey, mr.Addr, 8, AccessRemoteRead)
	if err := tb.Invalidate(1, mr.RKey); err != nil {
		t.Fatal(err)
	}
	same("remote access invalidated", 1, mr.LKey, mr.Addr, 8, AccessRemoteRead)
	tb.Deregister(mr)
	same("deregistered", 1, mr.LKey, mr.Addr, 8, AccessRemoteRead)
	mr2 := tb.Register(1, buf, all)
	same("registered again", 1, mr2.LKey, mr2.Addr, 8, AccessRemoteRead)

	// Windows are never cached: a bind changes what their keys reach.
	for _, typ := range []uint8{1, 2} {
		mw := tb.AllocMW(1, typ)
		if mw.mw != typ || !mw.IsWindow() {
			t.Fatalf("AllocMW(%d) made a window of type %d", typ, mw.mw)
		}
		bind := func(i int, length uint64) uint32 {
			t.Helper()
			key := tb.CurrentRKey(mw)
			if typ == 2 {
				key = key&^0xFF | uint32(i)
			}
			b := Bind{MW: mw, RKey: key, MR: mr2, Addr: mr2.Addr + 256, Length: length, Access: AccessRemoteRead}
			if err := tb.BindMW(1, 7, &b); err != nil {
				t.Fatalf("type %d bind %d: %v", typ, i, err)
			}
			return tb.CurrentRKey(mw)
		}
		check := func(step string, key uint32) {
			t.Helper()
			same(fmt.Sprintf("type %d window, %s", typ, step), 1, key, mr2.Addr+256, 8, AccessRemoteRead)
			if c.remote == mw || c.local == mw {
				t.Fatalf("type %d window cached", typ)
			}
		}
		k1 := bind(1, 1024)
		check("bound", k1)
		if typ == 1 {
			bind(2, 0)
		} else if err := tb.Invalidate(1, k1); err != nil {
			t.Fatal(err)
		}
		check("unbound", k1)
		k3 := bind(3, 512)
		check("bound again", k3)
		check("bound again, old key", k1)
	}
}
