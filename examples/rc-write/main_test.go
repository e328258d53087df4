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
// reruns the test in one process, whose device registry stays).
func options() *exdev.Options {
	return &exdev.Options{Add: func(name string) (*verbs.Device, error) {
		return verbs.AddDevice(fmt.Sprintf("%s-%d", name, seq.Add(1)), testdev.Addr())
	}}
}

// TestRCWrite runs the program on a soft device of its own: run checks
// the data itself (the WRITE's bytes and immediate, the READ's bytes, the
// atomic's values, the error statuses) and fails otherwise; the test checks
// that the output tells each lesson.
func TestRCWrite(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, options()); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"2. connected through rdmacm", "both RTS",
		"server inbox     LOCAL_WRITE|REMOTE_WRITE",
		"server readonly  REMOTE_READ ",
		"server counter   LOCAL_WRITE|REMOTE_ATOMIC",
		"client src       (none)",
		"client dst       LOCAL_WRITE ",
		"REMOTE_WRITE without LOCAL_WRITE is refused: ",
		"client received: inbox 0x",
		fmt.Sprintf("server completion RECV_RDMA_WITH_IMM, %d bytes, imm 0x%08x; inbox holds %q", len(message), uint32(imm), message),
		fmt.Sprintf("6. client RDMA READ of server readonly (REMOTE_READ): SUCCESS, %q", secret),
		"old value 40, now 42",
		"client RDMA WRITE into server readonly (no REMOTE_WRITE): status REM_ACCESS_ERR (remote access error)",
		"client QP is now ERR",
		"status WR_FLUSH_ERR (Work Request Flushed Error)",
		"server: asynchronous event IBV_EVENT_QP_ACCESS_ERR",
		"server QP is now ERR",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", s)
	}
}

// TestRCWriteNoDevice names a device that does not exist: a clear error,
// no hang.
func TestRCWriteNoDevice(t *testing.T) {
	o := options()
	o.Device = "no-such-device"
	var out bytes.Buffer
	if err := run(&out, o); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("run -d no-such-device: %v, want a not-found error", err)
	}
}
