package perftest

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/rdma-go/rdma-go/verbs"
)

func gidV4(a, b, c, d byte) verbs.GID {
	return verbs.GID{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	want, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s: line %d\n got %q\nwant %q", name, i+1, g, w)
			}
		}
		t.Fatalf("%s differs", name)
	}
}

// The spec's three samples, rebuilt from the same numbers.
func TestSampleWriteBWClient(t *testing.T) {
	var b bytes.Buffer
	WriteBanner(&b, &Banner{Test: Test{Write, BW}, Device: "rxe0", NumQPs: 1, Conn: RC, Client: true, TxDepth: 128,
		CQMod: 1, MTU: 1024, LinkType: "Ethernet", GIDIndex: 1})
	b.WriteString(AddrLine("local", &Dest{QPN: 0x11, PSN: 0x3c1f2a, RKey: 0x1a2b, VAddr: 0x7f3a5c010000, GID: gidV4(192, 0, 2, 1)}, Write, true))
	b.WriteString(AddrLine("remote", &Dest{QPN: 0x12, PSN: 0x8e4d71, RKey: 0x2c3d, VAddr: 0x7f81a2020000, GID: gidV4(192, 0, 2, 2)}, Write, true))
	b.WriteString(BWHeader(false))
	b.WriteString(BWRow(BWReport{Size: 65536, Iters: 5000, BWPeak: 1187.34, BWAvg: 1186.91, MsgRate: 0.018991}, nil, false, OutputFull))
	b.WriteString(ResultLine)
	golden(t, "spec_write_bw_client.txt", b.String())
}

func TestSampleSendBWServer(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("\n************************************\n* Waiting for client to connect... *\n************************************\n")
	WriteBanner(&b, &Banner{Test: Test{Send, BW}, Device: "rxe0", NumQPs: 1, Conn: RC, RxDepth: 512,
		CQMod: 1, MTU: 1024, LinkType: "Ethernet", GIDIndex: 1})
	b.WriteString(AddrLine("local", &Dest{QPN: 0x12, PSN: 0x8e4d71, GID: gidV4(192, 0, 2, 2)}, Send, true))
	b.WriteString(AddrLine("remote", &Dest{QPN: 0x11, PSN: 0x3c1f2a, GID: gidV4(192, 0, 2, 1)}, Send, true))
	b.WriteString(BWHeader(false))
	b.WriteString(BWRow(BWReport{Size: 65536, Iters: 1000, BWPeak: 0, BWAvg: 1093.27, MsgRate: 0.017492}, nil, false, OutputFull))
	b.WriteString(ResultLine)
	golden(t, "spec_send_bw_server.txt", b.String())
}

func TestSampleWriteLatClient(t *testing.T) {
	var b bytes.Buffer
	WriteBanner(&b, &Banner{Test: Test{Write, LAT}, Device: "rxe0", NumQPs: 1, Conn: RC, Client: true, TxDepth: 1,
		CQMod: 1, MTU: 1024, LinkType: "Ethernet", GIDIndex: 1})
	b.WriteString(AddrLine("local", &Dest{QPN: 0x13, PSN: 0x5b61d0, RKey: 0x3e4f, VAddr: 0x55d2c0a41000, GID: gidV4(192, 0, 2, 1)}, Write, true))
	b.WriteString(AddrLine("remote", &Dest{QPN: 0x14, PSN: 0xa77e2, RKey: 0x4f50, VAddr: 0x5611e3f27000, GID: gidV4(192, 0, 2, 2)}, Write, true))
	b.WriteString(LatHeader(false))
	b.WriteString(LatRow(2, 1000, &LatStats{Min: 7.91, Max: 41.25, Typical: 9.13, Avg: 9.48, Stdev: 1.62, P99: 16.02, P999: 41.25}, OutputFull))
	b.WriteString(ResultLine)
	golden(t, "spec_write_lat_client.txt", b.String())
}

// Banner variants seen in the real 6.06 tool's output on rxe.
func TestBannerVariants(t *testing.T) {
	var b bytes.Buffer
	WriteBanner(&b, &Banner{Test: Test{Atomic, LAT}, AtomicType: FetchAndAdd, Device: "rxe0", NumQPs: 1, Conn: RC,
		OldPost: true, MTU: 1024, LinkType: "Ethernet", GIDIndex: 1, OutReads: 128})
	want := ResultLine + "                    Atomic FETCH_AND_ADD Latency Test\n" +
		" Dual-port       : OFF\t\tDevice         : rxe0\n Number of qps   : 1\t\tTransport type : IB\n" +
		" Connection type : RC\t\tUsing SRQ      : OFF\n PCIe relax order: ON\n ibv_wr* API     : OFF\n" +
		" Mtu             : 1024[B]\n Link type       : Ethernet\n GID index       : 1\n Outstand reads  : 128\n" +
		" rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n" + ResultLine
	if b.String() != want {
		t.Fatalf("atomic lat banner\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	WriteBanner(&b, &Banner{Test: Test{Send, BW}, Duplex: true, PostList: 4, Events: true, Device: "rgo0", NumQPs: 2,
		Conn: UD, OldPost: true, Client: true, TxDepth: 128, RxDepth: 512, CQMod: 4, MTU: 4096, LinkType: "Ethernet", GIDIndex: -1})
	for _, line := range []string{"Send Bidirectional Post List BW Test\n", " Test with events. Using rgo0_comp0\n",
		" TX depth        : 128\n Post List       : 4\n RX depth        : 512\n CQ Moderation   : 4\n"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("banner lacks %q:\n%s", line, b.String())
		}
	}
	if strings.Contains(b.String(), "GID index") {
		t.Error("GID index printed without one")
	}
	// read: OUT before RKey; atomic: no keys.
	d := &Dest{QPN: 0xc2, PSN: 0x625ac6, OutReads: 128, RKey: 0x2c64, VAddr: 0x7ff965343000}
	if got := AddrLine("local", d, Read, false); got != " local address: LID 0000 QPN 0x00c2 PSN 0x625ac6 OUT 0x80 RKey 0x002c64 VAddr 0x007ff965343000\n" {
		t.Errorf("read addr %q", got)
	}
	if got := AddrLine("remote", d, Atomic, false); got != " remote address: LID 0000 QPN 0x00c2 PSN 0x625ac6\n" {
		t.Errorf("atomic addr %q", got)
	}
}

