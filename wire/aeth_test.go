package wire

import (
	"testing"
	"time"
)

func TestCreditTable(t *testing.T) {
	// docs/spec/roce-wire.md §6.5, from rdmavt/rc.c.
	want := [32]int{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
		256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, -1}
	for code, w := range want {
		if got := Credits(uint8(code)); got != w {
			t.Errorf("Credits(%d) = %d, want %d", code, got, w)
		}
	}
	if Credits(0x20|5) != 6 {
		t.Error("Credits must use only bits 4-0")
	}
}

func TestRNRTable(t *testing.T) {
	us := [32]int64{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
		2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520}
	for code, w := range us {
		if got := RNRDelay(uint8(code)); got != time.Duration(w)*time.Microsecond {
			t.Errorf("RNRDelay(%d) = %v, want %dµs", code, got, w)
		}
	}
	for _, c := range []struct {
		code uint8
		want time.Duration
	}{
		{0, 655360 * time.Microsecond}, // 655.36 ms
		{12, 640 * time.Microsecond},   // 0.64 ms, rc_pingpong's min_rnr_timer
		{25, 61440 * time.Microsecond}, // 61.44 ms (IBTA; rxe's table says 61.41)
		{31, 491520 * time.Microsecond},
	} {
		if got := RNRDelay(c.code); got != c.want {
			t.Errorf("RNRDelay(%d) = %v, want %v", c.code, got, c.want)
		}
	}
}

func TestAckTimeout(t *testing.T) {
	if AckTimeout(0) != 0 {
		t.Error("timeout 0 must disable the timer")
	}
	if got := AckTimeout(14); got != 67108864*time.Nanosecond { // 4.096 µs × 2^14 ≈ 67.1 ms
		t.Errorf("AckTimeout(14) = %v", got)
	}
	if got := AckTimeout(1); got != 8192*time.Nanosecond {
		t.Errorf("AckTimeout(1) = %v", got)
	}
	if got := AckTimeout(31); got != time.Duration(4096)<<31 {
		t.Errorf("AckTimeout(31) = %v", got)
	}
	for _, v := range []uint8{32, 255} {
		if AckTimeout(v) != 0 {
			t.Errorf("AckTimeout(%d) = %v", v, AckTimeout(v))
		}
	}
	for v := uint8(1); v < 31; v++ {
		if AckTimeout(v+1) != 2*AckTimeout(v) {
			t.Errorf("AckTimeout(%d) is not twice AckTimeout(%d)", v+1, v)
		}
	}
}

func TestSyndrome(t *testing.T) {
	for _, c := range []struct {
		s     Syndrome
		kind  SyndromeKind
		value uint8
	}{
		{SyndromeACK, KindACK, 31},
		{0x00, KindACK, 0},
		{RNRSyndrome(12), KindRNR, 12},
		{SyndromePSNSeqErr, KindNAK, NAKPSNSequence},
		{SyndromeInvalidReq, KindNAK, NAKInvalidRequest},
		{SyndromeRemoteAccess, KindNAK, NAKRemoteAccess},
		{SyndromeRemoteOp, KindNAK, NAKRemoteOperation},
		{NAKSyndrome(NAKInvalidRDReq), KindNAK, NAKInvalidRDReq},
		{0x45, KindRsv, 5},
		{0xE1, KindNAK, 1}, // bit 7 is reserved and ignored
	} {
		if c.s.Kind() != c.kind || c.s.Value() != c.value {
			t.Errorf("%#02x: kind %d value %d, want %d %d", uint8(c.s), c.s.Kind(), c.s.Value(), c.kind, c.value)
		}
	}
	if RNRSyndrome(12) != 0x2C || RNRSyndrome(0xFF) != 0x3F {
		t.Errorf("RNRSyndrome")
	}
	for code := uint8(0); code < 5; code++ {
		if NAKSyndrome(code) != Syndrome(0x60+code) {
			t.Errorf("NAKSyndrome(%d) = %#02x", code, uint8(NAKSyndrome(code)))
		}
	}
}
