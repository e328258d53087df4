package wire

import "testing"

func TestPSNArithmetic(t *testing.T) {
	for _, c := range []struct {
		p    PSN
		n    int
		want PSN
	}{
		{0, 1, 1},
		{0xFFFFFF, 1, 0},
		{0xFFFFFE, 3, 1},
		{0, -1, 0xFFFFFF},
		{5, -10, 0xFFFFFB},
		{0x123456, 1 << 24, 0x123456},
		{0x7FFFFF, 1, 0x800000},
	} {
		if got := c.p.Add(c.n); got != c.want {
			t.Errorf("%#x.Add(%d) = %#x, want %#x", c.p, c.n, got, c.want)
		}
	}
	if PSN(0xFFFFFF).Next() != 0 || PSN(41).Next() != 42 {
		t.Error("Next")
	}
	for _, c := range []struct {
		a, b PSN
		diff int
	}{
		{0, 0, 0},
		{1, 0, 1},
		{0, 1, -1},
		{0, 0xFFFFFF, 1}, // wrap: 0 comes right after 0xFFFFFF
		{0xFFFFFF, 0, -1},
		{2, 0xFFFFFE, 4},
		{0xFFFFFE, 2, -4},
		{0x7FFFFF, 0, 0x7FFFFF}, // the largest distance that still orders correctly
		{0, 0x7FFFFF, -0x7FFFFF},
		{0x800000, 0, -0x800000}, // exactly 2^23 apart: ambiguous, taken as "before"
		{0x542962, 0x542961, 1},
		{0x000002, 0xFFFFF0, 0x12},
	} {
		if got := c.a.Diff(c.b); got != c.diff {
			t.Errorf("%#x.Diff(%#x) = %d, want %d", c.a, c.b, got, c.diff)
		}
		cmp := c.a.Cmp(c.b)
		if (cmp > 0) != (c.diff > 0) || (cmp < 0) != (c.diff < 0) || (cmp == 0) != (c.diff == 0) {
			t.Errorf("%#x.Cmp(%#x) = %d, diff %d", c.a, c.b, cmp, c.diff)
		}
		if c.a.After(c.b) != (c.diff > 0) || c.a.Before(c.b) != (c.diff < 0) {
			t.Errorf("%#x Before/After %#x", c.a, c.b)
		}
		if c.diff != -0x800000 && c.b.Add(c.diff) != c.a {
			t.Errorf("%#x.Add(%d) != %#x", c.b, c.diff, c.a)
		}
	}
}
