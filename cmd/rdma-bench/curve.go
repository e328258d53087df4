package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Curve is what -curve found: whether the RDMA WRITE bandwidth is at or
// above the TCP stream's at every size, and how far it falls below its own
// peak at a larger size (ib_write_bw -a's curve should not fall); with
// -floor, where the UDP floor itself lies below TCP and how close RDMA
// comes to it.
type Curve struct {
	// Sizes are the message sizes, in the scenarios' order.
	Sizes []int `json:"sizes"`
	// AtOrAboveTCP: the median ratio is at least 1 at every size.
	AtOrAboveTCP bool `json:"at_or_above_tcp"`
	// MinRatio is the lowest median ratio, at MinRatioSize.
	MinRatio     float64 `json:"min_ratio"`
	MinRatioSize int     `json:"min_ratio_size"`
	// MaxFall is the largest fraction by which the RDMA median at a size
	// lies below the highest median at a smaller size (PeakSize), at
	// FallSize; 0 when it never falls.
	MaxFall  float64 `json:"max_fall"`
	FallSize int     `json:"fall_size,omitempty"`
	PeakSize int     `json:"peak_size,omitempty"`
	// With -floor: the sizes where the UDP floor's median lies below
	// TCP's; the lowest median ratio RDMA/floor, at MinOfFloorSize; and
	// the floor's own largest fall below its peak.
	FloorBelowTCP  []int   `json:"udp_floor_below_tcp,omitempty"`
	MinOfFloor     float64 `json:"min_ratio_over_udp_floor,omitempty"`
	MinOfFloorSize int     `json:"min_ratio_over_udp_floor_size,omitempty"`
	FloorMaxFall   float64 `json:"udp_floor_max_fall,omitempty"`
	FloorFallSize  int     `json:"udp_floor_fall_size,omitempty"`
	FloorPeakSize  int     `json:"udp_floor_peak_size,omitempty"`
}

// judgeCurve reads the curve's figures out of the report's scenarios,
// which are curve's, in order.
func judgeCurve(sc []Scenario) *Curve {
	c := &Curve{AtOrAboveTCP: true}
	var rdma, floor []float64
	for _, f := range sc {
		s, err := lookup(f.Name)
		if err != nil {
			continue
		}
		if r := f.Median.Ratio; len(c.Sizes) == 0 || r < c.MinRatio {
			c.MinRatio, c.MinRatioSize = r, s.size
		}
		if f.Median.Ratio < 1 {
			c.AtOrAboveTCP = false
		}
		if len(f.Floors) > 0 {
			if f.Median.Floor < f.Median.TCP {
				c.FloorBelowTCP = append(c.FloorBelowTCP, s.size)
			}
			if r := f.Median.OfFloor; len(floor) == 0 || r < c.MinOfFloor {
				c.MinOfFloor, c.MinOfFloorSize = r, s.size
			}
			floor = append(floor, f.Median.Floor)
		}
		c.Sizes = append(c.Sizes, s.size)
		rdma = append(rdma, f.Median.RDMA)
	}
	c.MaxFall, c.FallSize, c.PeakSize = largestFall(c.Sizes, rdma)
	if len(floor) == len(c.Sizes) {
		c.FloorMaxFall, c.FloorFallSize, c.FloorPeakSize = largestFall(c.Sizes, floor)
	}
	return c
}

// largestFall returns the largest fraction by which v at a size lies below
// the highest v at a smaller size, that size and the peak's; 0 when v
// never falls.
func largestFall(sizes []int, v []float64) (fall float64, at, peakAt int) {
	peak, peakSize := 0.0, 0
	for i, x := range v {
		if peak > 0 && x < peak {
			if f := (peak - x) / peak; f > fall {
				fall, at, peakAt = f, sizes[i], peakSize
			}
		}
		if x > peak {
			peak, peakSize = x, sizes[i]
		}
	}
	return fall, at, peakAt
}

// printCurve prints the verdict under the table.
func printCurve(w io.Writer, c *Curve) {
	yes := "no"
	if c.AtOrAboveTCP {
		yes = "yes"
	}
	fmt.Fprintf(w, "curve: RDMA at or above TCP at every size: %s (lowest ratio %.2f, at %s)\n", yes, c.MinRatio, sizeTitle(c.MinRatioSize))
	if c.MaxFall == 0 {
		fmt.Fprintln(w, "curve: RDMA never falls below its peak at a larger size")
	} else {
		fmt.Fprintf(w, "curve: RDMA's largest fall below its peak at a larger size: %.1f %% (%s against the peak at %s)\n",
			100*c.MaxFall, sizeTitle(c.FallSize), sizeTitle(c.PeakSize))
	}
	if c.MinOfFloor == 0 {
		return
	}
	if len(c.FloorBelowTCP) > 0 {
		sizes := make([]string, len(c.FloorBelowTCP))
		for i, s := range c.FloorBelowTCP {
			sizes[i] = sizeTitle(s)
		}
		fmt.Fprintf(w, "curve: the UDP floor lies below TCP at %s: no RoCEv2 device over UDP reaches TCP there on this machine\n", strings.Join(sizes, ", "))
	}
	if c.FloorMaxFall > 0 {
		fmt.Fprintf(w, "curve: the UDP floor's own largest fall below its peak: %.1f %% (%s against %s)\n",
			100*c.FloorMaxFall, sizeTitle(c.FloorFallSize), sizeTitle(c.FloorPeakSize))
	}
	fmt.Fprintf(w, "curve: RDMA against the UDP floor: lowest ratio %.2f, at %s\n", c.MinOfFloor, sizeTitle(c.MinOfFloorSize))
}

