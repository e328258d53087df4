package service

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
)

func TestSlotTable(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	q := time.Minute
	tb := newSlotTable(q)
	if s := tb.take(t0, 100, 0); s != 1 {
		t.Fatalf("first slot = %d, want 1", s)
	}
	if s := tb.take(t0, 101, 1); s != 2 {
		t.Fatalf("asking for a taken slot gave %d, want the next free, 2", s)
	}
	tb.give(t0, 1)
	// Slot 1 is quarantined: a new process gets a never-used slot, even
	// when it asks for slot 1.
	if s := tb.take(t0.Add(q-time.Second), 102, 1); s != 3 {
		t.Fatalf("during quarantine: slot %d, want 3", s)
	}
	// After the quarantine, the slot given back longest ago comes first
	// only among used ones; never-used slots (zero time) come before.
	if s := tb.take(t0.Add(q), 103, 1); s != 1 {
		t.Fatalf("asking for slot 1 after its quarantine gave %d", s)
	}
	// Fill every slot: the next take fails.
	for i := 0; i < MaxSlot; i++ {
		tb.take(t0.Add(q), 200+i, 0)
	}
	if s := tb.take(t0.Add(q), 999, 0); s != 0 {
		t.Fatalf("a full table gave slot %d", s)
	}
	// Least recently given back first.
	tb.give(t0.Add(2*q), 10)
	tb.give(t0.Add(3*q), 5)
	if s := tb.take(t0.Add(5*q), 1000, 0); s != 10 {
		t.Fatalf("LRU gave slot %d, want 10 (given back first)", s)
	}
	if s := tb.take(t0.Add(5*q), 1001, 0); s != 5 {
		t.Fatalf("LRU gave slot %d, want 5", s)
	}
}

func TestSlotStateAcrossRestart(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	q := time.Minute
	ap := netip.MustParseAddrPort("127.0.0.1:4791")
	tb := newSlotTable(q)
	tb.take(t0, 100, 0) // slot 1, attached when the service dies
	tb.take(t0, 101, 0) // slot 2, freed just before
	tb.give(t0, 2)
	var b bytes.Buffer
	tb.save(&b, ap)

	restart := t0.Add(10 * time.Second)
	tables := loadState(bytes.NewReader(b.Bytes()), restart, q)
	nt := tables[ap]
	if nt == nil {
		t.Fatalf("no table for %s in %q", ap, b.String())
	}
	// A new process gets neither slot 1 (reserved for pid 100) nor slot 2
	// (quarantined since t0).
	if s := nt.take(restart, 300, 0); s != 3 {
		t.Fatalf("new process after restart got slot %d, want 3", s)
	}
	if s := nt.take(restart, 301, 2); s == 2 {
		t.Fatal("slot 2 given out during the quarantine it had before the restart")
	}
	// Pid 100 gets its slot back; another pid asking for it does not.
	if s := nt.take(restart, 555, 1); s == 1 {
		t.Fatal("slot 1 given to another process while reserved")
	}
	if s := nt.take(restart, 100, 1); s != 1 {
		t.Fatalf("the reattaching process got slot %d, want its slot 1", s)
	}
	// Slot 2 is free again once the quarantine ends (t0 + q).
	if s := nt.take(t0.Add(q), 302, 2); s != 2 {
		t.Fatalf("slot 2 after its quarantine: got %d", s)
	}
	// Garbage lines are skipped.
	if got := loadState(bytes.NewReader([]byte("x\n1.2.3.4:1 999 freed 1\nbad 1 freed 1\n")), restart, q); len(got) != 0 {
		t.Fatalf("garbage loaded: %v", got)
	}
}
