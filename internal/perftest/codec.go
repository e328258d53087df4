package perftest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/rdma-go/rdma-go/verbs"
)

// Sizes of the fixed messages of perftest's TCP exchange.
const (
	// KeyLen is a key record without a GID (KEY_MSG_SIZE): 58 characters
	// and a NUL.
	KeyLen = 59
	// KeyLenGID is a key record with a GID (KEY_MSG_SIZE_GID): 107
	// characters and a NUL.
	KeyLenGID = 108
	// VersionLen is the version message (MAX_VERSION).
	VersionLen = 16
)

// Version is the perftest version rdma-go advertises: in [5.70, 6.28), so
// that no peer expects the binary parameter negotiation of 6.28 and later.
const Version = "6.06"

// Dest is one QP's key record (struct pingpong_dest as the TCP exchange
// carries it).
type Dest struct {
	LID      uint16
	OutReads uint32 // reads/atomics this side accepts as responder
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64
	GID      verbs.GID
	SRQN     uint32
	// GIDIndex is the local GID index, -1 for none; it decides the record
	// format (59 bytes without a GID, 108 with) and is not sent.
	GIDIndex int
}

// RecordLen returns the size of the record format gidIndex selects.
func RecordLen(gidIndex int) int {
	if gidIndex < 0 {
		return KeyLen
	}
	return KeyLenGID
}

// Marshal returns the record as perftest's KEY_PRINT_FMT or
// KEY_PRINT_FMT_GID writes it, NUL included.
func (d *Dest) Marshal() []byte {
	var s string
	if d.GIDIndex < 0 {
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%08x", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr, d.SRQN)
	} else {
		g := d.GID
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:"+
			"%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%08x:",
			d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr,
			g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15],
			d.SRQN)
	}
	n := RecordLen(d.GIDIndex)
	b := make([]byte, n)
	copy(b, s) // a field wider than its format (never for valid values) is cut, as snprintf would not, but the record keeps its size
	b[n-1] = 0
	return b
}

// ErrBadRecord wraps every key record that does not parse.
var ErrBadRecord = errors.New("perftest: malformed key record")

// ParseDest parses a key record of the format gidIndex selects. It accepts
// what perftest's reader accepts (hex fields of any case and width) but,
// unlike it, rejects missing fields and non-hex text instead of reading
// garbage.
func ParseDest(b []byte, gidIndex int) (Dest, error) {
	want := RecordLen(gidIndex)
	if len(b) != want {
		return Dest{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadRecord, len(b), want)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	fields := bytes.Split(b, []byte(":"))
	nf := 7
	if gidIndex >= 0 {
		nf = 6 + 16 + 1
		// The GID format ends in ':', which leaves an empty last field.
		if len(fields) == nf+1 && len(fields[nf]) == 0 {
			fields = fields[:nf]
		}
	}
	if len(fields) != nf {
		return Dest{}, fmt.Errorf("%w: <%s>: %d fields, want %d", ErrBadRecord, b, len(fields), nf)
	}
	v := make([]uint64, nf)
	for i, f := range fields {
		bits := 32
		switch {
		case i == 5:
			bits = 64
		case gidIndex >= 0 && i >= 6 && i < 22:
			bits = 8
		}
		n, err := strconv.ParseUint(string(f), 16, bits)
		if err != nil {
			return Dest{}, fmt.Errorf("%w: <%s>: field %d %q is not a %d-bit hex number", ErrBadRecord, b, i+1, f, bits)
		}
		v[i] = n
	}
	d := Dest{LID: uint16(v[0]), OutReads: uint32(v[1]), QPN: uint32(v[2]) & 0xFFFFFF, PSN: uint32(v[3]) & 0xFFFFFF,
		RKey: uint32(v[4]), VAddr: v[5], GIDIndex: gidIndex}
	if gidIndex >= 0 {
		for i := range 16 {
			d.GID[i] = byte(v[6+i])
		}
		d.SRQN = uint32(v[22])
	} else {
		d.SRQN = uint32(v[6])
	}
	return d, nil
}

// VersionMsg returns the 16-byte version message: the string NUL-padded.
func VersionMsg(v string) []byte {
	b := make([]byte, VersionLen)
	copy(b[:VersionLen-1], v)
	return b
}

// ParseVersion returns the version string of a version message and its
// value as C's atof reads it.
func ParseVersion(b []byte) (string, float64) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b), Atof(string(b))
}

// Atof is C's atof: the longest prefix that is a decimal number, 0 if none.
func Atof(s string) float64 {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	j := i
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	digits := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	// An exponent, if complete.
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			j = k
		}
	}
	f, _ := strconv.ParseFloat(s[i:j], 64)
	return f
}

// Int32Msg is a 4-byte big-endian integer message (cycle buffer, cache
// line size).
func Int32Msg(v int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(v))
}

// MTUMsg is the MTU message: the MTU enum as decimal text and a NUL,
// n bytes long (2 for peers of version 5.31 and later).
func MTUMsg(mtu verbs.MTU, n int) []byte {
	b := make([]byte, n)
	copy(b, strconv.Itoa(int(mtu))+"\x00")
	return b
}

// ParseMTUMsg reads an MTU message as strtol(…, 10) does; 0 when garbage.
func ParseMTUMsg(b []byte) int {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		if n > 1<<20 {
			break
		}
	}
	return n
}

// BWReport is one side's bandwidth result as the report exchange carries
// it (struct bw_report_data).
type BWReport struct {
	Size    uint64
	Iters   uint64
	BWPeak  float64
	BWAvg   float64
	MsgRate float64
}

// ReportFields returns the five 8-byte messages of the report exchange:
// size and iterations as big-endian integers, then peak, average and
// message rate as big-endian IEEE-754 doubles.
func (r BWReport) ReportFields() [5][8]byte {
	var f [5][8]byte
	binary.BigEndian.PutUint64(f[0][:], r.Size)
	binary.BigEndian.PutUint64(f[1][:], r.Iters)
	binary.BigEndian.PutUint64(f[2][:], math.Float64bits(r.BWPeak))
	binary.BigEndian.PutUint64(f[3][:], math.Float64bits(r.BWAvg))
	binary.BigEndian.PutUint64(f[4][:], math.Float64bits(r.MsgRate))
	return f
}

// ParseReportFields is the inverse of ReportFields.
func ParseReportFields(f [5][8]byte) BWReport {
	return BWReport{
		Size:    binary.BigEndian.Uint64(f[0][:]),
		Iters:   binary.BigEndian.Uint64(f[1][:]),
		BWPeak:  math.Float64frombits(binary.BigEndian.Uint64(f[2][:])),
		BWAvg:   math.Float64frombits(binary.BigEndian.Uint64(f[3][:])),
		MsgRate: math.Float64frombits(binary.BigEndian.Uint64(f[4][:])),
	}
}
