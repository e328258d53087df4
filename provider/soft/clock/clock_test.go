package clock

import (
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	c := NewFake(time.Unix(100, 0))
	var got []int
	c.AfterFunc(3*time.Second, func() { got = append(got, 3) })
	stop := c.AfterFunc(2*time.Second, func() { got = append(got, 2) })
	c.AfterFunc(time.Second, func() {
		got = append(got, 1)
		c.AfterFunc(time.Second, func() { got = append(got, 12) }) // due at 2 s, after the first 2 s timer
	})
	c.AfterFunc(time.Second, func() { got = append(got, 11) })
	if n, ok := c.Next(); !ok || !n.Equal(time.Unix(101, 0)) {
		t.Fatalf("Next = %v %v", n, ok)
	}
	c.Advance(1500 * time.Millisecond)
	if len(got) != 2 || got[0] != 1 || got[1] != 11 || !c.Now().Equal(time.Unix(101, 5e8)) {
		t.Fatalf("after 1.5 s: %v at %v", got, c.Now())
	}
	if !stop() || stop() {
		t.Fatal("stop should succeed once")
	}
	c.Advance(10 * time.Second)
	if len(got) != 4 || got[2] != 12 || got[3] != 3 || c.Pending() != 0 {
		t.Fatalf("fired %v", got)
	}
}
