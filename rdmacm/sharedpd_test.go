package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// TestListenSharedPD gives a Listener a PD of the program's own context of
// the device: every accepted connection's QP is in it, so one MR serves
// them all, as a server registering its memory once needs. Its
// MinRNRTimer reaches the accepted QPs.
func TestListenSharedPD(t *testing.T) {
	srv := testdev.Device(t, "spd-s")
	pd, err := srv.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	buf := make([]byte, 64)
	mr, err := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	ln, err := Listen(netip.AddrPortFrom(srv.Device().Addr(), 0).String(), &Options{PD: pd, MinRNRTimer: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli := testdev.Device(t, "spd-c")
	const n = 2
	acc := make(chan *Conn, n)
	go func() {
		for range n {
			c, err := ln.Accept(ctx)
			if err != nil {
				t.Error(err)
				close(acc)
				return
			}
			acc <- c
		}
	}()
	for i := range n {
		c, err := Dial(ctx, ln.Addr().String(), &Options{Source: cli.Device().Addr()})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := <-acc
		if !ok {
			t.Fatal("accept failed")
		}
		if s.PD() != pd || s.QP() == nil {
			t.Fatalf("accepted connection's PD %p, want the listener's %p", s.PD(), pd)
		}
		if a, _, err := s.QP().Query(); err != nil || a.MinRNRTimer != 12 {
			t.Fatalf("accepted QP's min RNR timer %d (%v), want Options.MinRNRTimer 12", a.MinRNRTimer, err)
		}
		// The client WRITEs into the shared MR through connection i.
		src := []byte{byte('a' + i)}
		smr, err := c.PD().RegMR(src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.QP().PostSend(verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{smr.SGE(0, 1)}, RemoteAddr: mr.Addr() + uint64(i), RKey: mr.RKey()}); err != nil {
			t.Fatal(err)
		}
		if err := c.SendCQ().Wait(ctx); err != nil {
			t.Fatal(err)
		}
		var wc [1]verbs.WC
		if k, _ := c.SendCQ().Poll(wc[:]); k != 1 || wc[0].Status != verbs.WCSuccess {
			t.Fatalf("WRITE through connection %d: %v", i, wc[0].Status)
		}
		if buf[i] != src[0] {
			t.Fatalf("shared MR byte %d = %q, want %q", i, buf[i], src[0])
		}
		// Close with an MR left in the connection's own PD: an error,
		// and the PD stays until the MR goes.
		if err := c.Close(); !errors.Is(err, verbs.ErrBusy) {
			t.Errorf("Close with an MR in the connection's PD: %v, want ErrBusy", err)
		}
		smr.Dereg()
		if err := c.PD().Dealloc(); err != nil {
			t.Errorf("Dealloc after the MR went: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("server side Close: %v", err)
		}
	}
}
