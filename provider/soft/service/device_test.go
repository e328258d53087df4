//go:build linux

package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// runs numbers the test's runs (-count), whose devices need new names.
var runs atomic.Int32

// exchange connects with rdma_cm over 127.0.0.1 and sends one message
// each way over the new RC connection.
func exchange(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rdmacm.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *rdmacm.Conn, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			t.Error("Accept:", err)
		}
		accepted <- c
	}()
	cli, err := rdmacm.Dial(ctx, l.Addr().String(), nil)
	if err != nil {
		t.Fatal("Dial:", err)
	}
	defer cli.Close()
	srv := <-accepted
	if srv == nil {
		t.FailNow()
	}
	defer srv.Close()
	if got, want := srv.QP().QPN()>>16, cli.QP().QPN()>>16; got == 0 || want == 0 {
		t.Errorf("QPNs %#x and %#x are not in a slot of the service", srv.QP().QPN(), cli.QP().QPN())
	}
	send(t, cli, srv, "ping")
	send(t, srv, cli, "pong")
}

// send sends msg from a to b and checks that it arrives.
func send(t *testing.T, a, b *rdmacm.Conn, msg string) {
	t.Helper()
	rbuf, sbuf := make([]byte, 64), []byte(msg)
	rmr, err := b.PD().RegMR(rbuf, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer rmr.Dereg()
	smr, err := a.PD().RegMR(sbuf, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer smr.Dereg()
	if err := b.QP().PostRecv(verbs.RecvWR{ID: 1, SGL: []verbs.SGE{rmr.SGE(0, len(rbuf))}}); err != nil {
		t.Fatal(err)
	}
	if err := a.QP().PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{smr.SGE(0, len(sbuf))}}); err != nil {
		t.Fatal(err)
	}
	for _, cq := range []*verbs.CQ{a.SendCQ(), b.RecvCQ()} {
		wc := poll(t, cq)
		if wc.Status != verbs.WCSuccess {
			t.Fatalf("completion %v", wc.Status)
		}
	}
	if string(rbuf[:len(msg)]) != msg {
		t.Fatalf("received %q, want %q", rbuf[:len(msg)], msg)
	}
}

func poll(t *testing.T, cq *verbs.CQ) verbs.WC {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	wc := make([]verbs.WC, 1)
	for time.Now().Before(deadline) {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no completion within 30 s")
	return verbs.WC{}
}

// nextEvent waits for ctx's next asynchronous event.
func nextEvent(t *testing.T, c *verbs.Context) verbs.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev, err := c.GetAsyncEvent(ctx)
	if err != nil {
		t.Fatal("GetAsyncEvent:", err)
	}
	c.AckAsyncEvent(ev)
	return ev
}

// TestDeviceThroughService runs soft devices through the host service with
// verbs and rdma_cm: two devices on one address share its node GUID; a
// connection works; when the service dies the port goes down (PORT_ERR),
// when it is back the port comes up (PORT_ACTIVE) and new connections
// work.
func TestDeviceThroughService(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	srv, err := startUnmanaged(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("RDMA_GO_SERVICE", path)
	t.Setenv("RDMA_GO_PORT", fmt.Sprint(freePort(t)))
	run := runs.Add(1)
	var devs [2]*verbs.Context
	for i := range devs {
		d, err := verbs.AddDevice(fmt.Sprintf("svc%d-%d", run, i), lo)
		if err != nil {
			t.Fatal(err)
		}
		if devs[i], err = d.Open(); err != nil {
			t.Fatal(err)
		}
		defer devs[i].Close()
	}
	a0, _ := devs[0].QueryDevice()
	a1, _ := devs[1].QueryDevice()
	if a0.NodeGUID != a1.NodeGUID || devs[0].Device().GUID() != a0.NodeGUID {
		t.Errorf("GUIDs %#x, %#x, device %#x: want one for the address", a0.NodeGUID, a1.NodeGUID, devs[0].Device().GUID())
	}
	exchange(t)

	srv.Close()
	if ev := nextEvent(t, devs[0]); ev.Type != verbs.EventPortErr {
		t.Fatalf("event %v after the service died, want PORT_ERR", ev.Type)
	}
	if pa, _ := devs[0].QueryPort(1); pa.State != verbs.PortDown {
		t.Errorf("port state %v while the service is gone", pa.State)
	}
	startServer(t, path)
	if ev := nextEvent(t, devs[0]); ev.Type != verbs.EventPortActive {
		t.Fatalf("event %v after the service came back, want PORT_ACTIVE", ev.Type)
	}
	exchange(t)
}
