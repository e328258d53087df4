package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestJudgeCurve: the verdict on a curve — the lowest ratio and where, and
// the largest fall below the running peak (not below the last size's).
func TestJudgeCurve(t *testing.T) {
	row := func(name string, rdma, ratio float64) Scenario {
		return Scenario{Name: name, Median: Medians{RDMA: rdma, TCP: rdma / ratio, Ratio: ratio}}
	}
	for _, c := range []struct {
		name      string
		rows      []Scenario
		above     bool
		minRatio  float64
		minSize   int
		fall      float64
		fallSize  int
		peakSize  int
		wantSizes int
	}{
		{"rising, above", []Scenario{row("write-64", 10, 1.2), row("write-128", 20, 1.0), row("write-256", 30, 1.5)},
			true, 1.0, 128, 0, 0, 0, 3},
		{"one size below TCP", []Scenario{row("write-64", 10, 1.2), row("write-128", 20, 0.8), row("write-256", 30, 1.5)},
			false, 0.8, 128, 0, 0, 0, 3},
		{"falls after the peak, deepest two sizes later", []Scenario{row("write-1m", 100, 1), row("write-2m", 90, 1), row("write-4m", 60, 1), row("write-8m", 95, 1)},
			true, 1, 1 << 20, 0.4, 4 << 20, 1 << 20, 4},
		{"a new peak resets what a fall is measured against", []Scenario{row("write-64k", 100, 1), row("write-128k", 96, 1), row("write-256k", 200, 1), row("write-512k", 180, 1)},
			true, 1, 64 << 10, 0.1, 512 << 10, 256 << 10, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := judgeCurve(c.rows)
			if v.AtOrAboveTCP != c.above || v.MinRatio != c.minRatio || v.MinRatioSize != c.minSize || len(v.Sizes) != c.wantSizes {
				t.Errorf("verdict %+v: want above=%v, min ratio %.2f at %d, %d sizes", v, c.above, c.minRatio, c.minSize, c.wantSizes)
			}
			if d := v.MaxFall - c.fall; d > 1e-9 || d < -1e-9 || v.FallSize != c.fallSize || v.PeakSize != c.peakSize {
				t.Errorf("fall %.3f at %d below the peak at %d, want %.3f at %d below %d", v.MaxFall, v.FallSize, v.PeakSize, c.fall, c.fallSize, c.peakSize)
			}
		})
	}
}

// TestCurveScenarios: -curve sweeps 64 B to 8 MiB by powers of two, each
// size findable by name (the peer process looks its scenario up).
func TestCurveScenarios(t *testing.T) {
	if len(curve) != 18 || curve[0].size != 64 || curve[len(curve)-1].size != 8<<20 {
		t.Fatalf("%d sizes, %d to %d", len(curve), curve[0].size, curve[len(curve)-1].size)
	}
	for i := range curve {
		s, err := lookup(curve[i].name)
		if err != nil || s.size != 64<<i || s.rdma != rdmaWrite || s.tcp != tcpStream {
			t.Errorf("%s: %+v, %v", curve[i].name, s, err)
		}
	}
	if got := sizeTitle(1 << 20); got != "1 MiB" {
		t.Errorf("sizeTitle(1 MiB) = %q", got)
	}
}

// TestCurveFlags: -curve takes no -only, and -png and -floor need -curve.
func TestCurveFlags(t *testing.T) {
	for _, args := range [][]string{{"-curve", "-only", "write-64k"}, {"-png", "x.png"}, {"-floor"}} {
		var stderr strings.Builder
		if st := run(args, io.Discard, &stderr); st != 2 {
			t.Errorf("%v: exit status %d, want 2", args, st)
		}
	}
}

