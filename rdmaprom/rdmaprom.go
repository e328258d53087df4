// Package rdmaprom exports RDMA port and QP counters to Prometheus. A
// program registers it in one line per open device:
//
//	prometheus.MustRegister(rdmaprom.NewCollector(ctx))
//
// Each scrape reads the counters of the context's ports
// (Context.QueryPortCounters) and of its live QPs (Context.QPs,
// QP.Counters): the numbers that Linux shows for rxe as hw counters
// (rdma statistic, /sys/class/infiniband/DEV/ports/N/hw_counters) under
// the same names, plus the soft device's own drop and error counters. A
// port counter is rdma_port_NAME_total{device,port}; a QP counter is
// rdma_qp_NAME_total{device,qpn,type}.
package rdmaprom

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-go/rdma-go/verbs"
)

// counter is one field of verbs.Counters and its two metrics.
type counter struct {
	index    int
	port, qp *prometheus.Desc
}

// counters lists the fields of verbs.Counters by their rxe names (the
// struct's rxe tags).
var counters = func() []counter {
	t := reflect.TypeFor[verbs.Counters]()
	out := make([]counter, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("rxe")
		if name == "" || f.Type.Kind() != reflect.Uint64 {
			continue
		}
		help := fmt.Sprintf("rxe hw counter %s (verbs.Counters.%s)", name, f.Name)
		out = append(out, counter{index: i,
			port: prometheus.NewDesc("rdma_port_"+name+"_total", "Port "+help+".", []string{"device", "port"}, nil),
			qp:   prometheus.NewDesc("rdma_qp_"+name+"_total", "QP "+help+".", []string{"device", "qpn", "type"}, nil),
		})
	}
	return out
}()

// Collector is a prometheus.Collector for one open device context.
type Collector struct {
	ctx *verbs.Context
	qps bool
}

// Option configures a Collector.
type Option func(*Collector)

// WithoutQPs leaves the per-QP counters out: a process with very many
// QPs then exports only its ports'.
func WithoutQPs() Option { return func(c *Collector) { c.qps = false } }

// NewCollector returns a collector for ctx's port and QP counters. It
// reads nothing once ctx is closed.
func NewCollector(ctx *verbs.Context, opts ...Option) *Collector {
	c := &Collector{ctx: ctx, qps: true}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Describe sends the descriptors of every metric the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, k := range counters {
		ch <- k.port
		if c.qps {
			ch <- k.qp
		}
	}
}

// Collect reads the counters now and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	dev := c.ctx.Device().Name()
	da, err := c.ctx.QueryDevice()
	if err != nil {
		return // closed
	}
	for p := 1; p <= int(da.PhysPortCnt); p++ {
		pc, err := c.ctx.QueryPortCounters(uint8(p))
		if err != nil {
			continue
		}
		send(ch, &pc, func(k counter) *prometheus.Desc { return k.port }, dev, strconv.Itoa(p))
	}
	if !c.qps {
		return
	}
	for _, qp := range c.ctx.QPs() {
		qc := qp.Counters()
		send(ch, &qc, func(k counter) *prometheus.Desc { return k.qp }, dev, strconv.FormatUint(uint64(qp.QPN()), 10), strings.ToLower(qp.Type().String()))
	}
}

// send sends every counter of cs as the metric desc picks, with labels.
func send(ch chan<- prometheus.Metric, cs *verbs.Counters, desc func(counter) *prometheus.Desc, labels ...string) {
	v := reflect.ValueOf(cs).Elem()
	for _, k := range counters {
		ch <- prometheus.MustNewConstMetric(desc(k), prometheus.CounterValue, float64(v.Field(k.index).Uint()), labels...)
	}
}
