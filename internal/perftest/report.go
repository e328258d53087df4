package perftest

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Column headers of the result tables (6.06 spellings).
const (
	ResultFmtBW     = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	ResultFmtBWG    = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	ResultFmtLat    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	ResultFmtLatDur = " #bytes        #iterations       t_avg[usec]    tps average"
)

// Banner holds what ctx_print_test_info prints.
type Banner struct {
	Test       Test
	AtomicType AtomicType
	Duplex     bool
	PostList   int
	RecvPost   int
	Events     bool
	EQNum      int
	Device     string
	NumQPs     int
	Conn       ConnType
	UseSRQ     bool
	NoPCIeRO   bool
	OldPost    bool
	Client     bool
	TxDepth    int
	RxDepth    int
	CQMod      int
	MTU        int // bytes
	LinkType   string
	GIDIndex   int
	Inline     int
	OutReads   int
}

var testsStr = [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}

// WriteBanner prints the test information block, RESULT_LINE to
// RESULT_LINE.
func WriteBanner(w io.Writer, b *Banner) {
	var s strings.Builder
	s.WriteString(ResultLine)
	s.WriteString("                    ")
	s.WriteString(testsStr[b.Test.Verb] + " ")
	if b.Test.Verb == Atomic {
		s.WriteString(b.AtomicType.String() + " ")
	}
	if b.Test.Kind == BW {
		if b.Duplex {
			s.WriteString("Bidirectional ")
		}
		if b.PostList > 1 {
			s.WriteString("Post List ")
		}
		s.WriteString("BW ")
	} else {
		s.WriteString("Latency ")
	}
	s.WriteString("Test\n")
	if b.Events {
		fmt.Fprintf(&s, " Test with events. Using %s_comp%d\n", b.Device, b.EQNum)
	}
	onOff := func(v bool) string {
		if v {
			return "ON"
		}
		return "OFF"
	}
	fmt.Fprintf(&s, " Dual-port       : %s\t\tDevice         : %s\n", "OFF", b.Device)
	fmt.Fprintf(&s, " Number of qps   : %d\t\tTransport type : %s\n", b.NumQPs, "IB")
	fmt.Fprintf(&s, " Connection type : %s\t\tUsing SRQ      : %s\n", b.Conn, onOff(b.UseSRQ))
	fmt.Fprintf(&s, " PCIe relax order: %s\n", onOff(!b.NoPCIeRO))
	fmt.Fprintf(&s, " ibv_wr* API     : %s\n", onOff(!b.OldPost))
	if b.Client || b.Duplex {
		fmt.Fprintf(&s, " TX depth        : %d\n", b.TxDepth)
	}
	if b.PostList > 1 {
		fmt.Fprintf(&s, " Post List       : %d\n", b.PostList)
	}
	if b.RecvPost > 1 {
		fmt.Fprintf(&s, " Recv Post List  : %d\n", b.RecvPost)
	}
	if b.Test.Verb == Send && (!b.Client || b.Duplex) {
		fmt.Fprintf(&s, " RX depth        : %d\n", b.RxDepth)
	}
	if b.Test.Kind == BW {
		fmt.Fprintf(&s, " CQ Moderation   : %d\n", b.CQMod)
	}
	fmt.Fprintf(&s, " Mtu             : %d[B]\n", b.MTU)
	fmt.Fprintf(&s, " Link type       : %s\n", b.LinkType)
	if b.GIDIndex != -1 {
		fmt.Fprintf(&s, " GID index       : %d\n", b.GIDIndex)
	}
	if b.Test.Verb != Read && b.Test.Verb != Atomic {
		fmt.Fprintf(&s, " Max inline data : %d[B]\n", b.Inline)
	} else {
		fmt.Fprintf(&s, " Outstand reads  : %d\n", b.OutReads)
	}
	fmt.Fprintf(&s, " rdma_cm QPs\t : %s\n", "OFF")
	fmt.Fprintf(&s, " Data ex. method : %s", "Ethernet")
	s.WriteString("\n")
	s.WriteString(ResultLine)
	io.WriteString(w, s.String())
}

