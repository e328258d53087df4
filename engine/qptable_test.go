package engine

import "testing"

func TestQPTable(t *testing.T) {
	var tab qpTable
	a, b := new(QP), new(QP)
	for _, n := range []uint32{0, 1, 0xFFF, 0x1000, 0xFFFFFF} {
		if got := tab.get(n); got != nil {
			t.Fatalf("empty table: get(%#x) = %p", n, got)
		}
	}
	tab.set(0x1000, nil) // removing from a page never made makes none
	if tab.dir[1].Load() != nil {
		t.Fatal("set(nil) made a page")
	}
	tab.set(0xFFF, a)
	tab.set(0x1000, b)
	tab.set(0xFFFFFF, a)
	for _, c := range []struct {
		n    uint32
		want *QP
	}{{0xFFF, a}, {0x1000, b}, {0xFFFFFF, a}, {0xFFE, nil}, {0x1001, nil}, {0xFFFFFE, nil}, {0x7FF000, nil}} {
		if got := tab.get(c.n); got != c.want {
			t.Errorf("get(%#x) = %p, want %p", c.n, got, c.want)
		}
	}
	// Numbers above 24 bits never reach past the directory.
	if got := tab.get(0xFF000FFF); got != a {
		t.Errorf("get(0xFF000FFF) = %p, want the QP of 0xFFF", got)
	}
	tab.set(0x1000, nil)
	if got := tab.get(0x1000); got != nil {
		t.Errorf("after removal get(0x1000) = %p", got)
	}
	if got := tab.get(0xFFF); got != a {
		t.Errorf("removal of 0x1000 touched 0xFFF: %p", got)
	}
}
