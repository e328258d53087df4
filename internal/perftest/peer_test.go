package perftest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli/clitest"
)

// TestPeerExitEndsRun kills one side of a running latency test (its
// context ends, which closes its side channel and its QP, as a killed
// process's would): the other side must stop at once and say which side
// went away, not wait for the stall timeout.
func TestPeerExitEndsRun(t *testing.T) {
	for _, c := range []struct {
		tt     Test
		killed string // the side that goes away
	}{
		{Test{Send, LAT}, "client"},
		{Test{Send, LAT}, "server"},
		{Test{Write, LAT}, "client"},
		{Test{Write, BW}, "server"},
	} {
		t.Run(c.tt.Name()+" "+c.killed, func(t *testing.T) {
			d1, d2 := twoDevices(t)
			srvCtx, srvCancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer srvCancel()
			cliCtx, cliCancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cliCancel()
			args := []string{"-D", "30", "-s", "8"}
			ready := make(chan string, 1)
			var so, se, co, ce clitest.Buffer
			codes := make(chan [2]int, 2)
			go func() {
				code := Run(srvCtx, c.tt, c.tt.Name(), append([]string{"-d", d1, "-p", "0"}, args...), &so, &se,
					Options{Ready: func(a string) { ready <- a }})
				select {
				case ready <- "":
				default:
				}
				codes <- [2]int{0, code}
			}()
			var addr string
			select {
			case addr = <-ready:
			case <-time.After(30 * time.Second):
				t.Fatal("server did not listen within 30 s")
			}
			if addr == "" {
				t.Fatalf("server failed: %s%s", so.String(), se.String())
			}
			_, port, _ := net.SplitHostPort(addr)
			go func() {
				code := Run(cliCtx, c.tt, c.tt.Name(), append([]string{"-d", d2, "-p", port}, append(args, "127.0.0.1")...), &co, &ce, Options{})
				codes <- [2]int{1, code}
			}()
			// Kill a side once both print the result header: the data
			// loop runs.
			header := "#bytes"
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(so.String(), header) || !strings.Contains(co.String(), header) {
				if time.Now().After(deadline) {
					t.Fatalf("the test did not start within 30 s:\n%s%s\n%s%s", so.String(), se.String(), co.String(), ce.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // well inside the 30 s run
			killedAt := time.Now()
			otherErr := &ce
			if c.killed == "client" {
				cliCancel()
				otherErr = &se
			} else {
				srvCancel()
			}
			var got [2]bool
			for range 2 {
				select {
				case r := <-codes:
					got[r[0]] = true
					if (r[0] == 0) == (c.killed == "client") && r[1] == 0 {
						t.Errorf("the surviving side exited 0")
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("a side still runs 20 s after the %s went away (done %v):\n%s", c.killed, got, otherErr.String())
				}
			}
			if took := time.Since(killedAt); took > 10*time.Second {
				t.Errorf("the surviving side took %v to notice", took)
			}
			msg := otherErr.String()
			// The side channel's close, or the QP's retries running out
			// first (7 timeouts of 67 ms), both name the side that went.
			if !strings.Contains(msg, "The "+c.killed+" exited during the test") && !strings.Contains(msg, "the peer closed the connection") &&
				!strings.Contains(msg, "The "+c.killed+" stopped answering") {
				t.Errorf("the surviving side does not say the %s went away:\n%s\n--- stdout\n%s", c.killed, msg, map[bool]*clitest.Buffer{true: &so, false: &co}[c.killed == "client"].String())
			}
		})
	}
}
