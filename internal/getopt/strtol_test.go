package getopt

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The expected values were produced by glibc 2.36 on x86_64 (LP64):
// strtol(s, &end, base), strtoul(s, &end, base) with errno, and atoi(s).
var strtolCases = []struct {
	s    string
	base int
	l    int64 // strtol
	lEnd int   // end - s
	lOK  bool  // errno == 0
	u    uint64
	uEnd int
	uOK  bool
	atoi int // atoi(s) (base ignored)
}{
	{"0x10", 0, 16, 4, true, 16, 4, true, 0},
	{"010", 0, 8, 3, true, 8, 3, true, 10},
	{"10", 0, 10, 2, true, 10, 2, true, 10},
	{"  42", 0, 42, 4, true, 42, 4, true, 42},
	{"\t-17", 0, -17, 4, true, 18446744073709551599, 4, true, -17},
	{"+5", 0, 5, 2, true, 5, 2, true, 5},
	{"-0x1f", 0, -31, 5, true, 18446744073709551585, 5, true, 0},
	{"0X1F", 0, 31, 4, true, 31, 4, true, 0},
	{"0x", 0, 0, 1, true, 0, 1, true, 0},
	{"0xg", 0, 0, 1, true, 0, 1, true, 0},
	{"-0x", 0, 0, 2, true, 0, 2, true, 0},
	{"08", 0, 0, 1, true, 0, 1, true, 8},
	{"09", 0, 0, 1, true, 0, 1, true, 9},
	{"0", 0, 0, 1, true, 0, 1, true, 0},
	{"-", 0, 0, 0, true, 0, 0, true, 0},
	{"+", 0, 0, 0, true, 0, 0, true, 0},
	{"", 0, 0, 0, true, 0, 0, true, 0},
	{"abc", 0, 0, 0, true, 0, 0, true, 0},
	{"  abc", 0, 0, 0, true, 0, 0, true, 0},
	{"12abc", 0, 12, 2, true, 12, 2, true, 12},
	{"4096k", 0, 4096, 4, true, 4096, 4, true, 4096},
	{"1e3", 0, 1, 1, true, 1, 1, true, 1},
	{"9223372036854775807", 0, 9223372036854775807, 19, true, 9223372036854775807, 19, true, -1},
	{"9223372036854775808", 0, 9223372036854775807, 19, false, 9223372036854775808, 19, true, -1},
	{"-9223372036854775808", 0, -9223372036854775808, 20, true, 9223372036854775808, 20, true, 0},
	{"-9223372036854775809", 0, -9223372036854775808, 20, false, 9223372036854775807, 20, true, 0},
	{"18446744073709551615", 0, 9223372036854775807, 20, false, 18446744073709551615, 20, true, -1},
	{"18446744073709551616", 0, 9223372036854775807, 20, false, 18446744073709551615, 20, false, -1},
	{"-1", 0, -1, 2, true, 18446744073709551615, 2, true, -1},
	{"0x8000000000000000", 0, 9223372036854775807, 18, false, 9223372036854775808, 18, true, 0},
	{"0xffffffffffffffffff", 0, 9223372036854775807, 20, false, 18446744073709551615, 20, false, 0},
	{"99999999999", 0, 99999999999, 11, true, 99999999999, 11, true, 1215752191},
	{"2147483648", 0, 2147483648, 10, true, 2147483648, 10, true, -2147483648},
	{"-2147483649", 0, -2147483649, 11, true, 18446744071562067967, 11, true, 2147483647},
	{"4294967296", 0, 4294967296, 10, true, 4294967296, 10, true, 0},
	{"3000000000", 0, 3000000000, 10, true, 3000000000, 10, true, -1294967296},
	{"0x10", 10, 0, 1, true, 0, 1, true, 0},
	{"010", 10, 10, 3, true, 10, 3, true, 10},
	{"0x10", 16, 16, 4, true, 16, 4, true, 0},
	{"ff", 16, 255, 2, true, 255, 2, true, 0},
	{"0xz", 16, 0, 1, true, 0, 1, true, 0},
	{"0777", 8, 511, 4, true, 511, 4, true, 777},
	{"8", 8, 0, 0, true, 0, 0, true, 8},
	{"1012", 2, 5, 3, true, 5, 3, true, 1012},
	{"zZ", 36, 1295, 2, true, 1295, 2, true, 0},
	{"0x", 36, 33, 2, true, 33, 2, true, 0},
	{"- 1", 0, 0, 0, true, 0, 0, true, 0},
	{" +0x1A", 0, 26, 6, true, 26, 6, true, 0},
}

