package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Curve is what -curve found: whether the RDMA WRITE bandwidth is at or
// above the TCP stream's at every size, and how far it falls below its own
// peak at a larger size (ib_write_bw -a's curve should not fall).
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
}

// judgeCurve reads the curve's figures out of the report's scenarios,
// which are curve's, in order.
func judgeCurve(sc []Scenario) *Curve {
	c := &Curve{AtOrAboveTCP: true}
	peak, peakSize := 0.0, 0
	for i, f := range sc {
		s, err := lookup(f.Name)
		if err != nil {
			continue
		}
		c.Sizes = append(c.Sizes, s.size)
		if r := f.Median.Ratio; i == 0 || r < c.MinRatio {
			c.MinRatio, c.MinRatioSize = r, s.size
		}
		if f.Median.Ratio < 1 {
			c.AtOrAboveTCP = false
		}
		bw := f.Median.RDMA
		if peak > 0 && bw < peak {
			if fall := (peak - bw) / peak; fall > c.MaxFall {
				c.MaxFall, c.FallSize, c.PeakSize = fall, s.size, peakSize
			}
		}
		if bw > peak {
			peak, peakSize = bw, s.size
		}
	}
	return c
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
		return
	}
	fmt.Fprintf(w, "curve: RDMA's largest fall below its peak at a larger size: %.1f %% (%s against the peak at %s)\n",
		100*c.MaxFall, sizeTitle(c.FallSize), sizeTitle(c.PeakSize))
}

// writeCurvePNG draws the two curves (medians) on one chart: bandwidth on a
// log axis (it spans two orders of magnitude) against the message size on
// a log2 axis, with a grid.
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
	for i, series := range []struct {
		name string
		v    func(Scenario) float64
	}{
		{fmt.Sprintf("RDMA WRITE (%s, %d outstanding)", rep.Device, curveWindow), func(f Scenario) float64 { return f.Median.RDMA }},
		{"Go TCP loopback stream, writes of the same size", func(f Scenario) float64 { return f.Median.TCP }},
	} {
		xy := make(plotter.XYs, 0, len(c.Sizes))
		for j, f := range rep.Scenarios[:len(c.Sizes)] {
			xy = append(xy, plotter.XY{X: float64(c.Sizes[j]), Y: series.v(f)})
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		col := []color.Color{color.RGBA{R: 0xc0, G: 0x30, B: 0x20, A: 0xff}, color.RGBA{R: 0x20, G: 0x50, B: 0xb0, A: 0xff}}[i]
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		pts.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}}[i]
		p.Add(l, pts)
		p.Legend.Add(series.name, l, pts)
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