// writeCurvePNG draws the curves (medians: RDMA, TCP, and with -floor the
// UDP floor) on one chart: bandwidth on a log axis (it spans two orders of
// magnitude) against the message size on a log2 axis, with a grid.
func writeCurvePNG(path string, rep *Report, c *Curve) error {
	if len(c.Sizes) == 0 {
		return fmt.Errorf("no sizes measured")
	}
	p := plot.New()
	where := "one process"
	if rep.Procs == 2 {
		where = "two processes"
	}
	runs := "1 run"
	if rep.Runs > 1 {
		runs = fmt.Sprintf("%d runs, medians", rep.Runs)
	}
	p.Title.Text = fmt.Sprintf("WRITE bandwidth by message size, %s (rdma-bench -curve, %s)", where, runs)
	p.X.Label.Text = "message size"
	p.Y.Label.Text = "bandwidth [MiB/s]"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks(c.Sizes)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(ticks125)
	p.Add(plotter.NewGrid())
	type series struct {
		name string
		v    func(Scenario) float64
	}
	all := []series{
		{fmt.Sprintf("RDMA WRITE (%s, %d outstanding)", rep.Device, curveWindow), func(f Scenario) float64 { return f.Median.RDMA }},
		{"Go TCP loopback stream, writes of the same size", func(f Scenario) float64 { return f.Median.TCP }},
	}
	if rep.Floor {
		all = append(all, series{"UDP floor: the same packets with their ICRCs and the receive copy, nothing else", func(f Scenario) float64 { return f.Median.Floor }})
	}
	for i, sr := range all {
		xy := make(plotter.XYs, 0, len(c.Sizes))
		for j, f := range rep.Scenarios[:len(c.Sizes)] {
			xy = append(xy, plotter.XY{X: float64(c.Sizes[j]), Y: sr.v(f)})
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		col := []color.Color{color.RGBA{R: 0xc0, G: 0x30, B: 0x20, A: 0xff}, color.RGBA{R: 0x20, G: 0x50, B: 0xb0, A: 0xff},
			color.RGBA{R: 0x70, G: 0x70, B: 0x70, A: 0xff}}[i]
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		if i == 2 {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		pts.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}}[i]
		p.Add(l, pts)
		p.Legend.Add(sr.name, l, pts)
	}
	// Labelled ticks at both ends of the axis.
	p.Y.Min, p.Y.Max = round125(p.Y.Min, false), round125(p.Y.Max, true)
	// Both curves rise with the size: the lower right is free.
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(10), vg.Points(10)
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}

// round125 rounds v > 0 to the nearest 1, 2 or 5 times a power of ten at
// or above it (up) or at or below it.
func round125(v float64, up bool) float64 {
	if !(v > 0) {
		return v
	}
	decade := math.Pow(10, math.Floor(math.Log10(v)))
	steps := []float64{1, 2, 5, 10}
	if up {
		for _, m := range steps {
			if m*decade >= v*(1-1e-12) {
				return m * decade
			}
		}
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i]*decade <= v*(1+1e-12) {
			return steps[i] * decade
		}
	}
	return decade
}

// ticks125 puts a labelled tick at every 1, 2 and 5 times a power of ten
// between lo and hi (plain numbers: 20, 500, 2000), for a log axis.
func ticks125(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	if !(lo > 0) || !(hi >= lo) {
		return nil
	}
	for decade := math.Pow(10, math.Floor(math.Log10(lo))); decade <= hi; decade *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * decade; v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return ts
}

// sizeTicks labels every other measured size (64 B, 256 B, 1 KiB, ...):
// all of them would crowd the axis.
func sizeTicks(sizes []int) plot.Ticker {
	var t plot.ConstantTicks
	for i, s := range sizes {
		label := ""
		if i%2 == 0 {
			label = sizeTitle(s)
		}
		t = append(t, plot.Tick{Value: float64(s), Label: label})
	}
	return t
}
