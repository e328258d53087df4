package getopt

import "math"

// Strtol converts s like C's strtol(s, &end, base) with a 64-bit long
// (glibc, LP64): leading white space, an optional sign, then with base 0 a
// "0x"/"0X" prefix for hex, a leading 0 for octal, else decimal (base 16
// also accepts the "0x" prefix); the longest valid prefix of digits is used.
//
// rest is what C leaves at *end: the unparsed tail, or all of s when there
// are no digits (so garbage yields 0 and rest == s; "0x" followed by no hex
// digit yields 0 with rest starting at the 'x'). ok is false where C sets
// errno: on overflow, n saturates at math.MaxInt64 or math.MinInt64 (ERANGE);
// for a base other than 0 or 2…36, n is 0 and rest is s (EINVAL).
func Strtol(s string, base int) (n int64, rest string, ok bool) {
	neg, mag, over, end, ok := strto(s, base)
	if !ok {
		return 0, s, false
	}
	switch {
	case neg && (over || mag > 1<<63):
		return math.MinInt64, s[end:], false
	case !neg && (over || mag > math.MaxInt64):
		return math.MaxInt64, s[end:], false
	case neg:
		return -int64(mag), s[end:], true
	}
	return int64(mag), s[end:], true
}

// Strtoul converts s like C's strtoul(s, &end, base) with a 64-bit unsigned
// long; the syntax, rest and ok are as for [Strtol]. As in C a minus sign
// negates the value modulo 2^64 ("-1" gives math.MaxUint64 with ok true),
// and overflow gives math.MaxUint64 with ok false (ERANGE).
func Strtoul(s string, base int) (n uint64, rest string, ok bool) {
	neg, mag, over, end, ok := strto(s, base)
	switch {
	case !ok:
		return 0, s, false
	case over:
		return math.MaxUint64, s[end:], false
	case neg:
		return -mag, s[end:], true
	}
	return mag, s[end:], true
}

// Atoi converts s like C's atoi, which glibc defines as
// (int)strtol(s, NULL, 10): a decimal prefix after white space and a sign,
// 0 for garbage, and out-of-range values truncated to 32 bits the way C
// converts the saturated long to int (so "99999999999" gives 1215752191).
func Atoi(s string) int {
	n, _, _ := Strtol(s, 10)
	return int(int32(n))
}

// strto is the common part of Strtol and Strtoul: the sign, the magnitude
// (valid unless over), the end of the parsed text in s, and ok = false for
// an invalid base.
func strto(s string, base int) (neg bool, mag uint64, over bool, end int, ok bool) {
	if base < 0 || base == 1 || base > 36 {
		return false, 0, false, 0, false
	}
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i < len(s) && s[i] == '0' {
		if (base == 0 || base == 16) && i+1 < len(s) && (s[i+1] == 'x' || s[i+1] == 'X') {
			i += 2
			base = 16
		} else if base == 0 {
			base = 8
		}
	} else if base == 0 {
		base = 10
	}
	start := i
	b := uint64(base)
	for ; i < len(s); i++ {
		d := digitValue(s[i])
		if d >= b {
			break
		}
		if over || mag > (math.MaxUint64-d)/b {
			over = true
			continue
		}
		mag = mag*b + d
	}
	if i == start {
		// No digits: C points end at the start of s, except after a
		// "0x" prefix, where the "0" counts and end points at the 'x'.
		if start >= 2 && (s[start-1] == 'x' || s[start-1] == 'X') && s[start-2] == '0' {
			return neg, 0, false, start - 1, true
		}
		return false, 0, false, 0, true
	}
	return neg, mag, over, i, true
}

// isSpace is C's isspace in the "C" locale.
func isSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// digitValue is the value of c as a digit in bases up to 36, or 36 and more
// when c is not a digit.
func digitValue(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'z':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return uint64(c-'A') + 10
	}
	return 36
}
