package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/rdma-go/rdma-go/internal/testdev"
)

// TestUsageAndErrors: -h prints the script's usage (recorded from
// ibstatus 44.0) with status 255, an unknown device its fatal error, and a
// device:port that port's block.
func TestUsageAndErrors(t *testing.T) {
	want, err := os.ReadFile("testdata/usage.golden")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if rc := run([]string{"ibstatus", "-h"}, &out); rc != 255 || out.String() != string(want) {
		t.Fatalf("ibstatus -h: rc %d, output:\n%s", rc, out.String())
	}
	out.Reset()
	if rc := run([]string{"ibstatus", "nosuchdev"}, &out); rc != 255 ||
		out.String() != "Fatal error:  device 'nosuchdev': sys files not found (/sys/class/infiniband/nosuchdev/ports)\n" {
		t.Fatalf("ibstatus nosuchdev: rc %d, output %q", rc, out.String())
	}
	dev := testdev.Device(t, "ibstatus").Device().Name()
	out.Reset()
	if rc := run([]string{"ibstatus", dev + ":1"}, &out); rc != 0 ||
		!strings.HasPrefix(out.String(), "Infiniband device '"+dev+"' port 1 status:\n\tdefault gid:\t fe80:") ||
		!strings.Contains(out.String(), "\tstate:\t\t 4: ACTIVE\n") {
		t.Fatalf("ibstatus %s:1: rc %d, output:\n%s", dev, rc, out.String())
	}
}
