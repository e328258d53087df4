package perftest

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// The key record example of the spec (tools.md §6.3).
var specDest = Dest{LID: 0, OutReads: 1, QPN: 0x11, PSN: 0x3c1f2a, RKey: 0x1a2b, VAddr: 0x7f3a5c010000,
	GID: verbs.GID{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 1}, GIDIndex: 1}

func TestKeyRecordGolden(t *testing.T) {
	const want = "0000:0001:000011:3c1f2a:00001a2b:00007f3a5c010000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:00:02:01:00000000:\x00"
	got := specDest.Marshal()
	if len(got) != KeyLenGID || string(got) != want {
		t.Fatalf("record\n got %q (%d bytes)\nwant %q", got, len(got), want)
	}
	d, err := ParseDest(got, 1)
	if err != nil || d != specDest {
		t.Fatalf("parse: %+v, %v", d, err)
	}
	// Upper-case hex and a trailing garbage after the NUL parse too.
	up := []byte(strings.ToUpper(want))
	d, err = ParseDest(up, 1)
	if err != nil || d != specDest {
		t.Fatalf("upper-case parse: %+v, %v", d, err)
	}
}

func TestKeyRecordNoGID(t *testing.T) {
	d := specDest
	d.GIDIndex, d.GID = -1, verbs.GID{}
	const want = "0000:0001:000011:3c1f2a:00001a2b:00007f3a5c010000:00000000\x00"
	got := d.Marshal()
	if len(got) != KeyLen || string(got) != want {
		t.Fatalf("record %q (%d bytes)", got, len(got))
	}
	back, err := ParseDest(got, -1)
	if err != nil || back != d {
		t.Fatalf("parse: %+v, %v", back, err)
	}
}

func TestKeyRecordMalformed(t *testing.T) {
	good := specDest.Marshal()
	cases := map[string][]byte{
		"short":       good[:100],
		"long":        append(append([]byte{}, good...), 0),
		"empty":       make([]byte, KeyLenGID),
		"non-hex":     bytes.Replace(good, []byte("3c1f2a"), []byte("3c1z2a"), 1),
		"missing":     append(bytes.Replace(good, []byte(":00000000:"), []byte(":"), 1), make([]byte, 9)...),
		"wide GID":    bytes.Replace(good, []byte(":c0:00:"), []byte(":c00:0:"), 1),
		"text":        append([]byte("GET / HTTP/1.1\r\n"), make([]byte, KeyLenGID-16)...),
		"59 for 108":  append((&Dest{GIDIndex: -1}).Marshal(), make([]byte, KeyLenGID-KeyLen)...),
		"colons only": append(bytes.Repeat([]byte(":"), KeyLenGID-1), 0),
	}
	for name, b := range cases {
		if _, err := ParseDest(b, 1); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: err = %v, want ErrBadRecord", name, err)
		}
	}
}

