package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rdma-go/rdma-go/internal/version"
)

func TestRunSmallJSON(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"-iters", "64", "--json"}, &o, &e); code != 0 {
		t.Fatalf("status %d: %s", code, e.String())
	}
	var r Report
	if err := json.Unmarshal(o.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, o.String())
	}
	if len(r.Figures) != 3 || r.Env.GoVersion == "" || r.Env.RdmaGo == "" {
		t.Fatalf("%+v", r)
	}
	for _, f := range r.Figures {
		if f.RDMA <= 0 || f.TCP <= 0 || f.Ratio <= 0 || f.RDMAOps < 64 || f.TCPOps < 64 {
			t.Errorf("figure %+v", f)
		}
	}
}

func TestRunTable(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"-iters", "32"}, &o, &e); code != 0 {
		t.Fatalf("status %d: %s", code, e.String())
	}
	for _, w := range []string{"WRITE 64 KiB bandwidth", "SEND 8 B ping-pong latency", "WRITE 8 B message rate", "RDMA/TCP"} {
		if !strings.Contains(o.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, o.String())
		}
	}
	if code := run([]string{"extra"}, &o, &e); code != 2 {
		t.Errorf("operand accepted: %d", code)
	}
}

func TestVersion(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"-version"}, &o, &e); code != 0 {
		t.Fatalf("status %d: %s", code, e.String())
	}
	if got, want := o.String(), version.Line()+"\n"; got != want {
		t.Errorf("-version printed %q, want %q", got, want)
	}
}
