package rdmaprom_test

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/rdmaprom"
	"github.com/rdma-go/rdma-go/verbs"
)

// gather scrapes reg and returns the metrics by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string][]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]*dto.Metric)
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()
	}
	return out
}

// label returns a metric's label value.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestCollector moves messages over an RC connection and checks that a
// scrape shows the port's and the QP's counters as verbs reads them, and
// that a destroyed QP's series go away.
func TestCollector(t *testing.T) {
	srv := testdev.Device(t, "prom-s")
	ln, err := rdmacm.Listen(netip.AddrPortFrom(srv.Device().Addr(), 0).String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	accepted := make(chan *rdmacm.Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	cli := testdev.Device(t, "prom-c") // a device for the client's route
	conn, err := rdmacm.Dial(ctx, ln.Addr().String(), &rdmacm.Options{Source: cli.Device().Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer sc.Close()

	// Ten SENDs from the client.
	buf := make([]byte, 64)
	mr, err := conn.PD().RegMR(buf, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	rbuf := make([]byte, 64)
	rmr, err := sc.PD().RegMR(rbuf, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer rmr.Dereg()
	const n = 10
	for i := range n {
		if err := sc.QP().PostRecv(verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{rmr.SGE(0, 64)}}); err != nil {
			t.Fatal(err)
		}
		if err := conn.QP().PostSend(verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{mr.SGE(0, 64)}}); err != nil {
			t.Fatal(err)
		}
		for _, cq := range []*verbs.CQ{conn.SendCQ(), sc.RecvCQ()} {
			if err := cq.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			var wc [1]verbs.WC
			if k, err := cq.Poll(wc[:]); err != nil || k != 1 || wc[0].Status != verbs.WCSuccess {
				t.Fatalf("completion %d: %d %v %v", i, k, err, wc[0].Status)
			}
		}
	}

	cctx := conn.Context()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rdmaprom.NewCollector(cctx))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		// rxe's rcvd_not_for_us reads to the linter as a unit
		// (microseconds); the name stays rxe's.
		if !strings.Contains(p.Metric, "rcvd_not_for_us") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	ms := gather(t, reg)
	want, err := cctx.QueryPortCounters(1)
	if err != nil {
		t.Fatal(err)
	}
	sent := ms["rdma_port_sent_pkts_total"]
	if len(sent) != 1 || label(sent[0], "device") != cctx.Device().Name() || label(sent[0], "port") != "1" ||
		sent[0].GetCounter().GetValue() < n || uint64(sent[0].GetCounter().GetValue()) > want.Sent {
		t.Fatalf("rdma_port_sent_pkts_total = %v; verbs says %d sent (read after the scrape)", sent, want.Sent)
	}
	qpn := strconv.FormatUint(uint64(conn.QP().QPN()), 10)
	var qpSent *dto.Metric
	for _, m := range ms["rdma_qp_rdma_sends_total"] {
		if label(m, "qpn") == qpn {
			qpSent = m
		}
	}
	if qpSent == nil || label(qpSent, "type") != "rc" || qpSent.GetCounter().GetValue() != float64(conn.QP().Counters().RDMASends) || qpSent.GetCounter().GetValue() < n {
		t.Fatalf("rdma_qp_rdma_sends_total for QPN %s: %v (QP counters: %d sends)", qpn, ms["rdma_qp_rdma_sends_total"], conn.QP().Counters().RDMASends)
	}

	// Every field of verbs.Counters with an rxe name has its metrics.
	for _, name := range []string{"rcvd_pkts", "retransmit_timeouts", "rcvd_icrc_err", "rcvd_rnr_err"} {
		if len(ms["rdma_port_"+name+"_total"]) != 1 {
			t.Errorf("no rdma_port_%s_total", name)
		}
	}

	// A destroyed QP's series go; WithoutQPs exports none.
	conn.Close()
	for _, m := range gather(t, reg)["rdma_qp_rdma_sends_total"] {
		if label(m, "qpn") == qpn {
			t.Errorf("QP %s still exported after Close", qpn)
		}
	}
	reg2 := prometheus.NewPedanticRegistry()
	reg2.MustRegister(rdmaprom.NewCollector(sc.Context(), rdmaprom.WithoutQPs()))
	for name := range gather(t, reg2) {
		if strings.HasPrefix(name, "rdma_qp_") {
			t.Fatalf("WithoutQPs exported %s", name)
		}
	}
}

// TestCollectorClosed scrapes a closed context: nothing, and no error.
func TestCollectorClosed(t *testing.T) {
	c, err := testdev.Open("prom-x")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rdmaprom.NewCollector(c))
	if n := len(gather(t, reg)); n == 0 {
		t.Fatal("an open context exports nothing")
	}
	c.Close()
	if ms := gather(t, reg); len(ms) != 0 {
		t.Fatalf("a closed context exports %d metrics", len(ms))
	}
}

// Example registers the collector for a device in one line and serves it
// with promhttp as usual.
func Example() {
	ctx, err := testdev.Open("prom-e")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ctx.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(rdmaprom.NewCollector(ctx))
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mfs, _ := reg.Gather()
	fmt.Println(mfs[0].GetName(), mfs[0].GetType())
	// Output: rdma_port_ack_deferred_total COUNTER
}