// AddrLine returns ctx_print_pingpong_data's lines for one QP: side is
// "local" or "remote"; the GID line follows when withGID.
func AddrLine(side string, d *Dest, verb Verb, withGID bool) string {
	var s strings.Builder
	fmt.Fprintf(&s, " %s address: LID %s QPN %s PSN %s", side, CHexAlt(uint64(d.LID), 4), CHexAlt(uint64(d.QPN), 6), CHexAlt(uint64(d.PSN), 6))
	switch verb {
	case Read:
		fmt.Fprintf(&s, " OUT %s", CHexAlt(uint64(d.OutReads), 4))
		fallthrough
	case Write:
		fmt.Fprintf(&s, " RKey %s VAddr %s", CHexAlt(uint64(d.RKey), 8), CHexAlt(d.VAddr, 16))
	}
	s.WriteString("\n")
	if withGID {
		g := d.GID
		s.WriteString(" GID: ")
		for i := range 16 {
			if i > 0 {
				s.WriteString(":")
			}
			fmt.Fprintf(&s, "%02d", g[i])
		}
		s.WriteString("\n")
	}
	return s.String()
}

// BWHeader returns RESULT_LINE and the bandwidth column header line.
func BWHeader(gbits bool) string {
	if gbits {
		return ResultLine + ResultFmtBWG + "\n"
	}
	return ResultLine + ResultFmtBW + "\n"
}

// LatHeader returns RESULT_LINE and the latency column header line.
func LatHeader(duration bool) string {
	if duration {
		return ResultLine + ResultFmtLatDur + "\n"
	}
	return ResultLine + ResultFmtLat + "\n"
}

// BWTiming is what a bandwidth run records, in nanoseconds of a
// monotonic clock (perftest's cycles, with one cycle per nanosecond).
type BWTiming struct {
	// Posted and Completed are perftest's tposted and tcompleted arrays:
	// one entry per message when the peak is measured, else one each
	// (the start and the end).
	Posted, Completed []int64
	// Iters is the number of messages the report counts.
	Iters uint64
}

// nsPerSecond is perftest's cycles_to_units with a 1 GHz clock.
const nsPerSecond = 1e9

// ComputeBW is print_report_bw's arithmetic: average bandwidth over the
// whole run, the peak over windows aligned to cqMod, and the message rate,
// in MiB/s (or Gb/s with gbits) and millions of messages per second.
func ComputeBW(size uint64, t *BWTiming, noPeak bool, postList, cqMod int, gbits bool) BWReport {
	n := t.Iters
	optDelta := uint64(t.Completed[0] - t.Posted[0])
	if !noPeak && n > 0 {
		postList = max(postList, 1)
		cqMod = max(cqMod, 1)
		for i := uint64(0); i < n; i += uint64(postList) {
			for j := roundUp(i+1, uint64(cqMod)) - 1; j < n; j += uint64(cqMod) {
				d := uint64(t.Completed[j]-t.Posted[i]) / (j - i + 1)
				if d < optDelta {
					optDelta = d
				}
			}
			if n%uint64(cqMod) != 0 {
				j := n - 1
				d := uint64(t.Completed[j]-t.Posted[i]) / (j - i + 1)
				if d < optDelta {
					optDelta = d
				}
			}
		}
	}
	ff := uint64(0x100000)
	if gbits {
		ff = 125000000
	}
	loc := uint64(0)
	if !noPeak && n > 0 {
		loc = n - 1
	}
	sum := float64(t.Completed[loc] - t.Posted[0])
	avg := float64(size) * float64(n) * nsPerSecond / (sum * float64(ff))
	rate := float64(n) * nsPerSecond / (sum * 1e6)
	var peakUp uint64
	if !noPeak {
		peakUp = size * uint64(nsPerSecond)
	}
	peakDown := optDelta * ff
	return BWReport{Size: size, Iters: n, BWPeak: float64(peakUp) / float64(peakDown), BWAvg: avg, MsgRate: rate}
}

func roundUp(v, a uint64) uint64 {
	if v%a == 0 {
		return v
	}
	return a * (v/a + 1)
}

// BWRow is print_full_bw_report's line for rep, plus rem's figures when
// rem is not nil (bidirectional sums). With an output level other than
// OutputFull it is the single number.
func BWRow(rep BWReport, rem *BWReport, gbits bool, out Output) string {
	peak, avg, rate := rep.BWPeak, rep.BWAvg, rep.MsgRate
	incAccuracy := avg < 0.1 && gbits
	if rem != nil {
		peak += rem.BWPeak
		avg += rem.BWAvg
		rate += rem.MsgRate
	}
	switch out {
	case OutputBW:
		return fmt.Sprintf("%s\n", CFloat(avg, 0, 6, false))
	case OutputMR:
		return fmt.Sprintf("%s\n", CFloat(rate, 0, 6, false))
	}
	if incAccuracy {
		return " " + CUint(rep.Size, 7, true) + "    " + CUint(rep.Iters, 0, true) + "           " +
			CFloat(peak, 7, 6, true) + "            " + CFloat(avg, 7, 6, true) + "            " + CFloat(rate, 7, 6, true) + "\n"
	}
	return " " + CUint(rep.Size, 7, true) + "    " + CUint(rep.Iters, 10, true) + "       " +
		CFloat(peak, 7, 2, true) + "            " + CFloat(avg, 7, 2, true) + "\t\t   " + CFloat(rate, 7, 6, true) + "\n"
}