func TestPrologueMessages(t *testing.T) {
	if got := VersionMsg("6.06"); string(got) != "6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("version %q", got)
	}
	if v, f := ParseVersion([]byte("6.29\x00garbage\x00\x00\x00\x00")); v != "6.29" || f != 6.29 {
		t.Fatalf("parse version %q %v", v, f)
	}
	if _, f := ParseVersion(make([]byte, 16)); f != 0 {
		t.Fatalf("empty version %v", f)
	}
	if got := Int32Msg(4096); !bytes.Equal(got, []byte{0, 0, 0x10, 0}) {
		t.Fatalf("cycle buffer % x", got)
	}
	if got := MTUMsg(verbs.MTU1024, 2); string(got) != "3\x00" {
		t.Fatalf("mtu %q", got)
	}
	if got := ParseMTUMsg([]byte("5\x00")); got != 5 {
		t.Fatalf("mtu parse %d", got)
	}
	for s, want := range map[string]float64{"6.06": 6.06, " 5.7x": 5.7, "abc": 0, "": 0, "1e2": 100, "-3.5": -3.5} {
		if got := Atof(s); got != want {
			t.Errorf("Atof(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestReportFieldsGolden(t *testing.T) {
	r := BWReport{Size: 65536, Iters: 5000, BWPeak: 1.5, BWAvg: -2, MsgRate: 0.25}
	f := r.ReportFields()
	want := [5][8]byte{
		{0, 0, 0, 0, 0, 1, 0, 0},
		{0, 0, 0, 0, 0, 0, 0x13, 0x88},
		{0x3f, 0xf8, 0, 0, 0, 0, 0, 0},
		{0xc0, 0, 0, 0, 0, 0, 0, 0},
		{0x3f, 0xd0, 0, 0, 0, 0, 0, 0},
	}
	if f != want {
		t.Fatalf("fields % x", f)
	}
	if back := ParseReportFields(f); back != r {
		t.Fatalf("round trip %+v", back)
	}
}

func TestCHexAlt(t *testing.T) {
	cases := []struct {
		v     uint64
		width int
		want  string
	}{
		{0, 4, "0000"}, {0, 6, "000000"}, {0x11, 6, "0x0011"}, {0xa77e2, 6, "0xa77e2"}, {0x3c1f2a, 6, "0x3c1f2a"},
		{0x80, 4, "0x80"}, {0x5, 4, "0x05"}, {0x1a2b, 8, "0x001a2b"}, {0x7f3a5c010000, 16, "0x007f3a5c010000"},
		{0x123456789abcdef0, 16, "0x123456789abcdef0"},
	}
	for _, c := range cases {
		if got := CHexAlt(c.v, c.width); got != c.want {
			t.Errorf("%%#0%dx of %#x = %q, want %q", c.width, c.v, got, c.want)
		}
	}
}

func TestCFloat(t *testing.T) {
	cases := []struct {
		v    float64
		want string
	}{
		{1187.34, "1187.34"}, {9.13, "9.13   "}, {0, "0.00   "}, {math.Inf(1), "inf    "},
		{math.NaN(), "nan    "}, {math.Copysign(math.NaN(), -1), "-nan   "}, {12345678.9, "12345678.90"},
	}
	for _, c := range cases {
		if got := CFloat(c.v, 7, 2, true); got != c.want {
			t.Errorf("%%-7.2f of %v = %q, want %q", c.v, got, c.want)
		}
	}
	if got := CG(1234567); got != "1.23457e+06" {
		t.Errorf("%%g = %q", got)
	}
	if got := CG(9.13); got != "9.13" {
		t.Errorf("%%g = %q", got)
	}
}

// pipePeer runs fn as the peer end of a side channel.
func pipePeer(t *testing.T, client bool, fn func(peer net.Conn)) *Comm {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() { defer close(done); defer b.Close(); fn(b) }()
	c := NewComm(context.Background(), a, client)
	c.Timeout = 500 * time.Millisecond
	t.Cleanup(func() {
		c.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("peer goroutine did not finish")
		}
	})
	return c
}

func TestCommMalformedRecord(t *testing.T) {
	c := pipePeer(t, true, func(p net.Conn) {
		buf := make([]byte, KeyLenGID)
		p.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := p.Read(buf); err != nil {
			return
		}
		junk := bytes.Repeat([]byte("x"), KeyLenGID)
		p.Write(junk)
	})
	_, err := c.HandShake(&specDest, 0)
	if !errors.Is(err, ErrBadRecord) {
		t.Fatalf("err = %v, want ErrBadRecord", err)
	}
}

func TestCommSilentPeerTimesOut(t *testing.T) {
	c := pipePeer(t, false, func(p net.Conn) {
		// Read nothing, say nothing: the server side must give up.
		time.Sleep(100 * time.Millisecond)
	})
	start := time.Now()
	_, err := c.HandShake(&specDest, 300*time.Millisecond)
	if err == nil {
		t.Fatal("no error from a silent peer")
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

func TestCommTruncatedRecord(t *testing.T) {
	c := pipePeer(t, true, func(p net.Conn) {
		buf := make([]byte, KeyLenGID)
		p.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := p.Read(buf); err != nil {
			return
		}
		p.Write(specDest.Marshal()[:50])
	})
	if _, err := c.HandShake(&specDest, 0); err == nil {
		t.Fatal("no error for a truncated record")
	}
}

func TestCommExchangeOrder(t *testing.T) {
	// The client writes first; the server reads first.
	c := pipePeer(t, false, func(p net.Conn) {
		p.SetDeadline(time.Now().Add(2 * time.Second))
		p.Write([]byte("6.29\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
		buf := make([]byte, 16)
		p.Read(buf)
	})
	got, err := c.Exchange(VersionMsg(Version), 0)
	if err != nil || string(got[:4]) != "6.29" {
		t.Fatalf("exchange %q %v", got, err)
	}
}