func TestTicks125(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{15, 6000, []float64{20, 50, 100, 200, 500, 1000, 2000, 5000}},
		{1, 10, []float64{1, 2, 5, 10}},
		{0.3, 0.9, []float64{0.5}},
		{0, 10, nil},  // not a log axis
		{10, 1, nil},  // empty
		{60, 70, nil}, // nothing of 1, 2, 5 inside
	} {
		var got []float64
		for _, tk := range ticks125(c.lo, c.hi) {
			if tk.Label == "" {
				t.Errorf("ticks125(%v, %v): unlabelled tick %v", c.lo, c.hi, tk.Value)
			}
			got = append(got, tk.Value)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ticks125(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

func TestRound125(t *testing.T) {
	for _, c := range []struct {
		v        float64
		up, want float64
	}{
		{4202, 5000, 2000},
		{5000, 5000, 5000},
		{49.7, 50, 20},
		{1, 1, 1},
		{0.03, 0.05, 0.02},
		{999, 1000, 500},
	} {
		if got := round125(c.v, true); math.Abs(got-c.up) > 1e-9*c.up {
			t.Errorf("round125(%v, up) = %v, want %v", c.v, got, c.up)
		}
		if got := round125(c.v, false); math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("round125(%v, down) = %v, want %v", c.v, got, c.want)
		}
	}
}

// TestJudgeCurveFloor: with the UDP floor, the sizes where the floor lies
// below TCP, RDMA's lowest ratio to the floor, and the floor's own fall.
func TestJudgeCurveFloor(t *testing.T) {
	row := func(name string, rdma, tcp, floor float64) Scenario {
		return Scenario{Name: name, Floors: []float64{floor},
			Median: Medians{RDMA: rdma, TCP: tcp, Ratio: rdma / tcp, Floor: floor, OfFloor: rdma / floor}}
	}
	v := judgeCurve([]Scenario{row("write-4k", 115, 50, 120), row("write-8k", 50, 60, 55), row("write-16k", 65, 80, 70), row("write-32k", 110, 90, 115)})
	if !slices.Equal(v.FloorBelowTCP, []int{8 << 10, 16 << 10}) {
		t.Errorf("floor below TCP at %v, want 8 and 16 KiB", v.FloorBelowTCP)
	}
	if math.Abs(v.MinOfFloor-50.0/55) > 1e-9 || v.MinOfFloorSize != 8<<10 {
		t.Errorf("lowest RDMA/floor %.3f at %d, want %.3f at 8 KiB", v.MinOfFloor, v.MinOfFloorSize, 50.0/55)
	}
	if math.Abs(v.FloorMaxFall-(120-55)/120.0) > 1e-9 || v.FloorFallSize != 8<<10 || v.FloorPeakSize != 4<<10 {
		t.Errorf("floor's fall %.3f at %d below %d", v.FloorMaxFall, v.FloorFallSize, v.FloorPeakSize)
	}
	var out strings.Builder
	printCurve(&out, v)
	for _, w := range []string{"the UDP floor lies below TCP at 8 KiB, 16 KiB", "the UDP floor's own largest fall below its peak: 54.2 % (8 KiB against 4 KiB)",
		"RDMA against the UDP floor: lowest ratio 0.91, at 8 KiB"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("verdict lacks %q:\n%s", w, out.String())
		}
	}
	// Without the floor, no floor lines.
	out.Reset()
	printCurve(&out, judgeCurve([]Scenario{{Name: "write-4k", Median: Medians{RDMA: 1, TCP: 1, Ratio: 1}}}))
	if strings.Contains(out.String(), "floor") {
		t.Errorf("a curve without the floor speaks of it:\n%s", out.String())
	}
}

// TestCurveFloorTwoProcs runs -curve -floor between two processes over two
// of the curve's sizes: every round has a floor figure, the verdict and
// the chart take it.
func TestCurveFloorTwoProcs(t *testing.T) {
	defer func(c []scenario) { curve = c }(curve)
	curve = []scenario{curve[6], curve[7]} // 4 and 8 KiB: WRITE ONLY, then FIRST and LAST
	png := t.TempDir() + "/curve.png"
	code, out, errs := runBounded(t, 3*time.Minute, []string{"-procs", "2", "-runs", "2", "-iters", "256", "-curve", "-floor", "-png", png, "-json"}, hooks{})
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !r.Floor || len(r.Scenarios) != 2 || r.Curve == nil || r.Curve.MinOfFloor <= 0 {
		t.Fatalf("report %+v", r)
	}
	for _, s := range r.Scenarios {
		if len(s.Floors) != 2 || len(s.OfFloor) != 2 || s.Median.Floor <= 0 || s.Median.OfFloor <= 0 {
			t.Errorf("%s: floors %v, ratios %v, medians %+v", s.Name, s.Floors, s.OfFloor, s.Median)
		}
		for i := range s.Floors {
			if want := s.RDMA[i] / s.Floors[i]; math.Abs(s.OfFloor[i]-want) > 1e-9*want {
				t.Errorf("%s round %d: RDMA/floor %v, want %v", s.Name, i, s.OfFloor[i], want)
			}
		}
	}
	if !strings.Contains(errs, "write-8k (2/2), UDP floor, 2 processes") {
		t.Errorf("progress lacks the floor:\n%s", errs)
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Errorf("chart: %v", err)
	}
}