// LatStats are print_report_lat's figures, in the report's unit.
type LatStats struct {
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
	// Sorted are the samples in the report's unit, ascending (all of
	// them, the two dropped included).
	Sorted []float64
}

// ComputeLat is print_report_lat's arithmetic on the post times (ns) of a
// latency run: N = len(posted)−1 samples, each the gap between two posts
// divided by rttFactor (2 for ping-pongs); sorted; the two largest dropped
// (M = N−2); typical = the median of the first M (integer nanoseconds, as
// perftest takes it in cycles); average and standard deviation over the
// first M, each deviation truncated to an integer before squaring as
// perftest does; percentiles at ceil(M×0.99) and ceil(M×0.999). unit is
// the nanoseconds per reported unit (1000 for microseconds).
func ComputeLat(posted []int64, rttFactor int, unit float64) LatStats {
	n := len(posted) - 1
	if n < 3 {
		return LatStats{}
	}
	delta := make([]int64, n)
	for i := range delta {
		delta[i] = posted[i+1] - posted[i]
	}
	return latFromDeltas(delta, rttFactor, unit)
}

func latFromDeltas(delta []int64, rttFactor int, unit float64) LatStats {
	slices.Sort(delta)
	q := unit * float64(rttFactor)
	m := len(delta) - 2
	var median int64
	if (m-1)%2 != 0 {
		median = (delta[m/2] + delta[m/2-1]) / 2
	} else {
		median = delta[m/2]
	}
	var sum float64
	for i := 0; i < m; i++ {
		sum += float64(delta[i]) / q
	}
	avg := sum / float64(m)
	var ss float64
	for i := 0; i < m; i++ {
		tv := int(avg - float64(delta[i])/q)
		ss += float64(int(math.Pow(float64(tv), 2)))
	}
	i99 := int(math.Ceil(float64(m) * 0.99))
	i999 := int(math.Ceil(float64(m) * 0.999))
	st := LatStats{
		Min: float64(delta[0]) / q, Max: float64(delta[m]) / q, Typical: float64(median) / q,
		Avg: avg, Stdev: math.Sqrt(ss / float64(m)), P99: float64(delta[i99]) / q, P999: float64(delta[i999]) / q,
	}
	st.Sorted = make([]float64, len(delta))
	for i, d := range delta {
		st.Sorted[i] = float64(d) / q
	}
	return st
}

// LatRow is REPORT_FMT_LAT's line (or the average alone with
// OutputLat).
func LatRow(size uint64, iters uint64, s *LatStats, out Output) string {
	if out == OutputLat {
		return CFloat(s.Avg, 0, 6, false) + "\n"
	}
	f := func(v float64) string { return CFloat(v, 7, 2, true) }
	return " " + CUint(size, 7, true) + " " + CUint(iters, 0, false) + "          " + f(s.Min) + "        " + f(s.Max) +
		"      " + f(s.Typical) + "  \t       " + f(s.Avg) + "     \t" + f(s.Stdev) + "\t\t" + f(s.P99) + " \t\t" + f(s.P999) + "\n"
}

// LatDurRow is REPORT_FMT_LAT_DUR's line for a duration run: elapsed
// nanoseconds over iters round trips (or the latency alone with
// OutputLat).
func LatDurRow(size uint64, iters uint64, elapsedNS int64, rttFactor int, out Output) (string, float64, float64) {
	lat := float64(elapsedNS) / 1000 / float64(rttFactor) / float64(iters)
	tps := float64(iters) / (float64(elapsedNS) / nsPerSecond)
	if out == OutputLat {
		return CFloat(lat, 0, 6, false) + "\n", lat, tps
	}
	return " " + CUint(size, 7, true) + "       " + CUint(iters, 0, false) + "            " + CFloat(lat, 7, 2, true) +
		"        " + CFloat(tps, 7, 2, true) + "\n", lat, tps
}