func TestStrtol(t *testing.T) {
	for _, tc := range strtolCases {
		l, rest, ok := Strtol(tc.s, tc.base)
		if l != tc.l || len(tc.s)-len(rest) != tc.lEnd || rest != tc.s[tc.lEnd:] || ok != tc.lOK {
			t.Errorf("Strtol(%q, %d) = %d, %q, %v; want %d, %q, %v", tc.s, tc.base, l, rest, ok, tc.l, tc.s[tc.lEnd:], tc.lOK)
		}
		u, rest, ok := Strtoul(tc.s, tc.base)
		if u != tc.u || rest != tc.s[tc.uEnd:] || ok != tc.uOK {
			t.Errorf("Strtoul(%q, %d) = %d, %q, %v; want %d, %q, %v", tc.s, tc.base, u, rest, ok, tc.u, tc.s[tc.uEnd:], tc.uOK)
		}
		if got := Atoi(tc.s); got != tc.atoi {
			t.Errorf("Atoi(%q) = %d, want %d", tc.s, got, tc.atoi)
		}
	}
}

// A base other than 0 or 2…36 is EINVAL: 0, nothing consumed.
func TestStrtolInvalidBase(t *testing.T) {
	for _, base := range []int{-1, 1, 37, 100} {
		if n, rest, ok := Strtol("12", base); n != 0 || rest != "12" || ok {
			t.Errorf("Strtol base %d = %d, %q, %v", base, n, rest, ok)
		}
		if n, rest, ok := Strtoul("12", base); n != 0 || rest != "12" || ok {
			t.Errorf("Strtoul base %d = %d, %q, %v", base, n, rest, ok)
		}
	}
}

// Every value formatted by strconv reads back, in every base, with the
// base-0 prefixes, after white space, followed by garbage.
func TestStrtolRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32}
	for range 2000 {
		vals = append(vals, int64(r.Uint64())>>r.IntN(64))
	}
	for _, v := range vals {
		for base := 2; base <= 36; base++ {
			s := strconv.FormatInt(v, base)
			if n, rest, ok := Strtol(" \t"+s+"!", base); n != v || rest != "!" || !ok {
				t.Fatalf("Strtol(%q, %d) = %d, %q, %v", s, base, n, rest, ok)
			}
			if v >= 0 {
				if n, rest, ok := Strtoul(s, base); n != uint64(v) || rest != "" || !ok {
					t.Fatalf("Strtoul(%q, %d) = %d, %q, %v", s, base, n, rest, ok)
				}
			}
		}
		sign, mag := "", uint64(v)
		if v < 0 {
			sign, mag = "-", -uint64(v)
		}
		for _, s := range []string{
			sign + strconv.FormatUint(mag, 10),
			sign + "0x" + strconv.FormatUint(mag, 16),
			sign + "0" + strconv.FormatUint(mag, 8),
		} {
			if n, rest, ok := Strtol(s, 0); n != v || rest != "" || !ok {
				t.Fatalf("Strtol(%q, 0) = %d, %q, %v", s, n, rest, ok)
			}
		}
		if got := Atoi(strconv.FormatInt(v, 10)); got != int(int32(v)) {
			t.Fatalf("Atoi(%d) = %d", v, got)
		}
	}
}
