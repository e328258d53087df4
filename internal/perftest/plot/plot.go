// Package plot draws the chart of a perftest -a sweep (--png): bandwidth
// (BW tests) or latency (LAT tests) against the message size. It is
// separate from package perftest so that the tools' core does not depend
// on a plotting library.
package plot

import (
	"fmt"

	"github.com/rdma-go/rdma-go/internal/perftest"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePNG writes r's rows as a PNG line chart to path, message size on a
// log2 axis.
func WritePNG(path string, r *perftest.Result) error {
	if len(r.Rows) == 0 {
		return fmt.Errorf("no results to plot")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s (rdma-go, %s)", r.Tool, r.Role)
	p.X.Label.Text = "message size [bytes]"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	var lines []any
	if r.Test.Kind == perftest.BW {
		p.Y.Label.Text = "bandwidth [" + r.BWUnit + "]"
		avg := make(plotter.XYs, 0, len(r.Rows))
		peak := make(plotter.XYs, 0, len(r.Rows))
		for _, row := range r.Rows {
			bw, pk := row.BWAvg, row.BWPeak
			if row.Remote != nil && r.Role != "server" {
				bw += row.Remote.BWAvg
				pk += row.Remote.BWPeak
			}
			avg = append(avg, plotter.XY{X: float64(row.Bytes), Y: bw})
			if pk > 0 {
				peak = append(peak, plotter.XY{X: float64(row.Bytes), Y: pk})
			}
		}
		lines = append(lines, "average", avg)
		if len(peak) > 0 {
			lines = append(lines, "peak", peak)
		}
	} else {
		p.Y.Label.Text = "latency [usec]"
		typ := make(plotter.XYs, 0, len(r.Rows))
		avg := make(plotter.XYs, 0, len(r.Rows))
		p99 := make(plotter.XYs, 0, len(r.Rows))
		for _, row := range r.Rows {
			x := float64(row.Bytes)
			typ = append(typ, plotter.XY{X: x, Y: row.TTypical})
			avg = append(avg, plotter.XY{X: x, Y: row.TAvg})
			p99 = append(p99, plotter.XY{X: x, Y: row.P99})
		}
		lines = append(lines, "typical", typ, "average", avg, "99%", p99)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
