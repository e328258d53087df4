package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

var seq atomic.Int32

// options are the tests' exdev options: a soft device on an address no
// other test process takes, under a name unique in the process (-count=N
// reruns the tests in one process, whose device registry stays).
func options() *exdev.Options {
	return &exdev.Options{Add: func(name string) (*verbs.Device, error) {
		return verbs.AddDevice(fmt.Sprintf("%s-%d", name, seq.Add(1)), testdev.Addr())
	}}
}

// TestAtomics runs the program with a few client counts on a soft device
// of its own. run itself fails when the counter, the old values fetched,
// the protected value or the lock word are wrong; the test checks that the
// output reports the right totals.
func TestAtomics(t *testing.T) {
	for _, tc := range []struct{ clients, n, locked int }{
		{1, 50, 10},
		{4, 300, 40},
		{7, 100, 20},
	} {
		t.Run(fmt.Sprintf("%dclients", tc.clients), func(t *testing.T) {
			var out bytes.Buffer
			if err := run(&out, options(), tc.clients, tc.n, tc.locked); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			s := out.String()
			total, value := tc.clients*tc.n, tc.clients*tc.locked
			for _, want := range []string{
				"atomic_cap ATOMIC_HCA",
				"LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC",
				fmt.Sprintf("%d clients connected, each asking initiator depth 16; the server accepts with responder resources 16", tc.clients),
				"REMOTE_ATOMIC, max_dest_rd_atomic 16; client QP: max_rd_atomic 16",
				fmt.Sprintf("counter = %d (want %d)", total, total),
				fmt.Sprintf("the old values fetched are 0..%d, each exactly once", total-1),
				fmt.Sprintf("value = %d (want %d), lock word 0", value, value),
			} {
				if !strings.Contains(s, want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", s)
			}
		})
	}
}

// TestAtomicsBadFlags refuses counts it cannot run, before touching a
// device.
func TestAtomicsBadFlags(t *testing.T) {
	for _, c := range [][3]int{{0, 1, 1}, {65, 1, 1}, {1, -1, 1}, {1, 1, -1}} {
		if err := run(&bytes.Buffer{}, options(), c[0], c[1], c[2]); err == nil {
			t.Errorf("run(-clients %d -n %d -locked %d) succeeded", c[0], c[1], c[2])
		}
	}
}