func TestBWRowVariants(t *testing.T) {
	r := BWReport{Size: 2, Iters: 5000, BWPeak: 0.05, BWAvg: 0.04, MsgRate: 2.5}
	if got := BWRow(r, nil, true, OutputFull); got != " 2          5000           0.050000            0.040000            2.500000\n" {
		t.Errorf("gbits low %q", got)
	}
	if got := BWRow(r, nil, false, OutputBW); got != "0.040000\n" {
		t.Errorf("output bw %q", got)
	}
	if got := BWRow(r, &r, false, OutputMR); got != "5.000000\n" {
		t.Errorf("output mr (bidir sum) %q", got)
	}
	if got := BWHeader(true); !strings.Contains(got, "BW peak[Gb/sec]    BW average[Gb/sec]") {
		t.Errorf("gbits header %q", got)
	}
}

func TestComputeLat(t *testing.T) {
	// Post times giving gaps 10,20,...,100 µs in a shuffled order; the
	// ping-pong halves them.
	gaps := []int64{50, 10, 100, 30, 90, 20, 70, 40, 80, 60}
	posted := []int64{0}
	for _, g := range gaps {
		posted = append(posted, posted[len(posted)-1]+g*1000)
	}
	st := ComputeLat(posted, 2, 1000)
	// sorted halves: 5 10 15 20 25 30 35 40 45 50; M = 8.
	if st.Min != 5 || st.Max != 45 {
		t.Fatalf("min/max %v %v", st.Min, st.Max)
	}
	// M=8: (M-1)%2 != 0: median = (d[4]+d[3])/2 = (50000+40000)/2 ns, /2000.
	if st.Typical != 22.5 {
		t.Fatalf("typical %v", st.Typical)
	}
	if st.Avg != 22.5 { // (5+…+40)/8
		t.Fatalf("avg %v", st.Avg)
	}
	// Deviations truncated: 17,12,7,2,-2,-7,-12,-17 → squares 289,144,49,4,4,49,144,289 = 972/8.
	if st.Stdev != math.Sqrt(972.0/8) {
		t.Fatalf("stdev %v", st.Stdev)
	}
	// ceil(8*0.99) = 8 → d[8] = 45; ceil(8*0.999) = 8.
	if st.P99 != 45 || st.P999 != 45 {
		t.Fatalf("percentiles %v %v", st.P99, st.P999)
	}
	// Odd M: median is the middle sample.
	st = ComputeLat(posted[:10], 1, 1000) // 9 gaps, M = 7
	if st.Typical != 40 {                 // sorted 10 20 30 40 50 70 80 | 90 100: d[M/2] = d[3]
		t.Fatalf("odd typical %v (%v)", st.Typical, st.Sorted)
	}
}

func TestComputeBW(t *testing.T) {
	// 4 messages of 1 MiB, one completion each, 1 ms apart, the last
	// completing 4 ms after the first post.
	tm := &BWTiming{Posted: []int64{0, 1e6, 2e6, 3e6}, Completed: []int64{1e6, 2e6, 3e6, 4e6}, Iters: 4}
	r := ComputeBW(1<<20, tm, false, 1, 1, false)
	if r.BWAvg != 1000 || r.MsgRate != 0.001 {
		t.Fatalf("avg %v rate %v", r.BWAvg, r.MsgRate)
	}
	if r.BWPeak != 1000 {
		t.Fatalf("peak %v", r.BWPeak)
	}
	noPeak := &BWTiming{Posted: []int64{0}, Completed: []int64{4e6}, Iters: 4}
	if r := ComputeBW(1<<20, noPeak, true, 1, 1, false); r.BWPeak != 0 || r.BWAvg != 1000 {
		t.Fatalf("no peak %+v", r)
	}
	if r := ComputeBW(1<<20, noPeak, true, 1, 1, true); math.Abs(r.BWAvg-1000*float64(1<<20)/125e6) > 1e-9 {
		t.Fatalf("gbits %+v", r)
	}
}

func TestUsageMatchesPerftest606(t *testing.T) {
	for _, tt := range allTests {
		var b bytes.Buffer
		Usage(&b, tt.Name(), tt)
		got := b.String()
		got = got[:strings.Index(got, "\n rdma-go additions:")+1]
		golden(t, "help_"+tt.Name()+".txt", got)
	}
}

var allTests = []Test{{Send, BW}, {Send, LAT}, {Write, BW}, {Write, LAT}, {Read, BW}, {Read, LAT}, {Atomic, BW}, {Atomic, LAT}}
