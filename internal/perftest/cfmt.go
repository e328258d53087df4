package perftest

import (
	"math"
	"strconv"
	"strings"
)

// CHexAlt formats v as C's printf("%#0<width>x") does: zero-padded to width
// characters including the "0x" prefix, which C omits for zero (so
// CHexAlt(0, 4) is "0000", CHexAlt(0x11, 6) is "0x0011" and
// CHexAlt(0xa77e2, 6) is "0xa77e2").
func CHexAlt(v uint64, width int) string {
	digits := strconv.FormatUint(v, 16)
	if v == 0 {
		return pad0(digits, width)
	}
	return "0x" + pad0(digits, width-2)
}

func pad0(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return strings.Repeat("0", width-len(s)) + s
}

// CFloat formats v as C's printf("%<-><width>.<prec>f") does, including
// glibc's spelling of the non-finite values ("inf", "-inf", "nan", "-nan").
func CFloat(v float64, width, prec int, left bool) string {
	var s string
	switch {
	case math.IsInf(v, 1):
		s = "inf"
	case math.IsInf(v, -1):
		s = "-inf"
	case math.IsNaN(v):
		s = "nan"
		if math.Signbit(v) {
			s = "-nan"
		}
	default:
		s = strconv.FormatFloat(v, 'f', prec, 64)
	}
	return padStr(s, width, left)
}

// CG formats v as C's printf("%g") does.
func CG(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "nan"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func padStr(s string, width int, left bool) string {
	if len(s) >= width {
		return s
	}
	if left {
		return s + strings.Repeat(" ", width-len(s))
	}
	return strings.Repeat(" ", width-len(s)) + s
}

// CUint formats v as C's printf("%-<width>lu") (left) or "%<width>lu".
func CUint(v uint64, width int, left bool) string {
	return padStr(strconv.FormatUint(v, 10), width, left)
}
